"""Decisions about reasoning effort: capabilities, resolution, observation. No I/O."""

from polythink.reasoning.capabilities import (
    all_capabilities,
    capabilities_from_openrouter,
    get_capability,
    normalise_model_name,
    openrouter_without_reasoning,
    register_capability,
)
from polythink.reasoning.capability import Capability
from polythink.reasoning.continuity import Reading, same_model, thinking_reading
from polythink.reasoning.ids import ModelId, base_model_id, lookup_keys, parse_model_id
from polythink.reasoning.learn import (
    GENERIC_LEVELS,
    ReasoningRejection,
    default_level,
    learned_capability,
    parse_reasoning_rejection,
    reasoning_levels,
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
    "GENERIC_LEVELS",
    "POLICIES",
    "TIER_BUDGET_TOKENS",
    "Capability",
    "EffortPolicy",
    "ModelId",
    "Reading",
    "ReasoningRejection",
    "WarningThrottle",
    "all_capabilities",
    "base_model_id",
    "budget_for",
    "capabilities_from_openrouter",
    "default_level",
    "get_capability",
    "learned_capability",
    "lookup_keys",
    "normalise_model_name",
    "observe",
    "openrouter_without_reasoning",
    "parse_model_id",
    "parse_reasoning_rejection",
    "reasoning_levels",
    "reconcile",
    "register_capability",
    "resolve",
    "same_model",
    "settle_tier",
    "thinking_reading",
]
