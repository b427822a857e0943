"""Resolve a requested reasoning tier into the tier a model accepts and the body fragment.

:func:`resolve` is a pure function. The order of its phases is the semantics:

1. unset -> inject nothing; the applied tier is unset.
2. the provider's reasoning wire is unknown -> :class:`ThinkingUnsupportedError`.
3. the model is neither registered nor of a known family (:mod:`.families`) -> inject by the
   provider's wire as asked, with a warning.
4. ``none`` asked of a model that cannot switch reasoning off -> by policy: ``nearest``
   (default) applies its cheapest tier, with a warning that says the model always reasons;
   ``error`` raises naming that tier; ``drop`` sends "on" without a strength (as ``auto``).
   ``none`` is never sent as a switch-off the model rejects.
5. a tier the model does not accept -> by policy: ``nearest`` (default) maps to the nearest
   accepted tier by position, never ``none``, ties to the cheaper side; ``error`` raises
   listing the accepted tiers; ``drop`` sends "on" without a strength (as ``auto``). ``auto``
   passes on every model that reasons; a model that only switches on and off maps any
   strength to ``auto`` (``nearest``/``drop``).

Claude Sonnet 5.5 documents ``thinking: {type: between_tools}`` (no thinking before the first
answer, thinking between tool calls; effort low to high only, A-SONNET55). It is not used for
``none``: it still reasons in a tool loop, where most reasoning of an agent is spent, and the
applied tier could then describe neither what was sent nor what was observed; ``none`` maps to
``low`` like on every model that always reasons. A caller who wants it sends it through
``extra_body``.

Where a wire cannot ask for reasoning without naming a strength (top-level
``reasoning_effort`` on a tiered model whose own default does not reason; Anthropic manual
budgets), ``auto`` is sent as the model's default strength, else its middle strength (the
cheaper of two middles), and that strength is the applied tier.

Budget wires (Anthropic manual thinking, Gemini 2.5 ``thinkingBudget``, Qwen
``thinking_budget``) turn a tier into tokens with :data:`TIER_BUDGET_TOKENS`, clamp to the
model's range, keep Anthropic's ``1024 <= budget_tokens < max_tokens``, and raise the output
ceiling by the budget so reasoning does not eat the answer, never past the model's maximum
output.

Anthropic (WIRE §3), by the model's ``thinking`` style:

- ``manual``: ``thinking: {type: enabled, budget_tokens}`` and ``max_tokens`` = the caller's
  value (else the profile's 4096) + the budget, capped at the model's maximum output; where
  that cap would cut into the caller's ``max_tokens`` the budget shrinks instead, never below
  1024. ``auto`` uses the model's default strength, else its middle one.
- ``adaptive``: ``thinking: {type: adaptive}`` plus ``output_config: {effort}`` for a
  strength (``auto`` sends adaptive alone), with ``display: summarized`` where the model omits
  thinking text by default. ``output_config.effort`` is never sent alone: on a model whose
  thinking is off by default it tunes an answer without thinking (recorded:
  llmanthropic_effort_no_thinking_stream, 2026-02-17), and where thinking is on by default
  the thinking object is needed anyway to ask for the text.
- ``none``: ``thinking`` omitted where the model's default is off (Opus 4.7 rejects an
  explicit ``disabled``), ``{type: disabled}`` where it is on.

Gemini, by the model's ``thinking`` style (from the registry or the model's family, never
from a default that fits one generation): ``budget`` (2.5) takes ``thinkingBudget`` only,
``level`` (3.x, 4) takes ``thinkingLevel`` only; the API answers 400 to a request with both,
Gemini 2.5 answers 400 "Thinking level is not supported for this model" and Gemini 4 refuses
``thinkingBudget``. ``none`` is ``thinkingBudget: 0`` on budget models whose default thinks;
a level model has no switch-off, so nothing is sent (the reconciliation reports what the
model did).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from polythink.errors import InvalidInputError, ThinkingUnsupportedError
from polythink.providers import ProviderProfile, get_provider
from polythink.reasoning.capabilities import get_capability
from polythink.reasoning.capability import Capability
from polythink.reasoning.converse import ConverseDialect, converse_dialect
from polythink.reasoning.serving import serving
from polythink.types import EFFORT_ORDER, Effort, Resolution

__all__ = [
    "ANTHROPIC_EFFORTS",
    "ANTHROPIC_MIN_BUDGET",
    "POLICIES",
    "TIER_BUDGET_TOKENS",
    "EffortPolicy",
    "budget_for",
    "check_model_id",
    "effort_for_budget",
    "payload_ceiling",
    "resolve",
    "responses_call",
    "responses_route",
    "retarget",
    "settle_tier",
]

EffortPolicy = Literal["nearest", "error", "drop"]
POLICIES: tuple[str, ...] = ("nearest", "error", "drop")

TIER_BUDGET_TOKENS: dict[Effort, int] = {
    Effort.MINIMAL: 1024,
    Effort.LOW: 2048,
    Effort.MEDIUM: 8192,
    Effort.HIGH: 16384,
    Effort.XHIGH: 24576,
    Effort.MAX: 32768,
}
"""Reasoning budget in tokens per tier for budget wires, before clamping to a model's range.

