"""Response.cost: table prices computed here from genai-prices itself, per wire.

Every expected dollar figure below comes from ``genai_prices.calc_price`` on the test's own
token numbers (the oracle), never from polythink's output. The provider's own billed figure
comes from recorded OpenRouter traffic.
"""

from __future__ import annotations

import logging
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import httpx
import pytest
import respx

from polythink import Client, Cost, Source, Usage, pricing
from polythink.errors import StreamInterruptedError
from polythink.middleware.semconv import POLYTHINK_CLIENT_COST, POLYTHINK_CLIENT_COST_SAVED
from polythink.pricing import PRICE_TABLE_PROVIDERS, price, reported_cost
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from tests.conftest import cassette
from tests.test_telemetry import Otel

TABLE = f"genai-prices {genai_prices.__version__}"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
URL = "https://llm.test/v1"


def calc(
    provider: str,
    model: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    reasoning: int | None = None,
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> Any:
    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        output_reasoning_tokens=reasoning,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )
    return genai_prices.calc_price(usage, model, provider_id=provider)


def expected_cost(
    provider: str,
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    reasoning: int | None,
    cache_read: int | None,
    cache_write: int | None,
) -> Cost:
    """The Cost the table implies, each part priced by genai-prices on its own."""
    total = calc(
        provider,
        model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning=reasoning,
        cache_read=cache_read,
        cache_write=cache_write,
    ).total_price
    uncached = input_tokens - (cache_read or 0) - (cache_write or 0)

    def cached(count: int | None, **kw: int) -> float | None:
        if count is None:
            return None
        return float(calc(provider, model, input_tokens=count, **kw).input_price)

    return Cost(
        total=float(total),
        input=float(calc(provider, model, input_tokens=uncached).input_price),
        cache_read=cached(cache_read, cache_read=cache_read or 0),
        cache_write=cached(cache_write, cache_write=cache_write or 0),
        output=float(calc(provider, model, output_tokens=output_tokens).output_price),
        reasoning=(
            None
            if reasoning is None
            else float(calc(provider, model, output_tokens=reasoning).output_price)
        ),
        source=TABLE,
    )


# (polythink provider, table provider, model, wire answer, path, tokens the answer implies)
WIRES = [
    (
        "openai",
        "openai",
        "gpt-5.5",
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-5.5",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Paris."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 12000,
                "completion_tokens": 900,
                "total_tokens": 12900,
                "prompt_tokens_details": {"cached_tokens": 8000},
                "completion_tokens_details": {"reasoning_tokens": 600},
            },
        },
        "/chat/completions",
        {"input_tokens": 12000, "output_tokens": 900, "reasoning": 600, "cache_read": 8000},
    ),
    (
        "openai-responses",
        "openai",
        "gpt-5.5",
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": "gpt-5.5",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Paris.", "annotations": []}],
                }
            ],
            "usage": {
                "input_tokens": 12000,
                "input_tokens_details": {"cached_tokens": 8000},
                "output_tokens": 900,
                "output_tokens_details": {"reasoning_tokens": 600},
                "total_tokens": 12900,
            },
        },
        "/responses",
        {"input_tokens": 12000, "output_tokens": 900, "reasoning": 600, "cache_read": 8000},
    ),
    (
        "anthropic",
        "anthropic",
        "claude-sonnet-4-5",
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Paris."}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 2000,
                "cache_read_input_tokens": 8000,
                "cache_creation_input_tokens": 1000,
                "output_tokens": 900,
            },
        },
        "/messages",
        # Anthropic's input_tokens are the uncached ones: 2000 + 8000 + 1000 in all.
        {"input_tokens": 11000, "output_tokens": 900, "cache_read": 8000, "cache_write": 1000},
    ),
    (
        "gemini",
        "google",
        "gemini-2.5-pro",
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "Paris."}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 12000,
                "cachedContentTokenCount": 8000,
                "candidatesTokenCount": 300,
                "thoughtsTokenCount": 600,
                "totalTokenCount": 12900,
            },
            "modelVersion": "gemini-2.5-pro",
        },
        "/models/gemini-2.5-pro:generateContent",
        {"input_tokens": 12000, "output_tokens": 900, "reasoning": 600, "cache_read": 8000},
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "table", "model", "answer", "path", "tokens"), WIRES, ids=[w[0] for w in WIRES]
)
async def test_cost_is_the_table_price_of_the_wire_usage(
    provider: str, table: str, model: str, answer: Any, path: str, tokens: dict[str, int]
) -> None:
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{URL}{path}").respond(200, json=answer)
        async with Client([Source(provider, model, api_key="sk-test-key", base_url=URL)]) as llm:
            response = await llm.complete(QUESTION)
    full = {"reasoning": None, "cache_read": None, "cache_write": None, **tokens}
    assert response.cost == expected_cost(table, model, **full)
    assert response.cost.total > 0


