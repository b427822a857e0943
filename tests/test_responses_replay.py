"""Replay the recorded OpenAI Responses (and OpenRouter Responses) traffic through Client.

Each test gives polythink the same inputs the recorded client had: its messages and tier
through the public API, and the recorded client's own optional fields (``summary``,
``store``, an empty ``instructions``) through ``extra_body``. The body polythink sends must
then equal the recorded body exactly, except for the differences each test declares with
its reason. The answer is parsed from the recorded bytes and compared field by field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Effort, Message, Source, ThinkingObservation, Usage
from polythink.providers import get_provider
from polythink.transports.openai_responses import parse_response
from tests.cassettes import Interaction
from tests.conftest import cassette

pytestmark = [pytest.mark.anyio, pytest.mark.fixture_replay]

OPENAI_URL = "https://api.openai.com/v1/responses"
OPENROUTER_URL = "https://openrouter.ai/api/v1/responses"


def recorded_answer(interaction: Interaction) -> httpx.Response:
    content_type = interaction.header("content-type") or "application/json"
    return httpx.Response(
        interaction.status, content=interaction.response_raw, headers={"content-type": content_type}
    )


def expected_body(
    recorded: Mapping[str, Any],
    *,
    added: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The recorded body plus the fields polythink sends and the recorded client did not."""
    expected = copy.deepcopy(dict(recorded))
    expected.update(added or {})
    return expected


def sent_body(route: respx.Route, call: int = -1) -> Any:
    return json.loads(route.calls[call].request.content)


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """The JSON events of a recorded Responses stream, in order (``[DONE]`` excluded)."""
    events = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(
            line[len("data: ") :] for line in block.split("\n") if line.startswith("data: ")
        )
        if data and data != "[DONE]":
            events.append(json.loads(data))
    return events


async def test_effort_low_nonstream_o3_mini() -> None:
    interaction = cassette("pai_openai_responses_reasoning_effort_low.yaml").interactions[0]
    recorded = interaction.request_body
    source = Source("openai-responses", "o3-mini", api_key="sk-test", reasoning_effort="low")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            response = await client.complete(
                [{"role": "user", "content": recorded["input"][0]["content"]}],
                extra_body={"instructions": ""},
            )
    # Recorded 2025-03-27, before clients asked reasoning models for encrypted reasoning
    # (pydantic-ai added it in PR #2867, 2025-09); polythink asks o3-mini for it, and always
    # says whether it streams.
    assert sent_body(route) == expected_body(
        recorded, added={"include": ["reasoning.encrypted_content"], "stream": False}
    )
    output = interaction.response_json["output"]
    assert response.text == output[1]["content"][0]["text"]
    assert response.text.startswith("Ingredients for the dough:\n• 300 g cornstarch")
    assert response.reasoning is None
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.usage == Usage(
        input_tokens=88,
        output_tokens=547,
        reasoning_tokens=128,
        cache_read_tokens=0,
        cache_write_tokens=None,
    )
    assert response.model == "o3-mini-2025-01-31"
    assert response.id == "resp_67e5393080ec81918116f16210e1395c0e395386ebcf3a62"
    assert response.requested_effort is Effort.LOW
    assert response.applied_effort is Effort.LOW
    assert response.thinking is ThinkingObservation.OBSERVED
    assert response.message.reasoning_format == "openai-responses"
    assert list(response.message.reasoning_items) == output
    assert response.message.reasoning_items[0] == {
        "id": "rs_67e539329f808191ae793066c0ee20800e395386ebcf3a62",
        "summary": [],
        "type": "reasoning",
    }


async def test_summary_auto_nonstream_gpt_5_2_with_instructions() -> None:
    interaction = cassette("pai_openai_responses_reasoning_summary_auto.yaml").interactions[0]
    recorded = interaction.request_body
    source = Source("openai-responses", "gpt-5.2", api_key="sk-test", reasoning_effort="high")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            response = await client.complete(
                [
                    {"role": "system", "content": "You are a helpful coding assistant."},
                    {"role": "user", "content": recorded["input"][0]["content"]},
                ],
                extra_body={"reasoning": {"summary": "auto"}},
            )
    assert sent_body(route) == recorded
    reasoning_item, message_item = interaction.response_json["output"]
    assert response.reasoning == reasoning_item["summary"][0]["text"]
    assert response.reasoning.startswith("**Generating factorial function**\n\nI need to respond")
    assert response.text == message_item["content"][0]["text"]
    assert response.finish_reason == "stop"
    assert response.usage == Usage(34, 226, 59, 0, None)
    assert response.model == "gpt-5.2-2025-12-11"
    stored = response.message.reasoning_items[0]
    assert stored["encrypted_content"] == reasoning_item["encrypted_content"]
    assert stored["encrypted_content"].startswith("gAAAAABpQvTkJZft62qJ")
    assert response.thinking is ThinkingObservation.OBSERVED
    assert response.applied_effort is Effort.HIGH


