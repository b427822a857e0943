"""The registry refreshes itself from maintained catalogues, safely, at most once a day.

The catalogues are served by a loopback HTTP server of the test's own (and read from a local
file), never fetched from the network. They are written here in LiteLLM's and OpenRouter's own
field vocabularies (see tests/test_importers.py and tests/test_capability_store_learn.py), with
invented model ids where the precedence is the point, so no shipped entry is involved by
accident.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from polythink import Client, Source
from polythink.capability_store import CapabilityStore
from polythink.cli import main
from polythink.refresh import REFRESH_EVERY, last_report, refresh, schedule_refresh
from polythink.types import Effort

KEY = "sk-test-0000000000000000"
DAY = 1_796_342_400.0  # 2026-12-04T00:00:00Z


def litellm_map(models: int = 12, **extra: dict[str, Any]) -> dict[str, Any]:
    """A model map of ``models`` invented OpenAI reasoning models (low..high), plus ``extra``."""
    document: dict[str, Any] = {
        f"acme-reasoner-{i}": {
            "litellm_provider": "openai",
            "mode": "chat",
            "supports_reasoning": True,
            "reasoning_effort_levels": ["low", "medium", "high"],
        }
        for i in range(models)
    }
    document.update(extra)
    return document


def openrouter_models(models: int = 12) -> dict[str, Any]:
    return {
        "data": [
            {
                "id": f"acme/router-model-{i}",
                "context_length": 200000,
                "reasoning": {"supported_efforts": ["high", "low"], "mandatory": True},
                "supported_parameters": ["reasoning", "temperature"],
            }
            for i in range(models)
        ]
    }


class Catalogues:
    """A loopback server of the two catalogues; ``hold`` delays answers until set."""

    def __init__(self) -> None:
        self.documents: dict[str, tuple[int, bytes]] = {}
        self.seen: list[dict[str, str]] = []
        self.hold = threading.Event()
        self.hold.set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.seen.append(
                    {"path": self.path, **{k.lower(): v for k, v in self.headers.items()}}
                )
                owner.hold.wait(60)
                status, body = owner.documents.get(self.path, (404, b"{}"))
                etag = f'"{hash(body) & 0xFFFFFFFF:x}"'
                if status == 200 and self.headers.get("If-None-Match") == etag:
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("ETag", etag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def serve(self, path: str, document: Any, status: int = 200) -> None:
        self.documents[path] = (status, json.dumps(document).encode())

    @property
    def urls(self) -> dict[str, str]:
        return {"litellm": f"{self.url}/litellm.json", "openrouter": f"{self.url}/models"}

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def catalogues() -> Iterator[Catalogues]:
    server = Catalogues()
    server.serve("/litellm.json", litellm_map())
    server.serve("/models", openrouter_models())
    yield server
    server.close()


def _store(tmp_path: Path) -> CapabilityStore:
    return CapabilityStore(tmp_path / "capabilities.json", today=lambda: "2026-12-04")


def test_a_refresh_imports_both_catalogues_below_the_shipped_registry(
    tmp_path: Path, catalogues: Catalogues
) -> None:
    store = _store(tmp_path)
    assert store.catalogue is not None
    report = refresh(store.catalogue.directory, urls=catalogues.urls, clock=lambda: DAY)
    assert [(s.source, s.status, s.models) for s in report.sources] == [
        ("litellm", "accepted", 12),
        ("openrouter", "accepted", 12),
    ]
    known = store.lookup("openai", "acme-reasoner-3")
    assert known.origin == "imported"
    assert known.capability is not None
    assert known.capability.supported_efforts == (Effort.LOW, Effort.MEDIUM, Effort.HIGH)
    assert known.evidence == (
        f"imported: LiteLLM model map refreshed from {catalogues.url}/litellm.json on 2026-12-04"
    )
    # Every form of the id finds it (a gateway prefix, a date suffix).
    assert store.lookup("openrouter", "openai/acme-reasoner-3-2026-11-30").origin == "imported"
    router = store.lookup("openrouter", "acme/router-model-1")
    assert router.capability is not None
    assert router.capability.supported_efforts == (Effort.LOW, Effort.HIGH)
    # The shipped registry still wins over a catalogue (observed > documented > imported).
    assert store.lookup("openai", "gpt-5.5").origin == "documented"


def test_a_refreshed_entry_corrects_a_family_guess_and_an_observation_wins_over_it(
    tmp_path: Path, catalogues: Catalogues
) -> None:
    # A new GPT-6 id guessed by its family (low..max) that the catalogue lists as low..high.
    catalogues.serve(
        "/litellm.json",
        litellm_map(
            **{
                "gpt-6.3-nova": {
                    "litellm_provider": "openai",
                    "mode": "chat",
                    "supports_reasoning": True,
                    "reasoning_effort_levels": ["low", "medium", "high"],
                }
            }
        ),
    )
    store = _store(tmp_path)
    assert store.lookup("openai", "gpt-6.3-nova").origin == "inferred"
    refresh(store.catalogue.directory, urls=catalogues.urls, clock=lambda: DAY)  # type: ignore[union-attr]
    known = store.lookup("openai", "gpt-6.3-nova")
    assert known.origin == "imported"
    assert store.resolve("xhigh", provider="openai", model="gpt-6.3-nova").applied_effort is (
        Effort.HIGH
    )
    store.observe("openai", "gpt-6.3-nova", None, "observed 2026-12-04: no reasoning parameter")
    assert store.lookup("openai", "gpt-6.3-nova").origin == "observed"


def test_an_unchanged_catalogue_costs_a_304(tmp_path: Path, catalogues: Catalogues) -> None:
    folder = tmp_path / "catalogues"
    refresh(folder, urls=catalogues.urls, clock=lambda: DAY)
    second = refresh(folder, urls=catalogues.urls, clock=lambda: DAY + REFRESH_EVERY)
    assert [s.status for s in second.sources] == ["unchanged", "unchanged"]
    assert catalogues.seen[-1]["if-none-match"].startswith('"')


def test_a_catalogue_that_would_erase_most_entries_is_refused_with_a_warning(
    tmp_path: Path, catalogues: Catalogues, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "catalogues"
    catalogues.serve("/litellm.json", litellm_map(models=40))
    refresh(folder, urls=catalogues.urls, clock=lambda: DAY)
    catalogues.serve("/litellm.json", litellm_map(models=15))
    caplog.set_level(logging.INFO, logger="polythink.refresh")
    report = refresh(folder, urls=catalogues.urls, clock=lambda: DAY + REFRESH_EVERY)
    assert report.sources[0].status == "refused"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"registry refresh: refused the LiteLLM model map from {catalogues.url}/litellm.json: "
        "it would erase 25 of the 40 models of the previous copy (more than 50%); kept the "
        "previous copy"
    ]
    store = _store(tmp_path)
    assert store.lookup("openai", "acme-reasoner-39").origin == "imported"


def test_a_catalogue_that_changes_tiers_wholesale_is_refused(
    tmp_path: Path, catalogues: Catalogues
) -> None:
    folder = tmp_path / "catalogues"
    refresh(folder, urls=catalogues.urls, clock=lambda: DAY)
    flipped = litellm_map()
    for entry in flipped.values():
        entry["reasoning_effort_levels"] = ["high"]
    catalogues.serve("/litellm.json", flipped)
    report = refresh(folder, urls=catalogues.urls, clock=lambda: DAY + REFRESH_EVERY)
    assert report.sources[0].status == "refused"
    assert report.sources[0].message.endswith(
        "it would change the tiers of 12 of the 12 models both copies list (more than 50%); "
        "kept the previous copy"
    )
    known = _store(tmp_path).lookup("openai", "acme-reasoner-0")
    assert known.capability is not None
    assert known.capability.supported_efforts == (Effort.LOW, Effort.MEDIUM, Effort.HIGH)


def test_a_failed_fetch_is_a_log_line_and_keeps_the_previous_copy(
    tmp_path: Path, catalogues: Catalogues, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "catalogues"
    refresh(folder, urls=catalogues.urls, clock=lambda: DAY)
    catalogues.serve("/litellm.json", {"error": "overloaded"}, status=503)
    caplog.set_level(logging.INFO, logger="polythink.refresh")
    report = refresh(folder, urls=catalogues.urls, clock=lambda: DAY + REFRESH_EVERY)
    assert [s.status for s in report.sources] == ["failed", "unchanged"]
    assert [r.getMessage() for r in caplog.records] == [
        f"registry refresh: LiteLLM model map from {catalogues.url}/litellm.json failed: HTTP "
        "503; kept the previous copy"
    ]
    assert _store(tmp_path).lookup("openai", "acme-reasoner-0").origin == "imported"


def test_a_local_catalogue_file_refreshes_too(tmp_path: Path) -> None:
    path = tmp_path / "model_prices_and_context_window.json"
    path.write_text(json.dumps(litellm_map()), encoding="utf-8")
    missing = tmp_path / "no-such-models.json"
    report = refresh(
        tmp_path / "catalogues",
        urls={"litellm": str(path), "openrouter": f"file://{missing}"},
        clock=lambda: DAY,
    )
    assert [s.status for s in report.sources] == ["accepted", "failed"]
    assert report.sources[1].message.startswith(f"OpenRouter /models from file://{missing} failed")


def _refresh_on(monkeypatch: pytest.MonkeyPatch, catalogues: Catalogues) -> None:
    """Turn the automatic refresh on, pointed at the loopback catalogues."""
    monkeypatch.setenv("POLYTHINK_REFRESH", "on")
    monkeypatch.setenv("POLYTHINK_LITELLM_URL", catalogues.urls["litellm"])
    monkeypatch.setenv("POLYTHINK_OPENROUTER_URL", catalogues.urls["openrouter"])


def test_the_client_refreshes_at_most_once_a_day_without_waiting(
    tmp_path: Path, catalogues: Catalogues, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refresh_on(monkeypatch, catalogues)
    catalogues.hold.clear()  # the server answers only when released
    store = CapabilityStore(tmp_path / "capabilities.json")
    Client([Source("openai", "gpt-5.5", api_key=KEY)], capabilities_store=store)
    # The client is built while the catalogue request is still held: nothing waited for it.
    assert [t for t in threading.enumerate() if t.name == "polythink-refresh"]
    catalogues.hold.set()
    for thread in [t for t in threading.enumerate() if t.name == "polythink-refresh"]:
        thread.join(60)
    assert store.lookup("openai", "acme-reasoner-1").origin == "imported"
    requests = len(catalogues.seen)
    # Not again the same day, in this process or another (the attempt is recorded).
    assert schedule_refresh(store) is None
    assert schedule_refresh(CapabilityStore(tmp_path / "capabilities.json")) is None
    assert len(catalogues.seen) == requests


def test_the_daily_schedule_follows_the_recorded_attempt(
    tmp_path: Path, catalogues: Catalogues, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refresh_on(monkeypatch, catalogues)
    store = CapabilityStore(tmp_path / "capabilities.json")
    first = schedule_refresh(store, clock=lambda: DAY)
    assert first is not None
    first.join(60)
    assert schedule_refresh(store, clock=lambda: DAY + REFRESH_EVERY - 1) is None
    later = schedule_refresh(store, clock=lambda: DAY + REFRESH_EVERY + 1)
    assert later is not None
    later.join(60)
    monkeypatch.setenv("POLYTHINK_REFRESH", "off")
    assert schedule_refresh(store, clock=lambda: DAY + 3 * REFRESH_EVERY) is None
    assert schedule_refresh(CapabilityStore(None), clock=lambda: DAY) is None


def test_models_refresh_and_stale_say_what_changed(
    tmp_path: Path,
    catalogues: Catalogues,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", str(tmp_path / "capabilities.json"))
    monkeypatch.setenv("POLYTHINK_LITELLM_URL", catalogues.urls["litellm"])
    monkeypatch.setenv("POLYTHINK_OPENROUTER_URL", catalogues.urls["openrouter"])
    argon = {
        "litellm_provider": "gemini",
        "mode": "chat",
        "supports_reasoning": True,
        "reasoning_effort_levels": ["low", "medium", "high"],
    }
    catalogues.serve("/litellm.json", litellm_map(**{"gemini/gemini-4-argon": argon}))
    assert main(["models", "--refresh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"litellm: accepted: LiteLLM model map from {catalogues.url}/litellm.json: 13 models, "
        "13 changed",
        "  13 added, 0 removed",
        f"openrouter: accepted: OpenRouter /models from {catalogues.url}/models: 12 models, "
        "12 changed",
        "  12 added, 0 removed",
    ]
    # The next day the map says Argon gained xhigh: refresh names the change, stale lists it
    # and that it contradicts the shipped entry.
    catalogues.serve(
        "/litellm.json",
        litellm_map(
            **{
                "gemini/gemini-4-argon": {
                    **argon,
                    "reasoning_effort_levels": ["low", "medium", "high", "xhigh"],
                }
            }
        ),
    )
    assert main(["models", "--refresh"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  gemini-4-argon: low medium high -> low medium high xhigh" in out
    assert (
        out[-1]
        == "openrouter: unchanged: OpenRouter /models unchanged since " + out[-1].split("since ")[1]
    )
    assert main(["models", "--stale", "--provider", "gemini", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    report = last_report(tmp_path / "catalogues")
    assert report is not None
    assert report.sources[0].changes[0].describe() == (
        "gemini-4-argon: low medium high -> low medium high xhigh"
    )
    argon = [row["reasons"] for row in rows if row["model"] == "gemini-4-argon"]
    assert [r for r in argon if r.startswith("changed by")] == [
        f"changed by the litellm refresh of {report.at[:10]}: low medium high -> "
        "low medium high xhigh"
    ]
    assert any(
        "contradicted by the refreshed litellm catalogue: low medium high xhigh" in r for r in argon
    )


def test_models_refresh_needs_a_store_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", "off")
    assert main(["models", "--refresh"]) == 1
    assert "in memory only" in capsys.readouterr().err
