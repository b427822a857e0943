"""The capability store seen from the command line: resolve reads it as the client does,
imported models without reasoning control, levels of always-on models, narrow listings and
the context-window notice of should_compact."""

from __future__ import annotations

import datetime
import json
import logging
import os
from pathlib import Path

import httpx
import pytest
import respx

from polythink import Client, Source, should_compact
from polythink import conversation as conversation_module
from polythink.capability_store import CapabilityStore, Levels
from polythink.cli import main as cli
from polythink.errors import ThinkingUnsupportedError
from polythink.reasoning import Capability, get_capability, openrouter_without_reasoning
from polythink.types import Effort

# A small /api/v1/models document written from OpenRouter's field descriptions (OR-DOC,
# 2026-10-05): reasoning.supported_efforts highest first, mandatory = cannot switch off;
# supported_parameters lists the request parameters the model takes.
CATALOGUE = {
    "data": [
        {
            "id": "acme/thinker-1",
            "supported_parameters": ["reasoning", "include_reasoning", "max_tokens"],
            "reasoning": {
                "supported_efforts": ["high", "medium", "low"],
                "mandatory": True,
                "default_effort": "medium",
            },
        },
        {
            "id": "acme/plain-1",
            "context_length": 32768,
            "supported_parameters": ["max_tokens", "temperature", "tools"],
        },
        # Shipped as documented: the registry wins over the catalogue.
        {"id": "openai/gpt-5.5", "supported_parameters": ["max_tokens", "tools"]},
        # No supported_parameters at all: nothing is known, it is not imported.
        {"id": "acme/bare-1"},
    ]
}
KEY = "sk-or-test-0000000000000000"
OPENROUTER_URL = "https://openrouter.ai/api/v1/chat/completions"


def _catalogue(tmp_path: Path) -> Path:
    path = tmp_path / "or-models.json"
    path.write_text(json.dumps(CATALOGUE))
    stamp = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def _imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    store = tmp_path / "caps.json"
    source = _catalogue(tmp_path)
    assert cli(["models", "--store", str(store), "import", "openrouter", str(source)]) == 0
    assert capsys.readouterr().out == f"imported 3 models from {source} into {store}\n"
    return store


def _answer() -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "gen-1",
            "object": "chat.completion",
            "model": "acme/plain-1",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        },
    )


# ------------------------------------------------------------------------ resolve + store

EVIDENCE = "imported: OpenRouter /models document or-models.json (file dated 2026-11-30)"


