"""One model's capability: what it accepts for reasoning, as a checked value.

:class:`Capability` is the value the registry (:mod:`polythink.reasoning.capabilities`), the
family rules (:mod:`polythink.reasoning.families`), the capability store and the catalogue
importers all hand out; :func:`capability_from_fields` builds one from plain data (a registry
row, a store file's JSON) and :func:`capability_fields` writes one back. No lookups and no
data files here: which model has which capability is the registry's and the families' to say.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polythink.errors import InvalidInputError
from polythink.types import EFFORT_ORDER, Effort

__all__ = [
    "PER_CALL_INSTRUCTIONS",
    "Capability",
    "capability_fields",
    "capability_from_fields",
]

_THINKING_STYLES = frozenset({"manual", "adaptive", "budget", "level", "effort"})
_SAMPLING_RULES = ("any", "without_reasoning", "one_of", "never")
_CHAT_TOOLS = ("any", "without_reasoning", "never")
_RETENTIONS = ("in_memory", "24h")
_REASONING_MODES = ("standard", "pro")
_SERVICE_TIERS = ("flex", "standard", "priority")
_DATES = ("deprecated", "shutdown", "checked")
_BINDINGS = ("enforced", "new_accounts", "checked")

PER_CALL_INSTRUCTIONS = ("system_message", "user_turn", "system")
"""Where per-call instructions may go (:attr:`Capability.per_call_instructions`)."""


@dataclass(frozen=True, slots=True)
class Capability:
    """What one model accepts for reasoning.

    Attributes:
        model: the model id.
        supported_efforts: accepted tiers, cheapest first. ``none`` present means reasoning
            can be switched off; ``(none,)`` alone means the model does not reason; ``auto``
            means reasoning can be switched on but has no strength tiers (or is always on
            with no control).
        default_effort: what the model does when no reasoning field is sent (``none`` = no
            reasoning, ``auto`` = reasons at a strength of its own); ``None`` = not known.
        provider: the provider id whose native API documents the model.
        thinking: native request style where a provider has several (Anthropic ``manual`` or
            ``adaptive``; Gemini and Qwen ``budget``, Gemini 3 and later ``level``; Qwen
            ``effort``: ``enable_thinking`` with ``reasoning_effort``); ``None`` otherwise.
        budget_min, budget_max: reasoning budget range in tokens for budget styles.
        max_output_tokens: the model's output ceiling in tokens, where known.
        evidence: where the facts come from and when (documented, measured or inferred).
        aliases: other names that look this entry up.
        thinking_display: Anthropic: the model's default ``thinking.display`` (``summarized``
            or ``omitted``) where documented; ``None`` = summarized, as the SDK states. Where
            it is ``omitted``, polythink asks for ``summarized`` so reasoning text comes back.
        sampling: which sampling parameters (``temperature``, ``top_p``, ``top_k``) the
            provider accepts with non-default values: ``any``; ``without_reasoning`` (only
            while the model does not reason on the call: OpenAI reasoning models);
            ``one_of`` (``temperature`` or ``top_p``, not both: Claude 4.1 and 4.5
            generation models); or ``never`` (Claude 4.7 and later, every 5.x model).
        context_window: the model's context window in tokens (prompt and output together),
            where documented; failover uses it after a context-window error.
        stream_only_reasoning: the provider answers reasoning calls for this model only when
            streamed (DashScope thinking-only models); ``complete()`` then streams under the
            hood and assembles the answer.
        deprecated: ISO date (``YYYY-MM-DD``) the provider announced the model's retirement.
        shutdown: ISO date from which the provider no longer serves the model (it may still
            answer through an alias or a silent re-route, as Gemini does).
        replacement: the model the provider names in its place, where it names one.
        checked: ISO date the entry's facts were last compared with their sources.
        chat_tools: whether Chat Completions takes function tools for this model: ``any``;
            ``without_reasoning`` (only at ``reasoning_effort: none``: GPT-6 Sol and Luna);
            ``never`` (the Responses API only: GPT-6 Astra, GPT-6.1 Sol). An ``openai`` source
            sends such a call to the Responses API (see :mod:`polythink.transports.route`).
        forced_tool_choice: whether the model takes a forced ``tool_choice`` (Anthropic ``any``
            / ``tool``); ``False`` on Claude Fable/Mythos 5.1 and later, Opus 5.5, Sonnet 5.5.
        signed_tool_calls: Gemini: every model turn's first function call must carry a
            ``thoughtSignature`` (Gemini 3 and later); the transport gives a call another
            provider made the documented placeholder.
        prompt_cache_retention: the ``prompt_cache_retention`` values OpenAI accepts for the
            model (``("24h",)`` on gpt-5.5 and later); empty = not known, sent as asked.
        prompt_cache_options: OpenAI takes ``prompt_cache_options`` (gpt-5.6 and later).
        reasoning_modes: the Responses ``reasoning.mode`` values the model takes
            (``standard``, ``pro``: GPT-5.6 and later); empty = none.
        per_call_instructions: where the model's native API gets per-call instructions
            (``system_suffix``, a structured-output instruction) so that nothing already sent
            changes: ``system_message`` (a mid-conversation system message after the last
            user turn: Anthropic models that take one, MCSM-CUR), ``user_turn`` (a user
            message after it), or ``system`` (the system prompt, edited every call: the
            prefix changes, so the prompt cache misses and, on a model that binds thinking
            to its prefix, replayed thinking fails). ``None``: the provider profile's
            (:attr:`~polythink.providers.ProviderProfile.per_call_instructions`).
        clear_at: the model takes a turn-scoped mid-conversation system message
            (``clear_at: "next_user_message"``, beta
            ``mid-conversation-system-clear-at-2026-08-21``): once cleared, a kept copy costs
            no input tokens (PT-SEP, CONTINUITY.md §2.4).
        thinking_binding: Anthropic preserved thinking: the model binds each thinking block
            to the conversation before it and checks it when it comes back (CONTINUITY.md
            §1.1-1.3): ``enforced`` (a failed check is a 400 on every account: Fable and
            Mythos 5.2), ``new_accounts`` (a 400 on accounts created from 2026-08-31, the
            block reaches the model on older ones: Fable 5.1, Opus 5.5), ``checked`` (the
            check runs; what a failure does by default is not documented: Sonnet and Haiku
            5.5); ``None``: no prefix check. Such a model takes
            ``thinking.block_binding`` and reports ``input_transformations`` under the beta
            ``thinking-binding-controls-2026-08-01``.
        service_tiers: the service tiers the provider serves the model at (``flex``,
            ``standard``, ``priority``) where known; empty = every tier the provider offers
            (its :class:`~polythink.providers.TierWire`). A provider's refusal of a tier for a
            model is learned into it, per endpoint.

    Raises:
        ValueError: at construction, for an empty or duplicated ``supported_efforts``, an
            unknown tier, thinking style, thinking display, sampling rule, tools rule,
            retention, reasoning mode or service tier, a date that is not ``YYYY-MM-DD``, or
            a budget range with ``min > max``.
    """

    model: str
    supported_efforts: tuple[Effort, ...]
    default_effort: Effort | None = None
    provider: str | None = None
    thinking: str | None = None
    budget_min: int | None = None
    budget_max: int | None = None
    max_output_tokens: int | None = None
    evidence: str = ""
    aliases: tuple[str, ...] = field(default=())
    thinking_display: str | None = None
    sampling: str = "any"
    context_window: int | None = None
    stream_only_reasoning: bool = False
    deprecated: str | None = None
    shutdown: str | None = None
    replacement: str | None = None
    checked: str | None = None
    chat_tools: str = "any"
    forced_tool_choice: bool = True
    signed_tool_calls: bool = False
    prompt_cache_retention: tuple[str, ...] = ()
    prompt_cache_options: bool = False
    reasoning_modes: tuple[str, ...] = ()
    per_call_instructions: str | None = None
    clear_at: bool = False
    thinking_binding: str | None = None
    service_tiers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.supported_efforts, str):
            raise InvalidInputError(
                f"capability for {self.model!r}: supported_efforts must be a list of tiers "
                f"such as ('low', 'high'), not the string {self.supported_efforts!r}"
            )
        efforts = tuple(Effort.parse(e) for e in self.supported_efforts)
        if not efforts or any(e is None for e in efforts):
            raise InvalidInputError(
                f"capability for {self.model!r}: supported_efforts must list at least one tier "
                f"of {', '.join(e.value for e in Effort)}; got {self.supported_efforts!r}"
            )
        if len(set(efforts)) != len(efforts):
            raise InvalidInputError(
                f"capability for {self.model!r}: duplicate tier in {self.supported_efforts!r}"
            )
        ordered = tuple(e for e in (*EFFORT_ORDER, Effort.AUTO) if e in efforts)
        object.__setattr__(self, "supported_efforts", ordered)
        object.__setattr__(self, "default_effort", Effort.parse(self.default_effort))
        if self.thinking is not None and self.thinking not in _THINKING_STYLES:
            raise InvalidInputError(
                f"capability for {self.model!r}: unknown thinking style {self.thinking!r}; "
                f"accepted: {', '.join(sorted(_THINKING_STYLES))}"
            )
        if (
            self.budget_min is not None
            and self.budget_max is not None
            and self.budget_min > self.budget_max
        ):
            raise InvalidInputError(
                f"capability for {self.model!r}: budget_min {self.budget_min} > "
                f"budget_max {self.budget_max}"
            )
        object.__setattr__(self, "aliases", tuple(self.aliases))
        self._check_choice("sampling", self.sampling, _SAMPLING_RULES)
        self._check_choice("chat_tools", self.chat_tools, _CHAT_TOOLS)
        if self.per_call_instructions is not None:
            self._check_choice(
                "per_call_instructions", self.per_call_instructions, PER_CALL_INSTRUCTIONS
            )
        if self.thinking_binding is not None:
            self._check_choice("thinking_binding", self.thinking_binding, _BINDINGS)
        for name, accepted in (
            ("prompt_cache_retention", _RETENTIONS),
            ("reasoning_modes", _REASONING_MODES),
            ("service_tiers", _SERVICE_TIERS),
        ):
            values = tuple(getattr(self, name))
            object.__setattr__(self, name, values)
            for value in values:
                self._check_choice(name, value, accepted)
        for name in _DATES:
            value = getattr(self, name)
            if value is None:
                continue
            try:
                datetime.date.fromisoformat(value)
            except (TypeError, ValueError):
                raise InvalidInputError(
                    f"capability for {self.model!r}: {name} must be a date as YYYY-MM-DD; "
                    f"got {value!r}"
                ) from None
        if self.context_window is not None and (
            type(self.context_window) is not int or self.context_window <= 0
        ):
            raise InvalidInputError(
                f"capability for {self.model!r}: context_window must be a positive number of "
                f"tokens; got {self.context_window!r}"
            )
        if self.thinking_display not in (None, "summarized", "omitted"):
            raise InvalidInputError(
                f"capability for {self.model!r}: unknown thinking_display "
                f"{self.thinking_display!r}; accepted: summarized, omitted"
            )

    def _check_choice(self, name: str, value: Any, accepted: Sequence[str]) -> None:
        if value not in accepted:
            raise InvalidInputError(
                f"capability for {self.model!r}: unknown {name} {value!r}; "
                f"accepted: {', '.join(accepted)}"
            )

    @property
    def reasons(self) -> bool:
        """Whether the model can reason at all (anything besides ``none`` is accepted)."""
        return any(e is not Effort.NONE for e in self.supported_efforts)

    @property
    def can_disable(self) -> bool:
        """Whether reasoning can be switched off (``none`` is accepted)."""
        return Effort.NONE in self.supported_efforts

    @property
    def strengths(self) -> tuple[Effort, ...]:
        """The accepted strength tiers (everything but ``none`` and ``auto``), cheapest first."""
        return tuple(e for e in self.supported_efforts if e not in (Effort.NONE, Effort.AUTO))

    @property
    def is_tiered(self) -> bool:
        """Whether the model has strength tiers (not only an on/off switch)."""
        return bool(self.strengths)

    @property
    def cheapest_effort(self) -> Effort | None:
        """The cheapest tier that reasons: the first strength, else ``auto``, else ``None``."""
        if self.strengths:
            return self.strengths[0]
        return Effort.AUTO if Effort.AUTO in self.supported_efforts else None

    @property
    def default_tier(self) -> Effort | None:
        """The tier the model reasons at on its own: the declared ``default_effort`` when it
        reasons, else the middle strength (the cheaper of two middles), else ``auto``;
        ``None`` for a model that does not reason."""
        if not self.reasons:
            return None
        if self.default_effort is not None and self.default_effort is not Effort.NONE:
            return self.default_effort
        strengths = self.strengths
        return strengths[(len(strengths) - 1) // 2] if strengths else Effort.AUTO

    @property
    def default_reasons(self) -> bool:
        """Whether sending no reasoning field makes the model reason (known defaults only)."""
        return self.default_effort is not None and self.default_effort is not Effort.NONE


_FIELDS: tuple[dataclasses.Field[Any], ...] = tuple(
    f for f in dataclasses.fields(Capability) if f.name != "model"
)
_FIELD_NAMES = frozenset(f.name for f in _FIELDS)


def capability_from_fields(
    model: str, fields: Mapping[str, Any], *, evidence: str | None = None
) -> Capability:
    """Build a :class:`Capability` from plain data (a registry row, a store file's JSON).

    Keys are the capability's field names (``name`` is ignored: ``model`` names the entry);
    lists become tuples; a ``None`` value keeps the field's default. ``evidence`` replaces
    the row's own.

    Raises:
        ValueError: for a key that is no field of :class:`Capability` (a typo in the data),
            or a value the capability refuses (see :class:`Capability`).
    """
    unknown = sorted(set(fields) - _FIELD_NAMES - {"name"})
    if unknown:
        raise InvalidInputError(
            f"unknown capability field(s) {', '.join(unknown)} for {model!r}; known: "
            f"{', '.join(sorted(_FIELD_NAMES))}"
        )
    values: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value
        for name, value in fields.items()
        if name in _FIELD_NAMES and value is not None
    }
    if evidence is not None:
        values["evidence"] = evidence
    return Capability(model=model, **values)


def capability_fields(capability: Capability) -> dict[str, Any]:
    """Return the fields of ``capability`` that differ from their defaults, as JSON values
    (tiers as strings, tuples as lists); ``model`` and ``evidence`` are left out.
    :func:`capability_from_fields` reads it back."""
    out: dict[str, Any] = {}
    for f in _FIELDS:
        if f.name == "evidence":
            continue
        value = getattr(capability, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if value == default and f.name != "supported_efforts":
            continue
        if isinstance(value, Effort):
            value = value.value
        elif isinstance(value, tuple):
            value = [v.value if isinstance(v, Effort) else v for v in value]
        out[f.name] = value
    return out
