"""Every current reasoning model of ../shared/wire/CURRENT.md §2, every tier: the applied tier
and the exact fragment sent, written from CURRENT.md (read 2026-12-01) and WIRE.md, not read
back from the registry.

Each row gives, for the requested tiers ``none minimal low medium high xhigh max auto`` under
the default ``nearest`` policy, the applied tier, worked out by hand from the model's accepted
tiers as CURRENT.md lists them (the nearest accepted tier by position, never ``none``, ties to
the cheaper side; ``none`` on a model that cannot switch reasoning off -> its cheapest tier;
``auto`` -> ``auto`` where the model reasons by default, else its default or middle tier on
wires that cannot say "on" without a strength). The fragments follow each wire's documented
shape (``fragment`` below). Where CURRENT.md marks a fact UNVERIFIED or two sources conflict, the
comment on the row says which was chosen.
"""

from __future__ import annotations

from typing import Any

import pytest

from polythink import Effort, resolve
from polythink.reasoning import get_capability

TIERS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "auto")

# model: (provider, applied tiers, how "none" and "auto" go out, thinking display)
#   none-kind: "effort" = reasoning_effort none; "omit" = nothing (thinking off by default);
#              "disabled" = thinking.type disabled; "enable" = enable_thinking false;
#              "-" = the model cannot switch off (the row shows its cheapest tier instead)
LINEUP: dict[str, tuple[str, str, str]] = {
    # ---- OpenAI (CUR §2.1): 6.2 and 6.1 Sol drop none and minimal; default medium.
    "gpt-6.2-astra": ("openai", "low low low medium high xhigh max auto", "-"),
    "gpt-6.2-sol": ("openai", "low low low medium high xhigh max auto", "-"),
    # gpt-6-astra: the docs say no none (OXEN-ASTRA, COMFY); one measurement says it takes it.
    "gpt-6-astra": ("openai", "low low low medium high xhigh max auto", "-"),
    # gpt-6-astra-pro: tiers UNVERIFIED; taken as gpt-6-astra.
    "gpt-6-astra-pro": ("openai", "low low low medium high xhigh max auto", "-"),
    "gpt-6.1-sol": ("openai", "low low low medium high xhigh max auto", "-"),
    "gpt-6.1-terra": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-6-sol": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-6-luna": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-5.6-sol": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-5.6-terra": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-5.6-luna": ("openai", "none low low medium high xhigh max auto", "effort"),
    "gpt-5.5": ("openai", "none low low medium high xhigh xhigh auto", "effort"),
    "gpt-5.5-pro": ("openai", "medium medium medium medium high xhigh xhigh auto", "-"),
    "gpt-5.4": ("openai", "none low low medium high xhigh xhigh auto", "effort"),
    # gpt-5.3-codex: no default stated, so "auto" names the middle strength.
    "gpt-5.3-codex": ("openai", "low low low medium high xhigh xhigh medium", "-"),
    # ---- Anthropic (CUR §2.2): adaptive + output_config.effort, low..max.
    "claude-fable-5-2": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-mythos-5-2": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-fable-5-1": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-mythos-5-1": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-opus-5-5": ("anthropic", "low low low medium high xhigh max auto", "-"),
    # Sonnet 5.5: disabled is a 400; between_tools is not used for none (see resolve).
    "claude-sonnet-5-5": ("anthropic", "low low low medium high xhigh max auto", "-"),
    # Haiku 5.5: on by default; switching off per 3rd parties only (UNVERIFIED), kept.
    "claude-haiku-5-5": ("anthropic", "none low low medium high xhigh max auto", "disabled"),
    "claude-opus-5": ("anthropic", "none low low medium high xhigh max auto", "disabled"),
    "claude-sonnet-5": ("anthropic", "none low low medium high xhigh max auto", "disabled"),
    "claude-fable-5": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-mythos-5": ("anthropic", "low low low medium high xhigh max auto", "-"),
    "claude-opus-4-8": ("anthropic", "none low low medium high xhigh max auto", "omit"),
    "claude-opus-4-7": ("anthropic", "none low low medium high xhigh max auto", "omit"),
    "claude-opus-4-6": ("anthropic", "none low low medium high high max auto", "omit"),
    "claude-sonnet-4-6": ("anthropic", "none low low medium high high max auto", "omit"),
    # Haiku 4.5: manual budgets, no effort; "auto" is the middle budget tier.
    "claude-haiku-4-5": ("anthropic", "none minimal low medium high xhigh max medium", "omit"),
    # ---- Gemini (CUR §2.3): thinkingLevel; none cannot be switched off.
    "gemini-4-argon": ("gemini", "low low low medium high high high auto", "-"),
    # Neon and Hydrogen: LOW MEDIUM HIGH XHIGH (Google's guides, read 2026-12-04).
    "gemini-4-neon": ("gemini", "low low low medium high xhigh xhigh auto", "-"),
    "gemini-4-hydrogen": ("gemini", "low low low medium high xhigh xhigh auto", "-"),
    "gemini-3.8-flash": ("gemini", "low low low medium high high high auto", "-"),
    "gemini-3.7-flash": ("gemini", "low low low medium high high high auto", "-"),
    "gemini-3.5-flash-lite": ("gemini", "minimal minimal low medium high high high auto", "-"),
    "gemini-3.5-flash": ("gemini", "minimal minimal low medium high high high auto", "-"),
    "gemini-3.1-pro-preview": ("gemini", "low low low medium high high high auto", "-"),
    "gemini-3.1-flash-lite": ("gemini", "minimal minimal low medium high high high auto", "-"),
    # Levels UNVERIFIED: their family's rules (Gemini 4, Gemini 3).
    "gemini-4-carbon": ("gemini", "low low low medium high high high auto", "-"),
    # Gemini 3 Flash family: MINIMAL left out since 3.7 and 3.8 Flash dropped it.
    "gemini-3.6-flash": ("gemini", "low low low medium high high high auto", "-"),
    # ---- OpenAI-compatible providers (CUR §2.4)
    "grok-4.5": ("xai", "low low low medium high high high auto", "-"),
    # grok-4.3: none|low|medium|high, no default stated.
    "grok-4.3": ("xai", "none low low medium high high high medium", "effort"),
    # grok-4.6: levels UNVERIFIED; as grok-4.5 plus xhigh (GROK2API).
    "grok-4.6": ("xai", "low low low medium high xhigh xhigh auto", "-"),
    # DeepSeek V4: low|high|max (DS-DOC; ARIKUSI lists high|max), switchable.
    "deepseek-v4-pro": ("deepseek", "none low low low high high max auto", "disabled"),
    "deepseek-v4-flash": ("deepseek", "none low low low high high max auto", "disabled"),
    "qwen3.8-max": ("qwen", "none low low medium medium xhigh xhigh auto", "enable"),
    "glm-5.3": ("glm", "low low low low high high max auto", "-"),
    # kimi-k3: 3rd parties say it always thinks (AGENTSCOPE-KIMI); a measurement (2026-09-05)
    # saw thinking disabled switch it off, and is kept.
    "kimi-k3": ("kimi", "none low low low high high max auto", "disabled"),
    "MiniMax-M3.1-Flash": ("minimax", "low low low medium high xhigh max auto", "-"),
    # Mistral Medium 3.5 / Small 4: high|none; "auto" names high, the one strength.
    "mistral-medium-3-5": ("mistral", "none high high high high high high high", "effort"),
    "mistral-small-latest": ("mistral", "none high high high high high high high", "effort"),
    "gpt-oss-120b": ("groq", "low low low medium high high high auto", "-"),
}