``minimal`` is Anthropic's floor (1024); ``medium`` and ``xhigh`` match Google's own mapping
for Gemini 2.5 through its OpenAI-compatible endpoint (8,192 and 24,576, GEM-DOC-openai
2026-09-02); ``max`` is Gemini 2.5 Pro's documented ceiling (32,768, GEM-DOC-thinking).
"""

ANTHROPIC_EFFORTS: tuple[Effort, ...] = (
    Effort.LOW,
    Effort.MEDIUM,
    Effort.HIGH,
    Effort.XHIGH,
    Effort.MAX,
)
"""Every value ``output_config.effort`` takes (``low|medium|high|xhigh|max``: ANT-SDK
``output_config_param.py`` 2026-08-07, CURRENT.md §1.1); a tier outside them is sent as the
nearest of them, ties to the cheaper."""


def effort_for_budget(tokens: int) -> Effort:
    """The tier whose :data:`TIER_BUDGET_TOKENS` budget is nearest to ``tokens`` (on a log
    scale, ties to the cheaper tier); ``none`` for 0 or less.

    How a reasoning budget a caller wrote (Anthropic ``thinking.budget_tokens``, OpenRouter
    ``reasoning.max_tokens``) reads in polythink's vocabulary.
    """
    if tokens <= 0:
        return Effort.NONE
    return min(
        TIER_BUDGET_TOKENS,
        key=lambda tier: (abs(math.log(TIER_BUDGET_TOKENS[tier] / tokens)), tier.rank or 0),
    )


ANTHROPIC_MIN_BUDGET = 1024
"""Anthropic's lower bound for ``thinking.budget_tokens`` (ANT-SDK ThinkingConfigEnabled)."""

_UNSET: Any = object()


def check_model_id(model: object) -> None:
    """Refuse a model id that is not a non-empty string (blank counts as empty).

    Raises:
        ValueError: naming what was given.
    """
    if not isinstance(model, str) or not model.strip():
        raise InvalidInputError(
            f"a model id must be a non-empty string such as 'gpt-5.5'; got {model!r}"
        )


