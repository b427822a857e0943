"""End to end: ``polythink demo`` as a subprocess against a running simulator.

The demo's console script (from the project's environment) is pointed at a simulator this
test starts, so the test also sees what reached the simulator. Rows of providers whose
transport is not in this build are skipped by the demo, and checked here only when present.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from polythink.cli import DEMO_CALLS
from polythink.providers import get_provider
from polythink.simulator import Simulator
from polythink.transports import transport_class

CONSOLE_SCRIPT = Path(sys.executable).parent / "polythink"

# (model, provider, requested, applied, reasoning tokens, observation, note; the cost column
# is checked in test_cli_output.py); notes that
# point at a footnote are matched as a pattern. The prompt "Why is the sky blue? Answer in
# one sentence." gives 9 words per reasoning step ("Step N: weigh" and the first six
# prompt words), 13 steps at high: 117 streamed pieces.
NEAREST = r"nearest tier \[(\d+)\]"
ROWS = [
    ("gpt-6-luna", "openai", "high", "high", "320", "observed", ""),
    ("gpt-5.5", "openai", "minimal", "low", "40", "observed", NEAREST),
    (
        "gpt-6.2-astra",
        "openai",
        "xhigh",
        "xhigh",
        "640",
        "observed",
        r"streamed 0 reasoning \+ 12 text deltas",
    ),
    ("gpt-6.1-sol", "openai", "none", "low", "40", "observed", NEAREST),
    (
        "gpt-6-astra",
        "openai",
        "high",
        "high",
        "640",
        "observed",
        r"tool round trip: 2 calls, 1 tool result sent back; warning \[(\d+)\]",
    ),
    ("glm-5.3", "glm", "medium", "low", "40", "observed", NEAREST),
    (
        "deepseek-v4-pro",
        "deepseek",
        "high",
        "high",
        "320",
        "observed",
        r"streamed 117 reasoning \+ 12 text deltas",
    ),
    (
        "deepseek-v4-pro",
        "deepseek",
        "low",
        "low",
        "80",
        "observed",
        "tool round trip: 2 calls, 1 tool result sent back",
    ),
    (
        "anthropic/claude-opus-5.5",
        "openrouter",
        "high",
        "high",
        "320",
        "observed",
        r"streamed 117 reasoning \+ 12 text deltas",
    ),
    ("qwen3.8-max", "qwen", "medium", "medium", "120", "observed", ""),
    ("kimi-k3", "kimi", "max", "max", "1024", "observed", ""),
    (
        "claude-opus-5-5",
        "anthropic",
        "xhigh",
        "xhigh",
        "640",
        "observed",
        r"streamed 234 reasoning \+ 12 text deltas",
    ),
    ("claude-sonnet-5-5", "anthropic", "none", "low", "40", "observed", NEAREST),
    (
        "claude-haiku-5-5",
        "anthropic",
        "medium",
        "medium",
        "240",
        "observed",
        "tool round trip: 2 calls, 1 tool result sent back",
    ),
    (
        "claude-opus-5-5",
        "anthropic",
        "medium",
        "medium",
        "720",
        "observed",
        "6 calls, a system_suffix changing every call: 80% of the input read from the prompt cache",
    ),
    (
        "gpt-6.1-sol",
        "openai-responses",
        "medium",
        "medium",
        "120",
        "observed",
        r"streamed 0 reasoning \+ 12 text deltas",
    ),
    ("gemini-4-argon", "gemini", "minimal", "low", "40", "observed", NEAREST),
    (
        "gemini-3.8-flash",
        "gemini",
        "low",
        "low",
        "80",
        "observed",
        "tool round trip: 2 calls, 1 tool result sent back",
    ),
    (
        "claude-fable-5-2",
        "anthropic",
        "low",
        "low",
        "40",
        "observed",
        "asked twice: the second is a cache hit",
    ),
    # The budget row: calls until the day's budget refuses one, stepping the tier down.
    (
        "claude-sonnet-4-6",
        "anthropic",
        "high",
        "error",
        "-",
        "-",
        r"BudgetExceededError \[(\d+)\]; 27 calls: high ×5 → medium ×4 → low ×10 → none ×8, "
        r"refused at 88%",
    ),
    # The clouds: Claude on Bedrock streamed as AWS event-stream frames, gpt-oss on Converse
    # (which reports no reasoning count), Gemini and Claude tool loops on Vertex, an Azure
    # deployment of gpt-5.5 streamed.
    (
        "anthropic.claude-opus-4-8",
        "bedrock",
        "high",
        "high",
        "320",
        "observed",
        r"streamed 117 reasoning \+ 12 text deltas",
    ),
    ("openai.gpt-oss-120b-1:0", "bedrock", "max", "high", "n/a", "observed", NEAREST),
    (
        "gemini-4-neon",
        "vertex",
        "low",
        "low",
        "80",
        "observed",
        "tool round trip: 2 calls, 1 tool result sent back",
    ),
    (
        "claude-opus-4-8",
        "vertex",
        "medium",
        "medium",
        "240",
        "observed",
        "tool round trip: 2 calls, 1 tool result sent back",
    ),
    (
        "gpt-5.5",
        "azure",
        "max",
        "xhigh",
        "640",
        "observed",
        r"streamed 0 reasoning \+ 12 text deltas; nearest tier \[(\d+)\]",
    ),
]


def has_transport(provider: str) -> bool:
    try:
        transport_class(get_provider(provider).wire)
    except ValueError:
        return False
    return True


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def run_demo(*argv: str) -> subprocess.CompletedProcess[str]:
    assert CONSOLE_SCRIPT.exists(), f"console script missing: {CONSOLE_SCRIPT} (pip install -e .)"
    env = {**os.environ, "COLUMNS": "250", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run(
        [str(CONSOLE_SCRIPT), "demo", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def table_rows(out: str, border: str = "│") -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split(border)[1:-1]]
        for line in out.splitlines()
        if line.startswith(border)
    ]


def footnotes(out: str) -> dict[str, str]:
    notes = {}
    for line in out.splitlines():
        match = re.match(r"^\[(\d+)\] (.*)$", line)
        if match:
            notes[match[1]] = match[2]
    return notes


def test_demo_against_a_running_simulator(sim: Simulator) -> None:
    sim.stats.reset()
    sim.server.prompt_cache.clear()
    result = run_demo("--base-url-root", f"http://127.0.0.1:{sim.port}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert out.splitlines()[0] == (
        f"simulator at http://127.0.0.1:{sim.port} (given by --base-url-root)"
    )
    assert table_rows(out, "┃") == [
        [
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
    ]
    body = table_rows(out)
    notes = footnotes(out)
    running = [call for call in DEMO_CALLS if has_transport(call.provider)]
    assert [(r[0], r[1], r[2]) for r in body] == [(c.model, c.provider, c.effort) for c in running]
    for row, call in zip(body, running, strict=True):
        assert row[3] == ("error" if call.expect.endswith("Error") else call.expect), row
        assert re.fullmatch(r"\$\d\.\d{5}|—", row[5]), row
        assert re.fullmatch(r"\d+ ms", row[7]), row
        assert "UNEXPECTED" not in row[8], row

    assert len(body) == len(ROWS)
    for row, expected in zip(body, ROWS, strict=True):
        assert row[:5] + row[6:7] == list(expected[:6])
        assert re.fullmatch(expected[6], row[8]), row

    said = {
        row[0] + " " + row[2]: notes[match[1]]
        for row, expected in zip(body, ROWS, strict=True)
        if expected[6].startswith("nearest") and (match := re.fullmatch(expected[6], row[8]))
    }
    assert said == {
        "gpt-5.5 minimal": "model 'gpt-5.5' does not accept reasoning_effort='minimal' (accepted: "
        "none, low, medium, high, xhigh); applied 'low' by effort_fallback='nearest'",
        "gpt-6.1-sol none": "model 'gpt-6.1-sol' cannot switch reasoning off (accepted: low, "
        "medium, high, xhigh, max), so reasoning_effort='none' was not sent; applied 'low', its "
        "cheapest tier, by effort_fallback='nearest' ('error' refuses instead)",
        "glm-5.3 medium": "model 'glm-5.3' does not accept reasoning_effort='medium' (accepted: "
        "low, high, max); applied 'low' by effort_fallback='nearest'",
        "claude-sonnet-5-5 none": "model 'claude-sonnet-5-5' cannot switch reasoning off "
        "(accepted: low, medium, high, xhigh, max), so reasoning_effort='none' was not sent; "
        "applied 'low', its cheapest tier, by effort_fallback='nearest' ('error' refuses "
        "instead)",
        "gemini-4-argon minimal": "model 'gemini-4-argon' does not accept "
        "reasoning_effort='minimal' (accepted: low, medium, high); applied 'low' by "
        "effort_fallback='nearest'",
        "openai.gpt-oss-120b-1:0 max": "model 'openai.gpt-oss-120b-1:0' does not accept "
        "reasoning_effort='max' (accepted: low, medium, high); applied 'high' by "
        "effort_fallback='nearest'",
    }
    routed = re.fullmatch(ROWS[4][6], body[4][8])
    assert routed is not None
    assert notes[routed[1]] == (
        "sent to the Responses API: model 'gpt-6-astra' takes function tools on the Responses "
        "API only; the openai source reaches it with the same key and host"
    )

    assert out.splitlines()[-1] == f"{len(DEMO_CALLS)} calls, each ended as expected"
    # Every call of the current lineup succeeded at once: no 400, no retry. Tool rows made two
    # requests each (the routed one to /openai/v1/responses); the cache hit made none; the
    # budget row's 28th call was refused by the budget, before sending.
    assert dict(sim.stats.by_provider) == {
        "openai": 6,
        "glm": 1,
        "deepseek": 3,
        "openrouter": 1,
        "qwen": 1,
        "kimi": 1,
        "anthropic": 38,
        "openai-responses": 1,
        "gemini": 3,
        "bedrock": 2,
        "vertex": 4,
        "azure": 1,
    }
    assert dict(sim.stats.by_status) == {200: 62}
    assert sim.stats.by_path["/openai/v1/responses"] == 2


def test_demo_starts_its_own_simulator() -> None:
    result = run_demo()
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert re.fullmatch(r"simulator at http://127\.0\.0\.1:\d+ \(started for this demo\)", first)
    assert result.stdout.splitlines()[-1].endswith("calls, each ended as expected")
