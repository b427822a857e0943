"""What the command line prints fits the terminal: the demo in 80 columns, models one line each."""

from __future__ import annotations

import pytest

from polythink.cli import DEMO_CALLS, main
from polythink.reasoning.capabilities import all_capabilities


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_the_demo_fits_80_columns_with_notes_as_footnotes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out = run(capsys, "demo")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if line.startswith("model "))
    assert header.split() == ["model", "provider", "asked", "sent", "tokens", "seen", "ms", "note"]
    row = next(line for line in lines if line.startswith("gpt-5.1 ") and " minimal " in line)
    cells = row.split()
    assert cells[:6] == ["gpt-5.1", "openai", "minimal", "low", "40", "observed"]
    ref = cells[-1]
    assert ref.startswith("[")
    assert ref.endswith("]")
    footnote = next(line for line in lines if line.startswith(f"{ref} "))
    assert footnote.rstrip() == (
        f"{ref} nearest tier: model 'gpt-5.1' does not accept reasoning_effort='minimal'"
    )
    assert lines[-1] == f"{len(DEMO_CALLS)} calls, each ended as expected"


def test_the_demo_keeps_its_wide_table_from_120_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, out = run(capsys, "demo")
    assert code == 0
    header = next(line for line in out.splitlines() if "requested" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "model",
        "provider",
        "requested",
        "applied",
        "reasoning tokens",
        "observation",
        "latency",
        "note",
    ]


def test_models_prints_one_line_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "models")
    assert code == 0
    lines = out.splitlines()
    caps = all_capabilities()
    assert len(lines) == len(caps) + 1
    assert lines[0].split() == ["provider", "model", "tiers", "default"]
    row = next(line for line in lines if line.split()[1:2] == ["gemini-2.5-pro"])
    assert row.split() == [
        "gemini",
        "gemini-2.5-pro",
        *["minimal", "low", "medium", "high", "xhigh", "max"],
        "auto",
    ]
    assert "documented" not in out


def test_models_evidence_shows_the_sources(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code, out = run(capsys, "models", "--evidence")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("│ gemini-2.5-pro "))
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[6] == "documented"
    assert cells[7].startswith("documented: GEM-DOC-thinking budget table")
