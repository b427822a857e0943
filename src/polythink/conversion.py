"""A call's input made into value types once, and what is derived from a conversation
resumed rather than redone.

An agent loop sends the same conversation again and again, a few messages longer each turn,
with the same tools. What polythink does with that input is kept so a call pays only for
what is new in it:

- :func:`coerce_messages` converts and checks message dicts into :class:`~polythink.Message`
  values, remembering each dict (by identity, compared with a copy of what was checked) and
  each conversation, so the unchanged messages of a call are not converted again.
- :func:`coerce_tools` does the same for a list of tools (by its JSON bytes), and
  :func:`tools_memo` keeps what a wire or a cache key derives from such a list.
- :class:`PrefixStates` keeps what a layer derived from a conversation's messages (a body, a
  running count), so the next call derives only from its new messages.

Nothing here decides what a value is: the checks are the value types' own
(:mod:`polythink.types`); a remembered result is used only when it is the one a first
conversion would give.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar, cast

import orjson

from polythink.errors import InvalidInputError
from polythink.types import Message, Tool

__all__ = ["PrefixStates", "coerce_messages", "coerce_tools", "tools_memo"]

_T = TypeVar("_T")


def coerce_messages(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[Message, ...]:
    """Convert a sequence of ``Message`` objects or OpenAI-style dicts to a tuple of messages.

    A ``Message`` is taken as it is (it was checked when it was built). A dict is converted
    and checked (:meth:`Message.coerce`) the first time it is seen; the conversion is kept,
    with a copy of what was checked, under the dict's identity, so a conversation passed as
    the same dicts call after call converts only its new messages. On each call a dict is
    compared with that copy (``==``, in C), and the conversion is reused only when they are
    equal: a dict changed in place since, or a new dict at the same address, is converted
    and checked again, so what is sent is always what the dict holds now. The ``Message``
    is built from the copy, never sharing the caller's lists or dicts. Only dicts of the
    JSON shape of messages (dicts, lists, strings, ``None``) are kept: a number or any other
    value could compare equal to a different one (``1 == 1.0 == True``), so such a dict is
    converted on every call. The last message of a call is kept only once it is sent again
    (a one-message call, or a prompt replaced on every call, keeps nothing). At most 32,768
    dicts are kept, or 16 Mi characters of their text, the least recently sent forgotten
    first. A conversation of such dicts is also kept whole (up to 32 of them), and a call
    sending it again compares its first messages with their copies in one list comparison.

    Raises:
        ValueError: when a message is malformed (the message says which: ``messages[3]: user
            message content part 1 ...``), or ``messages`` is empty or not a sequence.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidInputError(
            "messages must be a list of Message objects or OpenAI-style dicts; got "
            f"{type(messages).__name__}"
        )
    items: Sequence[Any] = (
        messages if messages.__class__ is list or messages.__class__ is tuple else list(messages)
    )
    seen = _remembered
    young = seen.young
    start, copies, result = seen.resume(items)
    append = result.append
    keep_copy = copies.append
    last = len(items) - 1
    try:
        for index in range(start, len(items)):
            m = items[index]
            cls = m.__class__
            if cls is Message:
                append(m)
                # Not a copy: an equal message (``==`` leaves metadata out) must not stand in
                # for the caller's own, so a conversation holding one is not kept whole.
                keep_copy(None)
            elif cls is dict:
                kept = young.get(id(m))
                if kept is not None and kept[0] == m:
                    append(kept[1])
                    keep_copy(kept[0])
                else:
                    message, copy = seen.convert(m, keep=index != last)
                    append(message)
                    keep_copy(copy)
            else:
                append(Message.coerce(m))
                keep_copy(None)
    except Exception:
        # The memo never decides an error: the plain conversion raises what it raises.
        result = _coerced(items)
    else:
        seen.keep(items, copies, result)
    if not result:
        raise InvalidInputError("messages must not be empty")
    return tuple(result)


def _coerced(messages: Sequence[Any]) -> list[Message]:
    """Every message converted afresh, a refused one reported with its index."""
    coerce = Message.coerce
    try:
        return [m if m.__class__ is Message else coerce(m) for m in messages]
    except ValueError as exc:
        index = _failing_index(messages)
        if index is None:
            raise
        raise InvalidInputError(f"messages[{index}]: {exc}") from None


