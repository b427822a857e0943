"""Nothing the user wrote is dropped: content parts, empty messages and invalid Unicode are
refused before anything is sent, with the part's index, what was wrong and what is accepted.

The part shapes are OpenAI Chat's ``ChatCompletionRequestMessageContentPart{Text,Image,Audio,
File,Refusal}`` (openai OpenAPI document, ``../shared/wire/specs``); which types each wire
carries comes from each provider's spec (Anthropic's ``InputMessage.content`` blocks, the
Responses ``InputContent``, Gemini's ``Part``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, ContentUnsupportedError, Message, Source, Tool, ToolCall
from polythink.conversion import coerce_messages
from polythink.errors import RequestRejectedError
from polythink.types import ResponseFormat

URLS = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "openai-responses": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    ),
}
MODELS = {
    "openai": "gpt-5.5",
    "openai-responses": "gpt-5.5",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}
KEY = "test-key-0000000000000000"
CHAT_ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "model": "gpt-5.5",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Heard."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
}


def source(provider: str) -> Source:
    return Source(provider, MODELS[provider], api_key=KEY, max_retries=0)


# -- a message is checked when it is built ------------------------------------------------


def test_a_text_part_without_its_text_is_refused_naming_the_index() -> None:
    parts = [{"type": "text", "text": "Look:"}, {"type": "text", "txt": "hello"}]
    expected = (
        "user message content part 1 (text) has no 'text' string (keys: txt, type); accepted: "
        "{'type': 'text', 'text': '...'}"
    )
    with pytest.raises(ValueError, match="has no 'text' string") as built:
        Message(role="user", content=parts)
    assert str(built.value) == expected
    with pytest.raises(ValueError, match="has no 'text' string") as coerced:
        coerce_messages(
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": parts}]
        )
    assert str(coerced.value) == f"messages[1]: {expected}"


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        (
            {"type": "image_url"},
            "(image_url) has no 'image_url' with a 'url' (keys: type); accepted: {'type': "
            "'image_url', 'image_url': {'url': 'https://... or data:...'}}",
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "UklGRg=="}},
            "(input_audio) needs 'input_audio' with 'data' (base64) and 'format' strings (keys: "
            "input_audio, type); accepted: {'type': 'input_audio', 'input_audio': {'data': "
            "'<base64>', 'format': 'wav'}}",
        ),
        (
            {"type": "file", "file": {"filename": "a.pdf"}},
            "(file) needs 'file' with a 'file_data' or 'file_id' string (keys: file, type); "
            "accepted: {'type': 'file', 'file': {'file_data': 'data:...' or 'file_id': '...'}}",
        ),
        (
            {"text": "no type"},
            "has no 'type' string (keys: text); accepted types: text, image_url, input_audio, "
            "file, refusal, or a block type of the provider's own wire",
        ),
        (
            "bare string",
            "must be a dict with a 'type'; got str; accepted: {'type': 'text', 'text': '...'}; "
            "{'type': 'image_url', 'image_url': {'url': 'https://... or data:...'}}; {'type': "
            "'input_audio', 'input_audio': {'data': '<base64>', 'format': 'wav'}}; {'type': "
            "'file', 'file': {'file_data': 'data:...' or 'file_id': '...'}}; {'type': "
            "'refusal', 'refusal': '...'}",
        ),
    ],
)
def test_each_part_type_needs_its_required_keys(part: Any, problem: str) -> None:
    with pytest.raises(ValueError, match=r"^user message content part 0 ") as caught:
        Message(role="user", content=[part])
    assert str(caught.value) == f"user message content part 0 {problem}"


@pytest.mark.parametrize("role", ["system", "developer", "user"])
def test_a_message_built_without_content_is_refused_as_the_dict_is(role: str) -> None:
    message = (
        f"{role} message has no content: it needs 'content' (a string or a list of content parts)"
    )
    with pytest.raises(ValueError, match="has no content") as built:
        Message(role=role)
    with pytest.raises(ValueError, match="has no content") as coerced:
        Message.coerce({"role": role})
    assert str(built.value) == str(coerced.value) == message
    with pytest.raises(ValueError, match="content list is empty") as empty:
        Message(role=role, content=[])
    assert str(empty.value) == (
        f"{role} message has no content: its content list is empty; it needs a string or at "
        "least one content part"
    )


def test_an_assistant_message_needs_content_or_some_output() -> None:
    with pytest.raises(ValueError, match="has no content") as caught:
        Message(role="assistant")
    assert str(caught.value) == (
        "assistant message has no content: it needs 'content' (a string or a list of content "
        "parts), or tool_calls, reasoning, reasoning_items, refusal, audio_id or function_call"
    )
    call = ToolCall(id="c1", name="f", arguments="{}")
    assert Message(role="assistant", tool_calls=(call,)).content is None


@pytest.mark.parametrize(
    ("message", "where"),
    [
        ({"role": "user", "content": "caf\udce9 au lait"}, "user message content"),
        (
            {"role": "user", "content": [{"type": "text", "text": "ok \ud83d"}]},
            "user message content part 0 (text)",
        ),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": '{"q": "\udce9"}'},
                    }
                ],
            },
            "assistant message tool call 'c1' arguments",
        ),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_message_and_field(
    message: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError, match="holds a lone surrogate") as caught:
        coerce_messages([{"role": "system", "content": "Be brief."}, message])
    text = str(caught.value)
    assert text.startswith(f"messages[1]: {where} holds a lone surrogate U+")
    assert "text must be valid Unicode (UTF-8 encodable)" in text
    with pytest.raises(ValueError, match=r"lone surrogate U\+DCE9 at character 3:"):
        Message(role="user", content="caf\udce9")


# -- each wire refuses what it cannot carry, before sending --------------------------------

VIDEO = {"type": "video", "video": {"url": "https://x.test/clip.mp4"}}


@pytest.mark.anyio
@pytest.mark.parametrize("provider", list(URLS))
async def test_a_part_no_wire_carries_is_refused_before_sending(provider: str) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "What happens?"}, VIDEO]}]
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URLS[provider]).mock(return_value=httpx.Response(500))
        async with Client([source(provider)]) as client:
            with pytest.raises(ContentUnsupportedError) as caught:
                await client.complete(messages)
    assert route.call_count == 0
    error = caught.value
    assert isinstance(error, ValueError)
    assert isinstance(error, RequestRejectedError)
    assert error.error_type == "unsupported_content"
    accepted = {
        "openai": "file, image_url, input_audio, text",
        "openai-responses": "file, image_url, input_file, input_image, input_text, text",
        "anthropic": "code_execution_tool_result, container_upload, document, image, image_url, "
        "mcp_tool_result, mcp_tool_use, redacted_thinking, search_result, server_tool_use, text, "
        "thinking, tool_result, tool_use, web_search_tool_result",
        "gemini": "image_url, text",
    }[provider]
    assert error.message == (
        f"{provider} cannot carry content part 1 of message 0 (user) (type 'video'); accepted in "
        f"user messages on this wire: {accepted}"
    )


async def refused_call(client: Client, mode: str, messages: Any) -> None:
    if mode == "complete":
        await client.complete(messages)
        return
    async for _ in client.stream(messages):
        pass


REFUSED = {
    "a video part": [{"role": "user", "content": [{"type": "text", "text": "What?"}, VIDEO]}],
    "an assistant's audio": [
        {"role": "user", "content": "Say it."},
        {"role": "assistant", "content": "Said.", "audio": {"id": "audio_1"}},
        {"role": "user", "content": "Again."},
    ],
}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("provider", "what"),
    [
        (provider, what)
        for what in REFUSED
        for provider in (*URLS, "deepseek")
        # Chat carries an assistant's audio.
        if not (what == "an assistant's audio" and provider in ("openai", "deepseek"))
    ],
)
async def test_a_refusal_before_sending_names_the_source_that_refused(
    provider: str, what: str
) -> None:
    model = MODELS.get(provider, "deepseek-v4-flash")
    sources = [Source(provider, model, api_key=KEY, max_retries=0) for _ in range(3)]
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(url__regex=r".*").mock(return_value=httpx.Response(500))
        async with Client(sources) as client:
            for mode in ("complete", "stream"):
                with pytest.raises(ContentUnsupportedError) as caught:
                    await refused_call(client, mode, REFUSED[what])
                error = caught.value
                assert (error.provider, error.source_index) == (provider, 2), mode
                assert [e.source_index for e in error.previous] == [0, 1], mode
                assert str(error).endswith(
                    f"(provider={provider}, source=2, type=unsupported_content)"
                ), mode
    assert route.call_count == 0


@pytest.mark.anyio
async def test_a_system_image_is_refused_on_gemini_rather_than_dropped() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x.test/logo.png"}}
    system = {"role": "system", "content": [{"type": "text", "text": "Brand:"}, image]}
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URLS["gemini"]).mock(return_value=httpx.Response(500))
        async with Client([source("gemini")]) as client:
            with pytest.raises(
                ContentUnsupportedError, match=r"accepted in system messages on this wire: text \("
            ):
                await client.complete([system, {"role": "user", "content": "Hi"}])
    assert route.call_count == 0


@pytest.mark.anyio
async def test_failover_takes_audio_to_the_source_whose_wire_carries_it() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Transcribe:"}, audio]}]
    with respx.mock(assert_all_called=False) as mock:
        anthropic = mock.post(URLS["anthropic"]).mock(return_value=httpx.Response(500))
        chat = mock.post(URLS["openai"]).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        async with Client([source("anthropic"), source("openai")]) as client:
            response = await client.complete(messages)
    assert (response.text, response.source_index, anthropic.call_count) == ("Heard.", 1, 0)
    assert json.loads(chat.calls[0].request.content)["messages"][0]["content"][1] == audio


@pytest.mark.anyio
async def test_a_file_part_goes_to_responses_as_input_file() -> None:
    pdf = {
        "type": "file",
        "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"},
    }
    answer = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-5.5",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Two pages.", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 20, "output_tokens": 3, "total_tokens": 23},
    }
    with respx.mock() as mock:
        route = mock.post(URLS["openai-responses"]).mock(
            return_value=httpx.Response(200, json=answer)
        )
        async with Client([source("openai-responses")]) as client:
            await client.complete([{"role": "user", "content": [pdf]}])
    body = json.loads(route.calls[0].request.content)
    # InputFileContent: type input_file with file_data / file_id / filename (openai OpenAPI).
    assert body["input"][0]["content"] == [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}
    ]


@pytest.mark.anyio
async def test_an_escaped_lone_surrogate_in_an_answer_becomes_a_replacement_character() -> None:
    # JSON may escape a lone surrogate; no UTF-8 text can hold it, so the turn keeps U+FFFD
    # and can be sent back.
    raw = json.dumps(CHAT_ANSWER).replace("Heard.", "Heard \\ud83d.").encode()
    with respx.mock() as mock:
        route = mock.post(URLS["openai"]).mock(return_value=httpx.Response(200, content=raw))
        async with Client([source("openai")]) as client:
            first = await client.complete([{"role": "user", "content": "Hi"}])
            await client.complete(
                [
                    {"role": "user", "content": "Hi"},
                    first.message,
                    {"role": "user", "content": "And?"},
                ]
            )
    assert first.text == "Heard \ufffd."
    assert json.loads(route.calls[1].request.content)["messages"][1]["content"] == "Heard \ufffd."


@pytest.mark.anyio
async def test_a_lone_surrogate_elsewhere_in_the_request_is_a_value_error_naming_it() -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URLS["openai"]).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        async with Client([source("openai")]) as client:
            with pytest.raises(ValueError, match=r"^system_suffix holds a lone surrogate U\+D800"):
                await client.complete([{"role": "user", "content": "Hi"}], system_suffix="x\ud800")
            with pytest.raises(
                ValueError,
                match=r"^extra_body\['user'\] holds a lone surrogate U\+DFFF at character 3:",
            ):
                await client.complete(
                    [{"role": "user", "content": "Hi"}], extra_body={"user": "id-\udfff"}
                )
    assert route.call_count == 0


SURROGATE_HINT = (
    "text must be valid Unicode (UTF-8 encodable); it usually comes from bytes decoded with "
    "errors='surrogateescape' or a cut UTF-16 pair"
)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        (
            {"description": "d\ud800"},
            "tool 'f': description holds a lone surrogate U+D800 at character 1",
        ),
        (
            {
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string", "description": "caf\udce9"}},
                }
            },
            "tool 'f': parameters['properties']['q']['description'] holds a lone surrogate "
            "U+DCE9 at character 3",
        ),
        (
            {"parameters": {"type": "object", "properties": {"\ud83d": {"type": "string"}}}},
            "tool 'f': parameters['properties'] key '\\ud83d' holds a lone surrogate U+D83D at "
            "character 0",
        ),
        (
            {"parameters": {"type": "object", "properties": {"u": {"enum": ["a", "\udfff"]}}}},
            "tool 'f': parameters['properties']['u']['enum'][1] holds a lone surrogate U+DFFF at "
            "character 0",
        ),
    ],
)
def test_a_tool_with_a_lone_surrogate_is_refused_when_built(
    fields: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError, match="lone surrogate") as caught:
        Tool(name="f", **fields)
    assert str(caught.value) == f"{where}: {SURROGATE_HINT}"
    # The same through the dict a call takes.
    with pytest.raises(ValueError, match="lone surrogate") as again:
        Tool.coerce({"type": "function", "function": {"name": "f", **fields}})
    assert str(again.value) == f"{where}: {SURROGATE_HINT}"


@pytest.mark.parametrize(
    ("args", "kwargs", "where"),
    [
        (
            {"type": "object", "properties": {"x": {"type": "string", "title": "\ud800"}}},
            {},
            "response_format['schema']['properties']['x']['title']",
        ),
        ({"type": "object"}, {"description": "why\udc80"}, "response_format['description']"),
    ],
)
def test_a_response_format_with_a_lone_surrogate_is_refused_when_built(
    args: dict[str, Any], kwargs: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValueError, match="lone surrogate") as caught:
        ResponseFormat(args, **kwargs)
    assert str(caught.value).startswith(f"{where} holds a lone surrogate U+D")
    assert str(caught.value).endswith(SURROGATE_HINT)


def test_a_source_extra_body_with_a_lone_surrogate_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match="lone surrogate") as caught:
        Source("openai", "gpt-4o", api_key=KEY, extra_body={"metadata": ["ok", "\ud800"]})
    assert str(caught.value) == (
        f"Source.extra_body['metadata'][1] holds a lone surrogate U+D800 at character 0: "
        f"{SURROGATE_HINT}"
    )