# Anthropic models that omit thinking text unless asked (4.7 and later, CUR §1.6).
SHOWS_THINKING = {"claude-opus-4-6", "claude-sonnet-4-6", "claude-haiku-4-5"}
# Claude Haiku 4.5 manual budgets (DESIGN §3 tier table: minimal 1024 .. max 32768) and the
# ceiling raised from the 4096 default by the budget, within its 64K output (CUR §2.2).
BUDGETS = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 24576,
    "max": 32768,
}
EFFORT_WIRE = {"openai", "xai", "minimax", "mistral", "groq"}


def fragment(model: str, provider: str, applied: str, none_kind: str) -> dict[str, Any]:
    """What each wire sends for an applied tier (WIRE.md §0-§6, CURRENT.md §1.6, §2)."""
    strength = applied not in ("none", "auto")
    if provider in EFFORT_WIRE:
        if applied == "auto":
            return {}
        return {"reasoning_effort": applied}
    if provider in ("deepseek", "glm", "kimi"):
        if applied == "none":
            return {"thinking": {"type": "disabled"}}
        if applied == "auto":
            return {"thinking": {"type": "enabled"}}
        return {"thinking": {"type": "enabled"}, "reasoning_effort": applied}
    if provider == "qwen":
        if applied == "none":
            return {"enable_thinking": False}
        if applied == "auto":
            return {"enable_thinking": True}
        return {"enable_thinking": True, "reasoning_effort": applied}
    if provider == "anthropic":
        if applied == "none":
            return {"thinking": {"type": "disabled"}} if none_kind == "disabled" else {}
        if model == "claude-haiku-4-5":
            budget = BUDGETS[applied]
            return {
                "thinking": {"type": "enabled", "budget_tokens": budget},
                "max_tokens": 4096 + budget,
            }
        thinking: dict[str, Any] = {"type": "adaptive"}
        if model not in SHOWS_THINKING:
            thinking["display"] = "summarized"
        if applied == "auto":
            return {"thinking": thinking}
        return {"thinking": thinking, "output_config": {"effort": applied}}
    assert provider == "gemini"
    config: dict[str, Any] = {"includeThoughts": True}
    if strength:
        config = {"thinkingLevel": applied, "includeThoughts": True}
    return {"generationConfig": {"thinkingConfig": config}}


