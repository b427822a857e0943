"""The response cache: answer a call that was answered before without asking a provider.

Per call, above failover (DESIGN §2, §5). Which calls are the same call is the key's
business (:mod:`polythink.cache_key`: the SHA-256 of the canonical JSON of every field that
reaches a provider, the headers that can change an answer, the requested tiers and the
sources' identities with a fingerprint of their credentials; never secrets, tracing headers,
timeouts or metadata), how an answer is written down the codec's
(:mod:`polythink.cache_codec`), and where entries live a backend's
(:mod:`polythink.backends.stores`). This layer decides when to look, what to keep and who
waits for whom.

Only complete successes are stored: a raised error, a stream that broke or was closed
early, a response whose ``finish_reason`` is ``error`` (case C07; a finish value the
provider's table does not know is read as ``error`` too) or none of polythink's, an answer
that does not fit the call's ``response_format`` (refused, cut, or invalid), and an answer
a spend budget stepped down to a cheaper tier (the key records the requested tier, which a
later call should get once the budget allows it again) never are. Such an answer is
validated here, once, and handed on with its ``parsed`` value, so the client does not
validate it again; a hit is validated by the client from its text. A hit on
``complete`` returns the stored response; a hit on ``stream`` replays the stored events one
for one (text and reasoning deltas, tool calls, usage, ``done``). Either way the response
says ``cache_hit=True`` and carries only what is true of the hit: no ``rate_limit`` (no
provider answered) and none of the failover notes of the call that stored it; the notes the
answer itself implies (nearest-mapping, dropped parameters, reconciliation) stay.

Identical calls in flight at the same time in one client are coalesced: the first goes
upstream and the others wait for its answer, which they get as a hit. For a stream the
others get the whole stream replayed once the first one has ended (a stream of another
caller cannot be resumed half-way, so joiners do not follow it live). An error of the first
call is raised to all of them; if the first caller is cancelled or stops reading early, one
of the waiting calls goes upstream in its place, so cancelling one caller never cancels
another. ``complete`` and ``stream`` keep separate entries: whether the call streams is
part of the key, because a stream's entry is its events and a stream may be cut where a
complete answer is not.

With a backend shared by processes that coalesces
(:class:`~polythink.backends.base.CoalescingCache`, such as
:class:`~polythink.backends.redis.RedisCache`), identical calls of different processes are
coalesced too: the first to miss takes the key's fill lease and calls; the others wait for
its entry (a stream's joiners, again, get the whole stream once it has ended) and get it as
a hit. If the holder ends without storing an answer (an error, a cancelled or interrupted
call), one of them takes the lease and calls itself: errors are not shared across
processes. A joiner waits at most as long as the backend allows and never past its own
``timeout``; what is left of that timeout goes with the call it then makes.

A call the rate-limit layer holds for a concurrency slot or for its budget looks the cache
up again before it takes the budget (:mod:`polythink.middleware._recheck`): another process
may have stored the answer meanwhile. Such a hit comes back through the inner layers and is
not stored again.

Per call, ``cache=False`` bypasses the cache and ``cache="refresh"`` skips the lookup and
overwrites the entry with the fresh answer. Entries older than ``ttl`` seconds are misses.
A store that fails (a corrupt or unreadable file, a locked database) degrades to a miss and
logs one warning; the call goes on to the provider.

Entries live in a :class:`~polythink.backends.base.CacheBackend`
(:func:`~polythink.backends.stores.cache_backend`): a disk store run by a
:class:`~polythink.backends.disk.DiskCache` (reads inline, writes batched from one thread),
another synchronous store by a :class:`~polythink.backends.local.StoreCache` (worker
threads), or a :class:`~polythink.backends.redis.RedisCache` shared by many processes, which
the same rules apply to. Entries are UTF-8 JSON, not pickles.

The names this module had before the key, the codec and the stores moved out
(:func:`cache_key`, :class:`DiskStore`, :func:`cache_store`, …) are still importable from it.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

import anyio

from polythink.backends.base import (
    DEFAULT_SIZE_LIMIT,
    CacheBackend,
    CacheStore,
    CoalescingCache,
    Lease,
)
from polythink.backends.disk import DiskStore, default_cache_dir
from polythink.backends.stores import cache_backend, cache_store
from polythink.cache_codec import (
    Recording,
    as_hit,
    entry_events,
    entry_response,
    read_entry,
    response_entry,
)
from polythink.cache_key import (
    Prefixes,
    cache_key,
    canonical_request,
    canonical_scope,
    digest,
    effective_efforts,
)
from polythink.config import Source
from polythink.errors import InvalidInputError, RequestTimeoutError
from polythink.middleware._recheck import looking_again
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.middleware.failover import NOTE_PREFIX
from polythink.structured import parsed_or_none
from polythink.types import Request, Response, StreamEvent

__all__ = [
    "DEFAULT_SIZE_LIMIT",
    "CacheMiddleware",
    "CacheStore",
    "DiskStore",
    "cache_backend",
    "cache_key",
    "cache_store",
    "canonical_request",
    "canonical_scope",
    "default_cache_dir",
    "effective_efforts",
]

logger = logging.getLogger("polythink.cache")

_T = TypeVar("_T")


class _Flight:
    """One call on its way upstream that identical calls wait for (single flight).

    :meth:`wait` returns when the first call is over; then ``response`` (a complete call,
    or its hit), ``recording`` (a stream that reached its ``done`` event), ``events`` (a
    stream's hit) or ``error`` tells how. All ``None``: the first caller was cancelled or
    stopped reading early. The event is made when a second caller first waits: most calls
    have no one waiting for them.
    """

    __slots__ = ("_ended", "error", "events", "recording", "response")

    def __init__(self) -> None:
        self._ended: anyio.Event | None = None
        self.response: Response | None = None
        self.recording: Recording | None = None
        self.events: list[StreamEvent] | None = None
        self.error: Exception | None = None

    async def wait(self) -> None:
        """Return once :meth:`end` was called."""
        if self._ended is None:
            self._ended = anyio.Event()
        await self._ended.wait()

    def end(self) -> None:
        """Wake the callers waiting (the flight is out of the table already)."""
        if self._ended is not None:
            self._ended.set()


def _stored(response: Response) -> Response:
    """``response`` without the failover notes of the call that made it: they are not true
    of a hit. The same object when it has none."""
    if not any(w.startswith(NOTE_PREFIX) for w in response.warnings):
        return response
    kept = [w for w in response.warnings if not w.startswith(NOTE_PREFIX)]
    return response.with_(warnings=kept)


def _stored_event(event: StreamEvent) -> StreamEvent:
    """``event`` as a stream's entry keeps it (a ``done`` response :func:`_stored`)."""
    response = event.response
    if response is None:
        return event
    kept = _stored(response)
    return event if kept is response else dataclasses.replace(event, response=kept)


def _replay(entry: dict[str, Any]) -> list[StreamEvent] | None:
    """A stream entry's events, if they end with ``done`` (else ``None``: not a whole stream)."""
    events = entry_events(entry)
    return events if events and events[-1].type == "done" else None


_STORED_FINISHES = frozenset({"stop", "length", "tool_calls", "content_filter"})
"""The finish reasons of an answer that ended as the provider meant it to: ``error`` (a
failure, or a value the transport's table does not know, see
:mod:`polythink.transports.finish`) and anything else a custom transport may set are not."""


def _complete_success(response: Response | None) -> bool:
    # A spend budget's step-down answered at a cheaper tier than the key's requested one:
    # kept, it would keep answering that tier after the budget's window resets.
    return (
        response is not None
        and response.finish_reason in _STORED_FINISHES
        and response.step_down is None
    )


def _fitting(request: Request, response: Response) -> Response | None:
    """``response`` as the call asked for it: with its ``parsed`` value when the call has a
    ``response_format`` (``None`` when the answer does not fit: it is not stored), else
    ``response`` itself."""
    fmt = request.response_format
    return response if fmt is None else parsed_or_none(response, fmt)


class CacheMiddleware:
    """Answer repeated calls from a store; keep only complete successes.

    Args:
        store: where entries live: a :class:`CacheStore` or a
            :class:`~polythink.backends.base.CacheBackend`.
        sources: the client's sources, in order; their identities are part of every key.
        ttl: seconds an entry stays fresh (an entry is a miss once older); ``None``: no
            expiry.
        clock: wall-clock seconds, read when an entry is stored and when it is read
            (default ``time.time``; inject one in tests).

    Raises:
        ValueError: for a non-positive ``ttl``, or a source ``extra_body`` that JSON cannot
            represent.
    """

    def __init__(
        self,
        store: CacheStore | CacheBackend,
        sources: Sequence[Source],
        *,
        ttl: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl is not None and (isinstance(ttl, bool) or not ttl > 0):
            raise InvalidInputError(f"cache ttl must be a positive number of seconds; got {ttl!r}")
        try:
            scope = canonical_scope(sources)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"a source's extra_body cannot be part of a cache key: {exc}"
            ) from exc
        self._warned = False
        self.store = store
        self.backend = cache_backend(store, ttl=ttl, on_error=self._degraded)
        self.ttl = ttl
        self._scope = scope.encode()
        self._defaults = tuple(s.effort for s in sources)
        self._flights: dict[str, _Flight] = {}
        self._prefixes = Prefixes()
        self._clock = clock
        claims = callable(getattr(self.backend, "claim", None))
        self._shared: CoalescingCache | None = self.backend if claims else None  # type: ignore[assignment]

    def key(self, request: Request) -> str | None:
        """Return the cache key of ``request``, or ``None`` (with one warning) when a field
        cannot be represented in JSON, in which case the call is not cached."""
        try:
            return digest(self._scope, request, self._defaults, self._prefixes)
        except (TypeError, ValueError) as exc:
            self._degraded("a request field cannot be part of a cache key; not caching it", exc)
            return None

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Return the stored response on a hit; otherwise call and store a success.

        While an identical call is in flight, wait for its answer instead of calling.
        """
        mode = request.cache
        if mode is False:
            return await call_next(request)
        key = self.key(request)
        if key is None:
            return await call_next(request)
        while (flight := self._flights.get(key)) is not None:
            if mode == "refresh":
                return await call_next(request)
            await flight.wait()
            if flight.error is not None:
                raise flight.error
            if flight.response is not None:
                return as_hit(flight.response)
            # The first caller was cancelled: look again, and go upstream if no one else has.
        # The flight is registered before the lookup and ends after the answer is stored, so
        # an identical call either joins it or finds the entry.
        flight = self._flights[key] = _Flight()
        fill: Lease | None = None
        try:
            if mode == "refresh":
                response = await call_next(request)
            else:
                entry, fill, request = await self._claim(key, request)
                if entry is not None:
                    cached = self._decode(entry, entry_response)
                    if cached is not None:
                        flight.response = cached
                        return cached
                with looking_again(lambda: self._look_again(key, entry_response)):
                    response = await call_next(request)
            # A hit the second look found (see the rate-limit layer) is stored already.
            fitting = response if response.cache_hit else _fitting(request, response)
            response = fitting or response
            flight.response = _stored(response)
            if fitting is not None and not response.cache_hit and _complete_success(response):
                await self._save(key, flight.response)
            return response
        except Exception as exc:
            if flight.response is None:
                flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.end()
            if fill is not None:
                await fill.release()

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Replay a stored stream on a hit; otherwise pass events through and store the
        stream once its ``done`` event shows a complete success."""
        if request.cache is False:
            return call_next(request)
        return self._stream(request, call_next)

    async def _stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        key = self.key(request)
        refresh = request.cache == "refresh"
        while key is not None and (flight := self._flights.get(key)) is not None:
            if refresh:
                key = None
                break
            await flight.wait()
            if flight.error is not None:
                raise flight.error
            if flight.events is not None or flight.recording is not None:
                replay = flight.events if flight.events is not None else flight.recording.replay()  # type: ignore[union-attr]
                for event in replay:
                    yield event
                return
            # The first caller was cancelled or stopped early: go upstream if no one else has.
        if key is None:
            async with aclosing(call_next(request)) as events:
                async for event in events:
                    yield event
            return
        flight = self._flights[key] = _Flight()
        fill: Lease | None = None
        try:
            if not refresh:
                entry, fill, request = await self._claim(key, request)
                if entry is not None:
                    replay = self._decode(entry, _replay)
                    if replay is not None:
                        flight.events = replay
                        for event in replay:
                            yield event
                        return
            recorded = Recording()
            async with aclosing(call_next(request)) as events:
                # The call is admitted (and may wait for its turn) before its first event.
                if refresh:
                    event = await anext(events, None)
                else:
                    with looking_again(lambda: self._look_again(key, _replay)):
                        event = await anext(events, None)
                while event is not None:
                    fitting = None
                    if event.type == "done" and event.response is not None:
                        done = event.response
                        fitting = done if done.cache_hit else _fitting(request, done)
                        if fitting is not None and fitting is not done:
                            event = dataclasses.replace(event, response=fitting)
                    recorded.add(_stored_event(event))
                    if event.type == "done":
                        flight.recording = recorded
                        # Stored before ``done`` is handed over: a caller that stops reading
                        # at ``done`` still leaves a complete stream in the cache.
                        if (
                            fitting is not None
                            and not fitting.cache_hit
                            and _complete_success(fitting)
                        ):
                            await self._save_events(key, recorded)
                    yield event
                    event = await anext(events, None)
        except Exception as exc:
            if flight.recording is None and flight.events is None:
                flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.end()
            if fill is not None:
                await fill.release()

    async def _claim(
        self, key: str, request: Request
    ) -> tuple[dict[str, Any] | None, Lease | None, Request]:
        """Look ``key`` up; on a miss, with a backend that coalesces across processes, take
        the key's fill lease, or wait for the caller filling it.

        Returns the entry (``None``: a miss), the fill lease this caller releases once it
        has stored its answer (``None``: none held), and the request to send, whose
        ``timeout`` is what the wait left of it.

        Raises:
            RequestTimeoutError: the call's whole ``timeout`` went on the wait.
        """
        shared = self._shared
        if shared is None:
            return await self._load(key), None, request
        try:
            raw, fill = await shared.claim(key)
            if raw is None and fill is None:
                started = time.monotonic()
                raw, fill = await shared.wait_for(key, request.timeout)
                if raw is None and request.timeout is not None:
                    request = self._after_wait(request, time.monotonic() - started)
        except RequestTimeoutError:
            raise
        except Exception as exc:
            self._degraded("the cache cannot be read; treating it as a miss", exc)
            return None, None, request
        return self._entry(raw), fill, request

    @staticmethod
    def _after_wait(request: Request, waited: float) -> Request:
        assert request.timeout is not None
        left = request.timeout - waited
        if left > 0:
            return request.with_(timeout=left)
        raise RequestTimeoutError(
            f"the call waited its whole timeout ({request.timeout:g} s) for an identical "
            "call of another process to answer it; it was not sent",
            error_type="deadline",
        )

    async def _look_again(self, key: str, decode: Callable[[dict[str, Any]], _T]) -> _T | None:
        entry = await self._load(key)
        return None if entry is None else self._decode(entry, decode)

    def _decode(self, entry: dict[str, Any], decode: Callable[[dict[str, Any]], _T]) -> _T | None:
        try:
            return decode(entry)
        except (KeyError, TypeError, ValueError) as exc:
            self._degraded("a cache entry is unreadable; treating it as a miss", exc)
            return None

    async def _load(self, key: str) -> dict[str, Any] | None:
        try:
            raw = await self.backend.load(key)
        except Exception as exc:
            self._degraded("the cache cannot be read; treating it as a miss", exc)
            return None
        return self._entry(raw)

    def _entry(self, raw: bytes | None) -> dict[str, Any] | None:
        """The entry in ``raw`` if it is readable and fresh, else ``None``."""
        if raw is None:
            return None
        try:
            entry, stored_at = read_entry(raw)
        except (KeyError, TypeError, ValueError) as exc:
            self._degraded("a cache entry is unreadable; treating it as a miss", exc)
            return None
        if self.ttl is not None and self._clock() - stored_at > self.ttl:
            return None
        return entry

    async def _save(self, key: str, response: Response) -> None:
        try:
            value = response_entry(response, self._clock())
        except (TypeError, ValueError) as exc:
            self._degraded("a response cannot be stored in the cache", exc)
            return
        await self._write(key, value)

    async def _save_events(self, key: str, recorded: Recording) -> None:
        try:
            value = recorded.entry(self._clock())
        except (TypeError, ValueError) as exc:
            self._degraded("a response cannot be stored in the cache", exc)
            return
        await self._write(key, value)

    async def aclose(self) -> None:
        """Commit the entries still pending (a backend's ``flush()``, as a disk cache's);
        the client calls this on close."""
        flush = getattr(self.backend, "flush", None)
        if callable(flush):
            done = flush()
            if inspect.isawaitable(done):
                await done

    async def _write(self, key: str, value: bytes) -> None:
        try:
            await self.backend.save(key, value, self.ttl)
        except Exception as exc:
            self._degraded("the cache cannot be written; the answer was not stored", exc)

    def _degraded(self, what: str, exc: BaseException) -> None:
        detail = f"{what} ({type(exc).__name__}: {exc})"
        if self._warned:
            logger.debug("%s", detail)
            return
        self._warned = True
        logger.warning(
            "%s; further cache problems are logged at DEBUG level. Deleting the cache "
            "directory resets it.",
            detail,
        )
