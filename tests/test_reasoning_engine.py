"""The capability registry, the OpenRouter loader, observation, reconciliation and warnings."""

from __future__ import annotations

import logging
import re
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Effort, Source, ThinkingObservation, ThinkingUnsupportedError
from polythink.middleware import reasoning as reasoning_layer
from polythink.reasoning import (
    Capability,
    WarningThrottle,
    all_capabilities,
    capabilities_from_openrouter,
    get_capability,
    normalise_model_name,
    observe,
    reconcile,
    register_capability,
    resolve,
)
from tests.conftest import REAL, shared_file

# ---------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("gpt-5.1", "gpt-5.1"),
        ("o3-mini", "o3-mini"),
        ("MiniMax-M3", "MiniMax-M3"),
        ("claude-sonnet-4", "claude-sonnet-4-0"),
        ("grok-4-0709", "grok-4"),
        ("gemini-3-pro", "gemini-3-pro-preview"),
        ("gemini-3.1-pro-preview", "gemini-3.1-pro"),
        ("mistral-small-2603", "mistral-small-latest"),
        ("openai/gpt-5.1", "gpt-5.1"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4", "claude-sonnet-4-0"),
        ("GPT-5.5", "gpt-5.5"),
        ("openai/gpt-oss-20b:free", "gpt-oss-20b"),
        ("qwen/qwen3-32b", "qwen3-32b"),
        ("deepseek/deepseek-v4-pro", "deepseek-v4-pro"),
    ],
)
def test_lookup_exact_alias_and_normalised(name: str, entry: str) -> None:
    cap = get_capability(name)
    assert cap is not None
    assert cap.model == entry


@pytest.mark.parametrize(
    "name", ["gpt-7", "claude-sonnet-9", "acme-codex-ultra", "", "openai/", "gemini-2.5"]
)
def test_lookup_of_unknown_names_is_none(name: str) -> None:
    assert get_capability(name) is None


def test_lookup_does_not_confuse_a_model_with_its_variants() -> None:
    assert get_capability("gpt-5.1-codex") is get_capability("gpt-5.1-codex")
    assert get_capability("gpt-5.1-codex").model == "gpt-5.1-codex"  # type: ignore[union-attr]
    assert get_capability("gpt-5-mini").model == "gpt-5-mini"  # type: ignore[union-attr]
    assert get_capability("glm-4.6v").model == "glm-4.6v"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("gpt-5-2025-08-07", "gpt-5"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        # OpenRouter: a catalog variant is an entry of its own, a routing variant is not
        # (openrouter.ai/docs/guides/routing/model-variants/overview.md, read 2026-12-04).
        ("openrouter/x/Model.V2:thinking", "model-v2:thinking"),
        ("openrouter/x/Model.V2:nitro", "model-v2"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("mistral-small-2506", "mistral-small-2506"),
        ("  o3  ", "o3"),
    ],
)
def test_normalise_model_name(raw: str, normal: str) -> None:
    assert normalise_model_name(raw) == normal


_DATED = re.compile(r"\b20\d\d(-\d\d){0,2}\b")
_RECORDING = re.compile(r"\b((?:pai|llmanthropic|llm|vercel)_[a-z0-9_]+)")


def test_every_shipped_entry_has_evidence_with_a_date_or_a_recording() -> None:
    missing = [
        c.model
        for c in all_capabilities()
        if not c.evidence.strip()
        or not (_DATED.search(c.evidence) or _RECORDING.search(c.evidence))
    ]
    assert missing == []
    assert all(
        c.evidence.split(":", 1)[0].split()[0]
        in {"documented", "measured", "inferred", "observed", "recorded"}
        for c in all_capabilities()
    )


def test_recordings_named_as_evidence_exist() -> None:
    manifest = shared_file(REAL / "MANIFEST.md").read_text(encoding="utf-8")
    named = {m for c in all_capabilities() for m in _RECORDING.findall(c.evidence)}
    assert named
    for name in sorted(named):
        assert f"#### {name}.yaml" in manifest or (REAL / f"{name}.yaml").exists(), name


def test_every_shipped_entry_is_consistent() -> None:
    for cap in all_capabilities():
        assert cap.provider is not None, cap.model
        if cap.default_effort is not None and cap.default_effort not in (Effort.NONE, Effort.AUTO):
            assert cap.default_effort in cap.supported_efforts, cap.model
        if cap.thinking in ("manual", "budget"):
            assert cap.budget_min is not None, cap.model