@pytest.mark.anyio
async def test_resolve_reads_the_store_and_refuses_none_as_the_client_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _imported(tmp_path, capsys)
    argv = ["resolve", "--provider", "openrouter", "--model", "acme/thinker-1"]
    assert cli([*argv, "--effort", "none", "--policy", "error", "--store", str(store)]) == 1
    captured = capsys.readouterr()
    message = (
        "model 'acme/thinker-1' cannot switch reasoning off, so reasoning_effort='none' cannot "
        "be satisfied (effort_fallback='error'; 'nearest' applies the cheapest tier); its "
        "cheapest tier is 'low': ask for reasoning_effort='low', or use a model that can switch "
        f"off (accepted: low, medium, high; evidence: {EVIDENCE})"
    )
    assert (captured.out, captured.err) == (
        "",
        f"polythink resolve: ThinkingUnsupportedError: {message}\n",
    )
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(OPENROUTER_URL).mock(return_value=_answer())
        strict = Source("openrouter", "acme/thinker-1", api_key=KEY, effort_fallback="error")
        async with Client([strict], capabilities_store=store) as client:
            with pytest.raises(ThinkingUnsupportedError) as raised:
                await client.complete([{"role": "user", "content": "hi"}], reasoning_effort="none")
        assert route.call_count == 0
    assert raised.value.message == message
    # xhigh maps to the imported top tier, as the client maps it.
    assert cli([*argv, "--effort", "xhigh", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "requested_effort": "xhigh",
        "applied_effort": "high",
        "payload": {"reasoning": {"effort": "high", "enabled": True}},
        "warnings": [
            "model 'acme/thinker-1' does not accept reasoning_effort='xhigh' (accepted: low, "
            "medium, high); applied 'high' by effort_fallback='nearest'"
        ],
    }


def test_resolve_uses_the_default_store_and_what_was_learned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "learned.json"
    CapabilityStore(path).observe(
        "openai", "gpt-5.5", Capability("gpt-5.5", ("low", "high")), "observed: test 400"
    )
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", str(path))
    argv = ["resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "xhigh"]
    assert cli([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "requested_effort": "xhigh",
        "applied_effort": "high",
        "payload": {"reasoning_effort": "high"},
        "warnings": [
            "model 'gpt-5.5' does not accept reasoning_effort='xhigh' (accepted: low, high); "
            "applied 'high' by effort_fallback='nearest'"
        ],
    }
    # On another provider the observation does not apply: the shipped entry takes xhigh.
    assert (
        cli(["resolve", "--provider", "openrouter", "--model", "gpt-5.5", "--effort", "xhigh"]) == 0
    )
    assert capsys.readouterr().out == (
        "requested  xhigh\n"
        "applied    xhigh\n"
        'payload    {"reasoning": {"effort": "xhigh", "enabled": true}}\n'
    )


# ------------------------------------------------------ imported models without reasoning


@pytest.mark.anyio
async def test_import_records_models_without_reasoning_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert openrouter_without_reasoning(CATALOGUE) == ["acme/plain-1", "openai/gpt-5.5"]
    store = _imported(tmp_path, capsys)
    assert cli(["models", "--store", str(store), "--levels", "acme/plain-1"]) == 0
    assert capsys.readouterr().out == "acme/plain-1: no reasoning control (imported)\n"
    assert cli(["models", "--store", str(store), "--levels", "acme/bare-1"]) == 0
    assert capsys.readouterr().out == (
        "acme/bare-1: none low medium high (default medium; unknown)\n"
    )
    assert cli(["models", "--store", str(store), "--levels", "gpt-5.5"]) == 0
    assert capsys.readouterr().out == (
        "gpt-5.5: none low medium high xhigh (default medium; documented)\n"
    )
    known = CapabilityStore(store).lookup("openrouter", "acme/plain-1")
    assert (known.capability, known.origin, known.takes_parameter, known.evidence) == (
        None,
        "imported",
        False,
        EVIDENCE,
    )
    argv = ["resolve", "--provider", "openrouter", "--model", "acme/plain-1", "--effort", "high"]
    assert cli([*argv, "--store", str(store), "--json"]) == 0
    note = (
        "model 'acme/plain-1' takes no reasoning parameter on openrouter (imported evidence); "
        "sent none for reasoning_effort='high', so the model reasons (or not) by its own default"
    )
    assert json.loads(capsys.readouterr().out) == {
        "requested_effort": "high",
        "applied_effort": None,
        "payload": {},
        "warnings": [note],
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENROUTER_URL).mock(return_value=_answer())
        async with Client(
            [Source("openrouter", "acme/plain-1", api_key=KEY)], capabilities_store=store
        ) as client:
            response = await client.complete(
                [{"role": "user", "content": "hi"}], reasoning_effort="high"
            )
        body = json.loads(route.calls[0].request.content)
    assert "reasoning" not in body
    assert note in response.warnings


def test_an_imported_plain_model_ranks_over_an_inferred_entry(tmp_path: Path) -> None:
    inferred = get_capability("gpt-oss-120b")
    assert inferred is not None
    assert inferred.evidence.lower().startswith("inferred")
    store = CapabilityStore(tmp_path / "caps.json")
    assert store.add_imported_without_reasoning(["openai/gpt-oss-120b"], "imported: t") == 1
    assert store.levels("gpt-oss-120b", "groq") == Levels((), None, "imported")


# ----------------------------------------------------------------- levels of fixed models


def test_levels_offer_nothing_for_models_that_always_reason_without_tiers() -> None:
    store = CapabilityStore(None)
    assert store.levels("grok-4", "xai") == Levels((), None, "documented")
    assert store.levels("grok-4-0709") == Levels((), None, "documented")
    assert store.levels("grok-4-fast-reasoning") == Levels((), None, "documented")
    # Always on with one strength: that tier is offered (gpt-5-pro only takes high).
    assert store.levels("gpt-5-pro") == Levels((Effort.HIGH,), Effort.HIGH, "documented")
    assert store.levels("acme/toggle-x") == Levels(
        (Effort.NONE, Effort.LOW, Effort.MEDIUM, Effort.HIGH), Effort.MEDIUM, "unknown"
    )


def test_models_levels_grok_4_prints_no_reasoning_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "caps.json")
    assert cli(["models", "--store", store, "--levels", "grok-4"]) == 0
    assert capsys.readouterr().out == "grok-4: no reasoning control (documented)\n"
    assert cli(["models", "--store", store, "--levels", "grok-4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "model": "grok-4",
        "levels": [],
        "default": None,
        "origin": "documented",
    }


# ------------------------------------------------------------------------ narrow listings


def _listing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: int, *argv: str
) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    assert cli(["models", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_models_fits_80_columns_by_wrapping_tier_lists(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = _listing(capsys, monkeypatch, 250)
    assert _listing(capsys, monkeypatch, 120) == wide
    assert max(len(line) for line in wide) > 80
    narrow = _listing(capsys, monkeypatch, 80)
    assert max(len(line) for line in narrow) <= 80
    start = narrow[0].index("tiers")
    assert narrow[0].split() == ["provider", "model", "tiers", "default"]
    at = next(i for i, line in enumerate(narrow) if line.split()[1:2] == ["claude-3-7-sonnet"])
    first, rest = narrow[at], narrow[at + 1]
    assert first[:start].split() == ["anthropic", "claude-3-7-sonnet"]
    assert rest[:start] == " " * start
    assert first.split()[-1] == "none"
    tiers = first[start:].split()[:-1] + rest.split()
    assert tiers == ["none", "minimal", "low", "medium", "high", "xhigh", "max"]
    # Every model still starts its own line, in the same order.
    assert [line.split()[:2] for line in narrow if not line.startswith(" ")] == [
        line.split()[:2] for line in wide
    ]


def test_models_evidence_prints_one_block_per_model_where_the_table_would_cut(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _listing(capsys, monkeypatch, 80, "--evidence")
    assert max(len(line) for line in lines) <= 80
    at = lines.index("gemini-2.5-pro (gemini)")
    assert lines[at + 1 : at + 6] == [
        "  tiers       minimal low medium high xhigh max",
        "  default     auto",
        "  budget      128-32768",
        "  max output  65536",
        "  origin      documented",
    ]
    assert lines[at + 6].startswith("  evidence    documented: GEM-DOC-thinking budget table")
    evidence = [lines[at + 6][14:]]
    for line in lines[at + 7 :]:
        if not line.startswith(" " * 14):
            break
        evidence.append(line[14:])
    cap = get_capability("gemini-2.5-pro")
    assert cap is not None
    # Wrapped between words; a URL longer than the line is cut into pieces.
    assert "".join(evidence).replace(" ", "") == cap.evidence.replace(" ", "")
    assert "gemini-2.5-pro (gemini)" in _listing(capsys, monkeypatch, 120, "--evidence")
    wide = _listing(capsys, monkeypatch, 250, "--evidence")
    assert any(line.startswith("│ gemini-2.5-pro ") for line in wide)


# --------------------------------------------------------------- context-window notices


def test_should_compact_logs_once_per_model_without_a_window(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conversation_module, "_windowless_reported", set())
    caplog.set_level(logging.INFO, logger="polythink.conversation")
    assert should_compact(10**6, model="gpt-5.5") is False
    assert should_compact(10**6, model="gpt-5.5") is False
    assert should_compact(10**6, model="gpt-5.5", context_window=400_000) is True
    assert should_compact(10**6, model="gpt-5") is True
    assert should_compact(10**6, model="mystery-9") is False
    assert should_compact(10**6, model="mystery-9") is False
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "polythink.conversation",
            "WARNING",
            "should_compact: model 'gpt-5.5' has no context_window, so it never says to "
            "compact this model's conversations (and context-window failover cannot act on "
            "it); pass context_window= in tokens, or register a Capability with one",
        ),
        (
            "polythink.conversation",
            "WARNING",
            "should_compact: model 'mystery-9' is not in the capability registry, so it never "
            "says to compact this model's conversations (and context-window failover cannot "
            "act on it); pass context_window= in tokens, or register a Capability with one",
        ),
    ]
