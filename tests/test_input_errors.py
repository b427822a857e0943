"""Bad input is refused with one typed error, :class:`polythink.errors.InvalidInputError` (a
``PolythinkError`` and a ``ValueError``), naming what was wrong and what is accepted, and
holding no key: at every door a caller's values come in (the values built directly, the
source, the client, a call, a TOML file), before anything is sent.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import polythink
from polythink import (
    Budget,
    Client,
    InvalidInputError,
    Message,
    PolythinkError,
    ResponseFormat,
    Source,
    Tool,
)
from polythink.config import sources_from_toml
from polythink.simulator import Simulator
from polythink.transports.base import dumps
from polythink.types import Effort

KEY = "sk-input-errors-0123456789abcdef"
PROMPT = [{"role": "user", "content": "hi"}]

BUILT: dict[str, tuple[Callable[[], Any], str]] = {
    "unknown effort": (lambda: Effort.parse("extreme"), "accepted: "),
    "message role": (lambda: Message(role="boss", content="x"), "role"),
    "lone surrogate": (lambda: Message(role="user", content="a\ud800"), "lone surrogate U+D800"),
    "empty content list": (lambda: Message(role="user", content=[]), "no content"),
    "tool parameters NaN": (
        lambda: Tool(
            name="f",
            parameters={"type": "object", "properties": {"n": {"maximum": math.nan}}},
        ),
        "nan",
    ),
    "response format": (lambda: ResponseFormat(42), "response_format must be"),  # type: ignore[arg-type]
    "unknown provider": (lambda: Source("opnai", "gpt-5.5", api_key=KEY), "openai"),
    "model with a line break": (lambda: Source("openai", "gpt-5.5\n", api_key=KEY), "model"),
    "budget below zero": (lambda: Budget(-1.0), "Budget"),
}


@pytest.mark.parametrize("case", list(BUILT), ids=list(BUILT))
def test_a_value_built_from_bad_input_raises_invalid_input(case: str) -> None:
    build, words = BUILT[case]
    with pytest.raises(InvalidInputError) as caught:
        build()
    assert isinstance(caught.value, PolythinkError)
    assert isinstance(caught.value, ValueError)
    assert words.lower() in str(caught.value).lower()
    assert KEY not in str(caught.value)
    assert type(caught.value).__module__ == "polythink.errors"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"reasoning_effort": "extreme"}, "unknown reasoning effort 'extreme'"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"service_tier": "platinum"}, "platinum"),
        ({"extra_body": {"temperature": math.inf}}, "JSON cannot represent"),
    ],
)
async def test_a_call_with_bad_input_raises_invalid_input_and_sends_nothing(
    options: dict[str, Any], words: str
) -> None:
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key=KEY, base_url=sim.base_url("openai"))
        async with Client([source, source]) as client:
            with pytest.raises(InvalidInputError, match=words) as caught:
                await client.complete(PROMPT, **options)
        assert sim.stats.requests == 0  # neither retried nor failed over: nothing was sent
    assert KEY not in str(caught.value)


def test_a_source_without_a_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("POLYTHINK_BASE_URL_ROOT", raising=False)
    with pytest.raises(
        InvalidInputError, match="has no API key: pass api_key= or set OPENAI_API_KEY"
    ):
        Client([Source("openai", "gpt-5.5")])


def test_a_toml_file_with_a_bad_value_raises_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(
        f'[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\napi_key = "{KEY}"\nrpm = -3\n'
    )
    with pytest.raises(InvalidInputError) as caught:
        sources_from_toml(path)
    assert "rpm" in str(caught.value)
    assert KEY not in str(caught.value)


_SOURCE_KEY = Source("openai", "gpt-5.5", api_key=KEY)
_NOT_A_SCOPE = "scope must be the prefix of the variables, a non-empty str (CHAT for "
REFUSED: dict[str, tuple[Callable[[], Any], str]] = {
    "http_client not httpx": (
        lambda: Client([_SOURCE_KEY], http_client="x"),  # type: ignore[arg-type]
        "Client(http_client=) must be an httpx.AsyncClient, or None for one of the client's "
        "own; got str",
    ),
    "from_env int scope": (
        lambda: Client.from_env(5),  # type: ignore[arg-type]
        _NOT_A_SCOPE + "CHAT__OPENAI__0__MODEL); got int 5",
    ),
    "from_env blank scope": (
        lambda: Client.from_env(" "),
        _NOT_A_SCOPE + "CHAT__OPENAI__0__MODEL); got str ' '",
    ),
    "resolve capability": (
        lambda: polythink.resolve(
            "high",
            provider="openai",
            model="gpt-5.5",
            capability="foo",  # type: ignore[arg-type]
        ),
        "capability must be a polythink.Capability (or None for an unregistered model); "
        "got str 'foo'",
    ),
    **{
        f"resolve max_tokens {value!r}": (
            lambda value=value: polythink.resolve(
                "high", provider="openai", model="gpt-5.5", max_tokens=value
            ),
            f"max_tokens must be a positive int (tokens); got {value!r}",
        )
        for value in (-5, 0, 1.5, math.nan, "5", True)
    },
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_a_bad_argument_is_refused_with_its_words(case: str) -> None:
    build, words = REFUSED[case]
    with pytest.raises(InvalidInputError) as caught:
        build()
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == words


@pytest.mark.anyio
async def test_compact_refuses_what_is_not_a_client_or_a_prompt() -> None:
    with pytest.raises(InvalidInputError) as caught:
        await polythink.compact(None, PROMPT)  # type: ignore[arg-type]
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == (
        "compact's client must be a polythink.Client (started, or used in async with); got NoneType"
    )
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key=KEY, base_url=sim.base_url("openai"))
        async with Client([source]) as client:
            with pytest.raises(InvalidInputError) as caught:
                await polythink.compact(client, PROMPT, prompt=None)  # type: ignore[arg-type]
        assert sim.stats.requests == 0
    assert str(caught.value) == "prompt must be the non-empty instruction to summarise; got None"


_LONE_WORDS = (
    "text must be valid Unicode (UTF-8 encodable); it usually comes from bytes decoded with "
    "errors='surrogateescape' or a cut UTF-16 pair"
)


@pytest.mark.anyio
@pytest.mark.parametrize(("stop", "field"), [("a\ud800", "stop"), (["ok", "a\ud800"], "stop[1]")])
async def test_a_lone_surrogate_in_stop_is_named_as_stop(stop: Any, field: str) -> None:
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key=KEY, base_url=sim.base_url("openai"))
        async with Client([source]) as client:
            with pytest.raises(InvalidInputError) as caught:
                await client.complete(PROMPT, stop=stop)
        assert sim.stats.requests == 0
    assert (
        str(caught.value) == f"{field} holds a lone surrogate U+D800 at character 1: {_LONE_WORDS}"
    )


def test_a_lone_surrogate_in_a_model_id_is_called_one() -> None:
    with pytest.raises(InvalidInputError) as caught:
        Source("openai", "gpt\ud800", api_key=KEY)
    assert str(caught.value) == (
        "Source.model holds a lone surrogate (U+D800, not valid Unicode); a model id is "
        "printable characters without spaces (got 'gpt\\ud800')"
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"messages": [{"content": "x"}], "stop": ["ok", "a\ud800"]}, "stop[1]"),
        ({"metadata": {"k\udc80": "v"}}, "the key 'metadata.k\\udc80'"),
    ],
)
def test_a_lone_surrogate_left_in_a_body_is_named_by_its_path(
    body: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        dumps(body)
    assert str(caught.value).startswith(f"{where} holds a lone surrogate U+")
    assert str(caught.value).endswith(_LONE_WORDS)


@pytest.mark.anyio
async def test_a_schema_with_a_ref_to_nothing_is_refused_before_the_call_is_paid() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/Nope"}}}
    words = (
        "response_format schema at properties.x has $ref '#/$defs/Nope', which does not "
        "resolve within the schema: a local $ref is a JSON pointer to a part of it "
        "('#/$defs/Name' with that name under '$defs', or '#' for the root)"
    )
    with pytest.raises(InvalidInputError) as caught:
        ResponseFormat(schema)
    assert str(caught.value) == words
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key=KEY, base_url=sim.base_url("openai"))
        async with Client([source]) as client:
            with pytest.raises(InvalidInputError) as caught:
                await client.complete(PROMPT, response_format=schema)
        assert sim.stats.requests == 0
    assert str(caught.value) == words
    # What resolves is accepted: a definition, the root, an escaped pointer, an array item;
    # a "$ref" that is a property's name or inside data is no reference.
    for good in (
        {**schema, "$defs": {"Nope": {"type": "string"}}},
        {"type": "object", "properties": {"x": {"$ref": "#"}}},
        {"$defs": {"a/b": {"type": "string"}}, "$ref": "#/$defs/a~1b"},
        {"anyOf": [{"type": "string"}, {"$ref": "#/anyOf/0"}]},
        {"type": "object", "properties": {"$ref": {"type": "string"}}},
        {"type": "object", "default": {"$ref": "#/nowhere"}},
    ):
        assert ResponseFormat(good).schema == good


@pytest.mark.anyio
async def test_two_tools_of_one_name_are_refused_before_sending() -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    with Simulator() as sim:
        source = Source(
            "anthropic", "claude-haiku-4-5", api_key=KEY, base_url=sim.base_url("anthropic")
        )
        async with Client([source]) as client:
            with pytest.raises(InvalidInputError, match=r"tools\[1\] is named 'lookup'"):
                await client.complete(PROMPT, tools=[tool, dict(tool)])
        assert sim.stats.requests == 0