# ---------------------------------------------------------------- register_capability


def test_register_replaces_and_aliases_follow(isolated_registry: None) -> None:
    shipped = get_capability("gpt-5.5")
    assert shipped is not None
    mine = Capability(
        "gpt-5.5",
        ("none", "low", "high"),
        default_effort="low",
        provider="openai",
        evidence="measured 2026-10-01",
        aliases=("house-model",),
    )
    assert register_capability(mine) is mine
    assert get_capability("gpt-5.5") is mine
    assert get_capability("openai/gpt-5.5-2026-01-01") is mine
    assert get_capability("house-model") is mine
    assert resolve("medium", provider="openai", model="gpt-5.5").applied_effort is Effort.LOW

    again = Capability("gpt-5.5", ("none", "high"), provider="openai", aliases=("other",))
    register_capability(again)
    assert get_capability("house-model") is None
    assert get_capability("other") is again
    assert get_capability("gpt-5.5") is again
    assert [c.model for c in all_capabilities()].count("gpt-5.5") == 1


def test_register_a_new_model(isolated_registry: None) -> None:
    assert get_capability("acme/reasoner-2") is None
    cap = register_capability(
        Capability("reasoner-2", ("low", "high"), provider="vllm", evidence="measured 2026-10-02")
    )
    assert get_capability("acme/reasoner-2") is cap
    assert resolve("none", provider="vllm", model="reasoner-2").applied_effort is Effort.LOW
    with pytest.raises(ThinkingUnsupportedError):
        resolve("none", provider="vllm", model="reasoner-2", policy="error")


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"supported_efforts": ()}, "must list at least one tier"),
        ({"supported_efforts": ("low", "low")}, "duplicate tier"),
        ({"supported_efforts": ("ultra",)}, "unknown reasoning effort 'ultra'"),
        ({"supported_efforts": ("low",), "thinking": "magic"}, "unknown thinking style 'magic'"),
        ({"supported_efforts": ("low",), "budget_min": 10, "budget_max": 5}, "budget_min 10 > "),
    ],
)
def test_capability_validates_at_construction(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=re.escape(fragment)):
        Capability("bad-model", **kwargs)


def test_capability_orders_tiers_cheapest_first() -> None:
    cap = Capability("m", ("max", "none", "low", "auto"))
    assert cap.supported_efforts == (Effort.NONE, Effort.LOW, Effort.MAX, Effort.AUTO)
    assert cap.strengths == (Effort.LOW, Effort.MAX)
    assert (cap.can_disable, cap.reasons, cap.cheapest_effort) == (True, True, Effort.LOW)


# ---------------------------------------------------------------- OpenRouter /models

OPENROUTER_MODELS = {
    "data": [
        {"id": "openai/o1", "reasoning": {"supported_efforts": None, "default_effort": "medium"}},
        {
            "id": "google/gemini-3.5-flash",
            "reasoning": {
                "supported_efforts": ["high", "medium", "low", "minimal"],
                "default_effort": "medium",
                "default_enabled": True,
                "mandatory": True,
            },
        },
        {"id": "z-ai/glm-5.1", "reasoning": {"default_enabled": True}},
        {"id": "minimax/minimax-m2.7", "reasoning": {"mandatory": True}},
        {
            "id": "qwen/qwen3-hybrid",
            "reasoning": {"supported_efforts": ["high", "low", "none"], "default_effort": "none"},
        },
        {
            "id": "future/model",
            "reasoning": {"supported_efforts": ["ultra", "high"], "default_effort": "ultra"},
        },
        {"id": "openai/gpt-4o"},
        {"id": "openrouter/auto", "reasoning": None},
    ]
}


