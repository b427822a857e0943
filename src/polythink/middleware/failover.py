"""Failover: try the client's sources in order until one answers; skip sources that keep failing.

This layer is the junction between the per-call layers above it and the per-source stacks
below it: it holds one composed handler per source, each with its own rate limit and retry.
A source's failure sends the call to the next source when another source might do better:
rate-limit or transient errors (after that source's own retries), authentication or billing
failures, a reasoning configuration the source cannot satisfy, a spend budget that cannot
afford the call there, and a model the provider does not serve
(:class:`~polythink.errors.ModelNotFoundError`: retired or unknown there, where the next
source's model may well exist). A request rejected for reasons every source would share (HTTP
400, 404, 413, 422) is raised at once.

A :class:`CircuitBreaker` per source counts consecutive failed calls (rate limit,
transient, auth, a stream cut mid-way); after ``threshold`` of them the source is skipped
for ``cooldown`` seconds, then one probe call is let through: success closes the circuit,
failure opens it for another cooldown. A skipped source counts as failed with an error of
the class of its last real failure (``error_type`` ``"circuit_open"``, ``retry_after`` the
cooldown left).

A :class:`~polythink.errors.ContextWindowExceededError` moves on only to later sources
whose model has a larger context window (``context_windows``, from the capability registry);
sources with an equal, smaller or unknown window are passed over, since they would refuse the
same prompt. When no later source has a larger window, the error is raised at once.

When every source has failed, the last source's error is raised (its class, status and
``retry_after``), with the earlier sources' errors in its ``previous`` list and, when more
than one source was tried, a message naming each source's error on one line. A successful
response reports the source that answered in ``source_index`` and, in ``warnings``, why
each earlier source was passed over. A stream fails over only before its first output
event (usage reports before it are held back); after that, the error reaches the caller.

A per-call ``timeout`` is one deadline for the whole call: each source gets what is left of
it, and no further source is tried once it is spent. Without one, each source has its own
``Timeout.total``.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from polythink.errors import (
    AuthError,
    BudgetExceededError,
    CapacityUnavailableError,
    ContentUnsupportedError,
    ContextWindowExceededError,
    InvalidInputError,
    ModelNotFoundError,
    OutputFormatUnsupportedError,
    PolythinkError,
    RateLimitedError,
    RequestTimeoutError,
    ServiceTierUnsupportedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware._head import read_head
from polythink.middleware.base import Handler
from polythink.middleware.semconv import POLYTHINK_FAILOVER_SPAN, POLYTHINK_SOURCE_INDEX
from polythink.reasoning.continuity import same_model
from polythink.types import Message, Request, Response, StreamEvent

__all__ = [
    "BREAKER_COOLDOWN",
    "BREAKER_THRESHOLD",
    "NOTE_PREFIX",
    "CircuitBreaker",
    "Failover",
    "counts_against",
    "fails_over",
    "reasoning_source",
]

BREAKER_THRESHOLD = 5
"""Consecutive failed calls that open a source's circuit."""
BREAKER_COOLDOWN = 30.0
"""Seconds an open circuit skips its source before letting one probe through."""
NOTE_PREFIX = "failover: "
"""How every warning this layer adds to a response begins: they say what happened on the way
to one answer, so a cache hit of that answer leaves them out."""


def fails_over(error: PolythinkError) -> bool:
    """Whether ``error`` from one source should send the call to the next source: a rate
    limit, a transient failure ("no capacity" at a service tier included), an auth failure, a
    request this source cannot satisfy though another may (a reasoning tier, a service tier,
    a ``response_format``, a content part, a spend budget that cannot afford the call there),
    or a model the provider does not serve (retired there)."""
    return isinstance(
        error,
        RateLimitedError
        | TransientError
        | AuthError
        | ThinkingUnsupportedError
        | OutputFormatUnsupportedError
        | BudgetExceededError
        | ModelNotFoundError
        | ContentUnsupportedError
        | ServiceTierUnsupportedError,
    )


