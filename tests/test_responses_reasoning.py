"""The Responses reasoning fragment (``_responses_wire``) per model."""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Effort, ThinkingUnsupportedError
from polythink.reasoning.resolve import resolve


@pytest.mark.parametrize(
    ("model", "effort", "payload", "applied"),
    [
        ("gpt-5.5", "high", {"reasoning": {"effort": "high"}}, Effort.HIGH),
        ("gpt-5.5", "xhigh", {"reasoning": {"effort": "xhigh"}}, Effort.XHIGH),
        ("gpt-5.5", "none", {"reasoning": {"effort": "none"}}, Effort.NONE),
        # minimal is not accepted by gpt-5.5: nearest, ties to the cheaper side.
        ("gpt-5.5", "minimal", {"reasoning": {"effort": "low"}}, Effort.LOW),
        # o3-mini reasons by default, so "reason" needs no field.
        ("o3-mini", "auto", {}, Effort.AUTO),
        # gpt-5.1 does not reason by default: "reason" must name a strength.
        ("gpt-5.1", "auto", {"reasoning": {"effort": "medium"}}, Effort.MEDIUM),
        # Models that do not reason get no "reasoning" field (400 on gpt-4o).
        ("gpt-4o", "none", {}, Effort.NONE),
        ("some-unregistered-model", "auto", {}, Effort.AUTO),
    ],
)
def test_fragment_never_asks_for_a_summary(
    model: str, effort: str, payload: dict[str, Any], applied: Effort
) -> None:
    resolution = resolve(effort, provider="openai-responses", model=model)
    assert dict(resolution.payload) == payload
    assert resolution.applied_effort is applied


def test_none_on_a_model_that_cannot_switch_off_names_the_cheapest_tier() -> None:
    with pytest.raises(ThinkingUnsupportedError, match="cheapest tier is 'low'"):
        resolve("none", provider="openai-responses", model="o3-mini", policy="error")
    nearest = resolve("none", provider="openai-responses", model="o3-mini")
    assert dict(nearest.payload) == {"reasoning": {"effort": "low"}}


def test_openrouter_responses_uses_the_same_fragment() -> None:
    resolution = resolve("low", provider="openrouter-responses", model="openai/gpt-oss-20b")
    assert dict(resolution.payload) == {"reasoning": {"effort": "low"}}
