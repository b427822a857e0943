"""The ``polythink`` command line: resolve, models, simulate, and bad arguments.

``main(argv)`` runs in-process; ``simulate`` runs as a subprocess so that Ctrl-C can be
sent to it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from polythink.capability_store import CapabilityStore
from polythink.cli import DEMO_CALLS, DemoCall, main
from polythink.cli.demo import _demo_source
from polythink.errors import ThinkingUnsupportedError
from polythink.providers import PROVIDERS
from polythink.reasoning import all_capabilities, resolve
from polythink.types import Effort

CONSOLE_SCRIPT = Path(sys.executable).parent / "polythink"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def resolve_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code, out, err = run(capsys, "resolve", *argv, "--json")
    assert err == ""
    return code, json.loads(out)


# --------------------------------------------------------------------------- resolve


def test_resolve_prints_applied_tier_and_fragment(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "resolve", "--provider", "glm", "--model", "glm-5.3", "--effort", "medium"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "requested  medium",
        "applied    low",
        'payload    {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}',
        "warning    model 'glm-5.3' does not accept reasoning_effort='medium' (accepted: low, "
        "high, max); applied 'low' by effort_fallback='nearest'",
    ]


def before_retirements(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read the registry on 2026-03-01, before the examples below were retired (resolve names
    a retired model in its warnings: tests/test_lifecycle.py)."""
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-03-01")