def counts_against(error: PolythinkError) -> bool:
    """Whether ``error`` says the source itself is unhealthy (feeds its circuit breaker).

    Rate limits the provider reported, transient failures (timeouts included), auth failures
    and streams cut mid-way do. A rejected request (including a reasoning tier the model lacks)
    says nothing about the source's health, nor does a model the provider does not serve
    (:class:`~polythink.errors.ModelNotFoundError`: the provider answered at once and is up;
    a cooldown would only turn its clear 404 into ``circuit_open`` for the calls after it), nor
    a refusal by polythink's own rate limiter (a :class:`~polythink.errors.RateLimitedError`
    without a status: the call was not sent), nor "no capacity" at one service tier
    (:class:`~polythink.errors.CapacityUnavailableError`: the source's other tiers are fine).
    """
    if isinstance(error, CapacityUnavailableError):
        return False
    if isinstance(error, RateLimitedError):
        return error.status_code is not None
    return isinstance(error, TransientError | AuthError | StreamInterruptedError)


class CircuitBreaker:
    """Skip one source after ``threshold`` consecutive failed calls, for ``cooldown`` seconds.

    States: *closed* (calls pass, failures are counted), *open* (calls are skipped until the
    cooldown ends), *half-open* (after the cooldown one probe passes and the others are still
    skipped; its success closes the circuit, its failure opens it for another cooldown).
    Every :meth:`allow` that returns ``True`` must be followed by exactly one of
    :meth:`success`, :meth:`failure` or :meth:`release` (an outcome that says nothing about
    the source's health, such as a cancelled call, frees the probe slot).

    Args:
        threshold: consecutive failures that open the circuit (>= 1).
        cooldown: seconds the circuit stays open before a probe (> 0).
        clock: monotonic seconds (injected by tests).

    Raises:
        ValueError: for a threshold below 1 or a non-positive cooldown.
    """

    __slots__ = (
        "_clock",
        "_probing",
        "cooldown",
        "failures",
        "last_error",
        "opened_at",
        "threshold",
    )

    def __init__(
        self,
        threshold: int = BREAKER_THRESHOLD,
        cooldown: float = BREAKER_COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise InvalidInputError(f"threshold must be an int >= 1; got {threshold!r}")
        if isinstance(cooldown, bool) or not isinstance(cooldown, int | float) or cooldown <= 0:
            raise InvalidInputError(
                f"cooldown must be a positive number of seconds; got {cooldown!r}"
            )
        self.threshold = threshold
        self.cooldown = float(cooldown)
        self._clock = clock
        self.failures = 0
        """Consecutive failed calls so far."""
        self.opened_at: float | None = None
        """Clock time the circuit last opened; ``None`` while closed."""
        self.last_error: PolythinkError | None = None
        """The most recent failure counted."""
        self._probing = False

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half_open"`` (cooldown over or probe in flight)."""
        if self.opened_at is None:
            return "closed"
        if self._probing or self._clock() - self.opened_at >= self.cooldown:
            return "half_open"
        return "open"

    def remaining(self) -> float:
        """Seconds until the circuit lets a probe through (0 when it would now)."""
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.opened_at + self.cooldown - self._clock())

    def allow(self) -> bool:
        """Whether a call may go to the source now; claims the probe slot when half-open."""
        if self.opened_at is None:
            return True
        if self._probing or self._clock() - self.opened_at < self.cooldown:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        """Record a call the source answered: close the circuit."""
        self.failures = 0
        self.opened_at = None
        self._probing = False

    def failure(self, error: PolythinkError) -> None:
        """Record a failed call; open the circuit at the threshold or on a failed probe."""
        self.failures += 1
        self.last_error = error
        if self._probing or self.failures >= self.threshold:
            self.opened_at = self._clock()
        self._probing = False

    def release(self) -> None:
        """End a call that says nothing about the source's health (frees the probe slot)."""
        self._probing = False


