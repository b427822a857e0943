# ruff: noqa: E501
"""Every registered model x every tier x every policy, against a table written out by hand.

The expected outcomes are data derived from DESIGN §3 and the ``resolve`` docstrings, using each
model's ``supported_efforts`` and ``default_effort`` from ``capabilities.toml``:

- ``none``: applied when the model lists it; on a model that cannot switch reasoning off,
  ``nearest`` applies its cheapest tier, ``drop`` sends ``auto`` and ``error`` raises naming the
  cheapest tier.
- a listed tier passes unchanged; ``auto`` passes on every model that reasons.
- an unlisted strength: ``nearest`` takes the nearest listed strength by position (never
  ``none``, ties to the cheaper side; an on/off model gets ``auto``); ``error`` raises listing
  the accepted tiers; ``drop`` sends ``auto``.
- a model that does not reason (``supported_efforts = ["none"]``) fails every tier but ``none``.
- where the wire cannot say "on" without a strength (top-level ``reasoning_effort`` on a tiered
  model whose default does not reason; Anthropic manual budgets), ``auto`` is sent as the
  model's default strength, else its middle strength (the cheaper of two middles).
- fragments per wire as documented in ``resolve``: Anthropic adaptive asks for
  ``display: summarized`` where the model omits thinking text by default; Gemini 2.5 ``auto``
  sends a dynamic budget (-1) only where the model would not think on its own; manual budgets
  shrink near the model's output ceiling to keep the caller's answer room.

Notation: one tuple per model, ``(nearest, error, drop)``; each string lists the applied tier
for the requested tiers ``none minimal low medium high xhigh max auto`` in that order; ``!`` is
a :class:`ThinkingUnsupportedError`. ``max_tokens`` is unset throughout the table.
"""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Effort, ThinkingUnsupportedError, resolve
from polythink.reasoning import (
    TIER_BUDGET_TOKENS,
    Capability,
    all_capabilities,
    get_capability,
    settle_tier,
)

TIERS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "auto")
POLICIES = ("nearest", "error", "drop")