def test_resolve_prints_the_budget_of_budget_wires(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before_retirements(monkeypatch)
    code, out, _ = run(
        capsys,
        "resolve",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--effort",
        "high",
        "--max-tokens",
        "1000",
    )
    assert code == 0
    assert out.splitlines() == [
        "requested  high",
        "applied    high",
        'payload    {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 17384}',
        "budget     16384 tokens",
    ]


@pytest.mark.parametrize(
    ("provider", "model", "effort", "applied", "payload"),
    [
        # a model accepting low, high, max asked medium: nearest, ties to the cheaper side
        (
            "glm",
            "glm-5.3",
            "medium",
            "low",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
        ),
        ("openai", "gpt-5.1", "minimal", "low", {"reasoning_effort": "low"}),
        ("openai", "gpt-5.4", "xhigh", "xhigh", {"reasoning_effort": "xhigh"}),
        ("glm", "glm-5.3", "auto", "auto", {"thinking": {"type": "enabled"}}),
        ("deepseek", "deepseek-reasoner", "auto", "auto", {"thinking": {"type": "enabled"}}),
        ("openai", "gpt-5.5", "auto", "auto", {}),
        ("openai", "gpt-5.1", "off", "none", {"reasoning_effort": "none"}),
        (
            "anthropic",
            "claude-opus-4-6",
            "xhigh",
            "high",
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
        ),
        (
            "gemini",
            "gemini-3-pro-preview",
            "medium",
            "low",
            {
                "generationConfig": {
                    "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True}
                }
            },
        ),
    ],
)
def test_resolve_json_seed_scenarios(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    model: str,
    effort: str,
    applied: str,
    payload: dict[str, Any],
) -> None:
    before_retirements(monkeypatch)
    code, result = resolve_json(
        capsys, "--provider", provider, "--model", model, "--effort", effort
    )
    assert code == 0
    assert set(result) == {"requested_effort", "applied_effort", "payload", "warnings"}
    assert result["applied_effort"] == applied
    assert result["payload"] == payload
    mapped = result["requested_effort"] != applied
    assert len(result["warnings"]) == (1 if mapped else 0)


def test_resolve_json_reports_requested_tier_and_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, result = resolve_json(
        capsys, "--provider", "openai", "--model", "gpt-5.1", "--effort", "minimal"
    )
    assert code == 0
    assert result == {
        "requested_effort": "minimal",
        "applied_effort": "low",
        "payload": {"reasoning_effort": "low"},
        "warnings": [
            "model 'gpt-5.1' does not accept reasoning_effort='minimal' (accepted: none, low, "
            "medium, high); applied 'low' by effort_fallback='nearest'"
        ],
    }


EVERY_PROVIDER = {
    "openai": ("gpt-5.5", {"reasoning_effort": "high"}),
    "openai-responses": ("gpt-5.5", {"reasoning": {"effort": "high"}}),
    "openrouter-responses": ("openai/gpt-oss-20b", {"reasoning": {"effort": "high"}}),
    "anthropic": (
        "claude-opus-4-6",
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    ),
    "gemini": (
        "gemini-3-pro-preview",
        {
            "generationConfig": {
                "thinkingConfig": {"thinkingLevel": "high", "includeThoughts": True}
            }
        },
    ),
    "openrouter": (
        "anthropic/claude-sonnet-4.5",
        {"reasoning": {"effort": "high", "enabled": True}},
    ),
    "deepseek": ("deepseek-v4-pro", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
    "qwen": ("qwen3.7-plus", {"enable_thinking": True, "thinking_budget": 16384}),
    "glm": ("glm-5.3", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
    "kimi": ("kimi-k3", {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
    "minimax": ("MiniMax-M3", {"reasoning_effort": "high"}),
    "xai": ("grok-4.3", {"reasoning_effort": "high"}),
    "groq": ("gpt-oss-120b", {"reasoning_effort": "high"}),
    "mistral": ("mistral-small-latest", {"reasoning_effort": "high"}),
    "vllm": (
        "gpt-oss-120b",
        {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high"},
    ),
    "ollama": ("gpt-oss-20b", {"reasoning_effort": "high"}),
    "bedrock": (
        "us.anthropic.claude-opus-4-6-v1",
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    ),
    "bedrock-converse": (
        "openai.gpt-oss-120b-1:0",
        {"additionalModelRequestFields": {"reasoning_effort": "high"}},
    ),
    "vertex": (
        "gemini-3-pro-preview",
        {
            "generationConfig": {
                "thinkingConfig": {"thinkingLevel": "high", "includeThoughts": True}
            }
        },
    ),
    "vertex-anthropic": (
        "claude-opus-4-6@default",
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
    ),
    "azure": ("gpt-5.5", {"reasoning_effort": "high"}),
    "azure-responses": ("gpt-5.5", {"reasoning": {"effort": "high"}}),
}


def _deployment_warning(payload: dict[str, Any], wire: str) -> list[str]:
    # An Azure id is a deployment's name, which names no model (reasoning/ids.toml [azure]).
    return [
        f"model 'gpt-5.5' is not in the capability registry and matches no model family; sent "
        f"{payload} for reasoning_effort='high' by the {wire} wire without checking the tier "
        "(register it with "
        "polythink.register_capability once known)"
    ]


def test_every_provider_id_has_a_resolve_case() -> None:
    assert set(EVERY_PROVIDER) == set(PROVIDERS)


@pytest.mark.parametrize("provider", sorted(EVERY_PROVIDER))
def test_resolve_covers_every_provider(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    before_retirements(monkeypatch)
    model, payload = EVERY_PROVIDER[provider]
    code, result = resolve_json(
        capsys, "--provider", provider, "--model", model, "--effort", "high"
    )
    assert code == 0
    assert result == {
        "requested_effort": "high",
        "applied_effort": "high",
        "payload": payload,
        "warnings": _deployment_warning(payload, provider) if provider.startswith("azure") else [],
    }


def test_resolve_budget_wire_raises_the_output_ceiling(capsys: pytest.CaptureFixture[str]) -> None:
    code, result = resolve_json(
        capsys,
        "--provider",
        "gemini",
        "--model",
        "gemini-2.5-flash",
        "--effort",
        "low",
        "--max-tokens",
        "500",
    )
    assert code == 0
    assert result["payload"] == {
        "generationConfig": {
            "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
            "maxOutputTokens": 2548,
        }
    }


def test_resolve_unregistered_model_warns(capsys: pytest.CaptureFixture[str]) -> None:
    code, result = resolve_json(
        capsys, "--provider", "openai", "--model", "my-finetune", "--effort", "low"
    )
    assert code == 0
    assert result["applied_effort"] == "low"
    assert result["payload"] == {"reasoning_effort": "low"}
    assert result["warnings"] == [
        "model 'my-finetune' is not in the capability registry and matches no model family; "
        "sent {'reasoning_effort': 'low'} for reasoning_effort='low' by the openai wire without "
        "checking the tier (register it with polythink.register_capability once known)"
    ]


@pytest.mark.parametrize(("policy", "applied"), [("drop", "auto"), ("nearest", "low")])
def test_resolve_policy(capsys: pytest.CaptureFixture[str], policy: str, applied: str) -> None:
    code, result = resolve_json(
        capsys, "--provider", "glm", "--model", "glm-5.3", "--effort", "medium", "--policy", policy
    )
    assert code == 0
    assert result["applied_effort"] == applied


@pytest.mark.parametrize(
    ("provider", "model", "cheapest"),
    [("glm", "glm-5.3", "low"), ("deepseek", "deepseek-reasoner", "auto")],
)
def test_resolve_none_on_a_model_that_cannot_switch_off(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    model: str,
    cheapest: str,
) -> None:
    before_retirements(monkeypatch)
    code, result = resolve_json(
        capsys, "--provider", provider, "--model", model, "--effort", "none"
    )
    assert code == 0
    assert result["applied_effort"] == cheapest
    assert result["warnings"][0].startswith(
        f"model {model!r} cannot switch reasoning off (accepted: "
    )
    code, result = resolve_json(
        capsys, "--provider", provider, "--model", model, "--effort", "none", "--policy", "error"
    )
    assert code == 1
    assert list(result) == ["error"]
    assert set(result["error"]) == {"type", "message"}
    assert result["error"]["type"] == "ThinkingUnsupportedError"
    assert result["error"]["message"].startswith(
        f"model {model!r} cannot switch reasoning off, so reasoning_effort='none' cannot be "
        "satisfied (effort_fallback='error'; 'nearest' applies the cheapest tier); its "
        f"cheapest tier is {cheapest!r}: ask for reasoning_effort={cheapest!r}"
    )


def test_resolve_error_policy_lists_accepted_tiers(capsys: pytest.CaptureFixture[str]) -> None:
    code, result = resolve_json(
        capsys, "--provider", "glm", "--model", "glm-5.3", "--effort", "medium", "--policy", "error"
    )
    assert code == 1
    assert result == {
        "error": {
            "type": "ThinkingUnsupportedError",
            "message": "model 'glm-5.3' does not accept reasoning_effort='medium'; accepted "
            "tiers: low, high, max (effort_fallback='error'; 'nearest' maps to the nearest "
            "accepted tier)",
        }
    }


def test_resolve_human_error_exits_1_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys,
        "resolve",
        "--provider",
        "glm",
        "--model",
        "glm-5.3",
        "--effort",
        "none",
        "--policy",
        "error",
    )
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(
        "polythink resolve: ThinkingUnsupportedError: model 'glm-5.3' cannot switch reasoning "
        "off, so reasoning_effort='none' cannot be satisfied (effort_fallback='error'; "
        "'nearest' applies the cheapest tier); its cheapest tier is 'low'"
    )


# --------------------------------------------------------------------------- models


def test_models_json_lists_every_registered_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "models", "--json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [m["model"] for m in listed] == [c.model for c in all_capabilities()]
    assert {"gpt-5.5", "glm-5.3", "claude-opus-4-7", "deepseek-reasoner", "kimi-k3"} <= {
        m["model"] for m in listed
    }
    by_name = {m["model"]: m for m in listed}
    assert by_name["gpt-5.5"] == {
        "model": "gpt-5.5",
        "provider": "openai",
        "supported_efforts": ["none", "low", "medium", "high", "xhigh"],
        "default_effort": "medium",
        "budget_min": None,
        "budget_max": None,
        "max_output_tokens": 128000,
        "context_window": None,
        "evidence": by_name["gpt-5.5"]["evidence"],
        "aliases": [],
        "origin": "documented",
        "takes_parameter": True,
    }
    assert by_name["gpt-5.5"]["evidence"].startswith("documented: OAI-DOC-deploy")
    assert by_name["gemini-2.5-pro"]["budget_min"] == 128
    assert by_name["gemini-2.5-pro"]["budget_max"] == 32768
    assert by_name["gemini-3-pro-preview"]["aliases"] == ["gemini-3-pro"]


def test_models_table_lists_every_registered_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run(capsys, "models", "--evidence")
    assert code == 0
    first_cells = {line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")}
    assert {c.model for c in all_capabilities()} <= first_cells
    row = next(line for line in out.splitlines() if line.startswith("│ gemini-2.5-pro "))
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[:7] == [
        "gemini-2.5-pro",
        "gemini",
        "minimal low medium high xhigh max",
        "auto",
        "128-32768",
        "65536",
        "documented",
    ]
    assert cells[7].startswith("documented: GEM-DOC-thinking budget table")


def test_models_provider_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models", "--provider", "gemini", "--json")
    assert code == 0
    names = [m["model"] for m in json.loads(out)]
    assert names == [c.model for c in all_capabilities() if c.provider == "gemini"]
    assert "gemini-2.5-pro" in names
    assert {m["provider"] for m in json.loads(out)} == {"gemini"}


def test_models_openai_responses_lists_openai_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models", "--provider", "openai-responses", "--json")
    assert code == 0
    assert [m["model"] for m in json.loads(out)] == [c.model for c in all_capabilities("openai")]


def test_models_provider_without_entries(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "models", "--provider", "vllm")
    assert code == 0
    assert out == (
        "no models registered for provider 'vllm'; a model of another provider resolves by "
        "its name (polythink resolve --model M)\n"
    )


# --------------------------------------------------------------------------- bad arguments

RESOLVE_LOW = ["resolve", "--provider", "openai", "--model", "m", "--effort", "low"]
NEGATIVE_BUDGET = (
    "polythink resolve: error: argument --budget: expected a positive amount of US dollars per "
    "window such as 10/day (windows: minute, hour, day, month, UTC), got '-5/day'"
)
ACCEPTED_EFFORTS = (
    "none, minimal, low, medium, high, xhigh, max, auto (aliases: off, on, true, false)"
)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["frob"],
            "polythink: error: argument command: invalid choice: 'frob' (choose from 'demo', "
            "'resolve', 'models', 'simulate', 'serve', 'bench')",
        ),
        (
            [],
            "polythink: error: a command is required; accepted: demo, resolve, models, simulate, "
            "serve, bench",
        ),
        (
            ["resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "hgih"],
            f"polythink resolve: error: argument --effort: unknown reasoning effort 'hgih'; "
            f"accepted: {ACCEPTED_EFFORTS}",
        ),
        (
            ["resolve", "--provider", "bogus", "--model", "m", "--effort", "low"],
            "polythink resolve: error: argument --provider: invalid choice: 'bogus' (choose from "
            + ", ".join(repr(p) for p in PROVIDERS)
            + ")",
        ),
        (
            ["resolve", "--provider", "openai", "--model", "gpt-5.5"],
            "polythink resolve: error: the following arguments are required: --effort",
        ),
        (
            [
                "resolve",
                "--provider",
                "openai",
                "--model",
                "m",
                "--effort",
                "low",
                "--max-tokens",
                "0",
            ],
            "polythink resolve: error: argument --max-tokens: expected a positive whole number of "
            "tokens, got '0'",
        ),
        (
            ["resolve", "--provider", "openai", "--model", "m", "--effort", "low", "--policy", "x"],
            "polythink resolve: error: argument --policy: invalid choice: 'x' (choose from "
            "'nearest', 'error', 'drop')",
        ),
        (
            ["models", "--frob"],
            "polythink models: error: unrecognized arguments: --frob; accepted options: --help, "
            "--provider, --evidence, --json, --base-url, --store, --learned, --levels, "
            "--retired, --refresh, --stale, --older-than",
        ),
        (
            ["simulate", "--port", "70000"],
            "polythink simulate: error: argument --port: expected a port from 0 to 65535 "
            "(0 = any free port), got '70000'",
        ),
        (
            ["simulate", "--latency", "-1"],
            "polythink simulate: error: argument --latency: expected seconds as a number >= 0, "
            "got '-1'",
        ),
        (
            ["demo", "--base-url-root", "127.0.0.1:8787"],
            "polythink demo: error: argument --base-url-root: expected an http:// or https:// URL "
            "such as http://127.0.0.1:8787, got '127.0.0.1:8787'",
        ),
        (
            ["resolve", "--provider", "openai", "--model", " ", "--effort", "low"],
            "polythink resolve: error: argument --model: expected a model id such as gpt-5.5, "
            "got ' '",
        ),
        (
            ["models", "--levels", ""],
            "polythink models: error: argument --levels: expected a model id such as gpt-5.5, "
            "got ''",
        ),
        (
            ["models", "forget", ""],
            "polythink models forget: error: argument MODEL: expected a model id such as "
            "gpt-5.5, got ''",
        ),
        (
            ["bench", "--clients", "nonsense"],
            "polythink bench: error: unknown client 'nonsense'; accepted: anthropic, "
            "anthropic@anthropic, litellm, openai, polythink-bare-aiohttp, polythink-bare-httpx, "
            "polythink-client, polythink-client+budget, polythink-client+cache, "
            "polythink-client+limits, polythink-client+telemetry, polythink-client+telemetry+cost, "
            "polythink-client+user-layers, polythink-default, polythink-full-aiohttp, "
            "polythink-full-aiohttp@anthropic, polythink-full-httpx, raw-aiohttp, raw-httpx, "
            "raw-httpx@anthropic",
        ),
        (
            ["bench", "--scenarios", "nonsense"],
            "polythink bench: error: unknown scenario 'nonsense'; accepted: load, layers, "
            "conversation, stream, cache, faults, ratelimit, memory, import",
        ),
        (
            ["bench", "--scenarios", ","],
            "polythink bench: error: no scenario given; accepted: load, layers, conversation, "
            "stream, cache, faults, ratelimit, memory, import",
        ),
        (
            ["bench", "--clients", "openai", "--scenarios", "cache"],
            "polythink bench: error: none of the clients openai runs in the scenarios cache",
        ),
        (
            ["bench", "--frob"],
            "polythink bench: error: unrecognized arguments: --frob",
        ),
        (
            ["models", "--older-than", "30"],
            "polythink models: error: --older-than DAYS goes with --stale: polythink models "
            "--stale --older-than DAYS",
        ),
        (
            [*RESOLVE_LOW, "--budget", "-5/day"],
            NEGATIVE_BUDGET,
        ),
        (
            [*RESOLVE_LOW, "--budget=-5/day"],
            NEGATIVE_BUDGET,
        ),
        (
            ["simulate", "--host", "999.1.1.1", "--port", "0"],
            "polythink simulate: error: argument --host: cannot resolve '999.1.1.1' to an "
            "address (Name or service not known); give an IP address such as 127.0.0.1 or a "
            "host name",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out, err) == (2, "", line + "\n")


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "resolve", "--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: polythink resolve")
    assert "--max-tokens N" in out
    # The effort aliases are the ones an unknown effort's error lists.
    assert "auto (aliases: off, on, true, false)" in " ".join(out.split())
    assert ACCEPTED_EFFORTS.endswith("(aliases: off, on, true, false)")


# --------------------------------------------------------------------------- simulate


def test_simulate_serves_until_interrupted() -> None:
    assert CONSOLE_SCRIPT.exists(), f"console script missing: {CONSOLE_SCRIPT} (pip install -e .)"
    process = subprocess.Popen(
        [str(CONSOLE_SCRIPT), "simulate", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.fullmatch(
            r"polythink simulator listening on (http://127\.0\.0\.1:\d+); a provider's base URL "
            r"is \1/\{provider\}/v1 \(Ctrl-C stops\)\n",
            banner,
        )
        assert match, banner
        body = {
            "model": "gpt-5.5",
            "messages": [{"role": "user", "content": "hi"}],
            "reasoning_effort": "high",
        }
        response = httpx.post(f"{match[1]}/openai/v1/chat/completions", json=body, timeout=10)
        assert response.status_code == 200
        assert response.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 320
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, out, err) == (0, "", "")


def test_simulate_port_in_use_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run(capsys, "simulate", "--port", str(port))
    assert (code, out) == (1, "")
    assert err == f"polythink simulate: cannot listen on 127.0.0.1:{port}: Address already in use\n"


# --------------------------------------------------------------------------- demo data


@pytest.mark.parametrize("call", DEMO_CALLS, ids=lambda c: f"{c.provider}:{c.model}:{c.effort}")
def test_each_demo_row_expects_what_resolution_gives(call: DemoCall) -> None:
    # Rows of every protocol are checked here, also those whose transport is not built yet;
    # each resolved as its source is (a cloud source by the profile that serves its model,
    # an Azure deployment by the model it serves).
    source = _demo_source(call, "http://127.0.0.1:9")
    try:
        applied = resolve(
            call.effort,
            provider=source.profile,
            model=source.registry_model,
            capability=source.capability,
        ).applied_effort
    except ThinkingUnsupportedError:
        assert call.expect == "ThinkingUnsupportedError"
    else:
        assert applied is not None
        if call.mode == "budget":
            # It starts at the tier asked for and ends refused by its budget.
            assert (applied.value, call.expect) == (call.effort, "BudgetExceededError")
        else:
            assert applied.value == call.expect


def test_demo_rows_cover_mapping_streaming_tools_and_a_cache_hit() -> None:
    mapped = [c for c in DEMO_CALLS if c.expect != c.effort and c.mode != "budget"]
    assert ("gpt-5.5", "minimal", "low") in {(c.model, c.effort, c.expect) for c in mapped}
    assert ("glm-5.3", "medium", "low") in {(c.model, c.effort, c.expect) for c in mapped}
    # Models that always reason, asked none: their cheapest tier, never a refusal.
    assert ("gpt-6.1-sol", "none", "low") in {(c.model, c.effort, c.expect) for c in mapped}
    assert ("claude-sonnet-5-5", "none", "low") in {(c.model, c.effort, c.expect) for c in mapped}
    # Every call is answered; only the budget row is refused, by the budget, before sending.
    assert all(c.expect in {e.value for e in Effort} for c in DEMO_CALLS if c.mode != "budget")
    assert {c.mode for c in DEMO_CALLS} == {
        "complete",
        "stream",
        "tools",
        "cached",
        "budget",
        "conversation",
    }
    assert {c.provider for c in DEMO_CALLS} >= {"openai", "anthropic", "openai-responses", "gemini"}


def test_models_into_a_closed_pipe_ends_without_a_traceback(tmp_path: Path) -> None:
    # `polythink models | head -1`: the reader leaves after one line.
    process = subprocess.run(
        f"{sys.executable} -c 'import sys; from polythink.cli import main; "
        'sys.exit(main(["models"]))\' | head -1',
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "POLYTHINK_CAPABILITIES": "off"},
        check=False,
    )
    assert process.stdout.count("\n") == 1
    assert "Traceback" not in process.stderr
    assert "BrokenPipeError" not in process.stderr


def test_demo_chart_into_a_missing_folder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-folder" / "chart.png"
    assert main(["demo", "--chart", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == f"--chart: the folder {missing.parent} does not exist\n"


# --------------------------------------------------------------------------- resolve --budget


def test_resolve_under_a_budget_shows_the_tier_now_and_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys,
        "resolve",
        "--provider", "openai", "--model", "gpt-5.5", "--effort", "high", "--max-tokens", "4000",
        "--budget", "10/day", "--step-down-at", "0.8", "--spent", "8.9",
    )  # fmt: skip
    assert (code, err) == (0, "")
    lines = out.splitlines()
    # 89 % is past 0.8 + 0.2/3: two steps of gpt-5.5's medium, low, none; the ceiling that
    # holds the reasoning loses high's 16,384-token allowance less low's 2,048, down to
    # low's 2,048 + 1,024 for the answer.
    assert lines[:4] == [
        "requested  high",
        "applied    low",
        'payload    {"reasoning_effort": "low"}',
        "max_tokens 3072 (the output ceiling shrinks with the tier)",
    ]
    assert re.fullmatch(
        r"budget     'day' \(all\): \$8\.900000 of \$10 a day spent \(89\.0%\), steps down from "
        r"80%; resets \d{4}-\d\d-\d\dT00:00:00Z",
        lines[4],
    )
    assert re.fullmatch(r"worst case \$0\.\d{6} \(fits\)", lines[5])
    assert lines[6] == (
        "why        budget: 'day' is 89.0% spent (steps down from 80%): "
        "reasoning_effort='high' was sent as 'low' with max_tokens=3072"
    )


def test_resolve_under_a_budget_in_json_per_tag(capsys: pytest.CaptureFixture[str]) -> None:
    code, result = resolve_json(
        capsys,
        "--provider", "anthropic", "--model", "claude-opus-4-6", "--effort", "max",
        "--budget", "2/hour", "--step-down-at", "0.5", "--floor", "low", "--tag", "acme",
        "--spent", "1.5",
    )  # fmt: skip
    assert code == 0
    # claude-opus-4-6 accepts none low medium high max; the floor keeps none out: from max
    # the ladder is high, medium, low, and 75 % spent is the second of its three parts.
    assert result["applied_effort"] == "medium"
    assert result["payload"] == {
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "medium"},
    }
    assert result["step_down"] == {
        "requested": "max",
        "applied": "medium",
        "budget": "hour:tag=*",
        "spent": 0.75,
        "step_down_at": 0.5,
        "max_tokens": None,
        "service_tier": None,
        "flex_at": None,
    }
    assert result["service_tier"] is None
    (state,) = result["budgets"]
    assert {k: state[k] for k in ("budget", "scope", "window", "limit", "spent", "remaining")} == {
        "budget": "hour:tag=*",
        "scope": "acme",
        "window": "hour",
        "limit": 2.0,
        "spent": 1.5,
        "remaining": 0.5,
    }
    assert result["fits"] is True


def test_resolve_under_a_budget_past_flex_at(capsys: pytest.CaptureFixture[str]) -> None:
    code, result = resolve_json(
        capsys,
        "--provider", "openai", "--model", "gpt-5.5", "--effort", "high",
        "--budget", "10/day", "--step-down-at", "0.8", "--flex-at", "0.9", "--spent", "9.2",
    )  # fmt: skip
    assert code == 0
    assert (result["applied_effort"], result["service_tier"]) == ("none", "flex")
    step = result["step_down"]
    assert {k: step[k] for k in ("requested", "applied", "service_tier", "flex_at")} == {
        "requested": "high",
        "applied": "none",
        "service_tier": "flex",
        "flex_at": 0.9,
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget", "10/week"], "expected a positive amount of US dollars per window"),
        (["--budget", "10/day", "--step-down-at", "80"], "a fraction from 0 to below 1"),
        (["--spent", "3"], "give it with --budget USD/WINDOW"),
        (["--budget", "1/day", "--spent", "1", "--limits", "redis://x"], "not allowed with"),
    ],
)
def test_resolve_budget_options_are_checked(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(
        capsys, "resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "high", *argv
    )
    assert (code, out) == (2, "")
    assert message in err
