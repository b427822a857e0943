"""Retry: call one source again after a failure that may pass, waiting as the server asks.

Order: per source, inside rate limit and outside reasoning (DESIGN §2). Each attempt is one
upstream call. The rate limiter above admits the call once; it hands this layer a
:class:`RetryObserver` (wired per source by the client) so that every retried attempt still
counts against the source's budget: a failure about to be retried is reported at once (a
429 or "nothing left" headers pause the source, and with a shared backend every process, from
the first 429 rather than when the retries give up), and each retry takes its own place in
the budget before it is sent.

The decisions are pure functions, tested alone (a Tower-style policy):

- :func:`is_retryable`: the server's ``x-should-retry`` verdict wins; otherwise rate-limit
  (429) and transient failures (408, 409, 5xx, 529, connection errors, timeouts, an in-band
  overload) are retried and everything else is raised at once. A stream that broke after
  its first token (:class:`~polythink.errors.StreamInterruptedError`) is never retried.
- :func:`retry_delay`: the server's ``retry-after-ms`` / ``retry-after`` when positive,
  else :func:`backoff`; a server wait above the cap means "raise now" so failover can act.
- the budget: ``max_retries`` retries after the first attempt, and the source's total
  deadline (``Timeout.total``, or the call's ``timeout``) across all attempts and waits —
  a wait that would end past the deadline raises the last error instead.

Constants and formulas follow the official OpenAI and Anthropic SDKs (WIRE.md §8.3;
TELEMETRY_RETRY_LIBRARIES.md §B.1-B.4): 2 retries, 0.5 s doubling to 8 s, jitter scaling
each wait into (75 %, 100 %] of its nominal value.

The first attempt runs directly, so a call that succeeds pays nothing for this layer
(tenacity's loop costs ~40 µs a call); after a retryable failure tenacity's
``AsyncRetrying`` drives the rest, with this policy as its allow-list predicate, wait and
stop, ``reraise=True`` and the injected ``sleep``. A stream is retried only until its
first output event (see :mod:`polythink.middleware._head`); after that, errors pass
through.
"""

from __future__ import annotations

import logging
import math
import random as _random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from polythink.config import Source
from polythink.errors import (
    InvalidInputError,
    PolythinkError,
    RateLimitedError,
    StreamInterruptedError,
    TransientError,
)
from polythink.middleware._head import read_head
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.middleware.semconv import (
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    HTTP_REQUEST_RESEND_COUNT,
    POLYTHINK_ATTEMPT,
    POLYTHINK_ATTEMPT_SPAN,
    POLYTHINK_SOURCE_INDEX,
)
from polythink.middleware.telemetry import child_span, end_child, provider_name, record_attempt
from polythink.types import Request, Response, StreamEvent

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "INITIAL_DELAY",
    "MAX_DELAY",
    "MAX_RETRY_AFTER",
    "RetryMiddleware",
    "RetryObserver",
    "RetryPolicy",
    "backoff",
    "is_retryable",
    "retry_delay",
]

_log = logging.getLogger("polythink.retry")

