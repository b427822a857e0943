"""What is learned about one endpoint stays with that endpoint.

The simulator plays gpt-5.5 with the tiers low..high, so a call for ``xhigh`` is refused there
and the refusal is learned. The registry (OpenAI's model page) gives gpt-5.5 none..xhigh, so
a call to api.openai.com must still send ``xhigh`` afterwards, from the same user store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source
from polythink.capability_store import CapabilityStore, endpoint_scope
from polythink.cli import main as cli
from polythink.reasoning import Capability
from polythink.simulator import Settings, Simulator
from polythink.types import Effort

USER = [{"role": "user", "content": "Name three primes"}]
OFFICIAL = "https://api.openai.com/v1/chat/completions"
PLAYED = Capability("gpt-5.5", ("low", "medium", "high"), default_effort="medium")


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(capabilities={"gpt-5.5": PLAYED})) as simulator:
        yield simulator


def _answer() -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "model": "gpt-5.5",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "2, 3, 5"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 4,
                "total_tokens": 9,
                "completion_tokens_details": {"reasoning_tokens": 2},
            },
        },
    )


class Wire:
    """(status, reasoning_effort sent) of every exchange a client made."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []

    async def hook(self, response: httpx.Response) -> None:
        body = json.loads(response.request.content or b"{}")
        self.sent.append((response.status_code, body.get("reasoning_effort")))


@pytest.mark.anyio
async def test_what_the_simulator_taught_does_not_change_calls_to_the_official_endpoint(
    sim: Simulator, tmp_path: Path
) -> None:
    store = tmp_path / "capabilities.json"
    wire = Wire()
    at_sim = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
    async with httpx.AsyncClient(event_hooks={"response": [wire.hook]}) as http:
        async with Client([at_sim], http_client=http, capabilities_store=store) as client:
            learned = await client.complete(USER, reasoning_effort="xhigh")
        # A later process on the same endpoint starts from what was learned there.
        async with Client([at_sim], http_client=http, capabilities_store=str(store)) as client:
            again = await client.complete(USER, reasoning_effort="xhigh")
    assert wire.sent == [(400, "xhigh"), (200, "high"), (200, "high")]
    assert (learned.applied_effort, again.applied_effort) == (Effort.HIGH, Effort.HIGH)

    production = Source("openai", "gpt-5.5", api_key="sk-test-0000000000000000")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OFFICIAL).mock(return_value=_answer())
        async with Client([production], capabilities_store=CapabilityStore(store)) as client:
            response = await client.complete(USER, reasoning_effort="xhigh")
    assert json.loads(route.calls[0].request.content)["reasoning_effort"] == "xhigh"
    assert (response.requested_effort, response.applied_effort) == (Effort.XHIGH, Effort.XHIGH)
    assert response.warnings == []

    [entry] = CapabilityStore(store).entries()
    assert (entry.origin, entry.provider, entry.endpoint) == (
        "observed",
        "openai",
        sim.base_url("openai"),
    )


def test_an_endpoint_is_one_scope_however_it_is_spelt(tmp_path: Path) -> None:
    assert endpoint_scope("HTTPS://Proxy.Example:443/v1/") == "https://proxy.example/v1"
    assert endpoint_scope("http://user:pw@127.0.0.1:8080/openai/v1?key=abc#x") == (
        "http://127.0.0.1:8080/openai/v1"
    )
    assert endpoint_scope("http://[::1]:80/v1") == "http://[::1]/v1"
    store = CapabilityStore(tmp_path / "caps.json")
    low_high = Capability("gpt-5.5", ("low", "high"))
    store.observe("openai", "gpt-5.5", low_high, "observed: proxy", "HTTPS://Proxy.Example/v1/")
    at_proxy = store.lookup("openai", "gpt-5.5", "https://proxy.example:443/v1")
    assert (at_proxy.origin, at_proxy.capability) == ("observed", low_high)
    assert store.lookup("openai", "gpt-5.5").origin == "documented"
    assert store.lookup("openai", "gpt-5.5", "https://other.example/v1").origin == "documented"
    # Observed on the official endpoint: it applies there (the default) and nowhere else.
    store.observe("openai", "gpt-5.5", Capability("gpt-5.5", ("high",)), "observed: official")
    assert store.lookup("openai", "gpt-5.5").evidence == "observed: official"
    assert store.lookup("openai", "gpt-5.5", "https://api.openai.com/v1/").origin == "observed"
    assert store.lookup(None, "gpt-5.5").evidence == "observed: official"
    assert store.lookup(None, "gpt-5.5", "https://proxy.example/v1").evidence == ("observed: proxy")
    assert store.lookup("openai", "gpt-5.5", "https://proxy.example/v1").evidence == (
        "observed: proxy"
    )


