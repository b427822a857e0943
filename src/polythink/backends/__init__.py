"""Where shared state lives: limit state and cache entries, in-process, on disk or on Redis.

:mod:`polythink.backends.base` holds the protocols, :mod:`polythink.backends.local` the
in-process implementations, :mod:`polythink.backends.disk` the disk cache (diskcache, loaded
with it), :mod:`polythink.backends.stores` the choice of a cache backend for
``Client(cache=...)``, :mod:`polythink.backends.redis` (extra ``polythink[redis]``) the
ones shared by every process that names the same Redis server, and
:mod:`polythink.backends.share` what one process of such a fleet may use alone while that
server does not answer.
"""

from polythink.backends.base import CacheBackend, CacheStore, Lease, LimitBackend
from polythink.backends.local import LocalLimits, StoreCache

__all__ = ["CacheBackend", "CacheStore", "Lease", "LimitBackend", "LocalLimits", "StoreCache"]
