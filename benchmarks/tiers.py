"""The tier chart of a run (``--chart PATH``): reasoning tokens and cost per applied tier.

The models the run called (its workloads) are each asked every tier of the vocabulary once,
through ``polythink.Client`` on the run's simulator, after the measurements; the responses
are drawn by :func:`polythink.dashboard.write_chart`, the chart ``polythink demo --chart``
writes. The simulator is first set back to the settings every job starts from
(:data:`benchmarks.simproc.DEFAULT_SETTINGS`). A tier a model refuses
(``ThinkingUnsupportedError``) is listed as refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx

from benchmarks.simproc import DEFAULT_SETTINGS
from polythink import Client, Effort, Response, Source
from polythink.dashboard import write_chart
from polythink.errors import ThinkingUnsupportedError
from polythink.types import EFFORT_ORDER

__all__ = ["TIERS", "tier_chart"]

TIERS: tuple[Effort, ...] = (*EFFORT_ORDER, Effort.AUTO)
"""The tiers each model is asked, cheapest first, then ``auto``."""

_PROMPT = [{"role": "user", "content": "Why is the sky blue? Answer in one sentence."}]


async def _ask(root: str, models: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """(requested tier, response or the refusal) for every model and tier."""
    answers: list[tuple[str, Any]] = []
    async with httpx.AsyncClient(timeout=30.0) as http:
        # The settings every job starts from (the last job may have changed them).
        reset = await http.post(f"{root}/_bench/settings", json=DEFAULT_SETTINGS)
        reset.raise_for_status()
        for provider, model in models:
            source = Source(provider, model, api_key="sim", base_url=f"{root}/{provider}/v1")
            async with Client([source], http_client=http) as client:
                for tier in TIERS:
                    try:
                        answer: Any = await client.complete(_PROMPT, reasoning_effort=tier)
                    except ThinkingUnsupportedError as exc:
                        answer = exc
                    answers.append((tier.value, answer))
    return answers


def tier_chart(root: str, models: Sequence[tuple[str, str]], path: Path) -> dict[str, Any]:
    """Ask each (provider, model) every tier, write the chart to ``path``, return the calls.

    Args:
        root: the simulator's URL root (``http://127.0.0.1:PORT``).
        models: (polythink provider id, model) pairs, in the order the run called them.
        path: the PNG to write.

    Returns:
        ``{"path", "calls": [{"provider", "model", "requested", "applied",
        "reasoning_tokens", "input_tokens", "output_tokens", "cost_usd"}], "refused":
        [{"provider", "model", "requested"}]}``; token counts in tokens, cost in US dollars
        (``None`` when the model has no price).
    """
    answers = anyio.run(_ask, root, list(models))
    responses: list[Response] = [a for _, a in answers if isinstance(a, Response)]
    write_chart(path, responses)
    calls = []
    refused = []
    for (requested, answer), (provider, model) in zip(
        answers, [m for m in models for _ in TIERS], strict=True
    ):
        if not isinstance(answer, Response):
            refused.append({"provider": provider, "model": model, "requested": requested})
            continue
        usage = answer.usage
        calls.append(
            {
                "provider": provider,
                "model": model,
                "requested": requested,
                "applied": answer.applied_effort.value if answer.applied_effort else None,
                "reasoning_tokens": usage.reasoning_tokens if usage else None,
                "input_tokens": usage.input_tokens if usage else None,
                "output_tokens": usage.output_tokens if usage else None,
                "cost_usd": answer.cost.total if answer.cost else None,
            }
        )
    return {"path": str(path), "calls": calls, "refused": refused}
