"""``polythink serve`` with the official SDKs and raw HTTP: errors in each front door's shape
and status (each SDK's own exception classes), count_tokens, the model list, the effort and
cost headers, structured output across wires, keep-alive frames, Codex's WebSocket upgrade,
size limits, and no caller key anywhere in an answer or a log line.
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from polythink.serve import RouteConfig
from polythink.simulator.faults import Fault
from tests.conftest import sdk_module
from tests.gateway_support import (
    GatewayServer,
    Recorder,
    gateway,
    gateway_config,
    recorder,
    sim,
)

openai = sdk_module("openai")
anthropic = sdk_module("anthropic")

__all__ = ["gateway", "recorder", "sim"]

CALLER_KEY = "sk-caller-secret-0123456789abcdef"
HI = [{"role": "user", "content": "hi"}]


def _openai(gateway: GatewayServer) -> Any:
    return openai.OpenAI(base_url=gateway.v1, api_key=CALLER_KEY, max_retries=0)


def _anthropic(gateway: GatewayServer) -> Any:
    return anthropic.Anthropic(base_url=gateway.root, api_key=CALLER_KEY, max_retries=0)


class City(BaseModel):
    name: str
    population: int


# -- errors --------------------------------------------------------------------------------


def test_errors_are_each_sdks_own_classes(gateway: GatewayServer, recorder: Recorder) -> None:
    chat, messages = _openai(gateway), _anthropic(gateway)
    with pytest.raises(openai.NotFoundError) as missing:
        chat.chat.completions.create(model="no-such-route", messages=HI)
    assert missing.value.code == "model_not_found"
    assert missing.value.param == "model"
    with pytest.raises(openai.BadRequestError) as bad:
        chat.chat.completions.create(model="to-chat", messages=[])
    assert bad.value.param == "messages"
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        chat.responses.create(model="to-responses", input="hi", previous_response_id="resp_1")
    with pytest.raises(anthropic.NotFoundError):
        messages.messages.create(model="no-such-route", max_tokens=10, messages=HI)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        messages.messages.create(model="to-anthropic", max_tokens=0, messages=HI)
    recorder.add(Fault.http(429), Fault.http(529))
    with pytest.raises(openai.RateLimitError):
        chat.chat.completions.create(model="to-chat", messages=HI)
    with pytest.raises(anthropic.OverloadedError):
        messages.messages.create(model="to-anthropic", max_tokens=10, messages=HI)
    recorder.add(Fault.http(500))
    with pytest.raises(openai.InternalServerError):
        chat.responses.create(model="to-anthropic", input="hi")


def test_an_upstream_error_body_comes_back_unmodified(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    """Same wire: Claude Code's recovery matches on the API's wording, so the body and the
    status are the API's, byte for byte."""
    body = {
        "model": "to-anthropic",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [{"type": "thinking", "thinking": "x", "signature": "forged"}],
            },
            {"role": "user", "content": "again"},
        ],
    }
    headers = {"anthropic-version": "2023-06-01", "x-api-key": CALLER_KEY}
    answer = httpx.post(f"{gateway.root}/v1/messages", json=body, headers=headers)
    upstream = recorder.last("/messages")
    assert answer.status_code == 400
    assert answer.content == bytes(upstream.answer)
    assert b"Invalid `signature` in `thinking` block" in answer.content
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        _anthropic(gateway).messages.create(**{**body, "model": "to-anthropic"})