# fmt: off
TABLE: dict[str, tuple[str, str, str]] = {
    "gpt-5":                         ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gpt-5-mini":                    ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gpt-5-nano":                    ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gpt-5-pro":                     ("high high high high high high high auto", "! ! ! ! high ! ! auto", "auto auto auto auto high auto auto auto"),
    "gpt-5-codex":                   ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gpt-5.1":                       ("none low low medium high high high medium", "none ! low medium high ! ! medium", "none medium low medium high medium medium medium"),
    "gpt-5.1-codex":                 ("low low low medium high high high medium", "! ! low medium high ! ! medium", "medium medium low medium high medium medium medium"),
    "gpt-5.1-codex-mini":            ("low low low medium high high high medium", "! ! low medium high ! ! medium", "medium medium low medium high medium medium medium"),
    "gpt-5.1-codex-max":             ("low low low medium high xhigh xhigh medium", "! ! low medium high xhigh ! medium", "medium medium low medium high xhigh medium medium"),
    "gpt-5.3-codex":                 ("low low low medium high xhigh xhigh medium", "! ! low medium high xhigh ! medium", "medium medium low medium high xhigh medium medium"),
    "gpt-5.2":                       ("none low low medium high xhigh xhigh medium", "none ! low medium high xhigh ! medium", "none medium low medium high xhigh medium medium"),
    "gpt-5.2-pro":                   ("medium medium medium medium high xhigh xhigh high", "! ! ! medium high xhigh ! high", "high high high medium high xhigh high high"),
    "gpt-5.1-chat-latest":           ("medium medium medium medium medium medium medium auto", "! ! ! medium ! ! ! auto", "auto auto auto medium auto auto auto auto"),
    "gpt-5.2-chat-latest":           ("medium medium medium medium medium medium medium auto", "! ! ! medium ! ! ! auto", "auto auto auto medium auto auto auto auto"),
    "gpt-5.4":                       ("none low low medium high xhigh xhigh auto", "none ! low medium high xhigh ! auto", "none auto low medium high xhigh auto auto"),
    "gpt-5.4-mini":                  ("none low low medium high xhigh xhigh auto", "none ! low medium high xhigh ! auto", "none auto low medium high xhigh auto auto"),
    "gpt-5.4-nano":                  ("none low low medium high xhigh xhigh auto", "none ! low medium high xhigh ! auto", "none auto low medium high xhigh auto auto"),
    "gpt-5.5":                       ("none low low medium high xhigh xhigh auto", "none ! low medium high xhigh ! auto", "none auto low medium high xhigh auto auto"),
    "gpt-5.5-pro":                   ("medium medium medium medium high xhigh xhigh auto", "! ! ! medium high xhigh ! auto", "auto auto auto medium high xhigh auto auto"),
    "gpt-5.6-sol":                   ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-5.6-terra":                 ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-5.6-luna":                  ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-6-luna":                    ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-6-sol":                     ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-6-astra":                   ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "gpt-6-astra-pro":               ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "gpt-6.1-sol":                   ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "gpt-6.1-terra":                 ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "gpt-6.2-astra":                 ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "gpt-6.2-sol":                   ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "o1":                            ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "o1-pro":                        ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "o3":                            ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "o3-mini":                       ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "o3-pro":                        ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "o4-mini":                       ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gpt-oss-120b":                  ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gpt-oss-20b":                   ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gpt-4o":                        ("none ! ! ! ! ! ! !",) * 3,
    "gpt-4o-2024-05-13":             ("none ! ! ! ! ! ! !",) * 3,
    "gpt-4o-mini":                   ("none ! ! ! ! ! ! !",) * 3,
    "gpt-4.1":                       ("none ! ! ! ! ! ! !",) * 3,
    "claude-3-7-sonnet":             ("none minimal low medium high xhigh max medium",) * 3,
    "claude-sonnet-4-0":             ("none minimal low medium high xhigh max medium",) * 3,
    "claude-opus-4-0":               ("none minimal low medium high xhigh max medium",) * 3,
    "claude-opus-4-1":               ("none minimal low medium high xhigh max medium",) * 3,
    "claude-sonnet-4-5":             ("none minimal low medium high xhigh max medium",) * 3,
    "claude-haiku-4-5":              ("none minimal low medium high xhigh max medium",) * 3,
    "claude-opus-4-5":               ("none minimal low medium high xhigh max medium",) * 3,
    "claude-opus-4-6":               ("none low low medium high high max auto", "none ! low medium high ! max auto", "none auto low medium high auto max auto"),
    "claude-sonnet-4-6":             ("none low low medium high high max auto", "none ! low medium high ! max auto", "none auto low medium high auto max auto"),
    "claude-opus-4-7":               ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "claude-opus-4-8":               ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "claude-opus-5":                 ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "claude-sonnet-5":               ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "claude-sonnet-5-5":             ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-opus-5-5":               ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-haiku-5-5":              ("none low low medium high xhigh max auto", "none ! low medium high xhigh max auto", "none auto low medium high xhigh max auto"),
    "claude-fable-5-1":              ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-mythos-5-1":             ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-fable-5-2":              ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-mythos-5-2":             ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-fable-5":                ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-mythos-5":               ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "claude-mythos-preview":         ("low low low medium high high max auto", "! ! low medium high ! max auto", "auto auto low medium high auto max auto"),
    "gemini-2.5-pro":                ("minimal minimal low medium high xhigh max auto", "! minimal low medium high xhigh max auto", "auto minimal low medium high xhigh max auto"),
    "gemini-2.5-flash":              ("none minimal low medium high xhigh max auto",) * 3,
    "gemini-2.5-flash-lite":         ("none minimal low medium high xhigh max auto",) * 3,
    "gemini-3-pro-preview":          ("low low low low high high high auto", "! ! low ! high ! ! auto", "auto auto low auto high auto auto auto"),
    "gemini-3-flash":                ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gemini-3.1-pro":                ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gemini-3.1-flash-lite":         ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gemini-3.5-flash":              ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gemini-3.5-flash-lite":         ("minimal minimal low medium high high high auto", "! minimal low medium high ! ! auto", "auto minimal low medium high auto auto auto"),
    "gemini-3.8-flash":              ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gemini-3.7-flash":              ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gemini-4-argon":                ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "gemini-4-neon":                 ("low low low medium high xhigh xhigh auto", "! ! low medium high xhigh ! auto", "auto auto low medium high xhigh auto auto"),
    "gemini-4-hydrogen":             ("low low low medium high xhigh xhigh auto", "! ! low medium high xhigh ! auto", "auto auto low medium high xhigh auto auto"),
    "deepseek-v4-pro":               ("none low low low high high max auto", "none ! low ! high ! max auto", "none auto low auto high auto max auto"),
    "deepseek-v4-flash":             ("none low low low high high max auto", "none ! low ! high ! max auto", "none auto low auto high auto max auto"),
    "deepseek-reasoner":             ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "qwen3.7-plus":                  ("none minimal low medium high xhigh max auto",) * 3,
    "qwen3.8-max":                   ("none low low medium medium xhigh xhigh auto", "none ! low medium ! xhigh ! auto", "none auto low medium auto xhigh auto auto"),
    "qwen3.7-max":                   ("none minimal low medium high xhigh max auto",) * 3,
    "qwen3.6-plus":                  ("none minimal low medium high xhigh max auto",) * 3,
    "qwen3.5-flash":                 ("none minimal low medium high xhigh max auto",) * 3,
    "qwen-plus-latest":              ("none minimal low medium high xhigh max auto",) * 3,
    "qwq-plus":                      ("minimal minimal low medium high xhigh max auto", "! minimal low medium high xhigh max auto", "auto minimal low medium high xhigh max auto"),
    "glm-5.3":                       ("low low low low high high max auto", "! ! low ! high ! max auto", "auto auto low auto high auto max auto"),
    "glm-5.3-flash":                 ("low low low low high high max auto", "! ! low ! high ! max auto", "auto auto low auto high auto max auto"),
    "glm-5.2":                       ("none high high high high high max auto", "none ! ! ! high ! max auto", "none auto auto auto high auto max auto"),
    "glm-5.1":                       ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "glm-5":                         ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "glm-4.7":                       ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "glm-4.6":                       ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "glm-4.6v":                      ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "kimi-k3":                       ("none low low low high high max auto", "none ! low ! high ! max auto", "none auto low auto high auto max auto"),
    "kimi-k3.1-pro":                 ("low low low low high high max auto", "! ! low ! high ! max auto", "auto auto low auto high auto max auto"),
    "kimi-for-coding":               ("none low low low high high max auto", "none ! low ! high ! max auto", "none auto low auto high auto max auto"),
    "kimi-k2.5":                     ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "kimi-k2.6":                     ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "kimi-k2-thinking":              ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "kimi-k2.7-code":                ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "MiniMax-M3":                    ("none minimal low medium high xhigh max medium",) * 3,
    "MiniMax-M3.1-Flash":            ("low low low medium high xhigh max auto", "! ! low medium high xhigh max auto", "auto auto low medium high xhigh max auto"),
    "MiniMax-M2.7":                  ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "MiniMax-M2.5":                  ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "grok-3-mini":                   ("low low low low high high high low", "! ! low ! high ! ! low", "low low low low high low low low"),
    "grok-4.3":                      ("none low low medium high high high medium", "none ! low medium high ! ! medium", "none medium low medium high medium medium medium"),
    "grok-4.5":                      ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "grok-4.6":                      ("low low low medium high xhigh xhigh auto", "! ! low medium high xhigh ! auto", "auto auto low medium high xhigh auto auto"),
    "grok-4.20-reasoning":           ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "grok-4.20-non-reasoning":       ("none ! ! ! ! ! ! !",) * 3,
    "grok-4":                        ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "grok-4-fast-reasoning":         ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "grok-3":                        ("none ! ! ! ! ! ! !",) * 3,
    "mistral-small-latest":          ("none high high high high high high high", "none ! ! ! high ! ! high", "none high high high high high high high"),
    "mistral-medium-3-5":            ("none high high high high high high high", "none ! ! ! high ! ! high", "none high high high high high high high"),
    "magistral-medium-latest":       ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
    "qwen3-32b":                     ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "qwen3.6-27b":                   ("none auto auto auto auto auto auto auto", "none ! ! ! ! ! ! auto", "none auto auto auto auto auto auto auto"),
    "gpt-oss-safeguard-20b":         ("low low low medium high high high auto", "! ! low medium high ! ! auto", "auto auto low medium high auto auto auto"),
    "deepseek-r1-distill-llama-70b": ("auto auto auto auto auto auto auto auto", "! ! ! ! ! ! ! auto", "auto auto auto auto auto auto auto auto"),
}
# fmt: on

