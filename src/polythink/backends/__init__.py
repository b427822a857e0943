"""Where shared state lives: limit state and cache entries, in-process or on Redis.

:mod:`polythink.backends.base` holds the two protocols, :mod:`polythink.backends.local` the
in-process implementations and :mod:`polythink.backends.redis` (extra ``polythink[redis]``)
the ones shared by every process that names the same Redis server.
"""

from polythink.backends.base import CacheBackend, Lease, LimitBackend
from polythink.backends.local import LocalLimits, StoreCache

__all__ = ["CacheBackend", "Lease", "LimitBackend", "LocalLimits", "StoreCache"]
