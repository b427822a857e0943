"""A forced tool_choice while the model thinks, on the providers that refuse it.

DeepSeek V4 (thinking on by default) answers 400 "Thinking mode does not support this
tool_choice" to ``tool_choice: "required"`` or a named function, and takes both once
``thinking.type`` is ``disabled`` (deepseek-ai/DeepSeek-V3#1376, 2026-08-21). DashScope answers
400 "The tool_choice parameter does not support being set to required or object in thinking
mode" (cloudwego/eino#994, 2026-04-24; agentscope-ai/agentscope#1608, 2026-09-07).

polythink's rule is the one it applies to every parameter a model refuses: refused before
sending with ``ThinkingUnsupportedError`` (failover moves on), the message saying how to keep
the forced call (``reasoning_effort="none"``); with ``drop_params=True`` the ``tool_choice``
is dropped (the provider's default, ``auto``) and the response says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, Source, Tool
from polythink.errors import ThinkingUnsupportedError
from polythink.simulator import Simulator
from tests.chatwire import sent_json

pytestmark = pytest.mark.anyio

WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
HI = [Message(role="user", content="What is the weather in Lisbon?")]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def _source(sim: Simulator, provider: str, model: str, **kw: Any) -> Source:
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim", **kw)


@pytest.mark.parametrize("choice", ["required", "get_weather", NAMED])
@pytest.mark.parametrize(
    ("provider", "model", "effort"),
    [
        ("deepseek", "deepseek-v4-pro", None),  # thinks by default
        ("deepseek", "deepseek-v4-pro", "high"),
        ("qwen", "qwen3.7-plus", "high"),
    ],
)
async def test_refused_before_sending(
    sim: Simulator, provider: str, model: str, effort: str | None, choice: Any
) -> None:
    before = sim.stats.requests
    async with Client([_source(sim, provider, model)]) as client:
        with pytest.raises(ThinkingUnsupportedError) as caught:
            await client.complete(HI, tools=[WEATHER], tool_choice=choice, reasoning_effort=effort)
    assert sim.stats.requests == before
    error = caught.value
    assert (error.error_type, error.provider, error.source_index) == (
        "thinking_parameter_conflict",
        provider,
        0,
    )
    sent = "required" if choice == "required" else NAMED
    assert str(error).startswith(
        f"{provider} model {model!r} rejects tool_choice while thinking is on: "
        f"tool_choice={sent!r} forces a tool call (reasoning_effort='none' switches thinking "
        "off and keeps it). Remove it, or set drop_params=True"
    )


async def test_a_model_that_cannot_switch_off_says_so(sim: Simulator) -> None:
    async with Client([_source(sim, "qwen", "qwq-plus")]) as client:
        with pytest.raises(
            ThinkingUnsupportedError, match=r"\(the model cannot switch thinking off\)"
        ):
            await client.complete(HI, tools=[WEATHER], tool_choice="required")


@pytest.mark.parametrize(
    ("provider", "model", "switch"),
    [
        ("deepseek", "deepseek-v4-pro", {"thinking": {"type": "disabled"}}),
        ("qwen", "qwen3.7-plus", {"enable_thinking": False}),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_with_thinking_off_the_forced_call_goes_out(
    sim: Simulator, provider: str, model: str, switch: dict[str, Any], stream: bool
) -> None:
    async with Client([_source(sim, provider, model)]) as client:
        kwargs: dict[str, Any] = {"tools": [WEATHER], "tool_choice": "required"}
        if stream:
            response = None
            async for event in client.stream(HI, reasoning_effort="none", **kwargs):
                if event.type == "done":
                    response = event.response
        else:
            response = await client.complete(HI, reasoning_effort="none", **kwargs)
    assert response is not None
    assert [call.name for call in response.tool_calls] == ["get_weather"]
    assert response.applied_effort is not None
    assert response.applied_effort.value == "none"


ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1765000000,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Sunny."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
}


@pytest.mark.parametrize(
    ("provider", "model", "effort", "thinking"),
    [
        ("deepseek", "deepseek-v4-pro", None, {}),
        ("qwen", "qwen3.7-plus", "high", {"enable_thinking": True, "thinking_budget": 16384}),
    ],
)
async def test_drop_params_relaxes_to_auto_with_a_note(
    provider: str, model: str, effort: str | None, thinking: dict[str, Any]
) -> None:
    source = Source(provider, model, api_key="sk-test", drop_params=True)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{source.endpoint}/chat/completions").respond(200, json=ANSWER)
        async with Client([source]) as client:
            response = await client.complete(
                HI, tools=[WEATHER], tool_choice="required", reasoning_effort=effort
            )
    sent = sent_json(route.calls[0])
    assert "tool_choice" not in sent
    assert {k: sent[k] for k in thinking} == thinking
    assert (
        "dropped tool_choice='required' forces a tool call (reasoning_effort='none' switches "
        f"thinking off and keeps it) for {provider} model {model!r} (drop_params=True)"
    ) in response.warnings


async def test_the_next_source_takes_the_call(sim: Simulator) -> None:
    sources = [_source(sim, "deepseek", "deepseek-v4-pro"), _source(sim, "openai", "gpt-5.5")]
    async with Client(sources) as client:
        response = await client.complete(HI, tools=[WEATHER], tool_choice="required")
    assert (response.source_index, response.provider) == (1, "openai")
    assert [call.name for call in response.tool_calls] == ["get_weather"]


@pytest.mark.parametrize("choice", ["auto", "none"])
async def test_auto_and_none_go_out_while_thinking(sim: Simulator, choice: str) -> None:
    async with Client([_source(sim, "deepseek", "deepseek-v4-pro")]) as client:
        response = await client.complete(HI, tools=[WEATHER], tool_choice=choice)
    assert response.applied_effort is None  # unset: the model's default, which thinks
    assert bool(response.tool_calls) is (choice == "auto")


async def test_other_providers_are_not_held_back(sim: Simulator) -> None:
    async with Client([_source(sim, "glm", "glm-5.3")]) as client:
        response = await client.complete(HI, tools=[WEATHER], tool_choice="required")
    assert [call.name for call in response.tool_calls] == ["get_weather"]


@pytest.mark.parametrize(
    ("provider", "model", "message"),
    [
        ("deepseek", "deepseek-v4-pro", "Thinking mode does not support this tool_choice"),
        (
            "qwen",
            "qwen3.7-plus",
            "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not "
            "support being set to required or object in thinking mode",
        ),
    ],
)
async def test_the_simulator_refuses_it_as_the_provider_does(
    sim: Simulator, provider: str, model: str, message: str
) -> None:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
        "tool_choice": "required",
    }
    body.update({"enable_thinking": True} if provider == "qwen" else {})
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{sim.base_url(provider)}/chat/completions", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == message
