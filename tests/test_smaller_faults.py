"""The smaller faults a new user meets first: each is refused or read as the wire and the
caller expect, on every wire where it can happen."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
import respx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import polythink.pricing
from polythink import Budget, Client, ClientLoopError, Source, Tool
from polythink.conversation import load_conversation
from polythink.errors import ModelNotFoundError, PolythinkError
from polythink.reasoning.learn import parse_reasoning_rejection
from polythink.simulator import Simulator
from polythink.types import Effort

KEY = "sk-test-Zq9Vx7Lr2Kp4Mn6Bt8Wc"
PROMPT = [{"role": "user", "content": "Name three primes"}]

URLS = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "openai-responses": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.5-flash"
    ":generateContent",
}
MODELS = {
    "openai": "gpt-5.5",
    "openai-responses": "gpt-5.5",
    "anthropic": "claude-sonnet-5-5",
    "gemini": "gemini-3.5-flash",
}


def answer(provider: str, text: Any) -> dict[str, Any]:
    """A whole answer of ``provider``'s wire whose text is ``text``."""
    if provider == "openai":
        message = {"role": "assistant", "content": text}
        return {
            "id": "c1",
            "object": "chat.completion",
            "model": "gpt-5.5",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        }
    if provider == "openai-responses":
        part = {"type": "output_text", "text": text}
        return {
            "id": "r1",
            "object": "response",
            "status": "completed",
            "model": "gpt-5.5",
            "output": [{"type": "message", "role": "assistant", "content": [part]}],
            "usage": {"input_tokens": 9, "output_tokens": 3},
        }
    if provider == "anthropic":
        return {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5-5",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 3},
        }
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12},
    }


def source(provider: str, **kwargs: Any) -> Source:
    kwargs.setdefault("max_retries", 0)
    return Source(provider, MODELS[provider], api_key=KEY, **kwargs)


def stream_url(provider: str) -> str:
    if provider == "gemini":
        return URLS[provider].replace(":generateContent", ":streamGenerateContent")
    return URLS[provider]


# -- a tier the wire cannot express, and learning from a refusal's words ------------------


@pytest.mark.anyio
async def test_an_unregistered_anthropic_model_is_never_sent_a_tier_the_wire_lacks() -> None:
    with respx.mock() as mock:
        route = mock.post(URLS["anthropic"]).mock(
            return_value=httpx.Response(200, json=answer("anthropic", "2, 3, 5"))
        )
        src = Source("anthropic", "claude-future-9", api_key=KEY, max_retries=0)
        async with Client([src], cache=False) as client:
            response = await client.complete(PROMPT, reasoning_effort="minimal")
    sent = json.loads(route.calls.last.request.content)
    assert sent["output_config"] == {"effort": "low"}
    assert sent["thinking"] == {"type": "adaptive"}
    assert response.applied_effort is Effort.LOW
    assert any(
        "the anthropic wire has no 'minimal': 'low' is its nearest" in w for w in response.warnings
    )


def test_the_value_a_refusal_names_as_given_is_not_read_as_accepted() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' "
            "or 'max'; got 'minimal'",
        },
    }
    found = parse_reasoning_rejection(400, body)
    assert found is not None
    assert found.accepted == (Effort.LOW, Effort.MEDIUM, Effort.HIGH, Effort.XHIGH, Effort.MAX)
    pydantic_style = (
        "reasoning_effort: Input should be 'low' or 'high' [type=literal_error, "
        "input_value='medium']"
    )
    found = parse_reasoning_rejection(400, {"error": {"message": pydantic_style}})
    assert found is not None
    assert found.accepted == (Effort.LOW, Effort.HIGH)


