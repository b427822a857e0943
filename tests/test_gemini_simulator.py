"""polythink against the simulated Gemini API: signed tool loops, budgets, levels."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink import (
    Client,
    Effort,
    Message,
    RequestRejectedError,
    Response,
    Source,
    ThinkingObservation,
    Tool,
)
from polythink.simulator import Settings, Simulator

pytestmark = pytest.mark.anyio

QUESTION = "What is the capital of France?"
LOOKUP = Tool(
    name="lookup",
    description="Look a fact up",
    parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    # A day both generations tested here were served (gemini-3-pro-preview shut down
    # 2026-03-09, gemini-2.5-* on 2026-12-01; CURRENT.md §2.3).
    with Simulator(Settings(today="2026-03-01")) as simulator:
        yield simulator


def source(sim: Simulator, model: str, **fields: Any) -> Source:
    return Source("gemini", model, base_url=sim.base_url("gemini"), api_key="sim-key", **fields)


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
async def test_three_turn_tool_loop_with_signed_function_calls(
    sim: Simulator, stream: bool
) -> None:
    """Gemini 3 signs every function call; the simulator refuses a turn whose signature
    is missing or altered, so finishing the loop proves the turns went back verbatim."""
    config = source(
        sim, "gemini-3-pro-preview", reasoning_effort="low", headers={"x-sim-tool-rounds": "2"}
    )
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    turns = []
    async with Client([config]) as client:
        for _ in range(3):
            response = await ask(client, messages, stream=stream, tools=[LOOKUP])
            turns.append(response)
            messages.append(response.message)
            for call in response.tool_calls:
                messages.append(Message(role="tool", tool_call_id=call.id, content="Paris"))
    assert [t.finish_reason for t in turns] == ["tool_calls", "tool_calls", "stop"]
    for turn in turns:
        assert turn.reasoning == "Step 1: weigh What is the capital of France?."
        assert turn.applied_effort is Effort.LOW
        assert turn.thinking is ThinkingObservation.OBSERVED
    for turn in turns[:2]:
        call = turn.tool_calls[0]
        assert (call.name, call.arguments) == ("lookup", '{"q":"sim"}')
        assert turn.usage is not None
        assert (turn.usage.output_tokens, turn.usage.reasoning_tokens) == (48, 40)
        parts = turn.message.reasoning_items
        assert parts[0] == {
            "text": "Step 1: weigh What is the capital of France?.",
            "thought": True,
        }
        assert parts[1]["functionCall"] == {"name": "lookup", "args": {"q": "sim"}}
        assert parts[1]["thoughtSignature"].endswith("/w==")
    assert turns[0].tool_calls[0].id != turns[1].tool_calls[0].id
    final = turns[2]
    assert final.text.startswith("Simulated gemini-3-pro-preview answer")
    assert final.usage is not None
    assert (final.usage.output_tokens, final.usage.reasoning_tokens) == (52, 40)
    assert "thoughtSignature" in final.message.reasoning_items[1]


async def test_a_function_call_sent_back_without_its_signature_is_refused(sim: Simulator) -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": QUESTION}]},
            {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "lookup", "response": {"r": "Paris"}}}],
            },
        ]
    }
    url = f"{sim.base_url('gemini')}/models/gemini-3-pro-preview:generateContent"
    async with httpx.AsyncClient() as http:
        answer = await http.post(url, json=body, headers={"x-goog-api-key": "sim-key"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "missing a thought_signature" in error["message"]
    assert "`default_api:lookup`, position 1" in error["message"]


async def test_a_tool_turn_from_another_provider_continues_on_gemini_3(sim: Simulator) -> None:
    # The turn carries no signature; polythink sends Gemini's documented placeholder on its
    # first function call instead of a made-up signature.
    openai = Source("openai", "gpt-5.5", base_url=sim.base_url("openai"), api_key="sim")
    async with Client([openai]) as first_client:
        first = await first_client.complete([{"role": "user", "content": QUESTION}], tools=[LOOKUP])
    call = first.tool_calls[0]
    history = [
        {"role": "user", "content": QUESTION},
        first.message,
        Message(role="tool", tool_call_id=call.id, content="Paris"),
    ]
    async with Client([source(sim, "gemini-3-pro-preview")]) as client:
        second = await client.complete(history, tools=[LOOKUP])
    assert second.finish_reason == "stop"
    assert second.text.startswith("Simulated gemini-3-pro-preview answer")


async def test_reasoning_budget_grows_with_the_tier_on_2_5_flash(sim: Simulator) -> None:
    async with Client([source(sim, "gemini-2.5-flash")]) as client:
        off = await client.complete([{"role": "user", "content": "x"}], reasoning_effort="none")
        low = await client.complete([{"role": "user", "content": "x"}], reasoning_effort="low")
        high = await client.complete([{"role": "user", "content": "x"}], reasoning_effort="high")
    assert off.usage is not None
    assert (off.usage.output_tokens, off.usage.reasoning_tokens) == (12, None)
    assert off.reasoning is None
    assert off.thinking is ThinkingObservation.UNKNOWN
    assert low.usage is not None
    assert high.usage is not None
    assert (low.usage.reasoning_tokens, high.usage.reasoning_tokens) == (40, 320)
    assert (low.usage.output_tokens, high.usage.output_tokens) == (52, 332)
    assert low.reasoning == "Step 1: weigh x."
    assert high.reasoning is not None
    assert high.reasoning.count("Step ") == 13


@pytest.mark.parametrize(
    ("model", "extra", "complaint"),
    [
        (
            "gemini-2.5-pro",
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
            "Budget 0 is invalid. This model only works in thinking mode.",
        ),
        (
            "gemini-2.5-flash",
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1, "thinkingLevel": "low"}}},
            "You cannot use both thinking_level and thinking_budget",
        ),
        (
            "gemini-3-pro-preview",
            {"generationConfig": {"thinkingConfig": {"thinkingLevel": "medium"}}},
            "Thinking level medium is not supported for this model.",
        ),
        (
            "gemini-2.5-pro",
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 50000}}},
            "Please choose a value between 128 and 32768.",
        ),
    ],
)
async def test_the_server_refuses_what_polythink_never_sends(
    sim: Simulator, model: str, extra: dict[str, Any], complaint: str
) -> None:
    async with Client([source(sim, model)]) as client:
        with pytest.raises(RequestRejectedError) as caught:
            await client.complete([{"role": "user", "content": "x"}], extra_body=extra)
    assert caught.value.status_code == 400
    assert complaint in caught.value.message


async def test_nearest_tier_keeps_gemini_3_pro_within_low_and_high(sim: Simulator) -> None:
    async with Client([source(sim, "gemini-3-pro-preview")]) as client:
        response = await client.complete(
            [{"role": "user", "content": "x"}], reasoning_effort="medium"
        )
    assert response.requested_effort is Effort.MEDIUM
    assert response.applied_effort is Effort.LOW
    assert response.usage is not None
    assert response.usage.reasoning_tokens == 40


async def test_stream_and_complete_agree_exactly(sim: Simulator) -> None:
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Why?"}]
    async with Client([source(sim, "gemini-3-pro-preview", reasoning_effort="high")]) as client:
        whole = await client.complete(messages)
        streamed = await ask(client, messages, stream=True)
    assert streamed.text == whole.text
    assert streamed.reasoning == whole.reasoning
    assert streamed.usage == whole.usage
    assert streamed.finish_reason == whole.finish_reason == "stop"
    assert streamed.message.reasoning_items == whole.message.reasoning_items
    assert whole.usage is not None
    assert (whole.usage.output_tokens, whole.usage.reasoning_tokens) == (332, 320)
    assert whole.id == streamed.id


async def test_output_ceiling_gives_length(sim: Simulator) -> None:
    async with Client([source(sim, "gemini-3-pro-preview", reasoning_effort="low")]) as client:
        response = await client.complete([{"role": "user", "content": "x"}], max_tokens=45)
    assert response.finish_reason == "length"
    assert response.output_limited is True
    assert response.usage is not None
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (45, 40)
    assert len(response.text.split(" ")) == 5
