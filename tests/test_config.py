"""Sources from code, the environment and TOML files (DESIGN §8).

Environment variables are ``{SCOPE}__{PROVIDER}__{N}__{FIELD}``; ``{SCOPE}__THINKING__ENABLED``
and ``{SCOPE}__THINKING__EFFORT`` (or a TOML ``[thinking]`` table) give the default for sources
without their own effort; the source's own value wins. A contradiction (thinking disabled but an
effort given, or enabled with ``none``) fails when the sources are read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polythink import Client, Effort, Source, ThinkingUnsupportedError, Timeout
from polythink.config import sources_from_env, sources_from_toml


def _summary(sources: list[Source]) -> list[tuple[str, str, Effort | None]]:
    return [(s.provider, s.model, s.effort) for s in sources]


# ---------------------------------------------------------------- Source values


def test_source_defaults_and_endpoint() -> None:
    source = Source("anthropic", "claude-sonnet-4-5", api_key="k" * 8)
    assert source.endpoint == "https://api.anthropic.com/v1"
    assert source.effort is None
    assert source.effort_fallback == "nearest"
    assert source.timeouts == Timeout(connect=5.0, first_byte=None, idle=120.0, total=600.0)
    custom = Source("openai", "gpt-5.5", base_url="https://proxy.example.test/v1/", timeout=30)
    assert custom.endpoint == "https://proxy.example.test/v1"
    assert custom.timeouts.total == 30.0


@pytest.mark.parametrize(
    ("value", "effort"),
    [
        ("HIGH", Effort.HIGH),
        (" xhigh ", Effort.XHIGH),
        ("off", Effort.NONE),
        ("on", Effort.AUTO),
        ("true", Effort.AUTO),
        ("false", Effort.NONE),
        (True, Effort.AUTO),
        (False, Effort.NONE),
        (None, None),
        (Effort.MAX, Effort.MAX),
    ],
)
def test_source_effort_aliases(value: object, effort: Effort | None) -> None:
    assert Source("openai", "gpt-5.5", reasoning_effort=value).effort is effort  # type: ignore[arg-type]


def test_timeout_object() -> None:
    assert Timeout.coerce(None) == Timeout()
    assert Timeout.coerce(2.5) == Timeout(total=2.5)
    assert Timeout.coerce(Timeout(idle=None)).idle is None
    with pytest.raises(ValueError, match=re.escape("Timeout.idle must be a positive number")):
        Timeout(idle=0)
    with pytest.raises(ValueError, match="timeout must be seconds"):
        Timeout.coerce(True)


# ---------------------------------------------------------------- environment


def test_sources_from_env() -> None:
    environ = {
        "CHAT__OPENAI__0__MODEL": "gpt-5.5",
        "CHAT__OPENAI__0__REASONING_EFFORT": "high",
        "CHAT__OPENAI__0__RPM": "60",
        "CHAT__OPENAI__0__TIMEOUT": "12.5",
        "CHAT__ANTHROPIC__1__MODEL": "claude-sonnet-4-5",
        "CHAT__ANTHROPIC__1__API_KEY": "ant-key-0000",
        "CHAT__ANTHROPIC__1__EFFORT_FALLBACK": "error",
        "CHAT__ANTHROPIC__1__MAX_RETRIES": "4",
        "CHAT__OPENAI_RESPONSES__2__MODEL": "gpt-5.5",
        "CHAT__OPENAI_RESPONSES__2__DROP_PARAMS": "yes",
        "CHAT__OPENAI_RESPONSES__2__BASE_URL": "https://gw.example.test/v1/",
        "OTHER__OPENAI__0__MODEL": "gpt-4o",
        "OPENAI_API_KEY": "sk-from-standard-variable",
    }
    sources = sources_from_env("chat", environ)
    assert _summary(sources) == [
        ("openai", "gpt-5.5", Effort.HIGH),
        ("anthropic", "claude-sonnet-4-5", None),
        ("openai-responses", "gpt-5.5", None),
    ]
    openai, anthropic, responses = sources
    assert (openai.rpm, openai.timeouts.total) == (60.0, 12.5)
    assert openai.api_key is None
    assert openai.resolve_api_key(environ) == "sk-from-standard-variable"
    assert (anthropic.api_key, anthropic.effort_fallback, anthropic.max_retries) == (
        "ant-key-0000",
        "error",
        4,
    )
    assert (responses.drop_params, responses.endpoint) == (True, "https://gw.example.test/v1")


def test_sources_from_env_order_by_index_then_provider() -> None:
    environ = {
        "S__OPENROUTER__1__MODEL": "a",
        "S__DEEPSEEK__1__MODEL": "b",
        "S__OPENAI__0__MODEL": "c",
        "S__GROQ__10__MODEL": "d",
        "S__GEMINI__2__MODEL": "e",
    }
    assert [s.model for s in sources_from_env("S", environ)] == ["c", "b", "a", "e", "d"]


@pytest.mark.parametrize(
    ("thinking", "own", "first", "second"),
    [
        ({"CHAT__THINKING__EFFORT": "medium"}, None, Effort.MEDIUM, Effort.MEDIUM),
        ({"CHAT__THINKING__ENABLED": "true"}, None, Effort.AUTO, Effort.AUTO),
        ({"CHAT__THINKING__ENABLED": "false"}, None, Effort.NONE, Effort.NONE),
        (
            {"CHAT__THINKING__ENABLED": "true", "CHAT__THINKING__EFFORT": "low"},
            None,
            Effort.LOW,
            Effort.LOW,
        ),
        (
            {"CHAT__THINKING__ENABLED": "false", "CHAT__THINKING__EFFORT": "none"},
            None,
            Effort.NONE,
            Effort.NONE,
        ),
        ({"CHAT__THINKING__EFFORT": "medium"}, "high", Effort.HIGH, Effort.MEDIUM),
        ({"CHAT__THINKING__ENABLED": "false"}, "high", Effort.HIGH, Effort.NONE),
        ({}, "low", Effort.LOW, None),
        ({}, None, None, None),
    ],
)
def test_env_thinking_default_applies_to_sources_without_their_own(
    thinking: dict[str, str], own: str | None, first: Effort | None, second: Effort | None
) -> None:
    environ = {"CHAT__OPENAI__0__MODEL": "gpt-5.5", "CHAT__GEMINI__1__MODEL": "gemini-2.5-flash"}
    environ.update(thinking)
    if own is not None:
        environ["CHAT__OPENAI__0__REASONING_EFFORT"] = own
    assert [s.effort for s in sources_from_env("CHAT", environ)] == [first, second]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (
            {"CHAT__THINKING__ENABLED": "false", "CHAT__THINKING__EFFORT": "high"},
            "CHAT__THINKING: enabled = false contradicts effort = 'high'",
        ),
        (
            {"CHAT__THINKING__ENABLED": "true", "CHAT__THINKING__EFFORT": "off"},
            "CHAT__THINKING: enabled = true contradicts effort = 'none'",
        ),
        (
            {
                "CHAT__OPENAI__0__ENABLE_THINKING": "false",
                "CHAT__OPENAI__0__REASONING_EFFORT": "high",
            },
            "CHAT__OPENAI__0: enable_thinking = False contradicts reasoning_effort = 'high'",
        ),
        (
            {
                "CHAT__OPENAI__0__ENABLE_THINKING": "true",
                "CHAT__OPENAI__0__REASONING_EFFORT": "none",
            },
            "CHAT__OPENAI__0: enable_thinking = True contradicts reasoning_effort = 'none'",
        ),
    ],
)
def test_env_contradictions_fail(environ: dict[str, str], message: str) -> None:
    environ = {"CHAT__OPENAI__0__MODEL": "gpt-5.5", **environ}
    with pytest.raises(ValueError, match=re.escape(message)):
        sources_from_env("CHAT", environ)


def test_env_enable_thinking_alone_sets_the_switch() -> None:
    environ = {
        "CHAT__KIMI__0__MODEL": "kimi-k2.5",
        "CHAT__KIMI__0__ENABLE_THINKING": "false",
        "CHAT__GLM__1__MODEL": "glm-4.6",
        "CHAT__GLM__1__ENABLE_THINKING": "1",
    }
    assert [s.effort for s in sources_from_env("CHAT", environ)] == [Effort.NONE, Effort.AUTO]


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "no sources found: set CHAT__<PROVIDER>__0__MODEL"),
        (
            {"CHAT__OPENAI__0__MODL": "x"},
            "CHAT__OPENAI__0__MODL: unknown field 'MODL'; known: MODEL,",
        ),
        (
            {"CHAT__OPENIA__0__MODEL": "x"},
            "unknown provider 'OPENIA' in environment (did you mean 'openai'?); known: openai,",
        ),
        (
            {"CHAT__OPENAI__X__MODEL": "x"},
            "CHAT__OPENAI__X__MODEL: expected CHAT__<PROVIDER>__<N>__<FIELD>",
        ),
        (
            {"CHAT__OPENAI__0__RPM": "fast", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__OPENAI__0__RPM: expected a number, got 'fast'",
        ),
        (
            {"CHAT__OPENAI__0__MAX_RETRIES": "2.5", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__OPENAI__0__MAX_RETRIES: expected an integer, got '2.5'",
        ),
        (
            {"CHAT__OPENAI__0__DROP_PARAMS": "maybe", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__OPENAI__0__DROP_PARAMS: expected true or false, got 'maybe'",
        ),
        (
            {"CHAT__THINKING__ENABLED": "sometimes", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__THINKING__ENABLED: expected true or false, got 'sometimes'",
        ),
        (
            {"CHAT__OPENAI__0__REASONING_EFFORT": "hgih", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__OPENAI__0: unknown reasoning effort 'hgih'; accepted: none, minimal, low, "
            "medium, high, xhigh, max, auto",
        ),
        (
            {"CHAT__OPENAI__0__RPM": "-1", "CHAT__OPENAI__0__MODEL": "m"},
            "CHAT__OPENAI__0: Source.rpm must be a positive finite number or None; got -1.0",
        ),
        ({"CHAT__OPENAI__0__API_KEY": "sk-only-a-key"}, "CHAT__OPENAI__0: a source needs a MODEL"),
    ],
)
def test_env_mistakes_fail_with_the_variable_named(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        sources_from_env("CHAT", environ)
    assert "sk-only-a-key" not in str(info.value)


def test_client_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APP__DEEPSEEK__0__MODEL", "deepseek-v4-pro")
    monkeypatch.setenv("APP__DEEPSEEK__0__REASONING_EFFORT", "max")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-000000")
    client = Client.from_env("app")
    assert _summary(list(client.sources)) == [("deepseek", "deepseek-v4-pro", Effort.MAX)]


def test_client_from_env_checks_the_effort_against_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A source's own "off" on a model that always reasons fails at build time under the error
    # policy (nearest would send its cheapest tier instead).
    monkeypatch.setenv("APP__GLM__0__MODEL", "glm-5.3")
    monkeypatch.setenv("APP__GLM__0__REASONING_EFFORT", "off")
    monkeypatch.setenv("APP__GLM__0__EFFORT_FALLBACK", "error")
    monkeypatch.setenv("GLM_API_KEY", "glm-key-000000")
    with pytest.raises(
        ThinkingUnsupportedError, match=re.escape("'glm-5.3' cannot switch reasoning off")
    ):
        Client.from_env("APP")


# ---------------------------------------------------------------- TOML


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "polythink.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sources_from_toml(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[thinking]
enabled = true
effort = "medium"

[[source]]
provider = "openai"
model = "gpt-5.5"
reasoning_effort = "high"
rpm = 120
timeout = 30
headers = { "x-team" = "search" }
extra_body = { service_tier = "flex" }

[[source]]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key = "ant-key-from-file"
effort_fallback = "drop"

[[source]]
provider = "kimi"
model = "kimi-k2.5"
enable_thinking = false
""",
    )
    sources = sources_from_toml(path)
    assert _summary(sources) == [
        ("openai", "gpt-5.5", Effort.HIGH),
        ("anthropic", "claude-sonnet-4-5", Effort.MEDIUM),
        ("kimi", "kimi-k2.5", Effort.NONE),
    ]
    openai, anthropic, _ = sources
    assert (openai.rpm, openai.timeouts.total) == (120, 30.0)
    assert dict(openai.headers or {}) == {"x-team": "search"}
    assert dict(openai.extra_body or {}) == {"service_tier": "flex"}
    assert (anthropic.api_key, anthropic.effort_fallback) == ("ant-key-from-file", "drop")
    assert "ant-key-from-file" not in repr(anthropic)


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [
        ("enabled = true", Effort.AUTO),
        ("enabled = false", Effort.NONE),
        ('effort = "low"', Effort.LOW),
        ('effort = "off"', Effort.NONE),
        ("effort = true", Effort.AUTO),
        ("", None),
    ],
)
def test_toml_thinking_default(tmp_path: Path, thinking: str, expected: Effort | None) -> None:
    path = _write(
        tmp_path,
        f'[thinking]\n{thinking}\n\n[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n',
    )
    assert sources_from_toml(path)[0].effort is expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[thinking]\nenabled = false\neffort = "high"\n',
            "[thinking]: enabled = false contradicts effort = 'high'",
        ),
        (
            '[thinking]\nenabled = true\neffort = "none"\n',
            "[thinking]: enabled = true contradicts effort = 'none'",
        ),
        (
            '[thinking]\nenabled = "false"\n',
            "[thinking]: enabled must be true or false; got 'false'",
        ),
        (
            "[thinking]\nbudget = 1024\n",
            "[thinking]: unknown keys ['budget']; known: ['effort', 'enabled', 'prefix_mismatch']",
        ),
        (
            '[thinking]\neffort = "ultra"\n',
            "[thinking]: unknown reasoning effort 'ultra'; accepted:",
        ),
        ("", "no [[source]] tables"),
    ],
)
def test_toml_thinking_mistakes_fail(tmp_path: Path, text: str, message: str) -> None:
    body = (
        text
        if message == "no [[source]] tables"
        else (text + '\n[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n')
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        sources_from_toml(_write(tmp_path, body))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            'provider = "openai"\nmodel = "m"\nenable_thinking = false\nreasoning_effort = "high"',
            "[[source]] #0: enable_thinking = False contradicts reasoning_effort = 'high'",
        ),
        (
            'provider = "openai"\nmodel = "m"\nenable_thinking = "no"',
            "[[source]] #0: enable_thinking must be true or false; got 'no'",
        ),
        (
            'provider = "openai"\nmodel = "m"\nreasoning = "high"',
            "[[source]] #0: unknown keys ['reasoning']; known: ",
        ),
        ('model = "m"', "[[source]] #0: a source needs a provider"),
        ('provider = "opneai"\nmodel = "m"', "[[source]] #0: unknown provider 'opneai'"),
        ('provider = "openai"', "[[source]] #0: a source needs a MODEL"),
        (
            'provider = "openai"\nmodel = "m"\neffort_fallback = "closest"',
            "[[source]] #0: Source.effort_fallback must be one of nearest, error, drop",
        ),
        (
            'provider = "openai"\nmodel = "m"\nreasoning_effort = "medum"',
            "[[source]] #0: unknown reasoning effort 'medum'; accepted: none, minimal, low,",
        ),
    ],
)
def test_toml_source_mistakes_fail(tmp_path: Path, source: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        sources_from_toml(_write(tmp_path, f"[[source]]\n{source}\n"))


def test_client_from_toml(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '[[source]]\nprovider = "ollama"\nmodel = "qwen3:8b"\nreasoning_effort = "on"\n',
    )
    client = Client.from_toml(path)
    assert _summary(list(client.sources)) == [("ollama", "qwen3:8b", Effort.AUTO)]
