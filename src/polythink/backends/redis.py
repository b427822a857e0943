"""The Redis backends: limits and cache entries shared by every process naming one server.

Requires the ``redis`` extra (``pip install 'polythink[redis]'``: redis-py's
``redis.asyncio``, so asyncio only). ``Client(limits="redis://host:6379/0")`` gives every
source a :class:`RedisLimits` and ``Client(cache="redis://…")`` a :class:`RedisCache`.

**What shares a budget** is the account: the provider id, the base URL in use and the first
16 hex digits of the SHA-256 of the API key (never the key itself). Every key of an account
carries them in one ``{hash tag}``, as in
``polythink:{openai|https://api.openai.com/v1|3a7bd3e2360a3d29}:rpm``, so an account's
keys sit in one slot of a Redis Cluster and its scripts run there. Sources
of one account share its buckets, slots and pause: give them the same limits.

**State, all under the account's tag, every key with a TTL:**

- ``…:rpm`` and ``…:tpm``: token buckets, a HASH ``{level, ts}`` (``ts`` in ms of Redis
  ``TIME``). A bucket holds one minute of its limit, starts full (an absent key is full),
  refills continuously and may go into debt, as the in-process
  :class:`~polythink.backends.bucket.TokenBucket`; the key expires once it would be full.
- ``…:leases``: concurrency slots, a ZSET of holder ids scored by their expiry (ms). A
  holder renews its lease while its call runs (one background renewal per process renews
  all its leases every third of a lease); a process killed without releasing frees its
  slots when their lease ends.
- ``…:pause``: set with ``PX`` by a 429's ``retry-after`` or by rate-limit headers reporting
  nothing left, extended, never shortened, and never longer than
  :data:`~polythink.backends.base.MAX_SERVER_PAUSE`; every process waits it out.
- ``…:workers``: the processes using the account, a ZSET of process ids scored by when they
  stop counting (60 s after their last call or lease renewal). Each admission script
  answers with what a process needs should the server go away: how many workers there are,
  its rank among them, the bucket levels and the pause left.

**Spend budgets** (:class:`RedisBudgets`, from ``RedisLimitStore.budgets()``) keep one
HASH ``{w, s}`` per budget and scope value: the start of its current UTC calendar window
(Unix seconds of Redis ``TIME``) and the nano-dollars spent in it, under the one hash tag
``{polythink-budget}`` (so a call reserves in all its budgets in one script, on one Cluster
slot), as in ``polythink:{polythink-budget}:day:tag=acme``; an account scope names the
account by its key fingerprint, never the key. Each key expires a minute after its window
ends. A call reserves its worst case in every budget in one script (all or nothing) and
corrects it in another; a third reads without writing. ``polythink:{polythink-budget}:workers``
counts the processes using budgets on the server as ``…:workers`` does for an account (each
reservation and correction renews this process there for 60 s; every script answers with
the count).

Needs Redis 5 or later (scripts that read ``TIME`` and then write). Each
read-modify-write runs as one Lua script on the server (registered once per
connection with ``register_script``; redis-py reloads it after a server restart), with
Redis ``TIME`` as the clock, so processes on machines with different clocks agree.

**Connections:** each store keeps one pool of at most ``max_connections`` (64) per process,
shared by every call, source and budget using it; an operation that finds every connection
busy waits its turn for one (a FIFO queue in front of redis-py's blocking pool), up to
``pool_timeout`` (10 s). Running out of connections, or a process too busy to read its
answers on time, is not an outage: that one operation goes on without the server, with one
warning saying this process is busy.

**Failure:** a server that is down, slow (socket timeouts default to 0.5 s of the server's
silence) or restarted never fails a call. Each process then goes on alone with its share of
the limits (:mod:`polythink.backends.share`): ``1 / workers`` of the buckets, starting from
its part of the levels it last saw, and of the slots, its running calls counted. When the server
answers again it charges what it spent alone there (a restarted server that lost a bucket
first gets the level last seen, refilled since, not a full minute), leases its running
calls there again and, for two renewal rounds and retry intervals, keeps to its share of
slots while the other processes come back. The cache falls back to a miss. Each logs one
warning per outage (and, at INFO, each account's share and its return), skips the server
for ``retry_interval`` seconds after a failure, and goes back to it as soon as it answers.
Spend budgets follow the same rules: each process keeps to its share of each budget, ``1 /
workers`` (the processes the budget scripts last counted, or the store's ``workers``) of
what the budget had left in its window when the process last read it (a window begun
since: of the whole budget), and refuses or steps down against that share as the budget
says (``spent / share`` stands for the fleet's fraction spent). So the fleet spends at most
what was left, plus what each process's last reading missed (calls the others reserved
after it). What each spent alone is added to the shared count with its next reservation or
correction once the server answers. A server without persistence forgets budget spend when
it restarts (run it with ``appendonly yes`` to keep it).

A process that has **never** reached the server has nothing to take a share of. With the
store's ``workers`` (or ``?workers=N`` in the URL) it takes ``1 / workers`` of full limits
and budgets. Without, it cannot know its share: it refuses calls under a spend budget whose
spend it never read (``BudgetExceededError``, ``error_type="spend_unknown"``), and starts
each rate bucket empty, refilling at the whole limit, with all the slots (so N such
processes may send up to N times the limits; the providers answer the excess with 429s,
which pause the source). Its warning says so. Once the server answers it joins as after an
outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import math
import random
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Sequence
from itertools import count
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio

try:
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisError
except ModuleNotFoundError as exc:  # pragma: no cover - exercised without the extra only
    raise ModuleNotFoundError(
        "the Redis backends need the redis package: pip install 'polythink[redis]'"
    ) from exc

from polythink.backends.base import (
    DEFAULT_SIZE_LIMIT,
    MAX_SERVER_PAUSE,
    Lease,
    Reservation,
    Tally,
    server_pause,
)
from polythink.backends.local import LocalBudgets, LocalLimits
from polythink.backends.share import Share, split_workers
from polythink.budgets import Line, fingerprint
from polythink.errors import InvalidInputError
from polythink.types import RateLimit

__all__ = [
    "RedisBudgets",
    "RedisCache",
    "RedisLimitStore",
    "RedisLimits",
    "account_tag",
    "fingerprint",
]

logger = logging.getLogger("polythink.redis")

_T = TypeVar("_T")

DEFAULT_LEASE = 10.0
"""Seconds a concurrency lease lasts without renewal."""
DEFAULT_RETRY_INTERVAL = 1.0
"""Seconds a backend leaves Redis alone after a failure before trying again."""
DEFAULT_SOCKET_TIMEOUT = 0.5
"""Seconds to connect to Redis, and to wait for one answer."""
DEFAULT_MAX_CONNECTIONS = 64
"""Connections one store (:class:`RedisLimitStore`, :class:`RedisCache`) opens to its server
at most, in one process: its one pool serves every source, budget and call of the process
that uses the store. An operation finding them all busy waits for one (a Redis command
takes well under a millisecond, so 64 carry thousands of concurrent calls)."""
DEFAULT_POOL_TIMEOUT = 10.0
"""Seconds an operation waits for a free connection when all of the pool's are busy; past
it the operation is given up as if the server had not answered, without counting as an
outage (the server answers; this process asks more of it at once than its pool carries)."""
_POLL = 0.01
"""Seconds between two attempts at a busy slot (jittered by ±50 %)."""
_PRESENCE_MS = 60_000
"""Milliseconds a process counts among an account's (or the budgets') live workers after its
last call."""
MAX_NAP = 0.5
"""Seconds a call waiting for a shared bucket sleeps before asking again: another process
may have given tokens back."""
_COMPRESSION = 6
DEFAULT_FILL_LEASE = 3.0
"""Seconds a cache fill lease lasts without renewal: how soon waiting callers take over from
a holder that died."""
DEFAULT_FILL_WAIT = 60.0
"""Seconds a call waits at most for an identical call of another process to fill the cache
before it calls itself."""
_FILL_POLL = (0.005, 0.1)
"""Seconds between two looks at an entry being filled: a tenth of the wait so far, within
these bounds (jittered by ±50 %)."""

_PRELUDE = (
    f"local MAX_PAUSE = {round(MAX_SERVER_PAUSE * 1000)}\n"
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local function level(key, cap)
  local v = redis.call('HMGET', key, 'level', 'ts')
  local lvl, ts = tonumber(v[1]), tonumber(v[2])
  if not lvl then return cap end
  if now > ts then lvl = math.min(cap, lvl + (now - ts) * cap / 60000) end
  return lvl
end
local function store(key, cap, lvl)
  redis.call('HSET', key, 'level', string.format('%.17g', lvl), 'ts', string.format('%.17g', now))
  redis.call('PEXPIRE', key, math.ceil((cap - lvl) * 60000 / cap) + 1000)
end
local function take(cost)
  local wait, reason = 0, ''
  local paused = redis.call('PTTL', KEYS[3])
  if paused > MAX_PAUSE then
    redis.call('PEXPIRE', KEYS[3], MAX_PAUSE)
    paused = MAX_PAUSE
  end
  if paused > 0 then wait, reason = paused, 'server_pause' end
  local r, k
  if rpm > 0 then
    r = level(KEYS[1], rpm)
    local missing = math.min(1, rpm) - r
    if missing > 1e-9 and missing * 60000 / rpm > wait then
      wait, reason = missing * 60000 / rpm, 'rpm_limit'
    end
  end
  if tpm > 0 then
    k = level(KEYS[2], tpm)
    local missing = math.min(cost, tpm) - k
    if missing > 1e-9 and missing * 60000 / tpm > wait then
      wait, reason = missing * 60000 / tpm, 'tpm_limit'
    end
  end
  if wait > 0 then return 0, string.format('%.17g', wait), reason end
  if rpm > 0 then store(KEYS[1], rpm, r - 1) end
  if tpm > 0 then store(KEYS[2], tpm, k - cost) end
  return 1, '0', ''
end
local function settle(refund)
  if tpm > 0 and refund ~= 0 then
    store(KEYS[2], tpm, math.min(tpm, level(KEYS[2], tpm) + refund))
  end
  if rpm > 0 and ARGV[4] ~= '' then
    store(KEYS[1], rpm, math.min(level(KEYS[1], rpm), tonumber(ARGV[4])))
  end
  if tpm > 0 and ARGV[5] ~= '' then
    store(KEYS[2], tpm, math.min(level(KEYS[2], tpm), tonumber(ARGV[5])))
  end
  local pause = tonumber(ARGV[6])
  if pause > 0 and redis.call('PTTL', KEYS[3]) < pause then
    redis.call('SET', KEYS[3], '1', 'PX', pause)
  end
end
local function lease()
  local cap, ms = tonumber(ARGV[7]), tonumber(ARGV[9])
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  local held = redis.call('ZSCORE', KEYS[4], ARGV[8])
  if not held and redis.call('ZCARD', KEYS[4]) >= cap then return 0 end
  redis.call('ZADD', KEYS[4], now + ms, ARGV[8])
  if redis.call('PTTL', KEYS[4]) < ms then redis.call('PEXPIRE', KEYS[4], ms) end
  return 1
end
local function fleet()
  local ms = tonumber(ARGV[10])
  redis.call('ZADD', KEYS[5], now + ms, ARGV[11])
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  if redis.call('PTTL', KEYS[5]) < ms then redis.call('PEXPIRE', KEYS[5], ms) end
  local rank = 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
    if member < ARGV[11] then rank = rank + 1 end
  end
  local r, k = '', ''
  if rpm > 0 then r = string.format('%.17g', level(KEYS[1], rpm)) end
  if tpm > 0 then k = string.format('%.17g', level(KEYS[2], tpm)) end
  local paused = math.min(MAX_PAUSE, math.max(0, redis.call('PTTL', KEYS[3])))
  return {redis.call('ZCARD', KEYS[5]), rank, r, k, paused}
end
local function seen(head)
  local f = fleet()
  for i = 1, #f do head[#head + 1] = f[i] end
  return head
end
"""
)
"""Shared by the limit scripts. KEYS: the rpm and tpm buckets (HASH ``level``, ``ts`` in
ms), the pause (a key with a PX expiry), the leases (ZSET holder -> expiry in ms) and the
workers (ZSET process -> expiry in ms). ARGV: rpm, tpm (0: none), cost or refund (tokens),
requests and tokens remaining ('' unknown), pause (ms), slots, holder, lease (ms), presence
(ms), process. ``seen`` appends what a process learns of the fleet to a reply: live
workers, this process's rank among them, the bucket levels ('' without a limit) and the
pause left (ms). A pause longer than :data:`~polythink.backends.base.MAX_SERVER_PAUSE` (set by
an older build) is cut to it when read."""