def _cases() -> list[tuple[str, str, str, str, str]]:
    return [
        (model, provider, tier, applied, none_kind)
        for model, (provider, row, none_kind) in LINEUP.items()
        for tier, applied in zip(TIERS, row.split(), strict=True)
    ]


@pytest.mark.parametrize(("model", "provider", "tier", "applied", "none_kind"), _cases())
def test_every_current_model_gets_what_it_accepts(
    model: str, provider: str, tier: str, applied: str, none_kind: str
) -> None:
    result = resolve(tier, provider=provider, model=model)
    assert (result.requested_effort, result.applied_effort) == (Effort(tier), Effort(applied))
    assert dict(result.payload) == fragment(model, provider, applied, none_kind)
    # Every change from what was asked is said; "none" is never sent to a model that cannot
    # switch off (it would be a 400).
    assert bool(result.warnings) == (applied != tier)
    if none_kind == "-":
        assert result.payload.get("reasoning_effort") != "none"
        assert result.payload.get("thinking") != {"type": "disabled"}
        assert result.payload.get("enable_thinking") is not False


def test_the_table_covers_the_lineup_and_no_retired_model() -> None:
    for model in LINEUP:
        cap = get_capability(model)
        assert cap is not None, model
        assert cap.shutdown is None or cap.shutdown > "2026-12-01", model


# ---------------------------------------------------------------- family rules


@pytest.mark.parametrize(
    ("model", "provider", "family"),
    [
        ("claude-fable-5-3", "anthropic", "Claude Fable/Mythos 5.1+"),
        ("claude-opus-5-7", "anthropic", "Claude Opus 5.1+"),
        ("gpt-6.3-nova", "openai", "GPT-6"),
        ("gpt-6.2-luna", "openai", "GPT-6.2"),
        ("gemini-4-carbon", "gemini", "Gemini 4"),
        ("google/gemini-3.9-flash", "gemini", "Gemini 3"),
        ("gemini-2.5-computer-use-preview-10-2025", "gemini", "Gemini 2.5"),
    ],
)
def test_a_new_id_of_a_known_family_resolves_by_its_familys_rules(
    model: str, provider: str, family: str
) -> None:
    result = resolve("high", provider=provider, model=model)
    assert result.applied_effort is Effort.HIGH
    assert result.warnings == ()  # not "inject as asked": no unregistered-model warning
    cap = get_capability(model)
    assert cap is not None
    assert cap.evidence.startswith(f"inferred from family {family}: ")


