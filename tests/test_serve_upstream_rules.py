"""What ``polythink serve`` sends upstream under the routed model's rules, and what it relays
back: sampling parameters a thinking model refuses dropped with a warning on every door (case
C02), ``output_config.effort`` translated for a model that takes a budget, SSE comments
never relayed inside ``data:`` (case C17), and an error that breaks a started stream keeping
its kind.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink.errors import RateLimitedError, StreamInterruptedError, TransientError
from polythink.serve.exchange import classify
from polythink.simulator import Simulator
from polythink.simulator.faults import Fault
from tests.conftest import sdk_module
from tests.gateway_support import GatewayServer, Recorder, gateway, gateway_config, recorder, sim

openai = sdk_module("openai")

__all__ = ["gateway", "recorder", "sim"]

HAIKU = "anthropic/claude-haiku-4-5"
"""A manual-thinking model (``thinking: enabled`` with ``budget_tokens``, no effort field)."""
PROMPT = [{"role": "user", "content": "classify: ok"}]
VERSION = {"anthropic-version": "2023-06-01"}
"""What the Anthropic SDKs send: a version that still takes sampling parameters."""


def _asked(**fields: Any) -> dict[str, Any]:
    """A Messages body for claude-haiku-4-5 with ``fields``."""
    return {"model": HAIKU, **fields, "messages": PROMPT}


def _manual(max_tokens: int, budget: int) -> dict[str, Any]:
    """What claude-haiku-4-5 gets with manual thinking: no sampling parameter."""
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": max_tokens,
        "messages": PROMPT,
        "thinking": {"type": "enabled", "budget_tokens": budget},
    }


def _sent(recorder: Recorder, path: str) -> Any:
    return json.loads(recorder.last(path).body)


def _post(gateway: GatewayServer, path: str, body: dict[str, Any]) -> httpx.Response:
    answer = httpx.post(gateway.root + path, json=body, headers=VERSION, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer


# -- C02: sampling parameters with thinking on ----------------------------------------------


@pytest.fixture
def fresh(sim: Simulator) -> Iterator[GatewayServer]:
    """A gateway of its own: its transports have logged nothing yet."""
    with GatewayServer(gateway_config(sim)) as server:
        yield server


def test_adaptive_thinking_rewritten_for_a_manual_model_loses_temperature(
    fresh: GatewayServer, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """C02 as reported: adaptive thinking becomes manual thinking on claude-haiku-4-5, and the
    caller's ``temperature: 0``, which Anthropic refuses with thinking on, is dropped with a
    warning in the answer and the log."""
    caplog.set_level(logging.WARNING, logger="polythink")
    body = _asked(max_tokens=2048, temperature=0, thinking={"type": "adaptive"})
    answer = _post(fresh, "/v1/messages", body)
    assert _sent(recorder, "/messages") == _manual(10240, 8192)
    dropped = (
        "dropped temperature=0 (only 1 or unset with thinking.type=enabled) for anthropic "
        "model 'claude-haiku-4-5' (drop_params=True)"
    )
    warnings = answer.headers["x-polythink-warnings"].split(" | ")
    assert warnings[0] == (
        "reasoning fields rewritten for anthropic model 'claude-haiku-4-5': the request asked "
        "'auto' in the anthropic dialect (thinking.type), sent 'medium' as the model takes it"
    )
    assert warnings[1] == dropped
    assert [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()] == [
        f"source 0: {dropped}"
    ]


def test_manual_thinking_as_written_loses_temperature_and_top_k(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    body = _asked(
        max_tokens=20000,
        temperature=0,
        top_k=5,
        thinking={"type": "enabled", "budget_tokens": 8192},
    )
    expected = _manual(20000, 8192)
    warnings = (
        "dropped temperature=0 (only 1 or unset with thinking.type=enabled) for anthropic "
        "model 'claude-haiku-4-5' (drop_params=True) | dropped top_k=5 (not accepted with "
        "thinking.type=enabled) for anthropic model 'claude-haiku-4-5' (drop_params=True)"
    )
    answer = _post(gateway, "/v1/messages", body)
    assert _sent(recorder, "/messages") == expected
    assert answer.headers["x-polythink-warnings"] == warnings
    # Streamed, the body is relayed as the API writes it: the head says what was dropped.
    with httpx.stream(
        "POST", gateway.root + "/v1/messages", json={**body, "stream": True}, headers=VERSION
    ) as streamed:
        assert streamed.status_code == 200
        assert streamed.headers["x-polythink-warnings"] == warnings
        text = streamed.read().decode()
    assert _sent(recorder, "/messages") == {**expected, "stream": True}
    assert "event: message_stop" in text
    summary = json.loads(text.rstrip().splitlines()[-1].removeprefix(": polythink "))
    assert summary["warnings"] == warnings.split(" | ")


HAIKU_HIGH = {
    "model": "claude-haiku-4-5",
    "max_tokens": 20480,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "classify: ok"}]}],
    "stream": False,
    "thinking": {"type": "enabled", "budget_tokens": 16384},
}
"""What a typed call at ``high`` to claude-haiku-4-5 sends: no ``temperature`` (the source's
``anthropic-version`` 2026-10-21 has none, and thinking is on)."""


@pytest.mark.parametrize(
    ("path", "body", "upstream", "expected", "warning"),
    [
        (
            "/v1/chat/completions",
            {"model": HAIKU, "temperature": 0, "reasoning_effort": "high", "messages": PROMPT},
            "/messages",
            HAIKU_HIGH,
            "dropped temperature=0 for anthropic model 'claude-haiku-4-5' (drop_params=True)",
        ),
        (
            "/v1/responses",
            {"model": HAIKU, "temperature": 0, "reasoning": {"effort": "high"}, "input": PROMPT},
            "/messages",
            HAIKU_HIGH,
            "dropped temperature=0 for anthropic model 'claude-haiku-4-5' (drop_params=True)",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "openai/gpt-5.5",
                "temperature": 0,
                "top_p": 0.5,
                "reasoning_effort": "high",
                "messages": PROMPT,
            },
            "/chat/completions",
            {"model": "gpt-5.5", "reasoning_effort": "high", "messages": PROMPT},
            "dropped temperature=0 for openai model 'gpt-5.5' (drop_params=True) | dropped "
            "top_p=0.5 for openai model 'gpt-5.5' (drop_params=True)",
        ),
        (
            "/v1/responses",
            {
                "model": "to-responses",
                "temperature": 0,
                "reasoning": {"effort": "high"},
                "input": "hi",
            },
            "/responses",
            {"model": "gpt-5.5", "reasoning": {"effort": "high"}, "input": "hi"},
            "dropped temperature=0 for openai-responses model 'gpt-5.5' (drop_params=True)",
        ),
    ],
    ids=["chat-to-anthropic", "responses-to-anthropic", "chat-as-written", "responses-as-written"],
)
def test_the_openai_doors_drop_what_a_reasoning_model_refuses(
    gateway: GatewayServer,
    recorder: Recorder,
    path: str,
    body: dict[str, Any],
    upstream: str,
    expected: dict[str, Any],
    warning: str,
) -> None:
    """Translated for Anthropic or sent as written to OpenAI, the sampling rules hold: a
    gateway's caller cannot set ``drop_params``, so the gateway drops, and says so."""
    answer = _post(gateway, path, body)
    assert _sent(recorder, upstream) == expected
    assert answer.headers["x-polythink-warnings"] == warning
    assert answer.headers["x-polythink-applied-effort"] == "high"


