"""A dict schema's answer is validated against the caller's own schema (jsonschema), on
every wire and in streams, not against the schema rewritten for the wire.

The simulator answers a schema request with ``example_value`` of the schema it received
(integers at their ``minimum``, strings ``"sim"``, every property filled); in ``invalid``
mode it leaves out the first required property. Anthropic receives ``minimum`` as words in
the description (STRUCTURED.md §3.2, §3.6), so its simulated answer is ``1``: below the
caller's ``minimum: 3``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from polythink import Client, ResponseFormat, Source, structured
from polythink.errors import OutputValidationError
from polythink.simulator import Settings, Simulator
from polythink.structured import parse_output, schema_validator
from polythink.types import Response
from tests.test_structured_types import answer

pytestmark = pytest.mark.anyio

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 3}},
    "required": ["a"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Give the number"}]
BELOW_MINIMUM = {"type": "minimum", "loc": ("a",), "msg": "1 is less than the minimum of 3"}
MISSING_A = {"type": "required", "loc": (), "msg": "'a' is a required property"}

# (provider, model, what the simulated valid-mode answer gives)
WIRES = [
    ("openai", "gpt-5.5", {"a": 3}),
    ("openai-responses", "gpt-5.5", {"a": 3}),
    ("anthropic", "claude-sonnet-4-5", BELOW_MINIMUM),
    ("gemini", "gemini-3-flash", {"a": 3}),
    ("deepseek", "deepseek-v4-pro", {"a": 3}),  # json_object, the schema in the prompt
]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(today="2026-06-01")) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def valid_answers(sim: Simulator) -> Iterator[None]:
    yield
    sim.settings.structured_output = "valid"


def source(sim: Simulator, provider: str, model: str) -> Source:
    return Source(provider, model, base_url=sim.base_url(provider), api_key="sim")


async def streamed(client: Client, response_format: Any) -> Response[Any]:
    done: Response[Any] | None = None
    async for event in client.stream(USER, response_format=response_format):
        if event.type == "done":
            done = event.response
    assert done is not None
    return done


@pytest.mark.parametrize(("provider", "model", "expected"), WIRES)
async def test_a_dict_schema_answer_is_validated_on_every_wire(
    sim: Simulator, provider: str, model: str, expected: dict[str, Any]
) -> None:
    async with Client([source(sim, provider, model)]) as client:
        if "loc" not in expected:
            assert (await client.complete(USER, response_format=SCHEMA)).parsed == expected
            assert (await streamed(client, SCHEMA)).parsed == expected
            return
        for call in (client.complete(USER, response_format=SCHEMA), streamed(client, SCHEMA)):
            with pytest.raises(OutputValidationError) as caught:
                await call
            assert caught.value.errors == [expected]
            assert caught.value.text == '{"a": 1}'
            assert str(caught.value).startswith(
                f"{provider} model {model!r} answered JSON that does not validate against the "
                "response_format schema: 1 error(s), at $.a: 1 is less than the minimum of 3"
            )


@pytest.mark.parametrize(("provider", "model", "expected"), WIRES)
async def test_an_invalid_answer_to_a_dict_schema_raises_on_every_wire(
    sim: Simulator, provider: str, model: str, expected: Any
) -> None:
    sim.settings.structured_output = "invalid"
    async with Client([source(sim, provider, model)]) as client:
        for call in (client.complete(USER, response_format=SCHEMA), streamed(client, SCHEMA)):
            with pytest.raises(OutputValidationError) as caught:
                await call
            assert caught.value.errors == [MISSING_A]
            assert caught.value.text == "{}"
            assert "1 error(s), at $: 'a' is a required property" in str(caught.value)


def test_errors_name_the_json_path_and_are_bounded() -> None:
    fmt = ResponseFormat(
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"qty": {"type": "integer"}}},
                },
                "s": {"enum": ["x"]},
            },
        }
    )
    long = "y" * 500
    with pytest.raises(OutputValidationError) as caught:
        parse_output(answer(f'{{"items": [{{"qty": 1}}, {{"qty": "2"}}], "s": "{long}"}}'), fmt)
    errors = caught.value.errors
    assert [(e["type"], e["loc"]) for e in errors] == [
        ("type", ("items", 1, "qty")),
        ("enum", ("s",)),
    ]
    assert errors[0]["msg"] == "'2' is not of type 'integer'"
    assert errors[1]["msg"] == f"'{long[:196]}..."  # 200 characters at most
    assert "2 error(s), at $.items[1].qty: '2' is not of type 'integer'; at $.s: 'yyy" in str(
        caught.value
    )
    many = ResponseFormat({"type": "array", "items": {"type": "string"}})
    with pytest.raises(OutputValidationError, match=r"response_format schema: 20\+ error") as cut:
        parse_output(answer(str(list(range(50)))), many)
    assert len(cut.value.errors) == 20


def test_the_validator_follows_the_schema_draft_and_is_built_once() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "minimum": 3,
        "exclusiveMinimum": True,
    }
    fmt = ResponseFormat(draft4)
    with pytest.raises(OutputValidationError, match="less than or equal to the minimum of 3"):
        parse_output(answer("3"), fmt)
    assert parse_output(answer("4"), ResponseFormat(draft4)).parsed == 4
    assert type(schema_validator(fmt)).__name__ == "Draft4Validator"
    assert schema_validator(ResponseFormat(draft4)) is schema_validator(fmt)
    assert type(schema_validator(ResponseFormat(SCHEMA))).__name__ == "Draft202012Validator"
    # Without $schema it is Draft 2020-12, where exclusiveMinimum must be a number.
    bare = {key: value for key, value in draft4.items() if key != "$schema"}
    with pytest.raises(ValueError, match=r"not a valid JSON Schema \(Draft202012\): at "):
        schema_validator(ResponseFormat(bare))
    assert isinstance(structured._validators[ResponseFormat(bare).key], ValueError)


async def test_a_schema_that_is_not_json_schema_fails_before_sending() -> None:
    # Nothing listens on this address: any HTTP attempt would be a connection error.
    dead = Source("openai", "gpt-5.5", base_url="http://127.0.0.1:9/v1", api_key="k")
    async with Client([dead]) as client:
        with pytest.raises(ValueError, match=r"at \$.properties.a.type: 'int' is not valid"):
            await client.complete(
                USER, response_format={"type": "object", "properties": {"a": {"type": "int"}}}
            )


def test_a_ref_that_does_not_resolve_raises_a_polythink_error() -> None:
    fmt = ResponseFormat({"type": "object", "properties": {"a": {"$ref": "https://x.test/a"}}})
    with pytest.raises(OutputValidationError, match="put the definition in the schema's \\$defs"):
        parse_output(answer('{"a": 1}'), fmt)
