"""The synchronous client: :class:`~polythink.Client` driven from a thread of its own.

For scripts, notebooks, Django/Flask views and Celery tasks. A :class:`SyncClient` holds one
async :class:`~polythink.Client` and runs it on an event loop in a background thread (anyio's
blocking portal): each blocking method hands the async method to that loop and waits for
its outcome. Nothing is implemented twice: validation, the onion, errors and their messages
are the async client's own. The calling thread may run an event loop of its own (Jupyter):
the call blocks it, as any blocking call would.

Threads: one client serves many threads at once (their calls run concurrently on its loop,
over its one connection pool); ``close()`` may come from any of them. A call interrupted in
its thread (``KeyboardInterrupt``) cancels its task, as cancelling the task of an async call
does. A stream runs in one task on the loop from its first event to its last, so context
variables and cancel scopes of the layers behave as under ``async for``; leaving the loop
early (``break``, an exception, closing the generator) cancels that task and waits until
the connection is released.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from concurrent.futures import CancelledError, Future
from contextlib import ExitStack, aclosing, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from polythink.client import Client
from polythink.config import Source
from polythink.errors import ClientClosedError

__all__ = ["SyncClient"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")

_BUFFER = 64
"""Events a stream's task may read ahead of the thread iterating it."""


def _same_signature(
    init: Callable[Concatenate[Any, _P], None],
) -> Callable[[Callable[..., None]], Callable[Concatenate[SyncClient, _P], None]]:
    """Give the decorated ``__init__`` the parameters of ``init`` (for type checkers and
    ``help``), so the two constructors cannot drift apart."""

    def same(method: Callable[..., None]) -> Callable[Concatenate[SyncClient, _P], None]:
        method.__wrapped__ = init  # type: ignore[attr-defined]
        return method

    return same


