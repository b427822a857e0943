"""The budget layer: keep one source's calls within the spend budgets that apply to them.

One instance per source, between that source's retry layer and its reasoning layer (the
order is listed in :mod:`polythink.client`), so it sees every attempt the source sends and
chooses the tier before the reasoning layer resolves it. A cache hit never gets here: it
spends nothing.

Per attempt, before it is sent:

1. The budgets that apply (:class:`~polythink.budgets.Budget`: every call, this source's
   account or model, the requested tier, the call's ``tag``) are the lines to reserve in.
2. The worst case is priced (:func:`polythink.pricing.worst_case_nanos`): the prompt as the
   rate limiter estimates it (:func:`~polythink.middleware.ratelimit.estimate_prompt_tokens`)
   plus the output ceiling the call is sent with (the resolution's, which budget wires raise
   by the reasoning budget; else ``max_tokens``; else the provider's default; else the
   model's maximum output), all priced as output, reasoning included.
3. It is reserved in every line at once (all or nothing). The lines' spend read in the same
   step decides whether the tier steps down (:func:`polythink.reasoning.stepdown.step_down`;
   the tightest budget wins). A call the requested tier's worst case does not fit is
   reserved again at the stepped tier, when a budget steps; one that still does not fit
   raises :class:`~polythink.errors.BudgetExceededError` without being sent (failover then
   tries the next source). A budget with ``flex_at`` spent past it also moves the call to
   the ``flex`` service tier where the source's provider and model take it (its tier layer
   says which): the call is priced, reserved and charged at the flex price, and does not
   fall back to ``standard`` when flex has no capacity (that would cost what the budget
   could not afford): it is retried with backoff instead.

Prices are the tier's: the worst case at the service tier the call is sent at, the charge at
the tier that served it (:func:`polythink.pricing.price`).

When the attempt ends the reservation is corrected to what it cost: the provider's billed
figure when it reports one, else its usage priced from the table. A provider's error answer
and a request that never left cost nothing; a timeout or a lost connection keeps the worst
case (the provider may have run it to the end); a stream cut or closed early, or a cancelled
stream, costs its reported usage with the output counted at least as what was streamed (4
characters per token). A cancelled ``complete`` keeps the worst case. A stepped-down
response reports the caller's tier as ``requested_effort``, the cheaper one as
``applied_effort`` (and ``applied_service_tier`` ``flex`` when it moved), a
:class:`~polythink.types.StepDown` and a warning saying why.

A model the price table does not know, or a call whose output ceiling is unknown (no
``max_tokens`` and no maximum output for the model), cannot be bounded: a budget with
``unpriced="refuse"`` (the default) refuses it with ``error_type="unpriced"``; with
``"allow"`` it is sent and counted as $0, with a warning on the response.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from datetime import UTC, datetime
from typing import Any

from polythink.backends.base import BudgetBackend, Reservation, Tally
from polythink.budgets import NANO, Budget, BudgetState, CallPlan, Line, nanos
from polythink.config import Source
from polythink.errors import (
    BudgetExceededError,
    InvalidInputError,
    PolythinkError,
    ServiceTierUnsupportedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.middleware.ratelimit import estimate_prompt_tokens
from polythink.middleware.reasoning import ReasoningMiddleware
from polythink.middleware.semconv import (
    POLYTHINK_BUDGET_NAME,
    POLYTHINK_BUDGET_REMAINING,
    POLYTHINK_BUDGET_SCOPE,
    POLYTHINK_BUDGET_SPEND,
    UNIT_USD,
)
from polythink.middleware.tiers import ServiceTierMiddleware
from polythink.pricing import price_nanos, worst_case_nanos
from polythink.providers import ProviderProfile
from polythink.reasoning.resolve import payload_ceiling, responses_call
from polythink.reasoning.stepdown import Pressure, step_down
from polythink.types import (
    Effort,
    Request,
    Response,
    ServiceTier,
    StepDown,
    StreamEvent,
    Usage,
)

__all__ = [
    "MAX_SCOPE_LABELS",
    "BatchHold",
    "BudgetMeter",
    "BudgetMiddleware",
    "plain_plan",
    "step_note",
]

MAX_SCOPE_LABELS = 100
"""Scope values a budget's metrics name per process; later ones are labelled ``_other``."""
_OTHER = "_other"
_CHARS_PER_TOKEN = 4
_RULES_KEPT = 4096
"""Scope values whose budget lines a layer keeps built (tags, tiers) before starting over."""
_UNKNOWN = (
    "Redis does not answer, and this process never read what the budget spent in this "
    "window, so what the fleet spent is unknown and no share of it can be counted on "
    "(workers=N: RedisLimitStore(url, workers=N), or ?workers=N in the limits URL, lets "
    "each process spend 1/N of the budget while Redis does not answer)"
)
"""Why a process refuses a call whose budget's shared spend it cannot know."""
_NOT_SENT = frozenset(
    {"connect_timeout", "pool_timeout", "unsupported_protocol", "local_protocol_error"}
    | {"too_many_redirects"}
)
"""``error_type`` of transport failures that happen before a request leaves."""


