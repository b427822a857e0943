"""The configuration-wide ``[thinking]`` "off" on models that cannot switch reasoning off.

``[thinking] enabled = false`` (or ``effort = "none"``) speaks for every source at once. A
source whose model always reasons takes the model's default tier instead (declared
``default_effort``, else the middle strength), with exactly one warning per configuration
read; a ``none`` on the source itself or on the call still raises.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import respx

import polythink.config
from polythink import (
    Capability,
    Client,
    Effort,
    Source,
    ThinkingUnsupportedError,
    get_capability,
)
from polythink.config import sources_from_env, sources_from_toml, thinking_default_for

ALWAYS_ON = Capability(
    model="clamp-test-always-on",
    supported_efforts=("low", "medium", "high", "xhigh"),
    provider="openai",
    evidence="test entry: reasons on every call, no declared default",
)


@pytest.fixture(autouse=True)
def _always_on_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make one model without a declared default visible to the config's lookup only."""

    def lookup(model: str, provider: str | None = None) -> Capability | None:
        return ALWAYS_ON if model == ALWAYS_ON.model else get_capability(model, provider)

    monkeypatch.setattr(polythink.config, "get_capability", lookup)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "polythink.config"]


def test_default_tier_is_the_declared_default_else_the_middle_strength() -> None:
    assert thinking_default_for(Effort.NONE, "glm-5.3") is Effort.MAX  # declared default
    assert thinking_default_for(Effort.NONE, "gemini-3-pro-preview") is Effort.HIGH
    # low, medium, high, xhigh: the cheaper of the two middles.
    assert thinking_default_for(Effort.NONE, "clamp-test-always-on") is Effort.MEDIUM
    # Models that can switch off, unregistered models and other defaults are unchanged.
    assert thinking_default_for(Effort.NONE, "gpt-5.5") is Effort.NONE
    assert thinking_default_for(Effort.NONE, "not-a-registered-model") is Effort.NONE
    assert thinking_default_for(Effort.LOW, "glm-5.3") is Effort.LOW
    assert thinking_default_for(None, "glm-5.3") is None


def test_env_off_clamps_always_on_sources_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    environ = {
        "APP__THINKING__ENABLED": "false",
        "APP__OPENAI__0__MODEL": "gpt-5.5",
        "APP__GLM__1__MODEL": "glm-5.3",
        "APP__OPENAI__2__MODEL": "clamp-test-always-on",
        "APP__GEMINI__3__MODEL": "gemini-3-pro-preview",
        "APP__GEMINI__3__REASONING_EFFORT": "low",
    }
    with caplog.at_level(logging.WARNING, logger="polythink.config"):
        sources = sources_from_env("APP", environ)
    assert [s.effort for s in sources] == [Effort.NONE, Effort.MAX, Effort.MEDIUM, Effort.LOW]
    assert _warnings(caplog) == [
        "APP__THINKING says thinking off, but these models cannot switch reasoning off and "
        "use their default tier instead: APP__GLM__1 (glm-5.3: max), APP__OPENAI__2 "
        "(clamp-test-always-on: medium) (set reasoning_effort on a source to choose)"
    ]


def test_toml_effort_none_clamps_and_the_client_builds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "polythink.toml"
    path.write_text(
        '[thinking]\neffort = "none"\n\n'
        '[[source]]\nprovider = "gemini"\nmodel = "gemini-3-pro-preview"\napi_key = "g-key"\n\n'
        '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "sk-test"\n',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING, logger="polythink.config"):
        client = Client.from_toml(path)
    assert [s.effort for s in client.sources] == [Effort.HIGH, Effort.NONE]
    assert len(_warnings(caplog)) == 1
    assert "[thinking] says thinking off" in _warnings(caplog)[0]
    assert "gemini-3-pro-preview: high" in _warnings(caplog)[0]


def test_no_warning_when_nothing_is_clamped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {"APP__THINKING__ENABLED": "false", "APP__OPENAI__0__MODEL": "gpt-5.5"}
    with caplog.at_level(logging.WARNING, logger="polythink.config"):
        assert [s.effort for s in sources_from_env("APP", environ)] == [Effort.NONE]
    assert _warnings(caplog) == []


def test_explicit_none_on_the_source_still_raises_under_the_error_policy(tmp_path: Path) -> None:
    path = tmp_path / "polythink.toml"
    path.write_text(
        '[thinking]\nenabled = false\n\n[[source]]\nprovider = "glm"\nmodel = "glm-5.3"\n'
        'api_key = "glm-key"\nreasoning_effort = "none"\neffort_fallback = "error"\n',
        encoding="utf-8",
    )
    (source,) = sources_from_toml(path)
    assert source.effort is Effort.NONE
    with pytest.raises(
        ThinkingUnsupportedError, match=re.escape("'glm-5.3' cannot switch reasoning off")
    ):
        Client([source])


@pytest.mark.anyio
async def test_explicit_none_on_the_call_still_raises_before_any_request() -> None:
    (source,) = sources_from_env(
        "APP",
        {
            "APP__THINKING__ENABLED": "false",
            "APP__GLM__0__MODEL": "glm-5.3",
            "APP__GLM__0__API_KEY": "glm-key",
            "APP__GLM__0__EFFORT_FALLBACK": "error",
        },
    )
    assert source.effort is Effort.MAX
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route()
        async with Client([source]) as client:
            with pytest.raises(ThinkingUnsupportedError, match="cannot switch reasoning off"):
                await client.complete([{"role": "user", "content": "hi"}], reasoning_effort="none")
    assert route.call_count == 0


def test_a_source_built_in_code_is_never_clamped() -> None:
    assert Source("glm", "glm-5.3", reasoning_effort="none").effort is Effort.NONE
