"""What of a message each wire carries, and what the caller hears about the rest.

Every transport follows one rule. What the caller wrote reaches the wire in the provider's own
shape. What a wire cannot carry and the answer would depend on is refused before sending
(:func:`refused`: a :class:`~polythink.errors.ContentUnsupportedError` naming the message, the
field and what the wire takes; failover moves on to a source whose wire carries it). What a
wire has no field for and the model reads nothing from (a message's ``name`` off Chat, a part's
cache marker where the provider caches on its own, an assistant turn with nothing in it) is
left out, and the response's warnings say what, of which messages, and why
(:class:`LeftOut`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polythink.errors import ContentUnsupportedError
from polythink.providers import ProviderProfile
from polythink.types import Message, PromptCache

__all__ = [
    "BLANK_PARTS",
    "EMPTY_TURN",
    "EMPTY_WHY",
    "LATER_SYSTEM",
    "REASONING",
    "REASONING_ITEMS",
    "REASONING_ITEMS_WHY",
    "LeftOut",
    "empty_turn",
    "extra_keys",
    "items_unsent",
    "later_system_why",
    "name_note",
    "part_keys",
    "reasoning_unsent",
    "refusal_text",
    "refuse_blank_turn",
    "refuse_chat_only",
    "refused",
    "ttl_notes",
]

_LISTED = 8
"""How many message indexes a note lists before it counts the rest."""


class LeftOut:
    """What a wire's body builder left out of the caller's messages, for the response's
    warnings: one note per kind of thing, listing the messages (their index in the call's
    ``messages``) it was left out of.

    ``wire`` names the wire in the notes (``anthropic``, ``gemini``, ``openai-responses``).
    ``position`` is the index of the message being converted, set by the builder as it goes
    (one attribute store a message: cheaper than passing the index down with every part).
    Adding costs a dict lookup; nothing is built for a call with nothing left out.
    """

    __slots__ = ("_found", "position", "wire")

    def __init__(self, wire: str) -> None:
        self.wire = wire
        self.position = 0
        self._found: dict[tuple[str, str], list[int]] = {}

    def add(self, what: str, why: str) -> None:
        """Record that ``what`` (``"the name"``) of the message at :attr:`position` was not
        sent, and ``why`` (the wire's reason)."""
        self._found.setdefault((what, why), []).append(self.position)

    def add_part_keys(self, keys: list[str], index: int, why: str) -> None:
        """Record ``keys`` of content part ``index`` of the message at :attr:`position` as
        not sent."""
        self.add(part_keys(keys, index), why)

    def extend(self, found: Mapping[tuple[str, str], list[int]]) -> None:
        """Record what a builder collected on its own: positions by ``(what, why)``, each
        list in message order (as :meth:`add` makes them)."""
        mine = self._found
        for key, positions in found.items():
            if positions:
                mine.setdefault(key, []).extend(positions)

    def notes(self) -> list[str]:
        """One warning per kind: ``not sent to anthropic: the name of messages 0, 2 (...)``."""
        out = []
        for (what, why), positions in self._found.items():
            listed = ", ".join(map(str, positions[:_LISTED]))
            if len(positions) > _LISTED:
                listed += f", ... ({len(positions)} in all)"
            which = f"message {listed}" if len(positions) == 1 else f"messages {listed}"
            out.append(f"not sent to {self.wire}: {what} of {which} ({why})")
        return out


def refused(
    profile: ProviderProfile,
    source_index: int | None,
    position: int,
    message: Message,
    field: str,
    why: str,
) -> ContentUnsupportedError:
    """The error for ``field`` of message ``position`` that this wire cannot carry; ``why``
    says what the wire takes instead."""
    return ContentUnsupportedError(
        f"{profile.id} cannot carry the {field} of message {position} ({message.role}): {why}",
        provider=profile.id,
        source_index=source_index,
        error_type="unsupported_content",
    )


def refuse_chat_only(
    message: Message, position: int, profile: ProviderProfile, source_index: int | None
) -> None:
    """Refuse an assistant's ``audio`` and legacy ``function_call`` on a wire other than
    Chat's, the only one that has them.

    ``audio`` names a previous audio answer OpenAI keeps server-side; no other wire can
    refer to it. A legacy ``function_call`` has no id, and Responses, Anthropic and Gemini
    pair a call with its result (Anthropic and Responses refuse a call left unanswered);
    polythink takes no ``function`` role message to answer it, so no faithful body exists.

    Raises:
        ContentUnsupportedError: naming the message and the field, and what to send instead.
    """
    if message.audio_id is not None:
        raise refused(
            profile,
            source_index,
            position,
            message,
            "audio",
            "only OpenAI Chat refers to a previous audio answer by its id; send the call to a "
            "Chat source, or the answer's transcript as the turn's content",
        )
    if message.function_call is not None:
        raise refused(
            profile,
            source_index,
            position,
            message,
            "function_call",
            "a legacy function_call has no id to pair it with a result, which this wire "
            "requires; send it as tool_calls=[{'id', 'type': 'function', 'function': "
            "{'name', 'arguments'}}] with its result as a tool message",
        )


BLANK_PARTS = "the blank text parts"
"""The note for text parts of a user turn a wire refuses as blank, sent without them."""


def refuse_blank_turn(
    message: Message, position: int, profile: ProviderProfile, source_index: int | None, why: str
) -> ContentUnsupportedError:
    """The error for a user turn that has no text ``profile``'s wire accepts and nothing else
    (``why`` says what the wire refuses). Leaving it out would change who speaks last, and
    sending it is the provider's 400: it is refused before sending, and failover moves on to
    a wire that takes empty content (OpenAI Chat and Responses do)."""
    return refused(
        profile,
        source_index,
        position,
        message,
        "content",
        f"{why}; send text with something in it, or leave the message out",
    )


def part_keys(keys: list[str], index: int) -> str:
    """What a note says was left out of a content part: ``cache_control of content part 1``."""
    return f"{', '.join(keys)} of content part {index}"


def extra_keys(part: Mapping[str, Any], carried: frozenset[str]) -> list[str]:
    """The keys of a ``text``, ``image_url`` or ``file`` part outside ``carried`` (those the
    wire has a field for), sorted. Such a part was checked for ``type`` and its required key
    when its message was built, so one of two keys has nothing else (one length check)."""
    if len(part) <= 2:
        return []
    return sorted(str(key) for key in part.keys() - carried)


def refusal_text(part: Any) -> Any:
    """A Chat ``refusal`` part as a ``text`` part (other parts unchanged), for wires whose
    assistant turns have text and no refusal field: the refusal is what the model said."""
    if isinstance(part, Mapping) and part.get("type") == "refusal":
        return {"type": "text", "text": part.get("refusal", "")}
    return part


def empty_turn(message: Message) -> bool:
    """Whether an assistant ``message`` has nothing any wire would send: no text (content
    ``None``, ``""``, ``[]`` or only empty text parts), no tool call, no refusal, audio or
    function call. Its reasoning is the wire's to judge (reasoning items go back only to
    the wire that made them)."""
    content = message.content
    if content:
        if content.__class__ is str:
            return False
        for part in content:
            if not (isinstance(part, Mapping) and part.get("type") == "text") or part.get("text"):
                return False
    return not (
        message.tool_calls
        or message.refusal
        or message.audio_id is not None
        or message.function_call is not None
    )


EMPTY_TURN = "the empty assistant turn"
EMPTY_WHY = (
    "it has no text, tool call or refusal, and Anthropic and Gemini refuse an empty turn: no "
    "wire gets one, and the turns around it meet"
)
"""The note for an empty assistant turn, the same on every wire."""


LATER_SYSTEM = "the system role"
"""The note for a system (or developer) message the caller put after the conversation began,
sent as user text in its place by a wire or model that has no system message there: moved
into the system prompt, it would change the start of every later request (the prompt
cache's key, and the prefix Anthropic binds thinking to: CONTINUITY.md §1.9)."""


def later_system_why(where: str) -> str:
    """Why a later system message went as user text: ``where`` says why the wire (or model)
    has no system message in that place."""
    return (
        f"sent as user text in its place: {where}; moved into the system prompt it would "
        "change the start of every later request"
    )


REASONING = "the reasoning"
"""The note for an assistant turn's reasoning text a wire does not take back."""


def reasoning_unsent(message: Message, profile: ProviderProfile) -> bool:
    """Whether an assistant ``message``'s reasoning text, not sent to ``profile``'s wire,
    needs a note: it has some, and it did not come from this provider's answers
    (``reasoning_format`` ``None`` or another wire's; a profile without a format names its
    turns by its id). A turn this provider made carries
    its reasoning as the provider's round trip says (Anthropic and Gemini signed blocks,
    Responses encrypted items, DeepSeek ``reasoning_content`` on tool-call turns only):
    what that leaves out is the provider's design, not the caller's words lost."""
    return bool(message.reasoning) and message.reasoning_format != (
        profile.reasoning_format or profile.id
    )


REASONING_ITEMS = "the reasoning items"
"""The note for an assistant turn's opaque reasoning items another wire made."""

REASONING_ITEMS_WHY = (
    "they are another wire's signed or encrypted reasoning, which verifies only where it was "
    "made: that reasoning is lost on this wire, and kept in the history for the next call "
    "that goes back there"
)


def items_unsent(message: Message, profile: ProviderProfile) -> bool:
    """Whether an assistant ``message`` carries opaque reasoning items (Anthropic thinking
    blocks, Responses encrypted items, Gemini signed parts, OpenRouter details) that
    ``profile``'s wire does not take: they come from another wire (its
    ``reasoning_format``), so the model reads none of that reasoning."""
    return bool(message.reasoning_items) and message.reasoning_format != (
        profile.reasoning_format or profile.id
    )


def name_note(left_out: LeftOut, wire: str) -> None:
    """Record the ``name`` of the message at ``left_out.position`` as not sent: ``wire`` has
    no field for it."""
    left_out.add("the name", f"{wire} has no name field on a message")


def ttl_notes(cache: PromptCache | None, profile: ProviderProfile) -> list[str]:
    """The warning for a marker's ``ttl="1h"`` on a wire that cannot carry it.

    A 1-hour lifetime is sent only where a ``cache_control`` field carries it (Anthropic,
    and OpenRouter for the models behind it). OpenAI keeps a cached prefix at least 30
    minutes (``prompt_cache_options.ttl`` takes only ``30m``) and at most 24 hours with
    ``prompt_cache_retention: "24h"`` (``PromptCacheOptionsParam`` and
    ``prompt_cache_retention`` in openai_openapi.yaml 2026-08-21; CURRENT.md §3.1); Gemini
    and the other compatible providers cache on their own and take no lifetime. The call is
    still sent: a shorter cache costs more, it changes no answer. ``5m`` needs no warning:
    every provider keeps a prefix at least that long or takes no lifetime at all.
    """
    if cache is None or cache.ttl != "1h" or "cache_control" in profile.prompt_cache:
        return []
    if "key" in profile.prompt_cache:
        why = (
            "OpenAI keeps a cached prefix at least 30 minutes (prompt_cache_options.ttl takes "
            "only '30m') and up to 24 hours with retention='24h'"
        )
    else:
        why = f"{profile.id} caches prefixes on its own and takes no cache lifetime"
    return [f"prompt_cache ttl='1h' not sent to {profile.id}: {why}"]
