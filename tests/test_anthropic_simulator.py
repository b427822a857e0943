"""The simulated Anthropic Messages API, over real HTTP: raw requests to check what it accepts
and rejects, and polythink's Client against it for tiers, streams and a three-turn tool loop
that carries thinking blocks across turns."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink import Client, Message, Source, ThinkingObservation, Tool
from polythink.errors import RequestRejectedError, ThinkingUnsupportedError
from polythink.simulator import Simulator
from polythink.simulator.anthropic import REDACTED_TRIGGER
from polythink.simulator.behaviour import REASONING_TOKENS, reasoning_text
from polythink.simulator.binding import bound_text
from polythink.types import Effort

HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sim"}
QUESTION = "What is the weather in Paris?"
WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def _post(
    sim: Simulator, body: dict[str, Any], headers: dict[str, str] = HEADERS
) -> httpx.Response:
    return httpx.post(f"{sim.base_url('anthropic')}/messages", json=body, headers=headers)


def _body(model: str, **fields: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
        **fields,
    }


def _client(sim: Simulator, model: str, **kwargs: Any) -> Client:
    return Client(
        [Source("anthropic", model, base_url=sim.base_url("anthropic"), api_key="sim", **kwargs)]
    )


@pytest.mark.parametrize(
    ("model", "fields", "message"),
    [
        (
            "claude-opus-4-6",
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}},
            "output_config.effort: 'xhigh' is not supported for model claude-opus-4-6; "
            "supported values: 'low', 'medium', 'high', 'max'",
        ),
        (
            "claude-opus-4-7",
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.',
        ),
        (
            "claude-haiku-4-5",
            {"thinking": {"type": "adaptive"}},
            '"thinking.type.adaptive" is not supported for this model. Use '
            '"thinking.type.enabled" with "budget_tokens".',
        ),
        (
            "claude-fable-5",
            {"thinking": {"type": "disabled"}},
            '"thinking.type.disabled" is not supported for model claude-fable-5; thinking cannot '
            "be switched off on it.",
        ),
        (
            "claude-haiku-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            "claude-haiku-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 4096}},
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size",
        ),
        (
            "claude-haiku-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "temperature": 0},
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
            "Please consult our documentation at https://docs.claude.com/en/docs/"
            "build-with-claude/extended-thinking#feature-compatibility",
        ),
        (
            "claude-haiku-4-5",
            {
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
            },
            "Thinking may not be enabled when tool_choice forces tool use.",
        ),
        (
            "claude-haiku-4-5",
            {"max_tokens": 64001},
            "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens "
            "for claude-haiku-4-5",
        ),
    ],
)
def test_rejections_are_shaped_like_anthropic(
    sim: Simulator, model: str, fields: dict[str, Any], message: str
) -> None:
    answer = _post(sim, _body(model, **fields))
    assert answer.status_code == 400
    assert answer.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }


def test_missing_version_header_is_rejected(sim: Simulator) -> None:
    answer = _post(sim, _body("claude-haiku-4-5"), headers={"x-api-key": "sim"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "anthropic-version: header is required"


def test_effort_alone_does_not_think_on_a_model_whose_thinking_is_off(sim: Simulator) -> None:
    # As recorded in llmanthropic_effort_no_thinking_stream: text only.
    answer = _post(sim, _body("claude-sonnet-4-6", output_config={"effort": "low"})).json()
    assert [block["type"] for block in answer["content"]] == ["text"]
    assert answer["usage"]["output_tokens_details"] == {"thinking_tokens": 0}


def test_adaptive_with_forced_tool_answers_without_thinking(sim: Simulator) -> None:
    # As recorded in pai_anthropic_count_tokens_adaptive_thinking: 200, thinking_tokens 0,
    # and the forced tool alone in the content (no prose before it).
    body = _body(
        "claude-opus-4-6",
        thinking={"type": "adaptive"},
        tools=[{"name": "final_result", "input_schema": {"type": "object"}}],
        tool_choice={"type": "any"},
    )
    answer = _post(sim, body).json()
    assert answer["stop_reason"] == "tool_use"
    assert [block["type"] for block in answer["content"]] == ["tool_use"]
    assert answer["usage"]["output_tokens_details"] == {"thinking_tokens": 0}


def test_manual_budget_maps_to_the_nearest_tier(sim: Simulator) -> None:
    answer = _post(
        sim, _body("claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 3000})
    ).json()
    thinking = answer["content"][0]
    assert (thinking["type"], thinking["thinking"]) == (
        "thinking",
        reasoning_text(Effort.LOW, QUESTION),
    )
    assert bound_text(thinking["signature"], reasoning_text(Effort.LOW, QUESTION))
    assert answer["usage"]["output_tokens_details"] == {
        "thinking_tokens": REASONING_TOKENS[Effort.LOW]
    }


def test_models_that_omit_thinking_text_by_default(sim: Simulator) -> None:
    plain = _post(sim, _body("claude-opus-5")).json()["content"][0]
    assert plain["type"] == "thinking"
    assert plain["thinking"] == ""
    # The signature binds the full text the display left out.
    assert bound_text(plain["signature"], reasoning_text(Effort.HIGH, QUESTION))
    shown = _post(
        sim, _body("claude-opus-5", thinking={"type": "adaptive", "display": "summarized"})
    ).json()["content"][0]
    assert shown["thinking"] == reasoning_text(Effort.AUTO, QUESTION)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "efforts"),
    [
        ("claude-haiku-4-5", ["minimal", "low", "medium", "high", "xhigh", "max"]),
        ("claude-opus-4-7", ["low", "medium", "high", "xhigh", "max"]),
    ],
)
async def test_reasoning_grows_with_the_tier(
    sim: Simulator, model: str, efforts: list[str]
) -> None:
    async with _client(sim, model) as client:
        counts = []
        for effort in efforts:
            response = await client.complete(
                [{"role": "user", "content": QUESTION}], reasoning_effort=effort
            )
            assert response.applied_effort == effort
            assert response.thinking is ThinkingObservation.OBSERVED
            assert response.reasoning == reasoning_text(Effort(effort), QUESTION)
            assert response.usage is not None
            counts.append(response.usage.reasoning_tokens)
        off = await client.complete(
            [{"role": "user", "content": QUESTION}], reasoning_effort="none"
        )
    assert counts == [REASONING_TOKENS[Effort(e)] for e in efforts]
    assert off.reasoning is None
    assert off.thinking is ThinkingObservation.ABSENT
    assert off.warnings == []


@pytest.mark.anyio
async def test_tiers_the_model_lacks_never_reach_the_simulator(sim: Simulator) -> None:
    async with _client(sim, "claude-opus-4-6", effort_fallback="error") as client:
        with pytest.raises(ThinkingUnsupportedError, match="xhigh"):
            await client.complete([{"role": "user", "content": QUESTION}], reasoning_effort="xhigh")
    async with _client(sim, "claude-opus-4-6") as client:
        response = await client.complete(
            [{"role": "user", "content": QUESTION}], reasoning_effort="xhigh"
        )
    assert response.applied_effort == "high"
    assert response.usage is not None
    assert response.usage.reasoning_tokens == REASONING_TOKENS[Effort.HIGH]


@pytest.mark.anyio
async def test_stream_equals_complete(sim: Simulator) -> None:
    messages = [{"role": "user", "content": QUESTION}]
    async with _client(sim, "claude-opus-4-7") as client:
        complete = await client.complete(messages, reasoning_effort="medium", tools=[WEATHER])
        events = [
            e async for e in client.stream(messages, reasoning_effort="medium", tools=[WEATHER])
        ]
    streamed = events[-1].response
    assert streamed is not None
    assert "".join(e.text or "" for e in events if e.type == "reasoning") == streamed.reasoning
    assert [e.tool_call for e in events if e.type == "tool_call"] == streamed.tool_calls
    assert streamed.message == complete.message
    assert streamed.usage == complete.usage
    assert (streamed.text, streamed.reasoning, streamed.finish_reason) == (
        complete.text,
        complete.reasoning,
        complete.finish_reason,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_loop_across_three_turns_carries_thinking(sim: Simulator, stream: bool) -> None:
    async def call(client: Client, messages: list[Any]) -> Any:
        if not stream:
            return await client.complete(messages, reasoning_effort="low", tools=[WEATHER])
        events = [e async for e in client.stream(messages, reasoning_effort="low", tools=[WEATHER])]
        return events[-1].response

    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    responses = []
    async with _client(sim, "claude-haiku-4-5", headers={"x-sim-tool-rounds": "2"}) as client:
        for _ in range(3):
            response = await call(client, messages)
            responses.append(response)
            messages.append(response.message)
            for tool_call in response.tool_calls:
                messages.append(
                    Message(role="tool", tool_call_id=tool_call.id, content="18°C, clear sky")
                )
    assert [r.finish_reason for r in responses] == ["tool_calls", "tool_calls", "stop"]
    low = REASONING_TOKENS[Effort.LOW]
    assert [r.usage.output_tokens for r in responses] == [low + 3 + 8, low + 3 + 8, low + 12]
    assert [r.usage.reasoning_tokens for r in responses] == [low, low, low]
    inputs = [r.usage.input_tokens for r in responses]
    assert inputs == sorted(set(inputs))
    for response in responses[:2]:
        (tool_call,) = response.tool_calls
        assert (tool_call.name, tool_call.arguments) == ("get_weather", '{"city":"sim"}')
        kinds = [item["type"] for item in response.message.reasoning_items]
        assert kinds == ["thinking", "text", "tool_use"]
        thinking = response.message.reasoning_items[0]
        assert bound_text(thinking["signature"], thinking["thinking"])
    assert responses[2].text.startswith("Simulated claude-haiku-4-5 answer")
    # The simulator checked every signature and the leading thinking block of each tool turn:
    # the loop only got here because polythink sent them back unchanged and in order.


@pytest.mark.anyio
async def test_tampered_or_missing_thinking_blocks_are_rejected(sim: Simulator) -> None:
    question = {"role": "user", "content": QUESTION}
    async with _client(sim, "claude-haiku-4-5") as client:
        first = await client.complete([question], reasoning_effort="low", tools=[WEATHER])
        (tool_call,) = first.tool_calls
        result = Message(role="tool", tool_call_id=tool_call.id, content="sunny")
        items = first.message.reasoning_items
        tampered = dataclasses.replace(
            first.message, reasoning_items=({**items[0], "thinking": "edited"}, *items[1:])
        )
        with pytest.raises(RequestRejectedError) as bad_signature:
            await client.complete(
                [question, tampered, result], reasoning_effort="low", tools=[WEATHER]
            )
        stripped = dataclasses.replace(first.message, reasoning_items=(), reasoning_format=None)
        # Sent as is, a tool turn without its thinking block is a 400 (checked on the raw
        # wire below); the client switches thinking off for that call instead.
        unsigned = await client.complete(
            [question, stripped, result], reasoning_effort="low", tools=[WEATHER]
        )
        fine = await client.complete(
            [question, first.message, result], reasoning_effort="low", tools=[WEATHER]
        )
    blocks = [b for b in items if b["type"] not in ("thinking", "redacted_thinking")]
    raw = {
        "model": "claude-haiku-4-5",
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [
            {
                "name": WEATHER.name,
                "description": WEATHER.description,
                "input_schema": dict(WEATHER.parameters),
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
            {"role": "assistant", "content": blocks},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_call.id, "content": "sunny"}
                ],
            },
        ],
    }
    async with httpx.AsyncClient() as http:
        missing = await http.post(
            f"{sim.base_url('anthropic')}/messages", json=raw, headers=HEADERS
        )
    assert bad_signature.value.status_code == 400
    assert bad_signature.value.error_type == "invalid_request_error"
    assert "messages.1.content.0: Invalid `signature` in `thinking` block" in str(
        bad_signature.value
    )
    assert missing.status_code == 400
    assert "Expected `thinking` or `redacted_thinking`, but found `text`" in missing.text
    assert unsigned.finish_reason == "stop"
    assert unsigned.requested_effort is Effort.LOW
    assert unsigned.applied_effort is Effort.NONE
    assert unsigned.warnings == [
        # Its reasoning text, without the signed block, has no field on this wire.
        "not sent to anthropic: the reasoning of message 1 (Anthropic's Messages API takes "
        "reasoning back only as its own thinking blocks, whose signatures it checks; the turn "
        "goes without it)",
        "thinking switched off for this call to anthropic model 'claude-haiku-4-5': the "
        "tool-use turn it continues carries no signed thinking block",
    ]
    assert fine.finish_reason == "stop"


@pytest.mark.anyio
async def test_redacted_thinking_round_trip(sim: Simulator) -> None:
    prompt = REDACTED_TRIGGER + "46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
    async with _client(sim, "claude-haiku-4-5") as client:
        first = await client.complete(
            [{"role": "user", "content": prompt}], reasoning_effort="medium"
        )
        second = await client.complete(
            [
                {"role": "user", "content": prompt},
                first.message,
                {"role": "user", "content": "And now?"},
            ],
            reasoning_effort="medium",
        )
    redacted = first.message.reasoning_items[0]
    assert redacted["type"] == "redacted_thinking"
    assert redacted["data"].startswith("sim1r.")
    assert first.reasoning is None
    assert first.usage is not None
    assert first.usage.output_tokens == REASONING_TOKENS[Effort.MEDIUM] + 12
    assert first.usage.reasoning_tokens == REASONING_TOKENS[Effort.MEDIUM]
    assert (first.usage.cache_read_tokens, first.usage.cache_write_tokens) == (0, 0)
    assert first.thinking is ThinkingObservation.OBSERVED
    assert second.finish_reason == "stop"


def test_stream_wire_shape(sim: Simulator) -> None:
    body = _body(
        "claude-haiku-4-5", thinking={"type": "enabled", "budget_tokens": 1024}, stream=True
    )
    with httpx.stream(
        "POST", f"{sim.base_url('anthropic')}/messages", json=body, headers=HEADERS
    ) as answer:
        raw = b"".join(answer.iter_bytes()).decode()
        assert answer.headers["content-type"] == "text/event-stream"
    names = [line[7:] for line in raw.splitlines() if line.startswith("event: ")]
    assert names[:4] == ["message_start", "content_block_start", "ping", "content_block_delta"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    data = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert any(line.endswith("    ") for line in data)
    events = [json.loads(line) for line in data]
    signature_at = next(
        i for i, e in enumerate(events) if e.get("delta", {}).get("type") == "signature_delta"
    )
    assert events[signature_at + 1] == {"type": "content_block_stop", "index": 0}
    assert events[0]["message"]["usage"]["output_tokens"] == 1
    assert events[-2]["usage"]["output_tokens"] == REASONING_TOKENS[Effort.MINIMAL] + 12
