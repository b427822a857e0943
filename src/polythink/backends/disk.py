"""The disk cache: a private diskcache directory, read inline and written in batches.

:class:`DiskStore` is the store ``Client(cache=True)`` and ``Client(cache=path)`` use: a
diskcache database in a directory private to the user (:func:`default_cache_dir` by
default). :class:`DiskCache` runs a disk store behind the async
:class:`~polythink.backends.base.CacheBackend` protocol: a read (one SQLite row, WAL mode)
in the caller's task, being cheaper than a thread hand-off, and writes handed to a
:class:`BatchWriter`, which commits them from one thread, many per transaction.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import diskcache  # type: ignore[import-untyped]

from polythink.backends.base import DEFAULT_SIZE_LIMIT
from polythink.backends.local import StoreCache
from polythink.errors import InvalidInputError

__all__ = ["BatchWriter", "DiskCache", "DiskStore", "default_cache_dir"]

logger = logging.getLogger("polythink.cache")

_DB_FILES = ("cache.db", "cache.db-wal", "cache.db-shm")
_NO_VALUE_FILES = 2**62
"""diskcache ``disk_min_file_size``: keep every value inside the SQLite database, whose
files are created private, rather than as separate files created with the process umask."""


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
            raise InvalidInputError(
                f"size_limit must be a positive number of bytes; got {size_limit!r}"
            )
        if ttl is not None and (isinstance(ttl, bool) or not ttl > 0):
            raise InvalidInputError(
                f"ttl must be a positive number of seconds or None; got {ttl!r}"
            )
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
                    # No culling in every set (three more statements an entry): set() culls
                    # after its entry, the batch writer once a batch (:meth:`cull`).
                    cull_limit=0,
                )
            return self._cache

    def get(self, key: str) -> Any:
        """Return the value under ``key`` or ``None``."""
        return self._open().get(key)

    def set(self, key: str, value: bytes, expire: float | None = None) -> Any:
        """Store ``value`` under ``key``; ``expire`` in seconds (``None``: never); then
        :meth:`cull`."""
        stored = self._open().set(key, value, expire=expire)
        self.cull()
        return stored

    def delete(self, key: str) -> Any:
        """Remove ``key``."""
        return self._open().delete(key)

    def cull(self) -> int:
        """Remove the expired entries, then the least recently stored ones until the cache
        is within ``size_limit``; return how many were removed. The database does not cull
        on every write (three more SQLite statements an entry): :meth:`set` calls this, and
        the batch writer once per batch, after its commit (inside a transaction the freed
        pages still count in the volume, so it would remove every entry)."""
        return int(self._open().cull())

    def volume(self) -> int:
        """Return the estimated size of the cache on disk, in bytes."""
        return int(self._open().volume())

    def close(self) -> None:
        """Close the calling thread's database connection."""
        if self._cache is not None:
            self._cache.close()


class BatchWriter:
    """Write a disk store's entries from one thread, many entries per SQLite transaction.

    A write hands its entry to :meth:`put` and returns at once: the entry is in
    :attr:`pending`, where the same process's lookups find it, until the writer thread has
    committed it. The thread waits ``delay`` seconds after the first pending entry, commits
    everything pending in one transaction, and ends after ``linger`` idle seconds (so an
    idle client holds no thread). :meth:`flush` commits what is pending now; the client
    calls it on ``aclose``, and the thread is not a daemon, so an interpreter that exits
    also waits for it. One transaction per entry and a thread hand-off per call cost
    +450 to +870 us a call (``polythink bench``, 2026-11-30). The default ``delay`` of 50 ms
    (against 5 ms before) cost about 150 us less CPU a call one call at a time, in the
    writer and in the event loop's thread alike (measured 2026-12-02 in-process against the
    simulator, 2,000 calls: fewer wake-ups and commits, less contention for the GIL); other
    processes see an entry up to that much later, this one at once.
    """

    def __init__(
        self,
        store: DiskStore | diskcache.Cache,
        ttl: float | None,
        on_error: Callable[[str, BaseException], None],
        *,
        delay: float = 0.05,
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
        self._committing = threading.Lock()
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
        are dropped, as a failed write is with any store. One commit at a time: a flush
        that finds the writer thread committing waits for it, so what was pending when it
        was called is committed (and culled) when it returns."""
        with self._committing:
            self._flush()

    def _flush(self) -> None:
        with self._wake:
            batch = dict(self.pending)
        if not batch:
            return
        store = self._store
        try:
            cache = store._open() if isinstance(store, DiskStore) else store
            with cache.transact():
                for key, value in batch.items():
                    cache.set(key, value, expire=self._ttl)
        except Exception as exc:
            self._on_error("the cache cannot be written; the answer was not stored", exc)
        else:
            if isinstance(store, DiskStore):
                try:
                    store.cull()
                except Exception as exc:
                    self._on_error("the cache cannot be culled to its size limit", exc)
        with self._wake:
            for key, value in batch.items():
                if self.pending.get(key) is value:
                    del self.pending[key]


def _logged(what: str, exc: BaseException) -> None:
    logger.warning("%s (%s: %s)", what, type(exc).__name__, exc)


class DiskCache:
    """A disk store behind the async cache protocol: reads inline, writes batched.

    :meth:`load` finds an entry still waiting in the writer at once, else reads the store in
    the caller's task; :meth:`save` hands the entry to a :class:`BatchWriter` and returns;
    :meth:`flush` commits what is pending (the cache layer calls it when the client closes).

    Args:
        store: a :class:`DiskStore` or a ``diskcache.Cache``.
        ttl: seconds the entries stay fresh (``None``: no expiry), as the store's expiry.
        on_error: called with what failed and the exception when a batch cannot be
            committed (the entries are dropped); default: a warning on the
            ``polythink.cache`` logger.
    """

    def __init__(
        self,
        store: DiskStore | diskcache.Cache,
        ttl: float | None = None,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.store = store
        self.writer = BatchWriter(store, ttl, on_error or _logged)
        self._reads = StoreCache(store, inline_reads=True)

    async def load(self, key: str) -> bytes | None:
        """Return the entry under ``key``: a pending one, else the store's (``None``)."""
        raw = self.writer.pending.get(key)
        if raw is not None:
            return raw
        return await self._reads.load(key)

    async def save(self, key: str, value: bytes, ttl: float | None) -> None:
        """Hand ``value`` to the writer; it expires after the ``ttl`` this cache was built
        with (the cache layer passes the same)."""
        self.writer.put(key, value)

    async def flush(self) -> None:
        """Commit the entries still pending, in a worker thread."""
        if self.writer.pending:
            await anyio.to_thread.run_sync(self.writer.flush)
