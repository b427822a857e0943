"""The call and cost counters, their attribute sets, and the renamed GenAI names."""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Cost, Effort, StreamInterruptedError, Usage
from polythink.middleware import semconv
from polythink.middleware.base import compose
from polythink.middleware.semconv import (
    CALL_METRIC_KEYS,
    GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK,
    GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    POLYTHINK_CLIENT_CALLS,
    POLYTHINK_CLIENT_COST,
    POLYTHINK_CLIENT_COST_SAVED,
)
from polythink.types import StreamEvent
from tests.test_telemetry import (
    ANTHROPIC,
    ANTHROPIC_BASE,
    Clock,
    Otel,
    Stub,
    attrs,
    request,
    response,
)

COST = Cost(total=0.0125, input=0.0025, cache_read=0.0, cache_write=0.0, output=0.01, source="t")


def _points(otel: Otel, name: str) -> list[Any]:
    return otel.points(name)


@pytest.mark.anyio
async def test_calls_and_cost_share_one_attribute_set_on_success_and_error() -> None:
    otel = Otel()
    clock = Clock()
    layer = otel.layer([ANTHROPIC], clock=clock)
    answer = response(
        usage=Usage(input_tokens=100, output_tokens=50, reasoning_tokens=30),
        requested_effort=Effort.XHIGH,
        applied_effort=Effort.HIGH,
        cost=COST,
    )
    await compose([layer], Stub(clock, answer=answer)).complete(
        request(reasoning_effort=Effort.XHIGH)
    )
    hit = response(
        usage=answer.usage,
        requested_effort=Effort.XHIGH,
        applied_effort=Effort.HIGH,
        cost=COST,
        cache_hit=True,
    )
    await compose([layer], Stub(clock, answer=hit)).complete(request(reasoning_effort="xhigh"))
    failing = compose([layer], Stub(clock, error=ConnectionResetError("reset")))
    with pytest.raises(ConnectionResetError):
        await failing.complete(request(reasoning_effort=Effort.XHIGH))

    calls = {
        (attrs(p)["polythink.cache.hit"], attrs(p)["polythink.call.outcome"]): p
        for p in _points(otel, POLYTHINK_CLIENT_CALLS)
    }
    assert set(calls) == {(False, "success"), (True, "success"), (False, "error")}
    assert all(p.value == 1 for p in calls.values())
    keys = set(CALL_METRIC_KEYS) | {"server.address", "server.port"}
    for point in calls.values():
        assert set(attrs(point)) == keys
    assert attrs(calls[(False, "success")]) == {
        **ANTHROPIC_BASE,
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "polythink.reasoning.requested_effort": "xhigh",
        "polythink.reasoning.applied_effort": "high",
        "polythink.service_tier.served": "unset",
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.call.outcome": "success",
    }
    # A failed call knows what was asked, not what was applied or which model answered.
    assert attrs(calls[(False, "error")]) == {
        **ANTHROPIC_BASE,
        "gen_ai.response.model": "claude-sonnet-4-5",
        "polythink.reasoning.requested_effort": "xhigh",
        "polythink.reasoning.applied_effort": "unset",
        "polythink.service_tier.served": "unset",
        "polythink.source.index": 0,
        "polythink.cache.hit": False,
        "polythink.call.outcome": "error",
    }
    (spent,) = _points(otel, POLYTHINK_CLIENT_COST)
    (saved,) = _points(otel, POLYTHINK_CLIENT_COST_SAVED)
    assert (spent.value, saved.value) == (0.0125, 0.0125)
    assert set(attrs(spent)) == set(attrs(saved)) == keys
    spans = otel.spans()
    assert [attrs(s).get("polythink.cost.total") for s in spans] == [0.0125, 0.0125, None]
    assert attrs(spans[0])["gen_ai.request.reasoning.level"] == "high"


