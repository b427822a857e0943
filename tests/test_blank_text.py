"""Blank text blocks an answer carried are left out when the turn goes back, where refused.

- Anthropic refuses a text block that is empty or whitespace only, in any message: 400
  "messages: text content blocks must contain non-whitespace text" (home-assistant/core#175637,
  2026-07-04), "messages: text content blocks must be non-empty" (anthropics/claude-code#59812,
  2026-05-16). Adaptive thinking can answer with such blocks, even before the thinking block,
  and a conversation that sends them back cannot continue (NousResearch/hermes-agent#69517,
  2026-07-22). The signed thinking blocks and the order of the rest are kept.
- Gemini refuses a part whose text is empty ("required oneof field 'data' must have one
  initialized field", router-for-me/CLIProxyAPI#1292, 2026-01-28) and a content without parts
  ("contents.parts must not be empty"); whitespace is text there and is kept.
- OpenAI Chat and Responses take empty content: nothing changes there.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, ContentUnsupportedError, Message, Source, Tool, ToolCall
from polythink.simulator import Simulator
from polythink.simulator.anthropic import BLANK_TEXT_TRIGGER
from tests.chatwire import sent_json, sse_response

pytestmark = pytest.mark.anyio

WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
THINKING = {"type": "thinking", "thinking": "Look it up.", "signature": "EqQBCkYIBxgC"}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Lisbon"}}
BLOCKS = [{"type": "text", "text": "\n\n"}, THINKING, {"type": "text", "text": " "}, TOOL_USE]
HI = Message(role="user", content="What is the weather in Lisbon?")


def _message(content: list[dict[str, Any]], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }


def _stream(content: list[dict[str, Any]]) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**_message([]), "stop_reason": None}}
    ]
    for index, block in enumerate(content):
        kind = block["type"]
        opening = (
            {"type": "thinking", "thinking": "", "signature": ""}
            if kind == "thinking"
            else ({"type": "text", "text": ""} if kind == "text" else {**block, "input": {}})
        )
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        if kind == "thinking":
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        elif kind == "text":
            deltas = [{"type": "text_delta", "text": block["text"]}]
        else:
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    events += [
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 20},
        },
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_blank_blocks_are_left_out_of_the_next_turn(stream: bool) -> None:
    first = sse_response(_stream(BLOCKS)) if stream else httpx.Response(200, json=_message(BLOCKS))
    answer = _message([{"type": "text", "text": "Sunny."}], stop="end_turn")
    source = Source(
        "anthropic", "claude-sonnet-4-6", api_key="sk-ant-test", reasoning_effort="high"
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(side_effect=[first, httpx.Response(200, json=answer)])
        async with Client([source]) as client:
            if stream:
                response = None
                async for event in client.stream([HI], tools=[WEATHER]):
                    if event.type == "done":
                        response = event.response
            else:
                response = await client.complete([HI], tools=[WEATHER])
            assert response is not None
            # The answer itself is kept as it came, blank blocks included.
            assert [b["type"] for b in response.message.reasoning_items] == [
                "text",
                "thinking",
                "text",
                "tool_use",
            ]
            result = Message(role="tool", tool_call_id="toolu_1", content='{"sky": "clear"}')
            await client.complete([HI, response.message, result], tools=[WEATHER])
    sent = sent_json(route.calls[1])["messages"]
    assert sent[1] == {"role": "assistant", "content": [THINKING, TOOL_USE]}


async def test_anthropic_blank_text_of_a_foreign_turn_is_left_out() -> None:
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Lisbon"}')
    history = [
        HI,
        Message(role="assistant", content="  \n", tool_calls=(call,)),
        Message(role="tool", tool_call_id="call_1", content="sunny"),
        Message(role="assistant", content=[{"type": "text", "text": " "}]),
        Message(role="user", content="And tomorrow?"),
    ]
    answer = _message([{"type": "text", "text": "Rain."}], stop="end_turn")
    source = Source("anthropic", "claude-sonnet-4-6", api_key="sk-ant-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).respond(200, json=answer)
        async with Client([source]) as client:
            await client.complete(history, tools=[WEATHER])
    assert sent_json(route.calls[0])["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is the weather in Lisbon?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Lisbon"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}],
        },
        # The blank assistant turn is gone; the API joins the two user turns around it.
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_simulated_adaptive_tool_loop_with_blank_blocks_continues(stream: bool) -> None:
    question = Message(role="user", content=f"{BLANK_TEXT_TRIGGER}What is the weather?")
    with Simulator() as sim:
        source = Source(
            "anthropic",
            "claude-sonnet-4-6",
            base_url=sim.base_url("anthropic"),
            api_key="sim",
            reasoning_effort="high",
        )

        async def call(messages: list[Message]) -> Any:
            if not stream:
                return await client.complete(messages, tools=[WEATHER])
            final = None
            async for event in client.stream(messages, tools=[WEATHER]):
                if event.type == "done":
                    final = event.response
            return final

        async with Client([source]) as client:
            first = await call([question])
            blocks = first.message.reasoning_items
            assert [b["type"] for b in blocks][:3] == ["text", "thinking", "text"]
            assert (blocks[0]["text"], blocks[2]["text"], blocks[-1]["type"]) == (
                "\n\n",
                " ",
                "tool_use",
            )
            result = Message(role="tool", tool_call_id=first.tool_calls[0].id, content="sunny")
            second = await call([question, first.message, result])
        # The simulator refuses blank blocks as the API does: sent as they came, the turn fails.
        async with httpx.AsyncClient() as http:
            raw = await http.post(
                f"{sim.base_url('anthropic')}/messages",
                headers={"anthropic-version": "2023-06-01"},
                json={
                    "model": "claude-sonnet-4-6",
                    "max_tokens": 1000,
                    "messages": [
                        {"role": "user", "content": question.content},
                        {"role": "assistant", "content": list(first.message.reasoning_items)},
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": first.tool_calls[0].id,
                                    "content": "sunny",
                                }
                            ],
                        },
                    ],
                },
            )
    assert second.finish_reason == "stop"
    assert raw.status_code == 400
    assert raw.json()["error"]["message"] == (
        "messages: text content blocks must contain non-whitespace text"
    )


GEMINI_URL = (
    "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
)
GEMINI_ANSWER = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
}


async def test_gemini_empty_text_parts_are_left_out_whitespace_kept() -> None:
    signed = {"text": "", "thoughtSignature": "c2ln"}
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Lisbon"}}}
    verbatim = Message(
        role="assistant",
        tool_calls=(ToolCall(id="c1", name="get_weather", arguments='{"city": "Lisbon"}'),),
        reasoning_items=({"text": ""}, signed, call),
        reasoning_format="gemini",
    )
    history = [
        HI,
        verbatim,
        Message(role="tool", tool_call_id="c1", content="sunny"),
        Message(
            role="assistant", content=[{"type": "text", "text": ""}, {"type": "text", "text": " "}]
        ),
        Message(role="user", content="Thanks."),
        Message(role="assistant", content=[{"type": "text", "text": ""}]),
        Message(role="user", content="Bye."),
    ]
    source = Source("gemini", "gemini-2.5-flash", api_key="gm-key")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(GEMINI_URL).respond(200, json=GEMINI_ANSWER)
        async with Client([source]) as client:
            response = await client.complete(history, tools=[WEATHER])
    contents = sent_json(route.calls[0])["contents"]
    # The model turn left without parts is not sent; the user turns around it become one.
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    assert contents[1]["parts"] == [signed, call]
    assert contents[3]["parts"] == [{"text": " "}]
    assert contents[4]["parts"] == [{"text": "Thanks."}, {"text": "Bye."}]
    assert [w for w in response.warnings if "assistant turn" in w] == [
        "not sent to gemini: the empty assistant turn of message 5 (it has no text, tool call "
        "or refusal, and Anthropic and Gemini refuse an empty turn: no wire gets one, and the "
        "turns around it meet)"
    ]


OPENAI_URL = "https://api.openai.com/v1/chat/completions"
CHAT_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1764547200,
    "model": "gpt-5.5",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Yes?"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}
ANTHROPIC_BLANK = (
    "anthropic cannot carry the content of message {n} (user): Anthropic refuses a text block "
    "that is empty or whitespace only (messages: text content blocks must contain non-whitespace"
    " text); send text with something in it, or leave the message out"
)


@pytest.mark.parametrize("content", ["", "  \n", [{"type": "text", "text": " "}]])
async def test_a_blank_user_turn_is_refused_before_anthropic_and_failover_moves_on(
    content: Any,
) -> None:
    # Left out, the assistant would speak last (a prefill); sent, it is Anthropic's 400.
    turns = [HI, Message(role="assistant", content="Sunny."), Message(role="user", content=content)]
    claude = Source("anthropic", "claude-sonnet-4-6", api_key="sk-ant-test")
    gpt = Source("openai", "gpt-5.5", api_key="sk-test")
    with respx.mock(assert_all_called=False) as mock:
        anthropic_route = mock.post(ANTHROPIC_URL).respond(200, json=_message([]))
        openai_route = mock.post(OPENAI_URL).respond(200, json=CHAT_ANSWER)
        async with Client([claude]) as client:
            with pytest.raises(ContentUnsupportedError) as caught:
                await client.complete(turns)
        async with Client([claude, gpt]) as client:
            response = await client.complete(turns)
    assert str(caught.value).startswith(ANTHROPIC_BLANK.format(n=2))
    assert caught.value.error_type == "unsupported_content"
    assert anthropic_route.call_count == 0
    assert response.text == "Yes?"
    assert sent_json(openai_route.calls[0])["messages"][2] == {"role": "user", "content": content}


async def test_blank_text_parts_beside_others_are_left_out_with_a_warning() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    turn = Message(role="user", content=[{"type": "text", "text": ""}, image])
    words = Message(
        role="user", content=[{"type": "text", "text": " "}, {"type": "text", "text": "Hm"}]
    )
    answer = _message([{"type": "text", "text": "A dot."}], stop="end_turn")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).respond(200, json=answer)
        async with Client([Source("anthropic", "claude-sonnet-4-6", api_key="k")]) as client:
            response = await client.complete([turn, Message(role="assistant", content="?"), words])
    sent = sent_json(route.calls[0])["messages"]
    assert sent[0]["content"] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
    ]
    assert sent[2]["content"] == [{"type": "text", "text": "Hm"}]
    assert [w for w in response.warnings if "blank" in w] == [
        "not sent to anthropic: the blank text parts of messages 0, 2 (Anthropic refuses a text "
        "block that is empty or whitespace only (messages: text content blocks must contain "
        "non-whitespace text))"
    ]


async def test_gemini_refuses_an_empty_user_turn_and_leaves_out_an_empty_part() -> None:
    source = Source("gemini", "gemini-2.5-flash", api_key="gm-key")
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(GEMINI_URL).respond(200, json=GEMINI_ANSWER)
        async with Client([source]) as client:
            with pytest.raises(ContentUnsupportedError) as caught:
                await client.complete([Message(role="user", content="")])
            assert route.call_count == 0
            parts = [{"type": "text", "text": "Hi"}, {"type": "text", "text": ""}]
            response = await client.complete([Message(role="user", content=parts)])
    assert str(caught.value).startswith(
        "gemini cannot carry the content of message 0 (user): Gemini refuses a text part whose "
        "text is empty (required oneof field 'data' must have one initialized field); send text "
        "with something in it, or leave the message out"
    )
    assert sent_json(route.calls[0])["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert [w for w in response.warnings if "blank" in w] == [
        "not sent to gemini: the blank text parts of message 0 (Gemini refuses a text part whose "
        "text is empty (required oneof field 'data' must have one initialized field))"
    ]
