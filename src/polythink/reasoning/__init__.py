"""Decisions about reasoning effort: capabilities, resolution, observation. No I/O."""

from polythink.reasoning.capabilities import (
    Capability,
    all_capabilities,
    capabilities_from_openrouter,
    get_capability,
    normalise_model_name,
    register_capability,
)
from polythink.reasoning.observe import WarningThrottle, observe, reconcile
from polythink.reasoning.resolve import (
    ANTHROPIC_MIN_BUDGET,
    POLICIES,
    TIER_BUDGET_TOKENS,
    EffortPolicy,
    budget_for,
    resolve,
    settle_tier,
)

__all__ = [
    "ANTHROPIC_MIN_BUDGET",
    "POLICIES",
    "TIER_BUDGET_TOKENS",
    "Capability",
    "EffortPolicy",
    "WarningThrottle",
    "all_capabilities",
    "budget_for",
    "capabilities_from_openrouter",
    "get_capability",
    "normalise_model_name",
    "observe",
    "reconcile",
    "register_capability",
    "resolve",
    "settle_tier",
]
