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
