"""The step-down rule (reasoning/stepdown.py): which tier a budget under pressure sends.

The ladders come from the models' accepted tiers in the shipped registry (``polythink
models``), read here through the capability, never from model names. The band edges are the
rule's arithmetic: from ``step_down_at = s`` the rest of the budget is cut into as many equal
parts as the ladder has steps.
"""

from __future__ import annotations

import pytest

from polythink import Capability, Effort, ServiceTier
from polythink.reasoning import get_capability
from polythink.reasoning.resolve import TIER_BUDGET_TOKENS
from polythink.reasoning.stepdown import (
    STEP_ANSWER_TOKENS,
    Pressure,
    ladder,
    start_tier,
    step_down,
    steps,
)

E = Effort


def _cap(model: str) -> Capability:
    cap = get_capability(model)
    assert cap is not None, model
    return cap


def _tiers(names: str) -> tuple[Effort, ...]:
    return tuple(Effort(n) for n in names.split())


def test_the_ladder_is_every_cheaper_accepted_tier_dearest_first() -> None:
    # Built from each capability's own accepted tiers: the ladder is exactly those below the
    # start tier, dearest first, auto never a step.
    for model in ("gpt-5.5", "claude-opus-4-6", "gemini-3-pro-preview", "deepseek-v4-pro"):
        cap = _cap(model)
        accepted = [e for e in cap.supported_efforts if e is not E.AUTO]
        for start in accepted:
            expected = tuple(reversed(accepted[: accepted.index(start)]))
            assert ladder(start, cap) == expected, (model, start)
    # Spelled out for three models with different lineups (polythink models):
    assert ladder(E.HIGH, _cap("gpt-5.5")) == _tiers("medium low none")
    assert ladder(E.MAX, _cap("claude-opus-4-6")) == _tiers("high medium low none")
    assert ladder(E.HIGH, _cap("gemini-3-pro-preview")) == _tiers("low")
    assert ladder(E.MAX, _cap("deepseek-v4-pro")) == _tiers("high low none")


def test_a_floor_keeps_the_ladder_above_it() -> None:
    assert ladder(E.HIGH, _cap("gpt-5.5"), floor=E.LOW) == _tiers("medium low")
    assert ladder(E.XHIGH, _cap("gpt-5.5"), floor=E.MEDIUM) == _tiers("high medium")
    # A floor between accepted tiers keeps the accepted ones above it.
    assert ladder(E.MAX, _cap("deepseek-v4-pro"), floor=E.MINIMAL) == _tiers("high low")


def test_an_on_off_model_steps_from_auto_to_none() -> None:
    on_off = Capability("switch", (E.NONE, E.AUTO), default_effort=E.AUTO)
    assert ladder(E.AUTO, on_off) == (E.NONE,)
    assert start_tier(E.AUTO, on_off) is E.AUTO
    assert start_tier(E.HIGH, on_off) is E.AUTO  # a strength maps to auto (nearest)
    step = step_down(E.HIGH, on_off, [Pressure("day", 0.9, 0.8)])
    assert step is not None
    assert (step.requested, step.applied) == (E.AUTO, E.NONE)


@pytest.mark.parametrize(
    ("spent", "taken"),
    [
        (0.0, 0),
        (0.79999, 0),
        (0.8, 1),
        (0.86666, 1),
        (0.86667, 2),  # 0.8 + 0.2 / 3
        (0.93333, 2),
        (0.93334, 3),  # 0.8 + 2 * 0.2 / 3
        (0.99999, 3),
        (1.0, 3),
        (1.7, 3),
    ],
)
def test_steps_cut_the_rest_of_the_budget_into_equal_parts(spent: float, taken: int) -> None:
    assert steps(spent, 0.8, 3) == taken


def test_step_down_order_over_gpt_5_5_from_high() -> None:
    cap = _cap("gpt-5.5")  # none low medium high xhigh
    applied = []
    for spent in (0.5, 0.8, 0.87, 0.94, 1.0):
        step = step_down(E.HIGH, cap, [Pressure("day", spent, 0.8)])
        applied.append(step.applied if step is not None else None)
    assert applied == [None, E.MEDIUM, E.LOW, E.NONE, E.NONE]


