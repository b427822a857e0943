"""The middleware protocol and the fold that composes layers around a handler.

A *handler* answers a :class:`~polythink.types.Request` two ways: ``complete`` returns a
:class:`~polythink.types.Response`, ``stream`` returns an async iterator of
:class:`~polythink.types.StreamEvent` ending with a ``done`` event. A transport is a handler;
so is a composed chain.

A *middleware* has the same two methods, each also taking ``call_next`` (the next handler's
method of the same kind). It runs ``call_next`` in the caller's task, never in another one,
so context variables, cancellation and exceptions flow straight through.

:func:`compose` folds a list of middlewares around a handler once, at client start; the
first middleware listed is the outermost (the first to see the request, the last to see
the response).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from polythink.types import Request, Response, StreamEvent

__all__ = [
    "Chain",
    "CompleteNext",
    "Handler",
    "Middleware",
    "Passthrough",
    "StreamNext",
    "compose",
]

CompleteNext = Callable[[Request], Awaitable[Response]]
StreamNext = Callable[[Request], AsyncGenerator[StreamEvent, None]]


class Handler(Protocol):
    """Anything that answers a request: a transport, or a composed chain.

    ``complete(request)`` returns the whole response; ``stream(request)`` returns an async
    generator of events whose last event is ``done``.
    """

    @property
    def complete(self) -> CompleteNext: ...

    @property
    def stream(self) -> StreamNext: ...


class Middleware(Protocol):
    """One layer of the onion: the same two methods as a handler, plus ``call_next``."""

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Handle a non-streaming call, delegating to ``call_next`` as it sees fit."""
        ...

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Handle a streaming call; must yield the ``done`` event last."""
        ...


class Passthrough:
    """A middleware that changes nothing; subclass it and override what a layer needs.

    ``stream`` returns the next layer's iterator itself rather than wrapping it in a
    generator, so a layer that only cares about ``complete`` costs nothing per event.
    """

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Delegate unchanged."""
        return await call_next(request)

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Delegate unchanged."""
        return call_next(request)


@dataclass(frozen=True, slots=True)
class Chain:
    """A composed stack: ``complete`` and ``stream`` of the outermost layer, bound once."""

    complete: CompleteNext
    stream: StreamNext


def compose(middlewares: Sequence[Middleware], inner: Handler) -> Chain:
    """Fold ``middlewares`` around ``inner``; the first listed is the outermost.

    Built once per source at client start; a call then costs one bound call per layer.
    """
    complete: CompleteNext = inner.complete
    stream: StreamNext = inner.stream
    for layer in reversed(middlewares):
        complete = partial(layer.complete, call_next=complete)
        stream = partial(layer.stream, call_next=stream)
    return Chain(complete=complete, stream=stream)
