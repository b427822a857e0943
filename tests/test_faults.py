"""Simulator faults as they appear on the wire, read with plain httpx over loopback."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from polythink import Client, Source
from polythink.errors import StreamInterruptedError, TransientError
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import (
    DEFAULT_MIX,
    Fault,
    FaultPlan,
    RateLimitHeaders,
    dialect,
    error_payload,
    in_band_frame,
)
from tests.resilience_helpers import MESSAGES, FakeClock, client_with, collect

WHEN = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES_BODY = {
    "model": "claude-haiku-4-5",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "hi"}],
}
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sim"}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings()) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> FaultPlan:
    sim.settings.faults = FaultPlan(wall=lambda: WHEN)
    return sim.settings.faults


def _chat_url(sim: Simulator) -> str:
    return f"{sim.base_url('openai')}/chat/completions"


def _messages_url(sim: Simulator) -> str:
    return f"{sim.base_url('anthropic')}/messages"


def _events(raw: bytes) -> list[str]:
    return [block for block in raw.decode().split("\n\n") if block.strip()]


async def _read_stream(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], **headers: str
) -> tuple[httpx.Response, bytes, BaseException | None]:
    received = b""
    async with http.stream("POST", url, json={**body, "stream": True}, headers=headers) as r:
        try:
            async for part in r.aiter_bytes():
                received += part
        except httpx.HTTPError as exc:
            return r, received, exc
    return r, received, None


@pytest.mark.anyio
async def test_status_faults_in_each_dialect(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(
        Fault.http(429, retry_after=2),
        Fault.http(529, retry_after_ms=1500, should_retry=True),
        Fault.http(503, retry_after_date=30, should_retry=False),
    )
    async with httpx.AsyncClient() as http:
        first = await http.post(_chat_url(sim), json=CHAT)
        second = await http.post(_messages_url(sim), json=MESSAGES_BODY, headers=ANTHROPIC_HEADERS)
        third = await http.post(_chat_url(sim), json=CHAT)
        clean = await http.post(_chat_url(sim), json=CHAT)
    assert first.status_code == 429
    assert first.headers["retry-after"] == "2"
    assert first.headers["x-request-id"] == "sim-req-fault"
    assert first.json() == {
        "error": {
            "message": "Rate limit reached for requests.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert second.status_code == 529
    assert second.headers["retry-after-ms"] == "1500"
    assert second.headers["x-should-retry"] == "true"
    assert second.headers["request-id"] == "sim-req-fault"
    assert second.json() == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Simulated 529 error."},
    }
    assert third.status_code == 503
    assert third.headers["retry-after"] == "Wed, 21 Oct 2015 07:28:30 GMT"
    assert third.headers["x-should-retry"] == "false"
    assert clean.status_code == 200
    assert clean.json()["choices"][0]["message"]["content"].startswith("Simulated gpt-4o")
    assert plan.injected == {"429": 1, "529": 1, "503": 1}


def test_gemini_and_responses_shapes() -> None:
    assert error_payload("gemini", 429, Fault.http(429, retry_after=37)) == {
        "error": {
            "code": 429,
            "message": "Simulated 429 error.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    assert error_payload("gemini", 503, Fault.http(503)) == {
        "error": {"code": 503, "message": "Simulated 503 error.", "status": "UNAVAILABLE"}
    }
    assert in_band_frame("responses", "server_error", 4) == (
        b'event: error\ndata: {"type":"error","code":"server_error","message":'
        b'"Simulated in-stream server_error.","param":null,"sequence_number":4}\n\n'
    )
    assert in_band_frame("gemini", "overloaded_error", 0) == (
        b'data: {"error":{"code":503,"message":"Simulated in-stream overloaded_error.",'
        b'"status":"UNAVAILABLE"}}\n\n'
    )
    assert dialect("/gemini/v1beta/models/gemini-3.8-flash:streamGenerateContent") == "gemini"
    assert dialect("/openai-responses/v1/responses") == "responses"
    assert dialect("/anthropic/v1/messages") == "anthropic"
    assert dialect("/deepseek/v1/chat/completions") == "openai"


@pytest.mark.anyio
async def test_reset_before_the_response(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.reset())
    async with httpx.AsyncClient() as http:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            await http.post(_chat_url(sim), json=CHAT)
    assert plan.injected == {"reset": 1}


@pytest.mark.anyio
async def test_reset_in_the_middle_of_a_stream(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.reset(after_chunks=3))
    async with httpx.AsyncClient() as http:
        response, raw, error = await _read_stream(http, _chat_url(sim), CHAT)
    assert response.status_code == 200
    assert isinstance(error, httpx.RemoteProtocolError | httpx.ReadError)
    events = _events(raw)
    assert len(events) == 3
    assert [json.loads(e.removeprefix("data: "))["choices"][0]["delta"] for e in events] == [
        {"role": "assistant", "content": ""},
        {"content": "Simulated"},
        {"content": " gpt-4o"},
    ]
    assert plan.injected == {"reset_mid": 1}


@pytest.mark.anyio
async def test_stall_before_the_first_byte_and_mid_stream(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.stall(0.6), Fault.stall(0.6, after_chunks=2))
    async with httpx.AsyncClient() as http:
        started = time.monotonic()
        answer = await http.post(_chat_url(sim), json=CHAT)
        slow_head = time.monotonic() - started
        stamps: list[float] = []
        async with http.stream("POST", _chat_url(sim), json={**CHAT, "stream": True}) as r:
            async for _ in r.aiter_bytes():
                stamps.append(time.monotonic())
    assert answer.status_code == 200
    assert 0.6 <= slow_head < 0.6 + 1.5  # the slack is for a loaded machine
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert max(gaps) >= 0.55
    assert plan.injected == {"stall": 1, "stall_mid": 1}


@pytest.mark.anyio
async def test_stall_ends_when_the_client_hangs_up(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.stall(30.0))
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.2)) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post(_chat_url(sim), json=CHAT)
    # The simulator notices the hang-up on its own thread: wait for it, without a fixed sleep.
    with anyio.fail_after(10):
        while sim.stats.in_flight:  # noqa: ASYNC110
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_malformed_body_and_frame(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.malformed(), Fault.malformed(after_chunks=2))
    async with httpx.AsyncClient() as http:
        body = await http.post(_chat_url(sim), json=CHAT)
        _, raw, error = await _read_stream(http, _chat_url(sim), CHAT)
    assert body.status_code == 200
    with pytest.raises(ValueError, match="Unterminated string"):
        body.json()
    assert error is None
    events = _events(raw)
    assert len(events) == 3
    assert events[2] == 'data: {"id":"sim-malformed","choices":[{"delta":{"content":"tru'


@pytest.mark.anyio
async def test_in_band_error_events(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.in_band("overloaded_error", after_chunks=1), Fault.in_band("server_error", 2))
    async with httpx.AsyncClient() as http:
        _, anthropic_raw, _ = await _read_stream(
            http, _messages_url(sim), MESSAGES_BODY, **ANTHROPIC_HEADERS
        )
        _, chat_raw, _ = await _read_stream(http, _chat_url(sim), CHAT)
    anthropic = _events(anthropic_raw)
    assert len(anthropic) == 2
    assert anthropic[0].startswith("event: message_start\n")
    assert anthropic[1] == (
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
        '"message":"Simulated in-stream overloaded_error."}}'
    )
    chat = _events(chat_raw)
    assert len(chat) == 3
    assert json.loads(chat[2].removeprefix("data: ")) == {
        "error": {
            "message": "Simulated in-stream server_error.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }


@pytest.mark.anyio
async def test_rate_limit_headers_count_down(sim: Simulator) -> None:
    clock = FakeClock(start=0.0)
    plan = FaultPlan(
        rate_limit=RateLimitHeaders(limit=3, window=60.0), clock=clock, wall=lambda: WHEN
    )
    sim.settings.faults = plan
    seen: list[tuple[int, str, str, str | None]] = []
    async with httpx.AsyncClient() as http:
        for step in (0.0, 1.5, 1.0, 10.0):
            clock.now += step
            r = await http.post(_chat_url(sim), json=CHAT)
            seen.append(
                (
                    r.status_code,
                    r.headers["x-ratelimit-remaining-requests"],
                    r.headers["x-ratelimit-reset-requests"],
                    r.headers.get("retry-after"),
                )
            )
        clock.now = 60.0
        anthropic = await http.post(
            _messages_url(sim), json=MESSAGES_BODY, headers=ANTHROPIC_HEADERS
        )
    assert seen == [
        (200, "2", "1m0s", None),
        (200, "1", "58.5s", None),
        (200, "0", "57.5s", None),
        (429, "0", "47.5s", "48"),
    ]
    assert anthropic.status_code == 200
    assert anthropic.headers["anthropic-ratelimit-requests-limit"] == "3"
    assert anthropic.headers["anthropic-ratelimit-requests-remaining"] == "2"
    assert anthropic.headers["anthropic-ratelimit-requests-reset"] == "2015-10-21T07:29:00Z"


def test_script_then_seeded_random_draws() -> None:
    plan = FaultPlan([Fault.http(500), None, Fault.reset()], rate=0.0)
    assert [plan.draw() for _ in range(5)] == [Fault.http(500), None, Fault.reset(), None, None]
    first = FaultPlan(rate=0.2, seed=7)
    second = FaultPlan(rate=0.2, seed=7)
    draws = [first.draw() for _ in range(1000)]
    assert draws == [second.draw() for _ in range(1000)]
    hits = [d for d in draws if d is not None]
    assert 150 <= len(hits) <= 250
    assert {d.label for d in hits} == {f.label for f in DEFAULT_MIX}
    always = FaultPlan(rate=1.0, mix=[Fault.http(503)])
    assert {always.draw() for _ in range(20)} == {Fault.http(503)}


@pytest.mark.parametrize("kwargs", [{"rate": 1.5}, {"rate": -0.1}, {"rate": 0.5, "mix": []}])
def test_plan_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="rate"):
        FaultPlan(**kwargs)


WIRES = [
    ("openai", "gpt-4o"),
    ("openai-responses", "gpt-5.5"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-3.8-flash"),
]


def _wire_client(sim: Simulator, provider: str, model: str, clock: FakeClock) -> Client:
    src = Source(provider, model, api_key="sk-sim", base_url=sim.base_url(provider))
    return client_with([src], clock=clock)


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_every_wire_retries_faults_before_output(
    sim: Simulator, plan: FaultPlan, provider: str, model: str
) -> None:
    clock = FakeClock()
    async with _wire_client(sim, provider, model, clock) as client:
        clean: list[str] = []
        await collect(client.stream(MESSAGES), clean)
        for fault in (
            Fault.http(503),
            Fault.http(429, retry_after=3),
            Fault.reset(),
            Fault.malformed(after_chunks=0),
            Fault.in_band("overloaded_error", after_chunks=0),
        ):
            plan.add(fault)
            before = sim.stats.requests
            texts: list[str] = []
            await collect(client.stream(MESSAGES), texts)
            assert (fault.label, sim.stats.requests - before, texts) == (fault.label, 2, clean)
    assert len(clean) == 12
    assert clock.sleeps == [0.5, 3.0, 0.5, 0.5, 0.5]
    assert plan.injected == {"503": 1, "429": 1, "reset": 1, "malformed_mid": 1, "in_band_mid": 1}


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_every_wire_reports_a_cut_after_output(
    sim: Simulator, plan: FaultPlan, provider: str, model: str
) -> None:
    clock = FakeClock()
    async with _wire_client(sim, provider, model, clock) as client:
        for fault in (Fault.reset(after_chunks=9), Fault.in_band("api_error", after_chunks=9)):
            plan.add(fault)
            before = sim.stats.requests
            texts: list[str] = []
            with pytest.raises(StreamInterruptedError) as caught:
                await collect(client.stream(MESSAGES), texts)
            assert sim.stats.requests - before == 1
            assert texts
            assert caught.value.partial is not None
            assert caught.value.partial.text == "".join(texts)
            assert type(caught.value.__cause__) is TransientError
    assert clock.sleeps == []
