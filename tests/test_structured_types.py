"""``response_format`` values: what is accepted, how each is read, what is refused and why;
the partial-object helper; the per-wire schema work done once per format."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from pydantic import BaseModel

from polythink import Client, PartialJSON, ResponseFormat, Source
from polythink.errors import OutputValidationError
from polythink.structured import json_text, parse_output
from polythink.transports import schema as wire_schema
from polythink.types import Message, Response, ToolCall

ACCEPTED = "a pydantic model class, a JSON Schema dict"


class Point(BaseModel):
    x: int
    y: int


POINT_SCHEMA = Point.model_json_schema()


def test_a_model_class_is_its_schema_named_after_it() -> None:
    fmt = ResponseFormat.coerce(Point)
    assert fmt is not None
    assert (fmt.kind, fmt.name, fmt.strict, fmt.output_type) == (
        "json_schema",
        "Point",
        None,
        Point,
    )
    assert fmt.schema == POINT_SCHEMA
    # Converted once per class: the next call gets the same value.
    assert ResponseFormat.coerce(Point) is fmt


def test_a_bare_schema_is_named_after_its_title_or_response() -> None:
    titled = ResponseFormat({"type": "object", "title": "Calendar Event!"})
    assert titled.name == "Calendar_Event"
    assert ResponseFormat({"type": "object"}).name == "response"


def test_openai_envelopes_keep_their_fields() -> None:
    chat = ResponseFormat(
        {
            "type": "json_schema",
            "json_schema": {
                "name": "pt",
                "schema": POINT_SCHEMA,
                "strict": True,
                "description": "A point",
            },
        }
    )
    assert (chat.name, chat.strict, chat.description, chat.schema) == (
        "pt",
        True,
        "A point",
        POINT_SCHEMA,
    )
    responses = ResponseFormat({"type": "json_schema", "name": "pt", "schema": POINT_SCHEMA})
    assert (responses.name, responses.strict) == ("pt", False)


def test_json_object_and_text() -> None:
    fmt = ResponseFormat.coerce({"type": "json_object"})
    assert fmt is not None
    assert (fmt.kind, fmt.schema) == ("json_object", None)
    assert ResponseFormat.coerce({"type": "text"}) is None
    assert ResponseFormat.coerce(None) is None


def test_keywords_override_the_envelope() -> None:
    fmt = ResponseFormat(Point, name="point", description="2D", strict=False)
    assert (fmt.name, fmt.description, fmt.strict) == ("point", "2D", False)


def test_the_key_tells_formats_apart() -> None:
    keys = {
        ResponseFormat(Point).key,
        ResponseFormat(Point, strict=False).key,
        ResponseFormat(Point, name="other").key,
        ResponseFormat({"type": "object", "properties": {"x": {"type": "integer"}}}).key,
        ResponseFormat({"type": "json_object"}).key,
    }
    assert len(keys) == 5
    # Key order in the schema does not matter.
    assert (
        ResponseFormat({"type": "object", "title": "T"}).key
        == ResponseFormat({"title": "T", "type": "object"}).key
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (3, ACCEPTED),
        ("json", ACCEPTED),
        (dict, "is not a pydantic model"),
        ({"foo": 1}, "must be a JSON Schema"),
        ({"type": "json_object", "schema": {}}, "takes no other key"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, "needs its 'schema'"),
        (
            {"type": "json_schema", "json_schema": {"schema": {"type": "object"}, "x": 1}},
            "unknown key",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}},
            "is refused by providers",
        ),
        ({"type": "object", "properties": {"x": {"const": float("nan")}}}, "must be plain JSON"),
    ],
)
def test_bad_values_say_what_is_accepted(value: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ResponseFormat.coerce(value)


def test_bad_keywords_are_refused() -> None:
    with pytest.raises(ValueError, match="strict must be a bool"):
        ResponseFormat(Point, strict="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is refused by providers"):
        ResponseFormat(Point, name="x" * 65)


def test_the_client_refuses_a_bad_format_before_sending() -> None:
    client = Client([Source("openai", "gpt-5.5", api_key="sk-test-0123456789")])
    with pytest.raises(ValueError, match=ACCEPTED):
        client.request([{"role": "user", "content": "hi"}], response_format=42)  # type: ignore[arg-type]
    request = client.request([{"role": "user", "content": "hi"}], response_format=Point)
    assert request.response_format is ResponseFormat.coerce(Point)


def test_partial_json_grows_with_the_deltas() -> None:
    partial = PartialJSON()
    assert partial.value() is None
    values = []
    for delta in ['{"na', 'me": "Ali', 'ce", "tags": ["a"', ', "b"]}']:
        partial.feed(delta)
        values.append(partial.value())
    assert values == [
        {},
        {"name": "Ali"},
        {"name": "Alice", "tags": ["a"]},
        {"name": "Alice", "tags": ["a", "b"]},
    ]
    assert partial.text == '{"name": "Alice", "tags": ["a", "b"]}'


def test_partial_json_skips_a_fence_and_keeps_the_last_good_value() -> None:
    partial = PartialJSON()
    partial.feed('```json\n{"x": 1')
    assert partial.value() == {"x": 1}
    partial.feed("}}}")  # not JSON any more: the last good value stays
    assert partial.value() == {"x": 1}


@pytest.mark.parametrize(
    ("text", "body"),
    [
        ('  {"x": 1}\n', '{"x": 1}'),
        ('<think>\nhmm {"x": 2}\n</think>{"x": 1}', '{"x": 1}'),
        ('```json\n{"x": 1}\n```', '{"x": 1}'),
        ("```\n[1]\n```", "[1]"),
        ("<think>never closed", ""),
    ],
)
def test_json_text(text: str, body: str) -> None:
    assert json_text(text) == body


def answer(text: str, **fields: Any) -> Response:
    values: dict[str, Any] = {
        "text": text,
        "reasoning": None,
        "tool_calls": [],
        "finish_reason": "stop",
        "usage": None,
        "model": "m",
        "provider": "openai",
        "source_index": 0,
        "message": Message(role="assistant", content=text),
    }
    values.update(fields)
    return Response(**values)


def test_a_tool_turn_has_no_parsed_value() -> None:
    call = ToolCall(id="c1", name="lookup", arguments="{}")
    turn = answer("", tool_calls=[call], finish_reason="tool_calls")
    assert parse_output(turn, ResponseFormat(Point)) is turn


def test_a_dict_schema_wants_an_object_where_its_root_is_one() -> None:
    with pytest.raises(
        OutputValidationError, match="at \\$: \\[1, 2\\] is not of type 'object'"
    ) as caught:
        parse_output(answer("[1, 2]"), ResponseFormat({"type": "object"}))
    assert caught.value.errors == [
        {"type": "type", "loc": (), "msg": "[1, 2] is not of type 'object'"}
    ]
    with pytest.raises(OutputValidationError, match="JSON list, not an object"):
        parse_output(answer("[1, 2]"), ResponseFormat({"type": "json_object"}))
    parsed = parse_output(answer("[1, 2]"), ResponseFormat({"type": "array"}))
    assert parsed.parsed == [1, 2]


def test_the_schema_transform_runs_once_per_format(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = wire_schema.openai_strict_schema

    def counted(schema: Any, changes: Any) -> Any:
        calls.append(json.dumps(schema, sort_keys=True))
        return real(schema, changes)

    monkeypatch.setattr(wire_schema, "openai_strict_schema", counted)
    monkeypatch.setattr(wire_schema, "_cache", {})
    monkeypatch.setattr(wire_schema, "_plans", {})
    fmt = {"type": "object", "title": "Once", "properties": {"n": {"type": "integer"}}}
    for model in ("gpt-5.5", "gpt-5.5", "gpt-5.4"):
        plan = wire_schema.chat_output(
            ResponseFormat(fmt), provider="openai", model=model, has_tools=False
        )
        assert plan.fields["response_format"]["json_schema"]["schema"]["required"] == ["n"]
    assert len(calls) == 1  # two models, three calls: one transform


def test_response_stays_a_frozen_dataclass_with_parsed() -> None:
    response = answer('{"x": 1, "y": 2}')
    parsed = parse_output(response, ResponseFormat(Point))
    assert parsed.parsed == Point(x=1, y=2)
    assert response.parsed is None
    assert dataclasses.replace(parsed, text="x").parsed == Point(x=1, y=2)
