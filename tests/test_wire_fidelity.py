"""The long tail of provider wire behaviour, end to end through the simulator.

Each shape comes from :mod:`polythink.simulator.shapes` (the provider's documented or observed
bytes) and is served verbatim by a ``Fault.raw``, so the whole onion sees exactly what the
provider sends: errors inside 200 streams, every documented finish reason, streamed tool-call
variants, usage in each place, and a last event without its blank line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from polythink import Client, Source, StreamEvent, ToolCall, ToolCallDelta, Usage
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    TransientError,
)
from polythink.simulator import Settings, Simulator, shapes
from polythink.simulator.faults import Fault, FaultPlan
from polythink.transports import finish as finish_tables
from tests.resilience_helpers import FakeClock, client_with

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings()) as simulator:
        yield simulator


@pytest.fixture
def plan(sim: Simulator) -> FaultPlan:
    sim.settings.faults = FaultPlan()
    return sim.settings.faults


def _source(sim: Simulator, provider: str, model: str = "sim-model", **kwargs: Any) -> Source:
    fields: dict[str, Any] = {"api_key": "sk-sim", "base_url": sim.base_url(provider)}
    fields.setdefault("max_retries", 0)
    return Source(provider, model, **{**fields, **kwargs})


async def _stream(*sources: Source, **kwargs: Any) -> list[StreamEvent]:
    async with Client(list(sources)) as client:
        return [event async for event in client.stream(HI, **kwargs)]


async def _stream_error(*sources: Source) -> PolythinkError:
    with pytest.raises(PolythinkError) as info:
        await _stream(*sources)
    return info.value


# ------------------------------------------------------------------ errors inside a 200 stream


@pytest.mark.anyio
async def test_openrouter_error_beside_choices_before_output_is_the_ordinary_error(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.raw(shapes.openrouter_error_with_choices(502, "Provider disconnected")))
    error = await _stream_error(_source(sim, "openrouter"))
    assert type(error) is TransientError
    assert (error.provider, error.status_code, error.error_type) == ("openrouter", 200, "502")
    assert error.message == "openrouter sent an in-stream error: Provider disconnected"


@pytest.mark.anyio
async def test_openrouter_error_beside_choices_after_output_carries_the_partial(
    sim: Simulator, plan: FaultPlan
) -> None:
    text = shapes.sse(shapes.chat_chunk({"role": "assistant", "content": "Hel"}))
    plan.add(Fault.raw(text + shapes.openrouter_error_with_choices("server_error", "cut")))
    error = await _stream_error(_source(sim, "openrouter"))
    assert type(error) is StreamInterruptedError
    assert error.partial is not None
    assert (error.partial.text, error.partial.finish_reason) == ("Hel", "error")
    assert error.error_type == "server_error"
    assert type(error.__cause__) is TransientError


@pytest.mark.parametrize(
    ("error", "cls", "error_type"),
    [
        ({"type": "rate_limit_exceeded", "code": None}, RateLimitedError, "rate_limit_exceeded"),
        ({"type": "invalid_request_error", "code": None}, RequestRejectedError, None),
        ({"type": "server_error", "code": "overloaded"}, TransientError, "overloaded"),
        ({"type": "authentication_error", "code": None}, AuthError, None),
        (
            {"type": "data_inspection_failed", "code": "data_inspection_failed"},
            RequestRejectedError,
            "data_inspection_failed",
        ),
    ],
)
@pytest.mark.anyio
async def test_error_chunk_followed_by_done_raises_by_its_type(
    sim: Simulator, plan: FaultPlan, error: dict[str, Any], cls: type[Exception], error_type: Any
) -> None:
    frames = shapes.sse({"error": {"message": "no", "param": None, **error}}, "[DONE]")
    plan.add(Fault.raw(frames))
    raised = await _stream_error(_source(sim, "qwen"))
    assert type(raised) is cls
    expected_type = error_type if error_type is not None else error["type"]
    assert raised.error_type == expected_type


@pytest.mark.anyio
async def test_vllm_bare_error_object_is_rejected(sim: Simulator, plan: FaultPlan) -> None:
    plan.add(Fault.raw(shapes.vllm_error("max_tokens is too large")))
    error = await _stream_error(_source(sim, "vllm"))
    assert type(error) is RequestRejectedError
    assert (error.error_type, error.message) == (
        "BadRequestError",
        "vllm sent an in-stream error: max_tokens is too large",
    )


@pytest.mark.anyio
async def test_in_stream_error_before_output_is_retried(sim: Simulator, plan: FaultPlan) -> None:
    frames = shapes.sse({"error": {"message": "busy", "type": "server_error", "code": None}})
    plan.add(Fault.raw(frames), Fault.raw(shapes.chat_finish("stop", "fine")))
    clock = FakeClock()
    source = _source(sim, "deepseek", max_retries=1)
    async with client_with([source], clock=clock) as client:
        events = [e async for e in client.stream(HI)]
    done = events[-1].response
    assert done is not None
    assert (done.text, done.finish_reason, done.native_finish_reason) == ("fine", "stop", "stop")
    assert len(clock.sleeps) == 1
    assert plan.injected["raw"] == 2


@pytest.mark.anyio
async def test_in_stream_error_before_output_fails_over(sim: Simulator, plan: FaultPlan) -> None:
    frames = shapes.sse({"error": {"message": "busy", "type": "server_error", "code": None}})
    plan.add(Fault.raw(frames), Fault.raw(shapes.chat_finish("stop", "from two")))
    events = await _stream(_source(sim, "glm"), _source(sim, "kimi"))
    done = events[-1].response
    assert done is not None
    assert (done.text, done.source_index, done.provider) == ("from two", 1, "kimi")


@pytest.mark.parametrize(
    ("code", "cls"),
    [("server_error", TransientError), ("rate_limit_exceeded", RateLimitedError)],
)
@pytest.mark.anyio
async def test_responses_failed_event_raises_by_code(
    sim: Simulator, plan: FaultPlan, code: str, cls: type[PolythinkError]
) -> None:
    plan.add(Fault.raw(shapes.responses_failed(code, "it broke")))
    error = await _stream_error(_source(sim, "openai-responses", "gpt-4o"))
    assert type(error) is cls
    assert (error.error_type, error.message) == (
        code,
        "openai-responses sent an in-stream error: it broke",
    )


@pytest.mark.anyio
async def test_responses_error_event_after_text_is_an_interruption(
    sim: Simulator, plan: FaultPlan
) -> None:
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "par"}
    error = {"type": "error", "code": "server_error", "message": "gone", "param": None}
    plan.add(Fault.raw(shapes.sse(delta, error, events=["response.output_text.delta", "error"])))
    raised = await _stream_error(_source(sim, "openai-responses", "gpt-4o"))
    assert type(raised) is StreamInterruptedError
    assert raised.partial is not None
    assert raised.partial.text == "par"
    assert raised.error_type == "server_error"


@pytest.mark.parametrize(
    ("code", "status", "cls"),
    [
        (503, "UNAVAILABLE", TransientError),
        (429, "RESOURCE_EXHAUSTED", RateLimitedError),
        (400, "FAILED_PRECONDITION", RequestRejectedError),
        (500, "INTERNAL", TransientError),
    ],
)
@pytest.mark.anyio
async def test_gemini_error_object_in_the_stream(
    sim: Simulator, plan: FaultPlan, code: int, status: str, cls: type[PolythinkError]
) -> None:
    plan.add(Fault.raw(shapes.gemini_error(code, status, "nope")))
    error = await _stream_error(_source(sim, "gemini", "gemini-2.5-flash"))
    assert type(error) is cls
    assert (error.error_type, error.message) == (status, "gemini sent an in-stream error: nope")


@pytest.mark.anyio
async def test_gemini_error_after_text_carries_the_partial(sim: Simulator, plan: FaultPlan) -> None:
    text = shapes.gemini_finish("STOP", "half").replace(b'"finishReason":"STOP"', b'"x":1')
    plan.add(Fault.raw(text + shapes.gemini_error(503, "UNAVAILABLE", "gone")))
    error = await _stream_error(_source(sim, "gemini", "gemini-2.5-flash"))
    assert type(error) is StreamInterruptedError
    assert error.partial is not None
    assert error.partial.text == "half"


ODD_TYPE = "upstream <b>exploded</b> (see logs)"
"""An in-stream error type that is not an identifier (a server echoing text into it)."""


@pytest.mark.parametrize(
    ("provider", "model", "frames"),
    [
        ("openai", "gpt-4o", shapes.sse({"error": {"message": "gone", "type": ODD_TYPE}})),
        (
            "anthropic",
            "claude-x",
            shapes.sse(
                {"type": "error", "error": {"type": ODD_TYPE, "message": "gone"}}, events=["error"]
            ),
        ),
        (
            "openai-responses",
            "gpt-4o",
            shapes.sse(
                {"type": "error", "code": ODD_TYPE, "message": "gone", "param": None},
                events=["error"],
            ),
        ),
        ("gemini", "gemini-2.5-flash", shapes.gemini_error(503, ODD_TYPE, "gone")),
    ],
    ids=["openai", "anthropic", "openai-responses", "gemini"],
)
@pytest.mark.anyio
async def test_an_in_stream_error_type_that_is_no_identifier_is_http_status(
    sim: Simulator, plan: FaultPlan, provider: str, model: str, frames: bytes
) -> None:
    plan.add(Fault.raw(frames))
    error = await _stream_error(_source(sim, provider, model))
    assert type(error) is TransientError
    assert (error.status_code, error.error_type, error.message) == (
        200,
        "http_200",
        f"{provider} sent an in-stream error: gone",
    )
    # The body keeps what the server sent.
    assert ODD_TYPE in (error.body or "")


# ------------------------------------------------------------------ finish and stop reasons

CHAT_FINISHES = [
    ("openai", "stop", "stop"),
    ("openai", "length", "length"),
    ("openai", "tool_calls", "tool_calls"),
    ("openai", "content_filter", "content_filter"),
    ("openai", "function_call", "tool_calls"),
    # What gateways and servers of one's own behind provider "openai" relay.
    ("openai", "error", "error"),
    ("openai", "abort", "error"),
    ("openai", "end_turn", "stop"),
    ("openai", "eos", "stop"),
    ("openai", "max_tokens", "length"),
    ("openrouter", "stop", "stop"),
    ("openrouter", "length", "length"),
    ("openrouter", "tool_calls", "tool_calls"),
    ("openrouter", "content_filter", "content_filter"),
    ("openrouter", "error", "error"),
    ("deepseek", "stop", "stop"),
    ("deepseek", "length", "length"),
    ("deepseek", "content_filter", "content_filter"),
    ("deepseek", "tool_calls", "tool_calls"),
    ("deepseek", "insufficient_system_resource", "error"),
    ("glm", "stop", "stop"),
    ("glm", "tool_calls", "tool_calls"),
    ("glm", "length", "length"),
    ("glm", "sensitive", "content_filter"),
    ("glm", "network_error", "error"),
    ("glm", "model_context_window_exceeded", "length"),
    ("kimi", "stop", "stop"),
    ("kimi", "length", "length"),
    ("kimi", "tool_calls", "tool_calls"),
    ("kimi", "content_filter", "content_filter"),
    ("qwen", "stop", "stop"),
    ("qwen", "length", "length"),
    ("qwen", "tool_calls", "tool_calls"),
    ("mistral", "stop", "stop"),
    ("mistral", "length", "length"),
    ("mistral", "model_length", "length"),
    ("mistral", "error", "error"),
    ("mistral", "tool_calls", "tool_calls"),
    ("xai", "stop", "stop"),
    ("xai", "length", "length"),
    ("xai", "tool_calls", "tool_calls"),
    ("xai", "content_filter", "content_filter"),
    ("xai", "end_turn", "stop"),
    ("groq", "stop", "stop"),
    ("groq", "length", "length"),
    ("groq", "tool_calls", "tool_calls"),
    ("groq", "function_call", "tool_calls"),
    ("vllm", "abort", "error"),
]


@pytest.mark.parametrize(("provider", "value", "expected"), CHAT_FINISHES)
@pytest.mark.anyio
async def test_every_documented_chat_finish_reason(
    sim: Simulator, plan: FaultPlan, provider: str, value: str, expected: str
) -> None:
    plan.add(Fault.raw(shapes.chat_finish(value)))
    events = await _stream(_source(sim, provider))
    done = events[-1].response
    assert done is not None
    # tool_calls / function_call without a call in the answer still say what the model meant
    assert (done.finish_reason, done.native_finish_reason) == (expected, value)
    assert done.output_limited is (expected == "length")
    assert not any("does not know" in w for w in done.warnings)


def test_chat_tables_list_exactly_the_tested_values() -> None:
    tested: dict[str, set[str]] = {}
    for provider, value, _ in CHAT_FINISHES:
        tested.setdefault(provider, set()).add(value)
    for provider, values in tested.items():
        if provider == "vllm":
            continue
        # Every compatible table starts from OpenAI's values (tested under "openai").
        assert set(finish_tables.chat_table(provider)) == values | set(finish_tables.CHAT), provider
    assert tested["openai"] >= set(finish_tables.CHAT)


@pytest.mark.anyio
async def test_unknown_finish_reason_is_kept_warned_and_logged_once(
    sim: Simulator, plan: FaultPlan, caplog: pytest.LogCaptureFixture
) -> None:
    plan.add(Fault.raw(shapes.chat_finish("brand_new")), Fault.raw(shapes.chat_finish("brand_new")))
    caplog.set_level(logging.WARNING, "polythink.transport")
    first = (await _stream(_source(sim, "kimi")))[-1].response
    second = (await _stream(_source(sim, "kimi")))[-1].response
    assert first is not None
    assert second is not None
    assert (first.finish_reason, first.native_finish_reason) == ("error", "brand_new")
    note = (
        "kimi sent finish reason 'brand_new', which polythink does not know; read as error, so "
        "the answer is not cached (kept in native_finish_reason)"
    )
    assert first.warnings == [note]
    assert note in first.warnings
    assert note in second.warnings
    assert [r.getMessage() for r in caplog.records].count(note) == 1


@pytest.mark.anyio
async def test_provider_failure_finish_is_not_cached(
    sim: Simulator, plan: FaultPlan, tmp_path: Any
) -> None:
    plan.add(
        Fault.raw(shapes.chat_finish("network_error")), Fault.raw(shapes.chat_finish("stop", "b"))
    )
    async with Client([_source(sim, "glm")], cache=tmp_path / "cache") as client:
        first = [e async for e in client.stream(HI)][-1].response
        second = [e async for e in client.stream(HI)][-1].response
    assert first is not None
    assert second is not None
    assert (first.finish_reason, first.native_finish_reason) == ("error", "network_error")
    assert "glm reported a failure: finish reason 'network_error'" in first.warnings
    assert (second.text, second.cache_hit) == ("b", False)
    assert plan.injected["raw"] == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("pause_turn", "stop"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
    ],
)
@pytest.mark.anyio
async def test_every_anthropic_stop_reason(
    sim: Simulator, plan: FaultPlan, value: str, expected: str
) -> None:
    plan.add(Fault.raw(shapes.anthropic_stop(value)))
    done = (await _stream(_source(sim, "anthropic", "claude-x")))[-1].response
    assert done is not None
    assert (done.finish_reason, done.native_finish_reason, done.output_limited) == (
        expected,
        value,
        expected == "length",
    )
    assert set(finish_tables.ANTHROPIC) >= {value}


GEMINI_FINISHES = {
    "FINISH_REASON_UNSPECIFIED": "error",
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "LANGUAGE": "error",
    "OTHER": "error",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_OTHER": "error",
    "NO_IMAGE": "error",
    "IMAGE_RECITATION": "content_filter",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
}


def test_gemini_table_is_the_whole_proto_enum() -> None:
    assert dict(finish_tables.GEMINI) == GEMINI_FINISHES
    assert len(GEMINI_FINISHES) == 18


@pytest.mark.parametrize(("value", "expected"), sorted(GEMINI_FINISHES.items()))
@pytest.mark.anyio
async def test_every_gemini_finish_reason(
    sim: Simulator, plan: FaultPlan, value: str, expected: str
) -> None:
    plan.add(Fault.raw(shapes.gemini_finish(value)))
    done = (await _stream(_source(sim, "gemini", "gemini-2.5-flash")))[-1].response
    assert done is not None
    assert (done.finish_reason, done.native_finish_reason) == (expected, value)


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), ("other", "error")],
)
@pytest.mark.anyio
async def test_responses_incomplete_reasons(
    sim: Simulator, plan: FaultPlan, reason: str, expected: str
) -> None:
    plan.add(Fault.raw(shapes.responses_incomplete(reason, "cut")))
    done = (await _stream(_source(sim, "openai-responses", "gpt-4o")))[-1].response
    assert done is not None
    assert (done.text, done.finish_reason, done.native_finish_reason) == ("cut", expected, reason)
    assert done.output_limited is (expected == "length")


UNKNOWN_ENDS = [
    # provider, model, the unknown end, its native value, a normal end answering "b"
    (
        "openai",
        "gpt-4o",
        shapes.chat_finish("weird_failure", "a"),
        "weird_failure",
        shapes.chat_finish("stop", "b"),
    ),
    (
        "kimi",
        "sim-model",
        shapes.chat_finish("weird_failure", "a"),
        "weird_failure",
        shapes.chat_finish("stop", "b"),
    ),
    (
        "anthropic",
        "claude-x",
        shapes.anthropic_stop("weird_failure", "a"),
        "weird_failure",
        shapes.anthropic_stop("end_turn", "b"),
    ),
    (
        "gemini",
        "gemini-2.5-flash",
        shapes.gemini_finish("WEIRD_FAILURE", "a"),
        "WEIRD_FAILURE",
        shapes.gemini_finish("STOP", "b"),
    ),
    (
        "openai-responses",
        "gpt-4o",
        shapes.responses_ended("weird_failure", "a"),
        "weird_failure",
        shapes.responses_ended("completed", "b"),
    ),
    (
        "openai-responses",
        "gpt-4o",
        shapes.responses_incomplete("weird_failure", "a"),
        "weird_failure",
        shapes.responses_ended("completed", "b"),
    ),
]


@pytest.mark.parametrize(("provider", "model", "unknown", "native", "normal"), UNKNOWN_ENDS)
@pytest.mark.anyio
async def test_an_unknown_end_is_an_error_that_is_never_cached(
    sim: Simulator,
    plan: FaultPlan,
    tmp_path: Any,
    provider: str,
    model: str,
    unknown: bytes,
    native: str,
    normal: bytes,
) -> None:
    plan.add(Fault.raw(unknown), Fault.raw(normal))
    async with Client([_source(sim, provider, model)], cache=tmp_path / "cache") as client:
        first, second, third = [[e async for e in client.stream(HI)][-1].response for _ in range(3)]
    assert first is not None
    assert second is not None
    assert third is not None
    assert (first.text, first.finish_reason, first.native_finish_reason, first.cache_hit) == (
        "a",
        "error",
        native,
        False,
    )
    assert first.warnings == [
        f"{provider} sent finish reason {native!r}, which polythink does not know; read as "
        "error, so the answer is not cached (kept in native_finish_reason)"
    ]
    # The second call reached the provider; its normal answer is the one the cache keeps.
    assert (second.text, second.finish_reason, second.cache_hit) == ("b", "stop", False)
    assert (third.text, third.finish_reason, third.cache_hit) == ("b", "stop", True)
    assert plan.injected["raw"] == 2


@pytest.mark.parametrize(
    ("finish", "note"),
    [
        ("error", "openai reported a failure: finish reason 'error'"),
        (
            "weird_failure",
            "openai sent finish reason 'weird_failure', which polythink does not know; read as "
            "error, so the answer is not cached (kept in native_finish_reason)",
        ),
    ],
)
@pytest.mark.anyio
async def test_a_whole_chat_answer_ending_in_error_is_not_cached(
    sim: Simulator, plan: FaultPlan, tmp_path: Any, finish: str, note: str
) -> None:
    def answer(text: str, finish: str) -> bytes:
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return json.dumps({"id": "c1", "object": "chat.completion", "choices": [choice]}).encode()

    plan.add(Fault.raw(answer("a", finish)), Fault.raw(answer("b", "stop")))
    async with Client([_source(sim, "openai", "gpt-4o")], cache=tmp_path / "cache") as client:
        first = await client.complete(HI)
        second = await client.complete(HI)
        third = await client.complete(HI)
    assert (first.text, first.finish_reason, first.native_finish_reason) == ("a", "error", finish)
    assert first.warnings == [note]
    assert [(r.text, r.cache_hit) for r in (second, third)] == [("b", False), ("b", True)]
    assert plan.injected["raw"] == 2


# ------------------------------------------------------------------ streamed tool calls


def _deltas(events: list[StreamEvent]) -> list[ToolCallDelta | None]:
    return [e.tool_call_delta for e in events if e.type == "tool_call_delta"]


def _calls(events: list[StreamEvent]) -> list[ToolCall | None]:
    return [e.tool_call for e in events if e.type == "tool_call"]


@pytest.mark.anyio
async def test_same_index_with_a_new_id_starts_a_new_call(sim: Simulator, plan: FaultPlan) -> None:
    fragments = [
        {"index": 0, "id": "call_a", "function": {"name": "f", "arguments": '{"x":'}},
        {"index": 0, "function": {"arguments": "1}"}},
        {"index": 0, "id": "call_b", "function": {"name": "g", "arguments": "{}"}},
    ]
    plan.add(Fault.raw(shapes.chat_tool_calls(fragments)))
    events = await _stream(_source(sim, "qwen"))
    assert _deltas(events) == [
        ToolCallDelta(index=0, id="call_a", name="f", arguments='{"x":'),
        ToolCallDelta(index=0, id="call_a", name="f", arguments="1}"),
        ToolCallDelta(index=1, id="call_b", name="g", arguments="{}"),
    ]
    assert _calls(events) == [
        ToolCall(id="call_a", name="f", arguments='{"x":1}'),
        ToolCall(id="call_b", name="g", arguments="{}"),
    ]
    order = [e.type for e in events]
    assert order == [*["tool_call_delta"] * 3, "tool_call", "tool_call", "done"]


@pytest.mark.anyio
async def test_arguments_as_an_object_or_empty(sim: Simulator, plan: FaultPlan) -> None:
    fragments = [
        {
            "index": 0,
            "id": "call_o",
            "function": {"name": "weather", "arguments": {"city": "R"}},
        },
        {"index": 1, "id": "call_e", "function": {"name": "now", "arguments": ""}},
    ]
    plan.add(Fault.raw(shapes.chat_tool_calls(fragments)))
    events = await _stream(_source(sim, "ollama"))
    assert _calls(events) == [
        ToolCall(id="call_o", name="weather", arguments='{"city":"R"}'),
        ToolCall(id="call_e", name="now", arguments="{}"),
    ]
    assert _deltas(events)[0] == ToolCallDelta(
        index=0, id="call_o", name="weather", arguments='{"city":"R"}'
    )


@pytest.mark.parametrize(
    ("fragments", "why"),
    [
        (
            [
                {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}},
                {"index": 0, "function": {"name": "g", "arguments": "}"}},
            ],
            "call 0 named 'f' then 'g' with no new id",
        ),
        (
            [
                {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a":'}},
                {"index": 0, "function": {"arguments": {"a": 1}}},
            ],
            "call 0 mixes arguments text with an object",
        ),
        (
            [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": 7}}],
            "call 0 has arguments of type int (accepted: a JSON string piece or a JSON object)",
        ),
    ],
)
@pytest.mark.anyio
async def test_ambiguous_tool_call_shapes_raise_a_typed_error(
    sim: Simulator, plan: FaultPlan, fragments: list[dict[str, Any]], why: str
) -> None:
    plan.add(Fault.raw(shapes.chat_tool_calls(fragments)))
    error = await _stream_error(_source(sim, "vllm"))
    cause = error.__cause__ if isinstance(error, StreamInterruptedError) else error
    assert type(cause) is TransientError
    assert (cause.provider, cause.error_type) == ("vllm", "malformed_tool_call")
    assert cause.message == (f"vllm sent a tool call that cannot be assembled unambiguously: {why}")


@pytest.mark.anyio
async def test_a_fragment_opening_no_call_fails_before_output(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.raw(shapes.chat_tool_calls([{"index": 0, "function": {"arguments": "{}"}}])))
    error = await _stream_error(_source(sim, "xai"))
    assert type(error) is TransientError
    assert error.error_type == "malformed_tool_call"


# ------------------------------------------------------------------ stream usage and endings

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@pytest.mark.parametrize(
    ("provider", "where"),
    [
        ("openai", "final_chunk"),
        ("mistral", "top_level"),
        ("kimi", "choice"),
        ("groq", "x_groq"),
    ],
)
@pytest.mark.anyio
async def test_stream_usage_wherever_the_provider_puts_it(
    sim: Simulator, plan: FaultPlan, provider: str, where: str
) -> None:
    plan.add(Fault.raw(shapes.chat_usage(where, USAGE)))
    events = await _stream(_source(sim, provider))
    done = events[-1].response
    assert done is not None
    assert done.usage == Usage(input_tokens=11, output_tokens=7)
    assert [e.usage for e in events if e.type == "usage"] == [done.usage]


@pytest.mark.anyio
async def test_stream_usage_is_none_only_when_none_was_sent(
    sim: Simulator, plan: FaultPlan
) -> None:
    plan.add(Fault.raw(shapes.chat_usage("none", USAGE)))
    done = (await _stream(_source(sim, "glm")))[-1].response
    assert done is not None
    assert done.usage is None


@pytest.mark.parametrize("keep_line_break", [True, False])
@pytest.mark.anyio
async def test_last_event_without_blank_line_is_delivered(
    sim: Simulator, plan: FaultPlan, keep_line_break: bool
) -> None:
    frames = shapes.without_final_blank_line(
        shapes.chat_finish("stop", "tail", done=False), keep_line_break=keep_line_break
    )
    plan.add(Fault.raw(frames))
    done = (await _stream(_source(sim, "deepseek")))[-1].response
    assert done is not None
    assert (done.text, done.finish_reason) == ("tail", "stop")


@pytest.mark.anyio
async def test_truncated_last_event_is_still_incomplete(sim: Simulator, plan: FaultPlan) -> None:
    head = shapes.sse(shapes.chat_chunk({"role": "assistant", "content": "x"}))
    cut = json.dumps(shapes.chat_chunk({}, finish="stop"))[:40].encode()
    plan.add(Fault.raw(head + b"data: " + cut))
    error = await _stream_error(_source(sim, "deepseek"))
    assert type(error) is StreamInterruptedError
    assert error.error_type == "stream_incomplete"
    assert error.partial is not None
    assert error.partial.text == "x"


@pytest.mark.parametrize(
    ("provider", "model", "frames", "native"),
    [
        ("anthropic", "claude-x", shapes.anthropic_stop("brand_new_stop"), "brand_new_stop"),
        ("gemini", "gemini-2.5-flash", shapes.gemini_finish("BRAND_NEW"), "BRAND_NEW"),
    ],
)
@pytest.mark.anyio
async def test_unknown_stop_values_on_the_native_wires(
    sim: Simulator, plan: FaultPlan, provider: str, model: str, frames: bytes, native: str
) -> None:
    plan.add(Fault.raw(frames))
    done = (await _stream(_source(sim, provider, model)))[-1].response
    assert done is not None
    assert (done.finish_reason, done.native_finish_reason) == ("error", native)
    assert (
        f"{provider} sent finish reason {native!r}, which polythink does not know; read as "
        "error, so the answer is not cached (kept in native_finish_reason)"
    ) in done.warnings
