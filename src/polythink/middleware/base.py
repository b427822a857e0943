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

The caller's own layers (``Client(middleware=...)``, ``Source(middleware=...)``) have the
same shape. :func:`user_layers` checks them once, when the client is built, and wraps each
in a :class:`UserLayer` that checks the contract around that layer alone (what it returns,
what it yields, what it hands ``call_next``), so a broken layer fails with a
:class:`~polythink.errors.MiddlewareError` naming it instead of somewhere further out. The
built-in layers are folded as they are: no check runs around them. A method a user layer
inherits from :class:`Passthrough` is left out of the chain altogether.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from polythink.errors import InvalidInputError, MiddlewareError
from polythink.types import Request, Response, StreamEvent

__all__ = [
    "Chain",
    "CompleteNext",
    "Handler",
    "Middleware",
    "Passthrough",
    "StreamNext",
    "UserLayer",
    "compose",
    "user_layers",
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
    """One layer of the onion: the same two methods as a handler, plus ``call_next``.

    ``complete`` is an ``async def`` that returns a :class:`~polythink.types.Response`:
    ``await call_next(request)``'s, or one of its own (a short-circuit: nothing further in
    is called). ``stream`` returns an async iterator of
    :class:`~polythink.types.StreamEvent` whose last event is ``done``, carrying the
    assembled ``Response``: an async generator over ``call_next(request)`` that yields its
    events (changed or not), or ``call_next(request)`` itself. Either may hand ``call_next``
    a new request derived with :meth:`Request.with_ <polythink.types.Request.with_>` (never
    a mutated one), and may raise a :class:`~polythink.errors.PolythinkError`, which the
    layers outside treat like one from the provider. ``call_next`` runs in the caller's
    task: context variables, cancellation and exceptions flow straight through.
    """

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Handle a non-streaming call, delegating to ``call_next`` as it sees fit."""
        ...

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Handle a streaming call; must yield the ``done`` event last."""
        ...


class Passthrough:
    """A middleware that changes nothing; subclass it and override what a layer needs.

    ``stream`` returns the next layer's iterator itself rather than wrapping it in a
    generator, so a layer that only cares about ``complete`` costs nothing per event. A
    method a layer of the caller's own inherits from here is not in the chain at all.
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


def compose(middlewares: Sequence[Middleware | UserLayer], inner: Handler) -> Chain:
    """Fold ``middlewares`` around ``inner``; the first listed is the outermost.

    Built once per source at client start; a call then costs one bound call per layer. A
    :class:`UserLayer` adds its checks around its own layer only.
    """
    complete: CompleteNext = inner.complete
    stream: StreamNext = inner.stream
    for layer in reversed(middlewares):
        if isinstance(layer, UserLayer):
            complete, stream = layer.around(complete, stream)
            continue
        complete = partial(layer.complete, call_next=complete)
        stream = partial(layer.stream, call_next=stream)
    return Chain(complete=complete, stream=stream)


def _inherited(method: Any, base: Callable[..., Any]) -> bool:
    return getattr(method, "__func__", None) is base


def user_layers(
    layers: Any, where: str, *, provider: str | None = None, source_index: int | None = None
) -> tuple[UserLayer, ...]:
    """Check a ``middleware=`` list when the client is built; wrap each layer to check it.

    Args:
        layers: the list (or tuple) of layers, outermost first.
        where: how errors name the list (``"Client"``, ``"sources[1] (openai/gpt-5.5)"``).
        provider, source_index: set on the errors of a source's layers.

    Raises:
        ValueError: ``layers`` is not a list or tuple, or a layer is not usable (see
            :class:`UserLayer`).
    """
    if isinstance(layers, str | bytes) or not isinstance(layers, Sequence):
        raise InvalidInputError(
            f"{where} middleware must be a list of layers (objects with complete() and "
            f"stream(), such as polythink.Passthrough subclasses); got {type(layers).__name__}"
            + ("; wrap the one layer: [layer]" if hasattr(layers, "complete") else "")
        )
    return tuple(
        UserLayer(layer, f"{where} middleware[{i}]", provider=provider, source_index=source_index)
        for i, layer in enumerate(layers)
    )


class UserLayer:
    """A layer of the caller's own at one position, checked when built and around each use.

    When built (that is, when the client is), the layer must be an instance with a
    ``complete`` that is an ``async def`` and a ``stream`` that is an async generator or a
    plain function returning an async iterator (an ``async def`` without ``yield`` would
    return a coroutine, not events); a method inherited from :class:`Passthrough` counts,
    and is then left out of the chain.

    Around each call it checks only this layer (see
    :class:`~polythink.errors.MiddlewareError`): ``complete`` returned a ``Response``; the
    stream is an async iterator of ``StreamEvent`` with exactly one ``done`` event, last,
    carrying a ``Response``; ``call_next`` got a ``Request``. Exceptions the layer raises
    pass unchanged. The price is one function call per call and, for a layer that overrides
    ``stream``, one generator step per event (``benchmarks/README.md``, User middleware).

    Args:
        layer: the caller's layer.
        position: how errors name it (``"Client middleware[0]"``).
        provider, source_index: set on its errors when it belongs to a source.

    Raises:
        ValueError: for a class instead of an instance, or a missing or unusable method.
    """

    __slots__ = ("_complete", "_stream", "layer", "name", "provider", "source_index")

    def __init__(
        self,
        layer: Any,
        position: str,
        *,
        provider: str | None = None,
        source_index: int | None = None,
    ) -> None:
        kind = layer.__name__ if isinstance(layer, type) else type(layer).__qualname__
        self.layer = layer
        self.name = f"{kind} ({position})"
        self.provider = provider
        self.source_index = source_index
        if isinstance(layer, type):
            raise InvalidInputError(f"{self.name} is a class; pass an instance: {kind}()")
        complete = getattr(layer, "complete", None)
        stream = getattr(layer, "stream", None)
        for method, signature in ((complete, "complete"), (stream, "stream")):
            if not callable(method):
                raise InvalidInputError(
                    f"{self.name} has no {signature}(request, call_next) method; subclass "
                    "polythink.Passthrough to inherit the one a layer does not change"
                )
        self._complete: Callable[[Request, CompleteNext], Awaitable[Any]] | None = None
        if not _inherited(complete, Passthrough.complete):
            if not inspect.iscoroutinefunction(complete):
                raise InvalidInputError(
                    f"{self.name}: complete must be an async method "
                    "('async def complete(self, request, call_next)')"
                )
            self._complete = complete
        self._stream: Callable[[Request, StreamNext], Any] | None = None
        if not _inherited(stream, Passthrough.stream):
            if inspect.iscoroutinefunction(stream):
                raise InvalidInputError(
                    f"{self.name}: stream is an 'async def' without 'yield', so it would return "
                    "a coroutine, not events; yield the events ('async for event in "
                    "call_next(request): yield event') or return call_next(request) from a "
                    "plain 'def'"
                )
            self._stream = stream

    def around(self, complete: CompleteNext, stream: StreamNext) -> tuple[CompleteNext, StreamNext]:
        """This layer's checked ``complete`` and ``stream`` around the next handler's.

        Called once per fold (a layer shared by two sources is folded twice).
        """
        bound = _Bound(self, complete, stream)
        return (
            complete if self._complete is None else bound.complete,
            stream if self._stream is None else bound.stream,
        )

    def error(self, problem: str) -> MiddlewareError:
        """The error that names this layer: ``"<name> <problem>"``."""
        return MiddlewareError(
            f"middleware {self.name} {problem}",
            layer=self.name,
            provider=self.provider,
            source_index=self.source_index,
        )


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


class _Bound:
    """One :class:`UserLayer` folded around one next handler: the checked methods."""

    __slots__ = (
        "_complete",
        "_complete_next",
        "_next_complete",
        "_next_stream",
        "_stream",
        "_stream_next",
        "layer",
    )

    def __init__(self, layer: UserLayer, complete: CompleteNext, stream: StreamNext) -> None:
        self.layer = layer
        self._complete = layer._complete
        self._stream = layer._stream
        self._next_complete = complete
        self._next_stream = stream
        # Bound once: the layer receives the same checked call_next on every call.
        self._complete_next: CompleteNext = self._checked_complete_next
        self._stream_next: StreamNext = self._checked_stream_next

    def _request(self, request: object) -> None:
        if not isinstance(request, Request):
            raise self.layer.error(
                f"called call_next with {_kind(request)}; pass a Request (derive a changed one "
                "with request.with_(...))"
            )

    def _checked_complete_next(self, request: Request) -> Awaitable[Response]:
        # A plain function handing back the next layer's awaitable: no coroutine of its own.
        if request.__class__ is not Request:
            self._request(request)
        return self._next_complete(request)

    def _checked_stream_next(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        if request.__class__ is not Request:
            self._request(request)
        return self._next_stream(request)

    async def complete(self, request: Request) -> Response:
        assert self._complete is not None
        response = await self._complete(request, self._complete_next)
        if response.__class__ is not Response and not isinstance(response, Response):
            raise self.layer.error(
                f"returned {_kind(response)} from complete(); return a Response (call_next's, "
                "or one of its own)"
            )
        return response

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        assert self._stream is not None
        # The streams this call opened further in: a layer written as ``async for event in
        # call_next(request): yield event`` leaves its inner stream open when it is closed
        # early (only the garbage collector would close it), so they are closed here, and
        # the connection is released when the caller leaves, not later.
        opened: list[AsyncGenerator[StreamEvent, None]] = []

        def call_next(inner: Request) -> AsyncGenerator[StreamEvent, None]:
            events = self._stream_next(inner)
            opened.append(events)
            return events

        events = self._stream(request, call_next)
        if not hasattr(events, "__anext__"):
            for inner in opened:
                await inner.aclose()
            raise self.layer.error(
                f"returned {_kind(events)} from stream(); return an async iterator of "
                "StreamEvent (an async generator, or call_next(request))"
            )
        done = False
        async with _closing_all(events, opened):
            async for event in events:
                if done:
                    raise self.layer.error(
                        f"yielded a {getattr(event, 'type', _kind(event))!r} event after its "
                        "'done' event; 'done' must be the last"
                    )
                if event.__class__ is not StreamEvent and not isinstance(event, StreamEvent):
                    raise self.layer.error(
                        f"yielded {_kind(event)} from stream(); yield StreamEvent values"
                    )
                if event.type == "done":
                    if not isinstance(event.response, Response):
                        raise self.layer.error(
                            f"yielded a 'done' event whose response is {_kind(event.response)}; "
                            "it must carry the assembled Response"
                        )
                    done = True
                yield event
        if not done:
            raise self.layer.error(
                "ended its stream without a 'done' event; yield the inner stream's 'done' "
                "(or one of its own) last"
            )


@asynccontextmanager
async def _closing_all(
    events: Any, opened: list[AsyncGenerator[StreamEvent, None]]
) -> AsyncIterator[None]:
    """Close ``events`` (when it can be closed), then each stream in ``opened``, however
    the block ends."""
    try:
        yield
    finally:
        try:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        finally:
            for inner in opened:
                await inner.aclose()
