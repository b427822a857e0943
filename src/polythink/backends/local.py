"""The in-process backends: limit state in this process's memory, cache entries in a store.

:class:`LocalLimits` keeps a source's budget for one process (the default, and the fallback
of a shared backend whose server does not answer); :class:`LocalBudgets` does the same for
spend budgets (one per process by default, :func:`process_budgets`). :class:`StoreCache` runs
a synchronous cache store (diskcache, or any object with ``get``/``set``/``delete``) behind
the async :class:`~polythink.backends.base.CacheBackend` protocol.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from polythink.backends.base import Lease, Reservation, Tally, server_pause
from polythink.backends.bucket import EPSILON, TokenBucket
from polythink.budgets import Line, fingerprint, window_bounds
from polythink.types import RateLimit

if TYPE_CHECKING:
    from polythink.backends.share import Share

__all__ = [
    "Clock",
    "LocalBudgets",
    "LocalLimits",
    "MonotonicClock",
    "ProcessLimits",
    "StoreCache",
    "TokenBucket",
    "process_budgets",
]

_THREADS = 4


class Clock(Protocol):
    """Where the rate limiter reads time and sleeps; inject a fake one in tests.

    ``now()`` returns seconds on a monotonic scale; ``sleep(seconds)`` waits that long and
    must be cancellable (the limiter cuts a sleep short when tokens come back).
    """

    def now(self) -> float:
        """Return the current time in seconds (monotonic)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class MonotonicClock:
    """The real clock: ``time.monotonic`` and ``anyio.sleep``."""

    def now(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep with ``anyio.sleep``."""
        await anyio.sleep(seconds)


class _SlotLease:
    __slots__ = ("_slots",)

    def __init__(self, slots: anyio.Semaphore) -> None:
        self._slots: anyio.Semaphore | None = slots

    async def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.release()


class _NoSlot:
    """The lease of a source without a concurrency cap."""

    __slots__ = ()

    async def release(self) -> None:
        return None


_NO_SLOT = _NoSlot()


class LocalLimits:
    """One source's budget in this process: RPM and TPM :class:`TokenBucket` s, an
    ``anyio.Semaphore`` of ``max_concurrency`` slots and the time a server pause ends.

    Nothing here waits on the clock (the rate-limit layer does); ``acquire`` waits for a
    slot with anyio's own timer. Every method completes without suspending except
    ``acquire`` when no slot is free.

    Args:
        rpm, tpm: the per-minute limits (``None``: not limited).
        max_concurrency: the most calls at once (``None``: no cap).
        clock: the time the buckets and the pause are read on.

    Attributes ``requests`` and ``tokens`` are the buckets (``None`` when that limit is
    unset); ``paused_until`` the clock time before which the server asked for no calls.
    """

    max_nap = math.inf

    def __init__(
        self,
        rpm: float | None,
        tpm: float | None,
        max_concurrency: int | None,
        clock: Clock,
    ) -> None:
        self.clock = clock
        now = clock.now()
        self.requests = TokenBucket(rpm, now) if rpm else None
        self.tokens = TokenBucket(tpm, now) if tpm else None
        self._slots = anyio.Semaphore(max_concurrency) if max_concurrency else None
        self.paused_until = -math.inf

    @property
    def local(self) -> LocalLimits:
        """This object: it is the in-process state."""
        return self

    async def acquire(self, timeout: float | None) -> Lease | None:
        """Take a slot within ``timeout`` seconds (``0``: only if free now); ``None`` if not."""
        slots = self._slots
        if slots is None:
            return _NO_SLOT
        try:
            slots.acquire_nowait()
        except anyio.WouldBlock:
            pass
        else:
            return _SlotLease(slots)
        if timeout is not None and timeout <= 0:
            return None
        try:
            with anyio.fail_after(timeout):
                await slots.acquire()
        except TimeoutError:
            return None
        return _SlotLease(slots)

    async def admit(self, cost: int) -> tuple[Lease | None, float, str]:
        """Take a free slot and, holding it, try :meth:`take`; ``(None, 0.0, "")`` if no
        slot is free."""
        lease = await self.acquire(0)
        if lease is None:
            return None, 0.0, ""
        wait, reason = await self.take(cost)
        return lease, wait, reason

    async def take(self, cost: int) -> tuple[float, str]:
        """Take one request and ``cost`` tokens now, or return the wait and its gate."""
        now = self.clock.now()
        wait, reason = self.wait(cost, now)
        if wait > 0:
            return wait, reason
        if self.requests is not None:
            self.requests.take(1, now)
        if self.tokens is not None:
            self.tokens.take(cost, now)
        return 0.0, ""

    def wait(self, cost: int, now: float) -> tuple[float, str]:
        """Return the seconds before a call of ``cost`` tokens may be taken, and the gate."""
        wait, reason = self.paused_until - now, "server_pause"
        if self.requests is not None:
            needed = self.requests.wait(1, now)
            if needed > wait:
                wait, reason = needed, "rpm_limit"
        if self.tokens is not None:
            needed = self.tokens.wait(cost, now)
            if needed > wait:
                wait, reason = needed, "tpm_limit"
        return (wait if wait > EPSILON else 0.0), reason

    async def settle(self, refund: int, limits: RateLimit | None, pause: float | None) -> None:
        """Give ``refund`` tokens back, shrink to reported counts, pause (see the protocol)."""
        now = self.clock.now()
        if refund and self.tokens is not None:
            self.tokens.give(refund, now)
        if limits is not None:
            for remaining, bucket in (
                (limits.requests_remaining, self.requests),
                (limits.tokens_remaining, self.tokens),
            ):
                if remaining is not None and bucket is not None:
                    bucket.shrink(remaining, now)
        seconds = server_pause(limits, pause)
        if seconds is not None:
            self.paused_until = max(self.paused_until, now + seconds)

    async def finish(
        self, lease: Lease | None, refund: int, limits: RateLimit | None, pause: float | None
    ) -> None:
        """Release ``lease`` and :meth:`settle`."""
        if lease is not None:
            await lease.release()
        await self.settle(refund, limits, pause)


_PRUNE_AT = 4096
"""Lines counted before a pass that forgets windows already over."""


class LocalBudgets:
    """Spend budgets counted in this process's memory, on its wall clock.

    Implements :class:`~polythink.backends.base.BudgetBackend`. Every method completes
    without suspending, under a lock (clients on other threads' event loops may share it).
    Lines whose window is over are forgotten once more than 4,096 lines are counted.

    Args:
        clock: wall-clock Unix seconds (``time.time``; inject one in tests), read for the
            UTC calendar window of every operation.
        journal: keep what is counted here apart (:meth:`unsynced`), so a shared backend
            whose server was down can add it to the shared count once the server answers.

    As the fallback of a shared backend, :meth:`reserve` and :meth:`peek` take that
    backend's :class:`~polythink.backends.share.Share`: each line then counts against this
    process's share of what was left of it when the shared count was last taken
    (:meth:`seed`), in the share's terms (see :class:`~polythink.backends.base.Tally`). A
    line whose shared count was never taken in its window is unknown (``known=False``: no
    share, nothing reserved) unless the share says it may be taken as unspent
    (:meth:`~polythink.backends.share.Share.unread_is_unspent`).
    """

    def __init__(self, clock: Callable[[], float] = time.time, *, journal: bool = False) -> None:
        self.clock = clock
        self._counts: dict[str, list[int]] = {}
        """Line key -> [window start, window end, spent, the shared count seeded in it
        (-1: none was)]."""
        self._journal: dict[str, list[int]] | None = {} if journal else None
        self._lock = threading.Lock()

    def _tally(self, line: Line, now: float, share: Share | None = None) -> Tally:
        start, end = window_bounds(line.per, now)
        count = self._counts.get(line.key)
        spent, seen = (count[2], count[3]) if count is not None and count[0] == start else (0, -1)
        if share is None:
            return Tally(spent, start, end)
        if seen < 0:
            if not share.unread_is_unspent(start):
                return Tally(spent, start, end, 0, share.workers, known=False)
            seen = 0
        limit, used = share.allowance(line.limit, seen)
        return Tally(used + spent - seen, start, end, limit, share.workers)

    def _add(self, key: str, tally: Tally, amount: int) -> int:
        count = self._counts.get(key)
        if count is None or count[0] != tally.start:
            if len(self._counts) >= _PRUNE_AT:
                self._prune()
            count = self._counts[key] = [tally.start, tally.end, 0, -1]
        count[2] = max(0, count[2] + amount)
        journal = self._journal
        if journal is not None:
            noted = journal.get(key)
            if noted is None or noted[0] != tally.start:
                noted = journal[key] = [tally.start, 0]
            noted[1] += amount
        return count[2]

    def _prune(self) -> None:
        now = self.clock()
        for key in [k for k, count in self._counts.items() if count[1] <= now]:
            del self._counts[key]

    async def reserve(
        self, lines: Sequence[Line], cost: int, *, share: Share | None = None
    ) -> Reservation:
        """Add ``cost`` to every line if each has it left, else to none (see the protocol);
        with a ``share``, if each has it left of this process's share (an unknown line has
        nothing left)."""
        now = self.clock()
        with self._lock:
            tallies = [self._tally(line, now, share) for line in lines]
            taken = all(
                t.known and t.spent + cost <= (line.limit if t.share is None else t.share)
                for t, line in zip(tallies, lines, strict=True)
            )
            if taken:
                for line, tally in zip(lines, tallies, strict=True):
                    self._add(line.key, tally, cost)
        return Reservation(taken, tallies, False)

    async def settle(
        self, lines: Sequence[Line], reservation: Reservation, delta: int
    ) -> list[int | None]:
        """Correct each line still in the reserved window by ``delta`` (see the protocol)."""
        spent: list[int | None] = []
        with self._lock:
            for line, tally in zip(lines, reservation.tallies, strict=True):
                count = self._counts.get(line.key)
                if count is None or count[0] != tally.start:
                    spent.append(None)
                else:
                    spent.append(self._add(line.key, tally, delta))
        return spent

    async def peek(self, lines: Sequence[Line], *, share: Share | None = None) -> list[Tally]:
        """Return each line's tally now (against this process's ``share``, if given)."""
        now = self.clock()
        with self._lock:
            return [self._tally(line, now, share) for line in lines]

    def seed(self, key: str, tally: Tally) -> None:
        """Take a shared count as this process's, plus what this process counted on its
        own in that window and has not shared yet."""
        with self._lock:
            noted = self._journal.get(key) if self._journal is not None else None
            extra = noted[1] if noted is not None and noted[0] == tally.start else 0
            spent = max(0, tally.spent + extra)
            self._counts[key] = [tally.start, tally.end, spent, tally.spent]

    def unsynced(self, key: str) -> tuple[int, int]:
        """Take what this process counted under ``key`` on its own: ``(window start,
        nano-dollars)``, ``(0, 0)`` when nothing; the journal forgets it."""
        if self._journal is None:
            return 0, 0
        with self._lock:
            noted = self._journal.pop(key, None)
        return (noted[0], noted[1]) if noted is not None else (0, 0)

    def restore(self, key: str, start: int, amount: int) -> None:
        """Put back what :meth:`unsynced` took, when it could not be shared after all."""
        if self._journal is not None and amount:
            with self._lock:
                noted = self._journal.get(key)
                if noted is None or noted[0] != start:
                    self._journal[key] = [start, amount]
                else:
                    noted[1] += amount


_process_budgets = LocalBudgets()


def process_budgets() -> LocalBudgets:
    """The spend budgets of this process: every client without shared limits counts here,
    so clients naming the same budget share it."""
    return _process_budgets


class ProcessLimits:
    """The sources' limits in this process, shared by every client given it as ``limits``.

    A client keeps one :class:`LocalLimits` per source of its own; clients that reach the
    same account (provider, base URL and a fingerprint of the key: the unit a provider's
    limits apply to) through this object share one, as a Redis store shares them across
    processes. ``polythink serve`` gives it to the client of each route, so two routes to
    one source count against one budget. The first client to name an account sets its
    limits.
    """

    def __init__(self) -> None:
        self._limits: dict[tuple[str, str, str], LocalLimits] = {}

    def for_source(
        self,
        provider: str,
        base_url: str,
        api_key: str | None,
        *,
        rpm: float | None,
        tpm: float | None,
        max_concurrency: int | None,
        fallback: LocalLimits,
    ) -> LocalLimits:
        """The account's :class:`LocalLimits`: ``fallback`` for the first source to name
        it, the same object for every later one."""
        return self._limits.setdefault((provider, base_url, fingerprint(api_key)), fallback)


class StoreCache:
    """A synchronous cache store behind the async cache protocol.

    Writes, and reads from stores other than diskcache, run in worker threads
    (``anyio.to_thread.run_sync``) under a small :class:`anyio.CapacityLimiter`; with
    ``inline_reads`` a read runs in the caller's task, for stores whose reads are cheaper
    than the hand-off (a diskcache read of one SQLite row in WAL mode takes about 10 µs and
    does not wait for writers; a thread hand-off costs about 130 µs of CPU, polythink bench,
    2026-11-30).

    Args:
        store: an object with ``get(key)`` and ``set(key, value, expire=seconds)``.
        inline_reads: read in the caller's task rather than a worker thread.
    """

    def __init__(self, store: Any, *, inline_reads: bool = False) -> None:
        self.store = store
        self.inline_reads = inline_reads
        self._threads = anyio.CapacityLimiter(_THREADS)

    async def load(self, key: str) -> bytes | None:
        """Return the store's value under ``key`` (``None`` when absent)."""
        if self.inline_reads:
            value: bytes | None = self.store.get(key)
            return value
        result: bytes | None = await anyio.to_thread.run_sync(
            self.store.get, key, limiter=self._threads
        )
        return result

    async def save(self, key: str, value: bytes, ttl: float | None) -> None:
        """Store ``value`` in a worker thread, with ``expire=ttl``."""

        def write() -> None:
            self.store.set(key, value, expire=ttl)

        await anyio.to_thread.run_sync(write, limiter=self._threads)
