"""polythink against the simulated Responses API: tool loops, stateless history, tiers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from polythink import (
    Client,
    Effort,
    Message,
    RequestRejectedError,
    Response,
    Source,
    ThinkingObservation,
    ThinkingUnsupportedError,
    Tool,
    ToolCall,
)
from polythink.simulator import Simulator

pytestmark = pytest.mark.anyio

LOOKUP = Tool(
    name="lookup",
    description="Look a fact up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def source(sim: Simulator, model: str = "gpt-5.5", **fields: Any) -> Source:
    provider = fields.pop("provider", "openai-responses")
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim-key", **fields)


async def ask(client: Client, messages: list[Any], *, stream: bool, **fields: Any) -> Response:
    if not stream:
        return await client.complete(messages, **fields)
    final = None
    async for event in client.stream(messages, **fields):
        if event.type == "done":
            final = event.response
    assert final is not None
    return final


@pytest.mark.parametrize("stream", [False, True])
async def test_three_turn_tool_loop_stateless(sim: Simulator, stream: bool) -> None:
    """Two tool turns then an answer, with store=false: every turn's encrypted reasoning must
    come back intact (the simulator verifies it and 404s a reasoning item without it)."""
    config = source(sim, reasoning_effort="high", headers={"x-sim-tool-rounds": "2"})
    messages: list[Any] = [{"role": "user", "content": "What is the capital of France?"}]
    turns = []
    async with Client([config]) as client:
        for _ in range(3):
            response = await ask(
                client, messages, stream=stream, tools=[LOOKUP], extra_body={"store": False}
            )
            turns.append(response)
            messages.append(response.message)
            for call in response.tool_calls:
                messages.append(
                    Message(role="tool", tool_call_id=call.id, content='{"answer": "Paris"}')
                )
    assert [t.finish_reason for t in turns] == ["tool_calls", "tool_calls", "stop"]
    for turn in turns[:2]:
        assert len(turn.tool_calls) == 1
        call = turn.tool_calls[0]
        assert (call.name, call.arguments) == ("lookup", '{"q":"sim"}')
        assert call.id.startswith("call_")
        assert turn.usage is not None
        assert (turn.usage.output_tokens, turn.usage.reasoning_tokens) == (328, 320)
        kinds = [item["type"] for item in turn.message.reasoning_items]
        assert kinds == ["reasoning", "function_call"]
        assert turn.message.reasoning_items[0]["encrypted_content"].startswith("gAAAAB")
        assert len(turn.message.reasoning_items[0]["encrypted_content"]) == 70
    assert turns[0].tool_calls[0].id != turns[1].tool_calls[0].id
    final = turns[2]
    assert final.text.startswith("Simulated gpt-5.5 answer")
    assert len(final.text.split(" ")) == 12
    assert final.usage is not None
    assert (final.usage.output_tokens, final.usage.reasoning_tokens) == (332, 320)
    inputs = [t.usage.input_tokens for t in turns if t.usage is not None]
    assert inputs == sorted(inputs)
    assert len(set(inputs)) == 3
    assert all(t.applied_effort is Effort.HIGH for t in turns)
    assert all(t.thinking is ThinkingObservation.OBSERVED for t in turns)


async def test_tampered_encrypted_reasoning_is_refused_by_the_server(sim: Simulator) -> None:
    async with Client([source(sim, reasoning_effort="low")]) as client:
        first = await client.complete([{"role": "user", "content": "hi"}])
        items = [dict(item) for item in first.message.reasoning_items]
        items[0]["encrypted_content"] = items[0]["encrypted_content"][:-4] + "AAAA"
        tampered = Message(
            role="assistant",
            content=first.text,
            reasoning_items=tuple(items),
            reasoning_format="openai-responses",
        )
        with pytest.raises(RequestRejectedError, match="could not be verified"):
            await client.complete(
                [{"role": "user", "content": "hi"}, tampered, {"role": "user", "content": "go"}]
            )


async def test_store_false_drops_reasoning_items_that_have_no_encrypted_content(
    sim: Simulator,
) -> None:
    old_turn = Message(
        role="assistant",
        content="Earlier answer.",
        reasoning_items=(
            {"type": "reasoning", "id": "rs_old", "summary": []},
            {
                "type": "message",
                "id": "msg_old",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "annotations": [], "text": "Earlier answer."}],
            },
        ),
        reasoning_format="openai-responses",
    )
    history = [{"role": "user", "content": "a"}, old_turn, {"role": "user", "content": "b"}]
    async with Client([source(sim, reasoning_effort="low")]) as client:
        response = await client.complete(history, extra_body={"store": False})
    assert response.finish_reason == "stop"


async def test_reasoning_grows_with_the_tier_and_summaries_are_opt_in(sim: Simulator) -> None:
    async with Client([source(sim)]) as client:
        low = await client.complete([{"role": "user", "content": "x"}], reasoning_effort="low")
        high = await client.complete(
            [{"role": "user", "content": "x"}],
            reasoning_effort="xhigh",
            extra_body={"reasoning": {"summary": "auto"}},
        )
    assert low.usage is not None
    assert high.usage is not None
    assert (low.usage.reasoning_tokens, high.usage.reasoning_tokens) == (40, 640)
    assert low.reasoning is None
    assert high.reasoning is not None
    assert high.reasoning.startswith("Step 1: weigh x. Step 2: weigh x.")
    assert high.reasoning.count("Step ") == 26


async def test_unaccepted_tier_is_mapped_before_the_wire_and_rejected_when_forced(
    sim: Simulator,
) -> None:
    async with Client([source(sim)]) as client:
        mapped = await client.complete(
            [{"role": "user", "content": "x"}], reasoning_effort="minimal"
        )
        with pytest.raises(ThinkingUnsupportedError) as forced:
            await client.complete(
                [{"role": "user", "content": "x"}],
                extra_body={"reasoning": {"effort": "minimal"}},
            )
    assert mapped.applied_effort is Effort.LOW
    assert mapped.usage is not None
    assert mapped.usage.reasoning_tokens == 40
    assert forced.value.status_code == 400
    assert forced.value.error_type == "unsupported_value"
    assert "Supported values are: 'none', 'low', 'medium', 'high', and 'xhigh'." in (
        forced.value.message
    )


async def test_non_reasoning_model_gets_neither_reasoning_nor_include(sim: Simulator) -> None:
    async with Client([source(sim, "gpt-4o", reasoning_effort="none")]) as client:
        response = await client.complete([{"role": "user", "content": "x"}])
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert response.usage.reasoning_tokens == 0
    assert [item["type"] for item in response.message.reasoning_items] == ["message"]


async def test_stream_and_complete_agree(sim: Simulator) -> None:
    messages = [{"role": "user", "content": "Compare the two"}]
    extra = {"reasoning": {"summary": "detailed"}}
    async with Client([source(sim, reasoning_effort="medium")]) as client:
        whole = await client.complete(messages, extra_body=extra)
        streamed = await ask(client, messages, stream=True, extra_body=extra)
    assert (streamed.text, streamed.reasoning, streamed.finish_reason) == (
        whole.text,
        whole.reasoning,
        whole.finish_reason,
    )
    assert streamed.usage is not None
    assert whole.usage is not None
    assert (streamed.usage.output_tokens, streamed.usage.reasoning_tokens) == (132, 120)
    assert (whole.usage.output_tokens, whole.usage.reasoning_tokens) == (132, 120)


async def test_openrouter_dialect_tool_loop_with_raw_reasoning(sim: Simulator) -> None:
    config = source(
        sim,
        "openai/gpt-oss-20b",
        provider="openrouter-responses",
        reasoning_effort="low",
        headers={"x-sim-tool-rounds": "1"},
    )
    messages: list[Any] = [{"role": "user", "content": "Look it up"}]
    async with Client([config]) as client:
        first = await ask(client, messages, stream=True, tools=[LOOKUP])
        call = first.tool_calls[0]
        messages += [first.message, Message(role="tool", tool_call_id=call.id, content="42")]
        second = await ask(client, messages, stream=True, tools=[LOOKUP])
    assert first.finish_reason == "tool_calls"
    assert first.reasoning == "Step 1: weigh Look it up."
    assert first.message.reasoning_format == "openrouter-responses"
    assert "encrypted_content" not in first.message.reasoning_items[0]
    assert call == ToolCall(id=call.id, name="lookup", arguments='{"q":"sim"}')
    assert second.finish_reason == "stop"
    assert second.text.startswith("Simulated openai/gpt-oss-20b answer")