def test_step_down_order_over_a_model_without_none() -> None:
    cap = _cap("gemini-3-pro-preview")  # low high: one step, taken from s on
    assert step_down(E.HIGH, cap, [Pressure("day", 0.49, 0.5)]) is None
    for spent in (0.5, 0.75, 1.2):
        step = step_down(E.HIGH, cap, [Pressure("day", spent, 0.5)])
        assert step is not None
        assert step.applied is E.LOW
    # The cheapest tier has nowhere to go.
    assert step_down(E.LOW, cap, [Pressure("day", 0.99, 0.5)]) is None


def test_the_requested_tier_is_first_nearest_mapped() -> None:
    cap = _cap("gpt-5.1")  # none low medium high: minimal is not accepted, nearest is low
    step = step_down(E.MINIMAL, cap, [Pressure("day", 0.95, 0.5)])
    assert step is not None
    assert (step.requested, step.applied) == (E.LOW, E.NONE)
    # Under the error policy an unaccepted tier is the reasoning layer's to refuse.
    assert step_down(E.MINIMAL, cap, [Pressure("day", 0.95, 0.5)], policy="error") is None


def test_unset_steps_from_the_models_default_only_when_it_reasons_by_default() -> None:
    step = step_down(None, _cap("gpt-5.5"), [Pressure("day", 0.9, 0.5)])  # default medium
    assert step is not None
    # medium -> low -> none: two steps, 90 % is in the second part of [0.5, 1).
    assert (step.requested, step.applied) == (E.MEDIUM, E.NONE)
    assert step_down(None, _cap("gpt-5.1"), [Pressure("day", 0.9, 0.5)]) is None  # default none
    unknown = Capability("quiet", (E.LOW, E.HIGH))  # default not known
    assert step_down(None, unknown, [Pressure("day", 0.9, 0.5)]) is None


def test_none_and_unregistered_models_never_step() -> None:
    assert step_down(E.NONE, _cap("gpt-5.5"), [Pressure("day", 0.99, 0.1)]) is None
    assert step_down(E.HIGH, None, [Pressure("day", 0.99, 0.1)]) is None
    assert step_down(E.HIGH, _cap("gpt-5.5"), []) is None


def test_the_tightest_of_several_budgets_decides() -> None:
    cap = _cap("gpt-5.5")
    loose = Pressure("month", 0.85, 0.8)  # one step: medium
    tight = Pressure("tag=acme", 0.97, 0.8)  # three steps: none
    for order in ([loose, tight], [tight, loose]):
        step = step_down(E.HIGH, cap, order)
        assert step is not None
        assert (step.applied, step.budget, step.spent) == (E.NONE, "tag=acme", 0.97)
    # A floor limits what a budget can ask: the other budget's deeper step wins.
    floored = Pressure("floored", 0.99, 0.5, floor=E.LOW)
    step = step_down(E.HIGH, cap, [floored, loose])
    assert step is not None
    assert (step.applied, step.budget) == (E.LOW, "floored")
    step = step_down(E.HIGH, cap, [floored, tight])
    assert step is not None
    assert (step.applied, step.budget) == (E.NONE, "tag=acme")


