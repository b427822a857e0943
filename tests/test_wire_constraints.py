"""Context-window errors, per-model request constraints, and the pieces under the streams:
the SSE decoder's end of stream, Anthropic and non-streamed tool calls, request bodies."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import respx

from polythink import Client, Source, ToolCall, ToolCallDelta
from polythink.errors import (
    ContextWindowExceededError,
    RateLimitedError,
    RequestRejectedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.providers import get_provider
from polythink.reasoning.capabilities import get_capability
from polythink.simulator import Settings, Simulator, shapes
from polythink.simulator.faults import Fault, FaultPlan
from polythink.transports import finish as finish_tables
from polythink.transports.anthropic import AnthropicStreamAssembler
from polythink.transports.error_map import error_from_body, error_from_status
from polythink.transports.openai_chat import build_body, parse_completion
from polythink.transports.sse import SSEDecoder
from polythink.types import Message, Request
from tests.chatwire import sent_json, sse, sse_response
from tests.conftest import SPECS, shared_file

HI = [{"role": "user", "content": "hi"}]

# ------------------------------------------------------------------ context-window errors

CONTEXT_ERRORS = [
    (
        "openai",
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130532 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        128000,
        130532,
    ),
    (
        "openai-responses",
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust "
                "your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        None,
        None,
    ),
    (
        "anthropic",
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        200000,
        208310,
    ),
    (
        "anthropic",
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 197254 + 8192 > "
                "200000, decrease input length or `max_tokens` and try again",
            },
        },
        200000,
        205446,
    ),
    (
        "gemini",
        {
            "error": {
                "code": 400,
                "message": "The input token count (1234567) exceeds the maximum number of tokens "
                "allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        1048576,
        1234567,
    ),
    (
        "deepseek",
        {
            "error": {
                "message": "This model's maximum context length is 131072 tokens. However, you "
                "requested 140000 tokens (132000 in the messages, 8000 in the completion). "
                "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        },
        131072,
        140000,
    ),
    (
        "openrouter",
        {
            "error": {
                "message": "This endpoint's maximum context length is 200000 tokens. However, you "
                "requested about 250123 tokens (242123 of text input, 8000 in the output). "
                "Please reduce the length of either one.",
                "code": 400,
            }
        },
        200000,
        250123,
    ),
    (
        "mistral",
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model with "
            "32768 maximum context length",
            "type": "invalid_request_message_too_long",
            "param": None,
            "code": "3051",
        },
        32768,
        40000,
    ),
    (
        "xai",
        {
            "code": "Client specified an invalid argument",
            "error": "This model's maximum prompt length is 131072 but the request contains "
            "143784 tokens.",
        },
        131072,
        143784,
    ),
    (
        "kimi",
        {
            "error": {
                "message": "Invalid request: Your request exceeded model token limit: 131072",
                "type": "invalid_request_error",
            }
        },
        131072,
        None,
    ),
    (
        "qwen",
        {
            "error": {
                "message": "<400> InternalError.Algo.InvalidParameter: Range of input length "
                "should be [1, 129024]",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_parameter_error",
            }
        },
        129024,
        None,
    ),
    ("glm", {"error": {"code": "1261", "message": "Prompt exceeds max length"}}, None, None),
    (
        "vllm",
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you requested "
            "5000 tokens (4000 in the messages, 1000 in the completion).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        4096,
        5000,
    ),
]


@pytest.mark.parametrize(("provider", "body", "limit", "requested"), CONTEXT_ERRORS)
def test_context_window_errors_per_provider(
    provider: str, body: dict[str, Any], limit: int | None, requested: int | None
) -> None:
    error = error_from_status(400, {}, json.dumps(body).encode(), provider=provider, source_index=2)
    assert type(error) is ContextWindowExceededError
    assert isinstance(error, RequestRejectedError)
    assert (error.limit, error.requested, error.status_code, error.source_index) == (
        limit,
        requested,
        400,
        2,
    )


def test_other_rejections_stay_plain() -> None:
    body = {
        "error": {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"}
    }
    error = error_from_status(400, {}, json.dumps(body).encode(), provider="openai", source_index=0)
    assert type(error) is RequestRejectedError
    reasoning = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support 'none' with this "
            "model. This model's maximum context length is 1 tokens.",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }
    error = error_from_status(
        400, {}, json.dumps(reasoning).encode(), provider="openai", source_index=0
    )
    assert type(error) is ThinkingUnsupportedError


def test_in_band_context_window_error() -> None:
    error = error_from_body(
        {"error": {"message": "context window exceeded", "code": "context_length_exceeded"}},
        provider="openrouter",
        source_index=0,
    )
    assert type(error) is ContextWindowExceededError
    assert (error.limit, error.requested) == (None, None)


def test_context_windows_in_the_registry() -> None:
    windows = {
        m: get_capability(m).context_window  # type: ignore[union-attr]
        for m in ("gpt-4o", "gpt-4.1", "gpt-5", "claude-sonnet-4-5", "gemini-2.5-pro")
    }
    assert windows == {
        "gpt-4o": 128000,
        "gpt-4.1": 1047576,
        "gpt-5": 400000,
        "claude-sonnet-4-5": 200000,
        "gemini-2.5-pro": 1048576,
    }


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings()) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> FaultPlan:
    sim.settings.faults = FaultPlan()
    return sim.settings.faults


def _src(sim: Simulator, provider: str, model: str) -> Source:
    return Source(provider, model, api_key="sk-sim", base_url=sim.base_url(provider), max_retries=0)


_TOO_LONG = json.dumps(CONTEXT_ERRORS[0][1]).encode()


@pytest.mark.anyio
async def test_failover_moves_only_to_a_larger_context_window(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.raw(_TOO_LONG, status=400), None)
    sources = [
        _src(sim, "openai", "gpt-4o"),  # 128000: refuses
        _src(sim, "deepseek", "deepseek-reasoner"),  # 128000: not larger, skipped
        _src(sim, "openai", "gpt-4.1"),  # 1047576: tried
    ]
    async with Client(sources) as client:
        response = await client.complete(HI)
    assert response.source_index == 2
    assert plan.injected["raw"] == 1
    assert (
        "failover: source 1 (deepseek deepseek-reasoner) skipped, its context window "
        "(128000 tokens) is not larger than 128000"
    ) in response.warnings


@pytest.mark.anyio
async def test_context_window_error_raises_at_once_without_a_larger_source(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.raw(_TOO_LONG, status=400), Fault.raw(shapes.chat_finish("stop")))
    sources = [_src(sim, "openai", "gpt-4.1"), _src(sim, "openai", "gpt-4o")]
    async with Client(sources) as client:
        with pytest.raises(ContextWindowExceededError) as info:
            await client.complete(HI)
    assert (info.value.limit, info.value.requested, info.value.source_index) == (128000, 130532, 0)
    assert len(plan.script) == 1  # the second source was never called


# ------------------------------------------------------------------ sampling: one of the two

ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


OLD = "2023-06-01"
"""The Anthropic API version that still takes sampling parameters (CURRENT.md §1.4)."""


@pytest.mark.anyio
async def test_claude_refuses_temperature_with_top_p_before_sending() -> None:
    # The one_of rule of the Claude 4.5 generation, on the API version that takes sampling.
    source = Source("anthropic", "claude-haiku-4-5", api_key="sk-ant-test", api_version=OLD)
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(ANTHROPIC_URL).respond(200, json=MESSAGE)
        async with Client([source]) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete(HI, temperature=0.2, top_p=0.9)
    assert route.call_count == 0
    assert info.value.error_type == "parameter_conflict"
    assert info.value.message == (
        "anthropic model 'claude-haiku-4-5' accepts temperature or top_p, not both (got "
        "temperature=0.2, top_p=0.9). Send one of them, or set drop_params=True on the source "
        "to keep temperature and drop top_p"
    )


@pytest.mark.anyio
async def test_claude_drop_params_keeps_temperature_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "polythink.transport")
    source = Source(
        "anthropic", "claude-haiku-4-5", api_key="sk-ant-test", drop_params=True, api_version=OLD
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).respond(200, json=MESSAGE)
        async with Client([source]) as client:
            response = await client.complete(HI, temperature=0.2, top_p=0.9)
            await client.complete(HI, temperature=0.3, top_p=0.8)
    body = sent_json(route.calls[0])
    assert (body["temperature"], "top_p" in body) == (0.2, False)
    note = (
        "kept temperature=0.2 and dropped top_p=0.9: anthropic model 'claude-haiku-4-5' accepts "
        "only one of them (drop_params=True)"
    )
    assert note in response.warnings
    assert sum("dropped top_p" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.anyio
async def test_claude_one_parameter_alone_passes() -> None:
    source = Source("anthropic", "claude-haiku-4-5", api_key="sk-ant-test", api_version=OLD)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).respond(200, json=MESSAGE)
        async with Client([source]) as client:
            await client.complete(HI, top_p=0.9)
    assert sent_json(route.calls[0])["top_p"] == 0.9


# ------------------------------------------------------------------ DashScope streaming-only

QWEN_URL = "https://dashscope-intl.aliyuncs.com/compatible-mode/v1/chat/completions"


@pytest.mark.anyio
async def test_qwen_thinking_only_model_completes_by_streaming() -> None:
    body = sse(
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]},
        {"choices": [{"index": 0, "delta": {"content": "42"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}},
    )
    source = Source("qwen", "qwq-plus", api_key="sk-qwen-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(QWEN_URL).mock(return_value=sse_response(body))
        async with Client([source]) as client:
            response = await client.complete(HI)
    sent = sent_json(route.calls[0])
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})
    assert (response.text, response.reasoning, response.finish_reason) == ("42", "hmm", "stop")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 9)  # type: ignore[union-attr]
    assert (
        "qwen answers reasoning calls to 'qwq-plus' only when streamed: complete() streamed and "
        "assembled the answer"
    ) in response.warnings


@pytest.mark.anyio
async def test_qwen_hybrid_model_with_thinking_off_stays_non_streamed() -> None:
    answer = {
        "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    source = Source("qwen", "qwen3-32b", api_key="sk-qwen-test", reasoning_effort="none")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(QWEN_URL).respond(200, json=answer)
        async with Client([source]) as client:
            response = await client.complete(HI)
    sent = sent_json(route.calls[0])
    assert (sent["stream"], sent["enable_thinking"]) == (False, False)
    assert response.text == "ok"


# ------------------------------------------------------------------ request bodies, parsing


def test_mistral_gets_no_stream_options_others_do() -> None:
    request = Request(messages=(Message(role="user", content="hi"),), stream=True)
    mistral = build_body(request, model="mistral-small-latest", profile=get_provider("mistral"))
    deepseek = build_body(request, model="deepseek-v4-pro", profile=get_provider("deepseek"))
    assert "stream_options" not in mistral
    assert deepseek["stream_options"] == {"include_usage": True}


def test_non_streamed_tool_call_arguments_object_or_empty() -> None:
    data = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "a",
                            "type": "function",
                            "function": {"name": "f", "arguments": {"x": 1}},
                        },
                        {"id": "b", "type": "function", "function": {"name": "g", "arguments": ""}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    response = parse_completion(data, profile=get_provider("ollama"), source_index=0, model="m")
    assert response.tool_calls == [
        ToolCall(id="a", name="f", arguments='{"x":1}'),
        ToolCall(id="b", name="g", arguments="{}"),
    ]
    assert response.native_finish_reason == "tool_calls"


@pytest.mark.anyio
async def test_non_streamed_error_beside_choices_raises() -> None:
    answer = {
        "error": {"code": 502, "message": "upstream died"},
        "choices": [{"index": 0, "message": {"content": ""}, "finish_reason": "error"}],
    }
    source = Source("openrouter", "openai/gpt-4o", api_key="sk-or-test", max_retries=0)
    with respx.mock(assert_all_called=True) as mock:
        mock.post("https://openrouter.ai/api/v1/chat/completions").respond(200, json=answer)
        async with Client([source]) as client:
            with pytest.raises(TransientError) as info:
                await client.complete(HI)
    assert (info.value.error_type, info.value.status_code) == ("502", None)


def test_anthropic_tool_use_stream_yields_deltas_then_the_call() -> None:
    assembler = AnthropicStreamAssembler(get_provider("anthropic"), 0, "claude-x")
    events = []
    for event in (
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": '},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '"x"}'},
        },
        {"type": "content_block_stop", "index": 1},
    ):
        events += assembler.feed(event)
    assert [e.type for e in events] == [*["tool_call_delta"] * 3, "tool_call"]
    assert [e.tool_call_delta for e in events[:3]] == [
        ToolCallDelta(index=0, id="toolu_1", name="get", arguments=piece)
        for piece in ("", '{"q": ', '"x"}')
    ]
    assert events[3].tool_call == ToolCall(id="toolu_1", name="get", arguments='{"q": "x"}')


# ------------------------------------------------------------------ SSE end of stream


def test_decoder_close_delivers_the_pending_event() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a":1}\n\ndata: {"b":2}\n') == [("message", '{"a":1}')]
    assert decoder.close() == [("message", '{"b":2}')]
    assert decoder.closed


def test_decoder_close_takes_an_unterminated_last_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: done\ndata: [DO") == []
    assert decoder.feed(b"NE]") == []
    assert decoder.close() == [("done", "[DONE]")]


def test_decoder_close_with_nothing_pending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a":1}\n\n: ping\n') == [("message", '{"a":1}')]
    assert decoder.close() == []


@pytest.mark.anyio
async def test_stream_fails_over_by_context_window_too(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.raw(_TOO_LONG, status=400), Fault.raw(shapes.chat_finish("stop", "big")))
    sources = [_src(sim, "openai", "gpt-4o"), _src(sim, "openai", "gpt-5")]
    async with Client(sources) as client:
        events = [event async for event in client.stream(HI)]
    done = events[-1].response
    assert done is not None
    assert (done.text, done.source_index) == ("big", 1)


@pytest.mark.anyio
async def test_a_cached_stream_replays_its_tool_call_deltas(
    sim: Simulator, plan: FaultPlan, tmp_path: Any
) -> None:
    fragments = [
        {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a":'}},
        {"index": 0, "function": {"arguments": "1}"}},
    ]
    plan.add(Fault.raw(shapes.chat_tool_calls(fragments)))
    async with Client([_src(sim, "deepseek", "deepseek-v4-pro")], cache=tmp_path / "c") as client:
        first = [event async for event in client.stream(HI)]
        second = [event async for event in client.stream(HI)]
    assert plan.injected["raw"] == 1
    assert [e.tool_call_delta for e in second] == [e.tool_call_delta for e in first]
    assert [e.tool_call_delta for e in first][:2] == [
        ToolCallDelta(index=0, id="call_1", name="f", arguments='{"a":'),
        ToolCallDelta(index=0, id="call_1", name="f", arguments="1}"),
    ]
    done = second[-1].response
    assert done is not None
    assert (done.cache_hit, done.native_finish_reason) == (True, "tool_calls")


RESPONSE_ERROR_CODES = {
    "server_error": TransientError,
    "rate_limit_exceeded": RateLimitedError,
    "vector_store_timeout": TransientError,
    **dict.fromkeys(
        (
            "invalid_prompt",
            "data_residency_mismatch",
            "bio_policy",
            "invalid_image",
            "invalid_image_format",
            "invalid_base64_image",
            "invalid_image_url",
            "image_too_large",
            "image_too_small",
            "image_parse_error",
            "image_content_policy_violation",
            "invalid_image_mode",
            "image_file_too_large",
            "unsupported_image_media_type",
            "empty_image_file",
            "failed_to_download_image",
            "image_file_not_found",
        ),
        RequestRejectedError,
    ),
}


@pytest.mark.parametrize(("code", "cls"), sorted(RESPONSE_ERROR_CODES.items()))
def test_every_responses_error_code_is_classed(code: str, cls: type[Exception]) -> None:
    error = error_from_body(
        {"code": code, "message": "m"}, provider="openai-responses", source_index=0
    )
    assert type(error) is cls
    assert error.error_type == code


def _spec_enum(text: str, anchor: str) -> set[str]:
    """The ``- value`` items of the first ``enum:`` after ``anchor`` in a YAML spec."""
    rest = text[text.index(anchor) :]
    block = rest[rest.index("enum:") :].split("\n")[1:]
    values = []
    for line in block:
        item = re.fullmatch(r"\s*- ([a-z0-9_]+)", line)
        if item is None:
            break
        values.append(item.group(1))
    return set(values)


def test_the_lists_are_the_spec_enums() -> None:
    openapi = shared_file(SPECS / "openai_openapi.yaml").read_text(encoding="utf-8")
    assert _spec_enum(openapi, "    ResponseErrorCode:") == set(RESPONSE_ERROR_CODES)
    chat = openapi[openapi.index("    CreateChatCompletionResponse:") :]
    assert _spec_enum(chat, "              finish_reason:") == set(finish_tables.CHAT)
    proto = shared_file(SPECS / "google_generativelanguage_v1beta_generative_service.proto")
    text = proto.read_text(encoding="utf-8")
    enum = text[text.index("enum FinishReason {") :]
    enum = enum[: enum.index("}")]
    assert set(re.findall(r"^\s+([A-Z_]+) = \d+;", enum, re.M)) == set(finish_tables.GEMINI)
    anthropic = shared_file(SPECS / "anthropic_messages_openapi_docs_copy.md").read_text(
        encoding="utf-8"
    )
    documented = _spec_enum(anthropic, "              stop_reason:")
    # The spec copy predates model_context_window_exceeded (handling-stop-reasons page).
    assert set(finish_tables.ANTHROPIC) == documented | {"model_context_window_exceeded"}


def test_anthropic_tool_use_with_its_input_on_the_start_block() -> None:
    assembler = AnthropicStreamAssembler(get_provider("anthropic"), 0, "claude-x")
    start = {"type": "tool_use", "id": "toolu_2", "name": "get", "input": {"q": "y"}}
    events = assembler.feed({"type": "content_block_start", "index": 0, "content_block": start})
    events += assembler.feed({"type": "content_block_stop", "index": 0})
    assert [e.tool_call_delta for e in events if e.type == "tool_call_delta"] == [
        ToolCallDelta(index=0, id="toolu_2", name="get", arguments=""),
        ToolCallDelta(index=0, id="toolu_2", name="get", arguments='{"q":"y"}'),
    ]
    assert events[-1].tool_call == ToolCall(id="toolu_2", name="get", arguments='{"q":"y"}')
