"""Structured answers in each wire's recorded shape, parsed into the caller's model.

Each test serves a real recorded answer from ``../shared/fixtures/real`` (reasoning models
all: o3-mini on Chat Completions, a Responses answer with a reasoning summary, Claude Sonnet
4.5 with a thinking block, Gemini 3 Pro with a thought part), with only its answer text, or
its stop signal, changed into what a structured answer carries on that wire
(``../shared/wire/STRUCTURED.md``: §1.3 ``message.refusal`` and ``finish_reason: "length"``;
§2 ``refusal`` content parts and ``status: "incomplete"``; §3.3 ``stop_reason: "refusal"``
with ``stop_details`` and ``"max_tokens"``; §4.2 ``finishReason`` ``SAFETY`` and
``MAX_TOKENS``). Usage, reasoning and ids stay as recorded, so the expected numbers are the
recording's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel

from polythink import Client, Source, Usage
from polythink.errors import OutputRefusedError, OutputTruncatedError, OutputValidationError
from tests.conftest import cassette

pytestmark = [pytest.mark.fixture_replay, pytest.mark.anyio]


class Line(BaseModel):
    sku: str
    qty: int


class Invoice(BaseModel):
    number: str
    lines: list[Line]
    note: str | None = None


ANSWER = '{"number": "INV-7", "lines": [{"sku": "A1", "qty": 2}], "note": null}'
EXPECTED = Invoice(number="INV-7", lines=[Line(sku="A1", qty=2)], note=None)
USER = [{"role": "user", "content": "Bill the order"}]
REFUSAL = "I can't help with that."

Edit = Callable[[dict[str, Any]], None]


def chat_text(text: str | None) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        data["choices"][0]["message"]["content"] = text

    return edit


def responses_text(text: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        message = next(item for item in data["output"] if item["type"] == "message")
        message["content"][0]["text"] = text

    return edit


def anthropic_text(text: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        block = next(block for block in data["content"] if block["type"] == "text")
        block["text"] = text

    return edit


def gemini_text(text: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        parts = data["candidates"][0]["content"]["parts"]
        part = next(part for part in parts if not part.get("thought"))
        part["text"] = text

    return edit


def both(*edits: Edit) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        for each in edits:
            each(data)

    return edit


# wire: (recording, interaction, url, source, usage as recorded)
WIRES: dict[str, tuple[str, int, str, Source, Usage]] = {
    "chat": (
        "pai_openai_chat_reasoning_effort_and_responses.yaml",
        1,
        "https://api.openai.com/v1/chat/completions",
        Source("openai", "o3-mini", api_key="sk-test-0123456789"),
        Usage(577, 2320, 1792, 0, None),
    ),
    "responses": (
        "pai_openai_responses_reasoning_summary_auto.yaml",
        0,
        "https://api.openai.com/v1/responses",
        Source("openai-responses", "o3-mini", api_key="sk-test-0123456789"),
        Usage(34, 226, 59, 0, None),
    ),
    "anthropic": (
        "pai_anthropic_thinking_nonstream.yaml",
        0,
        "https://api.anthropic.com/v1/messages",
        Source("anthropic", "claude-sonnet-4-5", api_key="sk-ant-test-0123456789"),
        Usage(43, 321, None, 0, 0, 0),
    ),
    "gemini": (
        "pai_gemini_thinking_nonstream.yaml",
        0,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro-preview:generateContent",
        Source("gemini", "gemini-3-pro-preview", api_key="gm-test-0123456789"),
        Usage(29, 1737, 1001, None, None),
    ),
}
TEXT_EDITS = {
    "chat": chat_text,
    "responses": responses_text,
    "anthropic": anthropic_text,
    "gemini": gemini_text,
}


def recorded(wire: str, edit: Edit) -> dict[str, Any]:
    name, index, _, _, _ = WIRES[wire]
    data = copy.deepcopy(cassette(name).interactions[index].response_json)
    edit(data)
    return data


async def call(wire: str, data: dict[str, Any], response_format: Any = Invoice) -> Any:
    _, _, url, source, _ = WIRES[wire]
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=httpx.Response(200, json=data))
        async with Client([source]) as client:
            response = await client.complete(USER, response_format=response_format)
    return response, json.loads(route.calls[0].request.content)


@pytest.mark.parametrize("wire", list(WIRES))
async def test_a_recorded_answer_parses_into_the_model(wire: str) -> None:
    data = recorded(wire, TEXT_EDITS[wire](ANSWER))
    response, _ = await call(wire, data)
    assert response.parsed == EXPECTED
    assert response.text == ANSWER
    assert response.usage == WIRES[wire][4]
    assert response.finish_reason == "stop"
    assert response.refusal is None


@pytest.mark.parametrize("wire", ["responses", "anthropic", "gemini"])
async def test_reasoning_text_stays_out_of_the_parsed_text(wire: str) -> None:
    data = recorded(wire, TEXT_EDITS[wire](ANSWER))
    response, _ = await call(wire, data)
    assert response.reasoning  # the recorded summary, thinking block or thought part
    assert response.reasoning not in response.text
    assert response.parsed == EXPECTED


async def test_a_dict_schema_gives_the_decoded_json() -> None:
    schema = {"type": "object", "properties": {"number": {"type": "string"}}}
    data = recorded("chat", chat_text('{"number": "INV-7"}'))
    response, sent = await call("chat", data, response_format=schema)
    assert response.parsed == {"number": "INV-7"}
    assert sent["response_format"]["json_schema"]["schema"] == {
        "type": "object",
        "properties": {"number": {"type": "string"}},
        "required": ["number"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("wire", list(WIRES))
async def test_an_answer_that_does_not_validate_raises_with_its_text(wire: str) -> None:
    text = '{"number": 7, "lines": []}'
    data = recorded(wire, TEXT_EDITS[wire](text))
    with pytest.raises(OutputValidationError) as caught:
        await call(wire, data)
    error = caught.value
    assert type(error) is OutputValidationError
    assert error.text == text
    assert [(e["type"], e["loc"]) for e in error.errors] == [("string_type", ("number",))]
    assert error.response is not None
    assert error.response.usage == WIRES[wire][4]
    assert error.error_type == "validation_error"


@pytest.mark.parametrize("wire", ["chat", "anthropic"])
async def test_text_that_is_not_json_raises(wire: str) -> None:
    data = recorded(wire, TEXT_EDITS[wire]("Here is your invoice: INV-7"))
    with pytest.raises(OutputValidationError) as caught:
        await call(wire, data)
    assert caught.value.errors[0]["type"] == "json_invalid"


def chat_refusal(data: dict[str, Any]) -> None:
    message = data["choices"][0]["message"]
    message["content"], message["refusal"] = None, REFUSAL


def responses_refusal(data: dict[str, Any]) -> None:
    message = next(item for item in data["output"] if item["type"] == "message")
    message["content"] = [{"type": "refusal", "refusal": REFUSAL}]


def anthropic_refusal(data: dict[str, Any]) -> None:
    data["content"] = [block for block in data["content"] if block["type"] != "text"]
    data["stop_reason"] = "refusal"
    data["stop_details"] = {"type": "refusal", "category": "cyber", "explanation": REFUSAL}


def gemini_refusal(data: dict[str, Any]) -> None:
    candidate = data["candidates"][0]
    candidate["content"]["parts"] = [p for p in candidate["content"]["parts"] if p.get("thought")]
    candidate["finishReason"] = "SAFETY"


@pytest.mark.parametrize(
    ("wire", "edit", "words"),
    [
        ("chat", chat_refusal, REFUSAL),
        ("responses", responses_refusal, REFUSAL),
        ("anthropic", anthropic_refusal, REFUSAL),
        ("gemini", gemini_refusal, None),
    ],
)
async def test_a_refusal_raises_the_same_error_on_every_wire(
    wire: str, edit: Edit, words: str | None
) -> None:
    with pytest.raises(OutputRefusedError) as caught:
        await call(wire, recorded(wire, edit))
    error = caught.value
    assert error.refusal == words
    assert error.response is not None
    assert error.response.finish_reason == "content_filter"
    assert error.response.refusal == words
    assert error.errors[0]["type"] == "refusal"
    assert isinstance(error, OutputValidationError)


async def test_a_refusal_without_response_format_is_an_answer() -> None:
    data = recorded("chat", chat_refusal)
    _, _, url, source, _ = WIRES["chat"]
    with respx.mock() as mock:
        mock.post(url).mock(return_value=httpx.Response(200, json=data))
        async with Client([source]) as client:
            response = await client.complete(USER)
    assert (response.text, response.refusal) == (REFUSAL, REFUSAL)
    assert response.finish_reason == "content_filter"
    assert response.parsed is None


CUT = '{"number": "INV-7", "lines": [{"sku": "A'


def chat_cut(data: dict[str, Any]) -> None:
    chat_text(CUT)(data)
    data["choices"][0]["finish_reason"] = "length"


def responses_cut(data: dict[str, Any]) -> None:
    responses_text(CUT)(data)
    data["status"] = "incomplete"
    data["incomplete_details"] = {"reason": "max_output_tokens"}


def anthropic_cut(data: dict[str, Any]) -> None:
    anthropic_text(CUT)(data)
    data["stop_reason"] = "max_tokens"


def gemini_cut(data: dict[str, Any]) -> None:
    gemini_text(CUT)(data)
    data["candidates"][0]["finishReason"] = "MAX_TOKENS"


@pytest.mark.parametrize(
    ("wire", "edit", "spent"),
    [
        ("chat", chat_cut, "after 2320 output tokens (1792 of them reasoning) (length)"),
        ("responses", responses_cut, "after 226 output tokens (59 of them reasoning)"),
        ("anthropic", anthropic_cut, "after 321 output tokens (max_tokens)"),
        ("gemini", gemini_cut, "after 1737 output tokens (1001 of them reasoning) (MAX_TOKENS)"),
    ],
)
async def test_an_answer_cut_by_the_output_limit_says_so(wire: str, edit: Edit, spent: str) -> None:
    with pytest.raises(OutputTruncatedError) as caught:
        await call(wire, recorded(wire, edit))
    error = caught.value
    assert spent in str(error)
    assert "raise max_tokens, or lower reasoning_effort" in str(error)
    assert error.text == CUT
    assert error.response is not None
    assert error.response.output_limited


async def test_a_cut_answer_that_parses_is_still_cut() -> None:
    # openai-python raises on finish_reason "length" before parsing (§1.4); so does polythink,
    # whatever the text.
    with pytest.raises(OutputTruncatedError):
        await call("chat", recorded("chat", both(chat_text(ANSWER), chat_cut_reason)))


def chat_cut_reason(data: dict[str, Any]) -> None:
    data["choices"][0]["finish_reason"] = "length"


async def test_inline_think_tags_and_a_code_fence_are_not_the_json() -> None:
    fenced = f"<think>the user wants an invoice</think>\n```json\n{ANSWER}\n```"
    response, _ = await call("chat", recorded("chat", chat_text(fenced)))
    assert response.parsed == EXPECTED


async def test_an_empty_answer_says_so() -> None:
    with pytest.raises(OutputValidationError, match="gave an empty answer") as caught:
        await call("chat", recorded("chat", chat_text("   ")))
    assert caught.value.error_type == "empty_output"
