"""The two protocols a middleware talks to: limit state and cache entries.

A rate-limit layer keeps its budget in a :class:`LimitBackend` and a cache layer its entries
in a :class:`CacheBackend`; each has an in-process implementation
(:mod:`polythink.backends.local`, :mod:`polythink.backends.disk`) and a Redis one
(:mod:`polythink.backends.redis`) shared by every process that names the same server. The
middleware never knows which it holds. :class:`CacheStore` is the synchronous store (such as
diskcache) that an in-process cache backend runs.
"""

from __future__ import annotations

from typing import Any, Protocol

from polythink.types import RateLimit

__all__ = [
    "DEFAULT_SIZE_LIMIT",
    "CacheBackend",
    "CacheStore",
    "Lease",
    "LimitBackend",
    "server_pause",
]

DEFAULT_SIZE_LIMIT = 2**30
"""Default size limit of a cache, in bytes (1 GiB, diskcache's own default)."""


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
    exhausted (``remaining == 0``), the longest of them.
    """
    longest = pause if pause else None
    if limits is not None:
        for remaining, reset in (
            (limits.requests_remaining, limits.requests_reset),
            (limits.tokens_remaining, limits.tokens_reset),
        ):
            if remaining == 0 and reset and (longest is None or reset > longest):
                longest = reset
    return longest


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
