"""A second look at the cache for a call that waited for its turn.

The cache layer looks a call up before it goes down the onion; far inside, the rate-limit
layer may then hold it for a concurrency slot or for its budget, and meanwhile another
process (or another client on the same store) may have stored the same answer. While it
calls the next layer, the cache layer registers how to look again (:func:`looking_again`);
the rate-limit layer, after a wait and before it takes the budget, asks (:func:`look_again`)
and answers from the cache when the entry is there, without sending the call.

The registration lives in a context variable, set only while the cache layer awaits the
next layer (for a stream: its first event, which is when the call is admitted), so it never
leaks to another call of the same task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from polythink.types import Response, StreamEvent

__all__ = ["Hit", "look_again", "looking_again"]

Hit = Response | list[StreamEvent]
"""What a second look finds: a ``complete`` answer, or a stream's events to replay."""

_LOOK: ContextVar[Callable[[], Awaitable[Hit | None]] | None] = ContextVar(
    "polythink_look_again", default=None
)


class looking_again:
    """Register ``look`` as the current call's second look for the duration of the block.

    A class rather than a generator-based context manager: it runs on every call that goes
    through the cache, and costs a third as much.
    """

    __slots__ = ("_look", "_token")

    def __init__(self, look: Callable[[], Awaitable[Hit | None]]) -> None:
        self._look = look

    def __enter__(self) -> None:
        self._token = _LOOK.set(self._look)

    def __exit__(self, *exc: object) -> None:
        _LOOK.reset(self._token)


async def look_again() -> Hit | None:
    """Return what the current call's second look finds, or ``None`` (nothing registered, or
    no entry)."""
    look = _LOOK.get()
    return None if look is None else await look()
