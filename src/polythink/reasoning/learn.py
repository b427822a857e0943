"""Learn what a model accepts from the provider's own rejections, and what a selector offers.

Pure functions, no I/O:

- :func:`parse_reasoning_rejection` reads an HTTP 400 / 422 error body and says whether it
  rejects the *reasoning* part of the request, and how (a tier, the whole parameter, switching
  reasoning off, the thinking style, the budget range). Only the shapes listed there count;
  anything else returns ``None`` and stays an ordinary rejection.
- :func:`learned_capability` turns such a rejection into the capability the model evidently
  has, starting from what was known before.
- :func:`reasoning_levels` and :func:`default_level` give the tiers a selector should offer for
  a model and the one it should preselect.

Recognised shapes (texts from the providers' docs and public bug reports, dates as noted):

- OpenAI Chat / Responses, 400 ``code: unsupported_value`` with ``param`` ``reasoning_effort``
  or ``reasoning.effort``: ``Unsupported value: 'reasoning_effort' does not support 'none' with
  this model. Supported values are: 'minimal', 'low', 'medium', and 'high'.`` (WIRE §1.2) and
  ``Unsupported value: 'minimal' is not supported with the 'gpt-5.1' model. Supported values
  are: ...`` (CASES C01, BerriAI/litellm#40473).
- OpenAI, 400 ``code: unsupported_parameter``: ``Unsupported parameter: 'reasoning_effort' is
  not supported with this model.``; older gateways ``Unrecognized request argument supplied:
  reasoning_effort`` (WIRE §1.2): the model takes no reasoning parameter.
- xAI, a bare string error without ``param``: ``{"code": "Client specified an invalid
  argument", "error": "Model grok-4-latest does not support parameter reasoningEffort."}``
  (BerriAI/litellm#16265, 2025-11; hermes-agent#23088, 2026-05) -> no reasoning parameter;
  ``invalid-argument: Invalid reasoning effort.`` (YishenTu/claudian#1003, 2026-07) -> the tier
  sent is refused.
- Groq: ```reasoning_effort` must be one of `none` or `default``` (earendil-works/pi#1745,
  2026-03); ``default`` reads as ``auto``.
- 422 validation bodies: a FastAPI / pydantic ``{"detail": [{"loc": ["body",
  "reasoning_effort"], "msg": "Input should be 'low', 'medium' or 'high'", ...}]}`` and the
  flattened ``"body.reasoning_effort: Input should be 'low', 'medium' or 'high'"`` message
  (router-for-me/CLIProxyAPI#1143, 2026-01).
- Anthropic (``invalid_request_error``): ``'claude-3-5-haiku-20241022' does not support
  thinking.`` (anthropics/claude-code#11388, 2025-11) -> no reasoning parameter; ``This model
  does not support the effort parameter.`` (claude-code#30010, 2026-03) -> on/off only;
  ``This model does not support effort level 'max'`` and ``output_config.effort 'xhigh' is not
  supported ...`` (claude-code#81084, 2026-07) -> that tier is refused; ``"thinking.type.enabled"
  is not supported for this model. Use "thinking.type.adaptive" ...`` (WIRE §3.2) -> adaptive
  style; ``"thinking.type.disabled" is not supported ...`` -> cannot switch off.
- Gemini (``INVALID_ARGUMENT``): ``Budget 0 is invalid. This model only works in thinking
  mode.`` and ``The model does not support setting thinking_budget to 0`` -> cannot switch
  off; ``thinking_budget is out of range; supported values are integers from 1 to 24576``
  (su-kaka/gcli2api#108, 2025-11) and ``... Please choose a value between 128 and 32768.`` ->
  the budget range; ``The thinking budget (52428) is invalid.`` (RooCodeInc/Roo-Code#4399) ->
  the tier sent is refused; ``Thinking level MINIMAL is not supported for this model.``
  (vellum-ai/vellum-assistant#32687, 2026-05) -> that level is refused; ``Thinking level is not
  supported for this model.`` -> budget style.
- Qwen / DashScope: ``The value of the enable_thinking parameter is restricted to True``
  (WIRE §6.2) -> cannot switch off; ``parameter.enable_thinking must be set to false for
  non-streaming calls`` (WIRE §6.2, qwen3-32b, Feb 2026) -> the model reasons only in streamed
  calls (``stream_only``).
- Ollama's compatibility layer: ``invalid reasoning value: "x" (must be "minimal", "low", ...)``
  (WIRE §6.8).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from polythink.errors import InvalidInputError
from polythink.reasoning.capability import Capability
from polythink.types import EFFORT_ORDER, Effort
from polythink.wire_json import loads_json

__all__ = [
    "GENERIC_LEVELS",
    "ReasoningRejection",
    "RejectionKind",
    "default_level",
    "learned_capability",
    "parse_reasoning_rejection",
    "reasoning_levels",
]

RejectionKind = Literal[
    "tier", "no_parameter", "no_strength", "cannot_disable", "style", "budget", "stream_only"
]

GENERIC_LEVELS: tuple[Effort, ...] = (Effort.NONE, Effort.LOW, Effort.MEDIUM, Effort.HIGH)
"""What a selector offers for a model nothing is known about: the four tiers every reasoning
wire can express, not the whole vocabulary (a tier a model does not have is refused or silently
lowered)."""


@dataclass(frozen=True, slots=True)
class ReasoningRejection:
    """A provider's refusal of the reasoning part of a request, as parsed from its error body.

    Attributes:
        kind: ``tier`` (a tier is refused), ``no_parameter`` (the model takes no reasoning
            parameter at all), ``no_strength`` (it reasons but takes no strength tier),
            ``cannot_disable`` (reasoning cannot be switched off), ``style`` (another thinking
            style is required, see ``style``), ``budget`` (the budget range is
            ``budget_min``-``budget_max`` tokens), ``stream_only`` (the provider answers a
            reasoning call to this model only when it is streamed).
        accepted: the tiers the provider listed as accepted, cheapest first; ``None`` when the
            message lists none.
        rejected: the tier the provider named as refused; ``None`` = the one that was sent.
        style: for ``style``: the Anthropic / Gemini thinking style to use instead.
        budget_min, budget_max: for ``budget``: the accepted range in tokens.
        gist: the provider's message (at most 200 characters), for the evidence.
    """

    kind: RejectionKind
    accepted: tuple[Effort, ...] | None = None
    rejected: Effort | None = None
    style: str | None = None
    budget_min: int | None = None
    budget_max: int | None = None
    gist: str = ""


_REASONING_PARAMS = frozenset({"reasoning_effort", "reasoning.effort", "reasoning"})
_WORD_ALIASES = {"default": Effort.AUTO}
_QUOTED = re.compile(r"['\"`]([A-Za-z_]+)['\"`]")
_BARE = re.compile(r"[A-Za-z_]+")
_FILLER = frozenset({"and", "or", "are", "is", "values", "levels", "one", "of", "be"})

# (pattern, kind); the first match of a message wins. Lists of accepted tiers are read from
# the text after the match ("Supported values are: ...", "must be one of ...").
_PATTERNS: tuple[tuple[str, RejectionKind], ...] = (
    (r"unsupported parameter: '(?:reasoning_effort|reasoning\.effort|reasoning)'", "no_parameter"),
    (r"unrecognized request argument supplied: reasoning_effort", "no_parameter"),
    (r"does not support parameter reasoning_?effort", "no_parameter"),
    (r"does not support thinking\b", "no_parameter"),
    (r"does not support the effort parameter", "no_strength"),
    (r"thinking\.type\.disabled\"? is not supported", "cannot_disable"),
    (r"\"?thinking\.type\.(?:enabled|adaptive)\"? is not supported", "style"),
    (r"thinking level is not supported for this model", "style"),
    (r"budget 0 is invalid|only works in thinking mode", "cannot_disable"),
    (r"does not support setting thinking_budget to 0", "cannot_disable"),
    (r"enable_thinking parameter is restricted to true", "cannot_disable"),
    (r"enable_thinking must be set to false for non-streaming calls", "stream_only"),
    (r"thinking.budget.*?(?:integers from|value between) (\d+) (?:to|and) (\d+)", "budget"),
    (r"the thinking budget \(?-?\d+\)? is invalid", "tier"),
    (r"thinking level (\w+) is not supported", "tier"),
    (r"does not support effort level '(\w+)'", "tier"),
    (r"output_config\.effort:? '(\w+)' is not supported", "tier"),
    (r"'reasoning(?:_effort|\.effort)' does not support '(\w+)'", "tier"),
    (r"unsupported value: '(\w+)' is not supported with the", "tier"),
    (r"reasoning_effort`? must be one of", "tier"),
    (r"(?:reasoning(?:_effort|\.effort)|output_config\.effort)\W*:? input should be", "tier"),
    (r"invalid reasoning (?:value|effort)", "tier"),
    (r"level \"(\w+)\" not supported, valid levels:", "tier"),
)


@functools.cache
def _rules() -> tuple[tuple[re.Pattern[str], RejectionKind], ...]:
    """:data:`_PATTERNS` compiled, on the first rejection read (not at import)."""
    return tuple((re.compile(pattern, re.IGNORECASE), kind) for pattern, kind in _PATTERNS)


_LIST_MARKERS = re.compile(
    r"(supported values(?: are)?:|supported levels?:|valid levels:|must be one of|"
    r"input should be|\(must be)",
    re.IGNORECASE,
)


_LIST_END = re.compile(r";|\.\s|\[|\b(?:got|received|but|input was)\b", re.IGNORECASE)
"""Where a list of accepted values ends and the rest of the sentence begins: ``...'xhigh' or
'max'; got 'minimal'`` (Anthropic), pydantic's ``[type=literal_error, input_value=...]``; a
value named there is the one refused, not one accepted."""


def _tier_word(word: str) -> Effort | None:
    key = word.strip().lower()
    if key in _WORD_ALIASES:
        return _WORD_ALIASES[key]
    if key in _FILLER or key in ("on", "off", "true", "false"):
        return None
    try:
        return Effort.parse(key)
    except ValueError:
        return None


def _listed(text: str) -> tuple[Effort, ...] | None:
    """The tiers listed after a list marker, cheapest first; ``None`` when there is no list."""
    marker = _LIST_MARKERS.search(text)
    if marker is None:
        return None
    tail = _LIST_END.split(text[marker.end() :].split("\n", 1)[0], maxsplit=1)[0]
    words = _QUOTED.findall(tail) or _BARE.findall(tail)
    found = {e for e in (_tier_word(w) for w in words) if e is not None}
    if not found:
        return None
    return tuple(e for e in (*EFFORT_ORDER, Effort.AUTO) if e in found)


def _messages(body: Any, depth: int = 0) -> Iterator[tuple[str, str | None]]:
    """Yield (message, param) pairs from the error shapes providers use."""
    if depth > 3:
        return
    if isinstance(body, str):
        text = body.strip()
        if text.startswith(("{", "[")):
            try:
                yield from _messages(loads_json(text), depth + 1)
                return
            except ValueError:
                pass
        yield text, None
        return
    if isinstance(body, list):
        for item in body[:8]:
            yield from _messages(item, depth + 1)
        return
    if not isinstance(body, Mapping):
        return
    detail = body.get("detail")
    if isinstance(detail, list):
        for item in detail[:8]:
            if isinstance(item, Mapping) and isinstance(item.get("msg"), str):
                loc = item.get("loc")
                path = ".".join(str(p) for p in loc) if isinstance(loc, list) else ""
                yield f"{path}: {item['msg']}", path.removeprefix("body.") or None
    elif isinstance(detail, str):
        yield from _messages(detail, depth + 1)
    error = body.get("error", body if "message" in body else None)
    if isinstance(error, str):
        yield from _messages(error, depth + 1)
    elif isinstance(error, Mapping):
        message = error.get("message")
        param = error.get("param")
        if isinstance(message, str):
            inner = list(_messages(message, depth + 1)) if message.lstrip()[:1] in "{[" else []
            if inner:
                yield from inner
            else:
                yield message, param if isinstance(param, str) else None


def parse_reasoning_rejection(status: int | None, body: Any) -> ReasoningRejection | None:
    """Return how a provider's error refuses the reasoning part of a request, or ``None``.

    Args:
        status: the HTTP status; only 400 and 422 can be reasoning rejections.
        body: the error body, parsed JSON (any provider shape) or the raw text.

    Returns:
        a :class:`ReasoningRejection` for the shapes listed in this module's docstring;
        ``None`` for anything else (including an ``unsupported_value`` on another parameter).
    """
    if status not in (400, 422):
        return None
    for message, param in _messages(body):
        for line in message.splitlines() or [message]:
            found = _match(line, param)
            if found is not None:
                return found
    return None


def _match(message: str, param: str | None) -> ReasoningRejection | None:
    gist = " ".join(message.split())[:200]
    for pattern, kind in _rules():
        hit = pattern.search(message)
        if hit is None:
            continue
        if kind == "budget":
            low, high = int(hit.group(1)), int(hit.group(2))
            return ReasoningRejection("budget", budget_min=low, budget_max=high, gist=gist)
        if kind == "style":
            lowered = message.lower()
            if "thinking level is not supported" in lowered:
                style = "budget"
            elif "thinking.type.enabled" in lowered:
                style = "adaptive"
            else:
                style = "manual"
            return ReasoningRejection("style", style=style, gist=gist)
        if kind != "tier":
            return ReasoningRejection(kind, gist=gist)
        rejected = _tier_word(hit.group(1)) if hit.groups() else None
        return ReasoningRejection(
            "tier", accepted=_listed(message[hit.start() :]), rejected=rejected, gist=gist
        )
    if param in _REASONING_PARAMS and "supported values are" in message.lower():
        return ReasoningRejection("tier", accepted=_listed(message), gist=gist)
    return None


_ALL_TIERS: tuple[Effort, ...] = EFFORT_ORDER
_AUTHORITATIVE_LISTS = frozenset({"effort", "responses", "openrouter", "thinking_type", "vllm"})
"""Wires where a listed set names every accepted value of the one reasoning field, ``none``
included; elsewhere (Anthropic, Gemini, Qwen) switching off is another field, so a list of
strengths says nothing about ``none``."""


def learned_capability(
    base: Capability | None,
    rejection: ReasoningRejection,
    *,
    model: str,
    provider: str,
    wire: str | None,
    sent: Effort | None,
    evidence: str,
) -> Capability | None:
    """Return the capability ``rejection`` shows the model has; ``None`` = no reasoning parameter.

    Args:
        base: what was known before (the capability the request was resolved with), or
            ``None`` for an unregistered model (then every tier counts as possible).
        rejection: the parsed rejection.
        model, provider: the model id and provider id of the source.
        wire: the provider's reasoning wire (decides whether a listed set covers ``none``).
        sent: the tier that went out (the applied tier of the rejected request).
        evidence: the evidence text of the new capability.

    Returns:
        a new :class:`Capability` (the base's other facts kept), or ``None`` when the model
        takes no reasoning parameter at all.

    Raises:
        ValueError: when nothing would remain accepted (the rejection contradicts itself).
    """
    known = base.supported_efforts if base is not None else _ALL_TIERS
    fields: dict[str, Any] = {"evidence": evidence}
    if rejection.kind == "no_parameter":
        return None
    if rejection.kind == "tier":
        if rejection.accepted is not None:
            efforts = list(rejection.accepted)
            if (
                wire not in _AUTHORITATIVE_LISTS
                and Effort.NONE not in efforts
                and Effort.NONE in known
            ):
                efforts.insert(0, Effort.NONE)
        else:
            refused = rejection.rejected or sent
            efforts = [e for e in known if e is not refused]
        fields["supported_efforts"] = tuple(efforts)
    elif rejection.kind == "no_strength":
        efforts = [Effort.NONE] if Effort.NONE in known else []
        fields["supported_efforts"] = (*efforts, Effort.AUTO)
    elif rejection.kind == "cannot_disable":
        fields["supported_efforts"] = tuple(e for e in known if e is not Effort.NONE)
    elif rejection.kind == "style":
        fields["thinking"] = rejection.style
    elif rejection.kind == "budget":
        fields["budget_min"] = rejection.budget_min
        fields["budget_max"] = rejection.budget_max
    elif rejection.kind == "stream_only":
        fields["stream_only_reasoning"] = True
    tiers_changed = "supported_efforts" in fields
    efforts_after = fields.setdefault("supported_efforts", known)
    if not efforts_after:
        raise InvalidInputError(f"a rejection of every tier of model {model!r}: {rejection.gist}")
    default = base.default_effort if base is not None else None
    if tiers_changed and default is not None and default not in efforts_after:
        # A default the model evidently does not accept is no longer known.
        fields["default_effort"] = None
    if base is None:
        return Capability(model=model, provider=provider, **fields)
    return dataclasses.replace(base, **fields)


def reasoning_levels(
    capability: Capability | None, *, takes_parameter: bool = True
) -> tuple[Effort, ...]:
    """Return the tiers a selector should offer for a model, cheapest first.

    - a model nothing is known about (``capability`` ``None``): :data:`GENERIC_LEVELS`;
    - a model with no reasoning control: nothing, so the selector is shown inert. That is
      a model no reasoning parameter reaches (``takes_parameter`` false), one that does not
      reason, and one that always reasons and has no strength tiers (its only tier is
      ``auto``: xAI's grok-4 takes no reasoning parameter and always reasons);
    - otherwise the model's own strength tiers, with ``none`` first only when it can switch
      reasoning off (``none auto`` for one that only switches on and off).
    """
    if not takes_parameter:
        return ()
    if capability is None:
        return GENERIC_LEVELS
    if not capability.reasons:
        return ()
    if not capability.strengths and not capability.can_disable:
        return ()
    tiers = capability.strengths or (Effort.AUTO,)
    return (Effort.NONE, *tiers) if capability.can_disable else tiers


def default_level(capability: Capability | None, *, takes_parameter: bool = True) -> Effort | None:
    """Return the tier a selector should preselect for a model; ``None`` when it offers none.

    The model's declared ``default_effort`` when the selector offers it, else the middle of
    its strength tiers (the cheaper of two middles); for an unknown model the middle of the
    generic tiers (``medium``). Never a constant shared by every model.
    """
    levels = reasoning_levels(capability, takes_parameter=takes_parameter)
    if not levels:
        return None
    declared = capability.default_effort if capability is not None else None
    if declared is not None and declared in levels:
        return declared
    strengths = [e for e in levels if e is not Effort.NONE]
    if not strengths:
        return levels[0]
    return strengths[(len(strengths) - 1) // 2]