def test_bad_input_gets_the_doors_error_never_a_traceback(gateway: GatewayServer) -> None:
    for path, shape in (
        ("/v1/chat/completions", "error"),
        ("/v1/responses", "error"),
        ("/v1/messages", "type"),
    ):
        for content in (b"{not json", b"[1, 2]", b'{"model": 7}'):
            answer = httpx.post(gateway.root + path, content=content)
            assert answer.status_code == 400
            data = answer.json()
            assert shape in data
            assert "Traceback" not in answer.text
    answer = httpx.post(
        gateway.v1 + "/chat/completions",
        json={"model": "to-chat", "messages": HI, "api_base": "http://169.254.169.254"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "api_base"


_HI_TURN = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/responses", {"input": "\ud800"}, "input"),
        ("/v1/responses", {"input": "hi", "instructions": "\ud800"}, "instructions"),
        ("/v1/responses", {"input": "hi", "instructions": 5}, "instructions"),
        (
            "/v1/responses",
            {"input": [{"type": "reasoning", "summary": 5, "encrypted_content": "x"}]},
            "input[0].summary",
        ),
        (
            "/v1/responses",
            {"input": [{"type": "reasoning", "summary": [], "content": [7]}]},
            "input[0].content",
        ),
        (
            "/v1/responses",
            {"input": [{"role": "assistant", "content": {"text": "x"}}]},
            "input[0].content",
        ),
        ("/v1/responses", {"input": [{"role": "user", "content": "\ud800"}]}, "input[0]"),
        ("/v1/messages", {"system": [{}]}, "system"),
        ("/v1/messages", {"system": "\ud800"}, "system"),
        ("/v1/messages", {"system": [{"type": "text", "text": "\ud800"}]}, "system"),
        ("/v1/messages", {"messages": [{"role": "user", "content": [{}]}]}, "messages.0"),
        ("/v1/messages", {"messages": [{"role": "user", "content": "\ud800"}]}, "messages.0"),
        (
            "/v1/chat/completions",
            {
                "messages": [
                    *_HI_TURN,
                    {"role": "assistant", "content": "x", "reasoning_details": 5},
                ]
            },
            "messages[1]",
        ),
        (
            "/v1/chat/completions",
            {
                "messages": [
                    *_HI_TURN,
                    {"role": "assistant", "content": "x", "reasoning_items": "x"},
                ]
            },
            "messages[1]",
        ),
        (
            "/v1/chat/completions",
            {"messages": [*_HI_TURN, {"role": "assistant", "content": "x", "tool_calls": 5}]},
            "messages[1]",
        ),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{}]}]}, "messages[0]"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "system", "content": "\ud800"}]},
            "messages[0]",
        ),
        # A string or a number where the SDKs send a JSON boolean: never read as true.
        ("/v1/chat/completions", {"messages": _HI_TURN, "stream": "no"}, "stream"),
        ("/v1/responses", {"input": "hi", "stream": 1}, "stream"),
        ("/v1/messages", {"stream": "false"}, "stream"),
    ],
)
def test_malformed_input_is_the_doors_400_naming_the_field(
    gateway: GatewayServer, recorder: Recorder, path: str, body: dict[str, Any], param: str
) -> None:
    """Bad input inside a body (a lone surrogate, a wrong type in a nested field) is the
    caller's: 400 in the door's shape naming the field, and nothing sent upstream."""
    door = {
        "/v1/responses": {"model": "to-responses"},
        "/v1/messages": {"model": "to-anthropic", "max_tokens": 10, "messages": _HI_TURN},
        "/v1/chat/completions": {"model": "to-chat"},
    }[path]
    sent = len(recorder.exchanges)
    answer = httpx.post(
        gateway.root + path,
        content=json.dumps({**door, **body}).encode(),
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 400, answer.text
    data = answer.json()
    if path == "/v1/messages":
        assert data["type"] == "error"
        assert data["error"]["type"] == "invalid_request_error"
        assert data["error"]["message"].startswith(f"{param}: ")
    else:
        assert data["error"]["type"] == "invalid_request_error"
        assert data["error"]["param"] == param
        assert data["error"]["message"].startswith(f"{param}")
    assert len(recorder.exchanges) == sent


def test_size_limits(sim: Any) -> None:
    config = gateway_config(sim)
    settings = type(config.settings)(max_body_bytes=4096, max_header_bytes=2048)
    with GatewayServer(
        type(config)(sources=config.sources, routes=config.routes, settings=settings)
    ) as small:
        big = {
            "model": "to-anthropic",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x" * 5000}],
        }
        with pytest.raises(anthropic.RequestTooLargeError):
            _anthropic(small).messages.create(**big)
        answer = httpx.post(small.v1 + "/chat/completions", json={**big, "model": "to-chat"})
        assert answer.status_code == 413
        assert answer.json()["error"]["code"] == "request_too_large"
        answer = httpx.post(
            small.v1 + "/chat/completions", json=big, headers={"x-long": "y" * 3000}
        )
        assert answer.status_code == 431
        assert answer.json()["error"]["code"] == "request_header_fields_too_large"


SECRET = b"sk-CALLERSECRET-"


def _raw(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request written as given on a fresh connection: the status, headers and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(data)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return int(status_line.split(" ")[1]), {k.lower(): v for k, v in headers.items()}, body


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        pytest.param(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + SECRET
            + b"a" * 17000
            + b"\r\n\r\n",
            431,
            "request_header_fields_too_large",
            id="header-field-too-long",
        ),
        pytest.param(
            b"GET /v1/models?key=" + SECRET + b"a" * 17000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            431,
            "request_header_fields_too_large",
            id="request-line-too-long",
        ),
        pytest.param(
            b"GET /v1/models HTTP/1.1\r\n"
            + b"".join(b"x-%d: %s\r\n" % (i, SECRET) for i in range(200))
            + b"\r\n",
            431,
            "request_header_fields_too_large",
            id="too-many-headers",
        ),
        pytest.param(
            b"GE\x01T /" + SECRET + b" HTTP/1.1\r\n\r\n", 400, "malformed_request", id="bad-method"
        ),
        pytest.param(
            b"GET / HTTP/1.1\r\nx-api key: " + SECRET + b"\r\n\r\n",
            400,
            "malformed_request",
            id="bad-header-name",
        ),
        pytest.param(
            b"GET / HTTP/1.1\r\nx-api-key: " + SECRET + b"\x00\r\n\r\n",
            400,
            "malformed_request",
            id="bad-header-value",
        ),
    ],
)
def test_a_request_the_parser_refuses_is_answered_without_its_bytes(
    gateway: GatewayServer,
    caplog: pytest.LogCaptureFixture,
    request_bytes: bytes,
    status: int,
    code: str,
) -> None:
    """aiohttp's own answer quotes the line it could not read (a caller's key with it):
    the gateway's is JSON both SDKs read, and neither it nor the log line holds the key."""
    caplog.set_level(logging.DEBUG)
    got, headers, body = _raw(gateway.port, request_bytes)
    assert got == status
    assert headers["content-type"] == "application/json"
    assert SECRET not in body
    assert b"aaaa" not in body
    data = json.loads(body)
    assert set(data) == {"type", "error"}
    assert data["type"] == "error"
    assert data["error"]["type"] == "invalid_request_error"
    assert data["error"]["code"] == code
    assert data["error"]["param"] is None
    assert data["error"]["message"]
    refused = [r for r in caplog.records if r.getMessage().startswith("refused a request")]
    assert len(refused) == 1
    assert f"({status} {code})" in refused[0].getMessage()
    assert SECRET.decode() not in caplog.text