class Failover:
    """Try ``sources`` (one composed handler per source) in order.

    Args:
        sources: the per-source handlers, in the client's source order.
        names: how warnings name each source (for example ``"openai gpt-5.5"``);
            defaults to ``"#N"``.
        span_attributes: the attributes of each source's failover-step span (its index,
            provider and model); each step is a child span of the traced call
            (:data:`~polythink.middleware.semconv.POLYTHINK_FAILOVER_SPAN`), with the reason
            the call moved on from it (``polythink.failover.reason``).
        threshold, cooldown: the circuit breaker of each source (see
            :class:`CircuitBreaker`).
        clock: monotonic seconds for the breakers and the per-call deadline.

    Raises:
        ValueError: for an empty source list or a bad breaker setting.
    """

    def __init__(
        self,
        sources: Sequence[Handler],
        *,
        names: Sequence[str] | None = None,
        context_windows: Sequence[int | None] | None = None,
        span_attributes: Sequence[Mapping[str, Any]] | None = None,
        threshold: int = BREAKER_THRESHOLD,
        cooldown: float = BREAKER_COOLDOWN,
        clock: Callable[[], float] = time.monotonic,
        models: Sequence[tuple[str, str]] | None = None,
    ) -> None:
        if not sources:
            raise InvalidInputError("a client needs at least one source")
        self.sources = tuple(sources)
        self.names = (
            tuple(names) if names is not None else tuple(f"#{i}" for i in range(len(sources)))
        )
        if len(self.names) != len(self.sources):
            raise InvalidInputError("names must name every source")
        self.context_windows = (
            tuple(context_windows) if context_windows is not None else (None,) * len(sources)
        )
        if len(self.context_windows) != len(self.sources):
            raise InvalidInputError("context_windows must give one entry per source")
        self.breakers = tuple(CircuitBreaker(threshold, cooldown, clock) for _ in self.sources)
        self._clock = clock
        self._spans = (
            tuple(span_attributes)
            if span_attributes is not None
            else tuple({POLYTHINK_SOURCE_INDEX: i} for i in range(len(self.sources)))
        )
        # Here, not at import: ``import polythink`` does not load OpenTelemetry.
        from polythink.middleware.telemetry import child_span, end_child

        self._child_span = child_span
        self._end_child = end_child

        self.models = tuple(models) if models is not None else None
        if self.models is not None and len(self.models) != len(self.sources):
            raise InvalidInputError("models must give (provider, model) for every source")
        self._in_order = tuple(range(len(self.sources)))

    def _order(self, request: Request) -> Sequence[int]:
        """The sources in the order this call tries them: the client's order, except that
        with reasoning affinity (``models`` given) the source that made the reasoning of
        the conversation's last assistant turn comes first while its circuit lets calls
        through (:func:`reasoning_source`)."""
        if self.models is None:
            return self._in_order
        index = reasoning_source(request.messages, self.models)
        if index is None or index == 0 or self.breakers[index].state == "open":
            return self._in_order
        return (index, *(i for i in self._in_order if i != index))

    def _passed_over(self, index: int, reason: str) -> None:
        """A failover step that sent nothing: a span at once, with its reason."""
        self._end_child(
            self._child_span(POLYTHINK_FAILOVER_SPAN, self._spans[index]), reason=reason
        )

    def _window_needed(self, index: int, error: ContextWindowExceededError) -> int | None:
        """The window a later source must exceed after ``error`` at ``index``; ``None`` when
        no later source has a larger one (or the failed window is unknown)."""
        need = error.limit if error.limit is not None else self.context_windows[index]
        if need is None:
            return None
        later = self.context_windows[index + 1 :]
        return need if any(w is not None and w > need for w in later) else None

    def _too_small(self, index: int, need: int | None) -> bool:
        window = self.context_windows[index]
        return need is not None and (window is None or window <= need)

    def _window_note(self, index: int, need: int) -> str:
        window = self.context_windows[index]
        return (
            f"failover: source {index} ({self.names[index]}) skipped, its context window "
            f"({'unknown' if window is None else window} tokens) is not larger than {need}"
        )

    def _deadline(self, request: Request) -> float:
        return math.inf if request.timeout is None else self._clock() + request.timeout

    def _for_source(
        self, request: Request, deadline: float, failures: list[PolythinkError]
    ) -> Request | None:
        """``request`` with what is left of the call's deadline; ``None`` when none is left.

        The first source tried gets the request unchanged: its whole budget is left.
        """
        if deadline == math.inf or not failures:
            return request
        left = deadline - self._clock()
        return request.with_(timeout=left) if left > 0 else None

    def _skipped(self, index: int) -> PolythinkError:
        breaker = self.breakers[index]
        last = breaker.last_error
        cls: type[PolythinkError] = TransientError
        if last is not None and not isinstance(last, StreamInterruptedError):
            cls = type(last)
        wait = breaker.remaining()
        return cls(
            f"source {index} ({self.names[index]}) skipped: circuit open for another "
            f"{wait:.1f} s after {breaker.failures} consecutive failures"
            + (f" (last: {_details(last)})" if last is not None else ""),
            provider=last.provider if last is not None else None,
            source_index=index,
            status_code=last.status_code if last is not None else None,
            error_type="circuit_open",
            retry_after=wait,
        )

    def _skip_note(self, index: int) -> str:
        breaker = self.breakers[index]
        return (
            f"{NOTE_PREFIX}source {index} ({self.names[index]}) skipped, circuit open for another "
            f"{breaker.remaining():.1f} s after {breaker.failures} consecutive failures"
        )

    def _failure_note(self, index: int, error: PolythinkError) -> str:
        return (
            f"{NOTE_PREFIX}source {index} ({self.names[index]}) failed ({_details(error)}); "
            "tried the next source"
        )

    def _exhausted(self, request: Request, failures: list[PolythinkError]) -> PolythinkError:
        """The error raised when no source answered: the last one's, earlier ones attached.

        With more than one source tried, its message names each source's error on one line.
        """
        if not failures:
            timeout = f" of {request.timeout:.1f} s" if request.timeout is not None else ""
            return RequestTimeoutError(
                f"deadline{timeout} exceeded before any source was tried", error_type="deadline"
            )
        last = failures[-1]
        last.previous = failures[:-1]
        if len(failures) > 1:
            each = "; ".join(self._one_line(e) for e in failures)
            last.message = f"all {len(failures)} sources failed: {each}"
            last.args = (last.message,)
        return last

    def _one_line(self, error: PolythinkError) -> str:
        message = " ".join(error.message.split())
        index = error.source_index
        if index is None or not 0 <= index < len(self.names):
            return f"{message} ({_details(error)})"
        who = f"source {index} ({self.names[index]})"
        message = message.removeprefix(f"{who} ")
        return f"{who}: {message} ({_details(error)})"

    def _outcome(self, index: int, error: PolythinkError) -> None:
        breaker = self.breakers[index]
        if counts_against(error):
            breaker.failure(error)
        else:
            breaker.release()

    @staticmethod
    def _noted(response: Response, notes: list[str]) -> Response:
        if not notes:
            return response
        return response.with_(warnings=[*response.warnings, *notes])

    async def complete(self, request: Request) -> Response:
        """Return the first source's answer that succeeds.

        Raises:
            PolythinkError: a non-failover error at once, or the last source's error; either
                way with the earlier sources' errors in ``previous``.
        """
        deadline = self._deadline(request)
        failures: list[PolythinkError] = []
        notes: list[str] = []
        need: int | None = None
        for index in self._order(request):
            handler = self.sources[index]
            if self._too_small(index, need):
                notes.append(self._window_note(index, need or 0))
                self._passed_over(index, "context_window")
                continue
            breaker = self.breakers[index]
            if not breaker.allow():
                notes.append(self._skip_note(index))
                failures.append(self._skipped(index))
                self._passed_over(index, "circuit_open")
                continue
            sub = self._for_source(request, deadline, failures)
            if sub is None:
                breaker.release()
                break
            step = self._child_span(POLYTHINK_FAILOVER_SPAN, self._spans[index])
            try:
                response = await handler.complete(sub)
            except PolythinkError as exc:
                self._end_child(step, exc, _reason(exc))
                self._outcome(index, exc)
                larger = None
                if isinstance(exc, ContextWindowExceededError):
                    larger = need = self._window_needed(index, exc)
                if larger is None and not fails_over(exc):
                    exc.previous = failures
                    raise
                notes.append(self._failure_note(index, exc))
                failures.append(exc)
                continue
            except BaseException as exc:
                self._end_child(step, exc)
                breaker.release()
                raise
            self._end_child(step)
            breaker.success()
            return self._noted(response, notes)
        raise self._exhausted(request, failures)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Stream from the first source that produces an output event.

        Raises:
            PolythinkError: as :meth:`complete` before the first output event; after it,
                the stream's own error (with ``previous`` set), never failed over.
        """
        deadline = self._deadline(request)
        failures: list[PolythinkError] = []
        notes: list[str] = []
        need: int | None = None
        for index in self._order(request):
            handler = self.sources[index]
            if self._too_small(index, need):
                notes.append(self._window_note(index, need or 0))
                self._passed_over(index, "context_window")
                continue
            breaker = self.breakers[index]
            if not breaker.allow():
                notes.append(self._skip_note(index))
                failures.append(self._skipped(index))
                self._passed_over(index, "circuit_open")
                continue
            sub = self._for_source(request, deadline, failures)
            if sub is None:
                breaker.release()
                break
            step = self._child_span(POLYTHINK_FAILOVER_SPAN, self._spans[index])
            try:
                head, rest = await read_head(handler.stream(sub))
            except PolythinkError as exc:
                self._end_child(step, exc, _reason(exc))
                self._outcome(index, exc)
                larger = None
                if isinstance(exc, ContextWindowExceededError):
                    larger = need = self._window_needed(index, exc)
                if larger is None and not fails_over(exc):
                    exc.previous = failures
                    raise
                notes.append(self._failure_note(index, exc))
                failures.append(exc)
                continue
            except BaseException as exc:
                self._end_child(step, exc)
                breaker.release()
                raise
            breaker.success()
            # The step took the call: its span ends with the stream, however it ends.
            failure: BaseException | None = None
            try:
                async with aclosing(rest):
                    for event in head:
                        yield self._noted_event(event, notes)
                    if notes:
                        async for event in rest:
                            yield self._noted_event(event, notes)
                    else:
                        async for event in rest:
                            yield event
            except PolythinkError as exc:
                failure = exc
                self._outcome(index, exc)
                exc.previous = failures
                raise
            except BaseException as exc:
                failure = exc
                raise
            finally:
                self._end_child(step, failure)
            return
        raise self._exhausted(request, failures)

    def _noted_event(self, event: StreamEvent, notes: list[str]) -> StreamEvent:
        if notes and event.type == "done" and event.response is not None:
            return StreamEvent("done", response=self._noted(event.response, notes))
        return event


def _reason(error: PolythinkError) -> str:
    """Why a failover step did not answer, for its span: the error's ``error_type``, else its
    class."""
    return error.error_type or type(error).__name__


def reasoning_source(messages: Sequence[Message], models: Sequence[tuple[str, str]]) -> int | None:
    """The index of the source that made the reasoning of the conversation's last assistant
    turn: its message's ``metadata.source_index``, when that source's provider and model
    (``models``, one ``(provider, model)`` per source) are the ones that answered; ``None``
    when the last assistant turn has no reasoning or no such metadata. Only the turns after
    the last assistant one are read, so the cost does not grow with the conversation."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role != "assistant":
            continue
        metadata = message.metadata
        if metadata is None or not (message.reasoning_items or message.reasoning):
            return None
        index = metadata.source_index
        if index is None or not 0 <= index < len(models):
            return None
        provider, model = models[index]
        if metadata.provider != provider or (
            metadata.model is not None and not same_model(metadata.model, model)
        ):
            return None
        return index
    return None


def _details(error: PolythinkError) -> str:
    details = [type(error).__name__]
    if error.status_code is not None:
        details.append(f"HTTP {error.status_code}")
    if error.error_type:
        details.append(error.error_type)
    return ", ".join(details)
