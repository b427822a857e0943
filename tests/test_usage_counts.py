"""Usage keeps one rule on every wire: output includes reasoning; cost follows the counts.

Also the Anthropic cache writes by lifetime: 1-hour writes cost 2x the input price, 5-minute
ones 1.25x (ANT-DOC-caching, WIRE.md §3.5; genai-prices ``cache_write_1h_mtok``).

- xAI counts reasoning beside ``completion_tokens``: "reasoning token consumption will be
  counted separately from completion_tokens, but will be counted in the total_tokens"
  (docs.x.ai/docs/key-information/consumption-and-rate-limits, quoted in vercel/ai#12425,
  2026-02-11). The numbers below are real grok traffic: grok-4.20 Chat Completions in
  Wei-Shaw/sub2api#5771 (2026-08-18: prompt 10120, completion 1499, reasoning 2809, total
  14428, cached 128; xAI billed ``cost_in_usd_ticks`` 232856000, i.e. $0.0232856), and
  grok-3-mini in vercel/ai#12425 (completion 1, reasoning 386, total 399).
- OpenAI counts them inside (``CompletionUsage``: reasoning tokens "are still counted in the
  total completion tokens", openai_openapi.yaml 2026-08-21).
- Any other provider: the total decides.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import genai_prices
import httpx
import pytest
import respx

from polythink import Client, Message, PromptCache, Response, Source, Usage
from polythink.cache_codec import as_hit
from polythink.pricing import price
from polythink.providers import PROVIDERS
from polythink.simulator import Simulator
from polythink.transports.anthropic import parse_usage as parse_anthropic_usage
from polythink.transports.base import output_with_reasoning
from polythink.transports.openai_chat import parse_usage
from polythink.transports.openai_responses import parse_usage as parse_responses_usage
from tests.chatwire import sse_response
from tests.test_pricing import calc

pytestmark = pytest.mark.anyio

GROK_420 = {
    "prompt_tokens": 10120,
    "completion_tokens": 1499,
    "total_tokens": 14428,
    "prompt_tokens_details": {"cached_tokens": 128},
    "completion_tokens_details": {"reasoning_tokens": 2809},
}
GROK_3_MINI = {
    "prompt_tokens": 12,
    "completion_tokens": 1,
    "total_tokens": 399,
    "completion_tokens_details": {"reasoning_tokens": 386},
}
QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]


def test_xai_output_adds_the_reasoning_counted_beside_completion() -> None:
    profile = PROVIDERS["xai"]
    usage = parse_usage(GROK_420, counts_reasoning=profile.completion_counts_reasoning)
    assert usage == Usage(10120, 1499 + 2809, 2809, 128, None)
    assert usage.total_tokens == 14428
    small = parse_usage(GROK_3_MINI, counts_reasoning=profile.completion_counts_reasoning)
    assert small == Usage(12, 387, 386, None, None)


def test_openai_output_is_the_completion_count() -> None:
    usage = {
        "prompt_tokens": 12000,
        "completion_tokens": 900,
        "total_tokens": 12900,
        "completion_tokens_details": {"reasoning_tokens": 600},
    }
    parsed = parse_usage(usage, counts_reasoning=PROVIDERS["openai"].completion_counts_reasoning)
    assert parsed == Usage(12000, 900, 600, None, None)


@pytest.mark.parametrize(
    ("prompt", "completion", "reasoning", "total", "output"),
    [
        (10120, 1499, 2809, 14428, 4308),  # total = p + c + r: beside (xAI's numbers)
        (12000, 900, 600, 12900, 900),  # total = p + c: inside (OpenAI's)
        (12, 1, 386, None, 387),  # no total, reasoning above completion: beside
        (12, 900, 600, None, 900),  # no total, reasoning within completion: inside
        (12, 900, 0, 912, 900),  # no reasoning: nothing to decide
        (12, 900, None, 912, 900),
    ],
)
def test_an_undocumented_provider_is_decided_by_the_numbers(
    prompt: int, completion: int, reasoning: int | None, total: int | None, output: int
) -> None:
    assert (
        output_with_reasoning(
            completion, reasoning, prompt=prompt, total=total, counts_reasoning=None
        )
        == output
    )


def test_a_documented_convention_wins_over_the_numbers() -> None:
    # OpenAI documents inside: a total that happens to fit "beside" does not change it.
    assert output_with_reasoning(50, 30, prompt=10, total=90, counts_reasoning=True) == 50
    assert (
        output_with_reasoning(1499, 2809, prompt=10120, total=None, counts_reasoning=False) == 4308
    )


def test_the_responses_wire_applies_the_same_rule() -> None:
    beside = {
        "input_tokens": 100,
        "output_tokens": 40,
        "total_tokens": 200,
        "output_tokens_details": {"reasoning_tokens": 60},
    }
    assert parse_responses_usage(beside) == Usage(100, 100, 60, None, None)
    openai = PROVIDERS["openai-responses"].completion_counts_reasoning
    inside = {**beside, "output_tokens": 100, "total_tokens": 200}
    assert parse_responses_usage(inside, counts_reasoning=openai) == Usage(100, 100, 60, None, None)


def _grok_answer() -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 1765000000,
        "model": "grok-4.20",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Rayleigh."},
                "finish_reason": "stop",
            }
        ],
        "usage": GROK_420,
    }


def _grok_stream() -> bytes:
    chunks = [
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1765000000,
            "model": "grok-4.20",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "Rayleigh."},
                    "finish_reason": None,
                }
            ],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1765000000,
            "model": "grok-4.20",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1765000000,
            "model": "grok-4.20",
            "choices": [],
            "usage": GROK_420,
        },
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


async def test_xai_usage_and_cost_streamed_and_not() -> None:
    source = Source("xai", "grok-4.20", api_key="xai-test")
    url = "https://api.x.ai/v1/chat/completions"
    with respx.mock(assert_all_called=True) as mock:
        mock.post(url).mock(
            side_effect=[httpx.Response(200, json=_grok_answer()), sse_response(_grok_stream())]
        )
        async with Client([source]) as client:
            whole = await client.complete(QUESTION, cache=False)
            streamed = None
            async for event in client.stream(QUESTION, cache=False):
                if event.type == "done":
                    streamed = event.response
    assert streamed is not None
    assert whole.usage == streamed.usage == Usage(10120, 4308, 2809, 128, None)
    assert whole.cost == streamed.cost
    assert whole.cost is not None
    # grok-4.20 from 2026-04-30 in genai-prices: $2.50 per million output tokens, reasoning
    # included; the whole call is what xAI billed (see test_xai_cost_is_what_xai_billed).
    assert whole.cost.output == pytest.approx(4308 * 2.5e-6, abs=1e-12)
    assert whole.cost.reasoning == pytest.approx(2809 * 2.5e-6, abs=1e-12)
    assert whole.cost.total == pytest.approx(0.0232856, abs=1e-12)


def test_xai_cost_is_what_xai_billed() -> None:
    usage = parse_usage(GROK_420, counts_reasoning=False)
    cost = price(usage, "xai", "grok-4.20", at=datetime(2026, 8, 18, tzinfo=UTC))
    assert cost is not None
    # xAI's own figure for this call: cost_in_usd_ticks 232856000 (1 USD = 1e10 ticks).
    assert cost.total == pytest.approx(232856000 / 1e10, abs=1e-12)
    table = calc(
        "x-ai", "grok-4.20", input_tokens=10120, output_tokens=4308, reasoning=2809, cache_read=128
    )
    assert cost.total == pytest.approx(float(table.total_price), abs=1e-12)


async def test_the_simulated_xai_wire_counts_reasoning_beside_completion() -> None:
    with Simulator() as sim:
        source = Source("xai", "grok-4.3", base_url=sim.base_url("xai"), api_key="sim")
        async with Client([source]) as client:
            http = httpx.AsyncClient()
            raw = (
                await http.post(
                    f"{sim.base_url('xai')}/chat/completions",
                    json={"model": "grok-4.3", "messages": QUESTION, "reasoning_effort": "high"},
                )
            ).json()["usage"]
            await http.aclose()
            response = await client.complete(QUESTION, reasoning_effort="high", cache=False)
    reasoning = raw["completion_tokens_details"]["reasoning_tokens"]
    assert reasoning > 0
    assert raw["total_tokens"] == raw["prompt_tokens"] + raw["completion_tokens"] + reasoning
    assert response.usage == Usage(
        raw["prompt_tokens"], raw["completion_tokens"] + reasoning, reasoning, 0, None
    )


# ------------------------------------------------------------------ Anthropic 1-hour cache writes

# A recorded answer with both cache lifetimes (WIRE.md §3, stored copy): 248 tokens written,
# 148 to the 5-minute cache and 100 to the 1-hour cache.
ANTHROPIC_USAGE = {
    "input_tokens": 2048,
    "cache_read_input_tokens": 1800,
    "cache_creation_input_tokens": 248,
    "output_tokens": 503,
    "cache_creation": {"ephemeral_5m_input_tokens": 148, "ephemeral_1h_input_tokens": 100},
}
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


def test_anthropic_usage_carries_the_one_hour_writes() -> None:
    assert parse_anthropic_usage(ANTHROPIC_USAGE) == Usage(4096, 503, None, 1800, 248, 100)
    without = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "cache_creation"}
    assert parse_anthropic_usage(without) == Usage(4096, 503, None, 1800, 248, None)


def test_one_hour_writes_cost_twice_the_input_price() -> None:
    cost = price(Usage(4096, 503, None, 1800, 248, 100), "anthropic", "claude-sonnet-4-0")
    assert cost is not None
    # claude-sonnet-4-0: input $3, 5-minute writes $3.75 (1.25x), 1-hour writes $6 (2x).
    assert cost.cache_write == pytest.approx(148 * 3.75e-6 + 100 * 6e-6, abs=1e-12)
    oracle = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=4096,
            cache_read_tokens=1800,
            cache_write_tokens=248,
            cache_write_1h_tokens=100,
            output_tokens=503,
        ),
        "claude-sonnet-4-0",
        provider_id="anthropic",
    )
    assert cost.total == pytest.approx(float(oracle.total_price), abs=1e-12)
    five_minutes = price(Usage(4096, 503, None, 1800, 248, 0), "anthropic", "claude-sonnet-4-0")
    assert five_minutes is not None
    assert cost.total - five_minutes.total == pytest.approx(100 * (6e-6 - 3.75e-6), abs=1e-12)


def _anthropic_message() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [{"type": "text", "text": "Rayleigh."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": ANTHROPIC_USAGE,
    }


def _anthropic_stream() -> bytes:
    start_usage = {**ANTHROPIC_USAGE, "output_tokens": 1}
    delta_usage = {k: v for k, v in ANTHROPIC_USAGE.items() if k != "cache_creation"}
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **_anthropic_message(),
                    "content": [],
                    "stop_reason": None,
                    "usage": start_usage,
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Rayleigh."},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {n}\ndata: {json.dumps(p)}\n\n" for n, p in events).encode()


async def test_anthropic_one_hour_writes_streamed_and_not() -> None:
    source = Source("anthropic", "claude-sonnet-4-0", api_key="sk-ant-test")
    cache = PromptCache(ttl="1h")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(ANTHROPIC_URL).mock(
            side_effect=[
                httpx.Response(200, json=_anthropic_message()),
                sse_response(_anthropic_stream()),
            ]
        )
        async with Client([source]) as client:
            whole = await client.complete(QUESTION, prompt_cache=cache, cache=False)
            streamed = None
            async for event in client.stream(QUESTION, prompt_cache=cache, cache=False):
                if event.type == "done":
                    streamed = event.response
    assert json.loads(route.calls[0].request.content)["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }
    assert streamed is not None
    assert whole.usage == streamed.usage == Usage(4096, 503, None, 1800, 248, 100)
    assert whole.cost == streamed.cost
    assert whole.cost is not None
    assert whole.cost.cache_write == pytest.approx(148 * 3.75e-6 + 100 * 6e-6, abs=1e-12)


def test_a_cached_answer_keeps_the_one_hour_writes() -> None:
    source = parse_anthropic_usage(ANTHROPIC_USAGE)
    hit = as_hit(
        Response(
            text="x",
            reasoning=None,
            tool_calls=[],
            finish_reason="stop",
            usage=source,
            model="m",
            provider="anthropic",
            source_index=0,
            message=Message(role="assistant", content="x"),
        )
    )
    assert hit.usage == Usage(4096, 503, None, 1800, 248, 100)


def test_one_hour_writes_a_table_does_not_price_give_no_cost() -> None:
    from decimal import Decimal

    from polythink import pricing

    assert pricing.price_table_version() is not None  # the table is loaded
    rates = pricing._Rates(
        {"input_mtok": Decimal(3), "cache_write_mtok": Decimal("3.75"), "output_mtok": Decimal(15)}
    )
    assert pricing._parts(rates, Usage(4096, 503, None, 1800, 248, 100)) is None
    parts = pricing._parts(rates, Usage(4096, 503, None, 1800, 248, 0))
    assert parts is not None
    assert parts[2] == Decimal("3.75") * 248 / 1_000_000  # the cache-write part


def test_a_budget_reserves_one_hour_writes_at_their_price() -> None:
    from polythink.pricing import worst_case_nanos

    # claude-sonnet-4-0: 1,000 prompt tokens written to the cache, 100 output tokens at $15.
    five = worst_case_nanos("anthropic", "claude-sonnet-4-0", 1000, 100, cache_write=True)
    hour = worst_case_nanos(
        "anthropic", "claude-sonnet-4-0", 1000, 100, cache_write=True, cache_write_1h=True
    )
    assert (five, hour) == (1000 * 3750 + 100 * 15000, 1000 * 6000 + 100 * 15000)