def test_no_caller_key_in_answers_or_logs(
    gateway: GatewayServer, recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    recorder.add(Fault.http(401))
    answers = [
        httpx.post(
            gateway.v1 + "/chat/completions",
            json={"model": model, "messages": HI},
            headers={"authorization": f"Bearer {CALLER_KEY}"},
        )
        for model in ("to-chat", "missing", "anthropic/claude-sonnet-4-6")
    ]
    assert [a.status_code for a in answers] == [401, 404, 200]
    upstream = recorder.exchanges[-1]
    assert CALLER_KEY not in json.dumps(upstream.headers)
    for answer in answers:
        assert CALLER_KEY not in answer.text
        assert CALLER_KEY not in json.dumps(dict(answer.headers))
    assert CALLER_KEY not in caplog.text


# -- the headers of what polythink did ----------------------------------------------------


def test_effort_headers_and_nearest_tier_rewrite(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    raw = _openai(gateway).chat.completions.with_raw_response.create(
        model="openai/gpt-5.5", messages=HI, reasoning_effort="minimal"
    )
    headers = raw.headers
    # gpt-5.5 takes none, low, medium, high, xhigh: minimal maps to low, and the body says so.
    assert headers["x-polythink-requested-effort"] == "minimal"
    assert headers["x-polythink-applied-effort"] == "low"
    assert headers["x-polythink-reasoning"] == "observed"
    assert headers["x-polythink-source"] == "openai/gpt-5.5"
    assert float(headers["x-polythink-cost-usd"]) > 0
    assert float(headers["x-polythink-gateway-ms"]) >= 0
    assert "reasoning fields rewritten" in headers["x-polythink-warnings"]
    sent = json.loads(recorder.last("/chat/completions").body)
    assert sent["reasoning_effort"] == "low"
    assert raw.parse().choices[0].message.content


def test_a_budget_in_thinking_reads_as_a_tier_and_translates(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    raw = _anthropic(gateway).messages.with_raw_response.create(
        model="to-chat",
        max_tokens=5000,
        messages=HI,
        thinking={"type": "enabled", "budget_tokens": 16000},
    )
    assert raw.headers["x-polythink-requested-effort"] == "high"
    assert raw.headers["x-polythink-applied-effort"] == "high"
    sent = json.loads(recorder.last("/chat/completions").body)
    assert sent["thinking"] == {"type": "enabled"}
    assert sent["reasoning_effort"] == "high"


def test_streams_say_it_early_and_at_the_end(gateway: GatewayServer) -> None:
    with httpx.stream(
        "POST",
        gateway.root + "/v1/messages",
        json={
            "model": "to-responses",
            "max_tokens": 1000,
            "messages": HI,
            "output_config": {"effort": "xhigh"},
            "stream": True,
        },
    ) as answer:
        head = dict(answer.headers)
        lines = [line for line in answer.iter_lines() if line]
    assert head["x-polythink-requested-effort"] == "xhigh"
    assert head["x-polythink-applied-effort"] == "xhigh"
    assert head["x-polythink-source"] == "openai-responses/gpt-5.5"
    trailer = lines[-1]
    assert trailer.startswith(": polythink ")
    summary = json.loads(trailer.removeprefix(": polythink "))
    assert summary["applied_effort"] == "xhigh"
    assert summary["reasoning"] == "observed"
    assert summary["cost_usd"] > 0
    assert summary["cache"] == "miss"


# -- count_tokens, models ------------------------------------------------------------------


def test_count_tokens(gateway: GatewayServer) -> None:
    client = _anthropic(gateway)
    system = "Be brief."
    counted = client.messages.count_tokens(model="to-anthropic", system=system, messages=HI)
    answered = client.messages.create(
        model="to-anthropic", system=system, max_tokens=50, messages=HI
    )
    assert counted.input_tokens == answered.usage.input_tokens
    raw = client.messages.with_raw_response.count_tokens(model="to-chat", messages=HI)
    assert raw.headers["x-polythink-token-count"] == "estimate"
    assert raw.parse().input_tokens == 4  # 2 characters -> 1 token, plus 3 of framing


def test_models_list_in_each_sdk(gateway: GatewayServer) -> None:
    names = ["to-anthropic", "to-chat", "to-responses", "to-gemini"]
    assert [m.id for m in _openai(gateway).models.list()][:4] == names
    listed = _anthropic(gateway).models.list(limit=1000)
    assert [m.id for m in listed.data][:4] == names
    assert listed.data[0].display_name == "to-anthropic"
    answer = httpx.get(gateway.v1 + "/models", params={"limit": 1000}, follow_redirects=False)
    assert answer.status_code == 200
    assert "models" not in answer.json()
    codex = httpx.get(gateway.v1 + "/models", params={"client_version": "0.153.4"}).json()
    assert codex["models"] == []
    assert (
        _openai(gateway).models.retrieve("anthropic/claude-opus-4-5").id
        == "anthropic/claude-opus-4-5"
    )


def test_codex_websocket_upgrade_is_426(gateway: GatewayServer) -> None:
    answer = httpx.get(
        gateway.v1 + "/responses",
        headers={"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13"},
    )
    assert answer.status_code == 426
    assert answer.json()["error"]["type"] == "invalid_request_error"


# -- structured output -----------------------------------------------------------------------


def test_structured_output_through_each_door(gateway: GatewayServer, recorder: Recorder) -> None:
    client = _openai(gateway)
    parsed = (
        client.chat.completions.parse(
            model="to-anthropic",
            messages=[{"role": "user", "content": "A city."}],
            response_format=City,
        )
        .choices[0]
        .message.parsed
    )
    assert isinstance(parsed, City)
    assert "output_config" in json.loads(recorder.last("/messages").body)
    answer = client.responses.parse(model="to-gemini", input="A city.", text_format=City)
    assert isinstance(answer.output_parsed, City)
    assert "responseJsonSchema" in recorder.last().body.decode()
    message = _anthropic(gateway).messages.parse(
        model="to-chat",
        max_tokens=500,
        messages=[{"role": "user", "content": "A city."}],
        output_format=City,
    )
    assert isinstance(message.parsed_output, City)
    # DeepSeek takes JSON mode, with the schema in the instructions (STRUCTURED.md).
    sent = json.loads(recorder.last("/chat/completions").body)
    assert sent["response_format"] == {"type": "json_object"}


# -- keep-alive --------------------------------------------------------------------------


def test_keepalive_frames_in_a_silent_stream(sim: Any) -> None:
    config = gateway_config(sim, keepalive=0.05)
    sim.settings.latency = 0.3
    try:
        with GatewayServer(config) as slow:
            frames = {}
            for path, body in (
                ("/v1/messages", {"model": "to-anthropic", "max_tokens": 100, "messages": HI}),
                ("/v1/chat/completions", {"model": "to-anthropic", "messages": HI}),
                ("/v1/responses", {"model": "to-anthropic", "input": "hi"}),
            ):
                with httpx.stream(
                    "POST", slow.root + path, json={**body, "stream": True}
                ) as answer:
                    frames[path] = answer.read().decode()
    finally:
        sim.settings.latency = 0.0
    anthropic_stream = frames["/v1/messages"]
    assert anthropic_stream.startswith('event: ping\ndata: {"type": "ping"}\n\n')
    assert "event: message_stop" in anthropic_stream
    chat_stream = frames["/v1/chat/completions"]
    # Rendered by the door (Anthropic answered): it opens once silent, then comments.
    opening, rest = chat_stream.split("\n\n", 1)
    assert '"delta":{"role":"assistant","content":""}' in opening
    assert rest.startswith(": keepalive\n\n")
    assert "data: [DONE]" in chat_stream
    responses_stream = frames["/v1/responses"]
    # A typed stream opens once silent, and repeats response.in_progress.
    assert responses_stream.count("event: response.in_progress") >= 2
    assert "event: response.completed" in responses_stream


def test_a_route_fails_over_across_wires(sim: Any, recorder: Recorder) -> None:
    route = RouteConfig(
        name="claude-or-deepseek",
        sources=("anthropic/claude-sonnet-4-6", "deepseek/deepseek-v4-pro"),
    )
    with GatewayServer(gateway_config(sim, routes=(route,))) as server:
        recorder.add(Fault.http(503))
        raw = _anthropic(server).messages.with_raw_response.create(
            model="claude-or-deepseek", max_tokens=2000, messages=HI
        )
    assert raw.headers["x-polythink-source"] == "deepseek/deepseek-v4-pro"
    message = raw.parse()
    assert [block.type for block in message.content] == ["thinking", "text", "redacted_thinking"]
    assert message.stop_reason == "end_turn"


def test_a_relayed_stream_is_retried_before_content_and_never_after(
    sim: Any, recorder: Recorder
) -> None:
    body = {"model": "to-anthropic", "max_tokens": 200, "messages": HI, "stream": True}
    with GatewayServer(gateway_config(sim, max_retries=1)) as server:
        # Overloaded in the stream, right after message_start: retried, one stream reaches
        # the caller.
        start = len(recorder.exchanges)
        recorder.add(Fault.in_band("overloaded_error", after_chunks=1))
        with httpx.stream("POST", server.root + "/v1/messages", json=body) as answer:
            text = answer.read().decode()
        assert len(recorder.exchanges) - start == 2
        assert text.count("event: message_start") == 1
        assert "event: error" not in text
        assert "event: message_stop" in text
        # Cut after content reached the caller: no retry, and the stream ends in an error
        # event, never as a finished answer.
        start = len(recorder.exchanges)
        recorder.add(Fault.reset(after_chunks=5))
        client = _anthropic(server)
        with (
            pytest.raises(anthropic.APIStatusError, match="broke after output began"),
            client.messages.stream(model="to-anthropic", max_tokens=200, messages=HI) as events,
        ):
            events.get_final_message()
        assert len(recorder.exchanges) - start == 1


def test_a_relayed_chat_stream_has_usage_only_when_asked(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    """polythink asks the provider for usage on every stream (cost and budgets need it); the
    caller gets the usage chunk only when it asked for it."""
    chunks = {}
    for asked in (False, True):
        body: dict[str, Any] = {"model": "openai/gpt-5.5", "messages": HI, "stream": True}
        if asked:
            body["stream_options"] = {"include_usage": True}
        with httpx.stream("POST", gateway.v1 + "/chat/completions", json=body) as answer:
            lines = [line for line in answer.iter_lines() if line.startswith("data: {")]
        chunks[asked] = [json.loads(line[6:]) for line in lines]
        sent = json.loads(recorder.last("/chat/completions").body)
        assert sent["stream_options"] == {"include_usage": True}
    assert [c for c in chunks[False] if c["choices"] == []] == []
    (usage,) = [c for c in chunks[True] if c["choices"] == []]
    assert usage["usage"]["completion_tokens"] > 0


def test_a_native_only_request_on_another_wire_names_the_wire_with_its_article(
    gateway: GatewayServer, recorder: Recorder
) -> None:
    sent = len(recorder.exchanges)
    answer = httpx.post(
        gateway.root + "/v1/messages",
        json={
            "model": "to-chat",
            "max_tokens": 10,
            "messages": HI,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
    )
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert "only an anthropic source can serve this" in message
    assert len(recorder.exchanges) == sent


@pytest.mark.parametrize(
    ("error_type", "status", "raised"),
    [
        ("overloaded_error", 529, "OverloadedError"),
        ("rate_limit_error", 429, "RateLimitError"),
    ],
)
def test_an_in_stream_error_before_any_output_is_answered_with_its_status(
    gateway: GatewayServer, recorder: Recorder, error_type: str, status: int, raised: str
) -> None:
    # Case C18: Anthropic opens the stream with 200 and message_start, then sends an error
    # event; relayed as it came, anthropic-sdk-python raises a bare APIStatusError(200).
    recorder.add(Fault.in_band(error_type, after_chunks=0))
    with pytest.raises(anthropic.APIStatusError) as caught:
        _anthropic(gateway).messages.create(
            model="to-anthropic", max_tokens=10, messages=HI, stream=True
        )
    assert type(caught.value).__name__ == raised
    assert caught.value.status_code == status
    assert caught.value.body["error"]["type"] == error_type  # type: ignore[index]
