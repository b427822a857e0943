"""Helpers for tests that drive the Chat Completions wire through respx.

A streamed body is served in chunks of the sizes given (odd sizes by default, so SSE lines,
CRLF pairs and UTF-8 sequences land across chunk boundaries).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from typing import Any

import httpx

from polythink import StreamEvent

ODD_SIZES = (1, 3, 7, 2, 5, 11, 13, 4)


def split(data: bytes, sizes: Sequence[int] = ODD_SIZES) -> list[bytes]:
    """Cut ``data`` into consecutive pieces whose lengths cycle through ``sizes``."""
    pieces: list[bytes] = []
    position = 0
    turn = 0
    while position < len(data):
        size = sizes[turn % len(sizes)]
        pieces.append(data[position : position + size])
        position += size
        turn += 1
    return pieces


class ChunkedStream(httpx.AsyncByteStream):
    """An async response body that yields the given chunks and records whether it was closed."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks = list(chunks)
        self.closed = False
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def sse_response(
    body: bytes, sizes: Sequence[int] | None = ODD_SIZES, status: int = 200
) -> httpx.Response:
    """A ``text/event-stream`` response serving ``body`` whole (``sizes=None``) or in pieces."""
    chunks = [body] if sizes is None else split(body, sizes)
    return httpx.Response(
        status,
        headers={"content-type": "text/event-stream"},
        stream=ChunkedStream(chunks),
    )


def sse(*payloads: Any, done: bool = True) -> bytes:
    """Encode chunk objects as ``data:`` events (LF line ends), optionally ending in [DONE]."""
    lines = [f"data: {json.dumps(p, separators=(',', ':'))}\n\n" for p in payloads]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def sent_json(call: Any) -> Any:
    """The JSON body of a request respx recorded."""
    return json.loads(call.request.content)


async def collect(
    events: AsyncGenerator[StreamEvent, None], into: list[StreamEvent] | None = None
) -> list[StreamEvent]:
    """Drain a stream of events into ``into`` (a new list by default) and return it.

    Events are appended as they arrive, so ``into`` holds what came before an exception.
    """
    seen = [] if into is None else into
    async for event in events:
        seen.append(event)
    return seen