def resolve(
    effort: Effort | str | bool | None,
    *,
    provider: str | ProviderProfile,
    model: str,
    policy: str = "nearest",
    max_tokens: int | None = None,
    capability: Capability | None = _UNSET,
    base_model: str | None = None,
    tools: bool = False,
) -> Resolution:
    """Resolve ``effort`` for ``model`` on the wire of the profile that serves it.

    A cloud provider serves some vendors' models over another wire, as the client sends them
    (:func:`polythink.reasoning.serving.serving`): ``provider="bedrock"`` with
    ``openai.gpt-oss-120b-1:0`` is resolved for Converse (``bedrock-converse``),
    ``provider="vertex"`` with ``claude-sonnet-4-5@20250929`` for ``rawPredict``
    (``vertex-anthropic``).

    Args:
        effort: the requested tier (``Effort``, a string or alias, a bool, or ``None`` =
            unset).
        provider: provider id or profile; the ``reasoning_wire`` of the profile that serves
            the model decides the field names.
        model: the model id, looked up in the registry unless ``capability`` is given.
        policy: ``nearest`` | ``error`` | ``drop`` for tiers the model does not accept.
        max_tokens: the caller's output ceiling in tokens, if any; budget wires raise it.
        capability: use this capability instead of the registry (``None`` = unregistered).
        base_model: the model ``model`` runs when its id does not say (an Azure deployment's
            name, a Bedrock application inference profile), as ``Source.base_model``: the
            registry reads it instead of ``model``.
        tools: the call carries function tools: on a source that reaches the Responses API
            too (``openai``, ``azure``), a model that takes tools there only has the
            fragment spelt for that API, as the client sends it (:func:`responses_call`).

    Returns:
        a :class:`~polythink.types.Resolution` with the applied tier and the body fragment.

    Raises:
        ValueError: for an unknown effort string, policy or provider id, an empty model
            id, a ``max_tokens`` that is not a positive ``int``, or a ``capability`` that is
            not a :class:`~polythink.reasoning.capability.Capability`.
        ThinkingUnsupportedError: phases 2, 4 and 5 (under ``error``) above.
    """
    check_model_id(model)
    if base_model is not None:
        check_model_id(base_model)
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens <= 0):
        raise InvalidInputError(f"max_tokens must be a positive int (tokens); got {max_tokens!r}")
    if (
        capability is not None
        and capability is not _UNSET
        and not isinstance(capability, Capability)
    ):
        raise InvalidInputError(
            "capability must be a polythink.Capability (or None for an unregistered model); "
            f"got {type(capability).__name__} {capability!r}"
        )
    requested = Effort.parse(effort)
    if policy not in POLICIES:
        raise InvalidInputError(
            f"unknown effort_fallback {policy!r}; accepted: {', '.join(POLICIES)}"
        )
    if requested is None:
        return Resolution(None, None, {})
    served = serving(provider, model, base_model)
    profile, model = served.profile, served.model
    cap = get_capability(model, served.lookup_provider) if capability is _UNSET else capability
    found = _resolve(requested, profile, model, cap, policy, max_tokens)
    routed = responses_call(
        found, profile=profile, capability=cap, tools=tools, max_tokens=max_tokens
    )
    if routed is None:
        return found
    retargeted, note = routed
    assert retargeted is not None  # a resolution is spelt again, never dropped
    return dataclasses.replace(retargeted, warnings=(*retargeted.warnings, note))


def _resolve(
    requested: Effort,
    profile: ProviderProfile,
    model: str,
    cap: Capability | None,
    policy: str,
    max_tokens: int | None,
) -> Resolution:
    """Phases 2 to 5 for the profile that serves ``model`` (``cap``: what is known of it)."""
    wire = profile.reasoning_wire
    if wire is None:
        raise ThinkingUnsupportedError(
            f"provider {profile.id!r} has no known reasoning wire, so reasoning_effort="
            f"{requested.value!r} for model {model!r} cannot be expressed; leave "
            "reasoning_effort unset or set the provider's own field through extra_body",
            provider=profile.id,
            error_type="reasoning_unsupported",
        )
    if cap is None:
        payload, applied, budget = _builder(wire, model, None)(requested, None, profile, max_tokens)
        mapped = (
            f" (the {profile.id} wire has no {requested.value!r}: {applied.value!r} is its nearest)"
            if applied not in (requested, Effort.AUTO)
            else ""
        )
        warning = (
            f"model {model!r} is not in the capability registry and matches no model family; "
            f"sent {payload or '{}'} for reasoning_effort={requested.value!r}{mapped} by the "
            f"{profile.id} wire without checking the tier (register it with "
            "polythink.register_capability once known)"
        )
        return Resolution(requested, applied, payload, budget, (warning,))
    settled = settle_tier(requested, cap, policy=policy, model=model, provider=profile.id)
    payload, applied, budget = _builder(wire, model, cap)(settled, cap, profile, max_tokens)
    warnings: list[str] = []
    if settled is not requested and requested is Effort.NONE:
        warnings.append(
            f"model {model!r} cannot switch reasoning off (accepted: {_listing(cap)}), so "
            f"reasoning_effort='none' was not sent; applied {settled.value!r}, its "
            f"{'cheapest tier' if policy == 'nearest' else 'own strength'}, by "
            f"effort_fallback={policy!r} ('error' refuses instead)"
        )
    elif settled is not requested:
        warnings.append(
            f"model {model!r} does not accept reasoning_effort={requested.value!r} "
            f"(accepted: {_listing(cap)}); applied {settled.value!r} by "
            f"effort_fallback={policy!r}"
        )
    if budget is not None:
        warnings.extend(_budget_notes(applied, budget, payload, profile, cap, max_tokens))
    if applied is not settled:
        warnings.append(
            f"reasoning_effort={settled.value!r} on model {model!r} is sent as "
            f"{applied.value!r}: the {wire} wire cannot ask for reasoning without a strength "
            "and the model's default does not reason"
        )
    return Resolution(requested, applied, payload, budget, tuple(warnings))


