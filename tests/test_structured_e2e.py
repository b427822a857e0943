"""Structured output through the whole client against the simulator, on every wire.

The simulator answers a schema request with :func:`polythink.simulator.behaviour.example_value`
of the schema it received (strings ``"sim"``, integers at their minimum or 1, numbers 1.5,
every property filled, one array item), so the expected object is known exactly; its
``structured_output`` setting asks for an invalid object, the wire's refusal, or an answer
cut at the output limit (``Settings.structured_output``).
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from polythink import Client, PartialJSON, ResponseFormat, Source, Tool
from polythink.errors import (
    OutputFormatUnsupportedError,
    OutputRefusedError,
    OutputTruncatedError,
    OutputValidationError,
    ThinkingUnsupportedError,
)
from polythink.simulator import Settings, Simulator
from tests import doc_blocks

pytestmark = pytest.mark.anyio


class Line(BaseModel):
    sku: str
    qty: int


class Invoice(BaseModel):
    number: str
    lines: list[Line]
    note: str | None = None


SIMULATED = Invoice(number="sim", lines=[Line(sku="sim", qty=1)], note="sim")
USER = [{"role": "user", "content": "Bill the order"}]
LOOKUP = Tool(name="lookup", parameters={"type": "object", "properties": {}})

WIRES = [
    ("openai", "gpt-5.5"),
    ("openai-responses", "gpt-5.5"),
    ("anthropic", "claude-sonnet-4-5"),
    ("gemini", "gemini-3-flash"),
]
COMPATIBLE = [
    ("openrouter", "openai/gpt-5"),
    ("deepseek", "deepseek-v4-pro"),
    ("qwen", "qwen3.7-plus"),
    ("glm", "glm-5.3"),
    ("kimi", "kimi-k3"),
    ("minimax", "MiniMax-M3"),
    ("xai", "grok-4.3"),
    ("groq", "openai/gpt-oss-120b"),
    ("mistral", "mistral-small-latest"),
    ("vllm", "qwen3-32b"),
    ("ollama", "qwen3-32b"),
    ("anthropic", "claude-sonnet-4-0"),
    ("gemini", "gemini-2.5-flash"),
]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    # A day every model of the matrix was still served: claude-sonnet-4-0 (the forced-tool
    # fallback) retired 2026-06-15, claude-sonnet-4-5 on 2026-11-30 (CURRENT.md §2.2).
    with Simulator(Settings(today="2026-06-01")) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def valid_answers(sim: Simulator) -> Iterator[None]:
    yield
    sim.settings.structured_output = "valid"


def source(sim: Simulator, provider: str, model: str, **options: Any) -> Source:
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim", **options)


async def kinds_of(events: AsyncIterator[Any], into: list[str]) -> None:
    async for event in events:
        into.append(event.type)


@pytest.mark.parametrize(("provider", "model"), WIRES + COMPATIBLE)
async def test_every_provider_answers_the_model(sim: Simulator, provider: str, model: str) -> None:
    async with Client([source(sim, provider, model)]) as client:
        response = await client.complete(USER, response_format=Invoice)
    assert response.parsed == SIMULATED
    assert response.finish_reason == "stop"


@pytest.mark.parametrize(
    ("provider", "model", "effort"),
    [
        *((provider, model, "low") for provider, model in WIRES),
        # The forced output tool streams as text; manual thinking would refuse it.
        ("anthropic", "claude-sonnet-4-0", None),
        ("deepseek", "deepseek-v4-pro", "high"),
    ],
)
async def test_streamed_partials_join_to_the_final_object(
    sim: Simulator, provider: str, model: str, effort: str | None
) -> None:
    partial = PartialJSON()
    seen: list[Any] = []
    texts: list[str] = []
    done: Any = None
    async with Client([source(sim, provider, model)]) as client:
        async for event in client.stream(USER, response_format=Invoice, reasoning_effort=effort):
            if event.type == "text":
                texts.append(event.text)
                partial.feed(event.text)
                seen.append(partial.value())
            elif event.type == "done":
                done = event.response
    assert done is not None
    assert done.parsed == SIMULATED
    assert "".join(texts) == done.text
    assert len(texts) > 1  # the object arrived in pieces
    assert seen[-1] == SIMULATED.model_dump()
    # Each partial value is a prefix of the final one: keys arrive in order, never change.
    final_keys = list(SIMULATED.model_dump())
    for value in seen:
        if value is not None:
            assert list(value) == final_keys[: len(value)]


@pytest.mark.parametrize(("provider", "model"), WIRES)
@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("invalid", OutputValidationError),
        ("refusal", OutputRefusedError),
        ("truncated", OutputTruncatedError),
    ],
)
async def test_invalid_refused_and_cut_answers_raise_on_every_wire(
    sim: Simulator, provider: str, model: str, mode: str, error: type[Exception]
) -> None:
    sim.settings.structured_output = mode
    async with Client([source(sim, provider, model)]) as client:
        with pytest.raises(error) as caught:
            await client.complete(USER, response_format=Invoice)
        assert type(caught.value) is error
        kinds: list[str] = []
        with pytest.raises(error):
            await kinds_of(client.stream(USER, response_format=Invoice), kinds)
    assert "done" not in kinds
    if mode != "refusal" or provider.startswith("openai"):
        assert "text" in kinds  # what the model wrote reached the caller first
    if mode == "invalid":
        assert [e["loc"] for e in caught.value.errors] == [("number",)]  # type: ignore[attr-defined]


async def test_the_openai_python_shapes_are_refused_and_polythink_s_are_taken(
    sim: Simulator,
) -> None:
    # What openai-python's strict helper sends for this schema: additionalProperties false
    # and every property required, but the default and the oneOf left in (§1.4).
    schema = {
        "type": "object",
        "properties": {
            "legs": {"type": "integer", "default": 4},
            "pet": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["legs", "pet"],
        "additionalProperties": False,
    }
    body = {
        "model": "gpt-5.5",
        "messages": USER,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "pet", "schema": schema, "strict": True},
        },
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{sim.base_url('openai')}/chat/completions", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "Invalid schema for response_format 'pet': In context=('properties', 'legs'), "
        "'default' is not permitted."
    )
    async with Client([source(sim, "openai", "gpt-5.5")]) as client:
        response = await client.complete(USER, response_format=ResponseFormat(schema, name="pet"))
    assert response.parsed == {"legs": 1, "pet": "sim"}


@pytest.mark.parametrize(
    ("provider", "model", "options", "call", "error", "words"),
    [
        (
            "gemini",
            "gemini-2.5-flash",
            {},
            {"tools": [LOOKUP]},
            OutputFormatUnsupportedError,
            "before Gemini 3",
        ),
        (
            "anthropic",
            "claude-sonnet-4-0",
            {},
            {"reasoning_effort": "low"},
            ThinkingUnsupportedError,
            "manual thinking rejects",
        ),
        (
            "anthropic",
            "claude-sonnet-4-0",
            {},
            {"tools": [LOOKUP]},
            OutputFormatUnsupportedError,
            "no room for your tools",
        ),
        (
            "deepseek",
            "deepseek-v4-pro",
            {},
            {"strict": True},
            OutputFormatUnsupportedError,
            "no json_schema mode",
        ),
        (
            "groq",
            "qwen/qwen3-32b",
            {},
            {"json_object": True, "tools": [LOOKUP]},
            OutputFormatUnsupportedError,
            "Groq rejects JSON mode",
        ),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {},
            {"prefill": True},
            OutputFormatUnsupportedError,
            "prefilled",
        ),
    ],
)
async def test_rejected_combinations_are_refused_before_any_http_call(
    sim: Simulator,
    provider: str,
    model: str,
    options: dict[str, Any],
    call: dict[str, Any],
    error: type[Exception],
    words: str,
) -> None:
    fmt: Any = Invoice
    if call.pop("strict", False):
        fmt = ResponseFormat(Invoice, strict=True)
    if call.pop("json_object", False):
        fmt = {"type": "json_object"}
    messages: list[Any] = list(USER)
    if call.pop("prefill", False):
        messages.append({"role": "assistant", "content": "{"})
    before = sim.stats.requests
    async with Client([source(sim, provider, model, **options)]) as client:
        with pytest.raises(error, match=words):
            await client.complete(messages, response_format=fmt, **call)
    assert sim.stats.requests == before


async def test_a_source_that_cannot_take_the_format_fails_over(sim: Simulator) -> None:
    sources = [source(sim, "gemini", "gemini-2.5-flash"), source(sim, "gemini", "gemini-3-flash")]
    async with Client(sources) as client:
        response = await client.complete(
            USER, response_format=Invoice, tools=[LOOKUP], tool_choice="none"
        )
    assert response.source_index == 1
    assert response.parsed == SIMULATED


async def test_the_cache_keeps_two_schemas_apart_and_no_invalid_answer(
    sim: Simulator, tmp_path: Path
) -> None:
    class Other(BaseModel):
        number: str

    async with Client([source(sim, "openai", "gpt-5.5")], cache=tmp_path) as client:
        start = sim.stats.requests
        first = await client.complete(USER, response_format=Invoice)
        again = await client.complete(USER, response_format=Invoice)
        other = await client.complete(USER, response_format=Other)
        assert sim.stats.requests - start == 2
        assert (first.cache_hit, again.cache_hit, other.cache_hit) == (False, True, False)
        assert again.parsed == SIMULATED
        assert other.parsed == Other(number="sim")

        sim.settings.structured_output = "invalid"
        with pytest.raises(OutputValidationError):
            await client.complete(USER, response_format=Other, cache="refresh")
        sim.settings.structured_output = "valid"
        start = sim.stats.requests
        fixed = await client.complete(USER, response_format=Other, cache="refresh")
        assert (fixed.cache_hit, sim.stats.requests - start) == (False, 1)

        sim.settings.structured_output = "refusal"
        stream_messages = [{"role": "user", "content": "Bill it again"}]
        with pytest.raises(OutputRefusedError):
            await kinds_of(client.stream(stream_messages, response_format=Invoice), [])
        sim.settings.structured_output = "valid"
        start = sim.stats.requests
        streamed = [e async for e in client.stream(stream_messages, response_format=Invoice)]
        replayed = [e async for e in client.stream(stream_messages, response_format=Invoice)]
        assert sim.stats.requests - start == 1  # the refusal was not stored; the answer was
        assert streamed[-1].response is not None
        assert replayed[-1].response is not None
        assert replayed[-1].response.cache_hit
        assert replayed[-1].response.parsed == SIMULATED


@pytest.mark.parametrize(("provider", "model"), WIRES)
async def test_the_readme_example_runs_on_every_wire(
    sim: Simulator, provider: str, model: str
) -> None:
    example = doc_blocks.block_with("async def extract(client: Client)")
    module = types.ModuleType("readme_structured_output")
    sys.modules[module.__name__] = module  # pydantic resolves the models' names through it
    try:
        exec(compile(example, "README.md", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    invoice = namespace["Invoice"]
    expected = invoice(number="sim", items=[{"description": "sim", "amount": 1.5}], note="sim")
    async with Client([source(sim, provider, model)]) as client:
        assert await namespace["extract"](client) == expected
        assert await namespace["watch"](client) == expected
        sim.settings.structured_output = "refusal"
        assert await namespace["extract"](client) is None


async def test_the_span_says_json_was_asked_for(sim: Simulator) -> None:
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    async with Client([source(sim, "openai", "gpt-5.5")], tracer_provider=tracer) as client:
        await client.complete(USER, response_format=Invoice)
        await client.complete(USER)
    structured, plain = exporter.get_finished_spans()
    assert (structured.attributes or {}).get("gen_ai.output.type") == "json"
    assert "gen_ai.output.type" not in (plain.attributes or {})


async def test_a_source_header_asks_the_simulator_for_a_mode(sim: Simulator) -> None:
    headers = {"x-sim-structured-output": "truncated"}
    cut = source(sim, "anthropic", "claude-sonnet-4-5", headers=headers)
    async with Client([cut]) as client:
        with pytest.raises(OutputTruncatedError) as caught:
            await client.complete(USER, response_format=Invoice)
    assert caught.value.response is not None
    assert caught.value.response.native_finish_reason == "max_tokens"


# A strict tool whose parameters use type lists, as OpenAI's strict mode asks optional
# fields to be written (§1.2): every wire sends it, and the simulator reads it.
FORECAST = Tool(
    name="forecast",
    description="Weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": ["string", "null"]},
            "days": {"type": ["integer", "null"], "minimum": 1},
            "units": {"type": ["string", "null"], "enum": ["c", "f", None]},
        },
        "required": ["city", "days", "units"],
        "additionalProperties": False,
    },
    strict=True,
)


@pytest.mark.parametrize(("provider", "model"), WIRES + COMPATIBLE)
async def test_a_tool_schema_with_type_lists_is_answered_on_every_wire(
    sim: Simulator, provider: str, model: str
) -> None:
    async with Client([source(sim, provider, model)]) as client:
        response = await client.complete(USER, tools=[FORECAST])
        streamed = [e async for e in client.stream(USER, tools=[FORECAST])]
    calls = [(call.name, json.loads(call.arguments)) for call in response.tool_calls]
    assert calls == [("forecast", {"city": "sim", "days": 1, "units": "c"})]
    assert streamed[-1].response is not None
    streamed_calls = streamed[-1].response.tool_calls
    assert [(call.name, call.arguments) for call in streamed_calls] == [
        (call.name, call.arguments) for call in response.tool_calls
    ]


@pytest.mark.parametrize(("provider", "model"), [*WIRES, ("deepseek", "deepseek-v4-pro")])
async def test_text_format_gives_a_plain_answer(sim: Simulator, provider: str, model: str) -> None:
    async with Client([source(sim, provider, model)]) as client:
        response = await client.complete(USER, response_format={"type": "text"})
    assert response.parsed is None
    assert response.text.startswith(f"Simulated {model} answer")
