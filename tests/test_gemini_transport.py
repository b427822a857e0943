"""The Gemini transport on its own: body, usage (cases C04, C15), parts, finish, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from polythink import (
    Client,
    Message,
    RateLimitedError,
    RequestRejectedError,
    Source,
    StreamEvent,
    StreamInterruptedError,
    Tool,
    ToolCall,
    TransientError,
    Usage,
)
from polythink.providers import get_provider
from polythink.reasoning.resolve import resolve
from polythink.transports.gemini import (
    GeminiStreamAssembler,
    build_body,
    finish_reason,
    parse_response,
    parse_usage,
    tool_call_id,
)
from polythink.types import Request

PROFILE = get_provider("gemini")
BASE = "https://generativelanguage.googleapis.com/v1beta/models"
FLASH = f"{BASE}/gemini-2.5-flash"


def request(messages: list[Any], **fields: Any) -> Request:
    client = Client([Source("gemini", "gemini-2.5-flash", api_key="k")])
    return client.request(messages, **fields)


def sse_crlf(*chunks: dict[str, Any]) -> bytes:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()


def stream_answer(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def chunk(parts: list[dict[str, Any]], finish: str | None = None, **fields: Any) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", **fields}


async def collect(events: AsyncIterator[StreamEvent], into: list[StreamEvent]) -> None:
    async for event in events:
        into.append(event)


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    "metadata",
    [
        # C04 as AI Studio reports it: candidates exclude the thoughts.
        {
            "promptTokenCount": 20,
            "candidatesTokenCount": 198,
            "thoughtsTokenCount": 405,
            "totalTokenCount": 623,
        },
        # The same exchange counted the Vertex way: candidates include the thoughts.
        {
            "promptTokenCount": 20,
            "candidatesTokenCount": 603,
            "thoughtsTokenCount": 405,
            "totalTokenCount": 623,
        },
        # No total: candidates plus thoughts.
        {"promptTokenCount": 20, "candidatesTokenCount": 198, "thoughtsTokenCount": 405},
    ],
)
def test_c04_input_plus_output_equals_total_and_reasoning_is_kept(metadata: Any) -> None:
    usage = parse_usage(metadata)
    assert usage == Usage(20, 603, 405, None, None)
    assert usage is not None
    assert usage.total_tokens == 623


def test_usage_counts_tool_prompt_and_cached_content_as_input() -> None:
    usage = parse_usage(
        {
            "promptTokenCount": 100,
            "cachedContentTokenCount": 60,
            "toolUsePromptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 115,
        }
    )
    assert usage == Usage(110, 5, None, 60, None)


@pytest.mark.anyio
async def test_c04_usage_on_the_last_streamed_chunk_equals_the_nonstream_usage() -> None:
    metadata = {
        "promptTokenCount": 20,
        "candidatesTokenCount": 198,
        "thoughtsTokenCount": 405,
        "totalTokenCount": 623,
    }
    whole = chunk(
        [{"text": "think", "thought": True}, {"text": "Hello world"}],
        "STOP",
        usageMetadata=metadata,
        responseId="r1",
    )
    body = sse_crlf(
        chunk([{"text": "think", "thought": True}], responseId="r1"),
        chunk([{"text": "Hello"}], responseId="r1"),
        chunk([{"text": " world"}], "STOP", usageMetadata=metadata, responseId="r1"),
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{FLASH}:generateContent").mock(return_value=httpx.Response(200, json=whole))
        mock.post(f"{FLASH}:streamGenerateContent?alt=sse").mock(return_value=stream_answer(body))
        async with Client([Source("gemini", "gemini-2.5-flash", api_key="k")]) as client:
            complete = await client.complete([{"role": "user", "content": "hi"}])
            events = [e async for e in client.stream([{"role": "user", "content": "hi"}])]
    streamed = events[-1].response
    assert streamed is not None
    assert complete.usage == streamed.usage == Usage(20, 603, 405, None, None)
    assert [e.type for e in events] == ["reasoning", "text", "text", "usage", "done"]
    assert (complete.text, complete.reasoning) == (streamed.text, streamed.reasoning)
    assert (complete.text, complete.reasoning) == ("Hello world", "think")
    assert complete.message.reasoning_items == streamed.message.reasoning_items


@pytest.mark.anyio
async def test_c15_no_usage_metadata_gives_no_usage_streaming_or_not() -> None:
    answer = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ]
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{FLASH}:generateContent").mock(return_value=httpx.Response(200, json=answer))
        mock.post(f"{FLASH}:streamGenerateContent?alt=sse").mock(
            return_value=stream_answer(sse_crlf(answer))
        )
        async with Client([Source("gemini", "gemini-2.5-flash", api_key="k")]) as client:
            complete = await client.complete([{"role": "user", "content": "hi"}])
            events = [e async for e in client.stream([{"role": "user", "content": "hi"}])]
    assert complete.usage is None
    assert complete.text == "ok"
    assert [e.type for e in events] == ["text", "done"]
    final = events[-1].response
    assert final is not None
    assert final.usage is None


def test_c15_control_reported_zeros_stay_zeros() -> None:
    assert parse_usage({"promptTokenCount": 0, "candidatesTokenCount": 0}) == Usage(
        0, 0, None, None, None
    )
    assert parse_usage(None) is None


@pytest.mark.anyio
async def test_c15_stream_cut_before_any_usage_leaves_partial_usage_none() -> None:
    body = sse_crlf(chunk([{"text": "Hel"}]))
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{FLASH}:streamGenerateContent?alt=sse").mock(return_value=stream_answer(body))
        async with Client([Source("gemini", "gemini-2.5-flash", api_key="k")]) as client:
            seen: list[StreamEvent] = []
            with pytest.raises(StreamInterruptedError) as caught:
                await collect(client.stream([{"role": "user", "content": "hi"}]), seen)
    assert [e.text for e in seen] == ["Hel"]
    assert caught.value.partial.text == "Hel"
    assert caught.value.partial.usage is None
    assert caught.value.error_type == "stream_incomplete"


# --------------------------------------------------------------------------- request body


def test_body_tool_loop_from_another_provider_groups_tool_results() -> None:
    calls = (
        ToolCall(id="call_a", name="weather", arguments='{"city":"Paris"}'),
        ToolCall(id="call_b", name="clock", arguments="{}"),
    )
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather and time?"},
        Message(role="assistant", content="Checking.", tool_calls=calls),
        Message(role="tool", tool_call_id="call_a", content='{"temp": 21}'),
        Message(role="tool", tool_call_id="call_b", content="12:00"),
        {"role": "user", "content": "Thanks"},
    ]
    body = build_body(
        request(
            messages,
            tools=[Tool(name="weather", description="Weather", parameters={"type": "object"})],
            tool_choice="required",
            max_tokens=200,
            temperature=0.2,
            top_p=0.8,
            stop=["END"],
        ),
        profile=PROFILE,
    )
    assert body == {
        "contents": [
            {"role": "user", "parts": [{"text": "Weather and time?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                    {"functionCall": {"name": "clock", "args": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "weather", "response": {"temp": 21}}},
                    {"functionResponse": {"name": "clock", "response": {"result": "12:00"}}},
                ],
            },
            {"role": "user", "parts": [{"text": "Thanks"}]},
        ],
        "systemInstruction": {"role": "user", "parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "maxOutputTokens": 200,
            "temperature": 0.2,
            "topP": 0.8,
            "stopSequences": ["END"],
        },
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "weather",
                        "description": "Weather",
                        "parametersJsonSchema": {"type": "object"},
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
    }


def test_body_gemini_turn_goes_back_verbatim_and_answers_carry_the_call_id() -> None:
    parts = (
        {"text": "plan", "thought": True},
        {"functionCall": {"id": "fc-7", "name": "weather", "args": {}}, "thoughtSignature": "Ab+/"},
    )
    turn = Message(
        role="assistant",
        tool_calls=(ToolCall(id="fc-7", name="weather", arguments="{}"),),
        reasoning_items=parts,
        reasoning_format="gemini",
    )
    body = build_body(
        request(
            [
                {"role": "user", "content": "q"},
                turn,
                Message(role="tool", tool_call_id="fc-7", content="[1, 2]"),
            ]
        ),
        profile=PROFILE,
    )
    assert body["contents"][1] == {"role": "model", "parts": list(parts)}
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "weather", "response": {"result": [1, 2]}, "id": "fc-7"}}
        ],
    }


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"functionCallingConfig": {"mode": "AUTO"}}),
        ("none", {"functionCallingConfig": {"mode": "NONE"}}),
        ("required", {"functionCallingConfig": {"mode": "ANY"}}),
        (
            {"type": "function", "function": {"name": "weather"}},
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["weather"]}},
        ),
    ],
)
def test_tool_choice(choice: Any, config: Any) -> None:
    body = build_body(
        request(
            [{"role": "user", "content": "q"}], tools=[Tool(name="weather")], tool_choice=choice
        ),
        profile=PROFILE,
    )
    assert body["toolConfig"] == config


@pytest.mark.parametrize(
    ("messages", "fields", "complaint"),
    [
        ([{"role": "user", "content": "q"}], {"tool_choice": "sometimes"}, "no Gemini equivalent"),
        (
            [Message(role="tool", tool_call_id="nope", content="1")],
            {},
            "answers no earlier tool call",
        ),
        (
            [Message(role="assistant", tool_calls=(ToolCall(id="c", name="f", arguments="[1]"),))],
            {},
            "not a JSON object",
        ),
    ],
)
def test_bad_input_is_rejected_with_what_was_wrong(
    messages: list[Any], fields: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(RequestRejectedError, match=complaint):
        build_body(request(messages).with_(**fields), profile=PROFILE)


def test_budget_model_reasoning_raises_the_output_ceiling() -> None:
    resolution = resolve("high", provider="gemini", model="gemini-2.5-flash", max_tokens=1000)
    body = build_body(
        request([{"role": "user", "content": "q"}], max_tokens=1000).with_(resolution=resolution),
        profile=PROFILE,
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 17384,
        "thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": True},
    }


def test_user_content_parts_and_images() -> None:
    body = build_body(
        request(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is it?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
                        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                    ],
                }
            ]
        ),
        profile=PROFILE,
    )
    assert body["contents"][0]["parts"] == [
        {"text": "What is it?"},
        {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
        {"fileData": {"fileUri": "https://x.test/a.png"}},
    ]


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("raw", "calls", "blocked", "expected"),
    [
        ("STOP", False, False, "stop"),
        ("STOP", True, False, "tool_calls"),
        ("MAX_TOKENS", False, False, "length"),
        ("SAFETY", False, False, "content_filter"),
        ("RECITATION", False, False, "content_filter"),
        ("PROHIBITED_CONTENT", False, False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, False, "error"),
        (None, False, True, "content_filter"),
    ],
)
def test_finish_reason(raw: Any, calls: bool, blocked: bool, expected: str) -> None:
    assert finish_reason(raw, has_tool_calls=calls, blocked=blocked) == expected


def test_parse_blocked_prompt_and_max_tokens() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
    }
    response = parse_response(blocked, profile=PROFILE, source_index=0, model="m")
    assert (response.text, response.finish_reason, response.usage) == (
        "",
        "content_filter",
        Usage(9, 0, None, None, None),
    )
    limited = parse_response(
        chunk([{"text": "cut"}], "MAX_TOKENS"), profile=PROFILE, source_index=0, model="m"
    )
    assert (limited.finish_reason, limited.output_limited) == ("length", True)


def test_tool_call_ids_use_the_part_id_else_a_stable_one() -> None:
    data = chunk(
        [
            {"functionCall": {"name": "f", "args": {"x": 1}}},
            {"functionCall": {"name": "f", "args": {"x": 1}}},
            {"functionCall": {"id": "given", "name": "g", "args": {"ü": "é"}}},
        ],
        "STOP",
        responseId="resp-1",
    )
    first = parse_response(data, profile=PROFILE, source_index=0, model="m")
    again = parse_response(data, profile=PROFILE, source_index=0, model="m")
    assert first.tool_calls == again.tool_calls
    assert first.tool_calls[0].id == tool_call_id("resp-1", 0, "f", {"x": 1})
    assert first.tool_calls[1].id == tool_call_id("resp-1", 1, "f", {"x": 1})
    assert first.tool_calls[0].id != first.tool_calls[1].id
    assert first.tool_calls[2] == ToolCall(id="given", name="g", arguments='{"ü":"é"}')
    assert first.tool_calls[0].arguments == '{"x":1}'
    assert first.finish_reason == "tool_calls"


def test_stream_parts_are_rebuilt_without_moving_signatures() -> None:
    assembler = GeminiStreamAssembler(PROFILE, 0, "m")
    for parts in (
        [{"text": "a", "thought": True}],
        [{"text": "b", "thought": True}],
        [{"text": "X", "thoughtSignature": "sig1"}],
        [{"text": "Y"}],
        [{"text": "Z", "thoughtSignature": "sig2"}],
        [{"functionCall": {"name": "f", "args": {}}}],
        [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig3"}],
        [{"text": ""}],
        [{"text": "", "thoughtSignature": "sig4"}],
    ):
        assembler.feed(chunk(parts))
    assert list(assembler.response().message.reasoning_items) == [
        {"text": "ab", "thought": True},
        {"text": "XY", "thoughtSignature": "sig1"},
        {"text": "Z", "thoughtSignature": "sig2"},
        {"functionCall": {"name": "f", "args": {}}},
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig3"},
        {"text": "", "thoughtSignature": "sig4"},
    ]


# --------------------------------------------------------------------------- errors


@pytest.mark.anyio
async def test_in_stream_error_before_output_is_typed_and_after_it_interrupts() -> None:
    error = {
        "error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{FLASH}:streamGenerateContent?alt=sse").mock(
            side_effect=[
                stream_answer(sse_crlf(error)),
                stream_answer(sse_crlf(chunk([{"text": "Hi"}]), error)),
            ]
        )
        source = Source("gemini", "gemini-2.5-flash", api_key="k", max_retries=0)
        async with Client([source]) as client:
            with pytest.raises(RateLimitedError) as before:
                await collect(client.stream([{"role": "user", "content": "q"}]), [])
            with pytest.raises(StreamInterruptedError) as after:
                await collect(client.stream([{"role": "user", "content": "q"}]), [])
    assert before.value.error_type == "RESOURCE_EXHAUSTED"
    assert before.value.status_code == 200
    assert after.value.partial.text == "Hi"
    assert isinstance(after.value.__cause__, RateLimitedError)


@pytest.mark.anyio
async def test_http_error_body_is_mapped_without_the_key() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts.",
            "status": "INVALID_ARGUMENT",
        }
    }
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{FLASH}:generateContent").mock(
            return_value=httpx.Response(400, json=body)
        )
        async with Client(
            [Source("gemini", "gemini-2.5-flash", api_key="gm-secret-123")]
        ) as client:
            with pytest.raises(RequestRejectedError) as caught:
                await client.complete([{"role": "user", "content": "q"}])
    assert route.calls.last.request.headers["x-goog-api-key"] == "gm-secret-123"
    assert caught.value.status_code == 400
    assert caught.value.error_type == "INVALID_ARGUMENT"
    assert "thought_signature" in caught.value.message
    assert "gm-secret-123" not in repr(caught.value) + str(caught.value.body)


@pytest.mark.anyio
async def test_malformed_chunk_before_output_is_transient() -> None:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{FLASH}:streamGenerateContent?alt=sse").mock(
            return_value=stream_answer(b"data: {not json\r\n\r\n")
        )
        async with Client([Source("gemini", "gemini-2.5-flash", api_key="k")]) as client:
            with pytest.raises(TransientError, match="not JSON"):
                await collect(client.stream([{"role": "user", "content": "q"}]), [])


def test_unsigned_function_calls_get_the_placeholder_on_gemini_3_only() -> None:
    calls = (
        ToolCall(id="call_a", name="weather", arguments='{"city":"Paris"}'),
        ToolCall(id="call_b", name="clock", arguments="{}"),
    )
    signed = Message(
        role="assistant",
        tool_calls=(calls[0],),
        reasoning_format="gemini",
        reasoning_items=(
            {
                "functionCall": {"name": "weather", "args": {"city": "Paris"}},
                "thoughtSignature": "c2ln",
            },
        ),
    )
    messages = [
        {"role": "user", "content": "Weather and time?"},
        Message(role="assistant", tool_calls=calls),
        Message(role="tool", tool_call_id="call_a", content="21"),
        Message(role="tool", tool_call_id="call_b", content="12:00"),
        signed,
        Message(role="tool", tool_call_id="call_a", content="22"),
    ]
    unsigned_turn = [
        {
            "functionCall": {"name": "weather", "args": {"city": "Paris"}},
            "thoughtSignature": "skip_thought_signature_validator",
        },
        {"functionCall": {"name": "clock", "args": {}}},
    ]
    signed_turn = [
        {
            "functionCall": {"name": "weather", "args": {"city": "Paris"}},
            "thoughtSignature": "c2ln",
        },
    ]
    gemini_3 = build_body(request(messages), profile=PROFILE, sign_function_calls=True)
    assert gemini_3["contents"][1] == {"role": "model", "parts": unsigned_turn}
    assert gemini_3["contents"][3] == {"role": "model", "parts": signed_turn}
    gemini_2_5 = build_body(request(messages), profile=PROFILE)
    assert gemini_2_5["contents"][1] == {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
            {"functionCall": {"name": "clock", "args": {}}},
        ],
    }
