"""Nothing a caller wrote in a message is dropped without a word.

Each field reaches every wire in the provider's own shape, or is refused before sending
(``ContentUnsupportedError``, failover moves on), or, where a wire has no field for it and the
model reads nothing from it, is left out with a warning on the response. Expected bodies are
written from the providers' specs in ``../shared/wire/specs``: openai_openapi.yaml (2026-08-21:
``ChatCompletionRequestAssistantMessage``, ``EasyInputMessage``, ``InputTextContentParam``,
``PromptCacheBreakpointParam``, ``PromptCacheOptionsParam``, ``FunctionCallOutputItemParam``),
the Anthropic Messages docs copy (``RequestTextBlock``; "all messages must have non-empty
content except for the optional final assistant message") and generativelanguage v1beta
content.proto (``Content``, ``Part``: no name, no cache marker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, ContentUnsupportedError, Message, PromptCache, Source, Tool
from polythink.cache_key import message_fields
from polythink.conversion import coerce_messages
from polythink.middleware.cache import canonical_request
from polythink.simulator import Simulator
from polythink.types import Request, ToolCall
from tests.test_prompt_cache_wire import ANSWERS as WIRE_ANSWERS

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789"
MODELS = {
    "openai": "gpt-5.6-sol",
    "openai-responses": "gpt-5.6-sol",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-3.5-flash",
    "deepseek": "deepseek-chat",
    "openrouter": "openai/gpt-4o",
}
URLS = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "deepseek": "https://api.deepseek.com/chat/completions",
    "openrouter": "https://openrouter.ai/api/v1/chat/completions",
    "openai-responses": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-3.5-flash:generateContent",
}
CHAT_ANSWER = WIRE_ANSWERS["chat"]
ANSWERS: dict[str, dict[str, Any]] = {
    **WIRE_ANSWERS,
    "openai": CHAT_ANSWER,
    "deepseek": CHAT_ANSWER,
    "openrouter": CHAT_ANSWER,
}
WIRES = ("openai", "openai-responses", "anthropic", "gemini")
ELSEWHERE = ("openai-responses", "anthropic", "gemini")
BREAKPOINT = {"mode": "explicit"}
WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


async def call(provider: str, messages: list[Any], **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """One call to ``provider`` through a client; ``(the JSON body sent, the response)``."""
    source = Source(provider, MODELS[provider], api_key=KEY)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URLS[provider]).mock(
            return_value=httpx.Response(200, json=ANSWERS[provider])
        )
        async with Client([source], capabilities_store=False) as client:
            response = await client.complete(messages, cache=False, **kwargs)
    assert response.text == "ok"
    return json.loads(route.calls[0].request.content), response


def turns(provider: str, body: dict[str, Any]) -> Any:
    """The conversation part of a body: ``messages``, ``input`` or ``contents``."""
    return body[{"openai-responses": "input", "gemini": "contents"}.get(provider, "messages")]


def notes(response: Any) -> list[str]:
    """The response's warnings, without the registry's lifecycle notes."""
    return [w for w in response.warnings if "shut down" not in w and "retire" not in w]


# ------------------------------------------------------------------ prompt-cache breakpoints


async def test_responses_breakpoints_sit_on_input_text_parts_and_the_system_prompt_keeps_one() -> (
    None
):
    messages = [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Plan the trip."),
    ]
    body, response = await call(
        "openai-responses",
        messages,
        system_suffix="Step 2 of 3.",
        prompt_cache=PromptCache(breakpoints="explicit"),
    )
    # instructions is a string, where no breakpoint can sit: the system prompt is an input
    # message, its stable text marked; the suffix follows the conversation's mark.
    assert "instructions" not in body
    assert body["input"] == [
        {
            "role": "system",
            "content": [
                {
                    "type": "input_text",
                    "text": "You are terse.",
                    "prompt_cache_breakpoint": BREAKPOINT,
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "input_text",
                    "text": "Plan the trip.",
                    "prompt_cache_breakpoint": BREAKPOINT,
                }
            ],
        },
        {"role": "system", "content": "Step 2 of 3."},
    ]
    assert body["prompt_cache_options"] == {"mode": "explicit", "ttl": "30m"}
    assert notes(response) == []


async def test_a_chat_source_routed_to_responses_marks_the_last_function_output() -> None:
    # gpt-6-astra takes tools on the Responses API only: the openai source sends it there.
    history = [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Weather in Lisbon?"),
        Message(
            role="assistant",
            tool_calls=(ToolCall(id="call_1", name="get_weather", arguments='{"city":"Lisbon"}'),),
        ),
        Message(role="tool", tool_call_id="call_1", name="get_weather", content="sunny"),
    ]
    source = Source("openai", "gpt-6-astra", api_key=KEY)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URLS["openai-responses"]).respond(200, json=ANSWERS["openai-responses"])
        async with Client([source], capabilities_store=False) as client:
            await client.complete(
                history,
                tools=[WEATHER],
                reasoning_effort="high",
                prompt_cache=PromptCache(breakpoints="explicit"),
                cache=False,
            )
    body = json.loads(route.calls[0].request.content)
    assert body["input"] == [
        {
            "role": "system",
            "content": [
                {
                    "type": "input_text",
                    "text": "You are terse.",
                    "prompt_cache_breakpoint": BREAKPOINT,
                }
            ],
        },
        {"role": "user", "content": "Weather in Lisbon?"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Lisbon"}',
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "name": "get_weather",
            "output": [
                {"type": "input_text", "text": "sunny", "prompt_cache_breakpoint": BREAKPOINT}
            ],
        },
    ]


async def test_chat_breakpoints_come_before_the_suffix() -> None:
    messages = [
        Message(role="system", content="You are terse."),
        Message(role="user", content="Plan the trip."),
    ]
    body, _ = await call(
        "openai",
        messages,
        system_suffix="Step 2 of 3.",
        prompt_cache=PromptCache(breakpoints="explicit"),
    )
    assert body["messages"] == [
        {
            "role": "system",
            "content": [
                {"type": "text", "text": "You are terse.", "prompt_cache_breakpoint": BREAKPOINT},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Plan the trip.", "prompt_cache_breakpoint": BREAKPOINT}
            ],
        },
        {"role": "system", "content": "Step 2 of 3."},
    ]


OPENAI_TTL = (
    "prompt_cache ttl='1h' not sent to {}: OpenAI keeps a cached prefix at least 30 minutes "
    "(prompt_cache_options.ttl takes only '30m') and up to 24 hours with retention='24h'"
)


@pytest.mark.parametrize(
    ("provider", "warning"),
    [
        ("openai", OPENAI_TTL.format("openai")),
        ("openai-responses", OPENAI_TTL.format("openai-responses")),
        (
            "gemini",
            "prompt_cache ttl='1h' not sent to gemini: gemini caches prefixes on its own and "
            "takes no cache lifetime",
        ),
        (
            "deepseek",
            "prompt_cache ttl='1h' not sent to deepseek: deepseek caches prefixes on its own and "
            "takes no cache lifetime",
        ),
    ],
)
async def test_a_one_hour_ttl_is_a_warning_where_no_cache_control_carries_it(
    provider: str, warning: str
) -> None:
    body, response = await call(
        provider,
        [{"role": "user", "content": "hi"}],
        prompt_cache=PromptCache(ttl="1h", breakpoints="explicit"),
    )
    assert notes(response) == [warning]
    assert '"1h"' not in json.dumps(body)


async def test_anthropic_takes_the_one_hour_ttl_without_a_warning() -> None:
    body, response = await call(
        "anthropic", [{"role": "user", "content": "hi"}], prompt_cache=PromptCache(ttl="1h")
    )
    assert body["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert notes(response) == []


# ------------------------------------------------------------------ the assistant's Chat fields

REFUSED_TURN = {"role": "assistant", "content": None, "refusal": "I won't."}
AUDIO_TURN = {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}
LEGACY_TURN = {
    "role": "assistant",
    "content": None,
    "function_call": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'},
}


async def test_chat_sends_the_assistants_refusal_audio_and_legacy_function_call() -> None:
    ask = {"role": "user", "content": "Go on."}
    body, _ = await call(
        "openai",
        [
            {"role": "user", "content": "Tell me."},
            REFUSED_TURN,
            ask,
            {"role": "assistant", "content": "Listen.", "audio": {"id": "audio_abc123"}},
            ask,
            LEGACY_TURN,
            ask,
        ],
    )
    assert body["messages"][1:6] == [
        {"role": "assistant", "content": None, "refusal": "I won't."},
        ask,
        {"role": "assistant", "content": "Listen.", "audio": {"id": "audio_abc123"}},
        ask,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'},
        },
    ]


@pytest.mark.parametrize(
    ("provider", "turn"),
    [
        ("openai-responses", {"role": "assistant", "content": "Sorry.\n\nI won't."}),
        (
            "anthropic",
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Sorry."},
                    {"type": "text", "text": "I won't."},
                ],
            },
        ),
        ("gemini", {"role": "model", "parts": [{"text": "Sorry."}, {"text": "I won't."}]}),
    ],
)
async def test_a_refusal_is_the_turns_text_where_the_wire_has_no_refusal_field(
    provider: str, turn: dict[str, Any]
) -> None:
    messages = [
        {"role": "user", "content": "Tell me."},
        {"role": "assistant", "content": "Sorry.", "refusal": "I won't."},
        {"role": "user", "content": "Go on."},
    ]
    body, response = await call(provider, messages)
    assert turns(provider, body)[1] == turn
    assert notes(response) == []


async def test_a_refusal_part_is_text_on_anthropic_and_gemini() -> None:
    messages = [
        {"role": "user", "content": "Tell me."},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I won't."}]},
        {"role": "user", "content": "Go on."},
    ]
    body, _ = await call("anthropic", messages)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I won't."}],
    }
    body, _ = await call("gemini", messages)
    assert body["contents"][1] == {"role": "model", "parts": [{"text": "I won't."}]}


AUDIO_WHY = (
    "only OpenAI Chat refers to a previous audio answer by its id; send the call to a Chat "
    "source, or the answer's transcript as the turn's content"
)
LEGACY_WHY = (
    "a legacy function_call has no id to pair it with a result, which this wire requires; send "
    "it as tool_calls=[{'id', 'type': 'function', 'function': {'name', 'arguments'}}] with its "
    "result as a tool message"
)


@pytest.mark.parametrize("provider", ELSEWHERE)
@pytest.mark.parametrize(
    ("turn", "field", "why"),
    [(AUDIO_TURN, "audio", AUDIO_WHY), (LEGACY_TURN, "function_call", LEGACY_WHY)],
)
async def test_audio_and_a_legacy_function_call_are_refused_before_sending_off_chat(
    provider: str, turn: dict[str, Any], field: str, why: str
) -> None:
    messages = [{"role": "user", "content": "Tell me."}, turn, {"role": "user", "content": "Go."}]
    source = Source(provider, MODELS[provider], api_key=KEY, max_retries=0)
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(URLS[provider]).respond(200, json=ANSWERS[provider])
        async with Client([source], capabilities_store=False) as client:
            with pytest.raises(ContentUnsupportedError) as caught:
                await client.complete(messages, cache=False)
    assert route.call_count == 0
    assert caught.value.message == (
        f"{provider} cannot carry the {field} of message 1 (assistant): {why}"
    )
    assert (caught.value.error_type, caught.value.source_index) == ("unsupported_content", 0)


async def test_failover_moves_on_to_a_chat_source_for_an_audio_turn() -> None:
    messages = [
        {"role": "user", "content": "Tell me."},
        AUDIO_TURN,
        {"role": "user", "content": "Go."},
    ]
    sources = [
        Source("anthropic", MODELS["anthropic"], api_key=KEY),
        Source("openai", MODELS["openai"], api_key=KEY),
    ]
    with respx.mock(assert_all_called=False) as mock:
        anthropic = mock.post(URLS["anthropic"]).respond(200, json=ANSWERS["anthropic"])
        chat = mock.post(URLS["openai"]).respond(200, json=CHAT_ANSWER)
        async with Client(sources, capabilities_store=False) as client:
            response = await client.complete(messages, cache=False)
    assert (anthropic.call_count, chat.call_count, response.source_index) == (0, 1, 1)
    sent = json.loads(chat.calls[0].request.content)["messages"][1]
    assert sent == {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}


def test_the_chat_fields_round_trip_and_are_part_of_the_cache_key() -> None:
    refused, audio, legacy = (Message.coerce(t) for t in (REFUSED_TURN, AUDIO_TURN, LEGACY_TURN))
    assert refused.refusal == "I won't."
    assert audio.audio_id == "audio_abc123"
    assert legacy.function_call == ToolCall(
        id="", name="get_weather", arguments='{"city":"Lisbon"}'
    )
    for message, saved in (
        (refused, {"role": "assistant", "content": None, "refusal": "I won't."}),
        (audio, {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}),
        (
            legacy,
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'},
            },
        ),
    ):
        assert message.to_dict() == saved
        assert Message.from_dict(saved) == message
    hi = Message(role="user", content="hi")
    keys = {
        canonical_request(Request(messages=(hi, m)))
        for m in (refused, audio, legacy, Message(role="assistant", content="I won't."))
    }
    assert len(keys) == 4
    # A message without them keys as it did before they existed.
    assert set(message_fields(hi)) == {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "name",
        "reasoning",
        "reasoning_items",
        "reasoning_format",
    }


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            {"role": "assistant", "audio": {"id": 7}},
            "an assistant message's audio must be {'id': '<id of a previous audio answer>'} "
            "(OpenAI Chat's assistant audio); got {'id': 7}",
        ),
        (
            {"role": "assistant", "function_call": {"name": "f"}},
            "an assistant message's function_call must be {'name': '...', 'arguments': "
            "'<JSON text>'} (OpenAI Chat's legacy function call); got {'name': 'f'}",
        ),
        (
            {"role": "assistant", "refusal": 5},
            "assistant message refusal must be a string; got 5",
        ),
        (
            {"role": "user", "content": "x", "refusal": "no"},
            "user message has refusal, audio or function_call: they belong to assistant "
            "messages (OpenAI Chat's ChatCompletionRequestAssistantMessage)",
        ),
    ],
)
def test_malformed_chat_fields_are_refused_when_the_message_is_built(
    value: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError, match="message") as caught:
        Message.coerce(value)
    assert str(caught.value) == error


# ------------------------------------------------------------------ name


@pytest.mark.parametrize(
    "build",
    [
        lambda: Message.coerce({"role": "user", "content": "x", "name": 123}),
        lambda: Message.coerce(
            {"role": "user", "content": [{"type": "text", "text": "x"}], "name": 123}
        ),
        lambda: Message(role="user", content="x", name=123),  # type: ignore[arg-type]
        lambda: Message.from_dict({"role": "user", "content": "x", "name": 123}),
    ],
)
def test_a_name_must_be_a_string_on_every_path(build: Any) -> None:
    with pytest.raises(ValueError, match="name") as caught:
        build()
    assert str(caught.value) == (
        "user message name must be a string (it tells participants apart); got int 123"
    )


def test_coerce_messages_names_the_message_with_a_bad_name() -> None:
    with pytest.raises(ValueError, match=r"^messages\[1\]: assistant message name must be"):
        coerce_messages(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "name": []}]
        )


@pytest.mark.parametrize(
    ("provider", "warning"),
    [
        ("openai", None),
        (
            "openai-responses",
            "not sent to openai-responses: the name of messages 0, 1 (the Responses API has no "
            "name field on a message)",
        ),
        (
            "anthropic",
            "not sent to anthropic: the name of messages 0, 1 (Anthropic's Messages API has no "
            "name field on a message)",
        ),
        (
            "gemini",
            "not sent to gemini: the name of messages 0, 1 (Gemini has no name field on a message)",
        ),
    ],
)
async def test_names_go_out_on_chat_and_are_noted_where_no_field_takes_them(
    provider: str, warning: str | None
) -> None:
    messages = [
        {"role": "user", "content": "I am Ana.", "name": "ana"},
        {"role": "user", "content": "I am Bo.", "name": "bo"},
    ]
    body, response = await call(provider, messages)
    if warning is None:
        assert body["messages"] == messages
        assert notes(response) == []
    else:
        assert "ana" not in json.dumps(body)
        assert notes(response) == [warning]


# ------------------------------------------------------------------ an empty assistant turn

EMPTY_NOTE = (
    "not sent to {}: the empty assistant turn of message 1 (it has no text, tool call or "
    "refusal, and Anthropic and Gemini refuse an empty turn: no wire gets one, and the turns "
    "around it meet)"
)


@pytest.mark.parametrize(
    ("provider", "sent"),
    [
        ("openai", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
        ("openai-responses", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
        (
            "anthropic",
            # Consecutive user turns are combined into one by the API (MessageCreateParams).
            [
                {"role": "user", "content": [{"type": "text", "text": "a"}]},
                {"role": "user", "content": [{"type": "text", "text": "b"}]},
            ],
        ),
        ("gemini", [{"role": "user", "parts": [{"text": "a"}, {"text": "b"}]}]),
    ],
)
@pytest.mark.parametrize("empty", ["", [], [{"type": "text", "text": ""}]])
async def test_an_empty_assistant_turn_is_left_out_on_every_wire_with_a_warning(
    provider: str, sent: list[Any], empty: Any
) -> None:
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": empty},
        {"role": "user", "content": "b"},
    ]
    body, response = await call(provider, messages)
    assert turns(provider, body) == sent
    assert notes(response) == [EMPTY_NOTE.format(provider)]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def test_the_simulated_anthropic_refuses_empty_content_but_in_a_final_assistant_turn(
    sim: Simulator,
) -> None:
    url = f"{sim.base_url('anthropic')}/messages"
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}

    def post(messages: list[Any]) -> httpx.Response:
        body = {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": messages}
        return httpx.post(url, json=body, headers=headers)

    hi = {"role": "user", "content": "hi"}
    for empty in ([], ""):
        refused = post([hi, {"role": "assistant", "content": empty}, hi])
        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == (
            "messages.1: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
        assert post([hi, {"role": "assistant", "content": empty}]).status_code == 200
    marked = post(
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "prompt_cache_breakpoint": {}}],
            }
        ]
    )
    assert marked.status_code == 400
    assert marked.json()["error"]["message"] == (
        "messages.0.content.0.text.prompt_cache_breakpoint: Extra inputs are not permitted"
    )


@pytest.mark.parametrize("provider", [*WIRES, "openrouter"])
async def test_a_conversation_after_an_empty_answer_goes_through_the_simulator(
    sim: Simulator, provider: str
) -> None:
    model = MODELS.get(provider, "anthropic/claude-haiku-4.5")
    source = Source(provider, model, api_key="sk-sim", base_url=sim.base_url(provider))
    messages = [
        Message(role="user", content="Plan the trip."),
        Message(role="assistant", content=""),
        Message(
            role="user",
            content=[{"type": "text", "text": "Go on.", "prompt_cache_breakpoint": BREAKPOINT}],
            name="ana",
        ),
    ]
    async with Client([source], capabilities_store=False) as client:
        response = await client.complete(messages, cache=False)
    assert response.text


# ------------------------------------------------------------------ system parts


async def test_system_parts_keep_their_boundaries() -> None:
    messages = [
        {
            "role": "system",
            "content": [{"type": "text", "text": "S1"}, {"type": "text", "text": "S2"}],
        },
        {"role": "system", "content": "S3"},
        {"role": "user", "content": "hi"},
    ]
    body, _ = await call("openai-responses", messages)
    assert body["instructions"] == "S1\n\nS2\n\nS3"
    body, _ = await call("gemini", messages)
    assert body["systemInstruction"] == {
        "role": "user",
        "parts": [{"text": "S1"}, {"text": "S2"}, {"text": "S3"}],
    }
    body, _ = await call("anthropic", messages)
    assert body["system"] == [
        {"type": "text", "text": "S1"},
        {"type": "text", "text": "S2"},
        {"type": "text", "text": "S3"},
    ]


# ------------------------------------------------------------------ part keys

MARKED = [
    {"type": "text", "text": "T", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "U", "prompt_cache_breakpoint": BREAKPOINT},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
]


@pytest.mark.parametrize(
    ("provider", "content", "warnings"),
    [
        (
            "openai",
            [{"type": "text", "text": "T"}, *MARKED[1:]],
            [
                "not sent to openai: cache_control of content part 0 of message 0 (openai has no "
                "such field on a text part)"
            ],
        ),
        (
            # OpenRouter speaks both cache fields (its profile's prompt_cache).
            "openrouter",
            MARKED,
            [],
        ),
        (
            "deepseek",
            [{"type": "text", "text": "T"}, {"type": "text", "text": "U"}, MARKED[2]],
            [
                "not sent to deepseek: cache_control of content part 0 of message 0 (deepseek "
                "has no such field on a text part)",
                "not sent to deepseek: prompt_cache_breakpoint of content part 1 of message 0 "
                "(deepseek has no such field on a text part)",
            ],
        ),
        (
            "openai-responses",
            [
                {"type": "input_text", "text": "T"},
                {"type": "input_text", "text": "U", "prompt_cache_breakpoint": BREAKPOINT},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"},
            ],
            [
                "not sent to openai-responses: cache_control of content part 0 of message 0 "
                "(the Responses API has no such field on a text part)"
            ],
        ),
        (
            "anthropic",
            [
                {"type": "text", "text": "T", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "U"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            ],
            [
                "not sent to anthropic: prompt_cache_breakpoint of content part 1 of message 0 "
                "(Anthropic's Messages API has no such field on a text block; "
                "PromptCache(breakpoints='explicit') puts cache_control breakpoints)",
                "not sent to anthropic: image_url.detail of content part 2 of message 0 "
                "(Anthropic's Messages API has no such field on an image block)",
            ],
        ),
        (
            "gemini",
            [{"text": "T"}, {"text": "U"}, {"fileData": {"fileUri": "https://example.com/a.png"}}],
            [
                "not sent to gemini: cache_control of content part 0 of message 0 (Gemini has "
                "no such field on a part; it caches prefixes implicitly)",
                "not sent to gemini: prompt_cache_breakpoint of content part 1 of message 0 "
                "(Gemini has no such field on a part; it caches prefixes implicitly)",
                "not sent to gemini: image_url.detail of content part 2 of message 0 (Gemini "
                "has no such field on a part)",
            ],
        ),
    ],
)
async def test_part_keys_go_where_the_wire_has_a_field_and_are_noted_elsewhere(
    provider: str, content: list[Any], warnings: list[str]
) -> None:
    body, response = await call(provider, [{"role": "user", "content": MARKED}])
    sent = turns(provider, body)[0]
    assert sent.get("content", sent.get("parts")) == content
    assert notes(response) == warnings


EXTRA = [{"type": "text", "text": "hi", "EXTRAKEY": 5}]


@pytest.mark.parametrize(
    ("provider", "content", "warning"),
    [
        (
            "openai",
            [{"type": "text", "text": "hi"}],
            "not sent to openai: EXTRAKEY of content part 0 of message 0 (openai has no such "
            "field on a text part)",
        ),
        (
            "openrouter",
            [{"type": "text", "text": "hi"}],
            "not sent to openrouter: EXTRAKEY of content part 0 of message 0 (openrouter has no "
            "such field on a text part)",
        ),
        (
            "deepseek",
            [{"type": "text", "text": "hi"}],
            "not sent to deepseek: EXTRAKEY of content part 0 of message 0 (deepseek has no "
            "such field on a text part)",
        ),
        (
            "openai-responses",
            [{"type": "input_text", "text": "hi"}],
            "not sent to openai-responses: EXTRAKEY of content part 0 of message 0 (the "
            "Responses API has no such field on a text part)",
        ),
        (
            "anthropic",
            [{"type": "text", "text": "hi"}],
            "not sent to anthropic: EXTRAKEY of content part 0 of message 0 (Anthropic's "
            "Messages API has no such field on a text block)",
        ),
        (
            "gemini",
            [{"text": "hi"}],
            "not sent to gemini: EXTRAKEY of content part 0 of message 0 (Gemini has no such "
            "field on a part; it caches prefixes implicitly)",
        ),
    ],
)
async def test_an_unknown_part_key_is_left_out_with_a_note_on_every_wire(
    provider: str, content: list[Any], warning: str
) -> None:
    body, response = await call(provider, [{"role": "user", "content": EXTRA}])
    sent = turns(provider, body)[0]
    assert sent.get("content", sent.get("parts")) == content
    assert notes(response) == [warning]
    # The caller's part is not changed.
    assert EXTRA == [{"type": "text", "text": "hi", "EXTRAKEY": 5}]


async def test_a_tool_result_with_images_notes_the_keys_its_text_parts_lose() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [
                {"type": "text", "text": "A", "cache_control": {"type": "ephemeral"}},
                {**image, "cache_control": {"type": "ephemeral"}, "EXTRAKEY": 1},
            ],
        },
    ]
    body, response = await call("openrouter", messages)
    assert body["messages"][2:] == [
        {"role": "tool", "content": "A", "tool_call_id": "c1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images from tool call c1:"},
                {**image, "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]
    assert notes(response) == [
        "not sent to openrouter: EXTRAKEY of content part 1 of message 2 (openrouter has no "
        "such field on a image_url part)",
        "not sent to openrouter: cache_control of content part 0 of message 2 (a tool result "
        "with images goes to Chat as one string, its images in a user turn)",
    ]


# ------------------------------------------------------------------ reasoning text

REASONED = [
    {"role": "user", "content": "U1"},
    {"role": "assistant", "content": "ASSIST-TXT", "reasoning": "REASONING-TXT"},
    {"role": "user", "content": "U2"},
]
NO_FIELD = "openai takes no reasoning text on an assistant message"
TOOL_TURNS_ONLY = "deepseek takes reasoning_content back on tool-call turns only"


@pytest.mark.parametrize(
    ("provider", "turn", "warning"),
    [
        ("openai", {"role": "assistant", "content": "ASSIST-TXT"}, NO_FIELD),
        # "Pass back message.reasoning (string ...) or message.reasoning_details" (WIRE.md §5.5).
        (
            "openrouter",
            {"role": "assistant", "content": "ASSIST-TXT", "reasoning": "REASONING-TXT"},
            None,
        ),
        # Non-tool turns: prior reasoning_content "will be ignored" (WIRE.md §6.1).
        ("deepseek", {"role": "assistant", "content": "ASSIST-TXT"}, TOOL_TURNS_ONLY),
        (
            "openai-responses",
            {"role": "assistant", "content": "ASSIST-TXT"},
            "the Responses API takes reasoning back only as its own reasoning items "
            "(encrypted_content); the turn goes without it",
        ),
        (
            "anthropic",
            {"role": "assistant", "content": [{"type": "text", "text": "ASSIST-TXT"}]},
            "Anthropic's Messages API takes reasoning back only as its own thinking blocks, "
            "whose signatures it checks; the turn goes without it",
        ),
        (
            "gemini",
            {"role": "model", "parts": [{"text": "ASSIST-TXT"}]},
            "Gemini takes reasoning back only as its own thought parts with their "
            "thoughtSignature; the turn goes without it",
        ),
    ],
)
async def test_reasoning_text_a_wire_does_not_take_is_noted(
    provider: str, turn: dict[str, Any], warning: str | None
) -> None:
    body, response = await call(provider, REASONED)
    assert turns(provider, body)[1] == turn
    expected = [f"not sent to {provider}: the reasoning of message 1 ({warning})"]
    assert notes(response) == (expected if warning else [])


def _tool_turn(**fields: Any) -> dict[str, Any]:
    call_ = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call_], **fields}


async def test_deepseek_takes_reasoning_on_tool_call_turns_and_an_empty_one_without() -> None:
    result = {"role": "tool", "tool_call_id": "c1", "content": "R"}
    messages = [
        {"role": "user", "content": "U"},
        _tool_turn(reasoning="WHY"),
        result,
        _tool_turn(),
        result,
    ]
    body, response = await call("deepseek", messages)
    # Tool-call turns must carry reasoning_content in thinking mode, else 400 "Missing
    # reasoning_content field in the assistant message" (WIRE.md §6.1): a turn with none
    # sends it empty.
    assert body["messages"][1] == {**_tool_turn(), "reasoning_content": "WHY"}
    assert body["messages"][3] == {**_tool_turn(), "reasoning_content": ""}
    assert notes(response) == []


async def test_a_turn_deepseek_made_goes_as_its_round_trip_says_without_a_note() -> None:
    own = Message(
        role="assistant",
        content="ASSIST-TXT",
        reasoning="REASONING-TXT",
        reasoning_format="deepseek",
    )
    body, response = await call("deepseek", [REASONED[0], own, REASONED[2]])
    assert body["messages"][1] == {"role": "assistant", "content": "ASSIST-TXT"}
    assert notes(response) == []
    # Another wire's turn is the caller's input to DeepSeek: noted.
    foreign = Message(
        role="assistant", content="ASSIST-TXT", reasoning="REASONING-TXT", reasoning_format="qwen"
    )
    _, response = await call("deepseek", [REASONED[0], foreign, REASONED[2]])
    assert notes(response) == [
        f"not sent to deepseek: the reasoning of message 1 ({TOOL_TURNS_ONLY})"
    ]


async def test_a_deepseek_answer_marks_its_turn_as_deepseek_s() -> None:
    answer = {
        **CHAT_ANSWER,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok", "reasoning_content": "R"},
                "finish_reason": "stop",
            }
        ],
    }
    source = Source("deepseek", MODELS["deepseek"], api_key=KEY)
    with respx.mock() as mock:
        mock.post(URLS["deepseek"]).mock(return_value=httpx.Response(200, json=answer))
        async with Client([source], capabilities_store=False) as client:
            response = await client.complete([{"role": "user", "content": "q"}], cache=False)
    assert response.message == Message(
        role="assistant", content="ok", reasoning="R", reasoning_format="deepseek"
    )


async def test_a_turn_anthropic_signed_goes_back_as_its_blocks_without_a_note() -> None:
    block = {"type": "thinking", "thinking": "REASONING-TXT", "signature": "sig"}
    own = Message(
        role="assistant",
        content="ASSIST-TXT",
        reasoning="REASONING-TXT",
        reasoning_items=(block, {"type": "text", "text": "ASSIST-TXT"}),
        reasoning_format="anthropic",
    )
    body, response = await call("anthropic", [REASONED[0], own, REASONED[2]])
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [block, {"type": "text", "text": "ASSIST-TXT"}],
    }
    assert notes(response) == []


async def test_a_resumed_chat_conversation_reports_its_notes_on_every_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same messages sent twice, then grown, then with the last one replaced: the second
    call converts nothing (its array is resumed from the first), the third only the new
    messages, and each reports every note of its messages, in message order ("converted"
    counts the messages with content parts checked and converted afresh)."""
    import polythink.transports.openai_chat as chat

    checked: list[int] = []
    real_check = chat.check_parts

    def counting(message: Message, *args: Any) -> None:
        checked.append(1)
        real_check(message, *args)

    monkeypatch.setattr(chat, "check_parts", counting)
    conversation = coerce_messages(
        [
            {"role": "user", "content": EXTRA},
            {"role": "assistant", "content": "A1", "reasoning": "R1"},
            {"role": "user", "content": EXTRA},
        ]
    )
    replaced = [*conversation[:2], Message(role="user", content="U2")]
    grown = [
        *conversation,
        Message(role="assistant", content="A2", reasoning="R2"),
        Message(role="user", content=[{"type": "text", "text": "U3", "EXTRAKEY": 1}]),
    ]
    source = Source("openai", MODELS["openai"], api_key=KEY)
    sent: list[tuple[list[Any], list[str]]] = []
    with respx.mock() as mock:
        route = mock.post(URLS["openai"]).mock(return_value=httpx.Response(200, json=CHAT_ANSWER))
        async with Client([source], capabilities_store=False) as client:
            for messages in (conversation, conversation, grown, replaced):
                checked.clear()
                response = await client.complete(list(messages), cache=False)
                body = json.loads(route.calls[-1].request.content)
                sent.append((body["messages"], notes(response)))
                sent[-1][1].append(f"converted {len(checked)}")
    part = [{"type": "text", "text": "hi"}]
    first = [
        {"role": "user", "content": part},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": part},
    ]
    keys = (
        "not sent to openai: EXTRAKEY of content part 0 of messages {} (openai has no such "
        "field on a text part)"
    )
    reasoning = "not sent to openai: the reasoning of message{} ({})"
    assert sent[0] == (
        first,
        [keys.format("0, 2"), reasoning.format(" 1", NO_FIELD), "converted 2"],
    )
    assert sent[1] == (
        first,
        [keys.format("0, 2"), reasoning.format(" 1", NO_FIELD), "converted 0"],
    )
    assert sent[2] == (
        [
            *first,
            {"role": "assistant", "content": "A2"},
            {"role": "user", "content": [{"type": "text", "text": "U3"}]},
        ],
        [keys.format("0, 2, 4"), reasoning.format("s 1, 3", NO_FIELD), "converted 1"],
    )
    # The last message replaced: resumed from the first two, whose notes alone are replayed.
    assert sent[3] == (
        [*first[:2], {"role": "user", "content": "U2"}],
        [
            "not sent to openai: EXTRAKEY of content part 0 of message 0 (openai has no such "
            "field on a text part)",
            reasoning.format(" 1", NO_FIELD),
            "converted 0",
        ],
    )