# Reasoning budgets in tokens per strength (minimal low medium high xhigh max), after clamping
# to each model's range: the tier table is 1024 2048 8192 16384 24576 32768; Gemini 2.5 Flash
# and Flash-Lite stop at 24576 (GEM-DOC-thinking); on Claude Opus 4.0/4.1 (32000 output
# tokens) ``max`` shrinks to 32000 - 4096 so the default 4096-token answer room stays whole.
STRENGTHS = ("minimal", "low", "medium", "high", "xhigh", "max")
_TABLE_BUDGETS = (1024, 2048, 8192, 16384, 24576, 32768)
_CAP_24576 = (1024, 2048, 8192, 16384, 24576, 24576)
_CAP_27904 = (1024, 2048, 8192, 16384, 24576, 27904)
BUDGETS: dict[str, tuple[int, ...]] = {
    "claude-3-7-sonnet": _TABLE_BUDGETS,
    "claude-sonnet-4-0": _TABLE_BUDGETS,
    "claude-opus-4-0": _CAP_27904,
    "claude-opus-4-1": _CAP_27904,
    "claude-sonnet-4-5": _TABLE_BUDGETS,
    "claude-haiku-4-5": _TABLE_BUDGETS,
    "claude-opus-4-5": _TABLE_BUDGETS,
    "gemini-2.5-pro": _TABLE_BUDGETS,
    "gemini-2.5-flash": _CAP_24576,
    "gemini-2.5-flash-lite": _CAP_24576,
    "qwen3.7-plus": _TABLE_BUDGETS,
    "qwen3.7-max": _TABLE_BUDGETS,
    "qwen3.6-plus": _TABLE_BUDGETS,
    "qwen3.5-flash": _TABLE_BUDGETS,
    "qwen-plus-latest": _TABLE_BUDGETS,
    "qwq-plus": _TABLE_BUDGETS,
}
# Where the model's maximum output made a tier's budget smaller (reported as a warning).
SQUEEZED = {("claude-opus-4-0", "max"), ("claude-opus-4-1", "max")}
# Anthropic manual thinking raises the 4096-token default ceiling by the budget, capped at the
# model's max output (64000, or 32000 for Opus 4.0/4.1).
ANTHROPIC_CEILINGS: dict[str, tuple[int, ...]] = {
    name: tuple(
        min(4096 + b, 32000 if "opus-4-0" in name or "opus-4-1" in name else 64000)
        for b in BUDGETS[name]
    )
    for name in BUDGETS
    if name.startswith("claude")
}

