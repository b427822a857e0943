"""Chat Completions request bodies and response parsing beyond the recordings.

Provider dialects from WIRE.md §5-§6: DeepSeek takes ``reasoning_content`` back on tool-call
turns only (and answers 400 without it there); Qwen, GLM and Kimi take ``reasoning_content``
back; Ollama takes ``reasoning``; OpenRouter takes ``reasoning_details`` verbatim; OpenAI takes
none of them. Reasoning inline as ``<think>…</think>`` (Groq ``reasoning_format: raw``) parses
the same streamed and not.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, Source, ToolCall, Usage
from polythink.errors import RequestRejectedError, StreamInterruptedError, TransientError
from tests.chatwire import ODD_SIZES, collect, sent_json, sse, sse_response
from tests.conftest import cassette

HI = {"role": "user", "content": "hi"}
CALL = ToolCall(id="call_9", name="lookup", arguments='{"q":"x"}')
DETAILS = ({"type": "reasoning.text", "text": "t", "signature": "sig", "format": "f", "index": 0},)


def _source(provider: str, model: str, **kwargs: Any) -> Source:
    return Source(provider, model, api_key="sk-wire-0123456789ab", **kwargs)


def _url(source: Source) -> str:
    return f"{source.endpoint}/chat/completions"


def _ok(
    message: dict[str, Any] | None = None, finish: str = "stop", **extra: Any
) -> httpx.Response:
    body = {
        "id": "c1",
        "model": "served-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **(message or {"content": "ok"})},
                "finish_reason": finish,
            }
        ],
        **extra,
    }
    return httpx.Response(200, json=body)


async def _sent(source: Source, messages: list[Any], **call: Any) -> dict[str, Any]:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=_ok())
        async with Client([source]) as client:
            await client.complete(messages, **call)
    body: dict[str, Any] = sent_json(route.calls[0])
    return body


def _history() -> list[Any]:
    return [
        HI,
        Message(
            role="assistant",
            content=None,
            tool_calls=(CALL,),
            reasoning="need a lookup",
            reasoning_items=DETAILS,
            reasoning_format="openrouter",
        ),
        Message(role="tool", content="found", tool_call_id="call_9"),
        Message(
            role="assistant",
            content="done",
            reasoning="summarise",
            reasoning_items=DETAILS,
            reasoning_format="openrouter",
        ),
        {"role": "user", "content": "more"},
    ]


TOOL_TURN = {"role": "assistant", "content": None, "tool_calls": [CALL.to_openai()]}
TEXT_TURN = {"role": "assistant", "content": "done"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "tool_turn_extra", "text_turn_extra"),
    [
        ("openai", "gpt-5.5", {}, {}),
        ("xai", "grok-3-mini", {}, {}),
        # DeepSeek: every assistant turn of a tool exchange, the answer after the results
        # too ("if there was a tool call between two user messages", DS, CONTINUITY §3.3).
        (
            "deepseek",
            "deepseek-v4-pro",
            {"reasoning_content": "need a lookup"},
            {"reasoning_content": "summarise"},
        ),
        # Qwen documents reasoning_content back with tool results only (docs.qwencloud.com
        # "function calling with thinking mode", cited by vercel/ai#20871, 2026-09-16).
        ("qwen", "qwen3.7-plus", {"reasoning_content": "need a lookup"}, {}),
        (
            "glm",
            "glm-4.6",
            {"reasoning_content": "need a lookup"},
            {"reasoning_content": "summarise"},
        ),
        (
            "kimi",
            "kimi-k2.5",
            {"reasoning_content": "need a lookup"},
            {"reasoning_content": "summarise"},
        ),
        ("ollama", "qwen3:8b", {"reasoning": "need a lookup"}, {"reasoning": "summarise"}),
        (
            "openrouter",
            "openai/gpt-5.5",
            {"reasoning_details": [dict(DETAILS[0])]},
            {"reasoning_details": [dict(DETAILS[0])]},
        ),
    ],
)
async def test_reasoning_sent_back_per_provider(
    provider: str, model: str, tool_turn_extra: dict[str, Any], text_turn_extra: dict[str, Any]
) -> None:
    body = await _sent(_source(provider, model), _history())
    assert body["messages"] == [
        HI,
        {**TOOL_TURN, **tool_turn_extra},
        {"role": "tool", "content": "found", "tool_call_id": "call_9"},
        {**TEXT_TURN, **text_turn_extra},
        {"role": "user", "content": "more"},
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["source", "call"])
async def test_qwen_preserve_thinking_sends_reasoning_on_every_turn(where: str) -> None:
    # "Preserve thinking in multi-turn": with preserve_thinking true, earlier turns' reasoning
    # goes back as reasoning_content (docs.qwencloud.com, cited by vercel/ai#20871).
    preserve = {"preserve_thinking": True}
    source = Source(
        "qwen",
        "qwen3.7-plus",
        api_key="sk-test",
        extra_body=preserve if where == "source" else None,
    )
    body = await _sent(source, _history(), extra_body=preserve if where == "call" else None)
    assert body["preserve_thinking"] is True
    assert body["messages"][1] == {**TOOL_TURN, "reasoning_content": "need a lookup"}
    assert body["messages"][3] == {**TEXT_TURN, "reasoning_content": "summarise"}


@pytest.mark.anyio
async def test_qwen_preserve_thinking_false_on_the_call_wins() -> None:
    source = Source(
        "qwen", "qwen3.7-plus", api_key="sk-test", extra_body={"preserve_thinking": True}
    )
    body = await _sent(source, _history(), extra_body={"preserve_thinking": False})
    assert body["messages"][3] == TEXT_TURN


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "tool_turn_extra"),
    [
        ("deepseek", "deepseek-v4-pro", {"reasoning_content": ""}),
        ("kimi", "kimi-k3", {"reasoning_content": ""}),
        ("glm", "glm-4.6", {}),
        ("qwen", "qwen3.7-plus", {}),
        ("openai", "gpt-5.5", {}),
    ],
)
async def test_a_tool_turn_without_reasoning_gets_the_field_where_it_is_required(
    provider: str, model: str, tool_turn_extra: dict[str, Any]
) -> None:
    # A tool turn made by another provider (before a failover) has no reasoning text.
    # DeepSeek and Kimi require the field on every tool-call turn while thinking is on.
    foreign = Message(role="assistant", tool_calls=(CALL,))
    tool = Message(role="tool", tool_call_id="call_9", content="found")
    body = await _sent(_source(provider, model), [HI, foreign, tool])
    assert body["messages"][1] == {**TOOL_TURN, **tool_turn_extra}


@pytest.mark.anyio
async def test_reasoning_items_of_another_wire_are_not_sent() -> None:
    anthropic_turn = Message(
        role="assistant",
        content="hi",
        reasoning_format="anthropic",
        reasoning_items=({"type": "thinking", "thinking": "t", "signature": "s"},),
    )
    body = await _sent(
        _source("openrouter", "anthropic/claude-sonnet-4.5"), [HI, anthropic_turn, HI]
    )
    assert body["messages"][1] == {"role": "assistant", "content": "hi"}


@pytest.mark.anyio
async def test_body_fields_and_extra_body_precedence() -> None:
    source = _source(
        "openai",
        "gpt-5.5",
        reasoning_effort="none",
        extra_body={"service_tier": "flex", "metadata": {"team": "a", "env": "prod"}},
    )
    body = await _sent(
        source,
        [HI],
        max_tokens=64,
        temperature=0.0,
        top_p=0.5,
        stop="END",
        tool_choice="none",
        extra_body={"metadata": {"team": "b"}, "reasoning_effort": "high"},
    )
    assert body == {
        "model": "gpt-5.5",
        "messages": [HI],
        "stream": False,
        "max_completion_tokens": 64,
        "temperature": 0.0,
        "top_p": 0.5,
        "stop": ["END"],
        "tool_choice": "none",
        "reasoning_effort": "high",
        "service_tier": "flex",
        "metadata": {"team": "b", "env": "prod"},
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "field"),
    [
        ("openai", "o3-mini", "max_completion_tokens"),
        ("deepseek", "deepseek-v4-pro", "max_tokens"),
        ("groq", "qwen3-32b", "max_tokens"),
        ("openrouter", "openai/o3-mini", "max_tokens"),
    ],
)
async def test_output_ceiling_field_per_provider(provider: str, model: str, field: str) -> None:
    body = await _sent(_source(provider, model), [HI], max_tokens=300)
    assert body[field] == 300
    assert [k for k in body if k in ("max_tokens", "max_completion_tokens")] == [field]


@pytest.mark.anyio
async def test_qwen_budget_raises_the_ceiling_in_the_body() -> None:
    body = await _sent(
        _source("qwen", "qwen3.7-plus"), [HI], max_tokens=1000, reasoning_effort="medium"
    )
    assert (body["enable_thinking"], body["thinking_budget"], body["max_tokens"]) == (
        True,
        8192,
        9192,
    )


# ---------------------------------------------------------------- parsing


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("finish", "mapped", "limited"),
    [
        ("stop", "stop", False),
        ("length", "length", True),
        ("content_filter", "content_filter", False),
        ("tool_calls", "tool_calls", False),
        ("function_call", "tool_calls", False),
        ("end_turn", "stop", False),
        ("max_tokens", "length", True),
        ("error", "error", False),
        ("something_new", "error", False),
    ],
)
async def test_finish_reasons(finish: str, mapped: str, limited: bool) -> None:
    source = _source("openai", "gpt-4o-mini")
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=_ok(finish=finish))
        async with Client([source]) as client:
            response = await client.complete([HI])
    assert (response.finish_reason, response.output_limited) == (mapped, limited)


@pytest.mark.anyio
async def test_mistral_thinking_chunks_are_reasoning() -> None:
    source = _source("mistral", "mistral-small-latest")
    content = [
        {
            "type": "thinking",
            "thinking": [{"type": "text", "text": "weigh "}, {"type": "text", "text": "options"}],
        },
        {"type": "text", "text": "Answer."},
    ]
    chunks = sse(
        {"choices": [{"index": 0, "delta": {"content": [content[0]]}}]},
        {"choices": [{"index": 0, "delta": {"content": [content[1]]}, "finish_reason": "stop"}]},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).side_effect = [
            _ok({"content": content}),
            sse_response(chunks, ODD_SIZES),
        ]
        async with Client([source]) as client:
            whole = await client.complete([HI], reasoning_effort="high")
            events = await collect(client.stream([HI], reasoning_effort="high"))
    assert (whole.text, whole.reasoning) == ("Answer.", "weigh options")
    assert [(e.type, e.text) for e in events[:-1]] == [
        ("reasoning", "weigh options"),
        ("text", "Answer."),
    ]


def _groq_raw_content() -> str:
    recorded = cassette("pai_groq_reasoning_format_raw_and_parsed.yaml").interactions[0]
    content: str = recorded.response_json["choices"][0]["message"]["content"]
    return content


@pytest.mark.anyio
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 8, 9, 64])
async def test_inline_think_tags_parse_the_same_streamed_and_not(piece: int) -> None:
    content = _groq_raw_content()
    source = _source("groq", "deepseek-r1-distill-llama-70b")
    deltas = [content[i : i + piece] for i in range(0, len(content), piece)]
    chunks = sse(
        *({"choices": [{"index": 0, "delta": {"content": d}}]} for d in deltas),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).side_effect = [
            _ok({"content": content}),
            sse_response(chunks, ODD_SIZES),
        ]
        async with Client([source]) as client:
            whole = await client.complete([HI])
            events = await collect(client.stream([HI]))
    streamed = events[-1].response
    assert streamed is not None
    assert (streamed.reasoning, streamed.text) == (whole.reasoning, whole.text)
    assert whole.reasoning is not None
    assert whole.reasoning.startswith("Okay, so I want")
    assert whole.reasoning.endswith("I'm excited to try these Uruguayan alfajores!")
    assert whole.text.startswith("\n\nTo make Uruguayan alfajores")
    assert "".join(e.text or "" for e in events if e.type == "reasoning") == whole.reasoning
    assert "".join(e.text or "" for e in events if e.type == "text") == whole.text
    kinds = [e.type for e in events if e.type in ("reasoning", "text")]
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "reasoning", "text"),
    [
        ("<think>  a  </think>b", "a", "b"),
        ("<think></think>b", None, "b"),
        ("  <think>\nx\n</think>\n", "x", "\n"),
        ("<think>unclosed", "unclosed", ""),
        ("no tags <think>x</think>", None, "no tags <think>x</think>"),
        ("<thin", None, "<thin"),
    ],
)
async def test_inline_think_edge_cases(content: str, reasoning: str | None, text: str) -> None:
    source = _source("vllm", "Qwen/Qwen3-8B")
    chunks = sse(
        *({"choices": [{"index": 0, "delta": {"content": c}}]} for c in content),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).side_effect = [_ok({"content": content}), sse_response(chunks)]
        async with Client([source]) as client:
            whole = await client.complete([HI])
            events = await collect(client.stream([HI]))
    streamed = events[-1].response
    assert streamed is not None
    assert (whole.reasoning, whole.text) == (reasoning, text)
    assert (streamed.reasoning, streamed.text) == (reasoning, text)


@pytest.mark.anyio
async def test_parallel_tool_call_deltas_merge_by_index() -> None:
    source = _source("openai", "gpt-4o-mini")
    chunks = sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "weather", "arguments": ""},
                            },
                            {
                                "index": 1,
                                "id": "call_b",
                                "type": "function",
                                "function": {"name": "time", "arguments": '{"tz":'},
                            },
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "function": {"arguments": '"UTC"}'}},
                            {"index": 0, "function": {"arguments": '"Oslo"}'}},
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(chunks, ODD_SIZES))
        async with Client([source]) as client:
            events = await collect(client.stream([HI]))
    calls = [
        ToolCall(id="call_a", name="weather", arguments='{"city":"Oslo"}'),
        ToolCall(id="call_b", name="time", arguments='{"tz":"UTC"}'),
    ]
    assert [e.tool_call for e in events if e.type == "tool_call"] == calls
    assert events[-1].response is not None
    assert events[-1].response.finish_reason == "tool_calls"
    assert events[-1].response.message == Message(role="assistant", tool_calls=tuple(calls))


@pytest.mark.anyio
async def test_choices_other_than_the_first_are_ignored() -> None:
    source = _source("openai", "gpt-4o-mini")
    chunks = sse(
        {
            "choices": [
                {"index": 1, "delta": {"content": "other"}},
                {"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"},
            ]
        },
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(chunks))
        async with Client([source]) as client:
            events = await collect(client.stream([HI]))
    assert [(e.type, e.text) for e in events[:-1]] == [("text", "mine")]


# ---------------------------------------------------------------- malformed and in-band errors


@pytest.mark.anyio
async def test_in_band_error_in_a_200_body() -> None:
    source = _source("openrouter", "openai/gpt-5.5")
    body = {
        "error": {"code": 400, "message": "Provider returned error", "metadata": {"raw": "bad"}}
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=httpx.Response(200, json=body))
        async with Client([source]) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.complete([HI])
    assert (info.value.error_type, info.value.provider) == ("400", "openrouter")
    assert info.value.message == "openrouter sent an in-stream error: Provider returned error"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"<html>bad gateway</html>", "openai answered HTTP 200 with a body that is not JSON"),
        (b'{"object":"chat.completion","choices":[]}', "openai answered without choices"),
    ],
)
async def test_unusable_200_bodies_are_transient(content: bytes, message: str) -> None:
    source = _source("openai", "gpt-4o-mini")
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=httpx.Response(200, content=content))
        async with Client([source]) as client:
            with pytest.raises(TransientError) as info:
                await client.complete([HI])
    assert info.value.message == message


@pytest.mark.anyio
async def test_a_chunk_that_is_not_json_breaks_the_stream_with_what_came_before() -> None:
    source = _source("openai", "gpt-4o-mini")
    chunks = sse({"choices": [{"index": 0, "delta": {"content": "par"}}]}, done=False) + (
        b"data: {not json\n\n"
    )
    with respx.mock(assert_all_called=True) as mock:
        mock.post(_url(source)).mock(return_value=sse_response(chunks))
        async with Client([source]) as client:
            with pytest.raises(StreamInterruptedError) as info:
                await collect(client.stream([HI]))
    assert info.value.partial is not None
    assert info.value.partial.text == "par"
    assert isinstance(info.value.__cause__, TransientError)
    assert info.value.__cause__.body == "{not json"


@pytest.mark.anyio
async def test_stream_usage_is_requested_and_reported_once() -> None:
    source = _source("openai", "gpt-4o-mini")
    usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    chunks = sse(
        {
            "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": None,
        },
        {"choices": [], "usage": usage},
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=sse_response(chunks))
        async with Client([source]) as client:
            events = await collect(client.stream([HI]))
    assert sent_json(route.calls[0])["stream_options"] == {"include_usage": True}
    assert [e.usage for e in events if e.type == "usage"] == [Usage(4, 2, None, None, None)]
    assert json.loads(route.calls[0].request.content)["stream"] is True


@pytest.mark.anyio
async def test_headers_auth_and_custom_headers() -> None:
    source = Source(
        "openrouter",
        "openai/gpt-5.5",
        api_key="or-key-0123456789",
        headers={"HTTP-Referer": "https://app.example.test", "X-Title": "demo"},
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=_ok())
        async with Client([source]) as client:
            await client.complete([HI])
    headers = route.calls[0].request.headers
    assert headers["authorization"] == "Bearer or-key-0123456789"
    assert (headers["http-referer"], headers["x-title"]) == ("https://app.example.test", "demo")
    assert headers["content-type"] == "application/json"


def _tool_chunks(*fragments: dict[str, Any]) -> bytes:
    return sse(
        *({"choices": [{"index": 0, "delta": {"tool_calls": [f]}}]} for f in fragments),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )


@pytest.mark.anyio
async def test_a_malformed_tool_call_before_output_is_retried_and_failed_over() -> None:
    first = _source("openai", "gpt-4o", max_retries=1)
    second = _source("openai", "gpt-4o", base_url="https://second.example/v1")
    junk = _tool_chunks({"index": 0, "function": {"arguments": "{}"}})
    good = sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})
    with respx.mock(assert_all_called=True) as mock:
        bad = mock.post(_url(first))
        bad.side_effect = lambda request: sse_response(junk)
        mock.post(_url(second)).mock(return_value=sse_response(good))
        async with Client([first]) as client:
            with pytest.raises(TransientError) as caught:
                await collect(client.stream([HI]))
        async with Client([first, second]) as client:
            events = await collect(client.stream([HI]))
    error = caught.value
    assert type(error) is TransientError
    assert (error.error_type, error.attempts) == ("malformed_tool_call", 2)
    assert error.message == (
        "openai sent a tool call that cannot be assembled unambiguously: "
        "a fragment with neither id nor name opens no call"
    )
    assert bad.call_count == 4  # two attempts alone, then two before failing over
    done = events[-1].response
    assert done is not None
    assert (done.text, done.source_index) == ("ok", 1)


@pytest.mark.anyio
async def test_a_malformed_tool_call_after_output_is_stream_interrupted() -> None:
    source = _source("openai", "gpt-4o", max_retries=2)
    body = _tool_chunks(
        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}},
        {"index": 0, "function": {"name": "g", "arguments": "}"}},
    )
    seen: list[Any] = []
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(_url(source)).mock(return_value=sse_response(body))
        async with Client([source]) as client:
            with pytest.raises(StreamInterruptedError) as caught:
                await collect(client.stream([HI]), seen)
    error = caught.value
    assert route.call_count == 1
    assert (error.provider, error.error_type) == ("openai", "malformed_tool_call")
    assert error.message == (
        "stream from openai broke after output began: openai sent a tool call that cannot be "
        "assembled unambiguously: call 0 named 'f' then 'g' with no new id"
    )
    assert type(error.__cause__) is TransientError
    assert [e.type for e in seen] == ["tool_call_delta"]
    assert error.partial.tool_calls == [ToolCall(id="c1", name="f", arguments="{")]
    assert (error.partial.finish_reason, error.partial.interrupted) == ("error", True)