DEFAULT_MAX_RETRIES = 2
"""Retries after the first attempt when ``Source.max_retries`` is unset (3 calls at most)."""
INITIAL_DELAY = 0.5
"""Seconds of backoff before the first retry; doubles per retry."""
MAX_DELAY = 8.0
"""Ceiling of the backoff, seconds."""
MAX_RETRY_AFTER = 60.0
"""Longest server-requested wait honoured, seconds; above it the error is raised at once."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How many times to retry and how long to wait; seconds throughout.

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        initial_delay: backoff before the first retry; doubles per retry.
        max_delay: ceiling of the backoff.
        max_retry_after: longest ``retry-after`` honoured; a longer one raises at once.

    Raises:
        ValueError: for a negative count or a non-positive delay.
    """

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay: float = INITIAL_DELAY
    max_delay: float = MAX_DELAY
    max_retry_after: float = MAX_RETRY_AFTER

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise InvalidInputError(f"max_retries must be an int >= 0; got {self.max_retries!r}")
        if self.max_retries < 0:
            raise InvalidInputError(f"max_retries must be >= 0; got {self.max_retries}")
        for name in ("initial_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise InvalidInputError(
                    f"{name} must be a positive number of seconds; got {value!r}"
                )


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` may pass if the same source is called again.

    ``should_retry`` (the server's ``x-should-retry``, or polythink's verdict for a quota
    or an unsendable request) wins; otherwise :class:`~polythink.errors.RateLimitedError`
    and :class:`~polythink.errors.TransientError` (timeouts included) are retryable.
    :class:`~polythink.errors.StreamInterruptedError` and anything that is not a
    :class:`~polythink.errors.PolythinkError` (cancellation, bugs) never are.
    """
    if not isinstance(error, PolythinkError) or isinstance(error, StreamInterruptedError):
        return False
    if error.should_retry is not None:
        return error.should_retry
    return isinstance(error, RateLimitedError | TransientError)


def backoff(
    retries_taken: int,
    jitter: float,
    *,
    initial: float = INITIAL_DELAY,
    cap: float = MAX_DELAY,
) -> float:
    """Return the backoff in seconds before retry number ``retries_taken + 1``.

    ``min(initial * 2**retries_taken, cap) * (1 - 0.25 * jitter)`` with ``jitter`` drawn
    from [0, 1): nominal 0.5 s, 1 s, 2 s, 4 s, 8 s, 8 s …, each scaled into (75 %, 100 %].
    """
    nominal = min(initial * 2.0 ** min(retries_taken, 64), cap)
    return nominal * (1.0 - 0.25 * jitter)


def retry_delay(
    error: BaseException,
    retries_taken: int,
    jitter: float,
    policy: RetryPolicy = RetryPolicy(),
) -> float | None:
    """Return seconds to wait before calling again, or ``None``: raise ``error`` now.

    ``None`` when :func:`is_retryable` says no, or when the server asked for a wait above
    ``policy.max_retry_after`` (so failover can try another source at once). The server's
    ``retry_after`` is honoured exactly: ``0`` (and a date already past, which parses as
    ``0``) means "retry now", a wait of 0 s (RFC 9110 §10.2.3: the delay after which to
    retry); without one, :func:`backoff`. ``retries_taken`` counts the retries already made
    (0 before the first). The attempt count and the deadline are the caller's to check.
    """
    if not is_retryable(error):
        return None
    wait = error.retry_after if isinstance(error, PolythinkError) else None
    if wait is not None:
        return wait if wait <= policy.max_retry_after else None
    return backoff(retries_taken, jitter, initial=policy.initial_delay, cap=policy.max_delay)


class RetryObserver(Protocol):
    """What the layer outside retry learns of the attempts it does not see itself.

    The rate-limit layer implements it
    (:class:`~polythink.middleware.ratelimit.RateLimitMiddleware`); the client passes it to
    the same source's retry layer. The attempt that ends the call is not reported here: its
    outcome reaches the outer layer as the call's result or error.
    """

    async def attempt_failed(self, error: PolythinkError) -> None:
        """An attempt failed with ``error`` and will be retried; called before the wait."""
        ...

    async def before_retry(self, request: Request, after: PolythinkError) -> None:
        """A retry of ``request`` (whose ``timeout`` is the seconds left of the call's
        deadline, ``None``: unbounded) is about to be sent after the attempt that failed
        with ``after``; wait for its place in the budget.

        Raises:
            RateLimitedError: the retry cannot be taken in time; it is not sent.
        """
        ...


class _NotResent(Exception):
    """The observer refused a retry: end the loop with its error (not a PolythinkError, so
    tenacity's predicate raises it at once)."""

    def __init__(self, error: RateLimitedError) -> None:
        super().__init__(error)
        self.error = error


class _StopAtDeadline(stop_base):
    """Stop when the coming wait would end at or past the deadline (no time to try)."""

    def __init__(self, deadline: float, clock: Callable[[], float]) -> None:
        self.deadline = deadline
        self.clock = clock

    def __call__(self, state: RetryCallState) -> bool:
        return self.clock() + state.upcoming_sleep >= self.deadline


def _retry_reason(error: BaseException) -> str | None:
    """What an attempt's span says of its failure: the error's ``error_type``."""
    return getattr(error, "error_type", None)


class RetryMiddleware:
    """Retry one source's calls under a :class:`RetryPolicy` and a total deadline.

    The first attempt goes out unchanged (the transport applies the same budget); each
    retry is sent with ``request.timeout`` set to what is left of the deadline, so the
    transport bounds it; waits and attempts never run past it. Each attempt is counted
    for telemetry (``polythink.attempts``); the error raised last carries ``attempts``
    (upstream calls made to this source).

    Args:
        source: the source (its ``max_retries`` and ``Timeout.total``).
        index: the source's position in the client (for log lines).
        policy: overrides the policy built from ``source.max_retries``.
        clock: monotonic seconds; ``sleep``: async sleep in seconds; ``random``: a float
            in [0, 1) for jitter. Injected by tests.
        observer: told of each failure about to be retried and asked before each retry is
            sent (:class:`RetryObserver`; the source's rate-limit layer). When it refuses a
            retry, its :class:`~polythink.errors.RateLimitedError` is raised, with the
            failed attempt as ``__cause__`` and ``attempts`` the calls made.
    """

    def __init__(
        self,
        source: Source,
        index: int,
        *,
        policy: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        random: Callable[[], float] = _random.random,
        observer: RetryObserver | None = None,
    ) -> None:
        if policy is None:
            retries = source.max_retries
            policy = RetryPolicy(DEFAULT_MAX_RETRIES if retries is None else retries)
        self.policy = policy
        self.source = source
        self.index = index
        self._total = source.timeouts.total
        self._clock = clock
        self._sleep = sleep
        self._random = random
        self.observer = observer
        self._retry = retry_if_exception(self._retryable)
        self._stop_attempts = stop_after_attempt(policy.max_retries + 1)

    def _retryable(self, error: BaseException) -> bool:
        return retry_delay(error, 0, 0.0, self.policy) is not None

    def _deadline(self, request: Request) -> float:
        budget = request.timeout if request.timeout is not None else self._total
        return math.inf if budget is None else self._clock() + budget

    def _attempt_request(self, request: Request, deadline: float, *, count: bool = True) -> Request:
        """The request for one upstream attempt (counted for telemetry unless ``count`` is
        false), its ``timeout`` set to what is left of the deadline."""
        if count:
            record_attempt()
        if deadline == math.inf:
            return request
        return request.with_(timeout=max(0.0, deadline - self._clock()))

    def _wait(self, state: RetryCallState) -> float:
        assert state.outcome is not None
        error = state.outcome.exception()
        assert error is not None
        delay = retry_delay(error, state.attempt_number - 1, self._random(), self.policy)
        assert delay is not None
        return delay

    async def _before_sleep(self, state: RetryCallState) -> None:
        self._log_retry(state)
        observer = self.observer
        if observer is not None:
            assert state.outcome is not None
            error = state.outcome.exception()
            assert isinstance(error, PolythinkError)
            await observer.attempt_failed(error)

    def _log_retry(self, state: RetryCallState) -> None:
        assert state.outcome is not None
        assert state.next_action is not None
        _log.info(
            "retrying source %d (%s %s) in %.3f s (retry %d of %d) after %r",
            self.index,
            self.source.provider,
            self.source.model,
            state.next_action.sleep,
            state.attempt_number,
            self.policy.max_retries,
            state.outcome.exception(),
        )

    async def _again(
        self,
        attempt: Callable[[Request], Awaitable[T]],
        request: Request,
        first: PolythinkError,
        deadline: float,
    ) -> tuple[T, int]:
        """Retry ``attempt`` after its first failure ``first``, under tenacity.

        ``first`` is replayed as tenacity's attempt 1 (no upstream call), so the wait
        before attempt 2 and every stop decision come from the same loop. Each retry is
        first cleared with the observer. Returns the result and the number of upstream
        calls made, the first included.
        """
        pending = [first]
        last = first
        calls = 1
        observer = self.observer

        async def once() -> T:
            nonlocal calls, last
            if pending:
                raise pending.pop()
            if observer is not None:
                try:
                    await observer.before_retry(
                        self._attempt_request(request, deadline, count=False), last
                    )
                except RateLimitedError as exc:
                    raise _NotResent(exc) from last
            calls += 1
            try:
                # Built after the observer's wait, which came out of the deadline.
                return await self._spanned(attempt, self._attempt_request(request, deadline), calls)
            except PolythinkError as exc:
                last = exc
                raise

        retrying = AsyncRetrying(
            sleep=self._sleep,
            stop=self._stop_attempts | _StopAtDeadline(deadline, self._clock),
            wait=self._wait,
            retry=self._retry,
            before_sleep=self._before_sleep,
            reraise=True,
        )
        try:
            result: T = await retrying(once)
        except PolythinkError as exc:
            exc.attempts = calls
            raise
        except _NotResent as refused:
            refused.error.attempts = calls
            raise refused.error from last
        return result, calls

    def _attempt_span(self, number: int) -> Any:
        """The child span of attempt ``number`` (1 for the first) on this source."""
        attributes: dict[str, Any] = {
            POLYTHINK_SOURCE_INDEX: self.index,
            GEN_AI_PROVIDER_NAME: provider_name(self.source.provider),
            GEN_AI_REQUEST_MODEL: self.source.model,
            POLYTHINK_ATTEMPT: number,
        }
        if number > 1:
            attributes[HTTP_REQUEST_RESEND_COUNT] = number - 1
        return child_span(POLYTHINK_ATTEMPT_SPAN, attributes)

    async def _spanned(
        self, attempt: Callable[[Request], Awaitable[T]], request: Request, number: int
    ) -> T:
        """Run one attempt inside its span (ended with its outcome: a stream's once its head
        has arrived, as an HTTP client span ends with the response's head)."""
        span = self._attempt_span(number)
        try:
            result = await attempt(request)
        except BaseException as exc:
            end_child(span, exc, _retry_reason(exc))
            raise
        end_child(span)
        return result

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Call the source, retrying retryable failures within the budget.

        Raises:
            PolythinkError: the last attempt's error, with ``attempts`` set.
        """
        deadline = self._deadline(request)
        record_attempt()
        try:
            # The first attempt has the whole budget, which is what the transport assumes
            # from the unchanged request.
            return await self._spanned(call_next, request, 1)
        except PolythinkError as exc:
            if not self._retryable(exc):
                exc.attempts = 1
                raise
            first = exc

        response, _ = await self._again(call_next, request, first, deadline)
        return response

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream from the source, starting again on a retryable failure before output.

        Usage reports that precede the first output event are held back, so an attempt
        that fails after them is retried without the caller seeing them twice.

        Raises:
            PolythinkError: before output, as :meth:`complete`; after it, whatever the
                stream raises (:class:`~polythink.errors.StreamInterruptedError` from a
                transport), never retried.
        """
        deadline = self._deadline(request)

        async def attempt(
            retry: Request,
        ) -> tuple[list[StreamEvent], AsyncGenerator[StreamEvent, None]]:
            return await read_head(call_next(retry))

        calls = 1
        record_attempt()
        try:
            head, rest = await self._spanned(attempt, request, 1)
        except PolythinkError as exc:
            if not self._retryable(exc):
                exc.attempts = 1
                raise
            (head, rest), calls = await self._again(attempt, request, exc, deadline)
        try:
            async with aclosing(rest):
                for event in head:
                    yield event
                async for event in rest:
                    yield event
        except PolythinkError as exc:
            if exc.attempts is None:
                exc.attempts = calls
            raise
