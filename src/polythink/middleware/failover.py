"""Failover: try the client's sources in order until one answers.

This layer is the junction between the per-call layers above it and the per-source stacks
below it: it holds one composed handler per source. A source is skipped, and the next one
tried, when it fails in a way another source might not: rate-limit or transient errors
(after that source's own retries), authentication failures, and a reasoning configuration
the source cannot satisfy. A request rejected for reasons every source would share is
raised at once.

When every source has failed, the last source's error is raised (its class, status and
``retry_after``), with the earlier sources' errors in its ``previous`` list. A stream fails
over only before its first event; after that the error reaches the caller.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.base import Handler
from polythink.types import Request, Response, StreamEvent

__all__ = ["Failover", "fails_over"]


def fails_over(error: PolythinkError) -> bool:
    """Whether ``error`` from one source should send the call to the next source."""
    return isinstance(
        error, RateLimitedError | TransientError | AuthError | ThinkingUnsupportedError
    )


class Failover:
    """Try ``sources`` (one composed handler per source) in order.

    Args:
        sources: the per-source handlers, in the client's source order.
    """

    def __init__(self, sources: Sequence[Handler]) -> None:
        if not sources:
            raise ValueError("a client needs at least one source")
        self.sources = tuple(sources)

    async def complete(self, request: Request) -> Response:
        """Return the first source's answer that succeeds.

        Raises:
            PolythinkError: a non-failover error at once, or the last source's error.
        """
        failures: list[PolythinkError] = []
        for handler in self.sources:
            try:
                return await handler.complete(request)
            except PolythinkError as exc:
                if not fails_over(exc):
                    raise
                failures.append(exc)
        raise _exhausted(failures)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Stream from the first source that produces an event.

        Raises:
            PolythinkError: as :meth:`complete`; errors after the first event pass through.
        """
        failures: list[PolythinkError] = []
        for handler in self.sources:
            started = False
            try:
                async with aclosing(handler.stream(request)) as events:
                    async for event in events:
                        started = True
                        yield event
                return
            except PolythinkError as exc:
                if started or not fails_over(exc):
                    raise
                failures.append(exc)
        raise _exhausted(failures)


def _exhausted(failures: list[PolythinkError]) -> PolythinkError:
    last = failures[-1]
    last.previous = failures[:-1]
    return last