def test_a_new_fable_always_thinks_and_refuses_forced_tools() -> None:
    # Fable/Mythos 5.1 and later: always on, tool_choice any/tool rejected (CUR §1.6, §2.2).
    result = resolve("none", provider="anthropic", model="claude-fable-5-3")
    assert result.applied_effort is Effort.LOW
    assert dict(result.payload) == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "low"},
    }
    cap = get_capability("claude-fable-5-3")
    assert cap is not None
    assert (cap.forced_tool_choice, cap.sampling) == (False, "never")


@pytest.mark.parametrize("model", ["gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash-live-001"])
def test_an_unlisted_gemini_2_5_id_takes_thinking_budget_never_thinking_level(model: str) -> None:
    # Gemini 2.5 answers thinkingLevel with 400 "Thinking level is not supported for this
    # model" (issue seen with unlisted ids); its knob is thinkingBudget, 0 switches Flash off.
    config = resolve("low", provider="gemini", model=model).payload["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 2048, "includeThoughts": True}
    off = resolve("none", provider="gemini", model=model).payload["generationConfig"]
    assert off["thinkingConfig"] == {"thinkingBudget": 0}
    for tier in TIERS:
        payload = resolve(tier, provider="gemini", model=model).payload
        assert "thinkingLevel" not in str(payload)


@pytest.mark.parametrize("model", ["gemini-4-hydrogen", "gemini-3.9-flash", "gemini-flash-latest"])
def test_an_unlisted_gemini_3_or_4_id_takes_thinking_level_never_thinking_budget(
    model: str,
) -> None:
    low = resolve("low", provider="gemini", model=model).payload["generationConfig"]
    assert low["thinkingConfig"] == {"thinkingLevel": "low", "includeThoughts": True}
    for tier in TIERS:
        payload = resolve(tier, provider="gemini", model=model).payload
        assert "thinkingBudget" not in str(payload), tier


def test_gemini_4_never_gets_minimal() -> None:
    # Gemini 4 Neon rejects MINIMAL (DEVTO-NEON); its family maps it to LOW.
    result = resolve("minimal", provider="gemini", model="gemini-4-hydrogen")
    assert result.applied_effort is Effort.LOW
    assert result.payload == {
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True}}
    }


def test_a_rejection_still_heals_a_family_guess() -> None:
    # The family guesses low..max for a new GPT-6.1 model (what most GPT-6 models take); if the
    # provider refuses one of those tiers, the learner records the model's own list.
    from polythink.reasoning import learned_capability, parse_reasoning_rejection

    cap = get_capability("gpt-6.1-nova")
    assert cap is not None
    assert not cap.can_disable
    rejection = parse_reasoning_rejection(
        400,
        {
            "error": {
                "message": "Unsupported value: 'xhigh' is not supported with the 'gpt-6.1-nova' "
                "model. Supported values are: 'low', 'medium', and 'high'.",
                "param": "reasoning_effort",
                "code": "unsupported_value",
            }
        },
    )
    assert rejection is not None
    healed = learned_capability(
        cap,
        rejection,
        model="gpt-6.1-nova",
        provider="openai",
        wire="effort",
        sent=Effort.XHIGH,
        evidence="observed 2026-12-04 on openai",
    )
    assert healed is not None
    assert healed.supported_efforts == (Effort.LOW, Effort.MEDIUM, Effort.HIGH)
    assert resolve("none", provider="openai", model="x", capability=healed).applied_effort is (
        Effort.LOW
    )
