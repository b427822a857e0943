"""Step a reasoning tier down when a spend budget runs low: which tier, which output ceiling.

Pure: the spend comes in as fractions, the model's accepted tiers as its
:class:`~polythink.reasoning.capabilities.Capability`; nothing here reads a clock, a price or
a model name.

The rule, per budget with a ``step_down_at`` fraction ``s`` spent ``f`` of its money:

1. The tier to step from is the one the model would apply: the requested tier
   nearest-mapped onto what the model accepts (:func:`~polythink.reasoning.resolve.settle_tier`),
   ``auto`` placed at the model's default strength, and an unset tier at the model's default
   tier when the model is known to reason by default (otherwise an unset call is left alone).
2. The ladder is the model's accepted tiers cheaper than that one, dearest first, down to
   the budget's ``floor`` (default: the cheapest the model accepts, ``none`` included where
   it can switch reasoning off). ``auto`` is never a step.
3. Below ``s`` nothing changes. From ``s`` on, the rest of the budget is cut into as many
   equal parts as the ladder has steps; the call goes one step down in the first part and
   one more in each further part: ``steps = min(len(ladder), 1 + floor((f - s) / (1 - s) *
   len(ladder)))``. So with ``s = 0.8`` and high → medium → low → none: medium from 80 %,
   low from 86.7 %, none from 93.3 % (and the cheapest once the budget is spent).
4. Several budgets: the one that gives the cheapest tier decides (the first listed on a tie).
5. A budget with a ``flex_at`` fraction ``x`` as well spreads its steps over ``s`` to ``x``
   instead of ``s`` to the cap (``steps = min(len(ladder), 1 + floor((f - s) / (x - s) *
   len(ladder)))``: with 0.8, 0.9 and high → medium → low → none, medium from 80 %, low from
   83.3 %, none from 86.7 %), and from ``x`` on moves the call to the ``flex`` service tier
   where the source takes it (``flex=True``: its provider and model offer flex and the call is
   not already cheaper). A budget with ``flex_at`` alone moves to flex and leaves the
   reasoning tier as it is. Flex wins over any reasoning step in choosing which budget is
   reported; the reasoning tier is the cheapest any budget asks.

The output ceiling shrinks with the tier where the caller's ceiling also holds the reasoning
(OpenAI's ``max_completion_tokens``, Anthropic adaptive thinking, Gemini levels): by the
difference of the two tiers' reasoning allowances
(:data:`~polythink.reasoning.resolve.TIER_BUDGET_TOKENS`, ``none`` = 0), never below the
cheaper tier's allowance plus :data:`STEP_ANSWER_TOKENS` for the answer, never above the
ceiling asked. On budget wires (Anthropic manual thinking, Gemini 2.5, Qwen) the
resolution adds the tier's budget to the answer's ceiling itself, so a cheaper tier already
sends a smaller ceiling and the caller's value is left as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from polythink.errors import ThinkingUnsupportedError
from polythink.reasoning.capability import Capability
from polythink.reasoning.resolve import TIER_BUDGET_TOKENS, settle_tier
from polythink.types import EFFORT_ORDER, Effort, ServiceTier, StepDown

__all__ = [
    "STEP_ANSWER_TOKENS",
    "Pressure",
    "ladder",
    "start_tier",
    "step_down",
    "stepped_ceiling",
    "steps",
]

STEP_ANSWER_TOKENS = 1024
"""Tokens a stepped-down output ceiling keeps for the answer on top of the cheaper tier's
reasoning allowance."""


@dataclass(frozen=True, slots=True)
class Pressure:
    """How far one budget is spent, as the step-down rule reads it.

    Attributes:
        budget: the budget's name (reported in the :class:`~polythink.types.StepDown`).
        spent: the fraction of the budget spent (0.85 = 85 %; may exceed 1).
        step_down_at: the fraction from which it steps tiers down (0 to below 1); ``None``:
            it does not step reasoning tiers.
        floor: the cheapest tier it may step to (``None``: the model's cheapest).
        flex_at: the fraction from which it moves calls to flex (above ``step_down_at``);
            ``None``: it does not.
    """

    budget: str
    spent: float
    step_down_at: float | None
    floor: Effort | None = None
    flex_at: float | None = None


def _rank(tier: Effort) -> int:
    # auto sits above every strength: stepping from it goes to the strengths (or none).
    return len(EFFORT_ORDER) if tier is Effort.AUTO else EFFORT_ORDER.index(tier)


def start_tier(requested: Effort | None, cap: Capability, policy: str = "nearest") -> Effort | None:
    """Return the tier a call would reason at on ``cap``'s model, to step down from.

    The requested tier nearest-mapped under ``policy``; ``auto`` as the model's default
    strength where it has strengths; an unset tier as the model's default tier when the
    model is known to reason by default. ``None`` when there is nothing to step from: an
    unset tier on a model that does not reason by default (or whose default is unknown),
    ``none``, or a tier the model cannot satisfy (the reasoning layer reports that).
    """
    if requested is None:
        return cap.default_tier if cap.default_reasons else None
    if requested is Effort.NONE:
        return None
    try:
        settled = settle_tier(requested, cap, policy=policy)
    except ThinkingUnsupportedError:
        return None
    if settled is Effort.AUTO:
        return cap.default_tier
    return settled


def ladder(start: Effort, cap: Capability, floor: Effort | None = None) -> tuple[Effort, ...]:
    """Return the tiers ``cap`` accepts that are cheaper than ``start``, dearest first, none
    cheaper than ``floor`` (``auto`` is never a step)."""
    top = _rank(start)
    bottom = _rank(floor) if floor is not None else -1
    cheaper = [
        e for e in cap.supported_efforts if e is not Effort.AUTO and bottom <= _rank(e) < top
    ]
    return tuple(reversed(cheaper))


def steps(spent: float, step_down_at: float, count: int, until: float = 1.0) -> int:
    """Return how many of ``count`` steps a budget spent ``spent`` (fraction) takes when it
    steps down from ``step_down_at``, the last at ``until`` at the latest (the cap, or its
    ``flex_at``; see the module docstring, rules 3 and 5)."""
    if count <= 0 or spent < step_down_at:
        return 0
    part = (spent - step_down_at) / (until - step_down_at) * count
    return min(count, 1 + math.floor(part))


def _allowance(tier: Effort, cap: Capability) -> int:
    if tier is Effort.NONE:
        return 0
    if tier is Effort.AUTO:
        tier = cap.default_tier if cap.default_tier in TIER_BUDGET_TOKENS else Effort.MEDIUM
    return TIER_BUDGET_TOKENS[tier]


def stepped_ceiling(max_tokens: int, start: Effort, applied: Effort, cap: Capability) -> int:
    """Return the output ceiling for a call stepped from ``start`` to ``applied`` whose
    ceiling ``max_tokens`` holds its reasoning too (see the module docstring); at most
    ``max_tokens``."""
    cut = _allowance(start, cap) - _allowance(applied, cap)
    keep = _allowance(applied, cap) + STEP_ANSWER_TOKENS
    return min(max_tokens, max(max_tokens - cut, keep))


def step_down(
    requested: Effort | None,
    cap: Capability | None,
    pressures: Sequence[Pressure],
    *,
    policy: str = "nearest",
    max_tokens: int | None = None,
    ceiling_holds_reasoning: bool = True,
    flex: bool = False,
) -> StepDown | None:
    """Decide whether budget pressure steps a call's tier down or moves it to flex, and to
    what.

    Args:
        requested: the call's tier (its own, else its source's; ``None`` = unset).
        cap: the model's capability; ``None`` (an unregistered model) never steps: its
            accepted tiers are not known.
        pressures: one per budget with a ``step_down_at`` that applies to the call.
        policy: the source's ``effort_fallback`` (for nearest-mapping the requested tier).
        max_tokens: the output ceiling the call would be sent with (the caller's, else the
            provider's default, else the model's maximum output), ``None`` when none.
        ceiling_holds_reasoning: whether that ceiling also holds the reasoning tokens
            (``False`` on budget wires, where the resolution adds the reasoning budget).
        flex: whether the call may move to the ``flex`` service tier (the source's provider
            and model take it, and the call is not sent at flex already).

    Returns:
        The :class:`~polythink.types.StepDown` (its ``max_tokens`` set only when the ceiling
        shrinks, its ``service_tier`` only when the call moves to flex), or ``None`` when
        the call keeps its tiers.
    """
    if not pressures:
        return None
    start = start_tier(requested, cap, policy) if cap is not None else None
    chosen: tuple[Effort, Pressure] | None = None
    moved: Pressure | None = None
    for pressure in pressures:
        at_flex = pressure.flex_at is not None and pressure.spent >= pressure.flex_at
        if flex and at_flex and moved is None:
            moved = pressure
        if start is None or cap is None or pressure.step_down_at is None:
            continue
        tiers = ladder(start, cap, pressure.floor)
        until = pressure.flex_at if pressure.flex_at is not None else 1.0
        taken = steps(pressure.spent, pressure.step_down_at, len(tiers), until)
        if taken and (chosen is None or _rank(tiers[taken - 1]) < _rank(chosen[0])):
            chosen = (tiers[taken - 1], pressure)
    if chosen is None and moved is None:
        return None
    applied = chosen[0] if chosen is not None else start
    pressure = moved if moved is not None else chosen[1] if chosen is not None else pressures[0]
    ceiling = None
    if (
        chosen is not None
        and start is not None
        and cap is not None
        and ceiling_holds_reasoning
        and max_tokens is not None
    ):
        shrunk = stepped_ceiling(max_tokens, start, chosen[0], cap)
        ceiling = shrunk if shrunk < max_tokens else None
    return StepDown(
        requested=start,
        applied=applied,
        budget=pressure.budget,
        spent=pressure.spent,
        step_down_at=pressure.step_down_at,
        max_tokens=ceiling,
        service_tier=ServiceTier.FLEX if moved is not None else None,
        flex_at=moved.flex_at if moved is not None else None,
    )
