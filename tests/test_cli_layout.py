"""The demo's chart agrees with its table, and no width makes a table cut or split a word."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from polythink import Effort, Response, dashboard
from polythink.cli import DEMO_CALLS, main
from polythink.cli import demo as demo_command
from polythink.reasoning.capabilities import all_capabilities
from polythink.simulator import Simulator


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def demo(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sim: Simulator,
    columns: int,
    *argv: str,
) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(["demo", "--base-url-root", f"http://127.0.0.1:{sim.port}", *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


# ------------------------------------------------------------------------------ the chart


def test_the_chart_sums_to_the_tables_tokens_and_cost_per_model_and_tier(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sim: Simulator,
    tmp_path: Path,
) -> None:
    charted: list[Response] = []
    rows: list[Any] = []
    real_chart, real_report = dashboard.write_chart, demo_command._demo_report

    def chart(path: Path, responses: Sequence[Response]) -> Path:
        charted.extend(responses)
        return real_chart(path, charted)

    def report(console: Any, outcomes: Sequence[Any], *rest: Any) -> int:
        rows.extend(outcomes)
        return real_report(console, outcomes, *rest)

    monkeypatch.setattr(dashboard, "write_chart", chart)
    monkeypatch.setattr(demo_command, "_demo_report", report)
    out = demo(capsys, monkeypatch, sim, 250, "--chart", str(tmp_path / "tiers.png"))
    assert (tmp_path / "tiers.png").read_bytes().startswith(b"\x89PNG")
    assert len(rows) == len(DEMO_CALLS)

    tokens: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    dollars: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for row in rows:
        if row.call.mode == "budget":  # every call until the refusal, each at its tier
            for call in row.calls:
                assert call.applied_effort is not None
                assert call.usage is not None
                assert call.cost is not None
                tokens[call.model][call.applied_effort.value] += call.usage.reasoning_tokens or 0
                dollars[call.model][call.applied_effort.value] += call.cost.total
            continue
        if row.response is None:  # the refused call made none
            continue
        if row.reasoning_tokens is not None:  # Converse reports no count: nothing to chart
            tokens[row.response.model][row.result] += row.reasoning_tokens
        if row.spent is not None:
            dollars[row.response.model][row.result] += row.spent
    got_tokens, got_dollars = dashboard.chart_totals(charted)
    assert got_tokens == tokens
    assert got_dollars.keys() == dollars.keys()
    for model, per in dollars.items():
        assert got_dollars[model] == pytest.approx(per, rel=1e-12, abs=0.0)
    # The rows the last-response chart got wrong: the tool loops (2 calls each) and the
    # cached row (its first call spent, its hit did not).
    assert got_tokens["claude-haiku-5-5"]["medium"] == 240
    budget = next(r for r in rows if r.call.mode == "budget")
    at_medium = [c for c in budget.calls if c.applied_effort is Effort.MEDIUM]
    assert got_tokens["claude-sonnet-4-6"].get("medium", 0) == 120 * len(at_medium)
    assert got_tokens["deepseek-v4-pro"]["low"] == 80
    assert got_tokens["gemini-3.8-flash"]["low"] == 80
    assert got_tokens["gpt-6-astra"]["high"] == 640
    assert got_tokens["claude-fable-5-2"] == {"low": 40}
    cached = next(r for r in rows if r.call.mode == "cached")
    assert [r.cache_hit for r in cached.calls] == [False, True]
    assert got_dollars["claude-fable-5-2"]["low"] == cached.calls[0].cost.total
    # And the table's total line is the chart's total.
    total = sum(v for per in got_dollars.values() for v in per.values())
    assert f"total: ${total:.5f} spent by the " in out


def test_chart_totals_leave_cache_hits_and_missing_figures_out() -> None:
    from tests.test_demo_metrics import _response

    got = dashboard.chart_totals(
        [
            _response("gpt-5.5", Effort.HIGH, 320),
            _response("gpt-5.5", Effort.HIGH, 320),
            _response("gpt-5.1", Effort.LOW, 40),
            _response("gpt-5.1", Effort.LOW, 40, hit=True),
            _response("gpt-5.1", None, 7),
        ]
    )
    assert got[0] == {"gpt-5.5": {"high": 640}, "gpt-5.1": {"low": 40, "unset": 7}}
    assert set(got[1]) == {"gpt-5.5", "gpt-5.1"}


# ------------------------------------------------------------------------- demo widths

WORD = re.compile(r"[A-Za-z0-9_.]*[A-Za-z_][A-Za-z0-9_.]*")


def words(text: str) -> set[str]:
    """The words of ``text`` (``-``, ``/``, spaces and box lines separate them)."""
    return {w.rstrip(".") for w in WORD.findall(text)}


@pytest.mark.parametrize("columns", [80, 120, 130, 160])
def test_the_demo_never_splits_a_word_at_any_width(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sim: Simulator,
    columns: int,
) -> None:
    # At 400 columns nothing wraps: its words (and the compact layout's short headers) are
    # the only words a narrower table may show.
    vocabulary = words(demo(capsys, monkeypatch, sim, 400))
    vocabulary |= {"model", "provider", "asked", "sent", "tokens", "cost", "seen", "ms", "note"}
    assert {"claude", "sonnet", "cannot", "qwen3.8", "max"} <= vocabulary
    out = demo(capsys, monkeypatch, sim, columns)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in out
    assert words(out) - vocabulary == set()
    assert "nearest" in words(out)
    # The wide layout only where it fits: 120 and 130 columns get the compact one.
    wide = any("requested" in line for line in lines)
    assert wide is (columns == 160)


# ------------------------------------------------------------------------ models evidence


@pytest.mark.parametrize("columns", [80, 120, 150, 200, 250])
def test_models_evidence_loses_no_text_at_any_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    assert main(["models", "--evidence"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    caps = all_capabilities()
    # The evidence texts' own "…" and no other: no cell was cut.
    assert out.count("…") == sum(c.evidence.count("…") for c in caps)
    assert out.count("…") == 5
    flat = "".join(out.split()).replace("│", "")
    table = any(line.startswith("│ gemini-2.5-pro ") for line in lines)
    assert table is (columns == 250)
    if not table:
        # The blocks keep each evidence text in order, broken only between lines.
        for cap in caps:
            assert "".join(cap.evidence.split()) in flat
