"""Each wire's rewrite of a schema that changes what the provider enforces is one line per
kind of change in ``response.warnings``, naming the keywords and their JSON paths; computed
once per schema and wire with the rewritten schema, appended per call.

Facts: OpenAI strict mode makes every property required and takes no ``default`` (§1.2);
Anthropic moves ``minimum``, ``pattern``, ``default`` … into the description (§3.2, §3.6);
Gemini's ``responseJsonSchema`` keeps only the keywords it documents (§4.1) — STRUCTURED.md,
sources read 2026-12-01.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polythink import Client, ResponseFormat, Source
from polythink.simulator import Settings, Simulator
from polythink.transports import schema as wire_schema

pytestmark = pytest.mark.anyio

WITH_B = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "minimum": 3},
        "b": {"type": "string", "default": "x", "pattern": "^x"},
    },
    "required": ["a"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Give the number"}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(today="2026-06-01")) as simulator:
        yield simulator


def source(sim: Simulator, provider: str, model: str) -> Source:
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim")


async def test_the_rewrites_reach_response_warnings(sim: Simulator) -> None:
    answered = {
        **WITH_B,
        "properties": {**WITH_B["properties"], "b": {"type": "string", "default": "s"}},
    }
    async with Client([source(sim, "gemini", "gemini-3-flash")]) as client:
        response = await client.complete(USER, response_format=answered)
    assert response.parsed == {"a": 3, "b": "sim"}
    assert (
        "response_format: gemini does not take default (at $.properties.b): not sent; the "
        "answer is validated locally against them"
    ) in response.warnings
    async with Client([source(sim, "openai", "gpt-5.5")]) as client:
        for _ in range(2):  # appended per call, computed once
            response = await client.complete(USER, response_format=answered)
            assert response.parsed == {"a": 3, "b": "sim"}
            assert [w for w in response.warnings if w.startswith("response_format")] == [
                "response_format: openai strict mode requires every property: made "
                "$.properties.b required, so the model always fills it",
                "response_format: openai strict mode does not take default (at "
                "$.properties.b): not sent; the answer is validated locally against them",
            ]


def test_each_wire_reports_what_it_enforces_differently() -> None:
    fmt = ResponseFormat(WITH_B)
    against = "the answer is validated locally against them"
    openai = (
        "response_format: openai strict mode requires every property: made $.properties.b "
        "required, so the model always fills it",
        f"response_format: openai strict mode does not take default (at $.properties.b): not "
        f"sent; {against}",
    )
    chat = wire_schema.chat_output(fmt, provider="openai", model="gpt-5.5", has_tools=False)
    assert chat.notes == openai
    assert wire_schema.responses_output(fmt, provider="openai", model="gpt-5.5").notes == openai
    anthropic = (
        "response_format: anthropic does not take minimum (at $.properties.a), default, "
        f"pattern (at $.properties.b): sent as words in the description; {against}"
    )
    plan = wire_schema.anthropic_output(
        fmt, model="claude-opus-4-8", has_tools=False, prefill=False
    )
    assert plan.notes == (anthropic,)
    assert wire_schema.gemini_output(fmt, model="gemini-3-flash", has_tools=False).notes == (
        f"response_format: gemini does not take default, pattern (at $.properties.b): not "
        f"sent; {against}",
    )
    # Only the keywords that constrain are reported; a oneOf loosened to anyOf is.
    union = ResponseFormat(
        {
            "type": "object",
            "title": "T",
            "properties": {
                "p": {"oneOf": [{"type": "string"}, {"type": "integer"}], "examples": [1]},
            },
            "required": ["p"],
        }
    )
    assert wire_schema.gemini_output(union, model="gemini-3-flash", has_tools=False).notes == (
        "response_format: gemini does not take oneOf (at $.properties.p): sent as anyOf; the "
        "answer is validated locally against oneOf",
    )


def test_the_rewrite_notes_are_computed_once_per_schema_and_wire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    real = wire_schema.SchemaChanges.notes

    def counted(self: wire_schema.SchemaChanges, wire: str) -> tuple[str, ...]:
        built.append(wire)
        return real(self, wire)

    monkeypatch.setattr(wire_schema.SchemaChanges, "notes", counted)
    monkeypatch.setattr(wire_schema, "_plans", {})
    for _ in range(3):
        wire_schema.gemini_output(ResponseFormat(WITH_B), model="gemini-3-flash", has_tools=False)
    assert built == ["gemini"]
