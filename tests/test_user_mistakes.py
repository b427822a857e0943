"""Mistakes a user makes get a clear, typed error, and credentials never leak."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import httpx
import pytest
import respx

from polythink import Capability, Client, Effort, Source
from polythink.config import sources_from_env, sources_from_toml
from polythink.errors import AuthError
from polythink.http import build_http_client

SECRET = "tenant-secret-0123456789abcdef"


@pytest.mark.anyio
async def test_a_credential_in_source_headers_is_redacted_from_errors() -> None:
    source = Source(
        "openai",
        "gpt-4o",
        api_key="sk-test-0000000000000000",
        base_url="https://gateway.example/v1",
        headers={"api-key": SECRET, "x-team": "search"},
        max_retries=0,
    )
    echo = {"error": {"message": f"key {SECRET} is not valid for team search", "code": "bad"}}
    with respx.mock() as router:
        router.post("https://gateway.example/v1/chat/completions").mock(
            return_value=httpx.Response(401, json=echo)
        )
        async with Client([source]) as client:
            with pytest.raises(AuthError) as caught:
                await client.complete([{"role": "user", "content": "hi"}])
    error = caught.value
    assert SECRET not in str(error)
    assert error.body is not None
    assert SECRET not in error.body
    assert "[REDACTED]" in error.body
    # A header that is not a credential is not redacted.
    assert "team search" in error.body
    assert source.secrets() == ("sk-test-0000000000000000", SECRET)
    assert SECRET not in repr(source)


@pytest.mark.anyio
async def test_an_unregistered_model_is_reported_once_whatever_the_tier(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = {
        "id": "c1",
        "model": "brand-new-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    source = Source("openai", "brand-new-model-7", api_key="sk-test-0000000000000000")
    caplog.set_level(logging.INFO, logger="polythink")
    with respx.mock() as router:
        router.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([source]) as client:
            answers = [
                await client.complete([{"role": "user", "content": "hi"}], reasoning_effort=tier)
                for tier in ("low", "high", "max", "low")
            ]
    logged = [
        r.getMessage() for r in caplog.records if "not in the capability registry" in r.getMessage()
    ]
    assert len(logged) == 1
    assert all(any("not in the capability registry" in w for w in a.warnings) for a in answers)


def test_supported_efforts_as_a_string_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("supported_efforts must be a list of tiers")):
        Capability(model="m", supported_efforts="high")  # type: ignore[arg-type]


def test_an_unknown_thinking_variable_names_the_known_ones() -> None:
    environ = {"CHAT__OPENAI__0__MODEL": "gpt-5.5", "CHAT__THINKING__BUDGET": "2048"}
    with pytest.raises(
        ValueError,
        match=re.escape("CHAT__THINKING__BUDGET: unknown [thinking] field; known: ENABLED, EFFORT"),
    ):
        sources_from_env("CHAT", environ)


@pytest.mark.parametrize(
    "extra",
    [{"model": "gpt-4o"}, {"stream": True}, {"messages": []}, {"input": []}, {"contents": []}],
)
def test_extra_body_may_not_replace_what_polythink_sets(extra: dict[str, object]) -> None:
    client = Client([Source("openai", "gpt-5.5", api_key="sk-test-0000000000000000")])
    with pytest.raises(ValueError, match="extra_body may not set"):
        client.request([{"role": "user", "content": "hi"}], extra_body=extra)
    with pytest.raises(ValueError, match=re.escape("Source.extra_body may not set")):
        Source("openai", "gpt-5.5", api_key="sk-test-0000000000000000", extra_body=extra)


@pytest.mark.anyio
async def test_extra_body_that_replaces_the_reasoning_fields_is_reported() -> None:
    answer = {
        "id": "c1",
        "model": "gpt-5.1",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    source = Source("openai", "gpt-5.1", api_key="sk-test-0000000000000000")
    with respx.mock() as router:
        route = router.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([source]) as client:
            response = await client.complete(
                [{"role": "user", "content": "hi"}],
                reasoning_effort="high",
                extra_body={"reasoning_effort": "minimal"},
            )
    assert json.loads(route.calls.last.request.content)["reasoning_effort"] == "minimal"
    assert response.requested_effort is Effort.HIGH
    assert response.applied_effort is None
    assert response.warnings == [
        "extra_body replaces reasoning_effort of the reasoning fields resolved for model "
        "'gpt-5.1'; applied_effort is unknown"
    ]


def test_a_misspelt_toml_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "polythink.toml"
    path.write_text(
        '[thinkng]\neffort = "high"\n\n[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=re.escape("unknown top-level keys ['thinkng']")):
        sources_from_toml(path)


def test_one_source_not_in_a_list_is_refused() -> None:
    source = Source("openai", "gpt-5.5", api_key="sk-test-0000000000000000")
    with pytest.raises(ValueError, match=re.escape("wrap the one source: [source]")):
        Client(source)  # type: ignore[arg-type]


def test_the_aiohttp_layer_outside_asyncio_is_refused() -> None:
    with pytest.raises(ValueError, match="runs only under asyncio"):
        build_http_client("aiohttp")


def test_source_fields_after_the_model_are_keyword_only() -> None:
    message = (
        "Source takes provider and model positionally and every other field by keyword "
        "(api_key=, base_url=, reasoning_effort=, ...); got 3 positional arguments"
    )
    with pytest.raises(TypeError) as caught:
        Source("openai", "gpt-5.5", "high")  # type: ignore[call-arg]
    assert str(caught.value) == message
    with pytest.raises(TypeError) as leaked:
        Source("openai", "gpt-5.5", SECRET)  # type: ignore[call-arg]
    assert SECRET not in str(leaked.value)
    source = Source("openai", "gpt-5.5", reasoning_effort="high", api_key=SECRET)
    assert (source.effort, source.api_key) == (Effort.HIGH, SECRET)
    assert Source(provider="openai", model="gpt-5.5").model == "gpt-5.5"


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("sk-proj-0123456789abcdef\n", "ends with a newline"),
        ("sk-proj-0123456789abcdef\r\n", "ends with a newline"),
        ("   ", "is only whitespace"),
        ("\tsk-proj-0123456789abcdef", "starts with a tab"),
        ("sk-proj-0123 456789abcdef", "holds whitespace, a control character or a non-ASCII"),
    ],
)
def test_an_api_key_with_whitespace_is_refused_without_echoing_it(
    key: str, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=f"^Source.api_key {problem}") as given:
        Source("openai", "gpt-5.5", api_key=key)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with pytest.raises(ValueError, match=rf"^the API key in \$OPENAI_API_KEY {problem}") as env:
        Client([Source("openai", "gpt-5.5")])
    for caught in (given, env):
        text = str(caught.value)
        assert text.endswith("The key is not shown")
        assert "0123" not in text


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_text('[[source]]\nprovider = "openai"\nmodel = "gpt-5.5\n')
    for read in (sources_from_toml, Client.from_toml):
        with pytest.raises(ValueError, match="not valid TOML") as caught:
            read(path)
        assert str(caught.value).startswith(f"{path}: not valid TOML: ")
        assert "(at line 3, column 17)" in str(caught.value)


@pytest.mark.parametrize("option", ["limits", "cache"])
@pytest.mark.parametrize(
    ("url", "shown", "problem"),
    [
        ("redis://h:notaport/0", "redis://h:notaport/0", "its port 'notaport' is not a number"),
        ("redis://h:6379/zero", "redis://h:6379/zero", "its database 'zero' (the path)"),
        ("redis://u:hunter2@h:70000/0", "redis://u:***@h:70000/0", "its port '70000' is not"),
        ("unix:///run/redis.sock?db=x", "unix:///run/redis.sock?db=x", "its database 'x'"),
    ],
)
def test_a_redis_url_that_cannot_work_names_the_option(
    option: str, url: str, shown: str, problem: str
) -> None:
    with pytest.raises(ValueError, match="is not a usable Redis URL") as caught:
        Client([Source("openai", "gpt-5.5", api_key="sk-test")], **{option: url})
    text = str(caught.value)
    assert text.startswith(f"{option}={shown!r} is not a usable Redis URL: {problem}")
    assert text.endswith(
        "expected redis://[user:password@]host[:port][/db] (rediss:// for TLS, or "
        "unix:///path?db=N)"
    )
    assert "hunter2" not in text


@pytest.mark.parametrize("model", ["", "   "])
def test_an_empty_model_id_is_refused(model: str) -> None:
    from polythink import resolve
    from polythink.capability_store import CapabilityStore

    expected = f"a model id must be a non-empty string such as 'gpt-5.5'; got {model!r}"
    with pytest.raises(ValueError, match="non-empty") as resolved:
        resolve("low", provider="openai", model=model)
    with pytest.raises(ValueError, match="non-empty") as levels:
        CapabilityStore(None).levels(model, "openai")
    with pytest.raises(ValueError, match="non-empty") as stored:
        CapabilityStore(None).resolve("low", provider="openai", model=model)
    assert str(resolved.value) == str(levels.value) == str(stored.value) == expected
    with pytest.raises(ValueError, match=r"Source\.model must be a non-empty model id"):
        Source("openai", model)


def test_a_credential_header_with_a_newline_is_refused_and_redacted_in_any_quoting() -> None:
    from polythink.errors import redact

    with pytest.raises(ValueError, match=r"^Source\.headers\['api-key'\] ends with a newline"):
        Source("openai", "gpt-5.5", api_key="sk-test", headers={"api-key": f"{SECRET}\n"})
    # "Bearer <key>" keeps its one space; other headers are not credentials.
    Source("openai", "gpt-5.5", headers={"Authorization": f"Bearer {SECRET}", "x-team": "a  b"})
    # An HTTP library quoting an illegal value shows it escaped: that form is redacted too.
    assert redact(f"Illegal header value {(SECRET + chr(10)).encode()!r}", [SECRET + "\n"]) == (
        "Illegal header value b'[REDACTED]'"
    )