def test_the_output_ceiling_shrinks_by_the_tiers_allowances() -> None:
    cap = _cap("gpt-5.5")
    high, low, medium = (TIER_BUDGET_TOKENS[t] for t in (E.HIGH, E.LOW, E.MEDIUM))
    # 32,000 tokens asked at high, sent at low: less the difference of the allowances.
    step = step_down(E.HIGH, cap, [Pressure("d", 0.87, 0.8)], max_tokens=32_000)
    assert step is not None
    assert step.applied is E.LOW
    assert step.max_tokens == 32_000 - (high - low)
    # Never below the cheaper tier's allowance plus the answer's room.
    step = step_down(E.HIGH, cap, [Pressure("d", 0.85, 0.8)], max_tokens=10_000)
    assert step is not None
    assert step.applied is E.MEDIUM
    assert step.max_tokens == max(10_000 - (high - medium), medium + STEP_ANSWER_TOKENS)
    step = step_down(E.HIGH, cap, [Pressure("d", 0.99, 0.8)], max_tokens=10_000)
    assert step is not None
    assert (step.applied, step.max_tokens) == (E.NONE, STEP_ANSWER_TOKENS)
    # Never above the ceiling asked: a small one stays (max_tokens None = unchanged).
    step = step_down(E.HIGH, cap, [Pressure("d", 0.85, 0.8)], max_tokens=2000)
    assert step is not None
    assert step.max_tokens is None
    # Where the resolution adds the reasoning budget (budget wires), it is left alone.
    step = step_down(
        E.HIGH, cap, [Pressure("d", 0.99, 0.8)], max_tokens=32_000, ceiling_holds_reasoning=False
    )
    assert step is not None
    assert step.max_tokens is None


def test_with_flex_at_the_steps_end_there_and_the_call_moves_to_flex() -> None:
    cap = _cap("gpt-5.5")  # from high: medium low none
    seen = []
    for spent in (0.79, 0.8, 0.8334, 0.8667, 0.8999, 0.9, 1.0):
        step = step_down(E.HIGH, cap, [Pressure("day", spent, 0.8, flex_at=0.9)], flex=True)
        seen.append(
            None
            if step is None
            else (step.applied, step.service_tier, step.step_down_at, step.flex_at)
        )
    assert seen == [
        None,
        (E.MEDIUM, None, 0.8, None),
        (E.LOW, None, 0.8, None),  # 0.8 + 0.1 / 3 = 0.8333
        (E.NONE, None, 0.8, None),  # 0.8 + 0.2 / 3 = 0.8667
        (E.NONE, None, 0.8, None),
        (E.NONE, ServiceTier.FLEX, 0.8, 0.9),
        (E.NONE, ServiceTier.FLEX, 0.8, 0.9),
    ]
    assert steps(0.8334, 0.8, 3, until=0.9) == 2


def test_flex_only_where_the_source_takes_it_and_without_a_reasoning_step() -> None:
    cap = _cap("gpt-5.5")
    # The provider or model has no flex (or the call is at flex already): the steps alone.
    step = step_down(E.HIGH, cap, [Pressure("day", 0.95, 0.8, flex_at=0.9)], flex=False)
    assert step is not None
    assert (step.applied, step.service_tier) == (E.NONE, None)
    # A budget with flex_at alone moves to flex and keeps the reasoning tier.
    only = step_down(E.HIGH, cap, [Pressure("day", 0.95, None, flex_at=0.9)], flex=True)
    assert only is not None
    assert (only.requested, only.applied, only.service_tier) == (E.HIGH, E.HIGH, ServiceTier.FLEX)
    # A model polythink knows nothing of still moves to flex (its tiers are not needed).
    unknown = step_down(None, None, [Pressure("day", 0.95, 0.5, flex_at=0.9)], flex=True)
    assert unknown is not None
    assert (unknown.requested, unknown.applied, unknown.service_tier) == (
        None,
        None,
        ServiceTier.FLEX,
    )
    assert step_down(None, None, [Pressure("day", 0.95, 0.5, flex_at=0.9)]) is None


def test_the_budget_that_moves_to_flex_is_the_one_reported() -> None:
    cap = _cap("gpt-5.5")
    step = step_down(
        E.HIGH,
        cap,
        [Pressure("tight", 0.89, 0.5), Pressure("flexing", 0.91, 0.8, flex_at=0.9)],
        flex=True,
    )
    assert step is not None
    # "tight" steps furthest (none); "flexing" moves to flex and is the one named.
    assert (step.applied, step.service_tier, step.budget, step.spent) == (
        E.NONE,
        ServiceTier.FLEX,
        "flexing",
        0.91,
    )