# -- output_config.effort on a model that takes a budget -------------------------------------


def test_output_config_effort_becomes_the_budget_a_manual_model_takes(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    body = _asked(max_tokens=2048, output_config={"effort": "high"})
    answer = _post(gateway, "/v1/messages", body)
    # As `polythink resolve --provider anthropic --model claude-haiku-4-5 --effort high` says.
    assert _sent(recorder, "/messages") == _manual(18432, 16384)
    assert answer.headers["x-polythink-requested-effort"] == "high"
    assert answer.headers["x-polythink-applied-effort"] == "high"
    assert answer.headers["x-polythink-reasoning"] == "observed"
    assert answer.headers["x-polythink-warnings"] == (
        "reasoning fields rewritten for anthropic model 'claude-haiku-4-5': the request asked "
        "'high' in the anthropic dialect (output_config.effort), sent 'high' as the model "
        "takes it"
    )
    # Beside manual thinking, the effort field is still not the model's: one tier, in its
    # own fields (the output ceiling keeps the caller's room).
    mixed = {**body, "max_tokens": 20000, "thinking": {"type": "enabled", "budget_tokens": 4000}}
    answer = _post(gateway, "/v1/messages", mixed)
    assert _sent(recorder, "/messages") == _manual(36384, 16384)
    assert answer.headers["x-polythink-applied-effort"] == "high"


@pytest.mark.parametrize(
    ("path", "body", "upstream", "model"),
    [
        ("/v1/messages", _asked(max_tokens=2048, temperature=0), "/messages", "claude-haiku-4-5"),
        (
            "/v1/chat/completions",
            {
                "model": "openai/gpt-5.5",
                "temperature": 0,
                "reasoning_effort": "none",
                "messages": PROMPT,
            },
            "/chat/completions",
            "gpt-5.5",
        ),
        (
            "/v1/messages",
            {
                "model": "to-anthropic",
                "max_tokens": 2048,
                "thinking": {"type": "adaptive"},
                "output_config": {"effort": "high"},
                "messages": PROMPT,
            },
            "/messages",
            "claude-sonnet-4-6",
        ),
    ],
    ids=["no-thinking", "reasoning-off", "effort-to-an-adaptive-model"],
)
def test_what_the_model_takes_goes_as_written(
    gateway: GatewayServer,
    recorder: Recorder,
    path: str,
    body: dict[str, Any],
    upstream: str,
    model: str,
) -> None:
    """Without thinking ``temperature: 0`` is kept, and ``output_config.effort`` is the own
    field of an adaptive model: the body goes as the caller wrote it, without a warning."""
    answer = _post(gateway, path, body)
    assert _sent(recorder, upstream) == {**body, "model": model}
    assert "x-polythink-warnings" not in answer.headers


# -- C17: SSE comments never relayed as data -------------------------------------------------

_COMMENTED = re.compile(r"^data: *:", re.MULTILINE)
KEEPALIVE = b": OPENROUTER PROCESSING\n\n"
WRAPPED = b"data: : OPENROUTER PROCESSING\n\n"


def _data_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("data:")]


