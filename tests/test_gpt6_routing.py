"""GPT-6 on the wire: tool calls routed to the Responses API, reasoning.mode, prompt-cache rules.

Facts (../shared/wire/CURRENT.md §2.1, §3.1, read 2026-12-01): GPT-6 Astra and GPT-6.1 Sol take
function tools on the Responses API only; GPT-6 Sol and Luna on Chat Completions only with
``reasoning_effort: "none"`` (O-DEPLOY); ``reasoning.mode`` (``standard|pro``) is a Responses
field for GPT-5.6 and later; ``prompt_cache_retention`` takes only ``24h`` from gpt-5.5 on and
``prompt_cache_options`` (``mode`` implicit|explicit, ``ttl`` 30m) exists from gpt-5.6 on, with
``prompt_cache_breakpoint`` on content parts (openai_openapi.yaml, 2026-08-21).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, PromptCache, Source, ThinkingUnsupportedError, Tool
from polythink.providers import PROVIDERS, ProviderProfile
from polythink.simulator import Simulator

KEY = "sk-test-000000000000"
CHAT = "https://api.openai.com/v1/chat/completions"
RESPONSES = "https://api.openai.com/v1/responses"
HI = [{"role": "user", "content": "What is the weather in Lisbon?"}]
WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
CHAT_ANSWER = {
    "id": "chatcmpl-1",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}
RESPONSES_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "model": "m",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6},
}


async def _call(source: Source, **kwargs: Any) -> tuple[str, dict[str, Any], Any]:
    """One call through a client; (the API it reached, the body sent, the response/error)."""
    with respx.mock(assert_all_called=False) as mock:
        chat = mock.post(CHAT).respond(200, json=CHAT_ANSWER)
        responses = mock.post(RESPONSES).respond(200, json=RESPONSES_ANSWER)
        async with Client([source], capabilities_store=False) as client:
            try:
                result: Any = await client.complete(HI, **kwargs)
            except ThinkingUnsupportedError as exc:
                result = exc
    assert chat.call_count + responses.call_count <= 1
    if chat.call_count:
        return "chat", json.loads(chat.calls[0].request.content), result
    if responses.call_count:
        return "responses", json.loads(responses.calls[0].request.content), result
    return "none", {}, result


@pytest.mark.anyio
async def test_astra_tool_calls_go_to_the_responses_api() -> None:
    source = Source("openai", "gpt-6-astra", api_key=KEY)
    api, body, response = await _call(source, tools=[WEATHER], reasoning_effort="high")
    assert api == "responses"
    assert body["reasoning"] == {"effort": "high"}
    assert "reasoning_effort" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": False,
        }
    ]
    assert response.text == "ok"
    assert response.warnings[0] == (
        "sent to the Responses API: model 'gpt-6-astra' takes function tools on the Responses "
        "API only; the openai source reaches it with the same key and host"
    )
    # Without tools, Chat Completions takes the call.
    api, body, _ = await _call(source, reasoning_effort="high")
    assert (api, body["reasoning_effort"]) == ("chat", "high")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("effort", "api", "fragment"),
    [
        ("none", "chat", {"reasoning_effort": "none"}),
        ("low", "responses", {"reasoning": {"effort": "low"}}),
        # Unset: Luna reasons by default (medium), so Chat refuses its tools.
        (None, "responses", {}),
    ],
)
async def test_luna_takes_tools_on_chat_only_at_effort_none(
    effort: str | None, api: str, fragment: dict[str, Any]
) -> None:
    source = Source("openai", "gpt-6-luna", api_key=KEY)
    went, body, _ = await _call(source, tools=[WEATHER], reasoning_effort=effort)
    assert went == api
    assert {k: body[k] for k in ("reasoning_effort", "reasoning") if k in body} == fragment


@pytest.mark.anyio
async def test_a_source_without_a_responses_route_refuses_before_sending() -> None:
    gateway = ProviderProfile(
        "openai-gateway",
        "openai_chat",
        "https://api.openai.com/v1",
        ("OPENAI_API_KEY",),
        max_tokens_field="max_completion_tokens",
        strict_sampling=True,
    )
    PROVIDERS["openai-gateway"] = gateway
    try:
        source = Source("openai-gateway", "gpt-6.1-sol", api_key=KEY)
        api, _, error = await _call(source, tools=[WEATHER])
    finally:
        del PROVIDERS["openai-gateway"]
    assert api == "none"
    assert isinstance(error, ThinkingUnsupportedError)
    assert error.error_type == "tools_need_responses"
    assert error.message == (
        "openai-gateway model 'gpt-6.1-sol' cannot take this call on Chat Completions: model "
        "'gpt-6.1-sol' takes function tools on the Responses API only, and provider "
        "'openai-gateway' has no route to the Responses API; use an openai or openai-responses "
        "source, or send reasoning_effort='none' where the model takes tools on Chat with it"
    )


@pytest.mark.anyio
async def test_reasoning_mode_pro_goes_to_responses_where_the_model_takes_it() -> None:
    pro = Source("openai", "gpt-6-luna", api_key=KEY, reasoning_mode="pro")
    api, body, _ = await _call(pro, reasoning_effort="high")
    assert (api, body["reasoning"]) == ("responses", {"effort": "high", "mode": "pro"})
    # gpt-5.5 predates reasoning.mode: refused before sending, or dropped.
    old = Source("openai", "gpt-5.5", api_key=KEY, reasoning_mode="pro")
    api, _, error = await _call(old, reasoning_effort="high")
    assert api == "none"
    assert "rejects reasoning.mode" in error.message
    dropping = Source("openai", "gpt-5.5", api_key=KEY, reasoning_mode="pro", drop_params=True)
    api, body, response = await _call(dropping, reasoning_effort="high")
    assert (api, body["reasoning"]) == ("responses", {"effort": "high"})
    assert response.warnings[0].startswith("dropped reasoning_mode='pro'")


@pytest.mark.anyio
async def test_prompt_cache_retention_only_where_the_model_takes_it() -> None:
    source = Source("openai", "gpt-5.5", api_key=KEY)
    _, body, _ = await _call(source, prompt_cache=PromptCache(key="k", retention="24h"))
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("k", "24h")
    api, _, error = await _call(source, prompt_cache=PromptCache(retention="in_memory"))
    assert api == "none"
    assert "prompt_cache_retention='in_memory' (accepted: 24h)" in error.message
    # A model before gpt-5.5 still takes in_memory.
    _, body, _ = await _call(
        Source("openai", "gpt-5.4", api_key=KEY), prompt_cache=PromptCache(retention="in_memory")
    )
    assert body["prompt_cache_retention"] == "in_memory"


@pytest.mark.anyio
async def test_explicit_breakpoints_use_prompt_cache_options_from_gpt_5_6() -> None:
    messages = [
        Message(role="system", content="You are terse."),
        Message(role="user", content="hi"),
    ]
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(CHAT).respond(200, json=CHAT_ANSWER)
        async with Client([Source("openai", "gpt-6-luna", api_key=KEY)]) as client:
            await client.complete(messages, prompt_cache=PromptCache(breakpoints="explicit"))
            await client.complete(messages, prompt_cache=PromptCache(breakpoints="explicit"))
    for call in route.calls:
        body = json.loads(call.request.content)
        assert body["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
        assert body["messages"] == [
            {
                "role": "system",
                "content": [
                    {
                        "type": "text",
                        "text": "You are terse.",
                        "prompt_cache_breakpoint": {"mode": "explicit"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi", "prompt_cache_breakpoint": {"mode": "explicit"}}
                ],
            },
        ]
    # The message values are unchanged (their wire bodies are shared between calls).
    assert messages[0].content == "You are terse."


# ------------------------------------------------------------------ against the simulator


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def test_the_simulator_refuses_tools_on_chat_as_openai_does(sim: Simulator) -> None:
    body = {
        "model": "gpt-6-astra",
        "messages": HI,
        "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    }
    answer = httpx.post(f"{sim.base_url('openai')}/chat/completions", json=body, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "Function tools with reasoning_effort are not supported for gpt-6-astra in "
        "/v1/chat/completions. To use function tools, use /v1/responses"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["gpt-6-astra", "gpt-6.1-sol", "gpt-6-sol", "gpt-6-luna"])
async def test_a_tool_loop_on_gpt_6_needs_no_400(sim: Simulator, model: str) -> None:
    source = Source("openai", model, api_key="sim", base_url=sim.base_url("openai"))
    before = sim.stats.by_path.copy()
    messages: list[Any] = list(HI)
    async with Client([source], capabilities_store=False) as client:
        response = await client.complete(messages, tools=[WEATHER], reasoning_effort="high")
        assert response.tool_calls
        messages.append(response.message)
        messages.append(
            Message(role="tool", tool_call_id=response.tool_calls[0].id, content='{"c": 21}')
        )
        final = await client.complete(messages, tools=[WEATHER], reasoning_effort="high")
    assert final.text
    assert final.applied_effort is not None
    assert final.applied_effort.value == "high"
    paths = sim.stats.by_path - before
    assert paths == {"/openai/v1/responses": 2}