def _blocking(
    method: Callable[Concatenate[Client, _P], Awaitable[_R]],
) -> Callable[Concatenate[SyncClient, _P], _R]:
    """The blocking form of an async :class:`Client` method: same parameters, same errors."""

    def call(self: SyncClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self._call(functools.partial(method, self._client, *args, **kwargs))

    functools.update_wrapper(call, method)
    call.__qualname__ = f"SyncClient.{method.__name__}"
    call.__doc__ = f"Blocking :meth:`Client.{method.__name__}`.\n\n{method.__doc__ or ''}"
    return call


def _iterating(
    method: Callable[Concatenate[Client, _P], AsyncGenerator[_T, None]],
) -> Callable[Concatenate[SyncClient, _P], Iterator[_T]]:
    """The iterator form of an async-generator :class:`Client` method."""

    def call(self: SyncClient, /, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[_T]:
        return self._iterate(method(self._client, *args, **kwargs))

    functools.update_wrapper(call, method)
    call.__qualname__ = f"SyncClient.{method.__name__}"
    call.__doc__ = (
        f"Iterate :meth:`Client.{method.__name__}` (a plain generator: ``close()``, or leaving "
        f"the ``for`` loop, ends the stream and releases its connection).\n\n"
        f"{method.__doc__ or ''}"
    )
    return call


class _Pump(Generic[_T]):
    """One stream read to its end in a single task on the client's loop, its events handed
    to the iterating thread through a bounded memory stream."""

    def __init__(self, events: AsyncGenerator[_T, None]) -> None:
        self.events = events
        self.send, self.receive = anyio.create_memory_object_stream[_T](_BUFFER)
        self.scope: anyio.CancelScope | None = None
        self.stopped = False
        self.thread: int | None = None

    async def run(self) -> None:
        """Read the stream into the memory stream (the task's whole life)."""
        self.thread = threading.get_ident()
        with anyio.CancelScope() as self.scope:
            if self.stopped:
                self.scope.cancel()
            async with self.send, aclosing(self.events) as events:
                async for event in events:
                    await self.send.send(event)

    async def take(self) -> list[_T]:
        """The events ready now, waiting for at least one; ``[]`` once the stream ended."""
        try:
            batch = [await self.receive.receive()]
        except anyio.EndOfStream:
            self.receive.close()
            return []
        while True:
            try:
                batch.append(self.receive.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return batch

    def stop(self) -> None:
        """Cancel the reading task (in the loop's thread)."""
        self.stopped = True
        self.receive.close()
        if self.scope is not None:
            self.scope.cancel()


class SyncClient:
    """A blocking :class:`~polythink.Client`: the same constructor, methods and errors.

    ``SyncClient(sources=[...], ...)`` takes exactly what ``Client`` takes and validates it
    the same way, at once. ``complete`` returns the :class:`~polythink.Response`; ``stream``
    returns a plain iterator of the same events, ``done`` last. Errors are the async
    client's, raised in the calling thread; ``plan`` returns what ``Client.plan`` does.

    The event-loop thread starts with the ``with`` block, ``start()``, or the first call,
    and ends with ``close()`` (the ``with`` block's end), which also closes the async client
    (its cache entries committed, its connections closed). Calls still running in other
    threads then raise :class:`~polythink.errors.ClientClosedError`, as do later calls
    until the client is started again. A client collected while still open warns with
    ``ResourceWarning`` and shuts its thread down.

    Raises:
        ValueError, ThinkingUnsupportedError: as :class:`~polythink.Client`.
    """

    @_same_signature(Client.__init__)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._adopt(Client(*args, **kwargs))

    def _adopt(self, client: Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._portal: BlockingPortal | None = None
        self._thread: ExitStack | None = None
        self._closed = False

    @classmethod
    def _over(cls, client: Client) -> Self:
        self = cls.__new__(cls)
        self._adopt(client)
        return self

    @classmethod
    def from_env(cls, scope: str, **kwargs: Any) -> Self:
        """Build a client as :meth:`Client.from_env <polythink.Client.from_env>` does."""
        return cls._over(Client.from_env(scope, **kwargs))

    @classmethod
    def from_toml(cls, path: str | Path, **kwargs: Any) -> Self:
        """Build a client as :meth:`Client.from_toml <polythink.Client.from_toml>` does."""
        return cls._over(Client.from_toml(path, **kwargs))

    @property
    def sources(self) -> tuple[Source, ...]:
        """The sources, in the order calls try them."""
        return self._client.sources

    def start(self) -> None:
        """Start the event-loop thread and the async client in it (the ``with`` block and
        the first call do this; a no-op when already started)."""
        with self._lock:
            if self._portal is not None:
                return
            thread = ExitStack()
            portal = thread.enter_context(start_blocking_portal(name="polythink-sync"))
            try:
                portal.call(self._client.start)
            except BaseException:
                thread.close()
                raise
            self._portal, self._thread, self._closed = portal, thread, False

    def close(self) -> None:
        """Close the async client and end the event-loop thread (idempotent; any thread).

        Calls running in other threads raise
        :class:`~polythink.errors.ClientClosedError`; a call waiting for a rate limit is
        cancelled. Returns once the thread has ended.
        """
        with self._lock:
            portal, thread = self._portal, self._thread
            self._portal = self._thread = None
            self._closed = True
        if portal is None or thread is None:
            return
        with thread:
            portal.call(self._client.aclose)
            portal.call(portal.stop, True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        """The async client's repr under this class's name; no keys."""
        return f"<Sync{repr(self._client)[1:]}"

    def __del__(self) -> None:
        portal = getattr(self, "_portal", None)
        if portal is None:
            return
        warnings.warn(
            f"{self!r} was started and never closed: call client.close() or use "
            "'with SyncClient(...)'",
            ResourceWarning,
            source=self,
            stacklevel=2,
        )
        client = self._client

        async def shut() -> None:
            await client.aclose()
            await portal.stop()

        # Without waiting: a collector may run anywhere, the loop's own thread included.
        with suppress(RuntimeError):
            portal.start_task_soon(shut)

    def _closed_error(self) -> ClientClosedError:
        return ClientClosedError(
            "the client is closed (close() ran, or its 'with' block ended); open it again "
            "with 'with client:' or client.start()"
        )

    def _running(self) -> BlockingPortal:
        portal = self._portal
        if portal is None:
            if self._closed:
                raise self._closed_error()
            self.start()
            portal = self._portal
            if portal is None:
                raise self._closed_error()
        return portal

    def _wait(self, future: Future[_R]) -> _R:
        """The outcome of a task on the loop; interrupting the wait cancels the task."""
        try:
            return future.result()
        except CancelledError as exc:
            if self._closed:
                raise self._closed_error() from exc
            raise
        except ClientClosedError as exc:
            if self._closed:
                raise self._closed_error() from exc
            raise
        except BaseException:
            future.cancel()
            raise

    def _spawn(self, portal: BlockingPortal, call: Callable[[], Awaitable[_R]]) -> Future[_R]:
        try:
            return portal.start_task_soon(call)
        except RuntimeError as exc:  # closed in another thread since _running()
            if self._closed:
                raise self._closed_error() from exc
            raise

    def _call(self, call: Callable[[], Awaitable[_R]]) -> _R:
        return self._wait(self._spawn(self._running(), call))

    def _iterate(self, events: AsyncGenerator[_T, None]) -> Iterator[_T]:
        portal = self._running()
        pump = _Pump(events)
        running = self._spawn(portal, pump.run)
        ended = False
        try:
            while batch := self._wait(self._spawn(portal, pump.take)):
                yield from batch
            ended = True
            self._wait(running)
        finally:
            if not ended:
                try:
                    portal.call(pump.stop)
                except RuntimeError:
                    if threading.get_ident() == pump.thread:
                        # A collector finishing the generator in the loop's own thread.
                        pump.stop()
                    else:
                        # The loop is stopping (close() in another thread): the task ends
                        # with it, then nothing else touches the stream.
                        with suppress(Exception):
                            running.result()
                        pump.receive.close()
                else:
                    # Wait until the stream is closed and its connection released; its
                    # outcome no longer reaches anyone.
                    with suppress(Exception):
                        running.result()

    complete = _blocking(Client.complete)
    stream = _iterating(Client.stream)
    plan = _blocking(Client.plan)
