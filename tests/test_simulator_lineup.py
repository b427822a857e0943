"""The simulator plays the current lineup: retired models answered as their provider answers
them, Anthropic 2026-10-21's sampling 400, and the per-model refusals of the new generation.

Dates and replacements: ../shared/wire/CURRENT.md §2 (read 2026-12-01). The simulator plays
2026-12-01 here (``Settings.today``), so the test does not depend on the day it runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from polythink import Client, ModelNotFoundError, Source
from polythink.simulator import Settings, Simulator

HI = [{"role": "user", "content": "hi"}]
DAY = "2026-12-01"


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(today=DAY)) as simulator:
        yield simulator


def _source(sim: Simulator, provider: str, model: str) -> Source:
    return Source(provider, model, api_key="sim", base_url=sim.base_url(provider), max_retries=0)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "model", "status", "replacement"),
    [
        # o4-mini shut down 2026-10-23 (no replacement named).
        ("openai", "o4-mini", 404, None),
        ("openai-responses", "o4-mini", 404, None),
        # gpt-5.2-chat-latest shut down 2026-08-10, replacement gpt-5.5.
        ("openai", "gpt-5.2-chat-latest", 404, "gpt-5.5"),
        # claude-sonnet-4-5 retired 2026-11-30; Anthropic names Sonnet 5.5 in its place.
        ("anthropic", "claude-sonnet-4-5", 404, "claude-sonnet-5-5"),
        # Groq decommissioned deepseek-r1-distill-llama-70b on 2025-10-02.
        ("groq", "deepseek-r1-distill-llama-70b", 400, "gpt-oss-120b"),
    ],
)
async def test_a_retired_model_is_not_found(
    sim: Simulator, provider: str, model: str, status: int, replacement: str | None
) -> None:
    async with Client([_source(sim, provider, model)], capabilities_store=False) as client:
        with pytest.raises(ModelNotFoundError) as info:
            await client.complete(HI)
    assert (info.value.status_code, info.value.model) == (status, model)
    assert info.value.replacement == replacement


@pytest.mark.anyio
async def test_failover_moves_past_a_retired_model_to_a_current_one(sim: Simulator) -> None:
    sources = [_source(sim, "anthropic", "claude-sonnet-4-5"), _source(sim, "openai", "gpt-6-luna")]
    async with Client(sources, capabilities_store=False) as client:
        response = await client.complete(HI, reasoning_effort="low")
    assert (response.source_index, response.model, response.applied_effort.value) == (  # type: ignore[union-attr]
        1,
        "gpt-6-luna",
        "low",
    )
    assert response.warnings[0].startswith("failover: ")


@pytest.mark.anyio
async def test_gemini_reroutes_a_shut_down_model_to_its_replacement(sim: Simulator) -> None:
    # gemini-2.5-pro shut down 2026-12-01; requests are answered by gemini-3.8-flash, whose id
    # is the only tell (CURRENT.md §3.2).
    async with Client([_source(sim, "gemini", "gemini-2.5-pro")], capabilities_store=False) as c:
        response = await c.complete(HI)
    assert response.model == "gemini-3.8-flash"


def test_a_retired_gemini_model_without_a_replacement_is_not_found() -> None:
    # gemini-3.1-flash-lite shuts down 2027-05-07 and names no replacement (G-DEPR).
    with Simulator(Settings(today="2027-06-01")) as sim:
        answer = httpx.post(
            f"{sim.base_url('gemini')}/models/gemini-3.1-flash-lite:generateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            timeout=10,
        )
    assert answer.status_code == 404
    assert answer.json()["error"]["status"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("version", "status"),
    [("2026-10-21", 400), ("2023-06-01", 200)],
)
def test_anthropic_2026_10_21_refuses_sampling_parameters(
    sim: Simulator, version: str, status: int
) -> None:
    answer = httpx.post(
        f"{sim.base_url('anthropic')}/messages",
        headers={"anthropic-version": version, "x-api-key": "sim"},
        json={
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "temperature": 1.0,
            "messages": HI,
        },
        timeout=10,
    )
    assert answer.status_code == status
    if status == 400:
        assert answer.json() == {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "temperature: Extra inputs are not permitted",
            },
        }


@pytest.mark.parametrize(
    ("model", "body", "message"),
    [
        (
            "claude-opus-5-5",
            {"tool_choice": {"type": "any"}, "tools": [{"name": "f", "input_schema": {}}]},
            'tool_choice: type "tool" and "any" are not supported for this model.',
        ),
        (
            "claude-opus-5-5",
            {"thinking": {"type": "disabled"}},
            '"thinking.type.disabled" is not supported for model claude-opus-5-5; thinking '
            "cannot be switched off on it.",
        ),
    ],
)
def test_the_new_claude_models_refuse_what_their_pages_say(
    sim: Simulator, model: str, body: dict[str, object], message: str
) -> None:
    answer = httpx.post(
        f"{sim.base_url('anthropic')}/messages",
        headers={"anthropic-version": "2026-10-21", "x-api-key": "sim"},
        json={"model": model, "max_tokens": 64, "messages": HI, **body},
        timeout=10,
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == message


@pytest.mark.anyio
async def test_the_current_lineup_answers_every_tier_without_a_400(sim: Simulator) -> None:
    lineup = [
        ("openai", "gpt-6.2-astra"),
        ("openai", "gpt-6-luna"),
        ("openai-responses", "gpt-6.1-sol"),
        ("anthropic", "claude-fable-5-2"),
        ("anthropic", "claude-sonnet-5-5"),
        ("anthropic", "claude-haiku-5-5"),
        ("gemini", "gemini-4-argon"),
        ("gemini", "gemini-3.5-flash-lite"),
        ("xai", "grok-4.5"),
        ("minimax", "MiniMax-M3.1-Flash"),
        ("qwen", "qwen3.8-max"),
    ]
    sim.stats.reset()
    async with httpx.AsyncClient() as http:
        for provider, model in lineup:
            source = _source(sim, provider, model)
            async with Client([source], http_client=http, capabilities_store=False) as client:
                for tier in ("none", "minimal", "low", "medium", "high", "xhigh", "max", "auto"):
                    response = await client.complete(HI, reasoning_effort=tier)
                    assert response.applied_effort is not None
    assert dict(sim.stats.by_status) == {200: len(lineup) * 8}