_NOT_KEPT: Any = object()
"""What :func:`_json_copy` returns for a value it does not copy."""


def _json_copy(value: Any) -> tuple[Any, int]:
    """A copy of ``value`` if it is made of dicts with string keys, lists, strings and
    ``None`` only, and the characters of its strings; ``(_NOT_KEPT, 0)`` otherwise."""
    cls = value.__class__
    if cls is str:
        return value, len(value)
    if value is None:
        return None, 0
    chars = 0
    if cls is dict:
        copy: dict[str, Any] = {}
        for key, item in value.items():
            if key.__class__ is not str:
                return _NOT_KEPT, 0
            kept, count = _json_copy(item)
            if kept is _NOT_KEPT:
                return _NOT_KEPT, 0
            copy[key] = kept
            chars += count
        return copy, chars
    if cls is list:
        items: list[Any] = []
        for item in value:
            kept, count = _json_copy(item)
            if kept is _NOT_KEPT:
                return _NOT_KEPT, 0
            items.append(kept)
            chars += count
        return items, chars
    return _NOT_KEPT, 0


class _Remembered:
    """Message dicts converted before: id -> (copy of the dict, its ``Message``); and the
    conversations they were sent in.

    Two generations: a dict is looked up in the young one, then in the old one (and moved
    back to the young one when found there). When the young one holds
    :attr:`ENTRIES` dicts or :attr:`CHARS` characters of text, it becomes the old one and
    the previous old one is dropped, so at most twice that is kept, and a dict not sent
    again within that much newer traffic is forgotten.

    A conversation's copies and messages (all but its last message, which is sent
    replaced or followed by more) are kept under the identity of the last of them, up to
    :attr:`CONVERSATIONS`: a call sending it again compares its first messages with those
    copies in one list comparison (C) instead of one lookup a message (:meth:`resume`).

    Safe under threads without a lock: an entry is used only when its copies equal the
    caller's dicts, so a lost or stale entry costs a conversion, never a wrong message.
    """

    __slots__ = ("chars", "conversations", "old", "young")

    ENTRIES = 16_384
    CHARS = 8 << 20
    CONVERSATIONS = 32
    LOOKBACK = 8

    def __init__(self) -> None:
        self.young: dict[int, tuple[dict[str, Any], Message]] = {}
        self.old: dict[int, tuple[dict[str, Any], Message]] = {}
        self.chars = 0
        self.conversations: dict[int, tuple[list[Any], list[Message]]] = {}

    def resume(self, items: Sequence[Any]) -> tuple[int, list[Any], list[Message]]:
        """How many of ``items`` a kept conversation covers, unchanged, and new lists of
        their copies and messages (``0, [], []`` when none does)."""
        conversations = self.conversations
        count = len(items)
        for end in range(count - 1, max(0, count - 1 - self.LOOKBACK), -1):
            found = conversations.get(id(items[end - 1]))
            if found is not None and len(found[0]) == end:
                copies, messages = found
                if copies == items[:end]:
                    return end, copies.copy(), messages.copy()
        return 0, [], []

    def keep(self, items: Sequence[Any], copies: list[Any], messages: list[Message]) -> None:
        """Keep the conversation ``items`` converted to ``messages`` (``copies``: what each
        was checked as; ``None`` for one that could not be copied) but for its last message."""
        end = len(items) - 1
        if end < 1 or None in copies[:end]:
            return
        conversations = self.conversations
        key = id(items[end - 1])
        conversations.pop(key, None)
        conversations[key] = (copies[:end], messages[:end])
        if len(conversations) > self.CONVERSATIONS:
            del conversations[next(iter(conversations))]

    def convert(
        self, value: dict[str, Any], *, keep: bool = True
    ) -> tuple[Message, dict[str, Any] | None]:
        """The ``Message`` of ``value`` and the copy it was checked as (``None`` when not
        kept): remembered from the old generation, else converted (from a copy, kept when
        ``keep``) and checked.

        Raises:
            ValueError: as :meth:`Message.coerce`.
        """
        key = id(value)
        kept = self.old.get(key)
        if kept is not None and kept[0] == value:
            self.young[key] = kept
            return kept[1], kept[0]
        if not keep:
            return Message.coerce(value), None
        copy, chars = _json_copy(value)
        if copy is _NOT_KEPT:
            return Message.coerce(value), None
        message = Message.coerce(copy)
        if len(self.young) >= self.ENTRIES or self.chars + chars > self.CHARS:
            self.old, self.young, self.chars = self.young, {}, 0
        self.young[key] = (copy, message)
        self.chars += chars
        return message, copy

    def clear(self) -> None:
        """Forget every remembered dict and conversation."""
        self.young, self.old, self.chars, self.conversations = {}, {}, 0, {}