def test_capabilities_from_openrouter() -> None:
    caps = {c.model: c for c in capabilities_from_openrouter(OPENROUTER_MODELS)}
    assert list(caps) == [
        "openai/o1",
        "google/gemini-3.5-flash",
        "z-ai/glm-5.1",
        "minimax/minimax-m2.7",
        "qwen/qwen3-hybrid",
        "future/model",
    ]
    table = {
        name: (
            [e.value for e in c.supported_efforts],
            c.default_effort.value if c.default_effort else None,
        )
        for name, c in caps.items()
    }
    assert table == {
        "openai/o1": (["none", "minimal", "low", "medium", "high", "xhigh", "max"], "medium"),
        "google/gemini-3.5-flash": (["minimal", "low", "medium", "high"], "medium"),
        "z-ai/glm-5.1": (["none", "auto"], None),
        "minimax/minimax-m2.7": (["auto"], None),
        "qwen/qwen3-hybrid": (["none", "low", "high"], "none"),
        "future/model": (["none", "high"], None),
    }
    assert all(c.provider == "openrouter" for c in caps.values())
    assert all(c.evidence for c in caps.values())
    assert caps["qwen/qwen3-hybrid"].default_reasons is False


def test_capabilities_from_openrouter_accepts_a_bare_list_and_rejects_other_shapes() -> None:
    assert [c.model for c in capabilities_from_openrouter(OPENROUTER_MODELS["data"][:1])] == [
        "openai/o1"
    ]
    with pytest.raises(ValueError, match="'data' list"):
        capabilities_from_openrouter({"models": []})


def test_openrouter_capabilities_drive_resolution(isolated_registry: None) -> None:
    for cap in capabilities_from_openrouter(OPENROUTER_MODELS):
        register_capability(cap)
    with pytest.raises(ThinkingUnsupportedError, match="cheapest tier is 'minimal'"):
        resolve("none", provider="openrouter", model="google/gemini-3.5-flash", policy="error")
    mandatory = resolve("none", provider="openrouter", model="google/gemini-3.5-flash")
    assert mandatory.applied_effort is Effort.MINIMAL
    assert dict(mandatory.payload) == {"reasoning": {"effort": "minimal", "enabled": True}}
    xhigh = resolve("xhigh", provider="openrouter", model="google/gemini-3.5-flash")
    assert xhigh.applied_effort is Effort.HIGH
    assert dict(xhigh.payload) == {"reasoning": {"effort": "high", "enabled": True}}
    glm = resolve("high", provider="openrouter", model="z-ai/glm-5.1")
    assert dict(glm.payload) == {"reasoning": {"enabled": True}}
    off = resolve("none", provider="openrouter", model="z-ai/glm-5.1")
    assert dict(off.payload) == {"reasoning": {"enabled": False}}


# ---------------------------------------------------------------- observe / reconcile


@pytest.mark.parametrize(
    ("text", "tokens", "seen"),
    [
        ("thinking", None, ThinkingObservation.OBSERVED),
        ("thinking", 0, ThinkingObservation.OBSERVED),
        (None, 12, ThinkingObservation.OBSERVED),
        (None, 0, ThinkingObservation.ABSENT),
        ("", 0, ThinkingObservation.ABSENT),
        (" \n\t", 0, ThinkingObservation.ABSENT),
        (None, None, ThinkingObservation.UNKNOWN),
        ("", None, ThinkingObservation.UNKNOWN),
        (" \n", None, ThinkingObservation.UNKNOWN),
        (None, -1, ThinkingObservation.UNKNOWN),
    ],
)
def test_observe(text: str | None, tokens: int | None, seen: ThinkingObservation) -> None:
    assert observe(text, tokens) is seen


@pytest.mark.parametrize("seen", list(ThinkingObservation))
def test_reconcile_unset_never_warns(seen: ThinkingObservation) -> None:
    assert reconcile(None, seen, model="m") is None


@pytest.mark.parametrize(
    ("applied", "seen", "warns"),
    [
        (Effort.NONE, ThinkingObservation.OBSERVED, True),
        (Effort.NONE, ThinkingObservation.ABSENT, False),
        (Effort.NONE, ThinkingObservation.UNKNOWN, False),
        (Effort.HIGH, ThinkingObservation.ABSENT, True),
        (Effort.HIGH, ThinkingObservation.UNKNOWN, True),
        (Effort.HIGH, ThinkingObservation.OBSERVED, False),
        (Effort.AUTO, ThinkingObservation.ABSENT, True),
        (Effort.MINIMAL, ThinkingObservation.OBSERVED, False),
    ],
)
def test_reconcile(applied: Effort, seen: ThinkingObservation, warns: bool) -> None:
    note = reconcile(applied, seen, model="gpt-5.5")
    if not warns:
        assert note is None
        return
    assert note is not None
    assert "'gpt-5.5'" in note
    assert f"reasoning_effort={applied.value!r}" in note