# Models whose own default reasons, where "none" must be sent explicitly on the Anthropic and
# Gemini wires (elsewhere omitting thinking is how it is switched off), and where Gemini's
# ``auto`` needs no dynamic budget (-1) because the model already thinks dynamically.
DEFAULT_REASONS = {
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5-5",
    "gemini-2.5-pro",
    "gemini-2.5-flash",
}
# Anthropic models that omit thinking text unless ``display: summarized`` is asked (WIRE §3.1).
OMITTED_DISPLAY = {
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-sonnet-5-5",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-fable-5-2",
    "claude-mythos-5-2",
}
NOT_REASONING = {
    "gpt-4o",
    "gpt-4o-2024-05-13",
    "gpt-4o-mini",
    "gpt-4.1",
    "grok-3",
    "grok-4.20-non-reasoning",
}
# Qwen models that take a strength as reasoning_effort, not as a budget (DEVTO-QWEN38).
QWEN_EFFORT = {"qwen3.8-max"}


def fragment(model: str, provider: str, thinking: str | None, applied: str) -> dict[str, Any]:
    """The body fragment per wire for an applied tier (the per-wire fragment table)."""
    strength = applied not in ("none", "auto")
    if provider in ("openai", "minimax", "xai", "mistral", "groq"):
        if applied == "auto" or (applied == "none" and model in NOT_REASONING):
            return {}
        return {"reasoning_effort": applied}
    if provider in ("deepseek", "glm", "kimi"):
        if applied == "none":
            return {"thinking": {"type": "disabled"}}
        if applied == "auto":
            return {"thinking": {"type": "enabled"}}
        return {"thinking": {"type": "enabled"}, "reasoning_effort": applied}
    if provider == "qwen":
        if not strength:
            return {"enable_thinking": applied == "auto"}
        if model in QWEN_EFFORT:
            return {"enable_thinking": True, "reasoning_effort": applied}
        budget = BUDGETS[model][STRENGTHS.index(applied)]
        return {"enable_thinking": True, "thinking_budget": budget}
    if provider == "anthropic":
        if applied == "none":
            return {"thinking": {"type": "disabled"}} if model in DEFAULT_REASONS else {}
        if thinking == "manual":
            i = STRENGTHS.index(applied)
            return {
                "thinking": {"type": "enabled", "budget_tokens": BUDGETS[model][i]},
                "max_tokens": ANTHROPIC_CEILINGS[model][i],
            }
        adaptive = {"type": "adaptive"}
        if model in OMITTED_DISPLAY:
            adaptive["display"] = "summarized"
        if applied == "auto":
            return {"thinking": adaptive}
        return {"thinking": adaptive, "output_config": {"effort": applied}}
    assert provider == "gemini"
    if applied == "none":
        if model not in DEFAULT_REASONS:
            return {}
        return {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}}
    if thinking == "budget":
        if applied == "auto" and model in DEFAULT_REASONS:
            config: dict[str, Any] = {"includeThoughts": True}
        elif applied == "auto":
            config = {"thinkingBudget": -1, "includeThoughts": True}
        else:
            budget = BUDGETS[model][STRENGTHS.index(applied)]
            config = {"thinkingBudget": budget, "includeThoughts": True}
    elif applied == "auto":
        config = {"includeThoughts": True}
    else:
        config = {"thinkingLevel": applied, "includeThoughts": True}
    return {"generationConfig": {"thinkingConfig": config}}


