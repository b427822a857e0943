"""The protocols a middleware talks to: limit state, budget spend and cache entries.

A rate-limit layer keeps its budget in a :class:`LimitBackend`, a spend-budget layer its
spend in a :class:`BudgetBackend` and a cache layer its entries in a :class:`CacheBackend`;
each has an in-process implementation (:mod:`polythink.backends.local`,
:mod:`polythink.backends.disk`) and a Redis one (:mod:`polythink.backends.redis`) shared by
every process that names the same server. The middleware never knows which it holds.
:class:`CacheStore` is the synchronous store (such as diskcache) that an in-process cache
backend runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from polythink.budgets import Line
from polythink.types import RateLimit

__all__ = [
    "DEFAULT_SIZE_LIMIT",
    "MAX_SERVER_PAUSE",
    "BudgetBackend",
    "CacheBackend",
    "CacheStore",
    "CoalescingCache",
    "Lease",
    "LimitBackend",
    "Reservation",
    "Tally",
    "server_pause",
]

DEFAULT_SIZE_LIMIT = 2**30
"""Default size limit of a cache, in bytes (1 GiB, diskcache's own default)."""

MAX_SERVER_PAUSE = 600.0
"""The longest pause, in seconds, one provider answer can put on a source: a 429's
``retry-after`` or a reset of ``x-ratelimit-reset-*`` / ``anthropic-ratelimit-*-reset``
headers reporting nothing left. A longer value (``Retry-After: 99999999999``, a daily quota's
reset hours away) pauses the source this long, in this process or, on Redis, in every process
sharing the account; then one call goes out again, and its answer pauses the source anew if
the limit still holds. Nothing a server sends stops a fleet for longer."""


class Lease(Protocol):
    """One concurrency slot held by one call; give it back with :meth:`release`."""

    async def release(self) -> None:
        """Give the slot back. Idempotent; never raises, also inside a cancelled scope."""
        ...


class LimitBackend(Protocol):
    """The budget of one source: two per-minute token buckets, concurrency slots, a pause.

    The buckets (requests and tokens per minute) hold one minute of their limit, start
    full, refill continuously and may go into debt: a call larger than the whole bucket
    passes when the bucket is full. Slots cap the calls running at once. A pause set from a
    429 or from rate-limit headers reporting nothing left stops every call until it ends.

    Attributes:
        local: the in-process state: the backend itself when it is in-process, else the
            fallback a shared backend uses while its server does not answer.
        max_nap: the longest a waiting call sleeps before asking again, in seconds
            (``math.inf`` when only this process gives tokens back, and then wakes the
            sleeper itself).
    """

    @property
    def local(self) -> LimitBackend:
        """The in-process state (see the class docstring)."""
        ...

    @property
    def max_nap(self) -> float:
        """Seconds a waiting call sleeps at most before asking again."""
        ...

    async def acquire(self, timeout: float | None) -> Lease | None:
        """Take a slot, waiting at most ``timeout`` seconds (``None``: no bound, ``0``: only
        if one is free now); ``None`` when no slot came in time."""
        ...

    async def admit(self, cost: int) -> tuple[Lease | None, float, str]:
        """Take a slot if one is free now and, holding it, try :meth:`take` (one step).

        Returns ``(None, 0.0, "")`` when no slot is free (nothing taken), else the lease
        and what :meth:`take` returned.
        """
        ...

    async def take(self, cost: int) -> tuple[float, str]:
        """Take one request and ``cost`` tokens if both buckets and the pause allow it now.

        Returns ``(0.0, "")`` when taken; otherwise ``(seconds, reason)``, the wait before
        the call could be taken and the gate that needs it (``"server_pause"``,
        ``"rpm_limit"``, ``"tpm_limit"``), having taken nothing.
        """
        ...

    async def settle(self, refund: int, limits: RateLimit | None, pause: float | None) -> None:
        """Apply what a finished call taught: put ``refund`` tokens back (negative: charge
        more), lower the buckets to the ``remaining`` counts the provider reported, and
        pause for ``pause`` seconds or until a reported reset of a budget with nothing
        left, whichever is later."""
        ...

    async def finish(
        self, lease: Lease | None, refund: int, limits: RateLimit | None, pause: float | None
    ) -> None:
        """Release ``lease`` (if given and still held) and :meth:`settle`, in one step."""
        ...


def server_pause(limits: RateLimit | None, pause: float | None) -> float | None:
    """Return the pause in seconds a call's answer asks for, or ``None``.

    ``pause`` (a 429's ``retry-after``), else the reset of a budget the headers report as
    exhausted (``remaining == 0``), the longest of them, never above
    :data:`MAX_SERVER_PAUSE` (``math.inf`` and NaN included).
    """
    longest = pause if pause else None
    if limits is not None:
        for remaining, reset in (
            (limits.requests_remaining, limits.requests_reset),
            (limits.tokens_remaining, limits.tokens_reset),
        ):
            if remaining == 0 and reset and (longest is None or reset > longest):
                longest = reset
    if longest is None:
        return None
    return longest if longest <= MAX_SERVER_PAUSE else MAX_SERVER_PAUSE


class Tally(NamedTuple):
    """One budget line in its current window: nano-dollars ``spent`` so far (reservations
    of calls in flight included) and the window's ``start`` and ``end`` (Unix seconds).

    While a shared backend's server does not answer, the process counts against its share
    (:mod:`polythink.backends.share`): ``share`` is then its share of the line's limit
    (1/``workers`` of it, nano-dollars), and ``spent`` its part of what the line had spent
    when it last read it plus what it spent since, so that ``spent / share`` is the fraction
    of the budget the fleet has spent if every process spent as this one did. ``known`` is
    ``False`` when the process never read what the line spent in this window and cannot take
    it as nothing (the server never answered it, or answered since the window began, and no
    ``workers`` is configured): it then has no share (``share`` 0) and reserves nothing."""

    spent: int
    start: int
    end: int
    share: int | None = None
    workers: int = 1
    known: bool = True


class Reservation(NamedTuple):
    """What :meth:`BudgetBackend.reserve` did: whether it took the cost (``taken``), each
    line's tally before it (``tallies``, in the lines' order) and whether the shared server
    or this process's count holds it (``shared``: settle it where it was taken)."""

    taken: bool
    tallies: list[Tally]
    shared: bool


class BudgetBackend(Protocol):
    """Where spend budgets are counted: per line (a budget for one scope value), the
    nano-dollars spent in the line's current UTC calendar window.

    Every operation reads the window from the backend's own clock (the process's wall clock,
    or the Redis server's ``TIME``); a count from an earlier window reads as 0.
    """

    async def reserve(self, lines: Sequence[Line], cost: int) -> Reservation:
        """Add ``cost`` nano-dollars to every line if each has that much left of its limit
        in its current window, else to none (all or nothing, in one step)."""
        ...

    async def settle(
        self, lines: Sequence[Line], reservation: Reservation, delta: int
    ) -> list[int | None]:
        """Correct what ``reservation`` took by ``delta`` nano-dollars (the call's cost less
        its reservation; negative gives back), in each line whose window is still the one
        reserved in. Returns each line's spent after it (``None``: that window is over).

        Called when a call ends however it ends, cancellation included: a backend that
        suspends here shields its I/O from cancellation and bounds it in time."""
        ...

    async def peek(self, lines: Sequence[Line]) -> list[Tally]:
        """Return each line's tally now, changing nothing."""
        ...


class CacheBackend(Protocol):
    """Where cache entries live. Keys are 64-character hex strings, values ``bytes``.

    ``load`` returns the stored value or ``None``; ``save`` stores a value for ``ttl``
    seconds (``None``: no expiry). Either may raise; the cache layer then treats the
    lookup as a miss and the write as not done. A backend that defers its writes may also
    have an async ``flush()``, which the cache layer awaits when the client closes.
    """

    async def load(self, key: str) -> bytes | None:
        """Return the value stored under ``key``, or ``None``."""
        ...

    async def save(self, key: str, value: bytes, ttl: float | None) -> None:
        """Store ``value`` under ``key`` for ``ttl`` seconds (``None``: no expiry)."""
        ...


class CoalescingCache(CacheBackend, Protocol):
    """A cache backend shared by processes that lets one caller fill an entry for all.

    Identical calls in different processes have one key. The first caller to miss takes the
    key's *fill lease*, a short lease renewed while it holds it, calls, stores the answer
    and releases the lease; the others wait for the entry instead of calling. A holder that
    ends without storing (an error, a cancelled call) releases the lease, one that dies lets
    it expire: then one of the waiting callers takes it over. A backend whose server does
    not answer gives every caller the lease (a no-op one) and no entry, so nobody waits.
    """

    async def claim(self, key: str) -> tuple[bytes | None, Lease | None]:
        """Look ``key`` up and, on a miss, try to take its fill lease, in one step.

        Returns ``(value, None)`` on a hit; ``(None, lease)`` on a miss this caller fills
        (store the answer with :meth:`save`, then release the lease, whatever happens);
        ``(None, None)`` on a miss another caller is filling (then :meth:`wait_for` it).
        """
        ...

    async def wait_for(self, key: str, timeout: float | None) -> tuple[bytes | None, Lease | None]:
        """Wait for the entry another caller is filling, at most ``timeout`` seconds
        (``None``: the backend's own bound only); the result reads as :meth:`claim`'s, and
        ``(None, None)`` says the wait ended with the other caller still filling it."""
        ...


class CacheStore(Protocol):
    """What the cache needs from a store; a ``diskcache.Cache`` or ``FanoutCache`` is one.

    Methods are synchronous and are called from worker threads. Keys are 64-character hex
    strings; values are ``bytes``.

    - ``get(key)``: the stored value, or ``None`` when absent.
    - ``set(key, value, expire=None)``: store ``value``; ``expire`` is the TTL in seconds
      (``None``: no expiry), for stores that evict on their own.
    - ``delete(key)``: forget ``key`` (absent keys are not an error).

    An optional ``ttl`` attribute (seconds, or ``None``) gives the entries' freshness when
    the store is passed to ``Client(cache=...)``. Any exception a method raises makes that
    lookup a miss (and that write a no-op), with one warning per cache.
    """

    def get(self, key: str) -> Any:
        """Return the value stored under ``key``, or ``None``."""
        ...

    def set(self, key: str, value: bytes, expire: float | None = None) -> Any:
        """Store ``value`` under ``key`` for ``expire`` seconds (``None``: no expiry)."""
        ...

    def delete(self, key: str) -> Any:
        """Remove ``key``."""
        ...