_remembered = _Remembered()


def _failing_index(messages: Iterable[Message | Mapping[str, Any]]) -> int | None:
    """The index of the first message :meth:`Message.coerce` refuses (``None`` when the
    iterable cannot be read again, or none fails on a second pass)."""
    if not isinstance(messages, Sequence):
        return None
    for index, message in enumerate(messages):
        try:
            Message.coerce(message)
        except ValueError:
            return index
    return None


_S = TypeVar("_S")


class PrefixStates(Generic[_S]):
    """What was derived from the messages of recent conversations, to resume from.

    A conversation is sent again with messages added (an agent loop) or with its last one
    replaced (a prompt asked again); what a layer derives from it message by message (a
    body, a count) is kept with the messages, held by identity, and looked up by the
    identity of the last message of the prefix it covers: :meth:`find` gives the longest
    kept prefix of a new call's messages (at most :attr:`LOOKBACK` messages short of all of
    them), checked message by message by identity (in C), so the caller derives only what
    comes after it. A state is kept for a call's whole messages and for all but the last;
    the caller's state covers at least that many messages (a list to slice, a running sum)
    and must not change once kept. Up to ``size`` states, the least recently used dropped
    first. Safe under threads without a lock: a state is used only when its messages are
    identical, so a lost entry costs a derivation, never a wrong state.
    """

    __slots__ = ("_entries", "_size")

    LOOKBACK = 8

    def __init__(self, size: int = 32) -> None:
        self._entries: dict[int, tuple[tuple[Message, ...], _S]] = {}
        self._size = size

    def find(self, messages: tuple[Message, ...]) -> tuple[int, _S | None]:
        """The length of the longest kept prefix of ``messages`` and its state (``0, None``
        when none is kept)."""
        entries = self._entries
        count = len(messages)
        for end in range(count, max(0, count - self.LOOKBACK), -1):
            found = entries.get(id(messages[end - 1]))
            if found is not None:
                kept, state = found
                if len(kept) == end and all(map(operator.is_, kept, messages)):
                    return end, state
        return 0, None

    def keep(self, messages: tuple[Message, ...], state: _S) -> None:
        """Keep ``state``, derived from all of ``messages``, for them and for all but the
        last of them."""
        if not messages:
            return
        entries = self._entries
        last = id(messages[-1])
        entries.pop(last, None)
        entries[last] = (messages, state)
        if len(messages) > 1:
            before = id(messages[-2])
            entries.pop(before, None)
            entries[before] = (messages[:-1], state)
        while len(entries) > self._size:
            del entries[next(iter(entries))]


def coerce_tools(tools: Sequence[Tool | Mapping[str, Any]] | None) -> tuple[Tool, ...]:
    """Convert tool specs (``Tool`` or dicts) to a tuple of ``Tool``; ``None`` gives ``()``.

    A list of tools passed again unchanged (its JSON bytes, and its values compared with a
    copy of what was checked) gives back the tuple of the first conversion, so tools
    declared on every call of a loop are checked once, and what is derived from them for a
    wire or a cache key (:func:`tools_memo`) is derived once. The ``Tool`` values are built
    from that copy, never sharing the caller's dicts; a list that changed in any way, in
    place or not, is converted and checked again. At most 64 lists are remembered.

    Raises:
        InvalidInputError: when ``tools`` is not a list of tools, a tool is malformed, or two
            share a name.
    """
    if tools is None:
        return ()
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise InvalidInputError(
            f"tools must be a list of Tool objects or dicts; got {type(tools).__name__}"
        )
    if not tools:
        return ()
    listed = list(tools)
    key = _tools_key(listed)
    if key is not None:
        kept = _tool_lists.get(key, listed)
        if kept is not None:
            return kept
    if any(not isinstance(t, Tool | Mapping) for t in listed):
        raise InvalidInputError("each tool must be a Tool or a dict with a function 'name'")
    if key is None:
        return _unique(tuple(Tool.coerce(t) for t in listed))
    given = [_copied_tool(t) for t in listed]
    converted = _unique(tuple(Tool.coerce(t) for t in given))
    _tool_lists.put(key, given, converted)
    return converted