_SCRIPTS = {
    "take": _PRELUDE
    + "local taken, wait, reason = take(tonumber(ARGV[3]))\n"
    + "return seen({taken, wait, reason})",
    "settle": _PRELUDE + "settle(tonumber(ARGV[3]))\nreturn 1",
    "acquire": _PRELUDE + "return seen({lease()})",
    "admit": _PRELUDE
    + "if lease() == 0 then return seen({0, 0, '0', ''}) end\n"
    + "local taken, wait, reason = take(tonumber(ARGV[3]))\n"
    + "return seen({1, taken, wait, reason})",
    "finish": _PRELUDE
    + "if ARGV[8] ~= '' then redis.call('ZREM', KEYS[4], ARGV[8]) end\n"
    + "settle(tonumber(ARGV[3]))\nreturn 1",
    "rejoin": _PRELUDE
    + """
local function rejoin(key, cap, spent, was)
  local lvl = level(key, cap)
  if was ~= '' and redis.call('EXISTS', key) == 0 then lvl = math.min(cap, tonumber(was)) end
  store(key, cap, math.min(cap, lvl - tonumber(spent)))
end
if rpm > 0 then rejoin(KEYS[1], rpm, ARGV[12], ARGV[14]) end
if tpm > 0 then rejoin(KEYS[2], tpm, ARGV[13], ARGV[15]) end
settle(0)
local ms = tonumber(ARGV[9])
for i = 16, #ARGV do redis.call('ZADD', KEYS[4], now + ms, ARGV[i]) end
if #ARGV >= 16 and redis.call('PTTL', KEYS[4]) < ms then redis.call('PEXPIRE', KEYS[4], ms) end
return seen({1})
""",
}
"""``take``: one request and ARGV[3] tokens, or the wait (ms) and the gate. ``settle``:
correct the tokens by ARGV[3], shrink to reported counts, extend the pause. ``acquire``: a
lease for ARGV[8] if fewer than ARGV[7] unexpired holders. ``admit``: ``acquire``, then
``take`` with the slot. ``finish``: release ARGV[8]'s lease and ``settle``. ``rejoin``
(after an outage): charge the buckets with the requests (ARGV[12]) and tokens (ARGV[13])
taken meanwhile, a bucket the server lost (restarted) first set to ARGV[14], ARGV[15] (what
it would hold without the outage's calls; '' unknown: full), extend the pause by ARGV[6] and
lease the holders ARGV[16…] again. All but ``settle`` and ``finish`` end
with ``seen``."""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease, presence = tonumber(ARGV[1]), tonumber(ARGV[2])
local renewed = 0
for i = 4, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + lease, ARGV[i])
end
if renewed > 0 and redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], lease)
end
redis.call('ZADD', KEYS[2], now + presence, ARGV[3])
if redis.call('PTTL', KEYS[2]) < presence then redis.call('PEXPIRE', KEYS[2], presence) end
return renewed
"""
"""Extend the leases (KEYS[1]) of the holders ARGV[4…] still present by ARGV[1] ms from now,
and the presence of process ARGV[3] among the workers (KEYS[2]) by ARGV[2] ms."""

_CACHE_SET = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value, ttl, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local name, prefix = ARGV[4], ARGV[5]
local size = #value
if size > limit then return 0 end
local function forget(member)
  local bytes = tonumber(redis.call('HGET', KEYS[3], member) or '0')
  redis.call('HDEL', KEYS[3], member)
  redis.call('ZREM', KEYS[2], member)
  return bytes
end
local total = tonumber(redis.call('GET', KEYS[4]) or '0') - forget(name)
if ttl > 0 then
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - ttl)) do
    total = total - forget(member)
  end
end
while total + size > limit do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not oldest then break end
  total = total - forget(oldest)
  redis.call('DEL', prefix .. oldest)
end
if ttl > 0 then
  redis.call('SET', KEYS[1], value, 'PX', ttl)
else
  redis.call('SET', KEYS[1], value)
end
redis.call('ZADD', KEYS[2], now, name)
redis.call('HSET', KEYS[3], name, size)
redis.call('SET', KEYS[4], total + size)
if ttl > 0 then
  for i = 2, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
"""
"""Store an entry within the size limit, culling the least recently stored first."""


