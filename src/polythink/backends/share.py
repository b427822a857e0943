"""One process's share of a budget its fleet keeps on a server that stopped answering.

A shared backend keeps a budget (per-minute buckets, concurrency slots, a pause) on a server
every process of a fleet talks to. When the server stops answering, each process must go on
alone without the fleet sending N times the budget. The rules, the same for every budget
kept this way:

1. **Its share.** A process takes ``1 / workers`` of the budget: ``workers`` is configured,
   else the number of live processes it last saw sharing the budget (1 if it never reached
   the server). Whole units (concurrency slots) are split by rank among the workers, so the
   shares add up to the total (``total // workers``, plus one for the first
   ``total % workers`` ranks).
2. **Of what remained.** Its buckets start at its share of the levels it last saw, refilled
   at its share of the rate since it saw them — not full. A budget that does not refill (a
   spend budget's calendar window) leaves it its share of what was left in the window when
   it last saw it; a window begun since is whole again, and so is its share of it.
3. **What it never saw.** A process that never reached the server cannot know how many
   share the budget, nor what they used. With ``workers`` configured it takes ``1 /
   workers`` of a full budget (the operator said how many share it). Without, its buckets
   start empty (the others may have used them) and refill at the whole rate, so only the
   refill is ever taken, N processes taking up to N times it (the providers' own limits
   answer with 429s); a spend budget whose spend in its window it never read is unknown
   and allows nothing (:meth:`Share.unread_is_unspent`): money is not spent on a guess.
4. **Running calls keep counting.** What it holds when the server goes away (its running
   calls' slots) counts against its share; a process above its share starts nothing until
   it is below.
5. **Back together.** When the server answers again, the process charges the shared buckets
   (and budgets) with what it spent alone and leases its running calls there again. A server
   that lost a bucket (it restarted empty) first gets the level last seen, refilled since,
   from the first process back, instead of a full bucket; once all are back it holds what
   the fleet left.

:class:`Share` keeps what a process last saw (the workers, the bucket levels; the spend a
budget line had is kept with the fallback's count) and does the arithmetic; the backend
decides when the server is away. Pure: no I/O, times on the caller's clock.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from polythink.backends.bucket import TokenBucket
from polythink.errors import InvalidInputError

__all__ = ["Share", "split_workers"]


def split_workers(url: str) -> tuple[str, int | None]:
    """Return ``url`` without its ``workers`` query option, and that option (``None``
    when absent): ``redis://redis:6379/0?workers=4`` -> ``("redis://redis:6379/0", 4)``.
    The other query options stay (redis-py reads them).

    Raises:
        ValueError: for a ``workers`` that is not a whole number from 1 up (the message
            quotes the option alone, never the URL and its password).
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    found = [value for name, value in query if name == "workers"]
    if not found:
        return url, None
    value = found[-1]
    if not (value.isdigit() and int(value) >= 1):
        raise InvalidInputError(
            f"workers={value!r} in the URL is not a whole number from 1 up: it is how many "
            "processes share the limits and budgets (?workers=4)"
        )
    kept = urlencode([(name, v) for name, v in query if name != "workers"])
    return urlunsplit(parts._replace(query=kept)), int(value)