def test_table_covers_every_registered_model() -> None:
    assert sorted(TABLE) == sorted(c.model for c in all_capabilities())


def _cases() -> list[tuple[str, str, str, str]]:
    return [
        (model, policy, tier, row.split()[TIERS.index(tier)])
        for model, rows in TABLE.items()
        for policy, row in zip(POLICIES, rows, strict=True)
        for tier in TIERS
    ]


def _cheapest(model: str) -> str:
    # minimal is the cheapest strength, so its nearest tier is the model's cheapest that reasons
    return TABLE[model][0].split()[TIERS.index("minimal")]


@pytest.mark.parametrize(("model", "policy", "tier", "expected"), _cases())
def test_resolution(model: str, policy: str, tier: str, expected: str) -> None:
    cap = get_capability(model)
    assert cap is not None
    assert cap.provider is not None
    if expected == "!":
        with pytest.raises(ThinkingUnsupportedError) as info:
            resolve(tier, provider=cap.provider, model=model, policy=policy)
        message = str(info.value)
        assert repr(model) in message
        assert info.value.error_type == "reasoning_unsupported"
        if model in NOT_REASONING:
            assert "does not reason" in message
        elif tier == "none":
            assert policy == "error"
            assert "cannot switch reasoning off" in message
            assert f"cheapest tier is {_cheapest(model)!r}" in message
        else:
            assert policy == "error"
            accepted = ", ".join(e.value for e in cap.supported_efforts)
            assert accepted in message
        return
    result = resolve(tier, provider=cap.provider, model=model, policy=policy)
    assert result.requested_effort == Effort(tier)
    assert result.applied_effort == Effort(expected)
    assert dict(result.payload) == fragment(model, cap.provider, cap.thinking, expected)
    budgeted = model in BUDGETS and expected in STRENGTHS
    assert result.budget_tokens == (BUDGETS[model][STRENGTHS.index(expected)] if budgeted else None)
    mapping_notes = [w for w in result.warnings if "thinking budget for model" not in w]
    assert bool(mapping_notes) == (expected != tier)
    # A budget the model's maximum output made smaller than the tier's is reported; the
    # tiers of the budget table are the ones written out in BUDGETS above.
    squeezed = [w for w in result.warnings if "thinking budget for model" in w]
    assert bool(squeezed) == ((model, expected) in SQUEEZED)