_BUDGET_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1])
local now_ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)
local lines = #KEYS - 1
local function present()
  local key, ms = KEYS[#KEYS], tonumber(ARGV[#ARGV - 1])
  redis.call('ZADD', key, now_ms + ms, ARGV[#ARGV])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now_ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
  return redis.call('ZCARD', key)
end
local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end
local function civil_from_days(z)
  z = z + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end
local function window(per, at)
  if per == 'minute' then return at - at % 60, at - at % 60 + 60 end
  if per == 'hour' then return at - at % 3600, at - at % 3600 + 3600 end
  local day = math.floor(at / 86400)
  if per == 'day' then return day * 86400, day * 86400 + 86400 end
  local y, m = civil_from_days(day)
  local start = days_from_civil(y, m, 1) * 86400
  if m == 12 then y, m = y + 1, 1 else m = m + 1 end
  return start, days_from_civil(y, m, 1) * 86400
end
local function tally(key, per)
  local start, stop = window(per, now)
  local v = redis.call('HMGET', key, 'w', 's')
  if tonumber(v[1]) == start then return tonumber(v[2]) or 0, start, stop end
  return 0, start, stop
end
local function store(key, start, stop, spent)
  redis.call('HSET', key, 'w', string.format('%.0f', start), 's',
    string.format('%.0f', math.max(0, spent)))
  redis.call('EXPIREAT', key, stop + 60)
end
"""
"""Shared by the budget scripts: the UTC calendar window of Redis ``TIME`` (days from and to
the civil calendar, Hinnant's algorithms), a line's spend in it (HASH ``w``: window start,
``s``: nano-dollars), and writing it back with an expiry a minute after the window ends.
KEYS: the lines, then the workers (ZSET process -> expiry in ms); ARGV ends with the
presence (ms) and the process, which ``present`` records, returning the live workers."""

_BUDGET_SCRIPTS = {
    "budget_reserve": _BUDGET_PRELUDE
    + """
local cost, taken, out = tonumber(ARGV[1]), 1, {}
for i = 1, lines do
  local key, at = KEYS[i], 4 * (i - 1) + 1
  local limit, per = tonumber(ARGV[at + 1]), ARGV[at + 2]
  local spent, start, stop = tally(key, per)
  local carry = tonumber(ARGV[at + 4])
  if carry ~= 0 and tonumber(ARGV[at + 3]) == start then
    spent = math.max(0, spent + carry)
    store(key, start, stop, spent)
  end
  if spent + cost > limit then taken = 0 end
  out[3 * i - 1], out[3 * i], out[3 * i + 1] = spent, start, stop
end
out[1] = taken
if taken == 1 then
  for i = 1, lines do store(KEYS[i], out[3 * i], out[3 * i + 1], out[3 * i - 1] + cost) end
end
out[3 * lines + 2] = present()
return out
""",
    "budget_settle": _BUDGET_PRELUDE
    + """
local delta, out = tonumber(ARGV[1]), {}
for i = 1, lines do
  local key, at = KEYS[i], 4 * (i - 1) + 1
  local per, reserved = ARGV[at + 1], tonumber(ARGV[at + 2])
  local spent, start, stop = tally(key, per)
  local carry = tonumber(ARGV[at + 4])
  local change = 0
  if carry ~= 0 and tonumber(ARGV[at + 3]) == start then change = carry end
  if reserved == start then change = change + delta end
  if change ~= 0 then
    spent = math.max(0, spent + change)
    store(key, start, stop, spent)
  end
  if reserved == start then out[i] = spent else out[i] = -1 end
end
out[lines + 1] = present()
return out
""",
    "budget_peek": _BUDGET_PRELUDE
    + """
local out = {}
for i = 1, lines do
  local spent, start, stop = tally(KEYS[i], ARGV[i])
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = spent, start, stop
end
out[3 * lines + 1] = redis.call('ZCOUNT', KEYS[#KEYS], '(' .. now_ms, '+inf')
return out
""",
}
"""``budget_reserve``: ARGV[1] nano-dollars into every line KEYS[i] if each has them left
(ARGV per line: limit, window, and a carry: window start and nano-dollars this process
counted while the server was down, added first); returns ``{taken, spent, start, end, …,
workers}`` with each line's spend before the reservation. ``budget_settle``: add ARGV[1]
(negative gives back) to each line still in the window it was reserved in (ARGV per line:
window, reserved window start, carry); returns each line's spend after (-1: window over),
then the workers. Both record this process among the workers. ``budget_peek``: ``{spent,
start, end, …, workers}`` per line (ARGV: each line's window), writing nothing."""

_BUDGET_PREFIX = "polythink:{polythink-budget}:"
_BUDGET_WORKERS = _BUDGET_PREFIX + "workers"
"""The processes using budgets on the server (no line's key: those hold a ``:`` after the
prefix)."""

_CACHE_CLAIM = """
local value = redis.call('GET', KEYS[1])
if value then return {1, value} end
if ARGV[1] == '' then return {0, ''} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2, ''} end
return {3, ''}
"""
"""Read an entry (KEYS[1]) or, on a miss, take its fill lease (KEYS[2]) for holder ARGV[1]
for ARGV[2] ms. Returns ``{1, value}`` (hit), ``{2}`` (lease taken), ``{3}`` (another holder
has it), ``{0}`` (a miss; no holder given, so no lease asked for)."""

_FILL_RENEW = """
local renewed = 0
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
    renewed = renewed + redis.call('PEXPIRE', key, ARGV[1])
  end
end
return renewed
"""
"""Extend by ARGV[1] ms each fill lease KEYS[i] still held by holder ARGV[i + 1]."""

_FILL_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Release a fill lease if ARGV[1] still holds it (an expired one may be another's now)."""


class Unavailable(Exception):
    """Redis did not answer (or is being left alone after a failure); use the fallback."""


class PoolBusy(RedisError):
    """Every connection of a pool stayed busy for its whole ``pool_timeout``."""


_LATE = 0.1
"""Seconds a deadline's timer may run late before the event loop counts as too busy to have
read an answer that may well be waiting."""


_TURNS = 3
"""Turns of the event loop a deadline waits on time before it cancels: an answer read from
the socket in one turn reaches its operation in the next."""


class _Patience:
    """The deadline of one Redis operation: ``seconds`` of the server's silence, not of this
    process's.

    When it comes, the event loop's lateness in running its timer says whose silence it was:
    late by more than :data:`_LATE` (a process running a thousand calls on a loaded machine),
    the answer may be waiting unread, so it is put off by another ``seconds``, as long as the
    operation has run less than ``cap``; on time, the operation is cancelled (``expired``: the
    server did not answer). Put off until ``cap``, it is cancelled as ``busy``: this process,
    not the server, is what is slow. One timer per operation, as a socket timeout costs.
    """

    __slots__ = (
        "_handle",
        "_late",
        "_loop",
        "_scope",
        "_seconds",
        "_start",
        "busy",
        "cap",
        "expired",
    )

    def __init__(self, seconds: float, cap: float) -> None:
        self._seconds = seconds
        self.cap = cap
        self._scope = anyio.CancelScope()
        self._handle: asyncio.Handle | None = None
        self._loop = asyncio.get_running_loop()
        self._start = 0.0
        self._late = False
        self.expired = False
        self.busy = False

    def __enter__(self) -> _Patience:
        self._scope.__enter__()
        self._start = self._loop.time()
        self._arm(self._start + self._seconds)
        return self

    def _arm(self, at: float) -> None:
        self._handle = self._loop.call_at(at, self._due, at, context=_NO_CONTEXT)

    def _due(self, at: float, turns: int = 0) -> None:
        now = self._loop.time()
        if now - self._start < self.cap:
            if now - at > _LATE:
                self._arm(now + self._seconds)
                return
            if turns < _TURNS:
                # What the loop holds ready may be the answer: let it run first.
                self._handle = self._loop.call_soon(self._due, at, turns + 1, context=_NO_CONTEXT)
                return
        self._late = now - at > _LATE
        self._scope.cancel()

    def __exit__(self, *exc: Any) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        suppressed = bool(self._scope.__exit__(*exc))
        # Only an operation the deadline did cancel counts: one whose answer was read in the
        # same turn of the loop finished.
        if self._scope.cancelled_caught:
            self.busy = self._late
            self.expired = not self._late
        return suppressed


_NO_CONTEXT = contextvars.Context()


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, ""))


def account_tag(provider: str, base_url: str, api_key: str | None) -> str:
    """Return the Redis hash tag of an account: ``{provider|base URL|key fingerprint}``.

    Braces in the URL are percent-encoded so the tag stays one tag.
    """
    url = base_url.replace("{", "%7B").replace("}", "%7D")
    return "{" + f"{provider}|{url}|{fingerprint(api_key)}" + "}"


class _Link:
    """One Redis connection pool, its registered scripts and whether the server answers.

    Built lazily in the running event loop (a pool belongs to one loop). While the server
    fails, :meth:`run` raises :class:`Unavailable` at once for ``retry_interval`` seconds,
    then tries again; the first failure of an outage logs one warning.
    """

    def __init__(
        self,
        url: str,
        what: str,
        fallback: str,
        *,
        retry_interval: float,
        socket_timeout: float,
        scripts: dict[str, str],
        unreached: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidInputError(
                f"a Redis URL starts with redis://, rediss:// or unix://; got {_redacted(url)!r}"
            )
        if not retry_interval > 0 or not socket_timeout > 0 or not pool_timeout > 0:
            raise InvalidInputError(
                "retry_interval, socket_timeout and pool_timeout must be positive seconds"
            )
        if isinstance(max_connections, bool) or not isinstance(max_connections, int):
            raise InvalidInputError(
                f"max_connections must be a positive int; got {max_connections!r}"
            )
        if max_connections < 1:
            raise InvalidInputError(
                f"max_connections must be a positive int; got {max_connections!r}"
            )
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self._busy_warned = False
        self.url = url
        self.what = what
        self.fallback = fallback
        self.unreached = unreached
        self.retry_interval = retry_interval
        self.socket_timeout = socket_timeout
        self._sources = scripts
        self._client: aioredis.Redis | None = None
        self._slots = anyio.Semaphore(max_connections)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.scripts: dict[str, Any] = {}
        self._retry_at = 0.0
        self.down = False
        self.answered = False
        self.outages = 0

    def client(self) -> aioredis.Redis:
        """Return the connection pool of the running loop (made on first use).

        Raises:
            RuntimeError: outside an asyncio event loop (redis.asyncio runs on asyncio
                only; under trio, use the in-process limits and a disk cache).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "the Redis backends run on asyncio only (redis.asyncio); under trio leave "
                "limits unset and use a disk cache"
            ) from None
        if self._client is None or self._loop is not loop:
            # No socket timeouts of redis-py's own: run() bounds each operation with a
            # deadline that counts the server's silence, not this process's (_Patience).
            pool = aioredis.BlockingConnectionPool.from_url(
                self.url,
                max_connections=self.max_connections,
                timeout=None,
                socket_timeout=None,
                socket_connect_timeout=None,
                retry=Retry(NoBackoff(), 0),
                health_check_interval=0,
            )
            client = aioredis.Redis.from_pool(pool)
            self._client, self._loop = client, loop
            # The queue for the pool's connections. redis-py's blocking pool wakes a waiter
            # through a condition whose lock each release queues for behind every operation
            # arriving meanwhile: with a thousand operations waiting, one hand-over took
            # seconds (measured 2026-12-04, redis-py 8.2). A FIFO semaphore of as many slots
            # hands over in one step, and the pool behind it never waits.
            self._slots = anyio.Semaphore(self.max_connections)
            self.scripts = {name: client.register_script(s) for name, s in self._sources.items()}
        return self._client

    async def run(self, operation: Callable[[aioredis.Redis], Awaitable[_T]]) -> _T:
        """Run ``operation`` on the server, within ``socket_timeout`` of its silence
        (:class:`_Patience`) and ``pool_timeout`` of waiting for a connection.

        Raises:
            Unavailable: the server failed now or recently; or this process could not get
                a connection, or read an answer, in time (then no outage is recorded).
        """
        if self._retry_at and time.monotonic() < self._retry_at:
            raise Unavailable
        client = self.client()
        slots = self._slots
        failure: BaseException | None = None
        try:
            slots.acquire_nowait()
        except anyio.WouldBlock:
            got = False
            with anyio.move_on_after(self.pool_timeout):
                await slots.acquire()
                got = True
            if not got:
                self._busy(
                    PoolBusy(
                        f"all {self.max_connections} connections stayed busy for "
                        f"{self.pool_timeout:g} s"
                    )
                )
                raise Unavailable from None
        try:
            with _Patience(self.socket_timeout, self.pool_timeout) as patience:
                try:
                    result = await operation(client)
                except (RedisError, OSError) as exc:
                    failure = exc
        finally:
            slots.release()
        if patience.busy:
            self._busy(
                PoolBusy(f"this process was too busy to read its answers for {patience.cap:g} s")
            )
            raise Unavailable
        if patience.expired:
            failure = TimeoutError(f"no answer within {self.socket_timeout:g} s")
        if failure is not None:
            self._failed(failure)
            # Every idle pooled connection may be stale (a restarted server): the next
            # attempt opens fresh ones rather than failing again on the next stale one.
            # Connections in use are left to their operations (they fail on their own when
            # stale): closing them would fail calls the server is answering.
            with contextlib.suppress(RedisError, OSError):
                await client.connection_pool.disconnect(inuse_connections=False)
            raise Unavailable from failure
        self.answered = True
        if self.down:
            self.down = False
            self._retry_at = 0.0
            logger.info("%s: Redis at %s answers again", self.what, _redacted(self.url))
        return result

    @property
    def cleanup_bound(self) -> float:
        """Seconds an operation that must not be lost (a release, a correction) may take:
        the wait for a connection and two answers."""
        return self.pool_timeout + 2 * self.socket_timeout

    def _busy(self, exc: PoolBusy) -> None:
        """Log, once per link, that this process asked more of the pool than it carries;
        the server is not taken to be down."""
        if self._busy_warned:
            logger.debug("%s: %s", self.what, exc)
            return
        self._busy_warned = True
        logger.warning(
            "%s: Redis at %s answers, but %s; this operation goes on without it (%s). Raise "
            "max_connections= (or pool_timeout=) of the store if this process runs that many "
            "calls at once; further ones are logged at DEBUG level",
            self.what,
            _redacted(self.url),
            exc,
            self.fallback,
        )

    def _failed(self, exc: BaseException) -> None:
        self._retry_at = time.monotonic() + self.retry_interval
        if self.down:
            logger.debug("%s: Redis still unavailable (%s)", self.what, type(exc).__name__)
            return
        self.down = True
        self.outages += 1
        never = not self.answered and self.unreached is not None
        logger.warning(
            "%s: Redis at %s does not answer (%s: %s)%s; %s until it does (trying again every "
            "%g s); further failures of this outage are logged at DEBUG level",
            self.what,
            _redacted(self.url),
            type(exc).__name__,
            exc,
            " and never has since this process started" if never else "",
            self.unreached if never else self.fallback,
            self.retry_interval,
        )

    async def aclose(self) -> None:
        """Close the pool of the running loop, if any."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.aclose()


class _Renewer:
    """One side task per process that renews the leases it holds on one server.

    Every third of ``lease`` seconds it runs ``before`` (if given), then ``renew`` on the
    server with what is held (lease name -> holder id), and ends once nothing is; the next
    :meth:`hold` starts it again. The calls themselves run in their callers' tasks; only the
    renewal is a side task. A round the server does not answer is skipped.
    """

    def __init__(
        self,
        link: _Link,
        lease: float,
        renew: Callable[[aioredis.Redis, dict[str, str]], Awaitable[Any]],
        before: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.link = link
        self.lease = lease
        self.held: dict[str, str] = {}
        self._renew = renew
        self._before = before
        self._task: asyncio.Task[None] | None = None

    def hold(self, name: str, holder: str) -> None:
        """Renew ``name`` for ``holder`` until :meth:`drop`."""
        self.held[name] = holder
        task = self._task
        if task is None or task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def drop(self, name: str) -> None:
        """Stop renewing ``name``."""
        self.held.pop(name, None)

    async def _run(self) -> None:
        while self.held:
            await anyio.sleep(self.lease / 3)
            held = dict(self.held)
            if not held:
                return

            async def renew(client: aioredis.Redis, held: dict[str, str] = held) -> Any:
                return await self._renew(client, held)

            with contextlib.suppress(Unavailable):
                if self._before is not None:
                    await self._before()
                await self.link.run(renew)


class _NoSlot:
    __slots__ = ()

    async def release(self) -> None:
        return None


class _RedisLease:
    __slots__ = ("_limits", "holder")

    def __init__(self, limits: RedisLimits, holder: str) -> None:
        self._limits: RedisLimits | None = limits
        self.holder = holder

    def taken(self) -> RedisLimits | None:
        """Mark the lease released here (the caller releases it on the server); return the
        backend it was held on, or ``None`` if it was released already."""
        limits, self._limits = self._limits, None
        return limits

    async def release(self) -> None:
        limits = self.taken()
        if limits is not None:
            await limits._release(self.holder)


class RedisLimitStore:
    """The shared-limits configuration of a client: one Redis server, lease and retry times.

    ``Client(limits="redis://…")`` builds one with the defaults; pass one to change them.

    Args:
        url: ``redis://[:password@]host:port/db``, ``rediss://…`` (TLS) or
            ``unix:///path?db=N``; redis-py's URL query options apply.
        lease: seconds a concurrency slot is held without renewal; the longest a killed
            process can keep one.
        retry_interval: seconds to leave the server alone after a failure.
        socket_timeout: seconds to connect and to wait for each answer. It counts the
            server's silence: while this process is too busy to read an answer on time (its
            event loop late by more than 0.1 s), the wait goes on, up to ``pool_timeout``.
        max_connections: connections to the server at most, in this process (one pool,
            shared by every source, budget and call using the store); an operation finding
            them all busy waits for one.
        pool_timeout: seconds an operation waits for a free connection (or for this busy
            process to read its answer); past it the operation goes on without the server
            for that once, logged as this process being busy, never as an outage.
        workers: how many processes share the limits and spend budgets, for while the
            server does not answer (each then keeps ``1 / workers`` of them, and of a
            budget whose spend it never read); ``None``: as many as this process last saw
            using them. The URL may give it instead, as ``?workers=N`` (so a ``limits=``
            string, a TOML ``limits`` key or a ``{SCOPE}__LIMITS`` variable can).

    Without ``workers``, a process that never reached the server refuses budgeted calls
    (:class:`~polythink.errors.BudgetExceededError`, ``error_type="spend_unknown"``) and
    starts each bucket empty at the whole limit until it answers (see
    :mod:`polythink.backends.share`).

    Raises:
        ValueError: for a URL of another scheme, a non-positive duration or ``workers``,
            or a ``workers`` in the URL that differs from the argument.
    """

    def __init__(
        self,
        url: str,
        *,
        lease: float = DEFAULT_LEASE,
        retry_interval: float = DEFAULT_RETRY_INTERVAL,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        workers: int | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        if not lease > 0:
            raise InvalidInputError(f"lease must be a positive number of seconds; got {lease!r}")
        Share(workers)  # validates it
        url, given = split_workers(url)
        if given is not None and workers is not None and given != workers:
            raise InvalidInputError(
                f"workers={workers} and ?workers={given} in the URL differ; give one of them"
            )
        self.lease = lease
        self.workers = workers if workers is not None else given
        self.link = _Link(
            url,
            "shared rate limits",
            (
                "each process keeps its share of the limits and budgets"
                if self.workers is None
                else f"each process keeps 1/{self.workers} of the limits and budgets"
            ),
            retry_interval=retry_interval,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
            scripts={**_SCRIPTS, "renew": _RENEW, **_BUDGET_SCRIPTS},
            unreached=(
                None
                if self.workers is not None
                else "this process knows neither how many processes share the limits nor what "
                "they used (workers=N, or ?workers=N in the URL, would give each 1/N): it "
                "refuses calls under a spend budget and starts each rate bucket empty at the "
                "whole limit (N processes may send up to N times it)"
            ),
        )
        self._budgets: RedisBudgets | None = None

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
    ) -> RedisLimits:
        """Return the shared budget of one source's account (see :func:`account_tag`)."""
        return RedisLimits(
            self,
            account_tag(provider, base_url, api_key),
            rpm=rpm,
            tpm=tpm,
            max_concurrency=max_concurrency,
            fallback=fallback,
        )

    def budgets(self) -> RedisBudgets:
        """Return the spend budgets on this server (one object per store)."""
        if self._budgets is None:
            self._budgets = RedisBudgets(self)
        return self._budgets

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.link.aclose()


class RedisBudgets:
    """Spend budgets on Redis, shared by every process naming the server (see the module
    docstring), with an in-process fallback while it does not answer.

    Implements :class:`~polythink.backends.base.BudgetBackend`; build it with
    :meth:`RedisLimitStore.budgets`. While the server does not answer, this process keeps
    to its :attr:`share` of each budget (:mod:`polythink.backends.share`): 1/workers of
    what the budget had left in its window when it last read it (``workers`` as configured
    on the store, else the processes the budget scripts last counted), its tallies then in
    the share's terms (:class:`~polythink.backends.base.Tally`); what it spends alone is
    added to the shared count once the server answers. A budget it never read in its window
    is unknown (no share, refused) unless ``workers`` is configured (then 1/workers of the
    whole) or the server last answered before the window began. Every answer of the server
    is taken as this process's reading (reservations, corrections and reads alike).

    Args:
        store: the server (its connection, outage handling and ``workers`` are the limits').
        fallback: the count used while the server does not answer; it takes the shared
            count each time the server answers, and keeps what it counted alone until the
            server takes it (default: a journaling :class:`~polythink.backends.local.LocalBudgets`).

    Attributes:
        share: what this process last saw of the fleet and its share of the budgets.
        alone: whether the server did not answer this process's last budget operation.
    """

    def __init__(self, store: RedisLimitStore, fallback: LocalBudgets | None = None) -> None:
        self.link = store.link
        self.fallback = fallback if fallback is not None else LocalBudgets(journal=True)
        self.share = Share(store.workers, identity=_PROCESS)
        self.alone = False

    async def _script(self, name: str, lines: Sequence[Line], args: list[Any]) -> Any:
        """Run a budget script; its reply ends with the live workers, which are recorded
        and cut off.

        Raises:
            Unavailable: the server does not answer.
        """
        link = self.link
        keys = [_BUDGET_PREFIX + line.key for line in lines] + [_BUDGET_WORKERS]
        args = [*args, _PRESENCE_MS, _PROCESS]

        async def run(client: aioredis.Redis) -> Any:
            return await link.scripts[name](keys=keys, args=args)

        try:
            reply = await link.run(run)
        except Unavailable:
            if not self.alone:
                self.alone = True
                self._went_alone()
            raise
        self.share.counted(int(reply[-1]), self.fallback.clock())
        if self.alone:
            self.alone = False
            logger.info("spend budgets: back on the server")
        return reply[:-1]

    def _went_alone(self) -> None:
        share = self.share
        if share.reached or share.configured is not None:
            logger.info(
                "spend budgets: alone with 1/%d of what each had left when last read",
                share.workers,
            )
            return
        logger.info(
            "spend budgets: alone, never having read what they spent: calls under a budget "
            "are refused until Redis answers (workers=N lets each process spend 1/N)"
        )

    def _carries(self, lines: Sequence[Line]) -> list[tuple[int, int]]:
        return [self.fallback.unsynced(line.key) for line in lines]

    def _restore(self, lines: Sequence[Line], carries: list[tuple[int, int]]) -> None:
        for line, (start, amount) in zip(lines, carries, strict=True):
            self.fallback.restore(line.key, start, amount)

    async def reserve(self, lines: Sequence[Line], cost: int) -> Reservation:
        """Reserve on the server in one script (see the protocol); in this process, against
        its share, while it does not answer."""
        carries = self._carries(lines)
        args: list[Any] = [cost]
        for line, (start, amount) in zip(lines, carries, strict=True):
            args += [line.limit, line.per, start, amount]
        try:
            reply = await self._script("budget_reserve", lines, args)
        except Unavailable:
            self._restore(lines, carries)
            return await self.fallback.reserve(lines, cost, share=self.share)
        taken = int(reply[0]) == 1
        tallies = [
            Tally(int(reply[i]), int(reply[i + 1]), int(reply[i + 2]))
            for i in range(1, 3 * len(lines) + 1, 3)
        ]
        for line, tally in zip(lines, tallies, strict=True):
            self.fallback.seed(line.key, tally._replace(spent=tally.spent + cost * taken))
        return Reservation(taken, tallies, True)

    async def settle(
        self, lines: Sequence[Line], reservation: Reservation, delta: int
    ) -> list[int | None]:
        """Correct on the server in one script (see the protocol); a reservation taken in
        this process is corrected here. Shielded from cancellation (a cancelled call still
        gives back what it did not use) and bounded by twice the socket timeout."""
        if not reservation.shared:
            return await self.fallback.settle(lines, reservation, delta)
        carries = self._carries(lines)
        args: list[Any] = [delta]
        for line, tally, (start, amount) in zip(lines, reservation.tallies, carries, strict=True):
            args += [line.per, tally.start, start, amount]
        reply = None
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self.link.cleanup_bound),
            contextlib.suppress(Unavailable),
        ):
            reply = await self._script("budget_settle", lines, args)
        if reply is None:
            self._restore(lines, carries)
            return await self.fallback.settle(lines, reservation, delta)
        spent: list[int | None] = []
        for line, tally, value in zip(lines, reservation.tallies, reply, strict=True):
            if int(value) < 0:
                spent.append(None)
                continue
            spent.append(int(value))
            self.fallback.seed(line.key, tally._replace(spent=int(value)))
        return spent

    async def peek(self, lines: Sequence[Line]) -> list[Tally]:
        """Read every line's tally on the server; this process's, against its share, while
        it does not answer."""
        try:
            reply = await self._script("budget_peek", lines, [line.per for line in lines])
        except Unavailable:
            return await self.fallback.peek(lines, share=self.share)
        tallies = [
            Tally(int(reply[i]), int(reply[i + 1]), int(reply[i + 2]))
            for i in range(0, 3 * len(lines), 3)
        ]
        for line, tally in zip(lines, tallies, strict=True):
            self.fallback.seed(line.key, tally)
        return tallies


_holders = count()
_PROCESS = uuid.uuid4().hex[:12]


class RedisLimits:
    """One account's budget on Redis, with an in-process fallback (see the module docstring).

    Implements :class:`~polythink.backends.base.LimitBackend`. Build it with
    :meth:`RedisLimitStore.for_source`. While the server does not answer, this process goes
    on alone with its :attr:`share` of the budget (:mod:`polythink.backends.share`): the
    fallback's buckets are replaced by its share of what it last saw, its slots by its share
    of ``max_concurrency`` with its running calls counted; when the server answers again,
    what it spent alone is charged there and its running calls are leased there again.

    Args:
        store: the server, lease and fleet settings.
        tag: the account's hash tag.
        rpm, tpm, max_concurrency: this source's limits (``None``: not limited).
        fallback: the in-process state used while the server does not answer.

    Attributes:
        share: what this process last saw of the fleet and its share of the budget.
        alone: whether this process is going on alone (the server did not answer).
    """

    max_nap = MAX_NAP

    def __init__(
        self,
        store: RedisLimitStore,
        tag: str,
        *,
        rpm: float | None,
        tpm: float | None,
        max_concurrency: int | None,
        fallback: LocalLimits,
    ) -> None:
        self.store = store
        self.tag = tag
        names = ("rpm", "tpm", "pause", "leases", "workers")
        self.keys = [f"polythink:{tag}:{name}" for name in names]
        self.leases_key = self.keys[3]
        self.rpm = rpm or 0
        self.tpm = tpm or 0
        self.max_concurrency = max_concurrency
        self.share = Share(store.workers, identity=_PROCESS)
        self.alone = False
        self._fallback = fallback
        self._lease_ms = max(1, round(store.lease * 1000))
        # A process whose calls only run (it asks for nothing) still rejoins the server
        # when it renews their leases.
        self._renewer = _Renewer(store.link, store.lease, self._renew, before=self._rejoin)
        self._poller = anyio.Lock()
        self._rejoining = anyio.Lock()
        self._slots = 0
        self._grace_until = -math.inf

    @property
    def local(self) -> LocalLimits:
        """The in-process fallback."""
        return self._fallback

    @property
    def running(self) -> int:
        """Slots held by this process's calls (on the server, or alone)."""
        return len(self._renewer.held)

    def _args(
        self,
        tokens: int = 0,
        *,
        holder: str = "",
        limits: RateLimit | None = None,
        pause: float | None = None,
    ) -> list[Any]:
        seconds = server_pause(limits, pause)
        requests_left = limits.requests_remaining if limits is not None else None
        tokens_left = limits.tokens_remaining if limits is not None else None
        return [
            self.rpm,
            self.tpm,
            tokens,
            "" if requests_left is None else requests_left,
            "" if tokens_left is None else tokens_left,
            0 if seconds is None else max(1, round(seconds * 1000)),
            self.max_concurrency or 0,
            holder,
            self._lease_ms,
            _PRESENCE_MS,
            _PROCESS,
        ]

    async def _script(self, name: str, args: list[Any]) -> Any:
        """Run a limit script; its reply ends with what it saw of the fleet (all but
        ``settle`` and ``finish``), which is recorded and cut off.

        Raises:
            Unavailable: the server does not answer (this process is then alone).
        """
        link = self.store.link

        async def run(client: aioredis.Redis) -> Any:
            return await link.scripts[name](keys=self.keys, args=args)

        try:
            if self.alone:
                await self._rejoin()
            reply = await link.run(run)
        except Unavailable:
            self._go_alone()
            raise
        if isinstance(reply, list):
            self._saw(reply[-5:])
            return reply[:-5]
        return reply

    def _saw(self, fleet: list[Any]) -> None:
        workers, rank, requests, tokens, paused = fleet
        levels = {}
        if requests:
            levels["rpm"] = float(requests)
        if tokens:
            levels["tpm"] = float(tokens)
        now = self._fallback.clock.now()
        self.share.seen(
            workers=int(workers), rank=int(rank), levels=levels, pause=paused / 1000, now=now
        )

    def _go_alone(self) -> None:
        """The server stopped answering: take this process's share of what it last saw."""
        if self.alone:
            return
        self.alone = True
        share = self.share
        share.begin()
        fallback = self._fallback
        now = fallback.clock.now()
        fallback.requests = share.bucket("rpm", self.rpm, now) if self.rpm else None
        fallback.tokens = share.bucket("tpm", self.tpm, now) if self.tpm else None
        fallback.paused_until = max(fallback.paused_until, share.paused_until)
        self._slots = share.units(self.max_concurrency) if self.max_concurrency else 0
        if not share.reached and share.configured is None:
            logger.info(
                "shared rate limits %s: alone, never having seen the others: buckets start "
                "empty at the whole limit, %s slots (workers=N gives each process 1/N)",
                self.tag,
                self.max_concurrency,
            )
            return
        logger.info(
            "shared rate limits %s: alone with 1/%d of them (%s of %s slots, %d running)",
            self.tag,
            share.workers,
            self._slots,
            self.max_concurrency,
            self.running,
        )

    async def _rejoin(self) -> None:
        """Back with the server: charge it with what this process spent alone and lease its
        running calls again. A bucket the server lost (it restarted empty) is first set to
        the level last seen refilled since, so that once every process has rejoined it holds
        what the fleet left, not a full minute.

        Raises:
            Unavailable: the server does not answer yet.
        """
        async with self._rejoining:
            if not self.alone:
                return
            share = self.share
            fallback = self._fallback
            now = fallback.clock.now()
            was = [
                "" if level is None else level
                for level in (
                    share.fleet_level("rpm", self.rpm, now) if self.rpm else None,
                    share.fleet_level("tpm", self.tpm, now) if self.tpm else None,
                )
            ]
            pause = fallback.paused_until - now
            args = self._args(pause=pause if pause > 0 else None)
            args += [share.spent.get("rpm", 0.0), share.spent.get("tpm", 0.0), *was]
            args += list(self._renewer.held.values())
            link = self.store.link

            async def rejoin(client: aioredis.Redis) -> Any:
                return await link.scripts["rejoin"](keys=self.keys, args=args)

            reply = await link.run(rejoin)
            self._saw(reply[-5:])
            self.alone = False
            # The other processes come back within a retry interval of this one, once they
            # next ask (a waiting call asks within MAX_NAP, a running one renews its lease
            # within a third of it); until they have leased their running calls again, this
            # one keeps to its share of slots (twice that long: a loaded machine is late).
            every = max(MAX_NAP, self.store.lease / 3)
            self._grace_until = now + 2 * (every + link.retry_interval)
            logger.info("shared rate limits %s: back on the server", self.tag)

    def _within_share(self) -> bool:
        """Whether this process runs fewer calls than its share of the slots."""
        return self.running < self._slots

    def _sharing(self) -> bool:
        """Whether slots are this process's share: it is alone, or just back (see
        :meth:`_rejoin`) while the others may not be."""
        return self.alone or self._fallback.clock.now() < self._grace_until

    async def _reserve(self, holder: str) -> bool | None:
        """While :meth:`_sharing`, count ``holder`` as running before asking the server (so
        calls asking at once cannot all pass the share): ``True`` reserved, ``False`` at
        the share (no slot); ``None`` when not sharing. A call waiting at the share still
        brings this process back to the server as soon as it answers."""
        if not self._sharing():
            return None
        if not self._within_share():
            if self.alone:
                with contextlib.suppress(Unavailable):
                    await self._rejoin()
            return False
        self._renewer.hold(holder, holder)
        return True

    def _unreachable(self, holder: str, reserved: bool | None) -> bool:
        """The server did not answer: whether ``holder`` has a slot in this process's
        share (then it is held)."""
        if reserved:
            return True
        if self._within_share():
            self._renewer.hold(holder, holder)
            return True
        return False

    async def _slot(self, holder: str, args: list[Any]) -> bool:
        reserved = await self._reserve(holder)
        if reserved is False:
            return False
        try:
            (got,) = await self._script("acquire", args)
        except Unavailable:
            return self._unreachable(holder, reserved)
        if got == 1:
            self._renewer.hold(holder, holder)
            return True
        self._renewer.drop(holder)
        return False

    async def acquire(self, timeout: float | None) -> Lease | None:
        """Take a lease on a slot within ``timeout`` seconds; ``None`` if none came.

        One task per process asks the server at a time, every 10 ms (jittered) while the
        slots are busy; the others queue behind it in this process. While the server does
        not answer, a slot is free when this process runs fewer calls than its share.
        """
        if not self.max_concurrency:
            return _NoSlot()
        holder = f"{_PROCESS}-{next(_holders)}"
        args = self._args(holder=holder)
        try:
            if await self._slot(holder, args):
                return _RedisLease(self, holder)
            if timeout is not None and timeout <= 0:
                return None
            with anyio.fail_after(timeout):
                async with self._poller:
                    while True:
                        if await self._slot(holder, args):
                            return _RedisLease(self, holder)
                        await anyio.sleep(_POLL * random.uniform(0.5, 1.5))
        except TimeoutError:
            return None

    async def admit(self, cost: int) -> tuple[Lease | None, float, str]:
        """Take a free slot and, with it, the budget, in one script (see the protocol)."""
        if not self.max_concurrency:
            wait, reason = await self.take(cost)
            return _NoSlot(), wait, reason
        holder = f"{_PROCESS}-{next(_holders)}"
        reserved = await self._reserve(holder)
        if reserved is False:
            return None, 0.0, ""
        try:
            got, taken, wait, reason = await self._script("admit", self._args(cost, holder=holder))
        except Unavailable:
            if not self._unreachable(holder, reserved):
                return None, 0.0, ""
            wait, reason = await self._take_alone(cost)
            return _RedisLease(self, holder), wait, reason
        if got != 1:
            self._renewer.drop(holder)
            return None, 0.0, ""
        lease = self._hold(holder)
        if taken == 1:
            return lease, 0.0, ""
        return lease, float(wait) / 1000.0, reason.decode() if isinstance(reason, bytes) else reason

    def _hold(self, holder: str) -> _RedisLease:
        self._renewer.hold(holder, holder)
        return _RedisLease(self, holder)

    async def _renew(self, client: aioredis.Redis, held: dict[str, str]) -> Any:
        renew = self.store.link.scripts["renew"]
        keys = [self.leases_key, self.keys[4]]
        return await renew(keys=keys, args=[self._lease_ms, _PRESENCE_MS, _PROCESS, *held])

    async def _release(self, holder: str) -> None:
        self._renewer.drop(holder)
        link = self.store.link
        # Shielded: a call cancelled by its caller still gives its slot back. An unreachable
        # server lets the lease end on its own.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(link.cleanup_bound),
            contextlib.suppress(Unavailable),
        ):
            await link.run(lambda client: client.zrem(self.leases_key, holder))

    async def take(self, cost: int) -> tuple[float, str]:
        """Take one request and ``cost`` tokens on the server, or return the wait (seconds)
        and its gate; from this process's share while the server does not answer."""
        try:
            taken, wait, reason = await self._script("take", self._args(cost))
        except Unavailable:
            return await self._take_alone(cost)
        if taken == 1:
            return 0.0, ""
        return float(wait) / 1000.0, reason.decode() if isinstance(reason, bytes) else reason

    async def _take_alone(self, cost: int) -> tuple[float, str]:
        wait, reason = await self._fallback.take(cost)
        if wait <= 0:
            self.share.spend("rpm", 1)
            self.share.spend("tpm", cost)
        return wait, reason

    async def _settle_alone(
        self, refund: int, limits: RateLimit | None, pause: float | None
    ) -> None:
        if limits is not None:
            # The provider reports what the whole fleet has left; this process holds its share.
            fraction = self.share.fraction
            limits = dataclasses.replace(
                limits,
                requests_remaining=_part(limits.requests_remaining, fraction),
                tokens_remaining=_part(limits.tokens_remaining, fraction),
            )
        await self._fallback.settle(refund, limits, pause)
        self.share.spend("tpm", -refund)

    async def settle(self, refund: int, limits: RateLimit | None, pause: float | None) -> None:
        """Correct, shrink and pause on the server in one script (see the protocol)."""
        try:
            await self._script("settle", self._args(refund, limits=limits, pause=pause))
        except Unavailable:
            await self._settle_alone(refund, limits, pause)

    async def finish(
        self, lease: Lease | None, refund: int, limits: RateLimit | None, pause: float | None
    ) -> None:
        """Release ``lease`` and settle in one script (see the protocol)."""
        if isinstance(lease, _RedisLease) and lease.taken() is not None:
            holder = lease.holder
            self._renewer.drop(holder)
            args = self._args(refund, holder=holder, limits=limits, pause=pause)
            link = self.store.link
            # Shielded as a release is: the slot must not stay held past a cancellation.
            with anyio.CancelScope(shield=True), anyio.move_on_after(link.cleanup_bound):
                try:
                    await self._script("finish", args)
                except Unavailable:
                    await self._settle_alone(refund, limits, pause)
            return
        if lease is not None:
            await lease.release()
        await self.settle(refund, limits, pause)


def _part(count: int | None, fraction: float) -> int | None:
    return None if count is None else int(count * fraction)


class _FillLease:
    """The right to fill one cache entry, held until :meth:`release`."""

    __slots__ = ("_cache", "holder", "key")

    def __init__(self, cache: RedisCache, key: str, holder: str) -> None:
        self._cache: RedisCache | None = cache
        self.key = key
        self.holder = holder

    async def release(self) -> None:
        cache, self._cache = self._cache, None
        if cache is not None:
            await cache._release(self.key, self.holder)


_NO_FILL = _NoSlot()
"""The lease of a caller that fills an entry nobody waits for (the server does not answer,
or the cache does not coalesce)."""


class RedisCache:
    """Cache entries on a Redis server, shared by every process that names it.

    Implements :class:`~polythink.backends.base.CacheBackend` under the cache layer's rules
    (key, TTL, complete successes only, streaming replay). Values are zlib-compressed. The
    server keeps at most ``size_limit`` bytes of values: storing past it removes the least
    recently stored entries first, as the disk cache does; entries also expire after
    ``ttl``. All keys share the hash tag ``{polythink-cache}`` (one Redis Cluster slot), so
    the culling script sees them all. A server that does not answer makes lookups misses
    and writes no-ops (one warning per outage).

    It also implements :class:`~polythink.backends.base.CoalescingCache`: identical calls
    in flight in different processes make one upstream call. The first to miss sets the
    key's fill lease (``polythink:{polythink-cache}:f:<key>``, its value a holder id, with a
    ``lease`` expiry renewed every third of it while the call runs); the others look again
    after a tenth of the time they have waited so far (5 to 100 ms) until the entry is there,
    and take the lease over when it is gone without an entry (its holder failed, was
    cancelled, or died and stopped renewing it). A caller waits at most ``wait`` seconds,
    then calls itself.

    Args:
        url: the server (see :class:`RedisLimitStore`).
        ttl: seconds an entry stays fresh; ``None``: until culled.
        size_limit: bytes of compressed values kept on the server.
        retry_interval, socket_timeout, max_connections, pool_timeout: as
            :class:`RedisLimitStore`.
        lease: seconds a fill lease lasts without renewal: how long the callers waiting for
            a holder that died wait before one of them calls.
        wait: the longest a call waits for another process's call to fill its entry, in
            seconds.
        coalesce: ``False``: every process that misses calls (no fill leases, no waiting).

    Raises:
        ValueError: for a URL of another scheme, a non-positive ``ttl``, ``size_limit``,
            ``lease`` or a negative ``wait``.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl: float | None = None,
        size_limit: int = DEFAULT_SIZE_LIMIT,
        retry_interval: float = DEFAULT_RETRY_INTERVAL,
        socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
        lease: float = DEFAULT_FILL_LEASE,
        wait: float = DEFAULT_FILL_WAIT,
        coalesce: bool = True,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        if isinstance(size_limit, bool) or not isinstance(size_limit, int) or size_limit <= 0:
            raise InvalidInputError(
                f"size_limit must be a positive number of bytes; got {size_limit!r}"
            )
        if ttl is not None and (isinstance(ttl, bool) or not ttl > 0):
            raise InvalidInputError(
                f"ttl must be a positive number of seconds or None; got {ttl!r}"
            )
        if not lease > 0:
            raise InvalidInputError(f"lease must be a positive number of seconds; got {lease!r}")
        if not wait >= 0:
            raise InvalidInputError(f"wait must be a number of seconds >= 0; got {wait!r}")
        self.ttl = ttl
        self.size_limit = size_limit
        self.lease = lease
        self.wait = wait
        self.coalesce = coalesce
        self.link = _Link(
            url,
            "shared cache",
            "every lookup is a miss",
            retry_interval=retry_interval,
            socket_timeout=socket_timeout,
            max_connections=max_connections,
            pool_timeout=pool_timeout,
            scripts={
                "set": _CACHE_SET,
                "claim": _CACHE_CLAIM,
                "renew": _FILL_RENEW,
                "release": _FILL_RELEASE,
            },
        )
        base = "polythink:{polythink-cache}:"
        self.prefix = base + "e:"
        self.fill_prefix = base + "f:"
        self._index = [base + "index", base + "sizes", base + "total"]
        self._lease_ms = max(1, round(lease * 1000))
        self._renewer = _Renewer(self.link, lease, self._renew)

    async def load(self, key: str) -> bytes | None:
        """Return the decompressed value under ``key``, or ``None`` (also when unreachable).

        Raises:
            ValueError: the stored value is not a zlib stream.
        """
        try:
            raw = await self.link.run(lambda client: client.get(self.prefix + key))
        except Unavailable:
            return None
        return None if raw is None else _unpacked(raw)

    async def claim(self, key: str) -> tuple[bytes | None, Lease | None]:
        """Return the entry under ``key``, or take its fill lease, in one round trip (see
        :class:`~polythink.backends.base.CoalescingCache`).

        Raises:
            ValueError: the stored value is not a zlib stream.
        """
        holder = f"{_PROCESS}-{next(_holders)}" if self.coalesce else ""
        link = self.link

        async def claim(client: aioredis.Redis) -> Any:
            return await link.scripts["claim"](
                keys=[self.prefix + key, self.fill_prefix + key], args=[holder, self._lease_ms]
            )

        try:
            state, value = await link.run(claim)
        except Unavailable:
            return None, _NO_FILL
        if state == 1:
            return _unpacked(value), None
        if state == 2:
            self._renewer.hold(self.fill_prefix + key, holder)
            return None, _FillLease(self, key, holder)
        if state == 3:
            return None, None
        return None, _NO_FILL

    async def wait_for(self, key: str, timeout: float | None) -> tuple[bytes | None, Lease | None]:
        """Wait for another process to fill ``key``: at most ``timeout`` seconds and at most
        :attr:`wait`; return as :meth:`claim` does, ``(None, None)`` when the wait ended.

        Raises:
            ValueError: the stored value is not a zlib stream.
        """
        bound = self.wait if timeout is None else min(self.wait, timeout)
        started = time.monotonic()
        while (waited := time.monotonic() - started) < bound:
            pause = min(_FILL_POLL[1], max(_FILL_POLL[0], waited / 10))
            await anyio.sleep(min(pause * random.uniform(0.5, 1.5), bound - waited))
            value, lease = await self.claim(key)
            if value is not None or lease is not None:
                return value, lease
        return None, None

    async def _renew(self, client: aioredis.Redis, held: dict[str, str]) -> Any:
        return await self.link.scripts["renew"](
            keys=list(held), args=[self._lease_ms, *held.values()]
        )

    async def _release(self, key: str, holder: str) -> None:
        name = self.fill_prefix + key
        self._renewer.drop(name)
        link = self.link

        async def release(client: aioredis.Redis) -> Any:
            return await link.scripts["release"](keys=[name], args=[holder])

        # Shielded: a cancelled holder still lets the others go on at once. An unreachable
        # server lets the lease end on its own.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(link.cleanup_bound),
            contextlib.suppress(Unavailable),
        ):
            await link.run(release)

    async def save(self, key: str, value: bytes, ttl: float | None) -> None:
        """Compress and store ``value``; nothing happens while the server does not answer."""
        packed = zlib.compress(value, _COMPRESSION)
        ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))
        link = self.link

        async def store(client: aioredis.Redis) -> Any:
            return await link.scripts["set"](
                keys=[self.prefix + key, *self._index],
                args=[packed, ttl_ms, self.size_limit, key, self.prefix],
            )

        try:
            await link.run(store)
        except Unavailable:
            return

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.link.aclose()


def _unpacked(raw: Any) -> bytes:
    try:
        return zlib.decompress(bytes(raw) if isinstance(raw, bytes) else raw.encode())
    except zlib.error as exc:
        raise InvalidInputError(f"a shared cache entry is not compressed data: {exc}") from None
