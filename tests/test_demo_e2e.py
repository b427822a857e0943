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
CHAT_ROWS = [
    ("gpt-5.5", "openai", "high", "high", "320", "observed", ""),
    ("gpt-5.1", "openai", "minimal", "low", "40", "observed", r"nearest tier \[(\d+)\]"),
    (
        "gpt-5.4",
        "openai",
        "xhigh",
        "xhigh",
        "640",
        "observed",
        r"streamed 0 reasoning \+ 12 text deltas",
    ),
    ("gpt-5.1", "openai", "none", "none", "0", "absent", ""),
    ("glm-5.3", "glm", "medium", "low", "40", "observed", r"nearest tier \[(\d+)\]"),
    ("glm-5.3", "glm", "none", "low", "40", "observed", r"nearest tier \[(\d+)\]"),
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
        "anthropic/claude-sonnet-4.5",
        "openrouter",
        "high",
        "high",
        "320",
        "observed",
        r"streamed 117 reasoning \+ 12 text deltas",
    ),
    ("qwen3.7-plus", "qwen", "low", "low", "40", "observed", ""),
    ("kimi-k3", "kimi", "max", "max", "1024", "observed", ""),
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

    chat = [r for r in body if r[1] in {"openai", "glm", "deepseek", "openrouter", "qwen", "kimi"}]
    assert len(chat) == len(CHAT_ROWS)
    for row, expected in zip(chat, CHAT_ROWS, strict=True):
        assert row[:5] + row[6:7] == list(expected[:6])
        assert re.fullmatch(expected[6], row[8]), row

    nearest = [re.fullmatch(CHAT_ROWS[i][6], chat[i][8]) for i in (1, 4)]
    assert [notes[m[1]] for m in nearest if m] == [
        "model 'gpt-5.1' does not accept reasoning_effort='minimal' (accepted: none, low, "
        "medium, high); applied 'low' by effort_fallback='nearest'",
        "model 'glm-5.3' does not accept reasoning_effort='medium' (accepted: low, high, max); "
        "applied 'low' by effort_fallback='nearest'",
    ]
    cheapest = re.fullmatch(CHAT_ROWS[5][6], chat[5][8])
    assert cheapest is not None
    assert notes[cheapest[1]] == (
        "model 'glm-5.3' cannot switch reasoning off (accepted: low, high, max), so "
        "reasoning_effort='none' was not sent; applied 'low', its cheapest tier, by "
        "effort_fallback='nearest' ('error' refuses instead)"
    )

    skipped = sorted({c.provider for c in DEMO_CALLS if not has_transport(c.provider)})
    for provider in skipped:
        assert f"skipped {provider}: no transport in this build" in out.splitlines()
    assert out.splitlines()[-1] == f"{len(running)} calls, each ended as expected"
    # The "none" row went out at the model's cheapest tier; the tool row made two.
    for provider, requests in {
        "openai": 4,
        "glm": 2,
        "deepseek": 3,
        "openrouter": 1,
        "qwen": 1,
        "kimi": 1,
    }.items():
        assert sim.stats.by_provider[provider] == requests, provider


def test_demo_starts_its_own_simulator() -> None:
    result = run_demo()
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert re.fullmatch(r"simulator at http://127\.0\.0\.1:\d+ \(started for this demo\)", first)
    assert result.stdout.splitlines()[-1].endswith("calls, each ended as expected")
