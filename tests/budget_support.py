"""Helpers for the budget tests: prices computed straight from genai-prices, a recording
backend, and a fresh process-wide budget store per test."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import genai_prices

from polythink.backends.base import Reservation, Tally
from polythink.backends.local import LocalBudgets
from polythink.budgets import Line

PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]
PROMPT_TOKENS = math.ceil(len(PROMPT[0]["content"]) / 4) + 3
"""The rate limiter's prompt estimate: 1 token per 4 characters, 3 per message."""


def nano(amount: Decimal) -> int:
    """US dollars (the table's exact figure) in nano-dollars, rounded up."""
    return math.ceil(amount * 1_000_000_000)


def table_price(model: str, provider: str, **usage: int | None) -> Decimal:
    """The genai-prices total for a usage (``None`` counts are left out)."""
    counts = {k: v for k, v in usage.items() if v is not None}
    found = genai_prices.calc_price(genai_prices.Usage(**counts), model, provider_id=provider)
    total: Decimal = found.total_price
    return total


def charge(record: dict[str, Any]) -> int:
    """What an answered gpt-5.5 call cost in nano-dollars, from the genai-prices table:
    ``record`` holds its ``model`` and its ``input_tokens``, ``output_tokens`` and
    ``cache_read_tokens`` as the response reported them."""
    return nano(
        table_price(
            record["model"],
            "openai",
            input_tokens=record["input_tokens"],
            output_tokens=record["output_tokens"],
            cache_read_tokens=record["cache_read_tokens"],
        )
    )


class Clock:
    """A wall clock the test moves by hand (Unix seconds)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Recording:
    """A budget backend that records what the layer asks of a :class:`LocalBudgets`."""

    def __init__(self, inner: LocalBudgets | None = None) -> None:
        self.inner = inner if inner is not None else LocalBudgets()
        self.reserved: list[tuple[list[str], int, bool]] = []
        self.settled: list[tuple[list[str], int]] = []

    async def reserve(self, lines: Sequence[Line], cost: int) -> Reservation:
        found = await self.inner.reserve(lines, cost)
        self.reserved.append(([line.key for line in lines], cost, found.taken))
        return found

    async def settle(
        self, lines: Sequence[Line], reservation: Reservation, delta: int
    ) -> list[int | None]:
        self.settled.append(([line.key for line in lines], delta))
        return await self.inner.settle(lines, reservation, delta)

    async def peek(self, lines: Sequence[Line]) -> list[Tally]:
        return await self.inner.peek(lines)

    async def spent(self, key: str, per: str = "day") -> int:
        (tally,) = await self.inner.peek([Line(key, 1, per)])
        return tally.spent


def fresh_budgets(monkeypatch: Any, inner: LocalBudgets | None = None) -> Recording:
    """Make every client of the test count in a new recording store (not the process's)."""
    recording = Recording(inner)
    monkeypatch.setattr("polythink.client.process_budgets", lambda: recording)
    return recording