class Share:
    """What one process last saw of a fleet's shared budget, and its share of it.

    Args:
        workers: the number of processes sharing the budget, if known in advance; ``None``:
            the number last seen on the server.
        identity: this process's name among the workers (its rank decides who gets the
            leftover whole units when it was never seen on the server).

    Raises:
        ValueError: for a ``workers`` that is not a positive integer.
    """

    def __init__(self, workers: int | None = None, *, identity: str = "") -> None:
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise InvalidInputError(f"workers must be a positive integer or None; got {workers!r}")
        self.configured = workers
        self.seen_workers: int | None = None
        self.rank: int | None = None
        self.levels: dict[str, float] = {}
        """Bucket name -> the level last seen (units of its limit)."""
        self.seen_at: float | None = None
        self.paused_until = -math.inf
        """Clock time until which the server's pause ran when last seen."""
        self.spent: dict[str, float] = {}
        """Bucket name -> what this process took alone since :meth:`begin` (refunds
        subtracted; may be negative when calls admitted before give tokens back)."""
        self.counted_at: float | None = None
        """When the server last counted the workers (:meth:`counted`), on the caller's
        clock; ``None``: never."""
        self._default_rank = zlib.crc32(identity.encode())

    def seen(
        self,
        *,
        workers: int,
        rank: int,
        levels: Mapping[str, float],
        pause: float,
        now: float,
    ) -> None:
        """Record an answer of the server: ``workers`` live processes, this one ranked
        ``rank`` among them, the bucket ``levels``, ``pause`` seconds of pause left, at
        ``now``."""
        self.counted(workers, now)
        self.rank = rank
        self.levels = dict(levels)
        self.seen_at = now
        self.paused_until = now + pause if pause > 0 else -math.inf

    def counted(self, workers: int, now: float) -> None:
        """Record the number of live processes the server counted sharing the budget, at
        ``now``."""
        self.seen_workers = max(1, workers)
        self.counted_at = now

    @property
    def reached(self) -> bool:
        """Whether the server ever answered this process (it counted the workers)."""
        return self.seen_workers is not None

    def unread_is_unspent(self, start: float) -> bool:
        """Whether a budget that does not refill, whose use in the window beginning at
        ``start`` this process never read, may be taken as unused in it: ``workers`` is
        configured (each process then has its share of the whole), or the server last
        answered before the window began (nothing could be counted in it then). Otherwise
        its use is unknown and the process has no share of it."""
        at = self.counted_at
        return self.configured is not None or (at is not None and at < start)

    @property
    def workers(self) -> int:
        """The number of processes the budget is split among."""
        return self.configured or self.seen_workers or 1

    @property
    def fraction(self) -> float:
        """This process's share, ``1 / workers``."""
        return 1.0 / self.workers

    def begin(self) -> None:
        """Start counting what this process spends alone (the server went away)."""
        self.spent = {}

    def spend(self, name: str, amount: float) -> None:
        """Count ``amount`` units of bucket ``name`` taken alone (negative: given back)."""
        self.spent[name] = self.spent.get(name, 0.0) + amount

    def units(self, total: int) -> int:
        """Return this process's whole units of ``total`` (slots): the shares add up to it."""
        workers = self.workers
        rank = self.rank if self.rank is not None and self.rank < workers else None
        if rank is None:
            rank = self._default_rank % workers
        return total // workers + (1 if rank < total % workers else 0)

    def allowance(self, total: int, used: int) -> tuple[int, int]:
        """Return this process's share of a budget that does not refill, of ``total`` whole
        units of which ``used`` were used when it last saw it (``used`` = 0 for a window
        begun since): ``(its share of the total, its part of what was used)``. Their
        difference, what is left to it, is its share of what was left, rounded down (below
        0 when the budget was overspent); what it spends alone since counts against it."""
        workers = self.workers
        share = total // workers
        return share, share - (total - used) // workers

    def bucket(self, name: str, per_minute: float, now: float) -> TokenBucket:
        """Return a bucket for this process alone: its share of ``per_minute`` as capacity
        and rate, holding its share of the level last seen, refilled since. When none was
        seen: full with ``workers`` configured, else empty (the whole capacity and rate,
        from nothing: the others may have used the shared bucket up)."""
        share = per_minute * self.fraction
        seen = self.levels.get(name)
        if seen is None or self.seen_at is None:
            return TokenBucket(share, now, level=None if self.configured else 0.0)
        return TokenBucket(share, min(self.seen_at, now), level=seen * self.fraction)

    def fleet_level(self, name: str, per_minute: float, now: float) -> float | None:
        """Return what bucket ``name`` of the whole fleet would hold at ``now`` had nobody
        taken anything since it was last seen: the level seen, refilled at ``per_minute``
        (``None`` when never seen). Rejoining a server that lost the bucket, a process sets
        it to this before charging what it spent alone; the others then charge theirs."""
        seen = self.levels.get(name)
        if seen is None or self.seen_at is None:
            return None
        return TokenBucket(per_minute, min(self.seen_at, now), level=seen).level(now)