@pytest.mark.anyio
async def test_interrupted_stream_with_priced_partial_counts_as_spent() -> None:
    otel = Otel()
    clock = Clock()
    partial = response(usage=Usage(input_tokens=100, output_tokens=7), cost=COST, finish="error")
    broken = StreamInterruptedError("cut", partial=partial)
    events: list[StreamEvent | BaseException | float] = [StreamEvent("text", text="Pa"), broken]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events))
    with pytest.raises(StreamInterruptedError):
        async for _ in chain.stream(request(stream=True)):
            pass
    (spent,) = _points(otel, POLYTHINK_CLIENT_COST)
    assert spent.value == 0.0125
    assert attrs(spent)["polythink.call.outcome"] == "error"
    assert _points(otel, POLYTHINK_CLIENT_COST_SAVED) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("opt_in", "name"),
    [
        (None, GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK),
        ("gen_ai_latest_experimental", GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK),
        ("http,gen_ai_latest_experimental", GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK),
    ],
)
async def test_time_to_first_chunk_takes_the_latest_name_only_when_opted_in(
    monkeypatch: pytest.MonkeyPatch, opt_in: str | None, name: str
) -> None:
    if opt_in is None:
        monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    else:
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", opt_in)
    otel = Otel()
    clock = Clock()
    final = response(usage=Usage(input_tokens=5, output_tokens=1))
    events: list[StreamEvent | BaseException | float] = [
        0.5,
        StreamEvent("text", text="Paris."),
        StreamEvent("done", response=final),
    ]
    chain = compose([otel.layer([ANTHROPIC], clock=clock)], Stub(clock, events=events))
    async for _ in chain.stream(request(stream=True)):
        pass
    ttfc = {
        GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
        GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK,
    }
    assert otel.metric_names() & ttfc == {name}
    (point,) = otel.points(name)
    assert point.sum == 0.5


def test_names_are_the_conventions_names() -> None:
    # Released (semantic-conventions v1.41.0) and renamed (semantic-conventions-genai) names,
    # as OPERATIONS.md §D lists them (checked 2026-12-01).
    assert semconv.GEN_AI_PROVIDER_NAME == "gen_ai.provider.name"
    assert semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS == (
        "gen_ai.usage.cache_creation.input_tokens"
    )
    assert semconv.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS == "gen_ai.usage.cache_write.input_tokens"
    assert semconv.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS == "gen_ai.usage.reasoning.output_tokens"
    assert semconv.GEN_AI_REQUEST_REASONING_LEVEL == "gen_ai.request.reasoning.level"
    assert GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK == (
        "gen_ai.client.operation.time_to_first_chunk"
    )
    assert GEN_AI_CLIENT_INFERENCE_TIME_TO_FIRST_CHUNK == (
        "gen_ai.client.inference.time_to_first_chunk"
    )
    names = [getattr(semconv, n) for n in semconv.__all__ if isinstance(getattr(semconv, n), str)]
    assert "gen_ai.system" not in names
    assert len(set(semconv.__all__)) == len(semconv.__all__)


@pytest.mark.anyio
async def test_clients_on_one_meter_count_into_the_same_points(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The counters are observed from sums kept per meter: a second client on the same meter
    # provider adds to them (as the same synchronous counter would) and takes no instrument
    # name twice (the SDK would warn and drop its callbacks).
    otel = Otel()
    clock = Clock()
    answer = response(usage=Usage(input_tokens=10, output_tokens=5), cost=COST)
    for _ in range(2):
        layer = otel.layer([ANTHROPIC], clock=clock)
        await compose([layer], Stub(clock, answer=answer)).complete(request())
    (calls,) = _points(otel, POLYTHINK_CLIENT_CALLS)
    (spent,) = _points(otel, POLYTHINK_CLIENT_COST)
    assert (calls.value, spent.value) == (2, 0.025)
    assert not [r for r in caplog.records if "has been created already" in r.getMessage()]
    # Cumulative: a later collection still holds every call.
    await compose([layer], Stub(clock, answer=answer)).complete(request())
    (calls,) = _points(otel, POLYTHINK_CLIENT_CALLS)
    assert calls.value == 3
