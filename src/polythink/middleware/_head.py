"""Where a stream starts to count as output: the first event that is not a usage report.

Retry and failover may start a stream again only while nothing the caller could act on has
been yielded. A ``usage`` event carries no output (Anthropic reports the prompt's tokens in
``message_start``, before an in-band ``overloaded_error`` may still arrive), so those are
held back until the first text, reasoning, tool-call or ``done`` event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from polythink.types import StreamEvent

__all__ = ["read_head"]

Events = AsyncGenerator[StreamEvent, None]


async def read_head(events: Events) -> tuple[list[StreamEvent], Events]:
    """Pull ``events`` up to and including the first event that is not ``usage``.

    Returns the events read (the held-back usage reports, then the first output event;
    fewer when the stream ended early) and the same generator, positioned after them. An
    error raised while reading ends the generator and propagates, with nothing yielded.
    """
    head: list[StreamEvent] = []
    async for event in events:
        head.append(event)
        if event.type != "usage":
            break
    return head, events