@pytest.mark.anyio
async def test_an_unregistered_model_learns_its_tiers_from_the_refusal_and_sends_again() -> None:
    refusal = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "output_config.effort: Input should be 'low', 'medium' or 'high'; "
            "got 'xhigh'",
        },
    }
    with respx.mock() as mock:
        route = mock.post(URLS["anthropic"]).mock(
            side_effect=[
                httpx.Response(400, json=refusal),
                httpx.Response(200, json=answer("anthropic", "2, 3, 5")),
            ]
        )
        src = Source("anthropic", "claude-future-10", api_key=KEY, max_retries=0)
        async with Client([src], cache=False, capabilities_store=False) as client:
            response = await client.complete(PROMPT, reasoning_effort="xhigh")
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert first["output_config"] == {"effort": "xhigh"}
    assert second["output_config"] == {"effort": "high"}
    assert response.applied_effort is Effort.HIGH


# -- values the caller gives that JSON, a budget list or pydantic cannot take --------------


def test_nan_and_infinities_are_refused_wherever_a_body_value_is_given() -> None:
    with pytest.raises(ValueError, match=r"Source.extra_body\['x'\] is nan, which JSON cannot"):
        Source("openai", "gpt-5.5", api_key=KEY, extra_body={"x": float("nan")})
    client = Client([source("openai")])
    with pytest.raises(ValueError, match=r"extra_body\['a'\]\[1\] is inf"):
        client.request(PROMPT, extra_body={"a": [1, float("inf")]})
    with pytest.raises(ValueError, match=r"parameters\['properties'\]\['n'\]\['maximum'\] is -inf"):
        Tool(
            name="f",
            parameters={
                "type": "object",
                "properties": {"n": {"type": "number", "maximum": float("-inf")}},
            },
        )


def test_client_arguments_of_the_wrong_kind_are_value_errors_naming_them() -> None:
    assert Client([source("openai")], budgets=None).budgets == ()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"budgets": 5}, "budgets must be a list of Budget (or None for none); got int"),
        ({"budgets": Budget(1.0)}, "wrap the one budget: [budget]"),
        ({"tracer_provider": "x"}, "tracer_provider must be an OpenTelemetry TracerProvider"),
        ({"meter_provider": 3}, "meter_provider must be an OpenTelemetry MeterProvider"),
    ]
    for kwargs, words in cases:
        with pytest.raises(ValueError, match=re.escape(words)):
            Client([source("openai")], **kwargs)
    with pytest.raises(ValueError, match=r"sources must be a list of Source; got NoneType"):
        Client(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"wrap the one source: \[source\]"):
        Client(source("openai"))  # type: ignore[arg-type]


def test_a_pydantic_class_without_a_schema_is_named_in_a_value_error() -> None:
    client = Client([source("openai")])
    with pytest.raises(ValueError, match=r"response_format class BaseModel has no JSON Schema"):
        client.request(PROMPT, response_format=BaseModel)


def test_a_conversation_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b'{"role": "user", "content": "hi"}\n\xff\xfe not text\n')
    expected = (
        f"{path}:2: not UTF-8 text (invalid start byte at byte 1 of the line); a saved "
        "conversation is UTF-8 JSON lines"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        load_conversation(path)


# -- answers of the wrong shape -----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(URLS))
@pytest.mark.parametrize("text", [42, {"a": 1}, [1]], ids=["number", "object", "list"])
async def test_an_answer_whose_text_is_not_text_is_an_error_not_an_empty_success(
    provider: str, text: Any
) -> None:
    with respx.mock() as mock:
        route = mock.post(URLS[provider]).mock(
            return_value=httpx.Response(200, json=answer(provider, text))
        )
        async with Client([source(provider, max_retries=1)], cache=False) as client:
            with pytest.raises(PolythinkError) as caught:
                await client.complete(PROMPT)
    assert caught.value.error_type == "malformed_body"
    assert "cannot read" in caught.value.message
    assert route.call_count == 2  # a TransientError: retried, as a broken answer may be


@pytest.mark.anyio
async def test_an_answer_of_the_wrong_structure_is_a_transient_error() -> None:
    body = {"id": "c", "model": "gpt-5.5", "choices": [42]}
    with respx.mock() as mock:
        mock.post(URLS["openai"]).mock(return_value=httpx.Response(200, json=body))
        async with Client([source("openai")], cache=False) as client:
            with pytest.raises(PolythinkError) as caught:
                await client.complete(PROMPT)
    assert caught.value.error_type == "malformed_body"
    assert "AttributeError" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(URLS))
