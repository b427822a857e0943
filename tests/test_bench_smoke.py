"""A tiny run of the benchmark suite: every scenario, the clients the dev extra installs.

No timing is asserted (the machine may be busy); what is checked is that the harness ran
every measurement end to end and wrote every figure, table and chart: exact call and delta
counts, no errors, a ratio for every target it could measure, and PNG files (the tier chart
of ``--chart`` with the exact reasoning tokens and dollars of its calls).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from tests.conftest import ROOT

CLIENTS = ("raw-httpx", "polythink-bare-httpx", "polythink-full-httpx", "polythink-full-aiohttp")
PNG = b"\x89PNG\r\n\x1a\n"


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, str]:
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--smoke",
            "--quiet",
            "--clients",
            ",".join(CLIENTS),
            "--out",
            str(out),
            "--chart",
            str(out / "tiers.png"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "smoke.json").read_text()), out, done.stdout


def test_load_figures_for_every_client_and_concurrency(
    run: tuple[dict[str, Any], Path, str],
) -> None:
    results, _, _ = run
    load = results["scenarios"]["load"]
    assert load["errors"] == {}
    # The Anthropic Messages wire runs raw httpx and polythink too (the anthropic SDK's floor).
    assert set(load["clients"]) == {
        *CLIENTS,
        "raw-httpx@anthropic",
        "polythink-full-aiohttp@anthropic",
    }
    n = results["scale"]["load_n"]
    for data in load["clients"].values():
        assert data["peak_rss_kib"] > 0
        for level in ("1", "64"):
            figures = data[level]
            assert figures["n"] == n
            assert figures["errors"] == 0
            assert figures["cpu_per_request"] > 0
            assert figures["rps"] > 0
            assert 0 < figures["p50"] <= figures["p99"]


def test_every_stream_carries_exactly_200_deltas(run: tuple[dict[str, Any], Path, str]) -> None:
    results, _, _ = run
    stream = results["scenarios"]["stream"]
    assert stream["errors"] == {}
    n = results["scale"]["stream_n"]
    assert set(stream["clients"]) == set(CLIENTS)
    for data in stream["clients"].values():
        assert data["deltas_per_stream"] == 200
        assert data["complete_streams"] == n
        assert data["errors"] == 0
        assert data["cpu_per_delta"] > 0
        assert 0 < data["ttft_p50"] <= data["ttft_p99"]


def test_memory_stream_delivers_every_word(run: tuple[dict[str, Any], Path, str]) -> None:
    results, _, _ = run
    memory = results["scenarios"]["memory"]
    words = results["scale"]["memory_words"]
    assert memory["errors"] == {}
    assert set(memory["clients"]) == {"raw-httpx", "polythink-full-aiohttp"}
    deltas = {data["deltas"] for data in memory["clients"].values()}
    # The same stream for both: the answer words plus the reasoning deltas before them.
    assert len(deltas) == 1
    assert deltas.pop() > words
    for data in memory["clients"].values():
        assert data["rss_growth_kib"] >= 0


def test_layers_of_this_build_are_measured_or_named_as_missing(
    run: tuple[dict[str, Any], Path, str],
) -> None:
    results, _, _ = run
    scenarios = results["scenarios"]
    cache = scenarios["cache"]
    if _has("polythink.middleware.cache"):
        data = cache["clients"]["polythink-full-aiohttp"]
        assert data["hits_served"] == data["n"] == results["scale"]["cache_n"]
        assert data["hit_p50"] > 0
        assert data["round_trip_p50"] > 0
    else:
        assert "no cache layer" in cache["skipped"]["polythink-full-aiohttp"]
    faults = scenarios["faults"]
    fault_clients = {"raw-httpx", "polythink-full-httpx", "polythink-full-aiohttp"}
    if _has("polythink.simulator.faults"):
        assert set(faults["clients"]) == fault_clients
        for data in faults["clients"].values():
            assert data["clean_success_rate"] == 1.0
            assert sum(data["faults_injected"].values()) > 0
    else:
        assert set(faults["skipped"]) == fault_clients
        assert all("no fault injection" in why for why in faults["skipped"].values())
    limits = scenarios["ratelimit"]
    for client in ("polythink-full-httpx", "polythink-full-aiohttp"):
        if _has("polythink.middleware.ratelimit"):
            data = limits["clients"][client]
            assert data["errors"] == 0
            assert data["upstream"] == data["n"] == data["burst"] + data["steady"]
            assert data["burst"] == results["scale"]["ratelimit_rpm"]
        else:
            assert "no rate-limit layer" in limits["skipped"][client]
    user_layer = scenarios["layers"]["user_layer"]
    chains = ["none", "passthrough", "noop-unchecked", "user-noop", "user-inherited"]
    assert (user_layer["calls"], user_layer["events"]) == (
        results["scale"]["user_layer_calls"],
        100,
    )
    assert list(user_layer["per_call"]) == list(user_layer["per_event"]) == chains
    assert all(seconds > 0 for seconds in user_layer["per_call"].values())
    assert list(user_layer["added_per_call"]) == chains[1:]


def test_conversation_sizes_and_agent_turns_for_every_client(
    run: tuple[dict[str, Any], Path, str],
) -> None:
    results, _, _ = run
    scenario = results["scenarios"]["conversation"]
    assert scenario["errors"] == {}
    # The clients of this run that the scenario compares.
    assert set(scenario["clients"]) == {"raw-httpx", "polythink-full-aiohttp"}
    scale = results["scale"]
    sizes = [str(s) for s in scale["conversation_sizes"]]
    for data in scenario["clients"].values():
        assert list(data["sizes"]) == sizes
        for size, calls in zip(sizes, scale["conversation_calls"], strict=True):
            figures = data["sizes"][size]
            assert figures["n"] == calls
            assert figures["cpu_per_call"] > 0
            assert figures["peak_rss_kib"] > 0
        bodies = [data["sizes"][s]["body_bytes"] for s in sizes]
        assert bodies == sorted(bodies)
        assert bodies[0] < bodies[-1]
        agent = data["agent"]
        assert agent["start"] == scale["agent_start"]
        assert len(agent["cpu_per_turn"]) == agent["turns"] == scale["agent_turns"]
        assert all(cpu > 0 for cpu in agent["cpu_per_turn"])
    names = {t["target"] for t in results["targets"]}
    for size in sizes:
        assert f"polythink-full-aiohttp CPU/call with {size} messages ≤ 1.25× raw httpx" in names


def test_import_times_and_targets(run: tuple[dict[str, Any], Path, str]) -> None:
    results, _, _ = run
    seconds = results["scenarios"]["import"]["seconds"]
    assert {"httpx", "polythink"} <= set(seconds)
    names = [t["target"] for t in results["targets"]]
    assert len(names) == len(set(names))
    measured = {t["target"]: t for t in results["targets"] if t["measured"] is not None}
    for expected in (
        "polythink-full-httpx CPU/request at concurrency 1 ≤ 1.25× raw httpx",
        "polythink-bare-httpx CPU/request at concurrency 64 ≤ 1.1× raw httpx",
        "polythink-full-httpx p99 ≤ 3× p50 at concurrency 64",
        "polythink-full-httpx streaming CPU/chunk ≤ 1.2× raw SSE floor",
        "import polythink ≤ 1.5× import httpx",
        "one no-op user layer CPU/call ≤ 2× the built-in Passthrough's (in-process)",
    ):
        assert isinstance(measured[expected]["met"], bool)
    for target in results["targets"]:
        if target["measured"] is None:
            assert target["met"] is None
            assert target["note"]


def test_tables_and_charts_are_written(run: tuple[dict[str, Any], Path, str]) -> None:
    results, out, stdout = run
    for title in (
        "One user layer, in-process",
        "Non-streaming calls",
        "Conversation size",
        "Agent loop",
        "Streaming",
        "Memory",
        "Import time",
        "Targets",
    ):
        assert title in stdout
    expected = {f"smoke-{name}.png" for name in ("load-cpu", "load-latency", "stream-cpu")}
    expected |= {"smoke-memory.png", "smoke-import.png"}
    expected |= {"smoke-conversation.png", "smoke-agent.png"}
    assert {Path(p).name for p in results["charts"]} == expected
    for name in expected:
        assert (out / name).read_bytes()[:8] == PNG
    machine = results["machine"]
    assert machine["cores"] >= 1
    assert machine["python"] == ".".join(map(str, sys.version_info[:3]))


# Reasoning tokens the simulator spends at each applied tier (simulator/behaviour.py).
SIM_REASONING = {"none": 0, "minimal": 12, "low": 40, "medium": 120, "high": 320, "xhigh": 640}
SIM_REASONING |= {"max": 1024, "auto": 120}


def test_the_tier_chart_shows_each_called_model_at_every_tier(
    run: tuple[dict[str, Any], Path, str],
) -> None:
    results, out, stdout = run
    chart = results["tier_chart"]
    assert chart["path"] == str(out / "tiers.png")
    assert f"tier chart: {out / 'tiers.png'}" in stdout
    data = (out / "tiers.png").read_bytes()
    assert data[:8] == PNG
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (1000, 700)
    assert chart["refused"] == []
    # The models the run's workloads called, each asked the 7 tiers and auto once.
    called = {(w["provider"], w["model"]) for w in results["workloads"].values()}
    assert called == {
        ("openai", "gpt-5.5"),
        ("anthropic", "claude-haiku-4-5"),
        ("deepseek", "deepseek-v4-pro"),
    }
    calls = chart["calls"]
    assert len(calls) == 3 * 8
    applied = {(c["model"], c["requested"]): c["applied"] for c in calls}
    # gpt-5.5 takes none..xhigh: minimal and max go to the nearest tier.
    assert [applied["gpt-5.5", t] for t in ("minimal", "max", "auto")] == ["low", "xhigh", "auto"]
    assert [applied["claude-haiku-4-5", t] for t in ("minimal", "max")] == ["minimal", "max"]
    for call in calls:
        assert call["reasoning_tokens"] == SIM_REASONING[call["applied"]], call
        # The answer's 12 text tokens plus the reasoning ones.
        assert call["output_tokens"] == call["reasoning_tokens"] + 12, call
        if call["provider"] == "deepseek":
            # DeepSeek's price depends on the time of day: only that it is priced.
            assert call["cost_usd"] > 0, call
            continue
        usage = genai_prices.Usage(
            input_tokens=call["input_tokens"],
            output_tokens=call["output_tokens"],
            output_reasoning_tokens=call["reasoning_tokens"],
        )
        table = genai_prices.calc_price(usage, call["model"], provider_id=call["provider"])
        assert call["cost_usd"] == float(table.total_price), call


def test_the_prefix_cache_scenario_runs_every_placement(tmp_path: Path) -> None:
    from benchmarks import prefix_cache

    out = tmp_path / "prefix_cache.json"
    prefix_cache.main(["--turns", "3", "--out", str(out)])
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == len(prefix_cache.RUNS)
    stopped = {(r["model"], r["placement"], r["label"]): r["stopped"] for r in runs}
    # The old placement is refused at the second call where the prefix check is enforced.
    assert stopped[("claude-fable-5-2", "system", "before")] == "call 2: ThinkingBindingError (400)"
    assert stopped[("claude-opus-5-5", "system", "before")] == "call 2: ThinkingBindingError (400)"
    finished = [r for r in runs if r["stopped"] is None]
    assert all(r["calls"] == 3 for r in finished)
    # Before, nothing is read from the cache; after, the second and third calls read the first.
    for r in finished:
        assert (r["cache_read_tokens"] == 0) == r["label"].startswith("before"), r
