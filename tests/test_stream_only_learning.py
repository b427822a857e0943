"""A model that reasons only in streamed calls, learned from the provider's refusal.

DashScope answers a non-streamed thinking call to open-weight Qwen3 models with 400
"parameter.enable_thinking must be set to false for non-streaming calls" (WIRE.md §6.2, qwen3-32b,
Feb 2026; "The thinking mode only supports incremental output", Alibaba Cloud, 2025-06-13), and
the registry flags only some models. polythink recognises the refusal, records "stream-only" for
that model as observed evidence in the capability store (like a learned tier: for that provider
and endpoint), sends the call
once more as a stream under ``complete()``, and streams every later reasoning call to it from
the start, in this process and the next.

The simulator plays ``qwen3.7-plus`` (a hybrid model the registry does not flag) and
``qwen3.5-flash`` (which reasons by default) as stream-only; every request is counted on the
client's HTTP layer, with whether it asked for a stream.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from polythink import Client, Source
from polythink.capability_store import CapabilityStore
from polythink.reasoning import get_capability
from polythink.reasoning.learn import (
    ReasoningRejection,
    learned_capability,
    parse_reasoning_rejection,
)
from polythink.simulator import Settings, Simulator

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "Name three primes"}]
REFUSAL = {
    "error": {
        "message": "<400> InternalError.Algo.InvalidParameter: parameter.enable_thinking must "
        "be set to false for non-streaming calls",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_parameter_error",
    }
}
GIST = (
    "<400> InternalError.Algo.InvalidParameter: parameter.enable_thinking must be set to false "
    "for non-streaming calls"
)


def _played(model: str) -> Any:
    cap = get_capability(model)
    assert cap is not None
    assert not cap.stream_only_reasoning
    return dataclasses.replace(cap, stream_only_reasoning=True)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    played = {m: _played(m) for m in ("qwen3.7-plus", "qwen3.5-flash")}
    with Simulator(Settings(capabilities=played)) as simulator:
        yield simulator


class Wire:
    """The requests a client sent: (streamed?, status) each."""

    def __init__(self) -> None:
        self.sent: list[tuple[bool, int]] = []

    async def _response(self, response: httpx.Response) -> None:
        body = json.loads(response.request.content)
        self.sent.append((bool(body.get("stream")), response.status_code))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(event_hooks={"response": [self._response]})


def test_the_refusal_is_recognised() -> None:
    assert parse_reasoning_rejection(400, REFUSAL) == ReasoningRejection("stream_only", gist=GIST)
    assert parse_reasoning_rejection(500, REFUSAL) is None


def test_the_learned_capability_keeps_everything_else() -> None:
    base = get_capability("qwen3.7-plus")
    assert base is not None
    rejection = ReasoningRejection("stream_only", gist=GIST)
    learned = learned_capability(
        base, rejection, model="qwen3.7-plus", provider="qwen", wire="qwen", sent=None, evidence="e"
    )
    assert learned == dataclasses.replace(base, stream_only_reasoning=True, evidence="e")
    fresh = learned_capability(
        None, rejection, model="qwen3-9b", provider="qwen", wire="qwen", sent=None, evidence="e"
    )
    assert fresh is not None
    assert fresh.stream_only_reasoning


@pytest.mark.parametrize(("model", "effort"), [("qwen3.7-plus", "high"), ("qwen3.5-flash", None)])
async def test_learned_then_streamed_under_complete(
    sim: Simulator, tmp_path: Path, model: str, effort: str | None
) -> None:
    store_path = tmp_path / "capabilities.json"
    source = Source("qwen", model, base_url=sim.base_url("qwen"), api_key="sim")
    wire = Wire()
    async with (
        wire.client() as http,
        Client([source], http_client=http, capabilities_store=store_path) as client,
    ):
        first = await client.complete(USER, reasoning_effort=effort, cache=False)
        second = await client.complete(USER, reasoning_effort=effort, cache=False)
    # One refusal, the same call once more as a stream; the next call streamed from the start.
    assert wire.sent == [(False, 400), (True, 200), (True, 200)]
    learned = (
        f"qwen answers reasoning calls to {model!r} only when streamed ({GIST}); learned that "
        "and sent the call again as a stream"
    )
    assembled = (
        f"qwen answers reasoning calls to {model!r} only when streamed: complete() streamed and "
        "assembled the answer"
    )
    assert learned in first.warnings
    assert assembled in first.warnings
    assert assembled in second.warnings
    assert learned not in second.warnings
    assert first.text
    assert first.reasoning
    # Observed evidence, kept for the next process.
    entry = CapabilityStore(store_path).lookup("qwen", model, source.endpoint)
    assert entry.origin == "observed"
    assert entry.capability is not None
    assert entry.capability.stream_only_reasoning
    assert entry.evidence.startswith("observed ")
    assert entry.evidence.endswith(GIST)
    wire = Wire()
    async with (
        wire.client() as http,
        Client([source], http_client=http, capabilities_store=store_path) as client,
    ):
        await client.complete(USER, reasoning_effort=effort, cache=False)
    assert wire.sent == [(True, 200)]


async def test_without_reasoning_the_call_stays_unstreamed(sim: Simulator, tmp_path: Path) -> None:
    source = Source("qwen", "qwen3.7-plus", base_url=sim.base_url("qwen"), api_key="sim")
    wire = Wire()
    async with (
        wire.client() as http,
        Client([source], http_client=http, capabilities_store=tmp_path / "c.json") as client,
    ):
        await client.complete(USER, reasoning_effort="high", cache=False)
        off = await client.complete(USER, reasoning_effort="none", cache=False)
    assert wire.sent == [(False, 400), (True, 200), (False, 200)]
    assert not any("only when streamed" in w for w in off.warnings)


async def test_learned_for_the_endpoint_that_refused(sim: Simulator, tmp_path: Path) -> None:
    # Scoped like every observed entry: the provider and the endpoint that answered.
    store_path = tmp_path / "capabilities.json"
    source = Source("qwen", "qwen3.7-plus", base_url=sim.base_url("qwen"), api_key="sim")
    async with Client([source], capabilities_store=store_path) as client:
        await client.complete(USER, reasoning_effort="high", cache=False)
    store = CapabilityStore(store_path)
    assert store.lookup("qwen", "qwen3.7-plus", source.endpoint).origin == "observed"
    for provider, endpoint in (
        ("qwen", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"),
        ("openrouter", source.endpoint),
    ):
        other = store.lookup(provider, "qwen3.7-plus", endpoint)
        assert other.origin != "observed"
        assert other.capability is not None
        assert not other.capability.stream_only_reasoning
