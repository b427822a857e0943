"""The simulated prompt cache: what an earlier request's prefix saves a later one.

Providers cache the longest prefix a request shares with earlier ones and bill those tokens
at a fraction of the input price; a request that changes its start (a system prompt edited
every call) misses the whole conversation. The simulator plays that, so the demo, the tests
and the benchmark show what an edited prefix costs.

A request is a list of units in the order the provider reads it (for example the system
prompt and tools, then each message), each with the hash of its content and its tokens (the
simulator's estimate: one per 4 characters of its JSON, at least 1). A prefix is named by
the rolling hash of its units. Per provider's granularity (their docs as read 2026-12):

- **OpenAI** (Chat Completions and Responses): automatic; every prefix of a request is
  cached; a hit is reported from 1,024 tokens on, in steps of 128
  (``prompt_tokens_details.cached_tokens``: "cache hits occur in increments of 128 tokens",
  platform.openai.com prompt-caching guide).
- **Anthropic**: only with ``cache_control`` (top level, or on a block); the prefix up to each
  breakpoint is written (``cache_creation_input_tokens``), and a later request reads the
  longest written prefix that ends at most 20 blocks before one of its breakpoints
  (``cache_read_input_tokens``; "the system automatically checks for cache hits at all
  previous content block boundaries (up to 20 blocks before your explicit breakpoint)"),
  from 1,024 tokens on (ANT-DOC-caching, WIRE.md §3.5). The units here are messages, not
  blocks, so the look-back is 20 messages.
- **Gemini**: implicit caching of every prefix, a hit from 1,024 tokens on
  (``usageMetadata.cachedContentTokenCount``; ai.google.dev context-caching, "implicit
  caching", 2.5 Flash minimum).

Entries live as long as the simulator (no time-to-live), up to :attr:`PrefixCache.LIMIT`
prefixes, the least recently used forgotten first.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "CacheUse",
    "PrefixCache",
    "Unit",
    "automatic",
    "canonical",
    "tokens_of",
    "unit",
    "without_marks",
]

_MARKS = frozenset({"cache_control", "prompt_cache_breakpoint"})
"""Keys that mark a breakpoint: they change no content, so no prefix either."""


def without_marks(value: Any) -> Any:
    """``value`` with every cache marker removed (``cache_control``,
    ``prompt_cache_breakpoint``), at any depth."""
    if isinstance(value, dict):
        return {k: without_marks(v) for k, v in value.items() if k not in _MARKS}
    if isinstance(value, list):
        return [without_marks(item) for item in value]
    return value


def canonical(value: Any) -> bytes:
    """The canonical JSON of ``value`` (keys sorted, compact): JSON formatting and key order
    do not make two contents differ, their values do (PT-FULL, CONTINUITY.md §1.2)."""
    return _compact(value)


def tokens_of(value: Any) -> int:
    """The simulator's token estimate of one unit: 1 per 4 bytes of its compact JSON, at
    least 1 (:func:`polythink.simulator.behaviour.prompt_tokens` counts a message so)."""
    return max(1, len(_compact(value)) // 4)


def _compact(value: Any) -> bytes:
    """``value``'s compact JSON, keys sorted (orjson: a long conversation is read on every
    request, so this is the simulator's own hot path)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of a request: its content as canonical JSON (markers left out) and the
    tokens it costs (0 for what the model does not read: a cleared turn-scoped system
    message)."""

    data: bytes
    tokens: int


def unit(value: Any, tokens: int | None = None) -> Unit:
    """The :class:`Unit` of ``value``: its digest without cache markers, and its tokens
    (:func:`tokens_of` unless given). One serialisation when it holds no marker."""
    raw = _compact(value)
    data = raw
    if b"cache_control" in raw or b"prompt_cache_breakpoint" in raw:
        data = _compact(without_marks(value))
    return Unit(data, max(1, len(raw) // 4) if tokens is None else tokens)


@dataclass(frozen=True, slots=True)
class CacheUse:
    """What the cache did for one request, in tokens: ``read`` from the cache, ``written``
    to it (Anthropic's cache writes), of ``total`` input tokens."""

    read: int
    written: int
    total: int


class PrefixCache:
    """Prefixes of earlier requests, per scope (a provider route and a model).

    Safe to share between the simulator's connections (one lock).
    """

    LIMIT = 500_000

    def __init__(self) -> None:
        self._store: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every prefix."""
        with self._lock:
            self._store.clear()

    def serve(
        self,
        scope: str,
        units: Sequence[Unit],
        *,
        writes: Iterable[int] | None = None,
        lookback: int | None = None,
        minimum: int = 1024,
        increment: int = 1,
    ) -> CacheUse:
        """Read this request's longest cached prefix, then write its prefixes.

        Args:
            scope: what caches are kept apart by (``"openai:gpt-6"``).
            units: the request's units, in order.
            writes: the unit counts whose prefixes are written (Anthropic's breakpoints);
                ``None``: every prefix (automatic caching); empty: none.
            lookback: a read must end at most this many units before a written
                breakpoint (Anthropic's 20 blocks); ``None``: anywhere.
            minimum: the fewest tokens a cached prefix has.
            increment: a hit is reported in steps of this many tokens above ``minimum``.
        """
        prefixes: list[bytes] = []
        totals: list[int] = []
        rolling = hashlib.sha256(scope.encode())
        running = 0
        for item in units:
            # Each unit framed by its length, so two splits of the same bytes differ.
            rolling.update(len(item.data).to_bytes(8, "big"))
            rolling.update(item.data)
            running += item.tokens
            prefixes.append(rolling.digest())
            totals.append(running)
        total = running
        points = sorted(set(writes)) if writes is not None else list(range(1, len(units) + 1))
        points = [p for p in points if 0 < p <= len(units)]
        last = points[-1] if points else 0
        read = 0
        hit = 0
        with self._lock:
            store = self._store
            for count in range(last, 0, -1):
                if lookback is not None and not any(
                    0 <= point - count <= lookback for point in points
                ):
                    continue
                key = prefixes[count - 1]
                if key in store:
                    store.move_to_end(key)
                    hit = count
                    break
            if hit and totals[hit - 1] >= minimum:
                read = minimum + (totals[hit - 1] - minimum) // increment * increment
            written = 0
            for point in points:
                if totals[point - 1] < minimum:
                    continue
                key = prefixes[point - 1]
                if key not in store:
                    store[key] = None
                    if len(store) > self.LIMIT:
                        store.popitem(last=False)
                if point > hit:
                    written = totals[point - 1] - (totals[hit - 1] if read else 0)
        return CacheUse(read=read, written=written if writes is not None else 0, total=total)


def automatic(
    cache: PrefixCache,
    scope: str,
    head: Any,
    head_tokens: int,
    entries: Sequence[Any],
    *,
    increment: int = 1,
) -> CacheUse:
    """Serve a request of a provider that caches every prefix on its own (OpenAI's wires,
    Gemini): ``head`` (the instructions and tools, ``head_tokens`` of them) then one unit per
    entry of ``entries`` (messages, input items, contents), a hit from 1,024 tokens on in
    steps of ``increment``."""
    units = [unit(head, head_tokens), *(unit(entry) for entry in entries)]
    return cache.serve(scope, units, minimum=1024, increment=increment)