async def test_chat_cassette_interaction_0_nonstream_and_second_turn_history() -> None:
    """Interaction 0 is a Responses call; the follow-up turn must carry its items verbatim."""
    interaction = cassette("pai_openai_chat_reasoning_effort_and_responses.yaml").interactions[0]
    recorded = interaction.request_body
    source = Source("openai-responses", "o3-mini", api_key="sk-test", reasoning_effort="high")
    question = recorded["input"][0]["content"]
    follow_up = "Considering the way to cross the street, analogously, how do I cross the river?"
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            first = await client.complete(
                [{"role": "user", "content": question}],
                extra_body={"reasoning": {"summary": "detailed"}},
            )
            history = [{"role": "user", "content": question}, first.message]
            await client.complete(
                [*history, {"role": "user", "content": follow_up}],
                extra_body={"reasoning": {"summary": "detailed"}},
            )
    assert sent_body(route, 0) == recorded
    output = interaction.response_json["output"]
    summaries = [part["text"] for part in output[0]["summary"]]
    assert len(summaries) == 2
    assert first.reasoning == summaries[0] + "\n\n" + summaries[1]
    assert first.text == output[1]["content"][0]["text"]
    assert first.usage == Usage(13, 1915, 1600, 0, None)
    second = sent_body(route, 1)
    assert second["input"] == [
        {"role": "user", "content": question},
        output[0],
        output[1],
        {"role": "user", "content": follow_up},
    ]
    assert second["input"][1]["encrypted_content"] == output[0]["encrypted_content"]
    assert second["include"] == ["reasoning.encrypted_content"]
    assert second["reasoning"] == {"effort": "high", "summary": "detailed"}


async def test_summary_stream_o3_mini_takes_final_items_from_output_item_done() -> None:
    interaction = cassette("pai_openai_responses_reasoning_summary_stream.yaml").interactions[0]
    recorded = interaction.request_body
    events = sse_events(interaction.response_raw)
    source = Source("openai-responses", "o3-mini", api_key="sk-test", reasoning_effort="high")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            received = [
                event
                async for event in client.stream(
                    [{"role": "user", "content": recorded["input"][0]["content"]}],
                    extra_body={"reasoning": {"summary": "detailed"}},
                )
            ]
    assert sent_body(route) == recorded
    done_parts = [e["part"]["text"] for e in events if e["type"].endswith("summary_part.done")]
    assert len(done_parts) == 4
    text_done = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    item_done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    completed = next(e["response"] for e in events if e["type"] == "response.completed")

    kinds = [event.type for event in received]
    assert kinds.count("reasoning") == 383
    assert kinds.count("text") == 271
    assert kinds[-2:] == ["usage", "done"]
    final = received[-1].response
    assert final is not None
    assert "".join(e.text or "" for e in received if e.type == "reasoning") == final.reasoning
    assert final.reasoning == "\n\n".join(done_parts)
    assert "".join(e.text or "" for e in received if e.type == "text") == text_done == final.text
    assert final.usage == Usage(13, 1680, 1408, 0, None)
    assert received[-2].usage == final.usage
    assert final.finish_reason == "stop"
    assert final.model == "o3-mini-2025-01-31"
    assert final.id == "resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff"
    # The .done item's encrypted_content is kept; the completed response carries another.
    assert list(final.message.reasoning_items) == item_done
    kept = final.message.reasoning_items[0]["encrypted_content"]
    assert kept == item_done[0]["encrypted_content"]
    assert kept.startswith("gAAAAABoxC0m_QWpOlSt8wyPk")
    assert kept != completed["output"][0]["encrypted_content"]
    assert final.thinking is ThinkingObservation.OBSERVED

    # Streaming and non-streaming give the same answer for the same exchange.
    whole = parse_response(
        completed, profile=get_provider("openai-responses"), source_index=0, model="o3-mini"
    )
    assert (whole.text, whole.reasoning, whole.usage, whole.finish_reason) == (
        final.text,
        final.reasoning,
        final.usage,
        final.finish_reason,
    )


