"""A token bucket: one per-minute limit of one process, refilled continuously.

:class:`TokenBucket` is the arithmetic of the in-process limits
(:class:`~polythink.backends.local.LocalLimits`) and of a process's share of a fleet's limit
while its server is away (:class:`~polythink.backends.share.Share`). Pure: no I/O, no clock of
its own (every reading is the caller's).
"""

from __future__ import annotations

__all__ = ["EPSILON", "TokenBucket"]

_PERIOD = 60.0
"""Seconds per budget period: the limits are per minute."""

EPSILON = 1e-9
"""A wait, in seconds, or a shortfall, in units, this small is none (floating-point residue)."""


class TokenBucket:
    """A bucket holding up to one minute of a per-minute limit.

    It starts full and refills continuously at ``per_minute / 60`` units per second. A call
    may take when the bucket holds its cost, or is full when the cost is larger than the
    bucket; taking may drive the level below zero (debt), which later callers wait out.

    Args:
        per_minute: the limit (requests or tokens per minute); the bucket's capacity.
        now: the clock reading at creation, in seconds.
        level: the units it holds at ``now`` (``None``: full; never above full).
    """

    __slots__ = ("_level", "_stamp", "capacity", "rate")

    def __init__(self, per_minute: float, now: float, *, level: float | None = None) -> None:
        self.capacity = float(per_minute)
        self.rate = self.capacity / _PERIOD
        self._level = self.capacity if level is None else min(self.capacity, level)
        self._stamp = now

    def level(self, now: float) -> float:
        """Return the units available at ``now`` (negative while in debt)."""
        if now > self._stamp:
            self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
            self._stamp = now
        return self._level

    def wait(self, cost: float, now: float) -> float:
        """Return the seconds until a call costing ``cost`` may take (0 when it may now)."""
        need = min(cost, self.capacity)
        missing = need - self.level(now)
        return 0.0 if missing <= EPSILON else missing / self.rate

    def take(self, cost: float, now: float) -> None:
        """Remove ``cost`` units (the level may go below zero)."""
        self._level = self.level(now) - cost

    def give(self, amount: float, now: float) -> None:
        """Add ``amount`` units back (negative to charge more), never above capacity."""
        self._level = min(self.capacity, self.level(now) + amount)

    def shrink(self, remaining: float, now: float) -> None:
        """Lower the level to ``remaining`` when the provider reports less than we hold."""
        self._level = min(self.level(now), remaining)
