"""The simulator's Chat Completions behaviour, over real HTTP on loopback.

Raw requests go through httpx so the exact wire shapes are checked; the tool loops go
through :class:`polythink.Client` so the simulator and the transport are checked together.
Every expected value is the simulator's documented deterministic output: reasoning tokens
per tier (none 0, low 40, medium 120, high 320, xhigh 640, max 1024), 12 answer words, one
"Step N: weigh <first six prompt words>." sentence per 24 reasoning tokens.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink import Client, Message, Source, Tool, Usage
from polythink.errors import RequestRejectedError, ThinkingUnsupportedError
from polythink.simulator import Simulator

PROMPT = "Name three primes"
USER = [{"role": "user", "content": PROMPT}]
DIGEST = hashlib.sha256(PROMPT.encode()).hexdigest()[:6]
LOW_REASONING = "Step 1: weigh Name three primes."
HIGH_REASONING = " ".join(f"Step {i}: weigh Name three primes." for i in range(1, 14))
WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
WEATHER_WIRE = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": dict(WEATHER.parameters)},
}


def answer(model: str) -> str:
    """The 12-word answer: the 8 words of the echo, then its first 4 again."""
    echo = f"Simulated {model} answer {DIGEST} to: {PROMPT}"
    return f"{echo} Simulated {model} answer {DIGEST}"


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as client:
        yield client


def post(http: httpx.Client, sim: Simulator, provider: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(f"{sim.base_url(provider)}/chat/completions", json=body)


@pytest.mark.parametrize(
    ("model", "effort", "supported"),
    [
        ("gpt-5.5", "minimal", "'none', 'low', 'medium', 'high', and 'xhigh'"),
        # The exact text OpenAI sent for gpt-5-mini (WIRE.md §1.2).
        ("gpt-5-mini", "none", "'minimal', 'low', 'medium', and 'high'"),
        ("gpt-5-pro", "low", "'high'"),
        ("gpt-5.5", "auto", "'none', 'low', 'medium', 'high', and 'xhigh'"),
    ],
)
def test_unaccepted_tier_is_openai_unsupported_value(
    http: httpx.Client, sim: Simulator, model: str, effort: str, supported: str
) -> None:
    response = post(
        http, sim, "openai", {"model": model, "messages": USER, "reasoning_effort": effort}
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": f"Unsupported value: 'reasoning_effort' does not support '{effort}' with "
            f"this model. Supported values are: {supported}.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o"), ("xai", "grok-4.20-reasoning")]
)
def test_model_without_strength_tiers_refuses_the_parameter(
    http: httpx.Client, sim: Simulator, provider: str, model: str
) -> None:
    response = post(
        http, sim, provider, {"model": model, "messages": USER, "reasoning_effort": "high"}
    )
    assert response.status_code == 400
    if provider == "xai":
        assert response.json() == {
            "code": "Client specified an invalid argument",
            "error": "Model grok-4.20-reasoning does not support parameter reasoningEffort.",
        }
        return
    assert response.json() == {
        "error": {
            "message": "Unsupported parameter: 'reasoning_effort' is not supported with this "
            "model.",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_parameter",
        }
    }


@pytest.mark.anyio
async def test_unsupported_value_reaches_the_caller_as_thinking_unsupported(sim: Simulator) -> None:
    source = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
    async with Client([source]) as client:
        with pytest.raises(RequestRejectedError) as caught:
            await client.complete(USER, extra_body={"reasoning_effort": "minimal"})
    error = caught.value
    assert type(error) is ThinkingUnsupportedError
    assert (error.status_code, error.error_type, error.provider) == (
        400,
        "unsupported_value",
        "openai",
    )
    assert "Supported values are: 'none', 'low', 'medium', 'high', and 'xhigh'." in error.message


def test_reasoning_tokens_grow_with_the_tier(http: httpx.Client, sim: Simulator) -> None:
    seen = {}
    for effort in ("none", "low", "medium", "high", "xhigh"):
        body = {"model": "gpt-5.5", "messages": USER, "reasoning_effort": effort}
        usage = post(http, sim, "openai", body).json()["usage"]
        seen[effort] = (
            usage["completion_tokens_details"]["reasoning_tokens"],
            usage["completion_tokens"],
        )
    assert seen == {
        "none": (0, 12),
        "low": (40, 52),
        "medium": (120, 132),
        "high": (320, 332),
        "xhigh": (640, 652),
    }


@pytest.mark.parametrize(
    ("provider", "body", "reasoning_tokens"),
    [
        ("openai", {"model": "gpt-5.5"}, 120),  # default medium (OAI-DOC-deploy)
        ("openai", {"model": "gpt-5.1"}, 0),  # default none
        ("deepseek", {"model": "deepseek-v4-pro", "reasoning_effort": "low"}, 40),
        ("deepseek", {"model": "deepseek-v4-pro", "thinking": {"type": "disabled"}}, 0),
        ("qwen", {"model": "qwen3.7-plus", "enable_thinking": True, "thinking_budget": 2048}, 40),
        # GLM accepts tiers it does not list and cannot switch glm-5.3 off (measured 2026-09-05).
        (
            "glm",
            {"model": "glm-5.3", "thinking": {"type": "enabled"}, "reasoning_effort": "medium"},
            120,
        ),
        ("glm", {"model": "glm-5.3", "thinking": {"type": "disabled"}}, 40),
        ("deepseek", {"model": "deepseek-v4-pro", "reasoning_effort": "ultra"}, 320),
    ],
)
def test_depth_follows_the_provider_fields(
    http: httpx.Client, sim: Simulator, provider: str, body: dict[str, Any], reasoning_tokens: int
) -> None:
    response = post(http, sim, provider, {**body, "messages": USER})
    assert response.status_code == 200
    usage = response.json()["usage"]
    assert usage["completion_tokens_details"]["reasoning_tokens"] == reasoning_tokens
    assert usage["completion_tokens"] == reasoning_tokens + 12


SIGNATURE = re.compile(r"^sim-signature-[0-9a-f]{10}$")


@pytest.mark.parametrize(
    ("provider", "model", "fields", "reasoning_keys"),
    [
        ("openai", "gpt-5.5", {"reasoning_effort": "low"}, {}),
        (
            "deepseek",
            "deepseek-v4-pro",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
            {"reasoning_content": LOW_REASONING},
        ),
        (
            "glm",
            "glm-5.3",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
            {"reasoning_content": LOW_REASONING},
        ),
        (
            "kimi",
            "kimi-k3",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
            {"reasoning_content": LOW_REASONING},
        ),
        (
            "qwen",
            "qwen3.7-plus",
            {"enable_thinking": True, "thinking_budget": 2048},
            {"reasoning_content": LOW_REASONING},
        ),
        ("groq", "gpt-oss-120b", {"reasoning_effort": "low"}, {"reasoning": LOW_REASONING}),
        (
            "vllm",
            "gpt-oss-20b",
            {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "low"},
            {"reasoning": LOW_REASONING},
        ),
        ("ollama", "gpt-oss-20b", {"reasoning_effort": "low"}, {"reasoning": LOW_REASONING}),
    ],
)
def test_each_dialect_returns_reasoning_in_its_own_field(
    http: httpx.Client,
    sim: Simulator,
    provider: str,
    model: str,
    fields: dict[str, Any],
    reasoning_keys: dict[str, str],
) -> None:
    response = post(http, sim, provider, {"model": model, "messages": USER, **fields})
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": answer(model), **reasoning_keys}


def test_openrouter_returns_reasoning_and_signed_details(
    http: httpx.Client, sim: Simulator
) -> None:
    model = "anthropic/claude-sonnet-4.5"
    body = {"model": model, "messages": USER, "reasoning": {"effort": "low", "enabled": True}}
    message = post(http, sim, "openrouter", body).json()["choices"][0]["message"]
    details = message.pop("reasoning_details")
    assert message == {"role": "assistant", "content": answer(model), "reasoning": LOW_REASONING}
    assert len(details) == 1
    assert SIGNATURE.match(details[0].pop("signature"))
    assert details == [
        {
            "type": "reasoning.text",
            "text": LOW_REASONING,
            "format": "anthropic-claude-v1",
            "index": 0,
        }
    ]


def test_mistral_returns_thinking_chunks(http: httpx.Client, sim: Simulator) -> None:
    model = "mistral-small-latest"
    body = {"model": model, "messages": USER, "reasoning_effort": "high"}
    message = post(http, sim, "mistral", body).json()["choices"][0]["message"]
    assert message == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": HIGH_REASONING}]},
            {"type": "text", "text": answer(model)},
        ],
    }


TOOL_TURN = [
    *USER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"sky":"clear"}'},
]


def test_deepseek_rejects_a_tool_turn_without_its_reasoning(
    http: httpx.Client, sim: Simulator
) -> None:
    body = {
        "model": "deepseek-v4-pro",
        "messages": TOOL_TURN,
        "thinking": {"type": "enabled"},
        "reasoning_effort": "high",
        "tools": [WEATHER_WIRE],
    }
    rejected = post(http, sim, "deepseek", body)
    assert rejected.status_code == 400
    # Wording observed from DeepSeek (WIRE.md §6, warpdotdev/warp#11587).
    assert rejected.json() == {
        "error": {
            "message": "Missing reasoning_content field in the assistant message at message "
            "index 1. The reasoning_content in the thinking mode must be passed back to the API.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "invalid_request_error",
        }
    }
    with_reasoning = [*TOOL_TURN]
    with_reasoning[1] = {**TOOL_TURN[1], "reasoning_content": HIGH_REASONING}
    accepted = post(http, sim, "deepseek", {**body, "messages": with_reasoning})
    assert accepted.status_code == 200
    assert accepted.json()["choices"][0]["finish_reason"] == "stop"
    thinking_off = {**body, "thinking": {"type": "disabled"}}
    del thinking_off["reasoning_effort"]
    assert post(http, sim, "deepseek", thinking_off).status_code == 200


def stream_chunks(
    http: httpx.Client, sim: Simulator, provider: str, body: dict[str, Any]
) -> list[str]:
    url = f"{sim.base_url(provider)}/chat/completions"
    with http.stream("POST", url, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        lines = list(response.iter_lines())
    assert all(line.startswith("data: ") or line == "" for line in lines)
    return [line[len("data: ") :] for line in lines if line]


def test_stream_sends_reasoning_text_finish_usage_then_done(
    http: httpx.Client, sim: Simulator
) -> None:
    model = "deepseek-v4-pro"
    body = {"model": model, "messages": USER, "reasoning_effort": "low"}
    whole = post(http, sim, "deepseek", body).json()
    data = stream_chunks(http, sim, "deepseek", {**body, "stream_options": {"include_usage": True}})
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item) for item in data[:-1]]
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-sim-")
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    reasoning = [d["reasoning_content"] for d in deltas if "reasoning_content" in d]
    text = [d["content"] for d in deltas[1:] if "content" in d]
    assert reasoning == ["Step", " 1:", " weigh", " Name", " three", " primes."]
    assert "".join(reasoning) == whole["choices"][0]["message"]["reasoning_content"]
    assert len(text) == 12
    assert "".join(text) == answer(model) == whole["choices"][0]["message"]["content"]
    finish = chunks[-2]["choices"]
    assert finish == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == whole["usage"]


def test_stream_without_include_usage_sends_no_usage_chunk(
    http: httpx.Client, sim: Simulator
) -> None:
    data = stream_chunks(http, sim, "openai", {"model": "gpt-5.5", "messages": USER})
    chunks = [json.loads(item) for item in data[:-1]]
    assert data[-1] == "[DONE]"
    assert all("usage" not in c for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert all(set(d) <= {"role", "content"} for d in deltas)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_streamed_tool_call_arrives_in_fragments(http: httpx.Client, sim: Simulator) -> None:
    body = {
        "model": "gpt-5.5",
        "messages": USER,
        "tools": [WEATHER_WIRE],
        "reasoning_effort": "low",
    }
    data = stream_chunks(http, sim, "openai", body)
    chunks = [json.loads(item) for item in data[:-1]]
    fragments = [call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls", ())]
    head = fragments[0]
    assert re.match(r"^call_[0-9a-f]{12}$", head["id"])
    assert head["function"] == {"name": "get_weather", "arguments": ""}
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"city":"sim"}'
    assert {f["index"] for f in fragments} == {0}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all("content" not in c["choices"][0]["delta"] for c in chunks[1:])


def test_malformed_tools_get_a_400_not_a_dropped_connection(
    http: httpx.Client, sim: Simulator
) -> None:
    response = post(http, sim, "openai", {"model": "gpt-5.5", "messages": USER, "tools": [1]})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "tools"
    choice = {"model": "gpt-5.5", "messages": USER, "tools": [WEATHER_WIRE], "tool_choice": 3}
    response = post(http, sim, "openai", choice)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "tool_choice"


async def run_tool_loop(
    sim: Simulator, provider: str, model: str, bodies: list[dict[str, Any]]
) -> list[Any]:
    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    source = Source(
        provider,
        model,
        api_key="sim",
        base_url=sim.base_url(provider),
        headers={"x-sim-tool-rounds": "3"},
    )
    responses = []
    async with (
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
        Client([source], http_client=http) as client,
    ):
        messages: list[Any] = list(USER)
        for _ in range(5):
            response = await client.complete(messages, reasoning_effort="high", tools=[WEATHER])
            responses.append(response)
            if not response.tool_calls:
                break
            messages.append(response.message)
            for call in response.tool_calls:
                messages.append(
                    Message(role="tool", tool_call_id=call.id, content='{"sky":"clear"}')
                )
    return responses


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "sent_back"),
    [
        ("deepseek", "deepseek-v4-pro", "reasoning_content"),
        ("openrouter", "anthropic/claude-sonnet-4.5", "reasoning_details"),
        ("openai", "gpt-5.5", None),
    ],
)
async def test_tool_loop_of_three_rounds_through_the_client(
    sim: Simulator, provider: str, model: str, sent_back: str | None
) -> None:
    bodies: list[dict[str, Any]] = []
    responses = await run_tool_loop(sim, provider, model, bodies)
    assert [r.finish_reason for r in responses] == ["tool_calls"] * 3 + ["stop"]
    assert [r.usage.reasoning_tokens for r in responses if r.usage] == [320] * 4
    assert responses[-1].text == answer(model)
    calls = [r.tool_calls[0] for r in responses[:3]]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city":"sim"}')] * 3
    assert len({c.id for c in calls}) == 3
    assert len(bodies) == 4
    assistant_turns = [m for m in bodies[-1]["messages"] if m["role"] == "assistant"]
    expected = []
    for response, call in zip(responses[:3], calls, strict=True):
        turn: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [call.to_openai()],
        }
        if sent_back == "reasoning_content":
            assert response.reasoning == HIGH_REASONING
            turn["reasoning_content"] = HIGH_REASONING
        elif sent_back == "reasoning_details":
            assert len(response.message.reasoning_items) == 1
            item = dict(response.message.reasoning_items[0])
            assert SIGNATURE.match(item["signature"])
            assert item["text"] == HIGH_REASONING
            turn["reasoning_details"] = [item]
        else:
            assert response.reasoning is None
        expected.append(turn)
    assert assistant_turns == expected
    tool_turns = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert tool_turns == [
        {"role": "tool", "content": '{"sky":"clear"}', "tool_call_id": c.id} for c in calls
    ]


@pytest.mark.anyio
async def test_deepseek_tool_loop_fails_when_reasoning_is_not_sent_back(sim: Simulator) -> None:
    source = Source("deepseek", "deepseek-v4-pro", api_key="sim", base_url=sim.base_url("deepseek"))
    async with Client([source]) as client:
        first = await client.complete(USER, reasoning_effort="high", tools=[WEATHER])
    assert first.reasoning == HIGH_REASONING
    stripped = {
        "role": "assistant",
        "content": None,
        "tool_calls": [c.to_openai() for c in first.tool_calls],
    }
    tool = {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "{}"}
    body = {
        "model": "deepseek-v4-pro",
        "messages": [*USER, stripped, tool],
        "thinking": {"type": "enabled"},
        "reasoning_effort": "high",
        "tools": [WEATHER_WIRE],
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{sim.base_url('deepseek')}/chat/completions", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "Missing reasoning_content field in the assistant message at message index 1. The "
        "reasoning_content in the thinking mode must be passed back to the API."
    )


@pytest.mark.anyio
async def test_a_tool_turn_from_another_provider_continues_on_deepseek(sim: Simulator) -> None:
    openai = Source("openai", "gpt-5.5", api_key="sim", base_url=sim.base_url("openai"))
    deepseek = Source(
        "deepseek", "deepseek-v4-pro", api_key="sim", base_url=sim.base_url("deepseek")
    )
    async with Client([openai]) as first_client:
        first = await first_client.complete(USER, reasoning_effort="high", tools=[WEATHER])
    assert first.reasoning is None
    assert first.tool_calls
    history = [
        *USER,
        first.message,
        Message(role="tool", tool_call_id=first.tool_calls[0].id, content="{}"),
    ]
    async with Client([deepseek]) as second_client:
        second = await second_client.complete(history, reasoning_effort="high", tools=[WEATHER])
    assert second.finish_reason == "stop"
    assert second.text.startswith("Simulated deepseek-v4-pro answer")


@pytest.mark.anyio
async def test_stream_and_complete_agree_through_the_client(sim: Simulator) -> None:
    source = Source("glm", "glm-5.3", api_key="sim", base_url=sim.base_url("glm"))
    async with Client([source]) as client:
        whole = await client.complete(USER, reasoning_effort="high")
        kinds = []
        final = None
        async for event in client.stream(USER, reasoning_effort="high"):
            kinds.append(event.type)
            if event.type == "done":
                final = event.response
    assert final is not None
    assert kinds == ["reasoning"] * 78 + ["text"] * 12 + ["usage", "done"]
    assert (final.text, final.reasoning, final.usage) == (whole.text, whole.reasoning, whole.usage)
    assert final.reasoning == HIGH_REASONING
    assert final.usage == Usage(
        input_tokens=11, output_tokens=332, reasoning_tokens=320, cache_read_tokens=0
    )
    assert (final.applied_effort, final.thinking) == ("high", "observed")


def test_mistral_streams_put_usage_on_the_last_chunk(http: httpx.Client, sim: Simulator) -> None:
    model = "mistral-small-latest"
    body = {"model": model, "messages": USER, "reasoning_effort": "high", "stream": True}
    response = post(http, sim, "mistral", body)
    events = [
        json.loads(line[len("data: ") :])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    # 11 prompt tokens (1 per 4 characters of the message's JSON), 320 reasoning tokens
    # (high) and the 12 answer words.
    usage = {
        "prompt_tokens": 11,
        "completion_tokens": 332,
        "total_tokens": 343,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 320},
    }
    assert events[-1]["usage"] == usage
    assert events[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    assert ["usage" in event for event in events[:-1]] == [False] * (len(events) - 1)


@pytest.mark.anyio
async def test_mistral_stream_and_complete_report_the_same_usage(sim: Simulator) -> None:
    source = Source(
        "mistral", "mistral-small-latest", api_key="k-sim", base_url=sim.base_url("mistral")
    )
    async with Client([source]) as client:
        whole = await client.complete(USER, reasoning_effort="high")
        events = [event async for event in client.stream(USER, reasoning_effort="high")]
    usages = [event.usage for event in events if event.type == "usage"]
    done = events[-1].response
    assert done is not None
    assert whole.usage is not None
    assert whole.usage.output_tokens == 332
    assert usages == [whole.usage]
    assert (
        done.usage
        == whole.usage
        == Usage(
            input_tokens=whole.usage.input_tokens,
            output_tokens=332,
            reasoning_tokens=320,
            cache_read_tokens=0,
        )
    )