def test_the_c17_bytes_reach_the_chat_sdk_as_one_content_event(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    chunk = (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    )
    stop = (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    client = openai.OpenAI(base_url=gateway.v1, api_key="unused", max_retries=0)
    for upstream in (
        KEEPALIVE + KEEPALIVE + chunk + stop + b"data: [DONE]\n\n",
        WRAPPED + chunk + WRAPPED + stop + b"data: [DONE]\n\n",
    ):
        recorder.add(Fault.raw(upstream))
        with httpx.stream(
            "POST",
            gateway.v1 + "/chat/completions",
            json={"model": "to-chat", "messages": PROMPT, "stream": True},
        ) as answer:
            text = answer.read().decode()
        assert not _COMMENTED.search(text)
        assert _data_lines(text) == [chunk.decode().strip(), stop.decode().strip(), "data: [DONE]"]
        recorder.add(Fault.raw(upstream))
        stream = client.chat.completions.create(model="to-chat", messages=PROMPT, stream=True)
        contents = [c.choices[0].delta.content for c in stream]
        assert [text for text in contents if text] == ["ok"]


@pytest.mark.parametrize(
    ("path", "upstream", "body"),
    [
        (
            "/v1/chat/completions",
            "/chat/completions",
            {
                "model": "to-chat",
                "messages": PROMPT,
                "stream_options": {"include_usage": True},
            },
        ),
        ("/v1/responses", "/responses", {"model": "to-responses", "input": "hi"}),
        ("/v1/messages", "/messages", {"model": "to-anthropic", "max_tokens": 500}),
    ],
    ids=["chat", "responses", "messages"],
)
def test_no_door_relays_a_comment_as_data(
    gateway: GatewayServer, recorder: Recorder, path: str, upstream: str, body: dict[str, Any]
) -> None:
    """The provider's own stream with OpenRouter's keep-alive after every event, as a
    comment and wrapped in ``data:``: the caller gets the provider's data events, byte for
    byte, and nothing else as data."""
    body = {"messages": PROMPT, **body, "stream": True}
    with httpx.stream("POST", gateway.root + path, json=body, headers=VERSION) as answer:
        clean = answer.read().decode()
    raw = bytes(recorder.last(upstream).answer)
    assert _data_lines(clean) == _data_lines(raw.decode())
    noisy = b"".join(event + b"\n\n" + KEEPALIVE + WRAPPED for event in raw.split(b"\n\n"))
    recorder.add(Fault.raw(noisy))
    with httpx.stream("POST", gateway.root + path, json=body, headers=VERSION) as answer:
        assert answer.status_code == 200
        text = answer.read().decode()
    assert not _COMMENTED.search(text)
    assert _data_lines(text) == _data_lines(clean)


# -- an error that breaks a started stream ---------------------------------------------------


def test_a_broken_stream_is_classified_by_its_cause() -> None:
    cause = RateLimitedError("slow down", status_code=200, error_type="rate_limit_error")
    broken = StreamInterruptedError("broke after output began: slow down")
    broken.__cause__ = cause
    assert classify(broken) == (429, "rate_limit")
    overloaded = StreamInterruptedError("x", error_type="overloaded_error")
    overloaded.__cause__ = TransientError("x", status_code=200, error_type="overloaded_error")
    assert classify(overloaded) == (529, "overloaded")
    assert classify(StreamInterruptedError("no cause")) == (502, "api_error")


def test_a_rate_limit_after_output_keeps_its_kind_in_each_door(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    """Rendered by the door (another wire answered): Chat's error chunk carries
    ``type``/``code`` (openai-python raises ``APIError`` with them, the only class a
    stream's error can have there), Responses' ``response.failed`` its ``code``, Messages'
    ``error`` event its ``type``."""
    client = openai.OpenAI(base_url=gateway.v1, api_key="unused", max_retries=0)
    recorder.add(Fault.in_band("rate_limit_error", after_chunks=4))
    stream = client.chat.completions.create(model="to-anthropic", messages=PROMPT, stream=True)
    with pytest.raises(openai.APIError) as raised:
        for _ in stream:
            pass
    assert (raised.value.type, raised.value.code) == ("rate_limit_error", "rate_limit_exceeded")
    for path, body in (
        ("/v1/responses", {"model": "to-chat", "input": "hi"}),
        ("/v1/messages", {"model": "to-chat", "max_tokens": 500, "messages": PROMPT}),
    ):
        recorder.add(Fault.in_band("rate_limit_error", after_chunks=4))
        with httpx.stream(
            "POST", gateway.root + path, json={**body, "stream": True}, headers=VERSION
        ) as answer:
            last = json.loads(_data_lines(answer.read().decode())[-1].removeprefix("data: "))
        if path == "/v1/responses":
            assert last["type"] == "response.failed"
            assert last["response"]["error"]["code"] == "rate_limit_exceeded"
        else:
            assert last["type"] == "error"
            assert last["error"]["type"] == "rate_limit_error"
