"""The rate-limit layer: keep one source inside its requests, tokens and concurrency budget.

One instance per source, outside that source's retry layer (DESIGN §2). A call passes three
gates on the way in, in this order:

1. a concurrency slot (``Source.max_concurrency``), held until the call ends however it ends:
   success, provider error, timeout, cancellation by the caller, or rejection by the next
   gate (case C12). A stream gives its slot back when its ``done`` event passes, or when it
   is closed early;
2. the server's pause: a 429's ``retry-after``, or a rate-limit header reporting nothing
   left (``remaining == 0``), stops every call to this source until the reported reset;
3. the requests-per-minute and tokens-per-minute buckets, decided together so a call never
   holds one bucket's tokens while it waits for the other.

Each bucket holds one minute of its limit, starts full and refills continuously, so a source
may burst up to its per-minute limit and then keeps to the limit's pace. A TPM call reserves
an estimate before it is sent (:func:`estimate_tokens`: prompt size plus the output ceiling)
and is corrected to the real ``usage`` when it ends, streams included (case C11). A call
refused by the provider, or before it was sent, gives its estimate back; one that timed out
or lost its connection keeps it (the provider may have run it). A call larger than a whole
bucket is let through when the bucket is full and leaves it in debt.

A call that waited for its slot, or in the queue for its budget, asks the cache layer to
look its entry up again before it takes the budget (:mod:`polythink.middleware._recheck`):
when another process stored the answer meanwhile, the call returns that hit, gives its slot
back and is not sent, having taken nothing from the buckets.

When a gate cannot open in time the call is not sent: :class:`~polythink.errors.RateLimitedError`
is raised at once (``retry_after`` = the wait it would have needed, ``error_type`` naming the
gate) so failover can try the next source. "In time" means within the call's deadline
(``Request.timeout``, else the source's total timeout) and within ``max_wait``. Waiting is
done in the caller's task and is cancellable; a call that waited is sent with the rest of
its deadline as its timeout.

The budget arithmetic runs on an injectable :class:`Clock`; waits of unknown length (a free
slot, a place in the queue) are bounded with anyio's own timer, in the same seconds.

The budget itself lives in a :class:`~polythink.backends.base.LimitBackend`: in this
process by default (:class:`~polythink.backends.local.LocalLimits`), or on Redis, shared by
every process naming the same server and account
(:class:`~polythink.backends.redis.RedisLimits`). This layer decides when to wait, for how
long and what to give back; the backend only keeps the counts.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, cast

import anyio
import orjson

from polythink.backends.base import Lease, LimitBackend
from polythink.backends.bucket import TokenBucket
from polythink.backends.local import Clock, LocalLimits, MonotonicClock
from polythink.config import Source
from polythink.conversion import PrefixStates, tools_memo
from polythink.errors import (
    InvalidInputError,
    PolythinkError,
    RateLimitedError,
    StreamInterruptedError,
    TransientError,
)
from polythink.middleware._recheck import Hit, look_again
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.providers import ProviderProfile
from polythink.types import Message, RateLimit, Request, Response, StreamEvent, Tool, Usage

__all__ = [
    "Clock",
    "MonotonicClock",
    "RateLimitMiddleware",
    "TokenBucket",
    "estimate_prompt_tokens",
    "estimate_tokens",
]

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 3


def _schema_chars(parameters: Any) -> int:
    """Characters of a tool's JSON Schema as compact JSON (bytes of its UTF-8: close enough
    for an estimate, and several times cheaper than ``str``, 33 against 218 us for 30 tools)."""
    try:
        return len(orjson.dumps(parameters))
    except TypeError:
        return len(str(parameters))


def _tool_chars(tools: tuple[Tool, ...]) -> int:
    return sum(len(t.name) + len(t.description) + _schema_chars(t.parameters) for t in tools)


def estimate_tokens(request: Request, default_max_tokens: int | None = None) -> int:
    """Estimate the tokens a call will count against a tokens-per-minute limit, before it is sent.

    Prompt: :func:`estimate_prompt_tokens`. Output: ``max_tokens``, else
    ``default_max_tokens`` (the ceiling the wire sends when the caller gives none), else 0.
    The estimate is replaced by the real usage when the call ends.
    """
    output = request.max_tokens if request.max_tokens is not None else default_max_tokens
    return estimate_prompt_tokens(request) + (output or 0)


def estimate_prompt_tokens(request: Request) -> int:
    """Estimate the prompt tokens of a call before it is sent.

    One token per 4 characters (rounded up) of the message text, reasoning text, tool-call
    names and arguments and tool definitions (schemas as compact JSON), plus 3 tokens of
    framing per message (the rules of thumb of OpenAI's "what are tokens" help article and
    its tiktoken cookbook, where each chat message costs 3 tokens of overhead). The
    characters of a conversation's unchanged messages are resumed from its last call
    (:class:`~polythink.conversion.PrefixStates`): the rate limiter and a budget count a call's new
    messages only, and the second of them none.
    """
    messages = request.messages
    chars = _conversation_chars(messages)
    if request.tools:
        chars += tools_memo(request.tools, "chars", _tool_chars)
    return -(-chars // _CHARS_PER_TOKEN) + _TOKENS_PER_MESSAGE * len(messages)


def _message_chars(message: Message) -> int:
    content = message.content
    chars = len(content) if content.__class__ is str else len(message.text())
    if message.reasoning:
        chars += len(message.reasoning)
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments)
    return chars


_prompt_chars: PrefixStates[list[int]] = PrefixStates()
"""Running sums of the characters of recent conversations, message by message."""


def _conversation_chars(messages: tuple[Message, ...]) -> int:
    """The characters of ``messages``, the unchanged ones resumed from a kept running sum."""
    if not messages:
        return 0
    start, kept = _prompt_chars.find(messages)
    if kept is not None and start == len(messages):
        _prompt_chars.keep(messages, kept)
        return kept[start - 1]
    sums = [] if kept is None else kept[:start]
    total = sums[-1] if sums else 0
    for message in messages[start:]:
        total += _message_chars(message)
        sums.append(total)
    _prompt_chars.keep(messages, sums)
    return total


class _Answered(Exception):
    """The cache had the answer when a call that waited for its turn looked again."""

    def __init__(self, hit: Hit) -> None:
        super().__init__("answered from the cache")
        self.hit = hit


class _Ticket:
    """One admitted call: the request to send, its token reservation, its slot, whether it
    is counted in ``in_flight``."""

    __slots__ = ("cost", "counted", "lease", "request", "settled")

    def __init__(self, request: Request, cost: int, lease: Lease | None) -> None:
        self.request = request
        self.cost = cost
        self.lease = lease
        self.counted = True
        self.settled = False


class RateLimitMiddleware:
    """Keep one source within its RPM, TPM and concurrency limits and its server's pauses.

    Args:
        source: the source (its ``rpm``, ``tpm``, ``max_concurrency`` and timeouts).
        index: the source's position in the client.
        profile: the source's provider profile (its default output ceiling feeds the TPM
            estimate).
        max_wait: the longest a call may wait here, in seconds; a longer wait raises
            :class:`~polythink.errors.RateLimitedError` at once. ``None``: up to the call's
            deadline. ``0``: never wait (the client uses it for every source but the last, so
            a busy source hands the call to the next one).
        clock: time source for the waits and the in-process budget (default
            :class:`MonotonicClock`).
        backend: where the budget lives (:class:`~polythink.backends.base.LimitBackend`);
            ``None``: in this process (:class:`~polythink.backends.local.LocalLimits`). A
            shared backend such as :class:`~polythink.backends.redis.RedisLimits` makes
            every process naming the same server and account share it.

    Raises:
        ValueError: for a negative ``max_wait``.

    Attributes ``requests`` and ``tokens`` are the in-process buckets (``None`` when that
    limit is unset), ``paused_until`` the clock time before which the server asked for no
    calls (for a shared backend: those of its in-process fallback), ``in_flight`` the number
    of this process's calls inside this layer.
    """

    def __init__(
        self,
        source: Source,
        index: int,
        profile: ProviderProfile,
        *,
        max_wait: float | None = None,
        clock: Clock | None = None,
        backend: LimitBackend | None = None,
    ) -> None:
        if max_wait is not None and not max_wait >= 0:
            raise InvalidInputError(f"max_wait must be >= 0 seconds or None; got {max_wait!r}")
        self.source = source
        self.index = index
        self.provider = profile.id
        self.max_wait = max_wait
        self.clock: Clock = clock or MonotonicClock()
        self.backend: LimitBackend = backend or LocalLimits(
            source.rpm, source.tpm, source.max_concurrency, self.clock
        )
        self.max_concurrency = source.max_concurrency
        self.in_flight = 0
        self._queue = anyio.Lock()
        self._napper: anyio.CancelScope | None = None
        self._default_output = profile.default_max_tokens
        self._total = source.timeouts.total

    @property
    def _local(self) -> LocalLimits:
        local = self.backend.local
        assert isinstance(local, LocalLimits)
        return local

    @property
    def requests(self) -> TokenBucket | None:
        """The in-process requests-per-minute bucket (``None``: no RPM limit)."""
        return self._local.requests

    @property
    def tokens(self) -> TokenBucket | None:
        """The in-process tokens-per-minute bucket (``None``: no TPM limit)."""
        return self._local.tokens

    @property
    def paused_until(self) -> float:
        """The clock time before which the server asked for no calls (in-process state)."""
        return self._local.paused_until

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Admit the call, send it, then settle its token count and release its slot.

        Raises:
            RateLimitedError: when this source cannot take the call in time (not sent).
            PolythinkError: whatever the inner layers raise.
        """
        try:
            ticket = await self._admit(request)
        except _Answered as answered:
            # The cache layer looks again for the kind of call it is in: an answer here.
            return cast(Response, answered.hit)
        try:
            response = await call_next(ticket.request)
            await self._settle(ticket, response.usage, response.rate_limit)
        except PolythinkError as exc:
            await self._failed(ticket, exc)
            raise
        finally:
            # Cancelled, or anything else: the slot goes back (a no-op once settled).
            await self._release(ticket)
        return response

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Admit the call, pass its events through, settle when ``done`` passes.

        The slot is released before ``done`` reaches the caller, or when the stream ends
        any other way (error, ``aclose()``, cancellation).

        Raises:
            RateLimitedError: when this source cannot take the call in time (not sent).
            PolythinkError: whatever the inner layers raise.
        """
        try:
            ticket = await self._admit(request)
        except _Answered as answered:
            # The cache layer looks again for the kind of call it is in: events here.
            for event in cast(list[StreamEvent], answered.hit):
                yield event
            return
        try:
            async with aclosing(call_next(ticket.request)) as events:
                async for event in events:
                    if event.type == "done" and event.response is not None:
                        await self._settle(ticket, event.response.usage, event.response.rate_limit)
                    yield event
        except PolythinkError as exc:
            await self._failed(ticket, exc)
            raise
        finally:
            await self._release(ticket)

    async def _admit(self, request: Request) -> _Ticket:
        start = self.clock.now()
        deadline = request.timeout if request.timeout is not None else self._total
        limit = deadline
        if self.max_wait is not None:
            limit = self.max_wait if limit is None else min(limit, self.max_wait)
        cost = estimate_tokens(request, self._default_output) if self.source.tpm else 0
        waited = False
        lease = None
        if self.max_concurrency:
            if not self._queue.locked():
                # A free slot and the budget in one step (one round trip to a shared backend).
                lease, wait, _ = await self.backend.admit(cost)
                if lease is not None and wait <= 0:
                    self.in_flight += 1
                    return _Ticket(request, cost, lease)
            if lease is None:
                lease, waited = await self._take_slot(limit)
        self.in_flight += 1
        ticket = _Ticket(request, cost, lease)
        try:
            waited = await self._take_budget(cost, start, limit, waited=waited) or waited
            if waited and deadline is not None:
                left = deadline - (self.clock.now() - start)
                if left <= 0:
                    raise self._rejected("deadline", None, limit)
                ticket.request = request.with_(timeout=left)
        except BaseException:
            await self._release(ticket)
            raise
        return ticket

    async def _take_slot(self, limit: float | None) -> tuple[Lease, bool]:
        lease = await self.backend.acquire(0)
        if lease is not None:
            return lease, False
        if limit is not None and limit <= 0:
            raise self._rejected("concurrency_limit", None, limit)
        lease = await self.backend.acquire(limit)
        if lease is None:
            raise self._rejected("concurrency_limit", None, limit)
        return lease, True

    async def _take_budget(
        self,
        cost: int,
        start: float,
        limit: float | None,
        what: str = "call",
        *,
        waited: bool | None = None,
    ) -> bool:
        """Take the budget of a call (or a retry), waiting in the queue for it.

        ``waited``: whether the call already waited (for its slot), ``None`` for a retry.
        A call (not a retry) that waits looks the cache up again before it takes the
        budget, and raises :class:`_Answered` when the answer is there.
        """
        look = waited is not None
        backend = self.backend
        queued = self._queue.locked()
        if not queued:
            if waited:
                await self._look_again()
            wait, reason = await backend.take(cost)
            if wait <= 0:
                return False
            now = self.clock.now()
            if limit is not None and wait > limit - (now - start):
                raise self._rejected(reason, wait, limit, what)
        elif limit is not None and limit <= 0:
            raise self._rejected("queue", None, limit, what)
        now = self.clock.now()
        deadline_at = None if limit is None else start + limit
        try:
            with anyio.fail_after(None if deadline_at is None else max(0.0, deadline_at - now)):
                await self._queue.acquire()
        except TimeoutError:
            raise self._rejected("queue", None, limit, what) from None
        try:
            while True:
                if look and (waited or queued):
                    await self._look_again()
                wait, reason = await backend.take(cost)
                if wait <= 0:
                    return True
                now = self.clock.now()
                if deadline_at is not None and now + wait > deadline_at:
                    raise self._rejected(reason, wait, limit, what)
                # A shared budget may get tokens back from another process, which cannot
                # wake this one: ask again after at most ``max_nap``.
                await self._nap(min(wait, backend.max_nap))
                waited = True
        finally:
            self._queue.release()

    @staticmethod
    async def _look_again() -> None:
        hit = await look_again()
        if hit is not None:
            raise _Answered(hit)

    async def _nap(self, seconds: float) -> None:
        with anyio.CancelScope() as scope:
            self._napper = scope
            try:
                await self.clock.sleep(seconds)
            finally:
                self._napper = None

    def _wake(self) -> None:
        # Tokens came back: the caller at the head of the queue re-checks now rather than
        # sleeping out a wait computed from the pessimistic estimates.
        if self._napper is not None:
            self._napper.cancel()

    def _unhold(self, ticket: _Ticket) -> Lease | None:
        """Stop counting ``ticket`` in flight; return its lease if it still holds one."""
        if not ticket.counted:
            return None
        ticket.counted = False
        self.in_flight -= 1
        return ticket.lease

    async def _release(self, ticket: _Ticket) -> None:
        lease = self._unhold(ticket)
        if lease is not None:
            await lease.release()

    async def _settle(
        self,
        ticket: _Ticket,
        usage: Usage | None,
        limits: RateLimit | None,
        pause: float | None = None,
    ) -> None:
        refund = 0
        if not ticket.settled:
            ticket.settled = True
            actual = usage.total_tokens if usage is not None else None
            if actual is not None:
                refund = ticket.cost - actual
        await self._apply(ticket, refund, limits, pause)

    async def _failed(self, ticket: _Ticket, error: PolythinkError) -> None:
        limits = error.rate_limit
        if isinstance(error, StreamInterruptedError):
            partial = error.partial
            if partial is not None:
                await self._settle(ticket, partial.usage, limits or partial.rate_limit)
                return
        pause = _pause_of(error)
        if _refused_here(error):
            # A retry this layer did not let through: the attempt before it, already
            # reported by the retry layer, decides whether the estimate is given back.
            cause = error.__cause__
            error = cause if isinstance(cause, PolythinkError) else error
            limits, pause = None, None
        refund = 0
        if not ticket.settled and not _may_have_run(error):
            # The provider answered with an error, or the call was refused before it was
            # sent: nothing was generated. A timeout or a dropped connection may have been
            # processed anyway, so its estimate stays counted.
            ticket.settled = True
            refund = ticket.cost
        await self._apply(ticket, refund, limits, pause)

    async def attempt_failed(self, error: PolythinkError) -> None:
        """Learn from an attempt the retry layer will make again (its
        :class:`~polythink.middleware.retry.RetryObserver`): a 429's ``retry-after`` and
        headers reporting nothing left pause the source now, for every caller (every
        process, on a shared backend), and reported counts lower the buckets. The call's
        token estimate stays reserved for the retry."""
        pause = _pause_of(error)
        if error.rate_limit is None and pause is None:
            return
        await self.backend.settle(0, error.rate_limit, pause)

    async def before_retry(self, request: Request, after: PolythinkError) -> None:
        """Take a retry's place in the budget before the retry layer sends it.

        A retry is one more request to the provider, which counts every request it
        receives, refused ones included: it takes one request from the RPM bucket and
        waits out a server pause, queued behind the calls already waiting. Its tokens are
        the call's reservation, except after an attempt that may have run (a timeout or a
        lost connection, whose estimate stays counted): then it reserves its own
        estimate. It waits at most ``request.timeout`` (what is left of the call's
        deadline) and ``max_wait`` seconds.

        Raises:
            RateLimitedError: ``error_type`` naming the gate, when the budget cannot take
                the retry in time (it is not sent; failover may try the next source).
        """
        cost = 0
        if self.source.tpm and _may_have_run(after):
            cost = estimate_tokens(request, self._default_output)
        limit = request.timeout
        if self.max_wait is not None:
            limit = self.max_wait if limit is None else min(limit, self.max_wait)
        await self._take_budget(cost, self.clock.now(), limit, what="retry")

    async def _apply(
        self, ticket: _Ticket, refund: int, limits: RateLimit | None, pause: float | None
    ) -> None:
        # The call is over: its slot goes back together with what it taught the budget.
        lease = self._unhold(ticket)
        if not self.source.tpm:
            refund = 0
        if refund == 0 and limits is None and not pause:
            if lease is not None:
                await lease.release()
            return
        await self.backend.finish(lease, refund, limits, pause)
        if refund > 0:
            self._wake()

    def _rejected(
        self, reason: str, wait: float | None, limit: float | None, what_call: str = "call"
    ) -> RateLimitedError:
        source = self.source
        if reason == "rpm_limit":
            what = f"at its limit of {source.rpm:g} requests per minute"
        elif reason == "tpm_limit":
            what = f"at its limit of {source.tpm:g} tokens per minute"
        elif reason == "concurrency_limit":
            what = f"running its maximum of {source.max_concurrency} calls"
        elif reason == "server_pause":
            what = "paused by the provider's rate limit"
        elif reason == "queue":
            what = "busy with calls queued before this one"
        else:
            what = "too busy to start this call before its deadline"
        opens = f"; it can take a call in {wait:.3g} s" if wait is not None else ""
        bound = f"{limit:g} s" if limit is not None else "no limit"
        return RateLimitedError(
            f"{self.provider} source {self.index} ({source.model}) is {what}{opens}, beyond "
            f"this call's wait limit ({bound}); the {what_call} was not sent",
            provider=self.provider,
            source_index=self.index,
            error_type=reason,
            retry_after=wait,
        )


def _pause_of(error: PolythinkError) -> float | None:
    """The pause a provider's rate-limit error asks for (its ``retry-after``), or ``None``."""
    if isinstance(error, RateLimitedError) and error.retry_after and not _refused_here(error):
        return error.retry_after
    return None


_GATES = frozenset(
    ("rpm_limit", "tpm_limit", "concurrency_limit", "server_pause", "queue", "deadline")
)
"""The ``error_type`` values of this layer's own refusals."""


def _refused_here(error: PolythinkError) -> bool:
    """Whether ``error`` is a rate-limit layer's own refusal (nothing sent: no HTTP status,
    one of its gates as ``error_type``) rather than a provider's answer."""
    return (
        isinstance(error, RateLimitedError)
        and error.status_code is None
        and error.error_type in _GATES
    )


def _may_have_run(error: PolythinkError) -> bool:
    """Whether the provider may have processed the attempt that failed with ``error``: a
    timeout or a lost connection (no HTTP status), as opposed to an error answer."""
    return isinstance(error, TransientError) and error.status_code is None