def settle_tier(
    requested: Effort,
    cap: Capability,
    *,
    policy: str = "nearest",
    model: str | None = None,
    provider: str | None = None,
) -> Effort:
    """Phases 4 and 5: return the accepted tier for ``requested`` on ``cap`` under ``policy``.

    ``none`` is returned only when asked and accepted. ``none`` on a model that cannot
    switch reasoning off gives its cheapest tier (``nearest``) or ``auto`` (``drop``).

    Raises:
        ThinkingUnsupportedError: under ``error`` for an unaccepted tier (``none`` on a model
            that always reasons included), or whenever no tier that reasons exists (a model
            that does not reason asked to reason).
    """
    name = model or cap.model
    if requested in cap.supported_efforts:
        return requested
    if requested is Effort.NONE:
        cheapest = cap.cheapest_effort
        if policy == "error" or cheapest is None:
            raise ThinkingUnsupportedError(
                _cannot_disable(name, cap), provider=provider, error_type="reasoning_unsupported"
            )
        return Effort.AUTO if policy == "drop" else cheapest
    if not cap.reasons:
        raise ThinkingUnsupportedError(
            f"model {name!r} does not reason, so reasoning_effort={requested.value!r} cannot "
            "be satisfied; accepted: none (or leave reasoning_effort unset)",
            provider=provider,
            error_type="reasoning_unsupported",
        )
    if requested is Effort.AUTO:
        return Effort.AUTO
    if policy == "error":
        raise ThinkingUnsupportedError(
            _tier_rejected(name, requested, cap),
            provider=provider,
            error_type="reasoning_unsupported",
        )
    if policy == "drop" or not cap.is_tiered:
        return Effort.AUTO
    return _nearest(requested, cap.strengths)


def _nearest(requested: Effort, strengths: tuple[Effort, ...]) -> Effort:
    target = EFFORT_ORDER.index(requested)
    return min(
        strengths,
        key=lambda e: (abs(EFFORT_ORDER.index(e) - target), EFFORT_ORDER.index(e)),
    )


def budget_for(effort: Effort, cap: Capability | None, *, floor: int = 1) -> int:
    """Return the reasoning budget in tokens for a strength tier on ``cap``.

    Takes :data:`TIER_BUDGET_TOKENS`, clamps to ``[budget_min, budget_max]`` of the model
    (at least ``floor``), and keeps it below the model's maximum output.
    """
    budget = TIER_BUDGET_TOKENS[effort]
    low = max(floor, cap.budget_min or floor) if cap else floor
    budget = max(budget, low)
    if cap and cap.budget_max is not None:
        budget = min(budget, cap.budget_max)
    if cap and cap.max_output_tokens is not None:
        budget = min(budget, cap.max_output_tokens - 1)
    return max(budget, low)


def _ceiling(base: int, budget: int, cap: Capability | None) -> int:
    ceiling = base + budget
    if cap and cap.max_output_tokens is not None:
        ceiling = min(ceiling, cap.max_output_tokens)
    return ceiling


