"""The response cache: answer a call that was answered before without asking a provider.

Per call, above failover (DESIGN §2, §5). The key is the SHA-256 of the canonical JSON
(object keys sorted at every depth, array order kept) of

- every request field that reaches a provider: messages (with the reasoning items sent back),
  tools, ``tool_choice``, ``temperature``, ``top_p``, ``stop``, ``max_tokens``, the call's
  ``extra_body`` (case C05) and whether it streams;
- the effective requested reasoning tier of each source: the call's own tier, else the
  source's configured one, so asking per call for the tier a source already has shares its
  entry. The cache sits above the reasoning layer, so the tier a source would map it to is
  not known yet, and need not be;
- the identity of every source of the client, in order: provider, model, base URL, its
  fallback policy, ``drop_params`` and its own ``extra_body``.

Never secrets, headers, timeouts, limits or other metadata. Because of the canonical form,
two requests that differ only in the order of JSON object keys share an entry (case C06).

Only complete successes are stored: a raised error, a stream that broke or was closed
early, and a response with ``finish_reason == "error"`` never are (case C07). A hit on
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

Per call, ``cache=False`` bypasses the cache and ``cache="refresh"`` skips the lookup and
overwrites the entry with the fresh answer. Entries older than ``ttl`` seconds are misses.
A store that fails (a corrupt or unreadable file, a locked database) degrades to a miss and
logs one warning; the call goes on to the provider.

Entries live in a :class:`~polythink.backends.base.CacheBackend` (:func:`cache_backend`):
a synchronous store (diskcache) run by :class:`~polythink.backends.local.StoreCache` —
writes, and reads from stores other than diskcache, in worker threads; a diskcache read
(one SQLite row, WAL mode) in the caller's task, being cheaper than the hand-off — or a
:class:`~polythink.backends.redis.RedisCache` shared by many processes, which the same
rules apply to. Entries are UTF-8 JSON, not pickles.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import operator
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import diskcache  # type: ignore[import-untyped]
import orjson

from polythink.backends.base import DEFAULT_SIZE_LIMIT, CacheBackend
from polythink.backends.local import StoreCache
from polythink.config import Source
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.middleware.failover import NOTE_PREFIX
from polythink.types import (
    Cost,
    Effort,
    Message,
    Request,
    Response,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    ToolCallDelta,
    Usage,
)

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
]

logger = logging.getLogger("polythink.cache")

_T = TypeVar("_T")

# Part of every key: raised whenever what counts as a complete success, or how an answer is
# parsed, changes, so entries stored under the old rules miss instead of being served.
_KEY_VERSION = b"polythink-cache-v3\n"
_ENTRY_VERSION = 1
_DB_FILES = ("cache.db", "cache.db-wal", "cache.db-shm")
_NO_VALUE_FILES = 2**62
"""diskcache ``disk_min_file_size``: keep every value inside the SQLite database, whose
files are created private, rather than as separate files created with the process umask."""


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


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the user cache directory: ``$XDG_CACHE_HOME/polythink`` or ``~/.cache/polythink``.

    A relative ``XDG_CACHE_HOME`` is ignored, as the XDG base directory specification says.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "polythink"


class DiskStore:
    """A diskcache store in a directory private to the user, opened on first use.

    The directory is created (or narrowed) to mode 0700 and the database files to 0600;
    values are kept inside the database so no other file is written. Opening happens in the
    worker thread of the first lookup, never in the event loop.

    Args:
        directory: where the cache lives; ``None``: :func:`default_cache_dir`.
        size_limit: bytes on disk before the least recently stored entries are culled
            (approximate, as diskcache enforces it).
        ttl: seconds an entry stays fresh; ``None``: no expiry.

    Raises:
        ValueError: for a non-positive ``size_limit`` or ``ttl``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        size_limit: int = DEFAULT_SIZE_LIMIT,
        ttl: float | None = None,
    ) -> None:
        if isinstance(size_limit, bool) or not isinstance(size_limit, int) or size_limit <= 0:
            raise ValueError(f"size_limit must be a positive number of bytes; got {size_limit!r}")
        if ttl is not None and (isinstance(ttl, bool) or not ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds or None; got {ttl!r}")
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.size_limit = size_limit
        self.ttl = ttl
        self._cache: diskcache.Cache | None = None
        self._lock = threading.Lock()

    def _open(self) -> diskcache.Cache:
        cache = self._cache
        if cache is not None:
            return cache
        with self._lock:
            if self._cache is None:
                directory = self.directory
                if not directory.exists():
                    directory.mkdir(mode=0o700, parents=True)
                    # mkdir's mode is masked by the umask; the directory polythink creates is
                    # private. A directory the caller already had keeps its mode: the files
                    # inside are private either way.
                    os.chmod(directory, 0o700)
                database = directory / _DB_FILES[0]
                # SQLite gives the -wal and -shm files the database file's mode, so a
                # database created private keeps every file private.
                os.close(os.open(database, os.O_CREAT | os.O_WRONLY, 0o600))
                for name in _DB_FILES:
                    path = directory / name
                    if path.exists():
                        os.chmod(path, 0o600)
                self._cache = diskcache.Cache(
                    str(directory),
                    timeout=2.0,
                    size_limit=self.size_limit,
                    disk_min_file_size=_NO_VALUE_FILES,
                    # Without it SQLite keeps the write-ahead log at its largest size.
                    sqlite_journal_size_limit=self.size_limit,
                )
            return self._cache

    def get(self, key: str) -> Any:
        """Return the value under ``key`` or ``None``."""
        return self._open().get(key)

    def set(self, key: str, value: bytes, expire: float | None = None) -> Any:
        """Store ``value`` under ``key``; ``expire`` in seconds (``None``: never)."""
        return self._open().set(key, value, expire=expire)

    def delete(self, key: str) -> Any:
        """Remove ``key``."""
        return self._open().delete(key)

    def volume(self) -> int:
        """Return the estimated size of the cache on disk, in bytes."""
        return int(self._open().volume())

    def close(self) -> None:
        """Close the calling thread's database connection."""
        if self._cache is not None:
            self._cache.close()


_NOT_PATHS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0", "none"})


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def cache_store(option: Any) -> CacheStore | CacheBackend | None:
    """Turn ``Client(cache=...)`` into a store, or ``None`` for no cache.

    ``None``/``False``: off. ``True``: a :class:`DiskStore` in :func:`default_cache_dir`.
    A ``redis://``, ``rediss://`` or ``unix://`` URL: a
    :class:`~polythink.backends.redis.RedisCache` on that server (extra
    ``polythink[redis]``), shared by every process naming it. Another ``str`` or path: a
    :class:`DiskStore` there. Anything with callable ``get``, ``set`` and ``delete`` (see
    :class:`CacheStore`), or async ``load`` and ``save`` (see
    :class:`~polythink.backends.base.CacheBackend`): used as is.

    Raises:
        ValueError: for any other value, or a Redis URL without the ``redis`` package.
    """
    if option is None or option is False:
        return None
    if option is True:
        return DiskStore()
    if isinstance(option, str) and option.startswith(_REDIS_SCHEMES):
        from polythink.backends.redis import RedisCache

        return RedisCache(option)
    if isinstance(option, str) and option.strip().lower() in _NOT_PATHS:
        raise ValueError(
            f"cache={option!r} looks like a flag, not a directory: pass the bool True for the "
            "user cache directory, False or None for no cache, or a directory path"
        )
    if isinstance(option, str | os.PathLike):
        return DiskStore(option)
    if all(callable(getattr(option, name, None)) for name in ("load", "save")):
        backend: CacheBackend = option
        return backend
    if all(callable(getattr(option, name, None)) for name in ("get", "set", "delete")):
        store: CacheStore = option
        return store
    raise ValueError(
        "cache must be None or False (off), True (the user cache directory), a directory "
        "path, a redis:// URL, or an object with get/set/delete methods such as "
        f"diskcache.Cache; got {type(option).__name__}"
    )


def cache_backend(store: CacheStore | CacheBackend) -> CacheBackend:
    """Return ``store`` as a :class:`~polythink.backends.base.CacheBackend`.

    An object with async ``load``/``save`` is one already; a synchronous store is run by a
    :class:`~polythink.backends.local.StoreCache`, which reads a diskcache store inline
    (cheaper than a thread) and every other store, and every write, in worker threads.
    """
    if all(callable(getattr(store, name, None)) for name in ("load", "save")):
        backend: CacheBackend = store  # type: ignore[assignment]
        return backend
    return StoreCache(store, inline_reads=isinstance(store, DiskStore | diskcache.Cache))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _canonical_json(value: Any) -> str:
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_plain,
    )


