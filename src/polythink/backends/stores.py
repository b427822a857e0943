"""Which backend holds a client's cache entries: ``Client(cache=...)`` turned into one.

:func:`cache_store` reads the option (off, the user's disk cache, a directory, a Redis URL,
or an object of the user's) and :func:`cache_backend` wraps a synchronous store in the async
:class:`~polythink.backends.base.CacheBackend` protocol the cache layer talks to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from polythink.backends.base import CacheBackend, CacheStore
from polythink.backends.local import StoreCache
from polythink.backends.share import split_workers
from polythink.errors import InvalidInputError

__all__ = ["cache_backend", "cache_store", "check_redis_url"]

_NOT_PATHS = frozenset({"", "true", "false", "yes", "no", "on", "off", "1", "0", "none"})


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
"""A URL's scheme (two characters at least: ``C:`` starts a Windows path)."""


def check_redis_url(url: str, option: str) -> None:
    """Refuse a Redis URL that redis-py would fail on later, or read otherwise than meant.

    Checks the port (a number from 1 to 65535), the database (the path of a ``redis://`` URL,
    or ``?db=`` of a ``unix://`` one: a whole number), that a ``unix://`` URL names a
    socket path, and the ``?workers=`` option (a whole number from 1 up; ``limits`` only:
    see :func:`~polythink.backends.share.split_workers`), when the client is built rather
    than at its first call.

    Raises:
        ValueError: naming ``option`` (``limits`` or ``cache``), the URL with any password
            masked, what is wrong and the accepted shape.
    """
    parts = urlsplit(url)
    problem = None
    try:
        port = parts.port
    except ValueError:
        problem = f"its port {parts.netloc.rpartition(':')[2]!r} is not a number from 1 to 65535"
    else:
        if port == 0:
            problem = "its port 0 is not a number from 1 to 65535"
    if problem is None and parts.scheme == "unix":
        db = parse_qs(parts.query).get("db", ["0"])[-1]
        if not parts.path:
            problem = "it names no socket path"
        elif not db.isdigit():
            problem = f"its database {db!r} is not a whole number"
    elif problem is None:
        db = parts.path.strip("/")
        if db and not db.isdigit():
            problem = f"its database {db!r} (the path) is not a whole number"
    if problem is None:
        try:
            _, workers = split_workers(url)
        except ValueError as exc:
            problem = str(exc)
        else:
            if workers is not None and option != "limits":
                problem = (
                    "workers= is an option of limits= (each process's share of the limits and "
                    f"budgets while Redis does not answer), not of {option}="
                )
    if problem is None:
        return
    shown = url if parts.password is None else url.replace(f":{parts.password}@", ":***@", 1)
    raise InvalidInputError(
        f"{option}={shown!r} is not a usable Redis URL: {problem}; expected "
        "redis://[user:password@]host[:port][/db] (rediss:// for TLS, or unix:///path?db=N)"
    )


def cache_store(option: Any) -> CacheStore | CacheBackend | None:
    """Turn ``Client(cache=...)`` into a store, or ``None`` for no cache.

    ``None``/``False``: off. ``True``: a :class:`DiskStore` in :func:`default_cache_dir`.
    A ``redis://``, ``rediss://`` or ``unix://`` URL: a
    :class:`~polythink.backends.redis.RedisCache` on that server (extra
    ``polythink[redis]``), shared by every process naming it. Another ``str`` or path: a
    :class:`DiskStore` there, except a ``str`` that starts with another URL scheme
    (``memcached://``, ``redis:/`` missing a slash), which is refused. Anything with
    callable ``get``, ``set`` and ``delete`` (see :class:`CacheStore`), or async ``load``
    and ``save`` (see :class:`~polythink.backends.base.CacheBackend`): used as is.

    Raises:
        ValueError: for any other value, a ``str`` with another URL scheme, a Redis URL
            that cannot work (see :func:`check_redis_url`), or a Redis URL without the
            ``redis`` package.
    """
    if option is None or option is False:
        return None
    # diskcache (and SQLite) load with the first client that caches on disk, not with
    # ``import polythink``.
    from polythink.backends.disk import DiskStore

    if option is True:
        return DiskStore()
    if isinstance(option, str) and option.startswith(_REDIS_SCHEMES):
        check_redis_url(option, "cache")
        from polythink.backends.redis import RedisCache

        return RedisCache(option)
    if isinstance(option, str) and _SCHEME.match(option):
        raise InvalidInputError(
            f"cache={option!r} is a URL, and a cache is a directory path or a Redis URL "
            "(redis://host:port/db, rediss://... or unix:///path/redis.sock); for a directory "
            "whose name has a colon, pass a pathlib.Path"
        )
    if isinstance(option, str) and option.strip().lower() in _NOT_PATHS:
        raise InvalidInputError(
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
    raise InvalidInputError(
        "cache must be None or False (off), True (the user cache directory), a directory "
        "path, a redis:// URL, or an object with get/set/delete methods such as "
        f"diskcache.Cache; got {type(option).__name__}"
    )


def cache_backend(
    store: CacheStore | CacheBackend,
    *,
    ttl: float | None = None,
    on_error: Callable[[str, BaseException], None] | None = None,
) -> CacheBackend:
    """Return ``store`` as a :class:`~polythink.backends.base.CacheBackend`.

    An object with async ``load``/``save`` is one already. A disk store (a
    :class:`~polythink.backends.disk.DiskStore` or a ``diskcache.Cache``) is run by a
    :class:`~polythink.backends.disk.DiskCache`: reads inline (cheaper than a thread),
    writes committed in batches from one thread, with expiry ``ttl``, a failed batch
    reported to ``on_error``; await its ``flush()`` before the process ends. Any other
    synchronous store is run by a :class:`~polythink.backends.local.StoreCache`, reads and
    writes in worker threads.
    """
    if all(callable(getattr(store, name, None)) for name in ("load", "save")):
        backend: CacheBackend = store  # type: ignore[assignment]
        return backend
    import diskcache  # type: ignore[import-untyped]

    from polythink.backends.disk import DiskCache, DiskStore

    if isinstance(store, DiskStore | diskcache.Cache):
        return DiskCache(store, ttl, on_error)
    return StoreCache(store)