def _middle_strength(cap: Capability) -> Effort:
    strengths = cap.strengths
    return strengths[(len(strengths) - 1) // 2]


def _auto_as_strength(cap: Capability | None) -> Effort:
    """The strength used where a wire cannot say "on" without one."""
    if cap is None or not cap.is_tiered:
        return Effort.MEDIUM
    if cap.default_effort in cap.strengths:
        assert cap.default_effort is not None
        return cap.default_effort
    return _middle_strength(cap)


Built = tuple[dict[str, Any], Effort, int | None]


def _effort_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    if e is Effort.NONE:
        if cap is not None and not cap.reasons:
            return {}, e, None
        return {"reasoning_effort": "none"}, e, None
    if e is Effort.AUTO:
        # No "on" switch on this wire: the model's own default reasons, or a strength must
        # be named (gpt-5.1 defaults to none, so omitting the field would not reason).
        if cap is None or cap.default_reasons or not cap.is_tiered:
            return {}, e, None
        e = _auto_as_strength(cap)
    return {"reasoning_effort": e.value}, e, None


def _responses_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    # No "summary" here: OpenAI answers 400 (param reasoning.summary, unsupported_value) for
    # organisations that are not verified (continuedev/continue#9854, 2026-01), and the
    # reasoning-token count already lets polythink observe reasoning. Callers who want the
    # summary text send {"reasoning": {"summary": "auto"}} through extra_body. A model that
    # does not reason gets no "reasoning" at all: gpt-4o and gpt-4.1 reject it with 400.
    if e is Effort.NONE:
        if cap is not None and not cap.reasons:
            return {}, e, None
        return {"reasoning": {"effort": "none"}}, e, None
    if e is Effort.AUTO:
        if cap is None or cap.default_reasons or not cap.is_tiered:
            return {}, e, None
        e = _auto_as_strength(cap)
    return {"reasoning": {"effort": e.value}}, e, None


def _openrouter_wire(
    e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None
) -> Built:
    if e is Effort.NONE:
        return {"reasoning": {"enabled": False}}, e, None
    if e is Effort.AUTO:
        return {"reasoning": {"enabled": True}}, e, None
    return {"reasoning": {"effort": e.value, "enabled": True}}, e, None


def _thinking_type_wire(
    e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None
) -> Built:
    if e is Effort.NONE:
        return {"thinking": {"type": "disabled"}}, e, None
    if e is Effort.AUTO:
        return {"thinking": {"type": "enabled"}}, e, None
    return {"thinking": {"type": "enabled"}, "reasoning_effort": e.value}, e, None


def _qwen_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    if e is Effort.NONE:
        return {"enable_thinking": False}, e, None
    if e is Effort.AUTO:
        return {"enable_thinking": True}, e, None
    if cap is not None and cap.thinking == "effort":
        # qwen3.8: a strength is reasoning_effort, not a budget (DEVTO-QWEN38, BAILIAN-PATCH).
        return {"enable_thinking": True, "reasoning_effort": e.value}, e, None
    budget = budget_for(e, cap)
    payload: dict[str, Any] = {"enable_thinking": True, "thinking_budget": budget}
    if mt is not None:
        payload[p.max_tokens_field] = _ceiling(mt, budget, cap)
    return payload, e, budget


def _vllm_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    if e is Effort.NONE:
        return {"chat_template_kwargs": {"enable_thinking": False}}, e, None
    kwargs = {"chat_template_kwargs": {"enable_thinking": True}}
    if e is Effort.AUTO:
        return kwargs, e, None
    return {**kwargs, "reasoning_effort": e.value}, e, None


def _anthropic_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    style = cap.thinking if cap is not None else "adaptive"
    if e is Effort.NONE:
        # Where thinking is off by default, omitting it is the documented way to switch it
        # off (Opus 4.7 rejects an explicit "disabled" with 400; BEDROCK-adaptive).
        if cap is not None and not cap.default_reasons:
            return {}, e, None
        return {"thinking": {"type": "disabled"}}, e, None
    if style == "manual":
        if e is Effort.AUTO:
            e = _auto_as_strength(cap)
        base = mt if mt is not None else (p.default_max_tokens or 4096)
        budget = budget_for(e, cap, floor=ANTHROPIC_MIN_BUDGET)
        if cap is not None and cap.max_output_tokens is not None:
            # Near the model's ceiling the budget and the answer share it: the answer keeps
            # the caller's room up to half the ceiling, the budget at least the other half,
            # so neither a large max_tokens nor a large tier squeezes the other to nothing.
            room = min(base, cap.max_output_tokens // 2)
            budget = max(ANTHROPIC_MIN_BUDGET, min(budget, cap.max_output_tokens - room))
        ceiling = _ceiling(base, budget, cap)
        return (
            {"thinking": {"type": "enabled", "budget_tokens": budget}, "max_tokens": ceiling},
            e,
            budget,
        )
    thinking: dict[str, Any] = {"type": "adaptive"}
    if e not in ANTHROPIC_EFFORTS and e is not Effort.AUTO:
        # Never a value the wire has no word for (an unregistered model asked for
        # "minimal"): the nearest one it has.
        e = _nearest(e, ANTHROPIC_EFFORTS)
    if cap is not None and cap.thinking_display == "omitted":
        # These models return thinking blocks with empty text unless asked (WIRE §3.1).
        thinking["display"] = "summarized"
    if e is Effort.AUTO:
        return {"thinking": thinking}, e, None
    return {"thinking": thinking, "output_config": {"effort": e.value}}, e, None


_GEMINI_LEVELS: dict[Effort, Effort] = {
    Effort.MINIMAL: Effort.MINIMAL,
    Effort.LOW: Effort.LOW,
    Effort.MEDIUM: Effort.MEDIUM,
    Effort.HIGH: Effort.HIGH,
    Effort.XHIGH: Effort.HIGH,
    Effort.MAX: Effort.HIGH,
}
"""``thinkingLevel`` is ``MINIMAL | LOW | MEDIUM | HIGH | XHIGH`` (``google-genai`` 3.6.1
``ThinkingLevel``, read 2026-12-04). ``XHIGH`` is sent only to a model whose capability lists
``xhigh`` (Gemini 4 Neon and Hydrogen: LOW MEDIUM HIGH XHIGH, Google's developer guides, read
2026-12-04); elsewhere stronger tiers are sent as ``high``, as OpenRouter maps them for Gemini 3
(OR-DOC 2026-10-05)."""


def _gemini_wire(e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None) -> Built:
    # Budget models (2.5) take thinkingBudget, level models (3.x) thinkingLevel, never both:
    # the API answers 400 to a request with both (GEM-DOC-thinking via gemini_ex docs).
    style = cap.thinking if cap is not None else "level"
    config: dict[str, Any]
    budget: int | None = None
    if e is Effort.NONE:
        if style != "budget" or (cap is not None and not cap.default_reasons):
            return {}, e, None
        config = {"thinkingBudget": 0}
    elif e is Effort.AUTO:
        # -1 (dynamic) only where the model would not think on its own: 2.5 Pro and Flash
        # are dynamic by default, Flash-Lite does not think unless asked (GEM-DOC-thinking).
        dynamic = style == "budget" and (cap is None or not cap.default_reasons)
        config = {"thinkingBudget": -1} if dynamic else {}
        config["includeThoughts"] = True
    elif style == "budget":
        budget = budget_for(e, cap)
        config = {"thinkingBudget": budget, "includeThoughts": True}
    else:
        takes_xhigh = cap is not None and Effort.XHIGH in cap.supported_efforts
        e = Effort.XHIGH if takes_xhigh and e in (Effort.XHIGH, Effort.MAX) else _GEMINI_LEVELS[e]
        config = {"thinkingLevel": e.value, "includeThoughts": True}
    generation: dict[str, Any] = {"thinkingConfig": config}
    if budget is not None and mt is not None:
        generation["maxOutputTokens"] = _ceiling(mt, budget, cap)
    return {"generationConfig": generation}, e, budget


def _converse_wire(
    dialect: ConverseDialect, e: Effort, cap: Capability | None, p: ProviderProfile, mt: int | None
) -> Built:
    """Bedrock Converse: the vendor's own field in ``additionalModelRequestFields``
    (:mod:`polythink.reasoning.converse`); an output ceiling a thinking budget raises is
    ``inferenceConfig.maxTokens``."""
    budget: int | None = None
    fields: dict[str, Any]
    if dialect == "anthropic":
        fields, e, budget = _anthropic_wire(e, cap, p, mt)
    elif dialect == "reasoning":
        fields, e, budget = _responses_wire(e, cap, p, mt)
    elif dialect == "reasoningConfig":
        if e is Effort.NONE and cap is not None and not cap.reasons:
            # Nova 1 has no reasoningConfig to switch off (Nova 2 Lite and Sonic only).
            fields = {}
        elif e is Effort.NONE:
            fields = {"reasoningConfig": {"type": "disabled"}}
        elif e is Effort.AUTO:
            fields = {"reasoningConfig": {"type": "enabled"}}
        else:
            fields = {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": e.value}}
    else:
        fields, e, budget = _effort_wire(e, cap, p, mt)
    fields = dict(fields)
    ceiling = fields.pop("max_tokens", None)
    payload: dict[str, Any] = {"additionalModelRequestFields": fields} if fields else {}
    if ceiling is not None:
        payload["inferenceConfig"] = {"maxTokens": ceiling}
    return payload, e, budget


def _builder(
    wire: str, model: str, cap: Capability | None
) -> Callable[[Effort, Capability | None, ProviderProfile, int | None], Built]:
    """The fragment builder of ``wire``; on Converse, the one of ``model``'s vendor."""
    if wire == "converse":
        return functools.partial(
            _converse_wire, converse_dialect(model, cap.provider if cap is not None else None)
        )
    return _BUILDERS[wire]


_BUILDERS: dict[str, Callable[[Effort, Capability | None, ProviderProfile, int | None], Built]] = {
    "effort": _effort_wire,
    "responses": _responses_wire,
    "openrouter": _openrouter_wire,
    "thinking_type": _thinking_type_wire,
    "qwen": _qwen_wire,
    "vllm": _vllm_wire,
    "anthropic": _anthropic_wire,
    "gemini": _gemini_wire,
}


def retarget(
    resolution: Resolution,
    *,
    provider: str | ProviderProfile,
    capability: Capability | None,
    max_tokens: int | None = None,
) -> Resolution:
    """The same applied tier as ``resolution``, as ``provider``'s wire spells it.

    For a call one wire resolved and another sends (an ``openai`` source's call that goes to
    the Responses API: ``reasoning_effort`` becomes ``reasoning.effort``). The tier was settled
    already, so nothing is mapped again and the warnings are kept.
    """
    applied = resolution.applied_effort
    if applied is None:
        return resolution
    profile = get_provider(provider)
    wire = profile.reasoning_wire
    if wire is None:
        return dataclasses.replace(resolution, payload={})
    model = capability.model if capability is not None else ""
    payload, sent, budget = _builder(wire, model, capability)(
        applied, capability, profile, max_tokens
    )
    return Resolution(resolution.requested_effort, sent, payload, budget, resolution.warnings)


def responses_route(
    capability: Capability | None,
    *,
    tools: bool,
    applied: Effort | None,
    reasoning_mode: str | None = None,
) -> str | None:
    """Why a Chat Completions call must go to the Responses API instead; ``None`` when it need
    not.

    - ``reasoning_mode`` set: ``reasoning.mode`` exists on the Responses API only (O-SDK).
    - function ``tools`` on a model with ``chat_tools`` ``never`` (GPT-6 Astra, GPT-6.1 Sol:
      tools on the Responses API only), or ``without_reasoning`` (GPT-6 Sol and Luna: on Chat
      only at ``reasoning_effort: none``) while the call reasons: the applied tier is not
      ``none``, or, unset, the model reasons by default (O-DEPLOY, CURRENT.md §2.1).
    """
    if reasoning_mode is not None:
        return f"reasoning_mode={reasoning_mode!r} is a Responses API field"
    if not tools or capability is None or capability.chat_tools == "any":
        return None
    if capability.chat_tools == "never":
        return f"model {capability.model!r} takes function tools on the Responses API only"
    reasons = applied is not Effort.NONE if applied is not None else capability.default_reasons
    if reasons:
        return (
            f"model {capability.model!r} takes function tools on Chat Completions only at "
            "reasoning_effort='none'"
        )
    return None


def responses_call(
    resolution: Resolution | None,
    *,
    profile: ProviderProfile,
    capability: Capability | None,
    tools: bool,
    reasoning_mode: str | None = None,
    max_tokens: int | None = None,
) -> tuple[Resolution | None, str] | None:
    """Whether a call of a source on ``profile`` goes to the Responses API instead of Chat
    Completions, and with what: ``None`` when it stays (``profile`` reaches no Responses API,
    or :func:`responses_route` finds no reason), else ``resolution`` spelt for the Responses
    wire (:func:`retarget`; ``None`` stays ``None``) and the note the response carries.

    The one decision behind :class:`polythink.transports.route.ResponsesRoute` (what is
    sent), :func:`resolve` with ``tools`` and :meth:`polythink.Client.plan` (what is said
    would be sent).
    """
    if profile.responses_profile is None:
        return None
    applied = resolution.applied_effort if resolution is not None else None
    why = responses_route(capability, tools=tools, applied=applied, reasoning_mode=reasoning_mode)
    if why is None:
        return None
    if resolution is not None:
        resolution = retarget(
            resolution,
            provider=profile.responses_profile,
            capability=capability,
            max_tokens=max_tokens,
        )
    note = (
        f"sent to the Responses API: {why}; the {profile.id} source reaches it with the same "
        "key and host"
    )
    return resolution, note


def payload_ceiling(payload: Mapping[str, Any], profile: ProviderProfile) -> int | None:
    """The output ceiling in tokens a resolution's ``payload`` sends (budget wires raise it:
    ``max_tokens``, the profile's ceiling field, Gemini's ``generationConfig.maxOutputTokens``
    or Converse's ``inferenceConfig.maxTokens``), or ``None`` when it sends none."""
    generation = payload.get("generationConfig")
    inference = payload.get("inferenceConfig")
    if isinstance(generation, Mapping):
        value = generation.get("maxOutputTokens")
    elif isinstance(inference, Mapping):
        value = inference.get("maxTokens")
    else:
        value = payload.get(profile.max_tokens_field, payload.get("max_tokens"))
    return value if isinstance(value, int) else None


def _budget_notes(
    tier: Effort,
    budget: int,
    payload: Mapping[str, Any],
    profile: ProviderProfile,
    cap: Capability,
    max_tokens: int | None,
) -> list[str]:
    """Say where the model's maximum output made the budget or the answer room smaller."""
    notes = []
    floor = ANTHROPIC_MIN_BUDGET if profile.reasoning_wire == "anthropic" else 1
    full = budget_for(tier, cap, floor=floor)
    ceiling = payload_ceiling(payload, profile)
    if budget < full:
        notes.append(
            f"the {tier.value!r} thinking budget for model {cap.model!r} is {budget} tokens, "
            f"not {full}: the model's maximum output ({cap.max_output_tokens}) also holds the "
            "answer"
        )
    if max_tokens is not None and ceiling is not None and ceiling - budget < max_tokens:
        notes.append(
            f"max_tokens={max_tokens} cannot all go to the answer on model {cap.model!r}: its "
            f"maximum output ({ceiling}) less the {budget}-token thinking budget leaves "
            f"{ceiling - budget}"
        )
    return notes


def _listing(cap: Capability) -> str:
    return ", ".join(e.value for e in cap.supported_efforts)


def _cannot_disable(model: str, cap: Capability) -> str:
    cheapest = cap.cheapest_effort
    tier = f"its cheapest tier is {cheapest.value!r}" if cheapest else "it accepts no tier"
    return (
        f"model {model!r} cannot switch reasoning off, so reasoning_effort='none' cannot be "
        f"satisfied (effort_fallback='error'; 'nearest' applies the cheapest tier); {tier}: "
        f"ask for reasoning_effort={cheapest.value if cheapest else 'auto'!r}, or use a model "
        f"that can switch off (accepted: {_listing(cap)}; evidence: {cap.evidence})"
    )


def _tier_rejected(model: str, requested: Effort, cap: Capability) -> str:
    if cap.is_tiered:
        accepted = f"accepted tiers: {_listing(cap)}"
    else:
        accepted = f"it only switches reasoning on and off, with no strength tiers: {_listing(cap)}"
    return (
        f"model {model!r} does not accept reasoning_effort={requested.value!r}; {accepted} "
        "(effort_fallback='error'; 'nearest' maps to the nearest accepted tier)"
    )
