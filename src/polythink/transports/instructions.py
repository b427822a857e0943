"""Where per-call instructions go, so that what was already sent never changes.

Per-call instructions are the text a call adds that the next call replaces: the caller's
``system_suffix`` (a plan, memory, the date) and what polythink adds itself (a
structured-output instruction). Providers cache a prompt's prefix, and the newest Claude
models bind each thinking block to everything before it (``../shared/wire/CONTINUITY.md``
§1-2): an instruction written into the system prompt, at the start, changes the start of
every call, so the cache misses the whole conversation on every turn and replayed thinking
fails Anthropic's prefix check. Placed after the conversation instead, each request is, but
for its newest instructions, the unchanged prefix of the next.

The place is data: the model's :attr:`~polythink.reasoning.Capability.per_call_instructions`
where the provider serves the model natively, else the provider profile's
(:attr:`~polythink.providers.ProviderProfile.per_call_instructions`):

- ``system_message``: a system message after the conversation (OpenAI Chat and Responses);
  on Anthropic a mid-conversation system message after the last user turn, turn-scoped
  (``clear_at: "next_user_message"``) where the model takes it.
- ``user_turn``: a user message after the conversation, or more text at the end of the last
  user message when the conversation ends with one (Gemini, the compatible providers,
  Anthropic models without mid-conversation system messages).
- ``system``: the system prompt, edited every call (what polythink did before; Mistral, which
  refuses a user message after a tool result).

Anthropic keeps each call's instructions in place on later calls (the assistant turn carries
them: :attr:`~polythink.Message.instructions`), since its thinking blocks are bound to them;
the other wires send only the newest, which costs the fewest tokens (a kept copy would be
paid again, at the cache-read price, on every later call). The decision is pure and made
once per source; placing costs one list append (or one message copied) per call, whatever
the conversation's length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from polythink.providers import ProviderProfile
from polythink.reasoning.capabilities import get_capability

__all__ = [
    "SEPARATOR",
    "InstructionPlan",
    "Placement",
    "after_conversation",
    "instruction_plan",
    "per_call_text",
]

Placement = Literal["system_message", "user_turn", "system"]

SEPARATOR = "\n\n"
"""What joins two per-call instructions (the suffix, then polythink's), and an instruction
added to a user message's text."""


@dataclass(frozen=True, slots=True)
class InstructionPlan:
    """Where one source puts per-call instructions.

    Attributes:
        placement: see the module docstring.
        clear_at: the model takes a turn-scoped system message (``clear_at``, beta
            ``mid-conversation-system-clear-at-2026-08-21``); only with ``system_message``.
        source: what decided it (``"capability claude-opus-5-5"`` or ``"profile anthropic"``),
            for the documentation and the tests.
    """

    placement: Placement
    clear_at: bool = False
    source: str = ""


def instruction_plan(profile: ProviderProfile, model: str) -> InstructionPlan:
    """Where ``profile``'s source for ``model`` puts per-call instructions: the model's
    capability when it says and the provider serves the model natively (its ``provider`` is
    the profile's catalogue) or is a cloud serving it through its vendor's API (Claude on
    Bedrock's InvokeModel and Vertex's rawPredict: the mid-conversation system message
    pages list those platforms, CONTINUITY.md §2.2), else the profile's own."""
    capability = get_capability(model)
    if (
        capability is not None
        and capability.per_call_instructions is not None
        and (capability.provider in (None, profile.serves) or profile.cloud is not None)
    ):
        placement = cast(Placement, capability.per_call_instructions)
        return InstructionPlan(
            placement,
            clear_at=capability.clear_at and placement == "system_message",
            source=f"capability {capability.model}",
        )
    return InstructionPlan(profile.per_call_instructions, source=f"profile {profile.id}")


def per_call_text(*parts: str | None) -> str | None:
    """The call's instructions as one text: the non-empty ``parts`` joined by a blank line
    (``None`` when there are none)."""
    given = [part for part in parts if part]
    if not given:
        return None
    return given[0] if len(given) == 1 else SEPARATOR.join(given)


def _with_text(content: Any, text: str, text_type: str) -> Any:
    """``content`` (a string or a list of parts) with ``text`` after it."""
    if isinstance(content, list):
        return [*content, {"type": text_type, "text": text}]
    if isinstance(content, str) and content:
        return content + SEPARATOR + text
    return text


def after_conversation(
    entries: list[Any], text: str, placement: Placement, *, text_type: str = "text"
) -> None:
    """Put ``text`` after the conversation ``entries`` (OpenAI Chat messages or Responses
    input items), in place: a system message at the end (``system_message``), or for
    ``user_turn`` more text at the end of the last entry when it is a user message (a copy:
    message bodies are memoised and shared between calls), else a user message at the end.
    A list content gets ``text`` as one more part of ``text_type``, a string after a blank
    line. ``system`` is the caller's to handle (it edits the system prompt).
    """
    if placement == "system_message":
        entries.append({"role": "system", "content": text})
        return
    last = entries[-1] if entries else None
    if (
        isinstance(last, Mapping)
        and last.get("role") == "user"
        and last.get("type", "message") == "message"
    ):
        entries[-1] = {**last, "content": _with_text(last.get("content"), text, text_type)}
        return
    entries.append({"role": "user", "content": text})