def test_every_token_price_of_the_table_is_priced_as_genai_prices_prices_it() -> None:
    # Every model of every provider polythink maps, for usages with and without cache and
    # reasoning counts: the total equals calc_price's, the parts add up to its input and
    # output prices.
    inverse = {table: ours for ours, table in reversed(PRICE_TABLE_PROVIDERS.items())}
    usages = [Usage(1000, 500, 300, 200, 100), Usage(300_000, 2000, None, 250_000, 0)]
    checked = 0
    for provider in genai_prices.data.providers:
        ours = inverse.get(provider.id)
        if ours is None:
            continue
        for model in provider.models:
            for usage in usages:
                try:
                    want = calc(
                        provider.id,
                        model.id,
                        input_tokens=usage.input_tokens or 0,
                        output_tokens=usage.output_tokens or 0,
                        reasoning=usage.reasoning_tokens,
                        cache_read=usage.cache_read_tokens,
                        cache_write=usage.cache_write_tokens,
                    )
                except (LookupError, ValueError):
                    continue
                got = price(usage, ours, model.id)
                if got is None:
                    continue
                checked += 1
                assert got.total == float(want.total_price), (provider.id, model.id, usage)
                parts = [got.input, got.cache_read, got.cache_write]
                assert sum(p or 0.0 for p in parts) == pytest.approx(
                    float(want.input_price), rel=1e-12, abs=1e-15
                )
                assert got.output == pytest.approx(float(want.output_price), rel=1e-12, abs=1e-15)
    assert checked > 500


def test_unknown_model_or_missing_usage_is_none_never_zero() -> None:
    usage = Usage(1000, 500, 100, None, None)
    assert price(usage, "openai", "my-own-finetune-that-no-table-knows") is None
    assert price(usage, "vllm", "gpt-5.5") is None
    assert price(None, "openai", "gpt-5.5") is None
    assert price(Usage(1000, None), "openai", "gpt-5.5") is None


@pytest.mark.anyio
async def test_unknown_model_on_the_wire_has_no_cost() -> None:
    answer = dict(WIRES[0][3], model="my-own-finetune-that-no-table-knows")
    with respx.mock(assert_all_called=True) as mock:
        mock.post(f"{URL}/chat/completions").respond(200, json=answer)
        source = Source(
            "openai", "my-own-finetune-that-no-table-knows", api_key="k" * 12, base_url=URL
        )
        async with Client([source]) as llm:
            response = await llm.complete(QUESTION)
    assert response.usage is not None
    assert response.cost is None


OPENROUTER_CHAT = "pai_openrouter_chat_reasoning_details_stream.yaml"
OPENROUTER_RESPONSES = "pai_openrouter_responses_reasoning_text_stream.yaml"


def _recorded(interaction: Any) -> httpx.Response:
    content_type = interaction.header("content-type") or "text/event-stream"
    return httpx.Response(
        200, content=interaction.response_raw, headers={"content-type": content_type}
    )


@pytest.mark.anyio
async def test_provider_reported_cost_wins_over_the_table() -> None:
    # Recorded 2025-12: usage.cost 0.000669 = prompt 0.000129 + completions 0.00054.
    chat = cassette(OPENROUTER_CHAT).interactions[0]
    responses = cassette(OPENROUTER_RESPONSES).interactions[0]
    with respx.mock(assert_all_called=True) as mock:
        mock.post(chat.uri).mock(return_value=_recorded(chat))
        mock.post(responses.uri).mock(return_value=_recorded(responses))
        chat_source = Source("openrouter", chat.request_body["model"], api_key="sk-or-test-key")
        async with Client([chat_source]) as llm:
            events = [e async for e in llm.stream([{"role": "user", "content": "What is 2+2?"}])]
        responses_source = Source("openrouter-responses", "openai/gpt-oss-20b", api_key="sk-or-k")
        async with Client([responses_source]) as llm:
            answer = [e async for e in llm.stream([{"role": "user", "content": "What is 2+2?"}])]
    done = events[-1].response
    assert done is not None
    assert done.cost == Cost(total=0.000669, input=0.000129, output=0.00054, source="provider")
    final = answer[-1].response
    assert final is not None
    assert final.cost == Cost(total=0.0000113, input=0.0000039, output=0.0000074, source="provider")
    # The table would have priced the same tokens itself; the provider's figure is kept.
    assert price(final.usage, "openrouter", "openai/gpt-oss-20b") is not None


def test_reported_cost_reads_only_a_real_amount() -> None:
    assert reported_cost({"cost": 0.5}) == Cost(total=0.5, source="provider")
    # A split that does not add up to the total is not used.
    split = {"upstream_inference_prompt_cost": 0.1, "upstream_inference_completions_cost": 0.1}
    assert reported_cost({"cost": 0.5, "cost_details": split}) == Cost(total=0.5, source="provider")
    for usage in ({}, {"cost": None}, {"cost": "0.5"}, {"cost": True}, {"cost": -1}, None):
        assert reported_cost(usage) is None


@pytest.fixture(scope="module")
def simulator() -> Any:
    with Simulator() as sim:
        yield sim