def _unique(tools: tuple[Tool, ...]) -> tuple[Tool, ...]:
    """``tools``, each name once: a model calls a tool by its name, and the providers refuse
    a list that repeats one (Anthropic: "Tool names must be unique").

    Raises:
        InvalidInputError: naming the second tool with a name already taken.
    """
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        if tool.name in seen:
            raise InvalidInputError(
                f"tools[{index}] is named {tool.name!r}, as an earlier tool is: each tool needs "
                "a name of its own (a model calls a tool by its name)"
            )
        seen.add(tool.name)
    return tools


def tools_memo(tools: tuple[Tool, ...], name: str, derive: Callable[[tuple[Tool, ...]], _T]) -> _T:
    """Return ``derive(tools)``, computed once per ``name`` for a tuple :func:`coerce_tools`
    gave back (and afresh for any other tuple).

    As with :meth:`Message.memo`, ``name`` must say everything the derived value depends on
    besides the tools, and the value is shared: treat it as read-only.
    """
    entry = _tool_lists.by_id.get(id(tools))
    if entry is None or entry[1] is not tools:
        return derive(tools)
    derived = entry[2]
    if name in derived:
        return cast(_T, derived[name])
    value = derived[name] = derive(tools)
    return value


def _tools_key(tools: list[Any]) -> bytes | None:
    """The JSON bytes of a list of tools (``Tool`` values as their fields), or ``None`` when
    orjson cannot write it (a key that is not a string, a lone surrogate, a mapping that is
    not a dict)."""
    try:
        return orjson.dumps(tools)
    except TypeError:
        return None


def _copied_tool(tool: Any) -> Any:
    """A tool dict copied at every depth (values shared), a ``Tool`` as it is."""
    return _copied_json(tool) if tool.__class__ is dict else tool


def _copied_json(value: Any) -> Any:
    cls = value.__class__
    if cls is dict:
        return {key: _copied_json(item) for key, item in value.items()}
    if cls is list:
        return [_copied_json(item) for item in value]
    return value


class _ToolLists:
    """Lists of tools converted before: JSON bytes -> (copy of the list, its tools, what
    was derived from them), and the same entries by the identity of the tools tuple."""

    __slots__ = ("by_id", "by_key")

    SIZE = 64

    def __init__(self) -> None:
        self.by_key: dict[bytes, tuple[list[Any], tuple[Tool, ...], dict[str, Any]]] = {}
        self.by_id: dict[int, tuple[list[Any], tuple[Tool, ...], dict[str, Any]]] = {}

    def get(self, key: bytes, given: list[Any]) -> tuple[Tool, ...] | None:
        """The tools of the list with these bytes, when its copy equals ``given``."""
        entry = self.by_key.get(key)
        if entry is None or entry[0] != given:
            return None
        return entry[1]

    def put(self, key: bytes, given: list[Any], tools: tuple[Tool, ...]) -> None:
        """Remember ``tools``, converted from ``given`` (a copy of the caller's list)."""
        entry: tuple[list[Any], tuple[Tool, ...], dict[str, Any]] = (given, tools, {})
        by_key, by_id = self.by_key, self.by_id
        replaced = by_key.pop(key, None)
        if replaced is not None:
            by_id.pop(id(replaced[1]), None)
        elif len(by_key) >= self.SIZE:
            by_id.pop(id(by_key.pop(next(iter(by_key)))[1]), None)
        by_key[key] = entry
        by_id[id(tools)] = entry


_tool_lists = _ToolLists()