class BudgetMeter:
    """The budget metrics of one client: spend (counter) and remaining (gauge), in US
    dollars, by budget name and scope value.

    Scope values are labelled as they come, at most :data:`MAX_SCOPE_LABELS` per budget in
    this process; later ones are ``_other``, so a tag budget over many tenants stays a small
    set of series. Both are observable instruments (:class:`_BudgetSeries`, one per meter):
    a call updates a sum and a last value here, and the meter reads them when it collects,
    instead of two or three SDK measurements a call.

    Args:
        meter_provider: where the metrics go; ``None`` uses the global provider.
    """

    def __init__(self, meter_provider: Any = None) -> None:
        from opentelemetry import metrics

        from polythink import __version__
        from polythink.middleware.telemetry import observed_on

        meter = metrics.get_meter("polythink", __version__, meter_provider=meter_provider)
        self._series = observed_on(meter, _BudgetSeries)
        self._labels: dict[str, set[str]] = {}

    def label(self, budget: str, scope: str) -> str:
        """The scope label of ``scope`` in ``budget``'s metrics (``_other`` past the bound)."""
        seen = self._labels.setdefault(budget, set())
        if scope in seen:
            return scope
        if len(seen) >= MAX_SCOPE_LABELS:
            return _OTHER
        seen.add(scope)
        return scope

    def record(self, budget: str, scope: str, charged: int | None, remaining: int | None) -> None:
        """Add ``charged`` nano-dollars to the spend and set the remaining (when known)."""
        self._series.record((budget, self.label(budget, scope)), charged, remaining)


class _BudgetSeries:
    """Spend sums and remaining amounts by (budget, scope label), in nano-dollars, for every
    client on one meter, reported in US dollars when the meter collects."""

    def __init__(self, meter: Any) -> None:
        import threading

        self._lock = threading.Lock()
        self._spent: dict[tuple[str, str], int] = {}
        self._remaining: dict[tuple[str, str], int] = {}
        meter.create_observable_counter(
            POLYTHINK_BUDGET_SPEND,
            callbacks=[self._observe_spent],
            unit=UNIT_USD,
            description="US dollars the calls in a budget's scope cost, by budget and scope.",
        )
        meter.create_observable_gauge(
            POLYTHINK_BUDGET_REMAINING,
            callbacks=[self._observe_remaining],
            unit=UNIT_USD,
            description="US dollars left of a budget in its window, by budget and scope.",
        )

    def record(self, key: tuple[str, str], charged: int | None, remaining: int | None) -> None:
        with self._lock:
            if charged is not None:
                self._spent[key] = self._spent.get(key, 0) + charged
            if remaining is not None:
                self._remaining[key] = max(0, remaining)

    def _observe_spent(self, options: Any) -> list[Any]:
        return self._observations(self._spent)

    def _observe_remaining(self, options: Any) -> list[Any]:
        return self._observations(self._remaining)

    def _observations(self, values: dict[tuple[str, str], int]) -> list[Any]:
        from opentelemetry.metrics import Observation

        with self._lock:
            return [
                Observation(
                    amount / NANO,
                    {POLYTHINK_BUDGET_NAME: budget, POLYTHINK_BUDGET_SCOPE: scope},
                )
                for (budget, scope), amount in values.items()
            ]


class _Rule:
    """One budget that applies to a call, under one scope value."""

    __slots__ = ("budget", "line", "scope")

    def __init__(self, budget: Budget, scope: str) -> None:
        self.budget = budget
        self.scope = scope
        self.line: Line = budget.line(scope)


class _Ticket:
    """One admitted attempt: what is sent, what was reserved where, and why."""

    __slots__ = (
        "cost",
        "note",
        "prompt",
        "request",
        "requested",
        "reservation",
        "rules",
        "settled",
        "step",
    )

    def __init__(
        self,
        request: Request,
        requested: Effort | None,
        rules: list[_Rule],
        prompt: int,
    ) -> None:
        self.request = request
        self.requested = requested
        self.rules = rules
        self.prompt = prompt
        self.reservation: Reservation | None = None
        self.cost = 0
        self.step: StepDown | None = None
        self.note: str | None = None
        self.settled = False


