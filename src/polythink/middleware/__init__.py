"""The onion's layers, one module each, and the protocol that composes them.

Order, outermost first (the first to see a request): telemetry, cache, failover, then per
source: rate limit, retry, reasoning, and the transport.
"""

from polythink.middleware.base import (
    Chain,
    CompleteNext,
    Handler,
    Middleware,
    Passthrough,
    StreamNext,
    compose,
)

__all__ = ["Chain", "CompleteNext", "Handler", "Middleware", "Passthrough", "StreamNext", "compose"]
