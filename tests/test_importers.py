"""LiteLLM's model map read into the capability store, and the shipped registry checked against it.

``SAMPLE`` is a small model map written here in LiteLLM's own field vocabulary
(``model_prices_and_context_window.json``: ``litellm_provider``, ``mode``,
``supports_reasoning``, ``supports_<tier>_reasoning_effort``, ``reasoning_effort_levels``,
``default_reasoning_effort``, ``thinking_always_on``, ``thinking_on_by_default``,
``deprecation_date``, ``max_input_tokens``, ``max_output_tokens``), with the facts of
../shared/wire/CURRENT.md §2 (read 2026-12-01) for a few current models, not copied from any
LiteLLM file. The registry test compares every model of the sample with the shipped entry, so
a stale row fails loudly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polythink.capability_store import CapabilityStore
from polythink.cli import main
from polythink.importers import capabilities_from_litellm, find_litellm_map, import_litellm
from polythink.reasoning.capabilities import shipped_capability
from polythink.types import Effort

SAMPLE: dict[str, Any] = {
    "sample_spec": {
        "litellm_provider": "one of the providers LiteLLM routes to",
        "mode": "chat, responses, embedding, …",
        "supports_reasoning": "true when the model takes a reasoning effort",
        "deprecation_date": "YYYY-MM-DD the provider stops serving the model",
    },
    # GPT-6.2 Astra: low..max, default medium, no none or minimal (CUR §2.1).
    "gpt-6.2-astra": {
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_reasoning": True,
        "supports_none_reasoning_effort": False,
        "supports_minimal_reasoning_effort": False,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "default_reasoning_effort": "medium",
        "max_input_tokens": 922000,
        "max_output_tokens": 128000,
    },
    # The same model on Azure, under other rules: not imported.
    "azure/gpt-6.2-astra": {
        "litellm_provider": "azure",
        "mode": "chat",
        "supports_reasoning": True,
        "reasoning_effort_levels": ["low"],
    },
    # GPT-6 Luna: none..max without minimal, default medium (CUR §2.1).
    "gpt-6-luna": {
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_reasoning": True,
        "supports_minimal_reasoning_effort": False,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "default_reasoning_effort": "medium",
        "max_output_tokens": 128000,
    },
    # gpt-5 shuts down 2026-12-11 (CUR §2.1).
    "gpt-5": {
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_reasoning": True,
        "supports_none_reasoning_effort": False,
        "default_reasoning_effort": "medium",
        "deprecation_date": "2026-12-11",
    },
    "gpt-4o": {"litellm_provider": "openai", "mode": "chat", "supports_reasoning": False},
    "text-embedding-3-large": {"litellm_provider": "openai", "mode": "embedding"},
    # Claude Opus 5.5: adaptive thinking always on, low..max, default medium, 128K out.
    "claude-opus-5-5": {
        "litellm_provider": "anthropic",
        "mode": "chat",
        "supports_reasoning": True,
        "thinking_always_on": True,
        "supports_minimal_reasoning_effort": False,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "default_reasoning_effort": "medium",
        "max_output_tokens": 128000,
        "max_tokens": 128000,
    },
    # Claude Haiku 5.5: on by default, switching off accepted (CUR §2.2).
    "claude-haiku-5-5": {
        "litellm_provider": "anthropic",
        "mode": "chat",
        "supports_reasoning": True,
        "thinking_on_by_default": True,
        "supports_minimal_reasoning_effort": False,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "default_reasoning_effort": "medium",
    },
    # claude-sonnet-4-5 retired 2026-11-30 (CUR §2.2).
    "claude-sonnet-4-5": {
        "litellm_provider": "anthropic",
        "mode": "chat",
        "supports_reasoning": True,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "deprecation_date": "2026-11-30",
    },
    # Gemini 4 Argon: LOW MEDIUM HIGH, default MEDIUM, 65,536 out (CUR §2.3).
    "gemini/gemini-4-argon": {
        "litellm_provider": "gemini",
        "mode": "chat",
        "supports_reasoning": True,
        "reasoning_effort_levels": ["low", "medium", "high"],
        "default_reasoning_effort": "medium",
        "thinking_always_on": True,
        "max_input_tokens": 1048576,
        "max_output_tokens": 65536,
    },
    # gemini-2.5-pro shut down 2026-12-01 (CUR §2.3); thinking cannot be switched off, and
    # every strength is a thinkingBudget (128-32768, GEM-DOC-thinking).
    "gemini/gemini-2.5-pro": {
        "litellm_provider": "gemini",
        "mode": "chat",
        "supports_reasoning": True,
        "supports_none_reasoning_effort": False,
        "supports_xhigh_reasoning_effort": True,
        "supports_max_reasoning_effort": True,
        "deprecation_date": "2026-12-01",
    },
    # grok-4.5: low|medium|high, default high, no none (CUR §2.4).
    "xai/grok-4.5": {
        "litellm_provider": "xai",
        "mode": "chat",
        "supports_reasoning": True,
        "reasoning_effort_levels": "low,medium,high",
        "default_reasoning_effort": "high",
        "thinking_always_on": True,
    },
    # A model polythink's registry does not list, in a family it knows (GPT-6.2).
    "gpt-6.2-nova": {
        "litellm_provider": "openai",
        "mode": "chat",
        "supports_reasoning": True,
        "reasoning_effort_levels": ["low", "medium", "high"],
        "default_reasoning_effort": "low",
    },
}
"""Written from CURRENT.md and LiteLLM's field names; see the module docstring."""

