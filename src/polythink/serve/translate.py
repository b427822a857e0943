"""What every front door uses to read its format into polythink's types and back.

Pure functions: the typed request built through :meth:`polythink.Client.request` (its checks
become the door's 400), usage split the way each format counts it, ids, finish reasons, and
the reasoning envelope of an assistant turn read back from whatever field carried it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from polythink.serve.envelope import Sealed, seal
from polythink.serve.exchange import DoorError
from polythink.types import Effort, Message, NativeBody, Request, Response, ToolCall, Usage

__all__ = [
    "BuildRequest",
    "body_key",
    "build_request",
    "envelope_of",
    "flag",
    "new_id",
    "parse_effort",
    "restored",
    "split_usage",
]

BuildRequest = Callable[..., Request]
""":meth:`polythink.Client.request` of the route's client."""


def new_id(prefix: str) -> str:
    """A fresh id of the shape a format uses (``msg_…``, ``chatcmpl-…``, ``resp_…``)."""
    return prefix + secrets.token_hex(12)


def body_key(raw: bytes) -> str:
    """The digest of a request body that keys its cache entries (:attr:`NativeBody.key`)."""
    return hashlib.sha256(raw).hexdigest()


def flag(body: Mapping[str, Any], name: str) -> bool:
    """A boolean field of a request body (``stream``): ``true`` or ``false``, absent or
    ``null`` read as ``false``. The official SDKs send JSON booleans; a string such as
    ``"no"`` would read as true in Python, so it is refused rather than guessed.

    Raises:
        DoorError: naming the field and what it holds.
    """
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise DoorError(
            f"{name}: must be true or false; got {type(value).__name__} {value!r}"[:200],
            param=name,
        )
    return value


def parse_effort(value: Any, param: str) -> Effort:
    """A reasoning tier the caller wrote in its own field.

    Raises:
        DoorError: naming ``param`` and the accepted values.
    """
    try:
        effort = Effort.parse(value if isinstance(value, str | bool) else str(value))
    except ValueError as exc:
        raise DoorError(f"{param}: {exc}", param=param) from None
    assert effort is not None
    return effort


def build_request(build: BuildRequest, native: NativeBody | None, **fields: Any) -> Request:
    """The typed request (``build(**fields)``), carrying ``native``.

    Raises:
        DoorError: polythink refuses a field (its message says what and what is accepted).
    """
    try:
        request = build(**fields)
    except ValueError as exc:
        raise DoorError(str(exc)) from None
    return request.with_(native=native) if native is not None else request


def restored(
    sealed: Sealed, *, content: str | list[Any] | None, tool_calls: tuple[ToolCall, ...]
) -> Message:
    """The assistant turn an envelope describes, with the text and calls the client sent.

    Raises:
        DoorError: the turn is not a valid message.
    """
    try:
        return Message(
            role="assistant",
            content=content if content or not (tool_calls or sealed.reasoning_items) else None,
            tool_calls=tool_calls,
            reasoning=sealed.reasoning,
            reasoning_items=sealed.reasoning_items,
            reasoning_format=sealed.reasoning_format,
        )
    except ValueError as exc:
        raise DoorError(f"an assistant message is malformed: {exc}") from None


def envelope_of(response: Response) -> str | None:
    """The envelope of the answer's reasoning (see :mod:`polythink.serve.envelope`)."""
    return seal(response.message, provider=response.provider, model=response.model)


def split_usage(usage: Usage | None) -> tuple[int, int, int, int, int]:
    """``(uncached input, cache reads, cache writes, output, reasoning)`` tokens, 0 for a
    count the provider did not give (the formats require numbers)."""
    if usage is None:
        return 0, 0, 0, 0, 0
    read = usage.cache_read_tokens or 0
    write = usage.cache_write_tokens or 0
    total = usage.input_tokens or 0
    return (
        max(0, total - read - write),
        read,
        write,
        usage.output_tokens or 0,
        (usage.reasoning_tokens or 0),
    )


def text_of(parts: Any, *types: str) -> str:
    """The joined ``text`` of the parts of ``types`` (a string as it is)."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "".join(
        str(part.get("text") or "")
        for part in parts
        if isinstance(part, Mapping) and part.get("type") in types
    )