SIMULATED = [
    ("openai", "gpt-5.5"),
    ("openai-responses", "gpt-5.5"),
    ("anthropic", "claude-haiku-4-5"),
    ("gemini", "gemini-3.8-flash"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "model"), SIMULATED, ids=[p for p, _ in SIMULATED])
async def test_streamed_cost_equals_non_streamed(
    simulator: Simulator, provider: str, model: str
) -> None:
    source = Source(provider, model, api_key="sim", base_url=simulator.base_url(provider))
    async with Client([source]) as llm:
        whole = await llm.complete(QUESTION, reasoning_effort="high")
        events = [e async for e in llm.stream(QUESTION, reasoning_effort="high")]
    streamed = events[-1].response
    assert streamed is not None
    assert whole.usage == streamed.usage
    assert whole.cost is not None
    assert whole.cost == streamed.cost
    usage = whole.usage
    assert usage is not None
    assert usage.input_tokens is not None
    assert usage.output_tokens is not None
    table = PRICE_TABLE_PROVIDERS[provider]
    want = calc(
        table,
        model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning=usage.reasoning_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
    )
    assert whole.cost.total == float(want.total_price)


@pytest.mark.anyio
async def test_interrupted_stream_partial_carries_the_cost_of_its_usage() -> None:
    # Anthropic reports usage in message_start, before the break.
    plan = FaultPlan([Fault.in_band(after_chunks=5)])
    with Simulator(Settings(faults=plan)) as sim:
        source = Source(
            "anthropic",
            "claude-haiku-4-5",
            api_key="sim",
            base_url=sim.base_url("anthropic"),
            max_retries=0,
        )
        async with Client([source]) as llm:
            with pytest.raises(StreamInterruptedError) as caught:
                async for _ in llm.stream(QUESTION, reasoning_effort="low"):
                    pass
    partial = caught.value.partial
    assert partial is not None
    assert partial.usage is not None
    assert partial.usage.input_tokens is not None
    assert partial.usage.output_tokens is not None
    want = calc(
        "anthropic",
        "claude-haiku-4-5",
        input_tokens=partial.usage.input_tokens,
        output_tokens=partial.usage.output_tokens,
        cache_read=partial.usage.cache_read_tokens,
        cache_write=partial.usage.cache_write_tokens,
    )
    assert partial.cost is not None
    assert partial.cost.total == float(want.total_price)


def _sum(otel: Otel, name: str) -> float:
    return sum(point.value for point in otel.points(name))  # type: ignore[attr-defined]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_cache_hit_carries_the_original_cost_and_counts_as_saved(
    simulator: Simulator, tmp_path: Path, streamed: bool
) -> None:
    otel = Otel()
    source = Source("openai", "gpt-5.5", api_key="sim", base_url=simulator.base_url("openai"))
    async with Client([source], cache=tmp_path, meter_provider=otel.meter_provider) as llm:
        answers = []
        for _ in range(2):
            if streamed:
                events = [e async for e in llm.stream(QUESTION, reasoning_effort="low")]
                answers.append(events[-1].response)
            else:
                answers.append(await llm.complete(QUESTION, reasoning_effort="low"))
    first, hit = answers
    assert first is not None
    assert hit is not None
    assert (first.cache_hit, hit.cache_hit) == (False, True)
    assert first.cost is not None
    assert hit.cost == first.cost
    assert _sum(otel, POLYTHINK_CLIENT_COST) == first.cost.total
    assert _sum(otel, POLYTHINK_CLIENT_COST_SAVED) == first.cost.total


def test_without_the_price_table_cost_is_none_and_one_line_says_how_to_enable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pricing, "_table", pricing._Table())
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    usage = Usage(1000, 500, 100, 0, None)
    with caplog.at_level(logging.WARNING, logger="polythink.pricing"):
        assert price(usage, "openai", "gpt-5.5") is None
        assert price(usage, "anthropic", "claude-sonnet-4-5") is None
    assert [r.getMessage() for r in caplog.records] == [
        "Response.cost is None: the price table is not installed; "
        "pip install 'polythink[cost]' (genai-prices) to price calls"
    ]
    assert pricing.price_table_version() is None


def test_tiered_price_switches_tier_on_the_whole_input() -> None:
    # claude-sonnet-4-5 charges more per token above 200k input tokens (cache included).
    below = Usage(150_000, 1000, None, 100_000, 0)
    above = Usage(250_000, 1000, None, 200_000, 0)
    for usage in (below, above):
        got = price(usage, "anthropic", "claude-sonnet-4-5")
        assert got is not None
        want = calc(
            "anthropic",
            "claude-sonnet-4-5",
            input_tokens=usage.input_tokens or 0,
            output_tokens=usage.output_tokens or 0,
            cache_read=usage.cache_read_tokens,
            cache_write=usage.cache_write_tokens,
        )
        assert got.total == float(want.total_price)
    cheap = price(below, "anthropic", "claude-sonnet-4-5")
    dear = price(above, "anthropic", "claude-sonnet-4-5")
    assert cheap is not None
    assert dear is not None
    assert dear.output is not None
    assert cheap.output is not None
    assert Decimal(str(dear.output)) > Decimal(str(cheap.output))
