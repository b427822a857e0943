"""Spend budgets: US dollars per UTC calendar window, for one scope of calls.

A :class:`Budget` caps what the calls in its scope may cost in each window. The windows are
calendar windows in UTC, not sliding ones: a ``"minute"`` budget starts again at every whole
minute, an ``"hour"`` one at every whole hour, a ``"day"`` one at 00:00 UTC and a
``"month"`` one at 00:00 UTC on the first of each month; what was spent in one window never
counts in the next.

The scope says which calls count, and under what: every call (``"all"``), a source's
account (provider, base URL and a SHA-256 fingerprint of the API key, as shared limits use;
each account counted apart), a model, the tier a call requested, or a tag the caller passes
with the call (a tenant or customer id). ``"*"`` gives every account, model, tier or tag a
budget of its own; a value counts only the calls that match it.

Budgets are identified by their name: every client that names the same budget shares its
spend (in this process by default; across processes with ``Client(limits="redis://…")``).
Changing ``usd`` keeps what was spent in the current window.

Pure: the window arithmetic and the values here do no I/O. Amounts are kept as whole
nano-dollars (10⁻⁹ USD) by the backends so that sums never drift; a reservation is rounded
up to the next nano-dollar, and so is a charge.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

from polythink.errors import InvalidInputError
from polythink.types import Effort, ServiceTier, StepDown

__all__ = [
    "NANO",
    "SCOPES",
    "WINDOWS",
    "Budget",
    "BudgetState",
    "CallPlan",
    "Line",
    "account_id",
    "check_tag",
    "fingerprint",
    "nanos",
    "window_bounds",
]

WINDOWS: tuple[str, ...] = ("minute", "hour", "day", "month")
"""The windows a budget may be counted over (UTC calendar windows)."""
SCOPES: tuple[str, ...] = ("all", "account", "model", "tier", "tag")
"""What a budget may count calls under."""
NANO = 1_000_000_000
"""Nano-dollars per US dollar: the unit budget amounts are kept in."""
_MAX_TAG = 128
_MAX_NAME = 100
_KEY_SAFE = ":=*.-_@+"

Unpriced = Literal["refuse", "allow"]


def nanos(usd: float) -> int:
    """Return ``usd`` in whole nano-dollars, rounded up (a charge never rounds to less)."""
    return math.ceil(round(usd * NANO, 3))


def fingerprint(api_key: str | None) -> str:
    """Return the first 16 hex digits of the SHA-256 of ``api_key`` (``"none"`` without one).

    It names an account in budget scopes and Redis keys; it cannot be turned back into the
    key.
    """
    if not api_key:
        return "none"
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


def account_id(provider: str, endpoint: str, api_key: str | None) -> str:
    """Return how an account scope names a source's account: ``provider|base URL|fingerprint``."""
    return f"{provider}|{endpoint}|{fingerprint(api_key)}"


def check_tag(tag: object) -> str | None:
    """Return a call's ``tag`` when it is valid.

    Raises:
        ValueError: for anything but ``None`` or a string of 1 to 128 printable
            characters.
    """
    if tag is None:
        return None
    if not isinstance(tag, str) or not 0 < len(tag) <= _MAX_TAG or not tag.isprintable():
        raise InvalidInputError(
            f"tag must be a string of 1 to {_MAX_TAG} printable characters (a tenant or "
            f"customer id); got {tag!r}"
        )
    return tag