def test_unset_injects_nothing_on_every_model() -> None:
    for cap in all_capabilities():
        assert cap.provider is not None
        result = resolve(None, provider=cap.provider, model=cap.model, policy="error")
        assert (result.requested_effort, result.applied_effort) == (None, None)
        assert dict(result.payload) == {}
        assert result.warnings == ()


# ---------------------------------------------------------------- seed scenarios


def test_low_high_max_model_asked_medium_gets_low_under_nearest() -> None:
    result = resolve("medium", provider="glm", model="glm-5.3")
    assert result.applied_effort is Effort.LOW
    assert dict(result.payload) == {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}
    assert result.warnings == (
        "model 'glm-5.3' does not accept reasoning_effort='medium' (accepted: low, high, max); "
        "applied 'low' by effort_fallback='nearest'",
    )


def test_ties_go_to_the_cheaper_side_for_any_registered_shape() -> None:
    cap = Capability("tie-model", ("minimal", "medium", "max"), provider="openai")
    assert settle_tier(Effort.LOW, cap) is Effort.MINIMAL
    assert settle_tier(Effort.HIGH, cap) is Effort.MEDIUM
    assert settle_tier(Effort.XHIGH, cap) is Effort.MAX


@pytest.mark.parametrize(
    ("model", "provider", "cheapest", "fragment", "dropped"),
    [
        (
            "glm-5.3",
            "glm",
            "low",
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
            "auto",
        ),
        ("gpt-5", "openai", "minimal", {"reasoning_effort": "minimal"}, "auto"),
        # No declared default: "on" without a strength is its middle strength on this wire.
        ("gpt-5.2-pro", "openai", "medium", {"reasoning_effort": "medium"}, "high"),
        (
            "claude-sonnet-5-5",
            "anthropic",
            "low",
            {
                "thinking": {"type": "adaptive", "display": "summarized"},
                "output_config": {"effort": "low"},
            },
            "auto",
        ),
        ("glm-5", "glm", "auto", {"thinking": {"type": "enabled"}}, "auto"),
    ],
)
def test_none_on_a_model_that_cannot_switch_off_is_never_sent_as_a_switch_off(
    model: str, provider: str, cheapest: str, fragment: dict[str, Any], dropped: str
) -> None:
    # nearest: the cheapest tier, with a warning saying the model always reasons.
    result = resolve("none", provider=provider, model=model, policy="nearest")
    assert (result.requested_effort, result.applied_effort) == (Effort.NONE, Effort(cheapest))
    assert dict(result.payload) == fragment
    assert result.warnings == (
        f"model {model!r} cannot switch reasoning off (accepted: "
        f"{', '.join(e.value for e in get_capability(model).supported_efforts)}), so "  # type: ignore[union-attr]
        f"reasoning_effort='none' was not sent; applied {cheapest!r}, its cheapest tier, by "
        "effort_fallback='nearest' ('error' refuses instead)",
    )
    # drop: "on" without a strength.
    assert resolve("none", provider=provider, model=model, policy="drop").applied_effort is (
        Effort(dropped)
    )
    # error: refused before anything is sent, naming the cheapest tier.
    with pytest.raises(ThinkingUnsupportedError) as info:
        resolve("none", provider=provider, model=model, policy="error")
    assert f"its cheapest tier is {cheapest!r}: ask for reasoning_effort={cheapest!r}" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("model", "provider", "payload"),
    [
        ("o3-mini", "openai", {}),
        ("gpt-5.4", "openai", {}),
        ("deepseek-reasoner", "deepseek", {"thinking": {"type": "enabled"}}),
        ("claude-opus-4-6", "anthropic", {"thinking": {"type": "adaptive"}}),
        (
            "claude-opus-4-7",
            "anthropic",
            {"thinking": {"type": "adaptive", "display": "summarized"}},
        ),
        (
            "gemini-3-pro-preview",
            "gemini",
            {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}},
        ),
        ("kimi-k2.5", "kimi", {"thinking": {"type": "enabled"}}),
        ("qwen3.5-flash", "qwen", {"enable_thinking": True}),
    ],
)
def test_auto_passes_on_reasoning_models_under_every_policy(
    model: str, provider: str, payload: dict[str, Any]
) -> None:
    for policy in POLICIES:
        result = resolve("auto", provider=provider, model=model, policy=policy)
        assert result.applied_effort is Effort.AUTO
        assert dict(result.payload) == payload
        assert result.warnings == ()


