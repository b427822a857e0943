"""The onion's layers, one module each, and the protocol that composes them.

Order, outermost first (the first to see a request): the client's own middleware,
telemetry, cache, cost, failover, then per source: rate limit, retry, spend budgets (when one
applies), reasoning, the source's own middleware, and the transport (folded in
:mod:`polythink.client`).
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