FORMAT_1 = {
    "format": 1,
    "entries": [
        {
            "origin": "observed",
            "provider": "openai",
            "model": "gpt-5.5",
            "capability": {"supported_efforts": ["low", "medium", "high"]},
            "evidence": "observed 2026-11-20 on openai: HTTP 400 to {...}",
            "date": "2026-11-20",
        },
        {
            "origin": "imported",
            "provider": None,
            "model": "acme/thinker-1",
            "capability": {"supported_efforts": ["low", "high"], "default_effort": "low"},
            "evidence": "imported: OpenRouter /models document m.json (file dated 2026-11-01)",
            "date": "2026-11-02",
        },
    ],
    "suspicions": [
        {
            "provider": "openai",
            "model": "gpt-5.1",
            "tier": "none",
            "kind": "reasoned_when_off",
            "count": 3,
            "first_seen": "2026-11-18",
            "last_seen": "2026-11-19",
            "registry": "documented: OpenAI model page",
        }
    ],
}


def test_a_store_written_before_scoping_loads_and_its_observations_apply_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "capabilities.json"
    path.write_text(json.dumps(FORMAT_1))
    store = CapabilityStore(path)
    assert store.lookup("openai", "gpt-5.5").origin == "documented"
    assert store.lookup(None, "gpt-5.5").origin == "documented"
    imported = store.lookup("openrouter", "acme/thinker-1")
    assert (imported.origin, imported.capability and imported.capability.supported_efforts) == (
        "imported",
        (Effort.LOW, Effort.HIGH),
    )
    assert [(e.origin, e.model, e.endpoint) for e in store.entries()] == [
        ("imported", "acme/thinker-1", None),
        ("observed", "gpt-5.5", None),
    ]
    [hint] = store.suspicions()
    assert (hint.model, hint.endpoint, hint.count) == ("gpt-5.1", None, 3)

    assert cli(["models", "--store", str(path), "--learned", "--json"]) == 0
    rows = {row["model"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["gpt-5.5"]["endpoint"] == "unknown (recorded before scoping; applies to no call)"
    assert rows["acme/thinker-1"]["endpoint"] == "any"
    assert rows["gpt-5.1"]["endpoint"] == "unknown (recorded before scoping; applies to no call)"

    # Written back as format 2 with the old entries kept, until they are forgotten.
    store.observe("xai", "grok-4.3", None, "observed: no parameter")
    saved = json.loads(path.read_text())
    assert saved["format"] == 2
    assert {(e["model"], e["endpoint"]) for e in saved["entries"]} == {
        ("acme/thinker-1", None),
        ("gpt-5.5", None),
        ("grok-4.3", "https://api.x.ai/v1"),
    }
    assert cli(["models", "--store", str(path), "forget", "gpt-5.5"]) == 0
    assert capsys.readouterr().out == "forgot 1 entry about 'gpt-5.5'\n"
    assert "gpt-5.5" not in {e.model for e in CapabilityStore(path).entries()}


def test_resolve_and_levels_take_the_endpoint(
    sim: Simulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "caps.json"
    proxy = "http://127.0.0.1:4000/v1"
    CapabilityStore(path).observe(
        "openai", "gpt-5.5", PLAYED, "observed 2026-12-01 on openai at a gateway", proxy
    )
    argv = ["resolve", "--provider", "openai", "--model", "gpt-5.5", "--effort", "xhigh"]
    assert cli([*argv, "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["applied_effort"] == "xhigh"
    assert cli([*argv, "--store", str(path), "--base-url", proxy + "/", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["applied_effort"] == "high"

    levels = ["models", "--store", str(path), "--provider", "openai", "--levels", "gpt-5.5"]
    assert cli(levels) == 0
    assert capsys.readouterr().out == (
        "gpt-5.5: none low medium high xhigh (default medium; documented)\n"
    )
    assert cli([*levels, "--base-url", proxy]) == 0
    assert capsys.readouterr().out == "gpt-5.5: low medium high (default medium; observed)\n"

    assert cli(["models", "--store", str(path), "--learned"]) == 0
    table = capsys.readouterr().out
    assert "endpoint" in table.splitlines()[2]
    assert proxy in table