def _message(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "reasoning": message.reasoning,
        "reasoning_items": list(message.reasoning_items),
        "reasoning_format": message.reasoning_format,
    }


def _number(value: float | None) -> float | None:
    # 0 and 0.0 put the same value on the wire for a provider; give them one key.
    return None if value is None else float(value)


def effective_efforts(request: Request, defaults: Sequence[Effort | None]) -> list[str | None]:
    """The tier each source is asked for: the call's own, else the source's default (unset:
    ``None``), in source order; the same precedence as the reasoning layer's."""
    asked = request.reasoning_effort
    if asked is not None:
        return [asked.value] * len(defaults)
    return [d.value if d is not None else None for d in defaults]


def canonical_request(request: Request, defaults: Sequence[Effort | None] | None = None) -> str:
    """Return the canonical JSON of the fields of ``request`` that reach a provider.

    Object keys are sorted at every depth; array order (messages, tools, stop) is kept;
    ``temperature`` and ``top_p`` are compared as numbers (``0`` and ``0.0`` are equal).
    ``timeout``, ``cache``, message metadata (never sent) and the resolution (set later,
    per source) are not included. ``system_suffix`` and ``prompt_cache`` are included only
    when set, so keys of calls without them are unchanged. With ``defaults`` (the sources'
    configured tiers) ``reasoning_effort`` is the list of :func:`effective_efforts`;
    without, the call's own tier.

    Raises:
        TypeError: a field holds a value JSON cannot represent.
        ValueError: a field holds NaN or an infinity.
    """
    return _canonical_json(
        {
            **_fields_around_messages(request, defaults),
            "messages": [_message(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "extra_body": request.extra_body,
        }
    )


def _fields_around_messages(
    request: Request, defaults: Sequence[Effort | None] | None
) -> dict[str, Any]:
    """The key's fields other than ``messages``, ``max_tokens`` and ``extra_body``: one list
    for :func:`canonical_request` and its fast path :func:`_around_messages`, which must
    agree byte for byte."""
    fields: dict[str, Any] = {}
    if request.system_suffix is not None:
        fields["system_suffix"] = request.system_suffix
    if request.prompt_cache is not None:
        cache = request.prompt_cache
        fields["prompt_cache"] = [cache.key, cache.retention, cache.ttl, cache.breakpoints]
    effort: list[str | None] | str | None
    if defaults is not None:
        effort = effective_efforts(request, defaults)
    else:
        effort = request.reasoning_effort.value if request.reasoning_effort is not None else None
    fields.update(
        {
            "reasoning_effort": effort,
            "temperature": _number(request.temperature),
            "top_p": _number(request.top_p),
            "stop": list(request.stop) if request.stop is not None else None,
            "tools": [
                {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": t.strict,
                }
                for t in request.tools
            ],
            "tool_choice": request.tool_choice,
            "stream": request.stream,
        }
    )
    return fields


def canonical_scope(sources: Sequence[Source]) -> str:
    """Return the canonical JSON of the sources' identities (never keys or headers).

    Per source, in order: provider, model, base URL in use, fallback policy,
    ``drop_params`` and ``extra_body``. The configured effort is not here: it is part of the
    effective tiers in :func:`canonical_request`.

    Raises:
        TypeError: an ``extra_body`` holds a value JSON cannot represent.
    """
    return _canonical_json(
        [
            {
                "provider": s.provider,
                "model": s.model,
                "base_url": s.endpoint,
                "effort_fallback": s.effort_fallback,
                "drop_params": s.drop_params,
                "extra_body": s.extra_body,
            }
            for s in sources
        ]
    )


def _digest(
    scope: bytes,
    request: Request,
    defaults: Sequence[Effort | None] | None = None,
    prefixes: _Prefixes | None = None,
) -> str:
    """SHA-256 of the version, ``scope``, a newline and :func:`canonical_request`'s bytes.

    The bytes are assembled, not encoded whole: the fields sorted before ``messages``, each
    message's canonical bytes, the fields after. With ``prefixes``, the hash of a
    conversation's unchanged prefix is resumed, so only its new messages are encoded (a
    memo per message would cost more than it saves: the prefix covers the messages a
    conversation sends again). The digest is the one of the whole canonical JSON either way.
    """
    head, tail = _around_messages(request, defaults)
    start = _KEY_VERSION + scope + b"\n" + head
    messages = request.messages
    if prefixes is None:
        digest = hashlib.sha256(start)
        digest.update(_messages_bytes(messages))
    else:
        digest = prefixes.resume(start, messages)
    digest.update(tail)
    return digest.hexdigest()


_TEXT = (str, type(None))
_NONE: tuple[()] = ()
"""An empty array in a plain message (a tuple: orjson writes it as ``[]``, and sharing one
spares the collector two containers a message)."""


def _plain_message(message: Message) -> dict[str, Any] | None:
    """The canonical dict of a message of strings only, keys in sorted order; ``None`` for
    any other message (content parts, reasoning items: values whose floats orjson and
    ``json`` write differently)."""
    content = message.content
    name = message.name
    reasoning = message.reasoning
    fmt = message.reasoning_format
    call_id = message.tool_call_id
    if (
        content.__class__ in _TEXT
        and not message.reasoning_items
        and reasoning.__class__ in _TEXT
        and call_id.__class__ in _TEXT
        and name.__class__ in _TEXT
        and fmt.__class__ in _TEXT
    ):
        calls = message.tool_calls
        return {
            "content": content,
            "name": name,
            "reasoning": reasoning,
            "reasoning_format": fmt,
            "reasoning_items": _NONE,
            "role": message.role,
            "tool_call_id": call_id,
            "tool_calls": [(c.id, c.name, c.arguments) for c in calls] if calls else _NONE,
        }
    return None


def _message_bytes(message: Message) -> bytes:
    """``_canonical_json(_message(message)).encode()``, through orjson when it is the same:
    a message of strings only, written in sorted key order, is byte for byte what ``json``
    writes; any other message goes through ``json``."""
    plain = _plain_message(message)
    if plain is not None:
        try:
            return orjson.dumps(plain)
        except TypeError:
            pass  # a lone surrogate: json decides
    return _canonical_json(_message(message)).encode()


def _messages_bytes(messages: Sequence[Message]) -> bytes:
    """The messages' canonical bytes joined by commas: one orjson call for the lot when
    every message is of strings only, as a conversation mostly is (3,000 messages in one
    call rather than 3,000 calls), else message by message."""
    plain = [_plain_message(m) for m in messages]
    if None not in plain:
        try:
            return orjson.dumps(plain)[1:-1]
        except TypeError:
            pass  # a lone surrogate somewhere: message by message, json deciding
    return b",".join([_message_bytes(m) for m in messages])


def _around_messages(
    request: Request, defaults: Sequence[Effort | None] | None = None
) -> tuple[bytes, bytes]:
    """The canonical request's bytes before its first message and after its last.

    Keys sort as ``extra_body``, ``max_tokens``, ``messages``, then the rest (the optional
    ``prompt_cache`` and ``system_suffix`` among them), so the head is the first two fields
    and ``"messages":[``, the tail ``]`` and the rest, as :func:`canonical_request` has them.
    """
    head = _canonical_bytes({"extra_body": request.extra_body, "max_tokens": request.max_tokens})
    tail = _canonical_bytes(_fields_around_messages(request, defaults))
    return head[:-1] + b',"messages":[', b"]," + tail[1:]


def _orjson_exact(value: Any) -> bool:
    """Whether orjson writes ``value`` as :func:`_canonical_json` does, byte for byte.

    Strings, booleans, ``None``, integers within 64 bits, floats from 1e-4 to 1e16 (where
    both write the shortest decimal form; outside it their exponent forms differ), and
    dicts with string keys and lists of those. Anything else (a Mapping that is not a dict,
    NaN, a large integer) is left to ``json``, which decides or raises.
    """
    stack = [value]
    pop = stack.pop
    extend = stack.extend
    while stack:
        item = pop()
        cls = item.__class__
        if cls is str or item is None or cls is bool:
            continue
        if cls is dict:
            for key in item:
                if key.__class__ is not str:
                    return False
            extend(item.values())
        elif cls is list or cls is tuple:
            extend(item)
        elif cls is int:
            if not -(2**63) <= item < 2**64:
                return False
        elif cls is float:
            if not (item == 0.0 or 1e-4 <= abs(item) < 1e16):
                return False
        else:
            return False
    return True


def _canonical_bytes(value: Any) -> bytes:
    """``_canonical_json(value).encode()``, through orjson where it writes the same bytes."""
    if _orjson_exact(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass  # a lone surrogate: json decides
    return _canonical_json(value).encode()


class _Prefixes:
    """The hash state after the last messages of recent conversations, to resume from.

    An agent loop sends its conversation again with two more messages each turn; the hash
    of what it sent before is kept (with the head it started from and the messages, held
    by identity) and resumed, so a turn hashes only its new messages. Only conversations
    seen before (their first message, by identity, began an earlier request) are kept, up
    to ``size``, the least recently used dropped first; the newest other one waits in a
    single trial slot, so conversations rebuilt from dicts on every call hold at most one
    conversation here.
    """

    __slots__ = ("_entries", "_roots", "_size", "_trial")

    _LOOKBACK = 8
    """How many of the newest messages may be new since a kept prefix."""

    def __init__(self, size: int = 16) -> None:
        self._entries: dict[int, tuple[bytes, tuple[Message, ...], Any]] = {}
        self._roots: dict[int, Message] = {}
        self._size = size
        self._trial: tuple[int, tuple[bytes, tuple[Message, ...], Any]] | None = None

    def resume(self, start: bytes, messages: tuple[Message, ...]) -> Any:
        """The hash of ``start`` and the messages' canonical bytes joined by commas."""
        entries = self._entries
        digest = None
        done = 0
        trial = self._trial
        for end in range(len(messages), max(0, len(messages) - self._LOOKBACK), -1):
            last = id(messages[end - 1])
            found = entries.get(last)
            if found is None and trial is not None and trial[0] == last:
                found = trial[1]
            if found is None:
                continue
            head, kept, state = found
            if head == start and len(kept) == end and all(map(operator.is_, kept, messages)):
                digest, done = state.copy(), end
                break
        if digest is None:
            digest = hashlib.sha256(start)
        if done < len(messages):
            fresh = _messages_bytes(messages[done:])
            digest.update(b"," + fresh if done else fresh)
        if messages:
            key = id(messages[-1])
            entry = (start, messages, digest.copy())
            if self._seen(messages[0]):
                entries.pop(key, None)
                entries[key] = entry
                if len(entries) > self._size:
                    del entries[next(iter(entries))]
            else:
                self._trial = (key, entry)
        return digest

    def _seen(self, root: Message) -> bool:
        roots = self._roots
        if roots.get(id(root)) is root:
            return True
        roots[id(root)] = root
        if len(roots) > 16 * self._size:
            del roots[next(iter(roots))]
        return False


def cache_key(request: Request, sources: Sequence[Source]) -> str:
    """Return the cache key (64 hex characters) of ``request`` sent to ``sources``.

    Raises:
        TypeError, ValueError: as :func:`canonical_request`.
    """
    return _digest(canonical_scope(sources).encode(), request, [s.effort for s in sources])


def _usage_out(usage: Usage | None) -> list[int | None] | None:
    if usage is None:
        return None
    return [
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    ]


def _usage_in(data: Any) -> Usage | None:
    return None if data is None else Usage(*data)


def _call_in(data: Any) -> ToolCall:
    call_id, name, arguments = data
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _message_in(data: Mapping[str, Any]) -> Message:
    return Message(
        role=data["role"],
        content=data["content"],
        tool_calls=tuple(_call_in(c) for c in data["tool_calls"]),
        tool_call_id=data["tool_call_id"],
        name=data["name"],
        reasoning=data["reasoning"],
        reasoning_items=tuple(data["reasoning_items"]),
        reasoning_format=data["reasoning_format"],
    )


def _cost_out(cost: Cost | None) -> list[Any] | None:
    if cost is None:
        return None
    return [
        cost.total,
        cost.input,
        cost.cache_read,
        cost.cache_write,
        cost.output,
        cost.reasoning,
        cost.source,
    ]


def _cost_in(data: Any) -> Cost | None:
    if data is None:
        return None
    total, input_, cache_read, cache_write, output, reasoning, source = data
    return Cost(
        total=total,
        input=input_,
        cache_read=cache_read,
        cache_write=cache_write,
        output=output,
        reasoning=reasoning,
        source=source,
    )


def _effort_in(value: Any) -> Effort | None:
    return None if value is None else Effort(value)


def _response_out(response: Response) -> dict[str, Any]:
    return {
        "text": response.text,
        "reasoning": response.reasoning,
        "tool_calls": [[c.id, c.name, c.arguments] for c in response.tool_calls],
        "finish_reason": response.finish_reason,
        "usage": _usage_out(response.usage),
        "model": response.model,
        "provider": response.provider,
        "source_index": response.source_index,
        "message": _message(response.message),
        "requested_effort": (
            response.requested_effort.value if response.requested_effort is not None else None
        ),
        "applied_effort": (
            response.applied_effort.value if response.applied_effort is not None else None
        ),
        "thinking": response.thinking.value,
        "warnings": [w for w in response.warnings if not w.startswith(NOTE_PREFIX)],
        "output_limited": response.output_limited,
        "id": response.id,
        "native_finish_reason": response.native_finish_reason,
        "cost": _cost_out(response.cost),
    }


def _response_in(data: Mapping[str, Any]) -> Response:
    return Response(
        text=data["text"],
        reasoning=data["reasoning"],
        tool_calls=[_call_in(c) for c in data["tool_calls"]],
        finish_reason=data["finish_reason"],
        usage=_usage_in(data["usage"]),
        model=data["model"],
        provider=data["provider"],
        source_index=data["source_index"],
        message=_message_in(data["message"]),
        requested_effort=_effort_in(data["requested_effort"]),
        applied_effort=_effort_in(data["applied_effort"]),
        thinking=ThinkingObservation(data["thinking"]),
        warnings=list(data["warnings"]),
        cache_hit=True,
        output_limited=data["output_limited"],
        id=data["id"],
        native_finish_reason=data.get("native_finish_reason"),
        cost=_cost_in(data.get("cost")),
    )


def _event_out(event: StreamEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    if event.text is not None:
        out["text"] = event.text
    if event.tool_call is not None:
        call = event.tool_call
        out["tool_call"] = [call.id, call.name, call.arguments]
    if event.usage is not None:
        out["usage"] = _usage_out(event.usage)
    if event.response is not None:
        out["response"] = _response_out(event.response)
    if event.tool_call_delta is not None:
        piece = event.tool_call_delta
        out["tool_call_delta"] = [piece.index, piece.id, piece.name, piece.arguments]
    return out


def _event_in(data: Mapping[str, Any]) -> StreamEvent:
    kind = data["type"]
    if kind not in ("text", "reasoning", "tool_call_delta", "tool_call", "usage", "done"):
        raise ValueError(f"unknown stream event type {kind!r}")
    call = data.get("tool_call")
    response = data.get("response")
    piece = data.get("tool_call_delta")
    return StreamEvent(
        kind,
        text=data.get("text"),
        tool_call=_call_in(call) if call is not None else None,
        usage=_usage_in(data.get("usage")),
        response=_response_in(response) if response is not None else None,
        tool_call_delta=(
            ToolCallDelta(index=piece[0], id=piece[1], name=piece[2], arguments=piece[3])
            if piece is not None
            else None
        ),
    )


class _Recording:
    """A stream's events, kept small until the stream is stored.

    Text and reasoning deltas, nearly every event of a long stream, are kept as their kind
    and text only (the text is the string the transport already holds), and the entry is
    written as UTF-8 JSON straight into one buffer: no event objects or per-event dicts are
    kept, which held a 100 000-chunk stream at about 50 MiB (``polythink bench`` memory
    scenario, 2026-11-30). The entry is the canonical JSON ``{"at", "events", "v"}`` that
    :meth:`CacheMiddleware._save` writes.
    """

    __slots__ = ("_kinds", "_payloads")

    def __init__(self) -> None:
        self._kinds: list[str] = []
        self._payloads: list[Any] = []

    def add(self, event: StreamEvent) -> None:
        kind = event.type
        self._kinds.append(kind)
        self._payloads.append(event.text if kind in _DELTA_KINDS else event)

    def replay(self) -> list[StreamEvent]:
        """The recorded events as a cache hit replays them (the ``done`` response a hit)."""
        events = []
        for kind, payload in zip(self._kinds, self._payloads, strict=True):
            if kind in _DELTA_KINDS:
                events.append(StreamEvent(kind, text=payload))  # type: ignore[arg-type]
            else:
                events.append(_event_in(_event_out(payload)))
        return events

    def entry(self, at: float) -> bytes:
        """The entry's bytes.

        Raises:
            TypeError, ValueError: a value JSON cannot represent.
        """
        out = io.BytesIO()
        write = out.write
        write(b'{"at":' + _canonical_json(at).encode() + b',"events":[')
        for i, (kind, payload) in enumerate(zip(self._kinds, self._payloads, strict=True)):
            if i:
                write(b",")
            if kind in _DELTA_KINDS:
                text = json.dumps(payload, ensure_ascii=False)
                write(b'{"text":' + text.encode() + b',"type":"' + kind.encode() + b'"}')
            else:
                write(_canonical_json(_event_out(payload)).encode())
        write(b'],"v":' + str(_ENTRY_VERSION).encode() + b"}")
        return out.getvalue()


_DELTA_KINDS = frozenset({"text", "reasoning"})


class _Flight:
    """One call on its way upstream that identical calls wait for (single flight).

    ``ended`` is set when the first call is over; then ``response`` (a complete call, or
    its hit), ``recording`` (a stream that reached its ``done`` event), ``events`` (a
    stream's hit) or ``error`` tells how. All ``None``: the first caller was cancelled or
    stopped reading early.
    """

    __slots__ = ("ended", "error", "events", "recording", "response")

    def __init__(self) -> None:
        self.ended = anyio.Event()
        self.response: Response | None = None
        self.recording: _Recording | None = None
        self.events: list[StreamEvent] | None = None
        self.error: Exception | None = None


class _BatchWriter:
    """Write a disk store's entries from one thread, many entries per SQLite transaction.

    A write hands its entry to :meth:`put` and returns at once: the entry is in
    :attr:`pending`, where the same process's lookups find it, until the writer thread has
    committed it. The thread waits ``delay`` seconds after the first pending entry, commits
    everything pending in one transaction, and ends after ``linger`` idle seconds (so an
    idle client holds no thread). :meth:`flush` commits what is pending now; the client
    calls it on ``aclose``, and the thread is not a daemon, so an interpreter that exits
    also waits for it. One transaction per entry and a thread hand-off per call cost
    +450 to +870 us a call (``polythink bench``, 2026-11-30).
    """

    def __init__(
        self,
        store: DiskStore | diskcache.Cache,
        ttl: float | None,
        on_error: Callable[[str, BaseException], None],
        *,
        delay: float = 0.005,
        linger: float = 1.0,
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._on_error = on_error
        self._delay = delay
        self._linger = linger
        self.pending: dict[str, bytes] = {}
        """Entries handed over and not yet committed, by key."""
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._idle = False

    def put(self, key: str, value: bytes) -> None:
        """Hand ``value`` over for ``key``; it is committed within about ``delay`` seconds."""
        with self._wake:
            self.pending[key] = value
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="polythink-cache-writer", daemon=False
                )
                self._thread.start()
            elif self._idle:
                # A writer already waiting out its delay or committing takes this entry
                # with the rest; only an idle one needs waking.
                self._idle = False
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self.pending:
                    self._idle = True
                    if not self._wake.wait(self._linger) and not self.pending:
                        self._thread = None
                        self._idle = False
                        return
                self._idle = False
            time.sleep(self._delay)
            self.flush()

    def flush(self) -> None:
        """Commit every pending entry now, in one transaction (blocking: call it from a
        worker thread). A store that fails is reported through ``on_error``; the entries
        are dropped, as a failed write is with any store."""
        with self._wake:
            batch = dict(self.pending)
        if not batch:
            return
        try:
            cache = self._store._open() if isinstance(self._store, DiskStore) else self._store
            with cache.transact():
                for key, value in batch.items():
                    cache.set(key, value, expire=self._ttl)
        except Exception as exc:
            self._on_error("the cache cannot be written; the answer was not stored", exc)
        with self._wake:
            for key, value in batch.items():
                if self.pending.get(key) is value:
                    del self.pending[key]


def _complete_success(response: Response | None) -> bool:
    return response is not None and response.finish_reason != "error"


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
            raise ValueError(f"cache ttl must be a positive number of seconds; got {ttl!r}")
        try:
            scope = canonical_scope(sources)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a source's extra_body cannot be part of a cache key: {exc}") from exc
        self.store = store
        self.backend = cache_backend(store)
        self.ttl = ttl
        self._scope = scope.encode()
        self._defaults = tuple(s.effort for s in sources)
        self._flights: dict[str, _Flight] = {}
        self._prefixes = _Prefixes()
        self._clock = clock
        # Disk stores commit in batches from one thread; other stores (which may be remote
        # or do their own batching) are written one entry at a time by their backend.
        self._writer = (
            _BatchWriter(store, ttl, self._degraded)
            if isinstance(store, DiskStore | diskcache.Cache)
            else None
        )
        self._warned = False

    def key(self, request: Request) -> str | None:
        """Return the cache key of ``request``, or ``None`` (with one warning) when a field
        cannot be represented in JSON, in which case the call is not cached."""
        try:
            return _digest(self._scope, request, self._defaults, self._prefixes)
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
            await flight.ended.wait()
            if flight.error is not None:
                raise flight.error
            if flight.response is not None:
                return _response_in(_response_out(flight.response))
            # The first caller was cancelled: look again, and go upstream if no one else has.
        # The flight is registered before the lookup and ends after the answer is stored, so
        # an identical call either joins it or finds the entry.
        flight = self._flights[key] = _Flight()
        try:
            if mode != "refresh":
                entry = await self._load(key)
                if entry is not None:
                    cached = self._decode(entry, lambda e: _response_in(e["response"]))
                    if cached is not None:
                        flight.response = cached
                        return cached
            response = await call_next(request)
            flight.response = response
            if _complete_success(response):
                await self._save(key, {"response": _response_out(response)})
            return response
        except Exception as exc:
            if flight.response is None:
                flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.ended.set()

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
            await flight.ended.wait()
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
        try:
            if not refresh:
                entry = await self._load(key)
                if entry is not None:
                    replay = self._decode(entry, lambda e: [_event_in(x) for x in e["events"]])
                    if replay and replay[-1].type == "done":
                        flight.events = replay
                        for event in replay:
                            yield event
                        return
            recorded = _Recording()
            async with aclosing(call_next(request)) as events:
                async for event in events:
                    recorded.add(event)
                    if event.type == "done":
                        flight.recording = recorded
                        # Stored before ``done`` is handed over: a caller that stops reading
                        # at ``done`` still leaves a complete stream in the cache.
                        if _complete_success(event.response):
                            await self._save_events(key, recorded)
                    yield event
        except Exception as exc:
            if flight.recording is None and flight.events is None:
                flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.ended.set()

    def _decode(self, entry: dict[str, Any], decode: Callable[[dict[str, Any]], _T]) -> _T | None:
        try:
            return decode(entry)
        except (KeyError, TypeError, ValueError) as exc:
            self._degraded("a cache entry is unreadable; treating it as a miss", exc)
            return None

    async def _load(self, key: str) -> dict[str, Any] | None:
        writer = self._writer
        raw = writer.pending.get(key) if writer is not None else None
        try:
            if raw is None:
                raw = await self.backend.load(key)
        except Exception as exc:
            self._degraded("the cache cannot be read; treating it as a miss", exc)
            return None
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            if not isinstance(entry, dict) or entry.get("v") != _ENTRY_VERSION:
                raise ValueError("not a polythink cache entry")
            stored_at = float(entry["at"])
        except (KeyError, TypeError, ValueError) as exc:
            self._degraded("a cache entry is unreadable; treating it as a miss", exc)
            return None
        if self.ttl is not None and self._clock() - stored_at > self.ttl:
            return None
        return entry

    async def _save(self, key: str, body: dict[str, Any]) -> None:
        body["v"] = _ENTRY_VERSION
        body["at"] = self._clock()
        try:
            value = _canonical_json(body).encode()
        except (TypeError, ValueError) as exc:
            self._degraded("a response cannot be stored in the cache", exc)
            return
        await self._write(key, value)

    async def _save_events(self, key: str, recorded: _Recording) -> None:
        try:
            value = recorded.entry(self._clock())
        except (TypeError, ValueError) as exc:
            self._degraded("a response cannot be stored in the cache", exc)
            return
        await self._write(key, value)

    async def aclose(self) -> None:
        """Commit the entries still pending (disk stores); the client calls this on close."""
        if self._writer is not None and self._writer.pending:
            await anyio.to_thread.run_sync(self._writer.flush)

    async def _write(self, key: str, value: bytes) -> None:
        if self._writer is not None:
            self._writer.put(key, value)
            return
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