def test_reconcile_unknown_is_softer_than_absent() -> None:
    absent = reconcile(Effort.HIGH, ThinkingObservation.ABSENT, model="m")
    unknown = reconcile(Effort.HIGH, ThinkingObservation.UNKNOWN, model="m")
    assert absent is not None
    assert unknown is not None
    assert "reported 0 reasoning tokens" in absent
    assert "could not confirm" in unknown
    assert "0 reasoning tokens" not in unknown


def test_throttle_logs_each_key_once_and_stays_bounded() -> None:
    throttle = WarningThrottle(limit=2)
    assert throttle.should_log("m", "high", "absent") is True
    assert throttle.should_log("m", "high", "absent") is False
    assert throttle.should_log("m", "low", "absent") is True
    assert throttle.should_log("m2", "high", "absent") is True
    assert throttle.should_log("m", "high", "absent") is True


# ---------------------------------------------------------------- warnings through the client

URL = "https://api.openai.com/v1/chat/completions"


def _answer(reasoning_tokens: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return {
        "id": "c",
        "model": "gpt-5.5",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": usage,
    }


@pytest.fixture
def fresh_throttle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reasoning_layer, "_throttle", WarningThrottle())


def _warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polythink.reasoning"]


@pytest.mark.anyio
async def test_reconciliation_warning_logged_once_but_on_every_response(
    fresh_throttle: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polythink.reasoning")
    source = Source("openai", "gpt-5.5", api_key="sk-warn-000000000000")
    responses = []
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=httpx.Response(200, json=_answer(0)))
        for _ in range(2):
            # A store of its own per client: four contradictions in one store would also list
            # the entry as suspect, which this test is not about.
            async with Client([source], capabilities_store=False) as client:
                for _ in range(2):
                    responses.append(
                        await client.complete(
                            [{"role": "user", "content": "hi"}], reasoning_effort="high"
                        )
                    )
            async with Client([source], capabilities_store=False) as client:
                responses.append(
                    await client.complete(
                        [{"role": "user", "content": "hi"}], reasoning_effort="low"
                    )
                )
    expected_high = (
        "model 'gpt-5.5' reported 0 reasoning tokens although reasoning_effort='high' was sent"
    )
    expected_low = (
        "model 'gpt-5.5' reported 0 reasoning tokens although reasoning_effort='low' was sent"
    )
    assert [r.warnings for r in responses] == [
        [expected_high],
        [expected_high],
        [expected_low],
        [expected_high],
        [expected_high],
        [expected_low],
    ]
    assert all(r.thinking is ThinkingObservation.ABSENT for r in responses)
    assert _warnings_logged(caplog) == [expected_high, expected_low]


@pytest.mark.anyio
async def test_nearest_mapping_warning_logged_once_per_model_and_tier(
    fresh_throttle: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polythink.reasoning")
    source = Source("openai", "gpt-5.1", api_key="sk-warn-000000000000")
    mapped = (
        "model 'gpt-5.1' does not accept reasoning_effort='minimal' (accepted: none, low, "
        "medium, high); applied 'low' by effort_fallback='nearest'"
    )
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=_answer(7)))
        for _ in range(3):
            async with Client([source]) as client:
                response = await client.complete(
                    [{"role": "user", "content": "hi"}], reasoning_effort="minimal"
                )
            assert response.warnings == [mapped]
            assert response.applied_effort is Effort.LOW
            assert response.requested_effort is Effort.MINIMAL
    assert [c.request.content.count(b'"reasoning_effort":"low"') for c in route.calls] == [1, 1, 1]
    assert _warnings_logged(caplog) == [mapped]


@pytest.mark.anyio
async def test_unregistered_model_warns_once_and_still_sends_the_tier(
    fresh_throttle: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polythink.reasoning")
    source = Source("openai", "gpt-9-preview", api_key="sk-warn-000000000000")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=_answer(4)))
        async with Client([source]) as client:
            for _ in range(2):
                response = await client.complete(
                    [{"role": "user", "content": "hi"}], reasoning_effort="xhigh"
                )
                assert len(response.warnings) == 1
                assert "'gpt-9-preview' is not in the capability registry" in response.warnings[0]
    assert all(b'"reasoning_effort":"xhigh"' in c.request.content for c in route.calls)
    assert len(_warnings_logged(caplog)) == 1
