"""Anthropic API versions 2026-10-21 and 2023-06-01, forced tool_choice, thinking.display.

Facts (../shared/wire/CURRENT.md, read 2026-12-01): 2026-10-21 is what the official SDK majors
of that day send; a request with ``temperature``, ``top_p`` or ``top_k`` is a 400 on it, even
at the default value ("temperature: Extra inputs are not permitted"; §1.2, A-MIG,
QIITA-SYNTH); 2023-06-01 still takes them on models that accept non-default values (§1.4);
``x-api-key`` stays valid (§1.1). Forced ``tool_choice`` (``any``/``tool``) is a 400 on
Fable/Mythos 5.1+, Opus 5.5 and Sonnet 5.5 (§1.6). ``thinking.display`` is ``summarized`` or
``omitted`` (§1.6).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source, ThinkingUnsupportedError, Tool

URL = "https://api.anthropic.com/v1/messages"
KEY = "sk-ant-test-000000000000"
HI = [{"role": "user", "content": "hi"}]
ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
WEATHER = Tool(name="get_weather", parameters={"type": "object"})


async def _send(source: Source, **kwargs: Any) -> tuple[int, httpx.Request | None, Any]:
    """Make one call; return (requests sent, the request, the response or the error)."""
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URL).respond(200, json=ANSWER)
        async with Client([source], capabilities_store=False) as client:
            try:
                result: Any = await client.complete(HI, **kwargs)
            except ThinkingUnsupportedError as exc:
                result = exc
    request = route.calls[0].request if route.call_count else None
    return route.call_count, request, result


def _body(request: httpx.Request | None) -> dict[str, Any]:
    assert request is not None
    body: dict[str, Any] = json.loads(request.content)
    return body


@pytest.mark.anyio
async def test_the_default_version_is_2026_10_21_and_a_source_may_pin_2023_06_01() -> None:
    _, new, _ = await _send(Source("anthropic", "claude-haiku-4-5", api_key=KEY))
    _, old, _ = await _send(
        Source("anthropic", "claude-haiku-4-5", api_key=KEY, api_version="2023-06-01")
    )
    assert new is not None
    assert old is not None
    assert (new.headers["anthropic-version"], new.headers["x-api-key"]) == ("2026-10-21", KEY)
    assert old.headers["anthropic-version"] == "2023-06-01"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"temperature": 0.2}, "temperature=0.2"),
        # The default value is refused too on 2026-10-21.
        ({"temperature": 1.0}, "temperature=1.0"),
        ({"top_p": 0.9}, "top_p=0.9"),
        ({"extra_body": {"top_k": 5}}, "top_k=5"),
    ],
)
async def test_2026_10_21_never_sends_sampling_parameters(
    kwargs: dict[str, Any], field: str
) -> None:
    source = Source("anthropic", "claude-haiku-4-5", api_key=KEY)
    sent, _, error = await _send(source, **kwargs)
    assert sent == 0
    assert isinstance(error, ThinkingUnsupportedError)
    assert error.error_type == "parameter_conflict"
    name = field.split("=")[0]
    assert error.message == (
        f"anthropic model 'claude-haiku-4-5' rejects {name} on anthropic-version 2026-10-21, "
        "which removed sampling parameters (set api_version='2023-06-01' on the source for a "
        f"model that takes them): {field}. Remove it, or set drop_params=True on the source to "
        "drop it with a warning"
    )
    dropping = Source("anthropic", "claude-haiku-4-5", api_key=KEY, drop_params=True)
    sent, request, response = await _send(dropping, **kwargs)
    assert sent == 1
    assert name not in _body(request)
    assert response.warnings == [
        f"dropped {field} for anthropic model 'claude-haiku-4-5' (drop_params=True)"
    ]


@pytest.mark.anyio
async def test_2023_06_01_still_sends_temperature_where_the_model_takes_it() -> None:
    # Sonnet 4.6 with temperature=0.2 passes on 2023-06-01 (QIITA-KHRONOV, measured).
    source = Source("anthropic", "claude-sonnet-4-6", api_key=KEY, api_version="2023-06-01")
    sent, request, _ = await _send(source, temperature=0.2)
    assert sent == 1
    assert _body(request)["temperature"] == 0.2
    # Claude 4.7 and later take only the defaults on every version (CURRENT.md §1.4).
    strict = Source("anthropic", "claude-opus-4-8", api_key=KEY, api_version="2023-06-01")
    sent, _, error = await _send(strict, temperature=0.2)
    assert sent == 0
    assert "rejects temperature (only the defaults are accepted)" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-5-2"])
@pytest.mark.parametrize(
    "choice", ["required", "get_weather", {"type": "tool", "name": "get_weather"}]
)
async def test_forced_tool_choice_is_refused_where_the_model_rejects_it(
    model: str, choice: Any
) -> None:
    source = Source("anthropic", model, api_key=KEY)
    sent, _, error = await _send(source, tools=[WEATHER], tool_choice=choice)
    assert sent == 0
    assert isinstance(error, ThinkingUnsupportedError)
    assert f"anthropic model {model!r} rejects tool_choice" in error.message
    dropping = Source("anthropic", model, api_key=KEY, drop_params=True)
    sent, request, response = await _send(dropping, tools=[WEATHER], tool_choice=choice)
    assert sent == 1
    assert "tool_choice" not in _body(request)
    assert response.warnings[0].startswith("dropped tool_choice=")


@pytest.mark.anyio
async def test_forced_tool_choice_still_goes_out_to_a_model_that_takes_it() -> None:
    source = Source("anthropic", "claude-haiku-4-5", api_key=KEY)
    sent, request, _ = await _send(source, tools=[WEATHER], tool_choice="required")
    assert sent == 1
    assert _body(request)["tool_choice"] == {"type": "any"}


@pytest.mark.anyio
async def test_thinking_display_is_the_sources_choice() -> None:
    # Opus 5.5 omits thinking text by default; polythink asks for it unless told otherwise.
    default = Source("anthropic", "claude-opus-5-5", api_key=KEY)
    _, request, _ = await _send(default, reasoning_effort="high")
    assert _body(request)["thinking"] == {"type": "adaptive", "display": "summarized"}
    quiet = Source("anthropic", "claude-opus-5-5", api_key=KEY, thinking_display="omitted")
    _, request, _ = await _send(quiet, reasoning_effort="high")
    assert _body(request)["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert _body(request)["output_config"] == {"effort": "high"}
    # An extra_body that sets it still wins.
    _, request, _ = await _send(
        quiet, reasoning_effort="high", extra_body={"thinking": {"display": "summarized"}}
    )
    assert _body(request)["thinking"]["display"] == "summarized"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"api_version": "2024-01-01"},
            "Source.api_version must be one of 2026-10-21, 2023-06-01 (or None); got '2024-01-01'",
        ),
        (
            {"thinking_display": "updates"},
            "Source.thinking_display must be one of summarized, omitted (or None); got 'updates'",
        ),
        (
            {"reasoning_mode": "pro"},
            "Source.reasoning_mode is not available on provider 'anthropic' (it has no "
            "reasoning_mode to choose); got 'pro'",
        ),
    ],
)
def test_source_options_are_checked_against_the_provider(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        Source("anthropic", "claude-opus-5-5", **kwargs)
    assert str(info.value) == message


def test_openai_has_no_api_version_to_pin() -> None:
    with pytest.raises(ValueError, match="not available on provider 'openai'"):
        Source("openai", "gpt-5.5", api_version="2026-10-21")


def test_the_options_come_from_toml_and_the_environment(tmp_path: Any) -> None:
    from polythink.config import sources_from_env, sources_from_toml

    path = tmp_path / "polythink.toml"
    path.write_text(
        '[[source]]\nprovider = "anthropic"\nmodel = "claude-sonnet-4-6"\n'
        'api_version = "2023-06-01"\nthinking_display = "omitted"\n\n'
        '[[source]]\nprovider = "openai"\nmodel = "gpt-6-luna"\nreasoning_mode = "pro"\n',
        encoding="utf-8",
    )
    claude, gpt = sources_from_toml(path)
    assert (claude.api_version, claude.thinking_display) == ("2023-06-01", "omitted")
    assert gpt.reasoning_mode == "pro"
    (env,) = sources_from_env(
        "APP",
        {
            "APP__ANTHROPIC__0__MODEL": "claude-opus-5-5",
            "APP__ANTHROPIC__0__API_VERSION": "2026-10-21",
        },
    )
    assert env.api_version == "2026-10-21"


def test_the_options_that_change_the_answer_are_part_of_the_cache_scope() -> None:
    from polythink.cache_key import canonical_scope

    plain = Source("anthropic", "claude-opus-5-5", api_key=KEY)
    omitted = Source("anthropic", "claude-opus-5-5", api_key=KEY, thinking_display="omitted")
    pinned = Source("anthropic", "claude-opus-5-5", api_key=KEY, api_version="2023-06-01")
    assert canonical_scope([plain]) != canonical_scope([omitted])
    assert '"thinking_display":"omitted"' in canonical_scope([omitted])
    # The version changes nothing the answer holds: a call goes out the same, or is refused.
    assert canonical_scope([plain]) == canonical_scope([pinned])
    assert "thinking_display" not in canonical_scope([plain])