async def test_a_provider_without_a_format_tells_its_own_turns_by_its_id() -> None:
    # xAI answers with reasoning_content and takes none back: its own turn goes without a
    # note, every call of an agent loop; the same turn sent to OpenAI is the caller's input.
    answer = {
        **CHAT_ANSWER,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok", "reasoning_content": "R"},
                "finish_reason": "stop",
            }
        ],
    }
    url = "https://api.x.ai/v1/chat/completions"
    source = Source("xai", "grok-4.20-reasoning", api_key=KEY)
    question = {"role": "user", "content": "q"}
    with respx.mock() as mock:
        route = mock.post(url).mock(return_value=httpx.Response(200, json=answer))
        async with Client([source], capabilities_store=False) as client:
            first = await client.complete([question], cache=False)
            again = await client.complete([question, first.message, question], cache=False)
    assert first.message == Message(
        role="assistant", content="ok", reasoning="R", reasoning_format="xai"
    )
    assert json.loads(route.calls[1].request.content)["messages"][1] == {
        "role": "assistant",
        "content": "ok",
    }
    assert notes(again) == []
    _, elsewhere = await call("openai", [question, first.message, question])
    assert [n for n in notes(elsewhere) if "reasoning" in n] == [
        "not sent to openai: the reasoning of message 1 (openai takes no reasoning text on an "
        "assistant message)"
    ]
