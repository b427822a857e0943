"""Family rules guess the restrictive way: each tier a family lists is documented by most of its
current members, ``none`` only when most of them can switch reasoning off.

A family's members are the registry entries its pattern matches (``families.toml``), less those
retired by the review date. The tiers and their sources are in each family's ``evidence``; this
test keeps the data honest when an entry or a family changes.
"""

from __future__ import annotations

import pytest

from polythink.reasoning import all_capabilities, get_capability, resolve
from polythink.reasoning.families import Family, all_families, family_of
from polythink.reasoning.ids import lookup_keys
from polythink.reasoning.lifecycle import status
from polythink.types import Effort

REVIEWED = "2026-12-04"


def _members(family: Family) -> list[str]:
    found = []
    for cap in all_capabilities():
        if status(cap, REVIEWED) == "retired":
            continue
        if family_of(cap.model) is family and any(
            family.pattern.search(key) for key in lookup_keys(None, cap.model)[:1]
        ):
            found.append(cap.model)
    return found


@pytest.mark.parametrize("family", all_families(), ids=lambda f: f.name)
def test_a_family_lists_only_what_most_of_its_members_take(family: Family) -> None:
    members = [get_capability(name) for name in _members(family)]
    tiers = family.capability("probe").supported_efforts
    for tier in tiers:
        if tier is Effort.AUTO or not members:
            continue
        takers = sum(1 for cap in members if cap is not None and tier in cap.supported_efforts)
        assert takers * 2 > len(members), (
            f"{family.name} lists {tier.value}, taken by {takers} of {len(members)}: "
            f"{[cap.model for cap in members if cap is not None]}"
        )


@pytest.mark.parametrize("family", all_families(), ids=lambda f: f.name)
def test_every_family_names_its_sources_and_review_date(family: Family) -> None:
    assert family.evidence.strip()
    assert family.fields.get("checked", "") >= "2026-10-05"


# The issue's cases (issue 28 item 2), each against the family's documented members.
@pytest.mark.parametrize(
    ("provider", "model", "asked", "applied"),
    [
        # GPT-6's members mostly reject none: a new GPT-6 id is sent its cheapest tier.
        ("openai", "gpt-6.3-nova", "none", "low"),
        ("openai", "gpt-6.1-luna", "none", "low"),
        # Kimi K3's members cannot switch thinking off.
        ("kimi", "kimi-k3.2-pro", "none", "low"),
        # -pro models at OpenAI take neither none nor minimal.
        ("openai", "gpt-6.2-sol-pro", "minimal", "medium"),
        ("openai", "gpt-6.2-sol-pro", "none", "medium"),
        # Mistral's 2026 models take none and high only.
        ("mistral", "mistral-medium-2604", "low", "high"),
        ("mistral", "mistral-medium-2604", "none", "none"),
        # Gemini 3.7/3.8 Flash dropped MINIMAL.
        ("gemini", "gemini-3.9-flash", "minimal", "low"),
    ],
)
def test_issue_cases_guess_the_restrictive_way(
    provider: str, model: str, asked: str, applied: str
) -> None:
    result = resolve(asked, provider=provider, model=model)
    assert result.applied_effort is Effort(applied)


@pytest.mark.parametrize(
    "model", ["grok-4.20", "grok-4.20-0309-reasoning", "grok-4.20-beta-0309-reasoning"]
)
def test_grok_4_20_variants_are_sent_no_reasoning_effort(model: str) -> None:
    # xAI answers reasoning_effort on grok-4.20-0309-* with 400 "does not support parameter
    # reasoningEffort" (WIRE §6.5).
    result = resolve("high", provider="xai", model=model)
    assert dict(result.payload) == {}
    assert result.applied_effort is Effort.AUTO
