"""Budget values, UTC calendar windows, and the in-process spend count."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from polythink import Budget, Client, Effort
from polythink.backends.base import Tally
from polythink.backends.local import LocalBudgets, process_budgets
from polythink.backends.share import Share
from polythink.budgets import (
    BudgetState,
    Line,
    account_id,
    check_tag,
    fingerprint,
    nanos,
    window_bounds,
)
from tests.budget_support import Clock


def _ts(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def test_a_budget_has_one_scope_and_a_default_name() -> None:
    assert Budget(5).name == "day"
    assert (Budget(5).scope, Budget(5).match) == ("all", "all")
    assert Budget(1, "hour", model="gpt-5.5").name == "hour:model=gpt-5.5"
    assert Budget(1, "month", account="openai").name == "month:account=openai"
    assert Budget(1, tag="*").name == "day:tag=*"
    tiered = Budget(1, "minute", tier="HIGH")
    assert (tiered.tier, tiered.name, tiered.match) == (Effort.HIGH, "minute:tier=high", "high")
    assert Budget(1, name="team").name == "team"
    assert Budget(2, floor="off").floor is Effort.NONE


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"usd": 0}, "positive number of US dollars"),
        ({"usd": -1}, "positive number of US dollars"),
        ({"usd": True}, "positive number of US dollars"),
        ({"usd": float("nan")}, "positive number of US dollars"),
        ({"usd": 1e7}, "below \\$9,000,000"),
        ({"usd": 1, "per": "week"}, "minute, hour, day, month"),
        ({"usd": 1, "model": "a", "tag": "b"}, "one scope .*model, tag"),
        ({"usd": 1, "tier": "extreme"}, "Budget tier: .*extreme"),
        ({"usd": 1, "step_down_at": 80}, "fraction from 0 to below 1"),
        ({"usd": 1, "step_down_at": 1.0}, "fraction from 0 to below 1"),
        ({"usd": 1, "unpriced": "free"}, "'refuse' or 'allow'"),
        ({"usd": 1, "name": ""}, "1 to 100 printable"),
        ({"usd": 1, "tag": ""}, "'\\*' or a non-empty string"),
    ],
)
def test_bad_budgets_say_what_is_accepted(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_tags_are_short_printable_strings() -> None:
    assert check_tag("acme-42") == "acme-42"
    assert check_tag(None) is None
    for bad in ("", "x" * 129, "a\nb", 7):
        with pytest.raises(ValueError, match="1 to 128 printable"):
            check_tag(bad)


def test_an_account_is_named_by_a_fingerprint_never_the_key() -> None:
    key = "sk-secret-0123456789"
    named = account_id("openai", "https://api.openai.com/v1", key)
    assert named == f"openai|https://api.openai.com/v1|{fingerprint(key)}"
    assert key not in named
    assert len(fingerprint(key)) == 16
    line = Budget(1, account="*").line(named)
    assert key not in line.key
    assert "{" not in line.key
    assert "}" not in line.key


@pytest.mark.parametrize(
    ("per", "now", "start", "end"),
    [
        (
            "minute",
            _ts(2026, 12, 1, 10, 15, 42),
            _ts(2026, 12, 1, 10, 15),
            _ts(2026, 12, 1, 10, 16),
        ),
        ("hour", _ts(2026, 12, 1, 10, 59, 59), _ts(2026, 12, 1, 10), _ts(2026, 12, 1, 11)),
        ("day", _ts(2026, 12, 31, 23, 59, 59), _ts(2026, 12, 31), _ts(2027, 1, 1)),
        ("day", _ts(2027, 1, 1), _ts(2027, 1, 1), _ts(2027, 1, 2)),
        ("month", _ts(2026, 12, 15, 8), _ts(2026, 12, 1), _ts(2027, 1, 1)),
        ("month", _ts(2028, 2, 29, 23, 59), _ts(2028, 2, 1), _ts(2028, 3, 1)),
        ("month", _ts(2027, 2, 28, 12), _ts(2027, 2, 1), _ts(2027, 3, 1)),
        ("month", _ts(2026, 11, 30, 23, 59, 59), _ts(2026, 11, 1), _ts(2026, 12, 1)),
    ],
)
def test_windows_are_utc_calendar_windows(per: str, now: float, start: float, end: float) -> None:
    assert window_bounds(per, now + 0.75) == (int(start), int(end))


def test_amounts_are_whole_nano_dollars_rounded_up() -> None:
    assert nanos(0.01512) == 15_120_000
    assert nanos(3.375e-08) == 34
    assert nanos(0.0) == 0


@pytest.mark.anyio
async def test_a_reservation_takes_every_line_or_none() -> None:
    clock = Clock(_ts(2026, 12, 1, 12))
    store = LocalBudgets(clock)
    day, tenant = Line("day:all", 1000, "day"), Line("day:tag=acme", 300, "day")
    first = await store.reserve([day, tenant], 250)
    assert first.taken
    assert [t.spent for t in first.tallies] == [0, 0]
    # 250 more fits the day (500 <= 1000) but not the tenant (500 > 300): nothing is taken.
    second = await store.reserve([day, tenant], 250)
    assert not second.taken
    assert [t.spent for t in second.tallies] == [250, 250]
    assert [t.spent for t in await store.peek([day, tenant])] == [250, 250]
    # The call cost 100: the correction gives 150 back to both.
    assert await store.settle([day, tenant], first, 100 - 250) == [100, 100]
    assert (await store.reserve([day, tenant], 200)).taken
    assert [t.spent for t in await store.peek([day, tenant])] == [300, 300]


@pytest.mark.anyio
async def test_a_window_rolls_over_at_midnight_utc() -> None:
    clock = Clock(_ts(2026, 12, 1, 23, 59, 30))
    store = LocalBudgets(clock)
    day = Line("day:all", 1000, "day")
    late = await store.reserve([day], 900)
    assert late.taken
    assert late.tallies[0].end == int(_ts(2026, 12, 2))
    assert not (await store.reserve([day], 200)).taken
    clock.now = _ts(2026, 12, 2, 0, 0, 1)
    (tally,) = await store.peek([day])
    assert (tally.spent, tally.start) == (0, int(_ts(2026, 12, 2)))
    fresh = await store.reserve([day], 200)
    assert fresh.taken
    # The call of the day before ends now: its correction belongs to a window that is over.
    assert await store.settle([day], late, -800) == [None]
    assert [t.spent for t in await store.peek([day])] == [200]


@pytest.mark.anyio
async def test_alone_a_count_keeps_to_its_share_of_what_was_left_until_a_new_window() -> None:
    """The fallback of a shared store: 400 of 1000 spent when last read, 4 workers."""
    clock = Clock(_ts(2026, 12, 1, 23, 59, 30))
    store = LocalBudgets(clock, journal=True)
    share = Share(4)
    day = Line("day:all", 1000, "day")
    start, end = int(_ts(2026, 12, 1)), int(_ts(2026, 12, 2))
    store.seed(day.key, Tally(400, start, end))
    # A quarter of the 1000 (250), of which its part of the 400 spent, 250 - 600 // 4 = 100.
    assert await store.peek([day], share=share) == [Tally(100, start, end, 250, 4)]
    assert (await store.reserve([day], 150, share=share)).taken
    assert not (await store.reserve([day], 1, share=share)).taken
    # Counted whole, as the shared count will take it back.
    assert await store.peek([day]) == [Tally(550, start, end)]
    assert store.unsynced(day.key) == (start, 150)
    # The next day is a whole budget again: its quarter of 1000.
    clock.now = _ts(2026, 12, 2, 0, 0, 1)
    following = (end, end + 86400)
    assert await store.peek([day], share=share) == [Tally(0, *following, 250, 4)]
    assert (await store.reserve([day], 250, share=share)).taken
    assert not (await store.reserve([day], 1, share=share)).taken


@pytest.mark.anyio
async def test_the_process_store_forgets_windows_that_are_over() -> None:
    clock = Clock(_ts(2026, 12, 1, 12, 0, 0))
    store = LocalBudgets(clock)
    for i in range(4096):
        assert (await store.reserve([Line(f"minute:tag=t{i}", 10, "minute")], 1)).taken
    clock.now += 60
    await store.reserve([Line("minute:tag=late", 10, "minute")], 1)
    assert len(store._counts) == 1
    assert process_budgets() is process_budgets()


def test_a_toml_file_gives_budgets(tmp_path: Path) -> None:
    path = tmp_path / "polythink.toml"
    path.write_text(
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "sk-toml-budget"\n\n'
        '[[budget]]\nusd = 5.0\nper = "day"\ntag = "*"\nstep_down_at = 0.8\nfloor = "low"\n\n'
        '[[budget]]\nusd = 100\nper = "month"\nname = "fleet"\n',
        encoding="utf-8",
    )
    client = Client.from_toml(path)
    assert client.budgets == (
        Budget(5.0, "day", tag="*", step_down_at=0.8, floor="low"),
        Budget(100, "month", name="fleet"),
    )
    path.write_text(
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "sk-toml-budget"\n\n'
        '[[budget]]\nusd = 5.0\nwindow = "day"\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"\[\[budget\]\] #0: unknown keys \['window'\]"):
        Client.from_toml(path)
    path.write_text('[[budget]]\nusd = -1\n[[source]]\nprovider = "openai"\nmodel = "m"\n')
    with pytest.raises(ValueError, match=r"#0: Budget usd must be a positive number"):
        Client.from_toml(path)


def test_the_fraction_spent_of_a_limit_of_nothing_is_all_of_it() -> None:
    # A process's share of a budget with nothing left while Redis does not answer is 0.
    state = BudgetState("day", "all", "day", 0.0, 0.0, 0.0)
    assert (state.fraction, state.remaining) == (1.0, 0.0)
    assert BudgetState("day", "all", "day", 0.0, 0.25, 0.0).fraction == math.inf
    assert BudgetState("day", "all", "day", 2.0, 0.5, 0.0).fraction == 0.25
