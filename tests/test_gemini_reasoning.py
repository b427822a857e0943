"""The Gemini reasoning fragment (``_gemini_wire``): budgets for 2.5, levels for 3.x."""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Effort, ThinkingUnsupportedError
from polythink.reasoning.resolve import resolve


@pytest.mark.parametrize(
    ("model", "effort", "config", "applied"),
    [
        # 2.5 Pro and Flash think dynamically by default: "reason" only asks for the thoughts.
        ("gemini-2.5-pro", "auto", {"includeThoughts": True}, Effort.AUTO),
        ("gemini-2.5-flash", "auto", {"includeThoughts": True}, Effort.AUTO),
        # Flash-Lite does not think unless asked: dynamic budget.
        (
            "gemini-2.5-flash-lite",
            "auto",
            {"thinkingBudget": -1, "includeThoughts": True},
            Effort.AUTO,
        ),
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}, Effort.NONE),
        ("gemini-2.5-flash", "low", {"thinkingBudget": 2048, "includeThoughts": True}, Effort.LOW),
        # Clamped to each model's range: Flash tops out at 24576, Pro at 32768.
        ("gemini-2.5-flash", "max", {"thinkingBudget": 24576, "includeThoughts": True}, Effort.MAX),
        ("gemini-2.5-pro", "max", {"thinkingBudget": 32768, "includeThoughts": True}, Effort.MAX),
        (
            "gemini-3-pro-preview",
            "low",
            {"thinkingLevel": "low", "includeThoughts": True},
            Effort.LOW,
        ),
        ("gemini-3-pro-preview", "auto", {"includeThoughts": True}, Effort.AUTO),
        # Gemini 3 Pro takes low or high only: medium maps to the cheaper neighbour.
        (
            "gemini-3-pro-preview",
            "medium",
            {"thinkingLevel": "low", "includeThoughts": True},
            Effort.LOW,
        ),
        (
            "gemini-3-flash",
            "minimal",
            {"thinkingLevel": "minimal", "includeThoughts": True},
            Effort.MINIMAL,
        ),
        # Unregistered level model: the wire has no tier above high.
        ("gemini-9-ultra", "max", {"thinkingLevel": "high", "includeThoughts": True}, Effort.HIGH),
    ],
)
def test_thinking_config(model: str, effort: str, config: dict[str, Any], applied: Effort) -> None:
    resolution = resolve(effort, provider="gemini", model=model)
    assert dict(resolution.payload) == {"generationConfig": {"thinkingConfig": config}}
    assert resolution.applied_effort is applied
    assert not {"thinkingBudget", "thinkingLevel"} <= set(config)


def test_flash_lite_none_sends_nothing_because_it_does_not_think_by_default() -> None:
    resolution = resolve("none", provider="gemini", model="gemini-2.5-flash-lite")
    assert dict(resolution.payload) == {}
    assert resolution.applied_effort is Effort.NONE


@pytest.mark.parametrize("model", ["gemini-2.5-pro", "gemini-3-pro-preview"])
def test_models_that_cannot_switch_off_refuse_none(model: str) -> None:
    with pytest.raises(ThinkingUnsupportedError, match="cannot switch reasoning off"):
        resolve("none", provider="gemini", model=model, policy="error")
    # nearest: never a thinkingBudget of 0 they reject, their cheapest tier instead.
    config = resolve("none", provider="gemini", model=model).payload["generationConfig"]
    assert "thinkingBudget" not in config["thinkingConfig"] or (
        config["thinkingConfig"]["thinkingBudget"] > 0
    )


def test_budget_raises_max_output_tokens_within_the_model_maximum() -> None:
    resolution = resolve("high", provider="gemini", model="gemini-2.5-pro", max_tokens=60000)
    assert dict(resolution.payload) == {
        "generationConfig": {
            "thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": True},
            "maxOutputTokens": 65536,
        }
    }
    assert resolution.budget_tokens == 16384
