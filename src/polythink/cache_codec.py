"""The cache entry codec: a complete answer, or a whole stream, as UTF-8 JSON and back.

An entry is the UTF-8 JSON (canonical, :func:`~polythink.cache_key.canonical_json`, when it
holds a provider's opaque items) of an object with ``v`` (:data:`ENTRY_VERSION`), ``at``
(wall-clock seconds when it was stored) and either ``response`` (a
:meth:`Client.complete <polythink.Client.complete>` answer) or ``events`` (a stream's events,
one for one, its ``done`` event last). Entries are JSON, not pickles: a
store shared with other processes can hold nothing that runs code when read.

Decoding gives what a cache hit is: ``cache_hit=True`` and no ``rate_limit`` (no provider
answered). Encoding keeps every other field as it is; which warnings a hit keeps is the cache
layer's decision, made before encoding. Pure functions, no I/O: a backend may use them
without importing a middleware.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import orjson

from polythink.cache_key import canonical_json, message_fields
from polythink.errors import InvalidInputError
from polythink.types import (
    Cost,
    Effort,
    Message,
    MessageMetadata,
    Response,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from polythink.wire_json import loads_json

__all__ = [
    "ENTRY_VERSION",
    "Recording",
    "as_hit",
    "entry_events",
    "entry_response",
    "event_in",
    "event_out",
    "read_entry",
    "response_entry",
    "response_in",
    "response_out",
]

ENTRY_VERSION = 1
"""The entry format; an entry of another version reads as unreadable (a miss)."""
_DELTA_KINDS = frozenset({"text", "reasoning"})


def read_entry(raw: bytes | str) -> tuple[dict[str, Any], float]:
    """Parse an entry; return it and the wall-clock second it was stored at.

    Raises:
        ValueError: not JSON, not an object, of another version, or without ``at``.
        KeyError, TypeError: ``at`` missing or not a number.
    """
    entry = loads_json(raw)
    if not isinstance(entry, dict) or entry.get("v") != ENTRY_VERSION:
        raise InvalidInputError("not a polythink cache entry")
    return entry, float(entry["at"])


def response_entry(response: Response, at: float) -> bytes:
    """Return the entry of a complete answer stored at wall-clock second ``at``.

    Raises:
        TypeError, ValueError: a value JSON cannot represent.
    """
    body = {"response": response_out(response), "v": ENTRY_VERSION, "at": at}
    message = response.message
    if not message.reasoning_items and message.content.__class__ is not list:
        # Only text, numbers polythink computed (tokens, dollars) and seconds: orjson writes
        # the same values, in its own key order and float spelling, four times faster.
        # Opaque provider items (where a NaN or a large integer could hide, which orjson
        # would write as null or refuse) go through json.
        try:
            return orjson.dumps(body)
        except TypeError:
            pass  # a lone surrogate: json decides
    return canonical_json(body).encode()


def entry_response(entry: Mapping[str, Any]) -> Response:
    """Return the answer of an entry read by :func:`read_entry`, as a hit.

    Raises:
        KeyError, TypeError, ValueError: the entry does not hold an answer.
    """
    return response_in(entry["response"])


def entry_events(entry: Mapping[str, Any]) -> list[StreamEvent]:
    """Return the events of a stream's entry read by :func:`read_entry`, as a hit replays
    them.

    Raises:
        KeyError, TypeError, ValueError: the entry does not hold a stream.
    """
    return [event_in(x) for x in entry["events"]]


def as_hit(response: Response) -> Response:
    """Return ``response`` as a hit would give it: encoded and decoded, so the caller gets
    a copy of its own, marked ``cache_hit``."""
    return response_in(response_out(response))


def _usage_out(usage: Usage | None) -> list[int | None] | None:
    if usage is None:
        return None
    return [
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.cache_write_1h_tokens,
    ]


def _usage_in(data: Any) -> Usage | None:
    # Entries written before cache_write_1h_tokens existed hold five counts.
    return None if data is None else Usage(*data)


def _call_in(data: Any) -> ToolCall:
    call_id, name, arguments = data
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _message_in(data: Mapping[str, Any]) -> Message:
    # refusal, audio_id, function_call, instructions and prefix_mismatch are written only
    # when set (message_fields).
    function_call = data.get("function_call")
    mismatch = data.get("prefix_mismatch")
    return Message(
        role=data["role"],
        content=data["content"],
        tool_calls=tuple(_call_in(c) for c in data["tool_calls"]),
        tool_call_id=data["tool_call_id"],
        name=data["name"],
        reasoning=data["reasoning"],
        reasoning_items=tuple(data["reasoning_items"]),
        reasoning_format=data["reasoning_format"],
        refusal=data.get("refusal"),
        audio_id=data.get("audio_id"),
        function_call=_call_in(["", *function_call]) if function_call else None,
        instructions=data.get("instructions"),
        metadata=MessageMetadata(prefix_mismatch=mismatch) if mismatch is not None else None,
    )


def _cost_out(cost: Cost | None) -> list[Any] | None:
    if cost is None:
        return None
    return [
        cost.total,
        cost.input,
        cost.cache_read,
        cost.cache_write,
        cost.output,
        cost.reasoning,
        cost.source,
    ]


def _cost_in(data: Any) -> Cost | None:
    if data is None:
        return None
    total, input_, cache_read, cache_write, output, reasoning, source = data
    return Cost(
        total=total,
        input=input_,
        cache_read=cache_read,
        cache_write=cache_write,
        output=output,
        reasoning=reasoning,
        source=source,
    )


def _effort_in(value: Any) -> Effort | None:
    return None if value is None else Effort(value)


def response_out(response: Response) -> dict[str, Any]:
    """Return the JSON-ready fields of ``response`` an entry keeps (all but ``cache_hit``,
    ``rate_limit`` and ``interrupted``, which a hit does not inherit, and ``parsed``, which
    the client validates again from the text; ``refusal`` only when set)."""
    return {
        "text": response.text,
        "reasoning": response.reasoning,
        "tool_calls": [[c.id, c.name, c.arguments] for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "usage": _usage_out(response.usage),
        "model": response.model,
        "provider": response.provider,
        "source_index": response.source_index,
        "message": message_fields(response.message),
        "requested_effort": (
            response.requested_effort.value if response.requested_effort is not None else None
        ),
        "applied_effort": (
            response.applied_effort.value if response.applied_effort is not None else None
        ),
        "thinking": response.thinking.value,
        "warnings": list(response.warnings),
        "output_limited": response.output_limited,
        "id": response.id,
        "native_finish_reason": response.native_finish_reason,
        "cost": _cost_out(response.cost),
        **({"refusal": response.refusal} if response.refusal is not None else {}),
        **(
            {"input_transformations": [dict(t) for t in response.input_transformations]}
            if response.input_transformations
            else {}
        ),
    }


def response_in(data: Mapping[str, Any]) -> Response:
    """Return the hit that :func:`response_out`'s fields describe (``cache_hit=True``).

    Raises:
        KeyError, TypeError, ValueError: the fields are not an answer's.
    """
    return Response(
        text=data["text"],
        reasoning=data["reasoning"],
        tool_calls=[_call_in(c) for c in data["tool_calls"]],
        finish_reason=data["finish_reason"],
        usage=_usage_in(data["usage"]),
        model=data["model"],
        provider=data["provider"],
        source_index=data["source_index"],
        message=_message_in(data["message"]),
        requested_effort=_effort_in(data["requested_effort"]),
        applied_effort=_effort_in(data["applied_effort"]),
        thinking=ThinkingObservation(data["thinking"]),
        warnings=list(data["warnings"]),
        cache_hit=True,
        output_limited=data["output_limited"],
        id=data["id"],
        native_finish_reason=data.get("native_finish_reason"),
        cost=_cost_in(data.get("cost")),
        refusal=data.get("refusal"),
        input_transformations=list(data.get("input_transformations") or ()),
    )


def event_out(event: StreamEvent) -> dict[str, Any]:
    """Return the JSON-ready fields of one stream event (only those it carries)."""
    out: dict[str, Any] = {"type": event.type}
    if event.text is not None:
        out["text"] = event.text
    if event.tool_call is not None:
        call = event.tool_call
        out["tool_call"] = [call.id, call.name, call.arguments]
    if event.usage is not None:
        out["usage"] = _usage_out(event.usage)
    if event.response is not None:
        out["response"] = response_out(event.response)
    if event.tool_call_delta is not None:
        piece = event.tool_call_delta
        out["tool_call_delta"] = [piece.index, piece.id, piece.name, piece.arguments]
    return out


def event_in(data: Mapping[str, Any]) -> StreamEvent:
    """Return the event :func:`event_out`'s fields describe (a ``done`` response is a hit).

    Raises:
        KeyError, TypeError, ValueError: the fields are not an event's.
    """
    kind = data["type"]
    if kind not in ("text", "reasoning", "tool_call_delta", "tool_call", "usage", "done"):
        raise InvalidInputError(f"unknown stream event type {kind!r}")
    call = data.get("tool_call")
    response = data.get("response")
    piece = data.get("tool_call_delta")
    return StreamEvent(
        kind,
        text=data.get("text"),
        tool_call=_call_in(call) if call is not None else None,
        usage=_usage_in(data.get("usage")),
        response=response_in(response) if response is not None else None,
        tool_call_delta=(
            ToolCallDelta(index=piece[0], id=piece[1], name=piece[2], arguments=piece[3])
            if piece is not None
            else None
        ),
    )


class Recording:
    """A stream's events, kept small until the stream is stored.

    Text and reasoning deltas, nearly every event of a long stream, are kept as their kind
    and text only (the text is the string the transport already holds), and the entry is
    written as UTF-8 JSON straight into one buffer: no event objects or per-event dicts are
    kept, which held a 100 000-chunk stream at about 50 MiB (``polythink bench`` memory
    scenario, 2026-11-30). The entry is the canonical JSON ``{"at", "events", "v"}``, the
    bytes :func:`canonical_json` would write for it.
    """

    __slots__ = ("_kinds", "_payloads")

    def __init__(self) -> None:
        self._kinds: list[str] = []
        self._payloads: list[Any] = []

    def add(self, event: StreamEvent) -> None:
        """Keep ``event`` (a delta as its text only)."""
        kind = event.type
        self._kinds.append(kind)
        self._payloads.append(event.text if kind in _DELTA_KINDS else event)

    def replay(self) -> list[StreamEvent]:
        """The recorded events as a cache hit replays them (the ``done`` response a hit)."""
        events = []
        for kind, payload in zip(self._kinds, self._payloads, strict=True):
            if kind in _DELTA_KINDS:
                events.append(StreamEvent(kind, text=payload))  # type: ignore[arg-type]
            else:
                events.append(event_in(event_out(payload)))
        return events

    def entry(self, at: float) -> bytes:
        """The entry's bytes.

        Raises:
            TypeError, ValueError: a value JSON cannot represent.
        """
        out = io.BytesIO()
        write = out.write
        write(b'{"at":' + canonical_json(at).encode() + b',"events":[')
        for i, (kind, payload) in enumerate(zip(self._kinds, self._payloads, strict=True)):
            if i:
                write(b",")
            if kind in _DELTA_KINDS:
                text = json.dumps(payload, ensure_ascii=False)
                write(b'{"text":' + text.encode() + b',"type":"' + kind.encode() + b'"}')
            else:
                write(canonical_json(event_out(payload)).encode())
        write(b'],"v":' + str(ENTRY_VERSION).encode() + b"}")
        return out.getvalue()
