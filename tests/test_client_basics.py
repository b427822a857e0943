"""The client: sources tried in order, per-source reasoning, build-time checks, secrets, streams.

Failover rules (DESIGN §5): rate-limited, transient, auth and unsatisfiable-reasoning failures
move the call to the next source; a rejected request does not. With every source failing, the
last source's error is raised with the earlier ones in ``previous``. Sources here set
``max_retries=0`` so a failure reaches failover at once.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import re
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Effort, Message, Source, StreamEvent, ToolCall
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from tests.chatwire import ChunkedStream, collect, sent_json, sse, sse_response

HI = [{"role": "user", "content": "hi"}]
KEY = "sk-proj-SECRETSECRET0123456789"


def _source(provider: str, model: str, **kwargs: Any) -> Source:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_retries", 0)
    return Source(provider, model, **kwargs)


def _url(source: Source) -> str:
    return f"{source.endpoint}/chat/completions"


def _ok(text: str = "ok", reasoning_tokens: int = 5) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 3,
                "completion_tokens": 9,
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
            },
        },
    )


def _error(status: int, kind: str, message: str = "nope", **headers: str) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"type": kind, "message": message}}, headers=headers
    )


OPENAI = _source("openai", "gpt-5.5")
OPENROUTER = _source("openrouter", "openai/gpt-5.5")
DEEPSEEK = _source("deepseek", "deepseek-v4-flash")


# ---------------------------------------------------------------- failover


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (_error(429, "rate_limit_exceeded", **{"retry-after": "3"}), RateLimitedError),
        (_error(500, "server_error"), TransientError),
        (_error(503, "overloaded"), TransientError),
        (_error(529, "overloaded_error"), TransientError),
        (_error(401, "invalid_api_key"), AuthError),
        (_error(403, "permission_denied"), AuthError),
        (httpx.ConnectError("refused"), TransientError),
        (httpx.ReadTimeout("slow"), TransientError),
    ],
)
async def test_failing_source_moves_to_the_next(
    failure: httpx.Response | Exception, kind: type[PolythinkError]
) -> None:
    with respx.mock(assert_all_called=True) as mock:
        first = mock.post(_url(OPENAI)).mock(side_effect=[failure])
        second = mock.post(_url(OPENROUTER)).mock(return_value=_ok("from openrouter"))
        async with Client([OPENAI, OPENROUTER]) as client:
            response = await client.complete(HI)
    assert (first.call_count, second.call_count) == (1, 1)
    assert response.text == "from openrouter"
    assert (response.source_index, response.provider) == (1, "openrouter")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [
        _error(400, "invalid_request_error", "messages must not be empty"),
        _error(404, "not_found_error", "no such model"),
        _error(422, "invalid_request_error", "bad tools"),
    ],
)
async def test_rejected_request_does_not_move_to_the_next_source(failure: httpx.Response) -> None:
    with respx.mock(assert_all_called=False) as mock:
        mock.post(_url(OPENAI)).mock(return_value=failure)
        second = mock.post(_url(OPENROUTER)).mock(return_value=_ok())
        async with Client([OPENAI, OPENROUTER]) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete(HI)
    assert second.call_count == 0
    assert type(info.value) is RequestRejectedError
    assert (info.value.status_code, info.value.source_index) == (failure.status_code, 0)


@pytest.mark.anyio
async def test_unsatisfiable_reasoning_moves_on_without_an_http_call() -> None:
    strict = _source("openai", "gpt-5.1", effort_fallback="error")
    lenient = _source("openai", "gpt-5", base_url="https://eu.example.test/v1")
    with respx.mock(assert_all_called=False) as mock:
        refused = mock.post(_url(strict)).mock(return_value=_ok())
        accepted = mock.post(_url(lenient)).mock(return_value=_ok())
        async with Client([strict, lenient]) as client:
            response = await client.complete(HI, reasoning_effort="minimal")
    assert refused.call_count == 0
    assert sent_json(accepted.calls[0])["reasoning_effort"] == "minimal"
    assert (response.source_index, response.applied_effort) == (1, Effort.MINIMAL)


@pytest.mark.anyio
async def test_every_source_failing_raises_the_last_error_with_the_earlier_ones() -> None:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(OPENAI)).mock(return_value=_error(500, "server_error", "boom"))
        mock.post(_url(OPENROUTER)).mock(return_value=_error(401, "invalid_api_key", "who?"))
        mock.post(_url(DEEPSEEK)).mock(
            return_value=_error(429, "rate_limit_exceeded", "slow down", **{"retry-after": "7"})
        )
        async with Client([OPENAI, OPENROUTER, DEEPSEEK]) as client:
            with pytest.raises(RateLimitedError) as info:
                await client.complete(HI)
    last = info.value
    assert (last.provider, last.source_index, last.status_code, last.retry_after) == (
        "deepseek",
        2,
        429,
        7.0,
    )
    # One line naming each source's error.
    assert last.message == (
        "all 3 sources failed: "
        "source 0 (openai gpt-5.5): openai answered HTTP 500: boom "
        "(TransientError, HTTP 500, server_error); "
        "source 1 (openrouter openai/gpt-5.5): openrouter answered HTTP 401: who? "
        "(AuthError, HTTP 401, invalid_api_key); "
        "source 2 (deepseek deepseek-v4-flash): deepseek answered HTTP 429: slow down "
        "(RateLimitedError, HTTP 429, rate_limit_exceeded)"
    )
    assert "\n" not in str(last)
    assert [(type(e), e.source_index, e.status_code) for e in last.previous] == [
        (TransientError, 0, 500),
        (AuthError, 1, 401),
    ]


@pytest.mark.anyio
async def test_every_source_unsatisfiable_raises_thinking_unsupported_with_the_others() -> None:
    a = _source("glm", "glm-5.3", effort_fallback="error")
    b = _source("kimi", "kimi-k3.1-pro", effort_fallback="error")
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=_ok())
        async with Client([a, b]) as client:
            with pytest.raises(ThinkingUnsupportedError) as info:
                await client.complete(HI, reasoning_effort="none")
    assert route.call_count == 0
    assert info.value.source_index == 1
    assert "'kimi-k3.1-pro' cannot switch reasoning off" in str(info.value)
    assert [(e.source_index, type(e)) for e in info.value.previous] == [
        (0, ThinkingUnsupportedError)
    ]


@pytest.mark.anyio
async def test_applied_tier_is_each_sources_own_mapping() -> None:
    openai = _source("openai", "gpt-5.1")
    glm = _source("glm", "glm-5.3")
    with respx.mock(assert_all_called=True) as mock:
        first = mock.post(_url(openai)).mock(return_value=_error(429, "rate_limit_exceeded"))
        second = mock.post(_url(glm)).mock(return_value=_ok())
        async with Client([openai, glm]) as client:
            response = await client.complete(HI, reasoning_effort="medium")
    assert sent_json(first.calls[0])["reasoning_effort"] == "medium"
    body = sent_json(second.calls[0])
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "low")
    assert (response.requested_effort, response.applied_effort) == (Effort.MEDIUM, Effort.LOW)
    assert response.source_index == 1


@pytest.mark.anyio
async def test_source_default_effort_and_per_call_precedence() -> None:
    configured = _source("openai", "gpt-5.5", reasoning_effort="low")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(configured)).mock(return_value=_ok())
        async with Client([configured]) as client:
            default = await client.complete(HI)
            override = await client.complete(HI, reasoning_effort="high")
            off = await client.complete(HI, reasoning_effort=False)
    assert [sent_json(c).get("reasoning_effort") for c in route.calls] == ["low", "high", "none"]
    assert [r.applied_effort for r in (default, override, off)] == [
        Effort.LOW,
        Effort.HIGH,
        Effort.NONE,
    ]


@pytest.mark.anyio
async def test_stream_fails_over_only_before_its_first_event() -> None:
    body = sse({"choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]})
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(OPENAI)).mock(return_value=_error(503, "overloaded"))
        mock.post(_url(OPENROUTER)).mock(return_value=sse_response(body))
        async with Client([OPENAI, OPENROUTER]) as client:
            events = await collect(client.stream(HI))
    assert [(e.type, e.text) for e in events[:-1]] == [("text", "hello")]
    assert events[-1].response is not None
    assert events[-1].response.source_index == 1

    broken = b'data: {"choices":[{"index":0,"delta":{"content":"hel"}}]}\n\n'
    with respx.mock(assert_all_called=False) as mock:
        mock.post(_url(OPENAI)).mock(return_value=sse_response(broken))
        second = mock.post(_url(OPENROUTER)).mock(return_value=sse_response(body))
        async with Client([OPENAI, OPENROUTER]) as client:
            seen: list[StreamEvent] = []
            with pytest.raises(StreamInterruptedError) as info:
                await collect(client.stream(HI), seen)
    assert second.call_count == 0
    assert [(e.type, e.text) for e in seen] == [("text", "hel")]
    assert info.value.partial is not None
    assert info.value.partial.text == "hel"


# ---------------------------------------------------------------- configuration at build time


def test_unknown_provider_fails_at_source() -> None:
    with pytest.raises(
        ValueError,
        match=r"^unknown provider 'opneai' \(did you mean 'openai'\?\); known providers: openai, ",
    ):
        Source("opneai", "gpt-5.5", api_key=KEY)


def test_bad_effort_string_fails_at_source_with_the_accepted_values() -> None:
    with pytest.raises(ValueError, match="unknown reasoning effort") as info:
        Source("openai", "gpt-5.5", api_key=KEY, reasoning_effort="hgih")
    assert str(info.value) == (
        "unknown reasoning effort 'hgih'; accepted: none, minimal, low, medium, high, xhigh, "
        "max, auto (aliases: off, on, true, false; or a bool, or None for unset)"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"effort_fallback": "closest"}, "effort_fallback must be one of nearest, error, drop"),
        ({"rpm": 0}, "Source.rpm must be a positive finite number or None; got 0"),
        ({"tpm": -5}, "Source.tpm must be a positive finite number or None; got -5"),
        ({"rpm": "10"}, "Source.rpm must be a positive finite number or None; got '10'"),
        ({"rpm": float("nan")}, "Source.rpm must be a positive finite number or None; got nan"),
        ({"tpm": float("inf")}, "Source.tpm must be a positive finite number or None; got inf"),
        ({"max_concurrency": 0}, "Source.max_concurrency must be a positive int or None; got 0"),
        (
            {"max_concurrency": 1.5},
            "Source.max_concurrency must be a positive int or None; got 1.5",
        ),
        ({"max_retries": -1}, "Source.max_retries must be an int >= 0 or None; got -1"),
        ({"max_retries": "3"}, "Source.max_retries must be an int >= 0 or None; got '3'"),
        ({"drop_params": "no"}, "Source.drop_params must be True or False; got 'no'"),
        ({"headers": ["x"]}, "Source.headers must be a dict of header names to string values"),
        ({"headers": {"x-team": 7}}, "Source.headers must be a dict of header names to string"),
        ({"extra_body": "x"}, "Source.extra_body must be a dict of body fields; got str"),
        (
            {"base_url": "api.openai.com"},
            "Source.base_url's scheme must be http or https; got no scheme",
        ),
        ({"timeout": 0}, "Timeout.total must be a positive number"),
        ({"timeout": "fast"}, "timeout must be seconds"),
    ],
)
def test_bad_source_values_fail_at_source(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Source("openai", "gpt-5.5", api_key=KEY, **kwargs)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"messages": "hi"}, "messages must be a list of Message objects or OpenAI-style dicts"),
        ({"messages": ["hi"]}, "each message must be a Message or an OpenAI-style dict"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "unknown message role 'wizard'"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "needs the tool_call_id"),
        ({"messages": [{"role": "user", "content": 5}]}, "content must be a string"),
        ({"tools": "x"}, "tools must be a list of Tool objects or dicts; got str"),
        ({"tools": [5]}, "each tool must be a Tool or a dict"),
        ({"stop": 5}, "stop must be a string or a list of strings; got 5"),
        ({"stop": [1, 2]}, "stop must be a string or a list of strings; got [1, 2]"),
        ({"timeout": "5"}, "timeout must be a positive number of seconds; got '5'"),
        ({"temperature": "hot"}, "temperature must be a number from 0 to 2; got 'hot'"),
        ({"temperature": -3}, "temperature must be a number from 0 to 2; got -3"),
        ({"temperature": float("nan")}, "temperature must be a number from 0 to 2; got nan"),
        ({"top_p": 5}, "top_p must be a number from 0 to 1; got 5"),
        ({"extra_body": "x"}, "extra_body must be a dict of body fields; got str"),
    ],
)
def test_bad_call_values_fail_before_any_request(call: dict[str, Any], message: str) -> None:
    client = Client([Source("openai", "gpt-5.5", api_key=KEY)])
    arguments: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}], **call}
    messages = arguments.pop("messages")
    with pytest.raises(ValueError, match=re.escape(message)):
        client.request(messages, **arguments)


def test_a_serialised_tool_call_round_trips() -> None:
    call = ToolCall(id="call_1", name="lookup", arguments='{"q":"x"}')
    flat = {"role": "assistant", "content": None, "tool_calls": [dataclasses.asdict(call)]}
    assert Message.coerce(flat).tool_calls == (call,)
    with pytest.raises(ValueError, match="a tool call needs a function name"):
        Message.coerce({"role": "assistant", "tool_calls": [{"id": "x", "arguments": "{}"}]})


def test_empty_model_fails_at_source() -> None:
    with pytest.raises(ValueError, match="non-empty model id"):
        Source("openai", "  ", api_key=KEY)


def test_none_on_a_model_that_cannot_switch_off_fails_at_client_under_the_error_policy() -> None:
    source = Source("glm", "glm-5.3", api_key=KEY, reasoning_effort="none", effort_fallback="error")
    with pytest.raises(ThinkingUnsupportedError) as info:
        Client([OPENAI, source])
    assert info.value.source_index == 1
    assert "its cheapest tier is 'low'" in str(info.value)


@pytest.mark.anyio
async def test_none_on_a_model_that_always_reasons_sends_its_cheapest_tier() -> None:
    source = Source("glm", "glm-5.3", api_key=KEY, reasoning_effort="none")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=_ok())
        async with Client([source]) as client:
            response = await client.complete(HI)
    body = sent_json(route.calls[0])
    # GLM-5.3 accepts thinking.type enabled only (OR-GLM53): never sent "disabled".
    assert (body["thinking"], body["reasoning_effort"]) == ({"type": "enabled"}, "low")
    assert (response.requested_effort, response.applied_effort) == (Effort.NONE, Effort.LOW)
    assert response.warnings[0].startswith("model 'glm-5.3' cannot switch reasoning off")


def test_missing_key_fails_at_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZHIPUAI_API_KEY", raising=False)
    monkeypatch.delenv("ZAI_API_KEY", raising=False)
    monkeypatch.delenv("GLM_API_KEY", raising=False)
    with pytest.raises(ValueError, match="has no API key") as info:
        Client([Source("glm", "glm-4.6")])
    assert str(info.value) == (
        "sources[0] (glm/glm-4.6) has no API key: pass api_key= or set ZHIPUAI_API_KEY or "
        "ZAI_API_KEY or GLM_API_KEY"
    )


def test_key_from_the_provider_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZHIPUAI_API_KEY", raising=False)
    monkeypatch.setenv("ZAI_API_KEY", "zai-key-123456")
    assert Source("glm", "glm-4.6").resolve_api_key() == "zai-key-123456"
    Client([Source("glm", "glm-4.6")])


def test_local_servers_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    Client([Source("ollama", "qwen3:8b")])


@pytest.mark.parametrize(
    ("sources", "message"), [([], "at least one Source"), (["openai"], "sources[0] is str")]
)
def test_bad_source_list_fails_at_client(sources: list[Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Client(sources)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reasoning_effort": "maximum"}, "unknown reasoning effort 'maximum'"),
        ({"max_tokens": 0}, "max_tokens must be a positive int"),
        ({"timeout": -1}, "timeout must be a positive number of seconds"),
        ({"tools": [{"type": "function", "function": {}}]}, "a tool needs a non-empty 'name'"),
    ],
)
async def test_bad_call_arguments_fail_before_any_request(
    kwargs: dict[str, Any], message: str
) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=_ok())
        async with Client([OPENAI]) as client:
            with pytest.raises(ValueError, match=message):
                await client.complete(HI, **kwargs)
            with pytest.raises(ValueError, match="messages must not be empty"):
                await client.complete([])
    assert route.call_count == 0


@pytest.mark.anyio
async def test_calls_outside_the_context_are_refused() -> None:
    client = Client([OPENAI])
    with pytest.raises(RuntimeError, match="async with Client"):
        await client.complete(HI)


# ---------------------------------------------------------------- secrets


def test_no_key_in_source_repr_or_str() -> None:
    source = Source(
        "openai",
        "gpt-5.5",
        api_key="custom-key-without-a-known-shape",
        headers={"x-gateway-key": "gateway-secret-123"},
    )
    for text in (repr(source), str(source), repr([source])):
        assert "custom-key-without-a-known-shape" not in text
        assert "gateway-secret-123" not in text
        assert "gpt-5.5" in text


ECHOED_KEYS = ["custom-key-without-a-known-shape", KEY]


@pytest.mark.anyio
@pytest.mark.parametrize("key", ECHOED_KEYS)
async def test_no_key_in_an_error_built_from_a_body_that_echoes_it(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    source = _source("openai", "gpt-5.5", api_key=key)
    body = {
        "error": {
            "type": "invalid_request_error",
            "code": "invalid_api_key",
            "message": f"Incorrect API key provided: {key}. Bearer {key}",
        }
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=httpx.Response(401, json=body))
        async with Client([source]) as client:
            with pytest.raises(AuthError) as info:
                await client.complete(HI)
    error = info.value
    assert error.error_type == "invalid_api_key"
    for text in (str(error), repr(error), error.message, error.body or "", caplog.text):
        assert key not in text
    assert "[REDACTED]" in error.message
    assert json.loads(error.body or "")["error"]["code"] == "invalid_api_key"


@pytest.mark.anyio
async def test_no_key_in_an_in_band_stream_error() -> None:
    key = "custom-key-without-a-known-shape"
    source = _source("openai", "gpt-5.5", api_key=key)
    body = sse({"error": {"type": "invalid_request_error", "message": f"key {key} revoked"}})
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(body))
        async with Client([source]) as client:
            with pytest.raises(RequestRejectedError) as info:
                await collect(client.stream(HI))
    for text in (str(info.value), repr(info.value), info.value.body or ""):
        assert key not in text


# ---------------------------------------------------------------- stream lifecycle


@pytest.mark.anyio
async def test_stream_is_an_async_generator_and_aclose_releases_the_connection() -> None:
    chunks = [
        sse({"choices": [{"index": 0, "delta": {"content": f"part{i} "}}]}, done=False)
        for i in range(50)
    ]
    body = ChunkedStream(chunks)
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(OPENAI)).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=body
            )
        )
        async with Client([OPENAI]) as client:
            events = client.stream(HI)
            assert inspect.isasyncgen(events)
            first = await events.__anext__()
            assert (first.type, first.text) == ("text", "part0 ")
            assert body.closed is False
            await events.aclose()
            assert body.closed is True
            assert body.sent < len(chunks)
            with pytest.raises(StopAsyncIteration):
                await events.__anext__()


@pytest.mark.anyio
async def test_breaking_out_of_a_stream_closes_it() -> None:
    body = ChunkedStream(
        [sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}, done=False)] * 20
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(OPENAI)).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=body
            )
        )
        async with Client([OPENAI]) as client:
            async with aclosing(client.stream(HI)) as events:
                async for _ in events:
                    break
            assert body.closed is True


@pytest.mark.anyio
async def test_done_is_always_the_last_event_and_comes_once() -> None:
    body = sse(
        {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]},
        {"choices": [{"index": 0, "delta": {"content": "a"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "function": {"name": "f", "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
    )
    source = _source("deepseek", "deepseek-v4-flash")
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(body))
        async with Client([source]) as client:
            events = await collect(client.stream(HI))
    assert [e.type for e in events] == [
        "reasoning",
        "text",
        "tool_call_delta",
        "tool_call",
        "usage",
        "done",
    ]
    done = events[-1].response
    assert done is not None
    assert (done.text, done.reasoning, done.finish_reason) == ("a", "think", "tool_calls")
    assert [c.id for c in done.tool_calls] == ["call_1"]