async def test_a_server_that_answers_a_stream_with_one_json_body_is_read(provider: str) -> None:
    with respx.mock() as mock:
        route = mock.post(url__startswith=stream_url(provider)).mock(
            return_value=httpx.Response(200, json=answer(provider, "2, 3, 5"))
        )
        async with Client([source(provider, max_retries=2)], cache=False) as client:
            events = [event async for event in client.stream(PROMPT)]
    assert route.call_count == 1
    assert [e.type for e in events] == ["text", "usage", "done"]
    assert events[0].text == "2, 3, 5"
    done = events[-1].response
    assert done is not None
    assert done.text == "2, 3, 5"
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (9, 3)


# -- a client in another event loop; a model that does not exist ---------------------------


def test_a_client_used_from_another_event_loop_is_a_usage_error() -> None:
    with Simulator() as sim:
        client = Client([Source("openai", "gpt-5.5", api_key=KEY, base_url=sim.base_url("openai"))])

        async def first() -> str:
            client.start()
            return (await client.complete(PROMPT)).text

        assert asyncio.run(first()).startswith("Simulated")

        async def second() -> None:
            with pytest.raises(ClientLoopError) as caught:
                await client.complete(PROMPT)
            assert isinstance(caught.value, RuntimeError)
            assert "started in another event loop" in str(caught.value)

        asyncio.run(second())
        assert sim.stats.requests == 1