# ---------------------------------------------------------------- budgets


def test_budget_table() -> None:
    assert {e.value: n for e, n in TIER_BUDGET_TOKENS.items()} == dict(
        zip(STRENGTHS, _TABLE_BUDGETS, strict=True)
    )


@pytest.mark.parametrize(
    ("model", "tier", "budget"),
    [
        ("gemini-2.5-pro", "minimal", 1024),
        ("gemini-2.5-pro", "max", 32768),
        ("gemini-2.5-flash", "max", 24576),
        ("gemini-2.5-flash-lite", "xhigh", 24576),
    ],
)
def test_budgets_clamp_to_the_model_range(model: str, tier: str, budget: int) -> None:
    result = resolve(tier, provider="gemini", model=model, max_tokens=1000)
    assert result.budget_tokens == budget
    assert dict(result.payload) == {
        "generationConfig": {
            "thinkingConfig": {"thinkingBudget": budget, "includeThoughts": True},
            "maxOutputTokens": 1000 + budget,
        }
    }


def test_budget_below_the_model_minimum_is_raised_to_it() -> None:
    cap = Capability(
        "wide-floor",
        ("none", "low", "high"),
        provider="gemini",
        thinking="budget",
        budget_min=4000,
        budget_max=10000,
    )
    low = resolve("low", provider="gemini", model="wide-floor", capability=cap)
    high = resolve("high", provider="gemini", model="wide-floor", capability=cap)
    assert (low.budget_tokens, high.budget_tokens) == (4000, 10000)


@pytest.mark.parametrize(
    ("max_tokens", "tier", "budget", "ceiling"),
    [
        (1000, "minimal", 1024, 2024),
        (1000, "high", 16384, 17384),
        (100, "low", 2048, 2148),
        # near the 64000-token ceiling the answer keeps the caller's room up to half of it
        # and the budget at least the other half
        (50000, "high", 16384, 64000),
        (60000, "xhigh", 24576, 64000),
        (64000, "max", 32000, 64000),
    ],
)
def test_anthropic_manual_budget_and_raised_ceiling(
    max_tokens: int, tier: str, budget: int, ceiling: int
) -> None:
    result = resolve(tier, provider="anthropic", model="claude-sonnet-4-5", max_tokens=max_tokens)
    assert dict(result.payload) == {
        "thinking": {"type": "enabled", "budget_tokens": budget},
        "max_tokens": ceiling,
    }
    assert 1024 <= budget < ceiling <= 64000