EVIDENCE = "imported: LiteLLM model map sample.json (file dated 2026-11-28)"


def _tiers(*names: str) -> tuple[Effort, ...]:
    return tuple(Effort(n) for n in names)


def test_fields_are_read_as_documented() -> None:
    caps, without = capabilities_from_litellm(SAMPLE, evidence=EVIDENCE)
    found = {c.model: c for c in caps}
    assert sorted(found) == [
        "claude-haiku-5-5",
        "claude-opus-5-5",
        "claude-sonnet-4-5",
        "gemini-2.5-pro",
        "gemini-4-argon",
        "gpt-5",
        "gpt-6-luna",
        "gpt-6.2-astra",
        "gpt-6.2-nova",
        "grok-4.5",
    ]
    assert without == ["gpt-4o"]
    astra = found["gpt-6.2-astra"]
    assert astra.supported_efforts == _tiers("low", "medium", "high", "xhigh", "max")
    assert (astra.default_effort, astra.provider) == (Effort.MEDIUM, "openai")
    assert (astra.context_window, astra.max_output_tokens) == (922000, 128000)
    assert astra.evidence == EVIDENCE
    assert found["claude-opus-5-5"].supported_efforts == _tiers(
        "low", "medium", "high", "xhigh", "max"
    )
    # The request style comes from the model's family: Claude 5.x adaptive, Gemini 4 levels.
    assert found["claude-opus-5-5"].thinking == "adaptive"
    assert found["gemini-4-argon"].thinking == "level"
    assert found["gemini-2.5-pro"].thinking == "budget"
    assert (found["gemini-2.5-pro"].budget_min, found["gemini-2.5-pro"].budget_max) == (128, 32768)
    assert found["gemini-2.5-pro"].shutdown == "2026-12-01"
    assert found["grok-4.5"].supported_efforts == _tiers("low", "medium", "high")
    assert found["claude-haiku-5-5"].supported_efforts[0] is Effort.NONE
    # No default given, thinking on by default: it reasons at a strength of its own.
    assert found["claude-sonnet-4-5"].default_effort is None


@pytest.mark.parametrize("model", [k for k in SAMPLE if k != "sample_spec"])
def test_the_shipped_registry_agrees_with_the_maintained_map(model: str) -> None:
    entry = SAMPLE[model]
    imported = {c.model: c for c in capabilities_from_litellm(SAMPLE, evidence=EVIDENCE)[0]}
    name = model.rsplit("/", 1)[-1]
    if entry.get("litellm_provider") == "azure" or name not in imported:
        return
    shipped = shipped_capability(name)
    if shipped is None:
        assert name == "gpt-6.2-nova"  # the one model of the sample the registry does not list
        return
    got = imported[name]
    assert shipped.supported_efforts == got.supported_efforts, "tiers disagree"
    if "default_reasoning_effort" in entry:
        assert shipped.default_effort == got.default_effort, "defaults disagree"
    if "deprecation_date" in entry:
        assert shipped.shutdown == got.shutdown, "shutdown dates disagree"
    if "max_output_tokens" in entry:
        assert shipped.max_output_tokens == got.max_output_tokens, "output ceilings disagree"