@dataclasses.dataclass(slots=True)
class BatchHold:
    """What a batch reserved in one set of budget lines (the requests that share them):
    the lines, the budgets' names and scope values (for the metrics), the backend's
    reservation and the nano-dollars reserved. JSON-ready through :meth:`to_json`, so a
    batch job saved in one process settles its results in another."""

    lines: list[Line]
    names: list[tuple[str, str]]
    reservation: Reservation
    reserved: int

    def to_json(self) -> dict[str, Any]:
        """The hold as plain JSON values."""
        return {
            "lines": [list(line) for line in self.lines],
            "names": [list(name) for name in self.names],
            "reservation": [
                self.reservation.taken,
                [list(tally) for tally in self.reservation.tallies],
                self.reservation.shared,
            ],
            "reserved": self.reserved,
        }

    @classmethod
    def from_json(cls, data: Any) -> BatchHold:
        """Read back :meth:`to_json`'s shape.

        Raises:
            ValueError: for anything else.
        """
        try:
            taken, tallies, shared = data["reservation"]
            return cls(
                [Line(str(k), int(limit), str(per)) for k, limit, per in data["lines"]],
                [(str(name), str(scope)) for name, scope in data["names"]],
                Reservation(bool(taken), [Tally(*tally) for tally in tallies], bool(shared)),
                int(data["reserved"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"a saved batch's budget hold is malformed: {exc!r}") from None


class BudgetMiddleware:
    """Reserve, step down and correct one source's calls against its spend budgets.

    Args:
        budgets: the client's budgets (those that can never apply to this source are
            dropped here).
        source, index, profile: the source, its position in the client, its provider.
        reasoning: the same source's reasoning layer (its capability, learned tiers and
            memoised resolutions).
        backend: where spend is counted (:class:`~polythink.backends.base.BudgetBackend`).
        account: the source's account id (:func:`polythink.budgets.account_id`).
        meter: the client's budget metrics, or ``None``.
        tiers: the same source's service-tier layer (the tiers its provider and model take,
            and their resolutions), or ``None``: calls are priced at the standard tier and
            never moved to flex.
    """

    def __init__(
        self,
        budgets: Sequence[Budget],
        source: Source,
        index: int,
        profile: ProviderProfile,
        reasoning: ReasoningMiddleware,
        backend: BudgetBackend,
        *,
        account: str,
        meter: BudgetMeter | None = None,
        tiers: ServiceTierMiddleware | None = None,
    ) -> None:
        self.source = source
        self.tiers = tiers
        self.index = index
        self.profile = profile
        self.reasoning = reasoning
        self.backend = backend
        self.meter = meter
        self._static: list[_Rule] = []
        self._dynamic: list[Budget] = []
        self._made: dict[tuple[str, str], _Rule] = {}
        for budget in budgets:
            scope, match = budget.scope, budget.match
            if scope == "all":
                self._static.append(_Rule(budget, "all"))
            elif scope == "account" and match in ("*", source.provider):
                self._static.append(_Rule(budget, account))
            elif scope == "model" and match in ("*", source.model):
                self._static.append(_Rule(budget, source.model))
            elif scope in ("tier", "tag"):
                self._dynamic.append(budget)

    @property
    def applies(self) -> bool:
        """Whether any budget can apply to this source's calls."""
        return bool(self._static or self._dynamic)

    def _rules(self, request: Request) -> list[_Rule]:
        if not self._dynamic:
            return self._static
        rules = list(self._static)
        tier = request.reasoning_effort or self.source.effort
        asked = tier.value if tier is not None else None
        for budget in self._dynamic:
            value = asked if budget.scope == "tier" else request.tag
            if value is not None and budget.match in ("*", value):
                rules.append(self._rule(budget, value))
        return rules

    def _rule(self, budget: Budget, value: str) -> _Rule:
        key = (budget.label, value)
        made = self._made.get(key)
        if made is None:
            if len(self._made) >= _RULES_KEPT:
                self._made.clear()
            made = self._made[key] = _Rule(budget, value)
        return made

    def batch_worst(self, request: Request) -> int | None:
        """The most ``request`` can cost as a batch request, at batch prices, in
        nano-dollars (the prompt estimated and the output ceiling as for a call); ``None``
        when it has no price here."""
        requested = request.reasoning_effort or self.source.effort
        return self._worst(request, requested, estimate_prompt_tokens(request), batch=True)

    async def hold_batch(
        self, items: Sequence[tuple[Request, int | None]]
    ) -> list[BatchHold | None]:
        """Reserve a batch's worst case: each request's (``items``: the request and its
        :meth:`batch_worst`), summed per set of budget lines that apply, all or nothing.

        Returns:
            for each item, the hold it is counted in (``None``: no budget applies to it).

        Raises:
            BudgetExceededError: a budget cannot afford its part of the batch (nothing is
                reserved), or cannot price a request (``error_type`` ``"unpriced"``, under
                ``unpriced="refuse"``).
        """
        groups: dict[tuple[str, ...], tuple[list[_Rule], int]] = {}
        keys: list[tuple[str, ...] | None] = []
        for request, worst in items:
            rules = self._rules(request)
            if not rules:
                keys.append(None)
                continue
            if worst is None:
                refusing = [r for r in rules if r.budget.unpriced == "refuse"]
                if refusing:
                    raise self._batch_exceeded(refusing[0], None, "unpriced")
                worst = 0
            key = tuple(rule.line.key for rule in rules)
            held = groups.get(key)
            groups[key] = (rules, (held[1] if held is not None else 0) + worst)
            keys.append(key)
        holds: dict[tuple[str, ...], BatchHold] = {}
        for key, (rules, cost) in groups.items():
            lines = [rule.line for rule in rules]
            reservation = await self.backend.reserve(lines, cost)
            if not reservation.taken:
                for hold in holds.values():
                    await self.backend.settle(hold.lines, hold.reservation, -hold.reserved)
                short = [
                    rule
                    for rule, tally in zip(rules, reservation.tallies, strict=True)
                    if not tally.known or tally.spent + cost > _limit(rule.line, tally)
                ] or rules
                raise self._batch_exceeded(short[0], cost, "budget_exceeded", reservation)
            names = [(rule.budget.label, rule.scope) for rule in rules]
            holds[key] = BatchHold(lines, names, reservation, cost)
        return [holds[key] if key is not None else None for key in keys]

    async def release_batch(self, hold: BatchHold, worst: int, charge: int) -> None:
        """Correct what ``hold`` reserved for one request from its worst case to its
        ``charge`` (nano-dollars), and count the charge in the budget metrics."""
        delta = charge - worst
        if delta:
            await self.backend.settle(hold.lines, hold.reservation, delta)
        if self.meter is not None:
            for label, scope in hold.names:
                self.meter.record(label, scope, charge, None)

    def _batch_exceeded(
        self, rule: _Rule, cost: int | None, kind: str, reservation: Reservation | None = None
    ) -> BudgetExceededError:
        budget, source = rule.budget, self.source
        tally = reservation.tallies[0] if reservation is not None else None
        spent = tally.spent / NANO if tally is not None else 0.0
        limit = (_limit(rule.line, tally) if tally is not None else rule.line.limit) / NANO
        why = (
            f"cannot price a request of it (the price table has no batch price for "
            f"{self.profile.id} model {source.model!r}, or the call gives no max_tokens)"
            if cost is None
            else f"has ${max(0.0, limit - spent):.6f} left, less than the batch's worst case "
            f"at batch prices, ${cost / NANO:.6f}"
        )
        return BudgetExceededError(
            f"{self.profile.id} source {self.index} ({source.model}): budget "
            f"{budget.label!r} ({budget.per}) {why}; the batch was not submitted",
            budget=budget.label,
            scope=rule.scope,
            window=budget.per,
            limit=limit,
            spent=spent,
            needed=None if cost is None else cost / NANO,
            resets_at=float(tally.end) if tally is not None else 0.0,
            provider=self.profile.id,
            source_index=self.index,
            error_type="unpriced" if cost is None else kind,
        )

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Admit the call within its budgets, send it, correct to what it cost.

        Raises:
            BudgetExceededError: a budget cannot afford the call (not sent).
            PolythinkError: whatever the inner layers raise.
        """
        rules = self._rules(request)
        if not rules:
            return await call_next(request)
        ticket = await self._admit(request, rules)
        try:
            response = await call_next(ticket.request)
        except PolythinkError as exc:
            await self._settle(ticket, self._charge_error(ticket, exc))
            if isinstance(exc, StreamInterruptedError):
                exc.partial = self._stamped(exc.partial, ticket)
            raise
        except BaseException:
            # Cancelled while the provider may still answer and bill: keep the worst case.
            await self._settle(ticket, ticket.cost)
            raise
        await self._settle(ticket, self._charge(ticket, response))
        return self._stamped(response, ticket)

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Admit the call within its budgets, pass its events through, correct when it ends.

        Raises:
            BudgetExceededError: a budget cannot afford the call (not sent).
            PolythinkError: whatever the inner layers raise.
        """
        rules = self._rules(request)
        if not rules:
            return call_next(request)
        return self._stream(request, rules, call_next)

    async def _stream(
        self, request: Request, rules: list[_Rule], call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        ticket = await self._admit(request, rules)
        usage: Usage | None = None
        chars = 0
        try:
            async with aclosing(call_next(ticket.request)) as events:
                async for event in events:
                    kind = event.type
                    if kind == "done" and event.response is not None:
                        await self._settle(ticket, self._charge(ticket, event.response))
                        event = StreamEvent("done", response=self._stamped(event.response, ticket))
                    elif kind == "usage":
                        usage = event.usage
                    elif event.text:
                        chars += len(event.text)
                    elif event.tool_call is not None:
                        chars += len(event.tool_call.name) + len(event.tool_call.arguments)
                    yield event
        except PolythinkError as exc:
            await self._settle(ticket, self._charge_error(ticket, exc))
            if isinstance(exc, StreamInterruptedError):
                exc.partial = self._stamped(exc.partial, ticket)
            raise
        finally:
            # Closed early or cancelled: what was streamed is what the provider made.
            await self._settle(ticket, self._estimate(ticket, usage, chars))

    async def _admit(self, request: Request, rules: list[_Rule]) -> _Ticket:
        requested = request.reasoning_effort
        if requested is None:
            requested = self.source.effort
        ticket = _Ticket(request, requested, rules, estimate_prompt_tokens(request))
        cost = self._worst(request, requested, ticket.prompt)
        if cost is None:
            return await self._unpriced(ticket)
        lines = [rule.line for rule in rules]
        reservation = await self.backend.reserve(lines, cost)
        step = self._decide(request, requested, rules, reservation.tallies)
        sent = request if step is None else self._stepped(request, step)
        if not reservation.taken:
            cheaper = None
            if step is not None:
                stepped = step.applied if step.applied is not None else requested
                cheaper = self._worst(sent, stepped, ticket.prompt)
            if cheaper is None or cheaper >= cost:
                raise self._exceeded(ticket, reservation, cost, step)
            cost = cheaper
            reservation = await self.backend.reserve(lines, cost)
            if not reservation.taken:
                raise self._exceeded(ticket, reservation, cost, step)
        ticket.request, ticket.step = sent, step
        ticket.reservation, ticket.cost = reservation, cost
        if self.meter is not None:
            for rule, tally in zip(rules, reservation.tallies, strict=True):
                left = _limit(rule.line, tally) - tally.spent - cost
                self.meter.record(rule.budget.label, rule.scope, None, left)
        return ticket

    def _stepped(self, request: Request, step: StepDown) -> Request:
        ceiling = step.max_tokens if step.max_tokens is not None else request.max_tokens
        changes: dict[str, Any] = {"max_tokens": ceiling}
        if step.applied is not None and step.applied is not step.requested:
            changes["reasoning_effort"] = step.applied
        if step.service_tier is not None and self.tiers is not None:
            changes["service_tier"] = step.service_tier
            changes["tier_resolution"] = self.tiers.resolution(step.service_tier, fallback=False)
        return request.with_(**changes)

    def _sent_tier(self, request: Request) -> ServiceTier | None:
        """The service tier ``request`` would be sent at from this source (``None``: none)."""
        resolution = request.tier_resolution
        if resolution is not None:
            return resolution.applied
        tier = request.service_tier or self.source.tier
        if tier is None or self.tiers is None:
            return None
        try:
            return self.tiers.resolution(tier).applied
        except ServiceTierUnsupportedError:
            return None

    def _flex_ok(self, request: Request) -> bool:
        """Whether a budget may move ``request`` to flex: the source's provider and model
        take it, and the call is not sent at flex already."""
        if self.tiers is None or ServiceTier.FLEX not in self.tiers.tiers():
            return False
        return self._sent_tier(request) is not ServiceTier.FLEX

    def _ceiling(self, tier: Effort | None, max_tokens: int | None) -> tuple[int | None, bool]:
        """The output ceiling a call of ``tier`` and ``max_tokens`` is sent with, and whether
        it also holds the reasoning (``False`` where the resolution adds a budget to it)."""
        try:
            resolution = self.reasoning.resolution(tier, max_tokens)
        except ThinkingUnsupportedError:
            resolution = None
        if resolution is not None and resolution.budget_tokens is not None:
            raised = payload_ceiling(resolution.payload, self.profile)
            if raised is not None:
                return raised, False
        if max_tokens is not None:
            return max_tokens, True
        if self.profile.default_max_tokens is not None:
            return self.profile.default_max_tokens, True
        cap = self.reasoning.capability
        return (cap.max_output_tokens if cap is not None else None), True

    def _worst(
        self, request: Request, tier: Effort | None, prompt: int, *, batch: bool = False
    ) -> int | None:
        ceiling, _ = self._ceiling(tier, request.max_tokens)
        if ceiling is None:
            return None
        cache = request.prompt_cache
        from polythink.middleware.cost import price_names

        sent = self._sent_tier(request)
        source = self.source
        for name in price_names(source, source.registry_model, by_id=self.profile.price_by_id):
            found = worst_case_nanos(
                self.profile.id,
                name,
                prompt,
                ceiling,
                cache_write=cache is not None,
                cache_write_1h=cache is not None and cache.ttl == "1h",
                service_tier=sent.value if sent is not None else None,
                batch=batch,
            )
            if found is not None:
                return found
        return None

    def _decide(
        self,
        request: Request,
        requested: Effort | None,
        rules: list[_Rule],
        tallies: list[Tally],
    ) -> StepDown | None:
        pressures = [
            Pressure(
                rule.budget.label,
                tally.spent / max(1, _limit(rule.line, tally)),
                rule.budget.step_down_at,
                rule.budget.floor if isinstance(rule.budget.floor, Effort) else None,
                rule.budget.flex_at,
            )
            for rule, tally in zip(rules, tallies, strict=True)
            if rule.budget.step_down_at is not None or rule.budget.flex_at is not None
        ]
        if not pressures:
            return None
        ceiling, holds = self._ceiling(requested, request.max_tokens)
        return step_down(
            requested,
            self.reasoning.capability,
            pressures,
            policy=self.source.effort_fallback,
            max_tokens=ceiling,
            ceiling_holds_reasoning=holds,
            flex=self._flex_ok(request),
        )

    async def _unpriced(self, ticket: _Ticket) -> _Ticket:
        source = self.source
        ceiling, _ = self._ceiling(ticket.requested, ticket.request.max_tokens)
        why = (
            f"the price table has no price for {self.profile.id} model {source.model!r}"
            if ceiling is not None
            else f"model {source.model!r} has no known maximum output and the call gives no "
            "max_tokens, so its cost has no bound"
        )
        refusing = [r for r in ticket.rules if r.budget.unpriced == "refuse"]
        if refusing:
            rule = refusing[0]
            (tally,) = await self.backend.peek([rule.line])
            limit = _limit(rule.line, tally)
            raise BudgetExceededError(
                f"{self.profile.id} source {self.index} ({source.model}): budget "
                f"{rule.budget.label!r} cannot bound this call's cost: {why}; the call was not "
                "sent (pass max_tokens, use a priced model, or Budget(unpriced='allow') to "
                "let such calls through uncounted)",
                budget=rule.budget.label,
                scope=rule.scope,
                window=rule.budget.per,
                limit=limit / NANO,
                spent=tally.spent / NANO,
                needed=None,
                resets_at=float(tally.end),
                provider=self.profile.id,
                source_index=self.index,
                error_type="unpriced",
            )
        names = ", ".join(repr(r.budget.label) for r in ticket.rules)
        ticket.note = (
            f"budget: {why}; budgets {names} let the call through uncounted "
            "(Budget(unpriced='allow'))"
        )
        ticket.settled = True
        return ticket

    def _exceeded(
        self, ticket: _Ticket, reservation: Reservation, cost: int, step: StepDown | None
    ) -> BudgetExceededError:
        """The error for the tightest budget that cannot take ``cost``."""
        pairs = list(zip(ticket.rules, reservation.tallies, strict=True))
        refusing = [(rule, tally) for rule, tally in pairs if not tally.known] or [
            (rule, tally) for rule, tally in pairs if tally.spent + cost > _limit(rule.line, tally)
        ]
        rule, tally = min(refusing, key=lambda pair: _limit(pair[0].line, pair[1]) - pair[1].spent)
        budget, source = rule.budget, self.source
        limit, spent = _limit(rule.line, tally) / NANO, tally.spent / NANO
        left = max(0.0, limit - spent)
        end = datetime.fromtimestamp(tally.end, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        reset = f"; it resets at {end}"
        wait: float | None = max(0.0, tally.end - datetime.now(tz=UTC).timestamp())
        tier = ticket.requested.value if ticket.requested is not None else "unset"
        if step is not None and step.applied is not None and step.applied is not step.requested:
            tier = f"{tier} stepped down to {step.applied.value}"
        if step is not None and step.service_tier is not None:
            tier = f"{tier}, service_tier={step.service_tier.value}"
        where = f"budget {budget.label!r} (${budget.usd:g} a {budget.per}, UTC)"
        kind = "budget_exceeded"
        if not tally.known:
            # Not the window's end: the call may go as soon as Redis answers.
            kind, wait, reset = "spend_unknown", None, ""
            stands = f"{where}: {_UNKNOWN}"
        elif tally.share is None:
            stands = f"{where} has ${left:.6f} left (${spent:.6f} spent)"
        else:
            part = f"1/{tally.workers}"
            stands = (
                f"{where}: Redis does not answer, so this process keeps to its share, {part} of "
                f"what the budget had left when it last read it: ${left:.6f} of it is left (of "
                f"its {part} of the budget, ${limit:.6f}, ${spent:.6f} is counted spent: its "
                "part of the spend it read and what it spent since)"
            )
        return BudgetExceededError(
            f"{self.profile.id} source {self.index} ({source.model}): {stands}; this call may "
            f"cost up to ${cost / NANO:.6f} (about {ticket.prompt} prompt tokens and its "
            f"output ceiling, reasoning_effort={tier}){reset}; the call was not sent",
            budget=budget.label,
            scope=rule.scope,
            window=budget.per,
            limit=limit,
            spent=spent,
            needed=cost / NANO,
            resets_at=float(tally.end),
            provider=self.profile.id,
            source_index=self.index,
            error_type=kind,
            retry_after=wait,
        )

    def _price(self, usage: Usage, model: str, tier: str | None = None) -> int | None:
        from polythink.middleware.cost import price_names

        for name in price_names(self.source, model, by_id=self.profile.price_by_id):
            found = price_nanos(usage, self.profile.id, name, service_tier=tier)
            if found is not None:
                return found
        return None

    def _charge(self, ticket: _Ticket, response: Response) -> int:
        """What a finished attempt cost: the billed figure, else its usage priced at the tier
        that served it, else an estimate from what it returned."""
        if response.cost is not None:
            return nanos(response.cost.total)
        tier = response.service_tier
        if tier is None and response.applied_service_tier is not None:
            tier = response.applied_service_tier.value
        usage = response.usage
        if usage is not None and usage.input_tokens is not None and usage.output_tokens is not None:
            found = self._price(usage, response.model, tier)
            if found is not None:
                return found
        chars = len(response.text) + len(response.reasoning or "")
        chars += sum(len(c.name) + len(c.arguments) for c in response.tool_calls)
        return self._estimate(ticket, usage, chars, response.model, tier)

    def _estimate(
        self,
        ticket: _Ticket,
        usage: Usage | None,
        chars: int,
        model: str | None = None,
        tier: str | None = None,
    ) -> int:
        """What an attempt cut short cost: its reported usage, the output counted at least as
        what was streamed, the prompt as estimated when not reported; the worst case when
        even that has no price."""
        streamed = -(-chars // _CHARS_PER_TOKEN)
        reported = usage.output_tokens if usage is not None else None
        estimated = Usage(
            input_tokens=(
                usage.input_tokens
                if usage is not None and usage.input_tokens is not None
                else ticket.prompt
            ),
            output_tokens=max(reported or 0, streamed),
            cache_read_tokens=usage.cache_read_tokens if usage is not None else None,
            cache_write_tokens=usage.cache_write_tokens if usage is not None else None,
        )
        if tier is None:
            sent = self._sent_tier(ticket.request)
            tier = sent.value if sent is not None else None
        found = self._price(estimated, model or self.source.model, tier)
        return ticket.cost if found is None else found

    def _charge_error(self, ticket: _Ticket, error: PolythinkError) -> int:
        if isinstance(error, StreamInterruptedError):
            return self._charge(ticket, error.partial)
        if error.status_code is not None:
            return 0  # the provider answered with an error: nothing was generated
        if isinstance(error, TransientError) and error.error_type not in _NOT_SENT:
            return ticket.cost  # a timeout or a lost connection: it may have run to the end
        return 0

    async def _settle(self, ticket: _Ticket, charge: int) -> None:
        if ticket.settled:
            return
        ticket.settled = True
        reservation = ticket.reservation
        assert reservation is not None
        lines = [rule.line for rule in ticket.rules]
        delta = charge - ticket.cost
        spent: list[int | None] | None = None
        if delta:
            spent = await self.backend.settle(lines, reservation, delta)
        if self.meter is not None:
            for i, (rule, tally) in enumerate(zip(ticket.rules, reservation.tallies, strict=True)):
                # A share's tally is in its own terms: what the backend returns is not.
                now = (
                    spent[i] if spent is not None and tally.share is None else tally.spent + charge
                )
                left = None if now is None else _limit(rule.line, tally) - now
                self.meter.record(rule.budget.label, rule.scope, charge, left)

    def _stamped(self, response: Response, ticket: _Ticket) -> Response:
        step, note = ticket.step, ticket.note
        if step is None and note is None:
            return response
        warnings = list(response.warnings)
        if note is not None:
            warnings.append(note)
        if step is None:
            return response.with_(warnings=warnings)
        warnings.append(step_note(step))
        changes: dict[str, Any] = {"step_down": step, "warnings": warnings}
        if step.applied is not step.requested:
            changes["requested_effort"] = ticket.requested
        if step.service_tier is not None:
            changes["requested_service_tier"] = ticket.request.service_tier or self.source.tier
        return dataclasses.replace(response, **changes)

    async def plan(self, request: Request) -> CallPlan:
        """What ``request`` would get from this source now (reads the budgets, reserves
        nothing)."""
        rules = self._rules(request)
        requested = request.reasoning_effort or self.source.effort
        prompt = estimate_prompt_tokens(request)
        lines = [rule.line for rule in rules]
        tallies = await self.backend.peek(lines) if lines else []
        step = self._decide(request, requested, rules, tallies)
        sent = request if step is None else self._stepped(request, step)
        cost = self._worst(sent, sent.reasoning_effort or self.source.effort, prompt)
        states = tuple(
            BudgetState(
                rule.budget.label,
                rule.scope,
                rule.budget.per,
                (_limit(rule.line, tally) if tally.known else rule.line.limit) / NANO,
                tally.spent / NANO,
                float(tally.end),
                rule.budget.step_down_at,
                rule.budget.flex_at,
                tally.known,
            )
            for rule, tally in zip(rules, tallies, strict=True)
        )
        reasons: list[str] = [] if step is None else [step_note(step)]
        fits = True
        for rule, tally in zip(rules, tallies, strict=True):
            limit = _limit(rule.line, tally)
            if not tally.known:
                fits = False
                reasons.append(
                    f"budget {rule.budget.label!r}: {_UNKNOWN}: it would raise BudgetExceededError"
                )
                continue
            if tally.share is not None:
                reasons.append(
                    f"budget {rule.budget.label!r}: Redis does not answer, so this process "
                    f"keeps to its share, 1/{tally.workers} of what it had left when last "
                    f"read: ${limit / NANO:.6f}"
                )
            if cost is None:
                fits = fits and rule.budget.unpriced == "allow"
                reasons.append(f"budget {rule.budget.label!r} cannot price this call")
            elif tally.spent + cost > limit:
                fits = False
                left = max(0, limit - tally.spent) / NANO
                reasons.append(
                    f"budget {rule.budget.label!r} has ${left:.6f} left, less than this call's "
                    f"worst case of ${cost / NANO:.6f}: it would raise BudgetExceededError"
                )
        plan = plain_plan(self.reasoning, sent, self.index, requested=requested, tiers=self.tiers)
        return dataclasses.replace(
            plan,
            step_down=step,
            budgets=states,
            worst_case=None if cost is None else cost / NANO,
            fits=fits and plan.fits,
            reasons=(*reasons, *plan.reasons),
        )


def _limit(line: Line, tally: Tally) -> int:
    """What ``tally`` counts against: ``line``'s limit, or this process's share of it while
    the shared budget store does not answer (nano-dollars)."""
    return line.limit if tally.share is None else tally.share


def step_note(step: StepDown) -> str:
    """The warning a stepped-down response carries."""
    ceiling = f" with max_tokens={step.max_tokens}" if step.max_tokens is not None else ""
    did: list[str] = []
    from_: list[str] = []
    if step.applied is not None and step.applied is not step.requested:
        asked = step.requested.value if step.requested is not None else "unset"
        did.append(f"reasoning_effort={asked!r} was sent as {step.applied.value!r}{ceiling}")
    if step.step_down_at is not None:
        from_.append(f"steps down from {step.step_down_at:.0%}")
    if step.service_tier is not None:
        did.append(f"the call was moved to service_tier={step.service_tier.value!r}")
        if step.flex_at is not None:
            from_.append(f"moves calls to flex from {step.flex_at:.0%}")
    return f"budget: {step.budget!r} is {step.spent:.1%} spent ({', '.join(from_)}): " + "; ".join(
        did
    )


def plain_plan(
    reasoning: ReasoningMiddleware,
    request: Request,
    index: int,
    *,
    requested: Effort | None = None,
    tiers: ServiceTierMiddleware | None = None,
) -> CallPlan:
    """What ``request`` would get from a source without budgets: its reasoning layer's
    resolution (``requested`` defaults to the request's tier, else the source's), spelt for
    the Responses API where the call would go there (:func:`responses_call`: a model that
    takes function tools there only), and its tier layer's (``tiers``)."""
    source = reasoning.source
    effort = request.reasoning_effort or source.effort
    asked = requested if requested is not None else effort
    sent_tier: ServiceTier | None = None
    notes: tuple[str, ...] = ()
    try:
        if tiers is not None:
            prepared = tiers.prepare(request)
            if prepared.tier_resolution is not None:
                sent_tier = prepared.tier_resolution.applied
                notes = prepared.tier_resolution.warnings
        resolution = reasoning.resolution(effort, request.max_tokens)
    except (ThinkingUnsupportedError, ServiceTierUnsupportedError) as exc:
        return CallPlan(
            index,
            source.provider,
            source.model,
            asked,
            None,
            {},
            request.max_tokens,
            None,
            (),
            None,
            False,
            (exc.message,),
        )
    routed = responses_call(
        resolution,
        profile=reasoning.profile,
        capability=source.capability,
        tools=bool(request.tools),
        reasoning_mode=source.reasoning_mode,
        max_tokens=request.max_tokens,
    )
    if routed is not None and routed[0] is not None:
        resolution = routed[0]
        notes = (*notes, routed[1])
    return CallPlan(
        index,
        source.provider,
        source.model,
        asked,
        resolution.applied_effort,
        dict(resolution.payload),
        request.max_tokens,
        None,
        (),
        None,
        True,
        (*resolution.warnings, *notes),
        sent_tier,
    )