def test_anthropic_budget_never_below_1024_even_when_the_model_allows_less() -> None:
    cap = Capability(
        "claude-tiny",
        ("none", "minimal", "low"),
        provider="anthropic",
        thinking="manual",
        budget_min=1,
        max_output_tokens=8000,
    )
    result = resolve("minimal", provider="anthropic", model="claude-tiny", capability=cap)
    assert result.budget_tokens == 1024


def test_anthropic_budget_stays_below_a_small_max_output() -> None:
    cap = Capability(
        "claude-small-out",
        ("none", "max"),
        provider="anthropic",
        thinking="manual",
        budget_min=1024,
        max_output_tokens=8192,
    )
    result = resolve(
        "max", provider="anthropic", model="claude-small-out", capability=cap, max_tokens=2000
    )
    assert dict(result.payload) == {
        "thinking": {"type": "enabled", "budget_tokens": 6192},
        "max_tokens": 8192,
    }


@pytest.mark.parametrize(
    ("max_tokens", "tier", "ceiling"),
    [(4000, "medium", 12192), (60000, "high", 65536), (None, "high", None)],
)
def test_gemini_and_qwen_raise_the_ceiling_only_when_one_is_given(
    max_tokens: int | None, tier: str, ceiling: int | None
) -> None:
    gem = resolve(tier, provider="gemini", model="gemini-2.5-pro", max_tokens=max_tokens)
    generation = dict(gem.payload["generationConfig"])
    assert generation.get("maxOutputTokens") == ceiling
    qwen = resolve(tier, provider="qwen", model="qwen3.7-plus", max_tokens=max_tokens)
    budget = TIER_BUDGET_TOKENS[Effort(tier)]
    expected_qwen: dict[str, Any] = {"enable_thinking": True, "thinking_budget": budget}
    if max_tokens is not None:
        expected_qwen["max_tokens"] = max_tokens + budget
    assert dict(qwen.payload) == expected_qwen


# ---------------------------------------------------------------- the other wires


@pytest.mark.parametrize(
    ("tier", "payload"),
    [
        ("none", {"reasoning": {"enabled": False}}),
        ("auto", {"reasoning": {"enabled": True}}),
        ("high", {"reasoning": {"effort": "high", "enabled": True}}),
        ("minimal", {"reasoning": {"effort": "minimal", "enabled": True}}),
    ],
)
def test_openrouter_wire(tier: str, payload: dict[str, Any]) -> None:
    result = resolve(tier, provider="openrouter", model="anthropic/claude-sonnet-4.5")
    assert dict(result.payload) == payload


@pytest.mark.parametrize(
    ("model", "tier", "applied", "payload"),
    [
        ("gpt-5.5", "none", "none", {"reasoning": {"effort": "none"}}),
        ("gpt-5.5", "xhigh", "xhigh", {"reasoning": {"effort": "xhigh"}}),
        ("gpt-5.5", "auto", "auto", {}),
        ("gpt-5.1", "auto", "medium", {"reasoning": {"effort": "medium"}}),
        ("gpt-5.1", "minimal", "low", {"reasoning": {"effort": "low"}}),
        ("gpt-4o", "none", "none", {}),
    ],
)
def test_responses_wire(model: str, tier: str, applied: str, payload: dict[str, Any]) -> None:
    result = resolve(tier, provider="openai-responses", model=model)
    assert result.applied_effort == Effort(applied)
    assert dict(result.payload) == payload


@pytest.mark.parametrize(
    ("tier", "payload"),
    [
        ("none", {"chat_template_kwargs": {"enable_thinking": False}}),
        ("auto", {"chat_template_kwargs": {"enable_thinking": True}}),
        ("high", {"chat_template_kwargs": {"enable_thinking": True}, "reasoning_effort": "high"}),
    ],
)
def test_vllm_wire_for_an_unregistered_model(tier: str, payload: dict[str, Any]) -> None:
    result = resolve(tier, provider="vllm", model="acme/local-model-7b")
    assert result.applied_effort == Effort(tier)
    assert dict(result.payload) == payload
    assert len(result.warnings) == 1
    assert "'acme/local-model-7b' is not in the capability registry" in result.warnings[0]