async def test_plain_stream_gpt_5_5_with_store_false() -> None:
    interaction = cassette("llm_openai_responses_plain_stream.yaml").interactions[0]
    recorded = interaction.request_body
    source = Source("openai-responses", "gpt-5.5", api_key="sk-test", reasoning_effort="low")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            received = [
                event
                async for event in client.stream(
                    [{"role": "user", "content": "Reply with exactly: pong"}],
                    extra_body={"store": False},
                )
            ]
    assert sent_body(route) == recorded
    assert [(e.type, e.text) for e in received[:-2]] == [("text", "pong")]
    final = received[-1].response
    assert final is not None
    assert final.text == "pong"
    assert final.reasoning is None
    assert final.usage == Usage(11, 5, 0, 0, None)
    assert final.model == "gpt-5.5-2026-04-23"
    assert final.finish_reason == "stop"
    assert final.thinking is ThinkingObservation.ABSENT
    assert final.warnings == [
        "model 'gpt-5.5' reported 0 reasoning tokens although reasoning_effort='low' was sent"
    ]
    item = final.message.reasoning_items[0]
    assert item["phase"] == "final_answer"
    assert item["content"] == [
        {"type": "output_text", "annotations": [], "logprobs": [], "text": "pong"}
    ]


async def test_openrouter_stream_without_event_lines_and_with_comments() -> None:
    interaction = cassette("pai_openrouter_responses_reasoning_text_stream.yaml").interactions[0]
    recorded = interaction.request_body
    raw = interaction.response_raw
    assert b": OPENROUTER PROCESSING" in raw
    assert b"event:" not in raw
    source = Source("openrouter-responses", "openai/gpt-oss-20b", api_key="sk-or-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENROUTER_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            received = [
                event
                async for event in client.stream([{"role": "user", "content": "What is 2+2?"}])
            ]
    assert sent_body(route) == recorded
    reasoning = (
        'The user asks: "What is 2+2?" They expect a straightforward answer: 4. Just answer 4.'
    )
    assert "".join(e.text or "" for e in received if e.type == "reasoning") == reasoning
    assert [e.text for e in received if e.type == "text"] == ["4"]
    final = received[-1].response
    assert final is not None
    assert final.reasoning == reasoning
    assert final.text == "4"
    assert final.usage == Usage(78, 37, 22, 0, None)
    assert final.model == "openai/gpt-oss-20b"
    assert final.id == "gen-1764265411-Fu1iEX7h5MRWiL79lb94"
    assert final.message.reasoning_format == "openrouter-responses"
    # Items come from output_item.done; OpenRouter renames them in response.completed.
    assert [item["id"] for item in final.message.reasoning_items] == [
        "rs_tmp_2kbe7x16sax",
        "msg_tmp_8cjof4f6zpw",
    ]
    assert final.message.reasoning_items[0]["content"] == [
        {"type": "reasoning_text", "text": reasoning}
    ]
    assert final.requested_effort is None
    assert final.thinking is ThinkingObservation.OBSERVED


async def test_items_from_another_wire_are_not_sent_to_openai() -> None:
    """OpenRouter's items do not verify at OpenAI: a foreign assistant turn is sent as text."""
    openrouter_turn = Message(
        role="assistant",
        content="4",
        reasoning="r",
        reasoning_items=({"type": "reasoning", "id": "rs_tmp_1", "summary": []},),
        reasoning_format="openrouter-responses",
    )
    interaction = cassette("llm_openai_responses_plain_stream.yaml").interactions[0]
    source = Source("openai-responses", "gpt-5.5", api_key="sk-test")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(OPENAI_URL).mock(return_value=recorded_answer(interaction))
        async with Client([source]) as client:
            async for _ in client.stream(
                [
                    {"role": "user", "content": "2+2?"},
                    openrouter_turn,
                    {"role": "user", "content": "x"},
                ]
            ):
                pass
    assert sent_body(route)["input"] == [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "x"},
    ]