@pytest.mark.anyio
async def test_a_model_that_does_not_exist_never_opens_the_circuit() -> None:
    missing = {
        "error": {
            "message": "The model 'gpt-9' does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    with respx.mock() as mock:
        route = mock.post(URLS["openai"]).mock(return_value=httpx.Response(404, json=missing))
        src = Source("openai", "gpt-9", api_key=KEY, max_retries=0)
        async with Client([src], cache=False) as client:
            for _ in range(7):
                with pytest.raises(ModelNotFoundError) as caught:
                    await client.complete(PROMPT)
                assert caught.value.error_type == "model_not_found"
    assert route.call_count == 7


# -- the price table off the call path -----------------------------------------------------


@pytest.fixture
def slow_table(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A fresh price table whose import takes 0.5 s; yields the threads that imported it."""
    table = polythink.pricing._Table()
    threads: list[str] = []
    real = table._import

    def slow() -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.5)
        real()

    monkeypatch.setattr(table, "_import", slow)
    monkeypatch.setattr(polythink.pricing, "_table", table)
    return threads


@pytest.mark.anyio
async def test_the_price_table_loads_from_the_client_start_off_the_event_loop(
    slow_table: list[str],
) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    with respx.mock() as mock:
        mock.post(URLS["openai"]).mock(
            return_value=httpx.Response(200, json=answer("openai", "2, 3, 5"))
        )
        async with (
            Client([source("openai")], cache=False) as client,
            anyio.create_task_group() as tasks,
        ):
            preloading = polythink.pricing._table._preloading
            assert preloading is not None  # begun by the client's start, in its own thread
            assert preloading.name == "polythink-price-table"
            tasks.start_soon(ticker)
            response = await client.complete(PROMPT)
            tasks.cancel_scope.cancel()
    # Once, and not on the event loop's thread: in the start's thread, or, when the first
    # answer came before that thread got to it (a loaded machine), in a worker thread.
    assert len(slow_table) == 1
    assert slow_table[0] != threading.current_thread().name
    assert response.cost is not None
    assert ticks >= 10  # the loop went on while the table loaded (0.5 s)


# -- a child span per failover step and per attempt ----------------------------------------


@pytest.mark.anyio
async def test_each_failover_step_and_each_attempt_has_its_own_child_span() -> None:
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    overloaded = httpx.Response(503, json={"error": {"message": "busy", "type": "server_error"}})
    with respx.mock() as mock:
        mock.post(URLS["openai"]).mock(return_value=overloaded)
        mock.post(URLS["anthropic"]).mock(
            return_value=httpx.Response(200, json=answer("anthropic", "ok"))
        )
        sources = [source("openai", max_retries=1), source("anthropic")]
        async with Client(sources, cache=False, tracer_provider=tracer) as client:
            await client.complete(PROMPT)
    spans = exporter.get_finished_spans()
    (call,) = [s for s in spans if s.name.startswith("chat ")]
    children = [s for s in spans if s is not call]
    assert all(s.parent is not None and s.parent.span_id == call.context.span_id for s in children)
    seen = [
        (s.name, dict(s.attributes or {}).get("polythink.source.index"), dict(s.attributes or {}))
        for s in sorted(children, key=lambda s: s.start_time or 0)
    ]
    names = [(name, index) for name, index, _ in seen]
    assert names == [
        ("polythink.failover", 0),
        ("polythink.attempt", 0),
        ("polythink.attempt", 0),
        ("polythink.failover", 1),
        ("polythink.attempt", 1),
    ]
    step0, attempt1, attempt2, step1, attempt3 = (a for _, _, a in seen)
    assert step0["polythink.failover.reason"] == "server_error"
    assert step0["error.type"] == "polythink.errors.TransientError"
    assert step0["gen_ai.provider.name"] == "openai"
    assert step0["gen_ai.request.model"] == "gpt-5.5"
    assert (attempt1["polythink.attempt"], "http.request.resend_count" in attempt1) == (1, False)
    assert (attempt2["polythink.attempt"], attempt2["http.request.resend_count"]) == (2, 1)
    assert attempt2["http.response.status_code"] == 503
    assert "error.type" not in step1
    assert step1["gen_ai.provider.name"] == "anthropic"
    assert attempt3["polythink.attempt"] == 1


# -- the simulator refuses what OpenAI refuses ----------------------------------------------


def test_the_simulator_refuses_a_tool_schema_that_is_not_an_object_in_openais_words() -> None:
    with Simulator() as sim:
        sdk = openai.OpenAI(base_url=sim.base_url("openai"), api_key="sim", max_retries=0)
        tool = {
            "type": "function",
            "function": {"name": "f", "parameters": {"type": "objekt", "properties": "nope"}},
        }
        with pytest.raises(openai.BadRequestError) as chat:
            sdk.chat.completions.create(model="gpt-5.5", messages=PROMPT, tools=[tool])  # type: ignore[list-item]
        bad = {
            "type": "function",
            "name": "f",
            "parameters": {"type": "object", "properties": "nope"},
        }
        with pytest.raises(openai.BadRequestError) as responses:
            sdk.responses.create(model="gpt-5.5", input="hi", tools=[bad])  # type: ignore[list-item]
    assert chat.value.body == {
        "message": "Invalid schema for function 'f': schema must be a JSON Schema of 'type: "
        '"object"\', got \'type: "objekt"\'.',
        "type": "invalid_request_error",
        "param": "tools[0].function.parameters",
        "code": "invalid_function_parameters",
    }
    assert responses.value.body == {
        "message": "Invalid schema for function 'f': 'nope' is not of type 'object'.",
        "type": "invalid_request_error",
        "param": "tools[0].parameters",
        "code": "invalid_function_parameters",
    }


# -- the official SDKs' base-URL variables -------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "variable", "value", "endpoint"),
    [
        (
            "openai",
            "OPENAI_BASE_URL",
            "http://127.0.0.1:8787/openai/v1",
            "http://127.0.0.1:8787/openai/v1",
        ),
        ("openai-responses", "OPENAI_BASE_URL", "https://gw.example/v1/", "https://gw.example/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "https://gw.example", "https://gw.example/v1"),
        ("gemini", "GOOGLE_GEMINI_BASE_URL", "https://gw.example/", "https://gw.example/v1beta"),
        ("groq", "GROQ_BASE_URL", "https://gw.example", "https://gw.example/openai/v1"),
    ],
)
def test_the_official_sdks_base_url_variables_are_read(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str, value: str, endpoint: str
) -> None:
    monkeypatch.setenv(variable, value)
    assert Source(provider, "m", api_key=KEY).endpoint == endpoint
    assert Source(provider, "m", api_key=KEY, base_url="https://own.example/v1").endpoint == (
        "https://own.example/v1"
    )
    monkeypatch.setenv(variable, "https://user:sk-hidden-0123456789@gw.example")
    with pytest.raises(
        ValueError, match=rf"\${variable} must not carry user information"
    ) as caught:
        Source(provider, "m", api_key=KEY)
    assert "sk-hidden" not in str(caught.value)


@pytest.mark.anyio
async def test_openai_base_url_sends_the_calls_there(monkeypatch: pytest.MonkeyPatch) -> None:
    with Simulator() as sim:
        monkeypatch.setenv("OPENAI_BASE_URL", sim.base_url("openai"))
        async with Client([Source("openai", "gpt-5.5", api_key=KEY)]) as client:
            response = await client.complete(PROMPT)
        assert sim.stats.requests == 1
    assert response.text.startswith("Simulated gpt-5.5 answer")


@pytest.mark.parametrize(
    ("provider", "endpoint"),
    [
        ("deepseek", "http://127.0.0.1:8787/deepseek/v1"),
        ("openrouter-responses", "http://127.0.0.1:8787/openrouter-responses/v1"),
        ("azure", "http://127.0.0.1:8787/azure/openai/v1"),
        ("kimi", "http://127.0.0.1:8787/kimi/v1"),
    ],
)
def test_polythink_base_url_root_names_one_server_for_every_provider(
    monkeypatch: pytest.MonkeyPatch, provider: str, endpoint: str
) -> None:
    monkeypatch.setenv("POLYTHINK_BASE_URL_ROOT", "http://127.0.0.1:8787/")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert Source(provider, "m").endpoint == endpoint
    assert Source(provider, "m", base_url="https://own.example/v1").endpoint == (
        "https://own.example/v1"
    )


def test_an_sdks_own_variable_wins_over_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYTHINK_BASE_URL_ROOT", "http://127.0.0.1:8787")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.example/v1")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert Source("openai", "m").endpoint == "https://gw.example/v1"
    assert Source("anthropic", "m").endpoint == "http://127.0.0.1:8787/anthropic/v1"
    monkeypatch.setenv("POLYTHINK_BASE_URL_ROOT", "127.0.0.1:8787")
    with pytest.raises(PolythinkError, match=r"\$POLYTHINK_BASE_URL_ROOT") as caught:
        Source("anthropic", "m")
    assert isinstance(caught.value, ValueError)


@pytest.mark.anyio
async def test_the_root_reaches_the_simulator_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with Simulator() as sim:
        monkeypatch.setenv("POLYTHINK_BASE_URL_ROOT", f"http://127.0.0.1:{sim.port}")
        sources = [Source("deepseek", "deepseek-v4-pro"), Source("anthropic", "claude-haiku-4-5")]
        answers = []
        for one in sources:
            async with Client([one]) as client:
                answers.append((await client.complete(PROMPT)).text.split(" answer ")[0])
        assert sim.stats.requests == 2
    assert answers == ["Simulated deepseek-v4-pro", "Simulated claude-haiku-4-5"]


DEEP = b"[" * 100_000


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [
        (200, "application/json", "malformed_body"),
        (200, "text/event-stream", "malformed_event"),
        (400, "application/json", None),  # a plain 400, the body kept as text
    ],
)
async def test_json_nested_beyond_reading_is_a_typed_error(
    status: int, kind: str, expected: str | None
) -> None:
    content = b"data: " + DEEP + b"\n\n" if kind == "text/event-stream" else DEEP
    answer = httpx.Response(status, headers={"content-type": kind}, content=content)
    with respx.mock() as mock:
        mock.post(URLS["openai"]).mock(return_value=answer)
        async with Client([source("openai")], cache=False) as client:
            with pytest.raises(PolythinkError) as caught:
                await call(client, stream=kind == "text/event-stream")
    assert caught.value.error_type == expected
    assert caught.value.status_code == status


async def call(client: Client, *, stream: bool) -> None:
    if stream:
        async for _ in client.stream(PROMPT):
            pass
    else:
        await client.complete(PROMPT)
