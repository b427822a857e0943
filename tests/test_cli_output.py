"""What the command line prints fits the terminal: the demo in 80 columns, models one line each."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import anyio
import genai_prices
import pytest

from polythink import Client, Source
from polythink.cli import DEMO_CALLS, DemoCall, demo, main
from polythink.reasoning.capabilities import all_capabilities
from polythink.simulator import Simulator


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
    assert header.split() == [
        *["model", "provider", "asked", "sent", "tokens", "cost", "seen", "ms", "note"]
    ]
    row = next(line for line in lines if line.startswith("gpt-5.5 ") and " minimal " in line)
    cells = row.split()
    assert cells[:5] + cells[6:7] == ["gpt-5.5", "openai", "minimal", "low", "40", "observed"]
    assert cells[5].startswith("$")
    ref = cells[-1]
    assert ref.startswith("[")
    assert ref.endswith("]")
    footnote = next(line for line in lines if line.startswith(f"{ref} "))
    assert footnote.rstrip() == (
        f"{ref} nearest tier: model 'gpt-5.5' does not accept reasoning_effort='minimal'"
    )
    assert lines[-1] == f"{len(DEMO_CALLS)} calls, each ended as expected"


def test_the_demo_prints_its_wide_table_where_it_fits(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    code, out = run(capsys, "demo")
    assert code == 0
    header = next(line for line in out.splitlines() if "requested" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "model",
        "provider",
        "requested",
        "applied",
        "reasoning tokens",
        "cost",
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


# ------------------------------------------------------------------ the cost column

# polythink provider -> genai-prices provider, for the rows priced below.
TABLE_PROVIDER = {
    "openai": "openai",
    "kimi": "moonshotai",
    "glm": "zhipuai",
    "anthropic": "anthropic",
}
COST_CALLS = (
    DemoCall("openai", "gpt-5.5", "high", "high"),
    DemoCall("qwen", "qwen3.7-plus", "low", "low"),
    DemoCall("kimi", "kimi-k3", "max", "max"),
    DemoCall("glm", "glm-5.3", "none", "low"),
    DemoCall("anthropic", "claude-fable-5-2", "low", "low", "cached"),
)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def table_price(sim: Simulator, call: DemoCall) -> Decimal:
    """What genai-prices charges for the usage the simulator answers this call with."""

    async def usage() -> genai_prices.Usage:
        source = Source(
            call.provider,
            call.model,
            api_key="sim",
            base_url=f"http://127.0.0.1:{sim.port}/{call.provider}/v1",
        )
        async with Client([source], cost=False) as client:
            response = await client.complete(
                demo._PROMPT, reasoning_effort=call.effort, cache=False
            )
        got = response.usage
        assert got is not None
        assert got.input_tokens is not None
        assert got.output_tokens is not None
        return genai_prices.Usage(
            input_tokens=got.input_tokens,
            output_tokens=got.output_tokens,
            output_reasoning_tokens=got.reasoning_tokens,
            cache_read_tokens=got.cache_read_tokens,
            cache_write_tokens=got.cache_write_tokens,
        )

    table = TABLE_PROVIDER[call.provider]
    found = genai_prices.calc_price(anyio.run(usage), call.model, provider_id=table)
    total: Decimal = found.total_price
    return total


@pytest.mark.parametrize("columns", ["80", "120"])
def test_the_demo_prints_each_rows_cost_and_the_total_spent_and_saved(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    sim: Simulator,
    columns: str,
) -> None:
    gpt, kimi, glm, claude = (table_price(sim, COST_CALLS[i]) for i in (0, 2, 3, 4))
    monkeypatch.setattr(demo, "DEMO_CALLS", COST_CALLS)
    monkeypatch.setenv("COLUMNS", columns)
    code, out = run(capsys, "demo", "--base-url-root", f"http://127.0.0.1:{sim.port}")
    assert code == 0, out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= int(columns)

    def cost_cell(model: str, effort: str) -> str:
        # The first line of the row; a narrow wide table folds long model names.
        for line in lines:
            cells = [c.strip() for c in line.split("│")[1:-1]] if "│" in line else line.split()
            if len(cells) > 5 and cells[0] and model.startswith(cells[0]) and cells[2] == effort:
                return cells[5]
        raise AssertionError(f"no row for {model} {effort}")

    # qwen has no table price.
    assert [cost_cell(c.model, c.effort) for c in COST_CALLS] == [
        f"${gpt:.5f}",
        "—",
        f"${kimi:.5f}",
        f"${glm:.5f}",
        # The cached row: its first call spent, its second (the hit) spent nothing.
        f"${claude:.5f}",
    ]
    spent = gpt + kimi + glm + claude
    assert (
        f"total: ${spent:.5f} spent by the 4 priced rows of 5; ${claude:.5f} saved by 1 cache hit"
        in lines
    )
    assert lines[-1] == "5 calls, each ended as expected"
    if columns == "80":
        assert "[2] asked twice: the second is a cache hit" in lines