def _write(tmp_path: Path, document: Any, name: str = "sample.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_imported_entries_rank_below_the_registry_and_above_family_rules(tmp_path: Path) -> None:
    store = CapabilityStore(tmp_path / "store.json", today=lambda: "2026-12-01")
    assert import_litellm(store, _write(tmp_path, SAMPLE)) == 11
    # Documented (shipped) wins over the import.
    assert store.lookup("openai", "gpt-6.2-astra").origin == "documented"
    # The import wins over the family rule, and says where it came from and when.
    nova = store.lookup("openai", "gpt-6.2-nova")
    assert nova.origin == "imported"
    assert nova.capability is not None
    assert nova.capability.supported_efforts == _tiers("low", "medium", "high")
    assert nova.evidence.startswith("imported: LiteLLM model map sample.json (file dated ")
    (entry,) = [e for e in store.entries("imported") if e.model == "gpt-6.2-nova"]
    assert entry.date == "2026-12-01"
    # Read back by another process: the lifecycle date survives the store file.
    again = CapabilityStore(tmp_path / "store.json")
    (pro,) = [e for e in again.entries("imported") if e.model == "gemini-2.5-pro"]
    assert pro.capability is not None
    assert pro.capability.shutdown == "2026-12-01"
    resolved = store.resolve("high", provider="openai", model="gpt-6.2-nova")
    assert dict(resolved.payload) == {"reasoning_effort": "high"}


def test_the_installed_litellm_package_is_found_without_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    package = site / "litellm"
    package.mkdir(parents=True)
    # Importing it would fail: the importer must only locate it.
    (package / "__init__.py").write_text("raise RuntimeError('imported')\n", encoding="utf-8")
    _write(package, SAMPLE, "model_prices_and_context_window_backup.json")
    meta = site / "litellm-1.99.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: litellm\nVersion: 1.99.0\n")
    monkeypatch.syspath_prepend(str(site))
    path, origin = find_litellm_map()
    assert (path, origin) == (
        package / "model_prices_and_context_window_backup.json",
        "litellm 1.99.0 package",
    )
    store = CapabilityStore(None, today=lambda: "2026-12-01")
    assert import_litellm(store) == 11
    assert store.lookup(None, "gpt-6.2-nova").evidence.startswith(
        "imported: LiteLLM model map model_prices_and_context_window_backup.json of the "
        "litellm 1.99.0 package (file dated "
    )


def test_no_map_and_no_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ValueError, match="no LiteLLM model map given and no litellm package"):
        find_litellm_map()


def test_cli_imports_and_stale_lists_what_the_import_contradicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CapabilityStore, "today", lambda self: "2026-12-01")
    store = tmp_path / "store.json"
    stale = {
        **SAMPLE,
        # The map knows something the registry does not: grok-4.5 gained xhigh.
        "xai/grok-4.5": {**SAMPLE["xai/grok-4.5"], "reasoning_effort_levels": "low,high,xhigh"},
    }
    source = _write(tmp_path, stale)
    assert main(["models", "--store", str(store), "import", "litellm", str(source)]) == 0
    assert capsys.readouterr().out == f"imported 11 models from {source} into {store}\n"
    assert main(["models", "--stale", "--provider", "xai", "--store", str(store), "--json"]) == 0
    rows = {r["model"]: r["reasons"] for r in json.loads(capsys.readouterr().out)}
    assert rows["grok-4.5"].startswith(
        "contradicted by an import 2026-12-01: low high xhigh (imported: LiteLLM model map "
    )
    # Retired models are listed with their replacement; old evidence by its age.
    assert rows["grok-4"] == "shut down 2026-05-15"
    assert main(["models", "--stale", "--older-than", "60", "--json"]) == 0
    rows = {r["model"]: r["reasons"] for r in json.loads(capsys.readouterr().out)}
    # glm-4.6v was last measured 2026-09-05: 87 days before 2026-12-01.
    assert rows["glm-4.6v"] == "checked 2026-09-05, 87 days ago"
    assert "glm-5.3" not in rows