def window_bounds(per: str, now: float) -> tuple[int, int]:
    """Return the UTC calendar window holding ``now`` as ``(start, end)`` Unix seconds.

    ``per`` is ``"minute"``, ``"hour"``, ``"day"`` (00:00 UTC to 00:00 UTC) or ``"month"``
    (00:00 UTC on the first to the first of the next month). Unix time has no leap seconds,
    so a minute is always 60 s and a day 86,400 s.

    Raises:
        ValueError: for another ``per``.
    """
    second = math.floor(now)
    if per == "minute":
        start = second - second % 60
        return start, start + 60
    if per == "hour":
        start = second - second % 3600
        return start, start + 3600
    if per == "day":
        start = second - second % 86400
        return start, start + 86400
    if per == "month":
        day = datetime.fromtimestamp(second, tz=UTC)
        first = datetime(day.year, day.month, 1, tzinfo=UTC)
        following = datetime(day.year + day.month // 12, day.month % 12 + 1, 1, tzinfo=UTC)
        return int(first.timestamp()), int(following.timestamp())
    raise InvalidInputError(f"a budget window is one of {', '.join(WINDOWS)}; got {per!r}")


class Line(NamedTuple):
    """One budget as a backend counts it for one call: under ``key`` (the budget's name and
    the call's scope value), at most ``limit`` nano-dollars per ``per`` window."""

    key: str
    limit: int
    per: str


@dataclass(frozen=True, slots=True)
class Budget:
    """At most ``usd`` US dollars per ``per`` window for the calls of one scope.

    Give at most one scope; none means every call. Each scope takes ``"*"`` (each value its
    own budget) or one value (only the calls that match it count):

    - ``account``: a source's account (provider, base URL, key fingerprint); a provider id
      such as ``"openai"`` limits it to that provider's accounts, each counted apart;
    - ``model``: the source's model name as configured;
    - ``tier``: the tier the call requested (its own, else its source's); unset calls do
      not match a tier budget;
    - ``tag``: the ``tag=`` a call passes (a tenant or customer id); untagged calls do not
      match. Metrics label at most 100 tags per budget per process, the rest as
      ``"_other"``.

    Before a call is sent, its worst-case cost (the prompt estimated as the rate limiter
    does, plus the output ceiling priced as output, reasoning included) is reserved in
    every budget that applies; when the call ends the reservation is corrected to what the
    call cost. A call that any of them cannot afford raises
    :class:`~polythink.errors.BudgetExceededError` before it is sent (failover then tries
    the next source). With ``step_down_at``, a budget spent past that fraction maps the
    requested tier to cheaper ones the model accepts, one more step each time spending
    crosses another equal part of the rest, down to the cheapest at the cap (for example
    with 0.8 and high → medium → low → none: medium from 80 %, low from 86.7 %, none from
    93.3 %); the tightest budget decides. With ``flex_at`` too, the reasoning steps share
    the part from ``step_down_at`` to ``flex_at`` instead (medium from 80 %, low from
    83.3 %, none from 86.7 % with 0.8 and 0.9), and from ``flex_at`` calls also move to the
    ``flex`` service tier where the source's provider and model take it (about half the
    price, a slower answer), reserved and charged at the flex price; then, when even that
    does not fit, the budget refuses.

    Args:
        usd: US dollars per window (> 0).
        per: ``"minute"``, ``"hour"``, ``"day"`` or ``"month"`` (UTC calendar windows).
        account, model, tier, tag: the scope (see above).
        step_down_at: the fraction spent (0 to 1, e.g. 0.8) from which tiers step down;
            ``None``: never, the budget only refuses.
        flex_at: the fraction spent (0 to 1, above ``step_down_at``, e.g. 0.9) from which
            calls move to the ``flex`` service tier where their model has it; ``None``:
            never.
        floor: the cheapest tier stepping down may reach (default: the model's cheapest
            accepted tier, ``none`` included where the model can switch reasoning off).
        unpriced: a call whose model the price table does not know: ``"refuse"`` (the
            default: :class:`~polythink.errors.BudgetExceededError` with ``error_type``
            ``"unpriced"``, so failover moves to a priced source) or ``"allow"`` (sent,
            counted as $0, with a warning on the response).
        name: identifies the budget: clients naming the same budget share its spend, and
            metrics and errors show it. Default: the window and the scope, such as
            ``"day"``, ``"hour:model=gpt-5.5"`` or ``"day:tag=*"``.

    Raises:
        ValueError: for a ``usd`` that is not a positive number, an unknown ``per``, more
            than one scope, an unknown tier, a ``step_down_at`` or ``flex_at`` outside
            [0, 1), a ``flex_at`` not above ``step_down_at``, an ``unpriced`` other than
            ``"refuse"``/``"allow"``, or an empty or overlong name.
    """

    usd: float
    per: str = "day"
    account: str | None = field(default=None, kw_only=True)
    model: str | None = field(default=None, kw_only=True)
    tier: Effort | str | None = field(default=None, kw_only=True)
    tag: str | None = field(default=None, kw_only=True)
    step_down_at: float | None = field(default=None, kw_only=True)
    flex_at: float | None = field(default=None, kw_only=True)
    floor: Effort | str | None = field(default=None, kw_only=True)
    unpriced: Unpriced = field(default="refuse", kw_only=True)
    name: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        usd = self.usd
        if isinstance(usd, bool) or not isinstance(usd, int | float) or not 0 < usd < math.inf:
            raise InvalidInputError(
                f"Budget usd must be a positive number of US dollars; got {usd!r}"
            )
        if usd * NANO >= 2**53:
            raise InvalidInputError(f"Budget usd must be below $9,000,000 per window; got {usd!r}")
        if self.per not in WINDOWS:
            raise InvalidInputError(
                f"Budget per must be one of {', '.join(WINDOWS)}; got {self.per!r}"
            )
        given = [s for s in SCOPES[1:] if getattr(self, s) is not None]
        if len(given) > 1:
            raise InvalidInputError(
                f"a Budget has one scope (account, model, tier or tag); got {', '.join(given)}"
                " (use one budget per scope: the tightest of those that apply decides)"
            )
        for scope in ("account", "model", "tag"):
            value = getattr(self, scope)
            if value is not None and (not isinstance(value, str) or not value):
                raise InvalidInputError(
                    f"Budget {scope} must be '*' or a non-empty string; got {value!r}"
                )
        if self.tier is not None and self.tier != "*":
            object.__setattr__(self, "tier", _tier(self.tier, "tier"))
        if self.floor is not None:
            object.__setattr__(self, "floor", _tier(self.floor, "floor"))
        start = self.step_down_at
        if start is not None and (
            isinstance(start, bool) or not isinstance(start, int | float) or not 0 <= start < 1
        ):
            raise InvalidInputError(
                "Budget step_down_at must be a fraction from 0 to below 1 (0.8 = step down "
                f"from 80 % spent) or None; got {start!r}"
            )
        flex = self.flex_at
        if flex is not None and (
            isinstance(flex, bool) or not isinstance(flex, int | float) or not 0 <= flex < 1
        ):
            raise InvalidInputError(
                "Budget flex_at must be a fraction from 0 to below 1 (0.9 = move calls to "
                f"flex from 90 % spent) or None; got {flex!r}"
            )
        if flex is not None and start is not None and flex <= start:
            raise InvalidInputError(
                f"Budget flex_at ({flex!r}) must be above step_down_at ({start!r}): reasoning "
                "tiers step down first, then calls move to flex, then the budget refuses"
            )
        if self.unpriced not in ("refuse", "allow"):
            raise InvalidInputError(
                f"Budget unpriced must be 'refuse' or 'allow'; got {self.unpriced!r}"
            )
        name = self.name
        if name is None:
            name = self.per if self.scope == "all" else f"{self.per}:{self.scope}={self.match}"
        elif not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME or not name.isprintable():
            raise InvalidInputError(
                f"Budget name must be 1 to {_MAX_NAME} printable characters; got {name!r}"
            )
        object.__setattr__(self, "name", name)

    @property
    def scope(self) -> str:
        """What the budget counts calls under: one of :data:`SCOPES`."""
        for scope in SCOPES[1:]:
            if getattr(self, scope) is not None:
                return scope
        return "all"

    @property
    def match(self) -> str:
        """The scope's value: ``"*"``, the one value it counts, or ``"all"``."""
        value = getattr(self, self.scope) if self.scope != "all" else "all"
        return str(value.value if isinstance(value, Effort) else value)

    @property
    def label(self) -> str:
        """The budget's name (never ``None`` once built)."""
        assert self.name is not None
        return self.name

    def key(self, scope_value: str) -> str:
        """The backend key of this budget for one scope value (percent-encoded, no braces)."""
        return f"{quote(self.label, safe=_KEY_SAFE)}:{quote(scope_value, safe=_KEY_SAFE)}"

    def line(self, scope_value: str) -> Line:
        """This budget as a backend counts it under ``scope_value``."""
        return Line(self.key(scope_value), nanos(self.usd), self.per)


def _tier(value: object, what: str) -> Effort:
    try:
        tier = Effort.parse(value)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidInputError(f"Budget {what}: {exc}") from None
    if tier is None:
        raise InvalidInputError(f"Budget {what} must be a tier; got {value!r}")
    return tier


@dataclass(frozen=True, slots=True)
class BudgetState:
    """Where one budget stands for one scope value in its current window.

    Attributes:
        budget: the budget's name.
        scope: the scope value it counts under (``"all"``, an account, a model, a tier, a
            tag).
        window: ``"minute"``, ``"hour"``, ``"day"`` or ``"month"``.
        limit: US dollars per window (while the shared budget store does not answer: this
            process's share of them, see :class:`~polythink.backends.base.Tally`).
        spent: US dollars counted so far in this window, calls in flight included (while
            the store does not answer: counted against that share).
        resets_at: the end of the window, in Unix seconds (UTC).
        step_down_at: the budget's ``step_down_at``.
        flex_at: the budget's ``flex_at``.
        known: ``False`` while the shared budget store does not answer and this process
            never read what the budget spent in this window: ``limit`` is then the budget's
            own, ``spent`` only what this process knows of, and a call would raise
            :class:`~polythink.errors.BudgetExceededError` (``error_type`` ``spend_unknown``).
    """

    budget: str
    scope: str
    window: str
    limit: float
    spent: float
    resets_at: float
    step_down_at: float | None = None
    flex_at: float | None = None
    known: bool = True

    @property
    def remaining(self) -> float:
        """US dollars left in this window (never below 0)."""
        return max(0.0, self.limit - self.spent)

    @property
    def fraction(self) -> float:
        """The fraction of the budget spent (may exceed 1 after a call cost more than its
        reservation). A ``limit`` of 0 (a process's share of a budget with nothing left while
        the shared store does not answer) is all spent: 1.0, or ``inf`` past it."""
        if self.limit > 0:
            return self.spent / self.limit
        return 1.0 if self.spent <= 0 else math.inf


@dataclass(frozen=True, slots=True)
class CallPlan:
    """What a call would get from one source now, and why (:meth:`polythink.Client.plan`).

    Attributes:
        source_index, provider, model: the source.
        requested: the call's tier (its own, else the source's; ``None`` = unset).
        applied: the tier that would be sent (after a budget's step-down and the model's
            nearest-mapping); ``None`` when unset or when the tier cannot be satisfied.
        payload: the request-body fragment the reasoning layer would add.
        max_tokens: the output ceiling the call would be sent with when a step-down shrinks
            it, else the caller's.
        step_down: the budget step-down, if one applies now.
        budgets: the state of every budget that applies, in the client's order.
        worst_case: the most the call could cost, in US dollars (``None``: not priced).
        fits: whether every budget can afford that now (``True`` without budgets).
        reasons: why, in words: the step-down, mapping notes, what refuses it.
        service_tier: the service tier that would be sent (after a budget's move to flex
            and the nearest-mapping onto what the provider and model take); ``None`` when
            none would.
    """

    source_index: int
    provider: str
    model: str
    requested: Effort | None
    applied: Effort | None
    payload: dict[str, Any]
    max_tokens: int | None
    step_down: StepDown | None
    budgets: tuple[BudgetState, ...]
    worst_case: float | None
    fits: bool
    reasons: tuple[str, ...]
    service_tier: ServiceTier | None = None
