"""What every simulated provider shares: model knowledge, reasoning depth, answer text.

The simulator behaves like the providers for reasoning because it consults the same
capability registry polythink resolves against: a registered model that does not accept a
tier is rejected the way its provider rejects it, and the reasoning it returns grows with
the tier. Everything here is deterministic, so tests can assert exact values.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from polythink.reasoning.capabilities import Capability, get_capability, normalise_model_name
from polythink.types import Effort

__all__ = [
    "PLAYED",
    "REASONING_TOKENS",
    "Answer",
    "accepts",
    "answer_for",
    "default_tier",
    "openai_error",
    "prompt_tokens",
    "quoted_list",
    "reasoning_text",
    "takes_parameter",
    "tool_arguments",
]

REASONING_TOKENS: dict[Effort, int] = {
    Effort.NONE: 0,
    Effort.MINIMAL: 12,
    Effort.LOW: 40,
    Effort.MEDIUM: 120,
    Effort.HIGH: 320,
    Effort.XHIGH: 640,
    Effort.MAX: 1024,
    Effort.AUTO: 120,
}
"""Reasoning tokens the simulator spends per tier (``auto`` reasons like ``medium``)."""

_WORDS_PER_TOKEN = 0.25


PLAYED: contextvars.ContextVar[Mapping[str, Capability | None] | None] = contextvars.ContextVar(
    "polythink_simulator_played", default=None
)
"""The models whose capabilities this request's simulator plays instead of the registry's
(``Settings.capabilities``; the server sets it for each request it dispatches)."""

_NO_PARAMETER = object()


def _played(model: str) -> Any:
    played = PLAYED.get()
    if not played:
        return get_capability(model)
    if model in played:
        found = played[model]
    else:
        name = normalise_model_name(model)
        found = next(
            (cap for key, cap in played.items() if normalise_model_name(key) == name),
            get_capability(model),
        )
    return _NO_PARAMETER if found is None else found


def takes_parameter(model: str) -> bool:
    """Whether the model accepts a reasoning parameter at all (``False`` only where the
    simulator was told it takes none)."""
    return _played(model) is not _NO_PARAMETER


def capability(model: str) -> Capability | None:
    """The capability the simulator plays for ``model`` (``Settings.capabilities``, else the
    registry entry), or ``None`` for an unregistered model or one that takes no parameter."""
    found = _played(model)
    return None if found is _NO_PARAMETER else found


def default_tier(model: str) -> Effort:
    """The tier a model reasons at when the request sends no reasoning field."""
    cap = capability(model)
    if cap is None:
        return Effort.MEDIUM
    if cap.default_effort is not None:
        return cap.default_effort
    return Effort.MEDIUM if cap.reasons and not cap.can_disable else Effort.NONE


def accepts(model: str, tier: Effort) -> bool:
    """Whether a registered model accepts ``tier`` (unregistered models accept anything)."""
    cap = capability(model)
    if cap is None:
        return True
    if tier is Effort.AUTO:
        return cap.reasons
    return tier in cap.supported_efforts


def supported_listing(model: str) -> list[str]:
    """The tiers a registered model accepts, as strings (empty when unregistered)."""
    cap = capability(model)
    return [e.value for e in cap.supported_efforts] if cap else []


def reasoning_text(tier: Effort, prompt: str) -> str:
    """Reasoning prose whose length grows with the tier (empty for ``none``)."""
    tokens = REASONING_TOKENS[tier]
    if not tokens:
        return ""
    topic = " ".join(prompt.split()[:6]) or "the request"
    steps = max(1, int(tokens * _WORDS_PER_TOKEN) // 6)
    return " ".join(f"Step {i}: weigh {topic}." for i in range(1, steps + 1))


@dataclass(frozen=True)
class Answer:
    """A deterministic answer: its words and token counts."""

    words: list[str]
    reasoning: str
    reasoning_tokens: int
    prompt_tokens: int

    @property
    def text(self) -> str:
        """The answer text."""
        return "".join(self.words)

    @property
    def completion_tokens(self) -> int:
        """Answer tokens plus reasoning tokens."""
        return len(self.words) + self.reasoning_tokens


def prompt_tokens(messages: Sequence[Any]) -> int:
    """A stable token estimate for a prompt: 1 per 4 characters, at least 1 per message."""
    total = 0
    for message in messages:
        text = json.dumps(message, separators=(",", ":"), sort_keys=True)
        total += max(1, len(text) // 4)
    return total


def answer_for(
    model: str, prompt: str, tier: Effort, words: int, messages: Sequence[Any]
) -> Answer:
    """Build the answer for a prompt: ``words`` words echoing it, and tier-sized reasoning."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:6]
    base = f"Simulated {model} answer {digest} to: {prompt}".split()
    pieces = [base[i % len(base)] for i in range(max(1, words))]
    spaced = [pieces[0], *(" " + p for p in pieces[1:])]
    return Answer(
        words=spaced,
        reasoning=reasoning_text(tier, prompt),
        reasoning_tokens=REASONING_TOKENS[tier],
        prompt_tokens=prompt_tokens(messages),
    )


def tool_arguments(schema: Mapping[str, Any] | None) -> str:
    """Compact JSON arguments satisfying a tool's required properties."""
    args: dict[str, Any] = {}
    if isinstance(schema, Mapping):
        props = schema.get("properties") or {}
        for name in schema.get("required") or list(props)[:1]:
            kind = (props.get(name) or {}).get("type", "string")
            args[name] = {"integer": 1, "number": 1, "boolean": True}.get(kind, "sim")
    return json.dumps(args, separators=(",", ":"))


def openai_error(message: str, *, param: str | None, code: str | None) -> dict[str, Any]:
    """An OpenAI-shaped ``invalid_request_error`` body (as recorded in
    vercel_openai_chat_reasoning_max_tokens_error.json)."""
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


def quoted_list(values: list[str]) -> str:
    """``'a', 'b', and 'c'``: how OpenAI lists supported values in its 400 messages."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]
