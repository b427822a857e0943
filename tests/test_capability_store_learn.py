"""The user capability store: persistence, precedence, OpenRouter import, levels, suspicions."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.capability_store import SUSPECT_AFTER, CapabilityStore, Levels, open_store
from polythink.cli import main as cli
from polythink.reasoning import Capability, capabilities_from_openrouter
from polythink.types import Effort

N, MI, L, M, H, X, MAX, A = (
    Effort.NONE,
    Effort.MINIMAL,
    Effort.LOW,
    Effort.MEDIUM,
    Effort.HIGH,
    Effort.XHIGH,
    Effort.MAX,
    Effort.AUTO,
)

# A small /api/v1/models document written from OpenRouter's field descriptions (OR-DOC,
# 2026-10-05): supported_efforts highest first, null = no allowlist, mandatory = cannot switch
# off, default_effort; a model without a reasoning object does not reason.
OPENROUTER = {
    "data": [
        {
            "id": "acme/reasoner-2",
            "name": "Acme: Reasoner 2",
            "context_length": 200000,
            "reasoning": {
                "supported_efforts": ["xhigh", "high", "medium", "low"],
                "mandatory": True,
                "default_effort": "high",
            },
        },
        {
            "id": "acme/hybrid-1",
            "name": "Acme: Hybrid 1",
            "reasoning": {
                "supported_efforts": ["high", "low", "minimal"],
                "mandatory": False,
                "default_effort": "none",
            },
        },
        {
            "id": "acme/open-gate",
            "name": "Acme: Open Gate",
            "reasoning": {"supported_efforts": None, "mandatory": False, "default_effort": None},
        },
        {"id": "acme/toggle", "name": "Acme: Toggle", "reasoning": {"mandatory": False}},
        {"id": "openai/gpt-5.5", "reasoning": {"supported_efforts": ["low"], "mandatory": True}},
        {"id": "acme/chat-3", "name": "Acme: Chat 3", "context_length": 128000},
    ]
}


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "openrouter-models.json"
    path.write_text(json.dumps(OPENROUTER))
    stamp = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def test_learn_openrouter_import_orders_tiers_and_reads_mandatory(tmp_path: Path) -> None:
    caps = {c.model: c for c in capabilities_from_openrouter(OPENROUTER, evidence="e")}
    assert sorted(caps) == [
        "acme/hybrid-1",
        "acme/open-gate",
        "acme/reasoner-2",
        "acme/toggle",
        "openai/gpt-5.5",
    ]
    assert (caps["acme/reasoner-2"].supported_efforts, caps["acme/reasoner-2"].default_effort) == (
        (L, M, H, X),
        H,
    )
    assert (caps["acme/hybrid-1"].supported_efforts, caps["acme/hybrid-1"].default_effort) == (
        (N, MI, L, H),
        N,
    )
    assert caps["acme/open-gate"].supported_efforts == (N, MI, L, M, H, X, MAX)
    assert caps["acme/toggle"].supported_efforts == (N, A)
    assert {c.evidence for c in caps.values()} == {"e"}


def test_learn_import_stores_evidence_with_file_name_and_date(tmp_path: Path) -> None:
    store = CapabilityStore(tmp_path / "store.json", today=lambda: "2026-12-01")
    assert store.import_openrouter(_file(tmp_path)) == 5
    evidence = (
        "imported: OpenRouter /models document openrouter-models.json (file dated 2026-11-30)"
    )
    known = store.lookup("openrouter", "acme/reasoner-2")
    assert (known.origin, known.evidence) == ("imported", evidence)
    assert known.capability is not None
    assert known.capability.supported_efforts == (L, M, H, X)
    again = CapabilityStore(tmp_path / "store.json")
    assert (
        again.lookup("openrouter", "acme/hybrid-1").capability
        == store.lookup("openrouter", "acme/hybrid-1").capability
    )
    assert [e.model for e in again.entries("imported")] == [
        "acme/hybrid-1",
        "acme/open-gate",
        "acme/reasoner-2",
        "acme/toggle",
        "openai/gpt-5.5",
    ]


def test_learn_precedence_observed_documented_imported_inferred(tmp_path: Path) -> None:
    store = CapabilityStore(tmp_path / "store.json")
    store.add_imported(
        [
            Capability("openai/gpt-5.5", ("low",)),
            Capability("openai/gpt-oss-120b", ("high",)),
        ],
        "imported: test",
    )
    documented = store.lookup("openai", "gpt-5.5")
    assert documented.origin == "documented"
    assert documented.capability is not None
    assert documented.capability.supported_efforts == (N, L, M, H, X)
    over_inferred = store.lookup("groq", "gpt-oss-120b")
    assert over_inferred.origin == "imported"
    assert over_inferred.capability is not None
    assert over_inferred.capability.supported_efforts == (H,)
    store.observe("openai", "gpt-5.5", Capability("gpt-5.5", ("low", "high")), "observed: test")
    observed = store.lookup("openai", "gpt-5.5")
    assert (observed.origin, observed.evidence) == ("observed", "observed: test")
    assert store.lookup("openrouter", "gpt-5.5").origin == "documented"
    assert store.lookup("openai", "mystery-9").origin == "unknown"


def test_learn_store_forget_and_a_new_process_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "store.json"
    store = CapabilityStore(path, today=lambda: "2026-12-01")
    store.observe("xai", "grok-4.3", None, "observed 2026-12-01 on xai: no parameter")
    store.observe("openai", "gpt-5.5", Capability("gpt-5.5", ("low",)), "observed: x")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    fresh = CapabilityStore(path)
    grok = fresh.lookup("xai", "grok-4.3")
    assert (grok.origin, grok.takes_parameter, grok.capability) == ("observed", False, None)
    assert fresh.forget("xai/grok-4.3") == 1
    assert CapabilityStore(path).lookup("xai", "grok-4.3").origin == "documented"
    assert CapabilityStore(path).lookup("openai", "gpt-5.5").origin == "observed"
    assert fresh.forget("grok-4.3") == 0


def test_learn_store_rejects_a_file_it_did_not_write(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match=r"capability store .*store.json cannot be read"):
        CapabilityStore(path)


def test_learn_default_store_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", str(tmp_path / "mine.json"))
    assert open_store(None).path == tmp_path / "mine.json"
    assert open_store(None) is open_store(tmp_path / "mine.json")
    monkeypatch.delenv("POLYTHINK_CAPABILITIES")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert open_store(None).path == tmp_path / "xdg" / "polythink" / "capabilities.json"
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    assert open_store(None).path is None
    assert open_store(False).path is None
    with pytest.raises(ValueError, match="capabilities_store must be None"):
        open_store(3)  # type: ignore[arg-type]


def test_learn_levels_for_selectors(tmp_path: Path) -> None:
    store = CapabilityStore(None)
    assert store.levels("gpt-5-pro") == Levels((H,), H, "documented")
    assert store.levels("gpt-5.1") == Levels((N, L, M, H), N, "documented")
    assert store.levels("mystery-9") == Levels((N, L, M, H), M, "unknown")
    assert store.levels("gpt-4o") == Levels((), None, "documented")
    store.observe("xai", "grok-4.3", None, "observed: no parameter")
    assert store.levels("grok-4.3", "xai") == Levels((), None, "observed")
    store.add_imported(capabilities_from_openrouter(OPENROUTER), "imported: test")
    # No declared default: the middle strength (the cheaper of two middles).
    assert store.levels("acme/open-gate") == Levels((N, MI, L, M, H, X, MAX), M, "imported")
    assert store.levels("acme/reasoner-2") == Levels((L, M, H, X), H, "imported")
    assert store.levels("acme/toggle") == Levels((N, A), A, "imported")


def test_learn_cli_import_levels_forget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store.json"
    source = _file(tmp_path)
    assert cli(["models", "--store", str(store), "import", "openrouter", str(source)]) == 0
    assert capsys.readouterr().out == f"imported 5 models from {source} into {store}\n"
    assert cli(["models", "--store", str(store), "--levels", "acme/hybrid-1"]) == 0
    assert (
        capsys.readouterr().out == "acme/hybrid-1: none minimal low high (default none; imported)\n"
    )
    assert cli(["models", "--store", str(store), "--levels", "gpt-4o", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "model": "gpt-4o",
        "levels": [],
        "default": None,
        "origin": "documented",
    }
    assert cli(["models", "--store", str(store), "forget", "acme/hybrid-1"]) == 0
    assert capsys.readouterr().out == "forgot 1 entry about 'acme/hybrid-1'\n"
    assert cli(["models", "--store", str(store), "forget", "acme/hybrid-1"]) == 1
    assert cli(["models", "--store", str(store), "--levels", "acme/hybrid-1"]) == 0
    assert capsys.readouterr().out.endswith(
        "acme/hybrid-1: none low medium high (default medium; unknown)\n"
    )
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2")
    assert cli(["models", "--store", str(store), "import", "openrouter", str(broken)]) == 1
    assert capsys.readouterr().err.startswith(
        f"polythink models import: cannot read OpenRouter models file {broken}: "
    )


def _silent(reasoning_tokens: int) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-5.5",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 1 + reasoning_tokens,
                "total_tokens": 6 + reasoning_tokens,
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            },
        },
    )


@pytest.mark.anyio
async def test_learn_suspected_stale_entry_is_listed_never_acted_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "store.json"
    source = Source("openai", "gpt-5.5", api_key="sk-test-000000000000")
    url = "https://api.openai.com/v1/chat/completions"
    bodies = []
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=_silent(0))
        async with Client([source], capabilities_store=path) as client:
            responses = [
                await client.complete([{"role": "user", "content": "hi"}], reasoning_effort="high")
                for _ in range(SUSPECT_AFTER + 1)
            ]
        bodies = [json.loads(call.request.content) for call in route.calls]
    assert [b["reasoning_effort"] for b in bodies] == ["high"] * (SUSPECT_AFTER + 1)
    stale = (
        "the capability entry of model 'gpt-5.5' looks stale: 3 answers at "
        "reasoning_effort='high' contradicted it (silent when on); nothing was changed (see "
        "polythink models --learned)"
    )
    assert [stale in r.warnings for r in responses] == [False, False, True, False]
    assert all(r.applied_effort is Effort.HIGH for r in responses)
    [hint] = CapabilityStore(path).suspicions()
    assert (hint.provider, hint.model, hint.tier, hint.kind, hint.count) == (
        "openai",
        "gpt-5.5",
        "high",
        "silent_when_on",
        3,
    )
    assert CapabilityStore(path).lookup("openai", "gpt-5.5").origin == "documented"
    assert cli(["models", "--learned", "--store", str(path), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    # This process's shared store counted the fourth too (the file stops at SUSPECT_AFTER).
    assert (row["kind"], row["tier"], row["count"]) == ("suspected", "high", 4)
    assert row["evidence"].startswith(
        "4 answers at reasoning_effort='high' reported 0 reasoning tokens ("
    )
