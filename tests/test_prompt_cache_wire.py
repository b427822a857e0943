"""Exact request bodies for prompt-cache friendly calls, image tool results and tool_choice none.

Every call goes through ``Client`` to a respx route and the JSON body it sends is compared
whole: the dynamic ``system_suffix`` after the conversation (Anthropic: a turn-scoped system
message, or a user message on models without them; OpenAI: a system message; the compatible
providers and Gemini: the last user turn; Mistral: the system prompt), the ``prompt_cache``
marker (Anthropic ``cache_control``, OpenAI
``prompt_cache_key`` / ``prompt_cache_retention``, both passed through OpenRouter),
``tool_choice="none"`` with the tools still declared, and tool results carrying images.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Message, PromptCache, RequestRejectedError, Source, Tool, ToolCall
from polythink.middleware.cache import canonical_request
from polythink.types import Request

pytestmark = pytest.mark.anyio

URLS = {
    "openai": "https://api.openai.com/v1/chat/completions",
    "openrouter": "https://openrouter.ai/api/v1/chat/completions",
    "deepseek": "https://api.deepseek.com/chat/completions",
    "openai-responses": "https://api.openai.com/v1/responses",
    "anthropic": "https://api.anthropic.com/v1/messages",
    "gemini": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
}
MODELS = {
    "openai": "gpt-4o",
    "openrouter": "openai/gpt-4o",
    "deepseek": "deepseek-chat",
    "openai-responses": "gpt-4o",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}
ANSWERS: dict[str, dict[str, Any]] = {
    "chat": {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ]
    },
    "openai-responses": {
        "id": "resp_1",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            }
        ],
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ]
    },
}

STABLE = "You are a careful coding assistant."
SUFFIX = "Plan: 1. read the failing test 2. fix it."
HI = {"role": "user", "content": "Fix the build."}
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
    "hQGAhKmMIQAAAABJRU5ErkJggg=="
)
SCREENSHOT = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
SHELL = Tool(
    name="shell",
    description="Run a command",
    parameters={"type": "object", "properties": {"cmd": {"type": "string"}}},
)


async def sent(provider: str, messages: list[Any], **call: Any) -> dict[str, Any]:
    """Make one call to ``provider`` and return the JSON body it sent."""
    kind = provider if provider in ANSWERS else "chat"
    source = Source(provider, MODELS[provider], api_key="sk-test-0123456789")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URLS[provider]).mock(return_value=httpx.Response(200, json=ANSWERS[kind]))
        async with Client([source]) as client:
            response = await client.complete(messages, **call)
    assert response.text == "ok"
    body: dict[str, Any] = json.loads(route.calls[0].request.content)
    return body


# ---------------------------------------------------------------- system suffix
# Per-call instructions go after the conversation, so what was sent stays the prefix of the
# next call (polythink.transports.instructions).


async def test_anthropic_suffix_is_a_user_message_after_the_last_user_turn() -> None:
    # claude-sonnet-4-5 takes no mid-conversation system message (its profile's placement).
    body = await sent(
        "anthropic", [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX
    )
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": STABLE,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]},
            {"role": "user", "content": SUFFIX},
        ],
        "stream": False,
    }


async def test_anthropic_suffix_is_a_turn_scoped_system_message_where_the_model_takes_one() -> None:
    source = Source("anthropic", "claude-opus-5-5", api_key="sk-test-0123456789")
    answer = {**ANSWERS["anthropic"], "model": "claude-opus-5-5"}
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URLS["anthropic"]).mock(return_value=httpx.Response(200, json=answer))
        async with Client([source]) as client:
            response = await client.complete(
                [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX
            )
    body = json.loads(route.calls[0].request.content)
    assert body["system"] == STABLE
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]},
        {"role": "system", "content": SUFFIX, "clear_at": "next_user_message"},
    ]
    assert route.calls[0].request.headers["anthropic-beta"] == (
        "thinking-binding-controls-2026-08-01,mid-conversation-system-clear-at-2026-08-21"
    )
    # The answer carries the message it was placed after, for the next call to send again.
    assert response.message.instructions == {
        "role": "system",
        "content": SUFFIX,
        "clear_at": "next_user_message",
    }


async def test_anthropic_suffix_ends_the_system_prompt_when_the_assistant_speaks_last() -> None:
    # Nothing may follow a final assistant turn the call continues: the system prompt it is.
    body = await sent(
        "anthropic",
        [HI, {"role": "assistant", "content": "Reading"}],
        system_suffix=SUFFIX,
    )
    assert body["system"] == [{"type": "text", "text": SUFFIX}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize("provider", ["openrouter", "deepseek"])
async def test_compatible_chat_wires_end_the_last_user_message_with_the_suffix(
    provider: str,
) -> None:
    body = await sent(provider, [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX)
    assert body["messages"] == [
        {"role": "system", "content": STABLE},
        {"role": "user", "content": f"Fix the build.\n\n{SUFFIX}"},
    ]


async def test_openai_chat_gets_the_suffix_as_a_system_message_after_the_conversation() -> None:
    body = await sent("openai", [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX)
    assert body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": STABLE},
            {"role": "user", "content": "Fix the build."},
            {"role": "system", "content": SUFFIX},
        ],
        "stream": False,
    }


async def test_mistral_keeps_the_suffix_in_the_system_prompt() -> None:
    # Mistral refuses a user message after a tool result and a system message that is not
    # first (providers.ProviderProfile.per_call_instructions): the one system message it is.
    source = Source("mistral", "mistral-medium-latest", api_key="sk-test-0123456789")
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post("https://api.mistral.ai/v1/chat/completions").mock(
            return_value=httpx.Response(200, json=ANSWERS["chat"])
        )
        async with Client([source]) as client:
            await client.complete([{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX)
    body = json.loads(route.calls[0].request.content)
    assert body["messages"] == [
        {"role": "system", "content": f"{STABLE}\n\n{SUFFIX}"},
        {"role": "user", "content": "Fix the build."},
    ]


async def test_chat_suffix_after_tool_results_is_a_user_message_on_compatible_wires() -> None:
    call = ToolCall(id="call_1", name="shell", arguments='{"cmd":"ls"}')
    history = [
        HI,
        Message(role="assistant", content=None, tool_calls=(call,)),
        Message(role="tool", tool_call_id="call_1", content="README.md"),
    ]
    body = await sent("deepseek", history, tools=[SHELL], system_suffix=SUFFIX)
    assert body["messages"][-2:] == [
        {"role": "tool", "content": "README.md", "tool_call_id": "call_1"},
        {"role": "user", "content": SUFFIX},
    ]


async def test_responses_gets_the_suffix_as_a_system_message_after_the_input() -> None:
    body = await sent(
        "openai-responses", [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX
    )
    assert body == {
        "model": "gpt-4o",
        "input": [
            {"role": "user", "content": "Fix the build."},
            {"role": "system", "content": SUFFIX},
        ],
        "instructions": STABLE,
        "stream": False,
    }


async def test_gemini_suffix_ends_the_last_user_turn() -> None:
    body = await sent("gemini", [{"role": "system", "content": STABLE}, HI], system_suffix=SUFFIX)
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "Fix the build."}, {"text": SUFFIX}]}],
        "systemInstruction": {"role": "user", "parts": [{"text": STABLE}]},
    }


# ---------------------------------------------------------------- prompt cache marker


async def test_anthropic_automatic_cache_control_at_the_top_level() -> None:
    body = await sent("anthropic", [{"role": "system", "content": STABLE}, HI], prompt_cache=True)
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": STABLE,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Fix the build."}]}],
        "stream": False,
        "cache_control": {"type": "ephemeral"},
    }


async def test_anthropic_explicit_breakpoints_with_a_ttl_and_a_suffix() -> None:
    history = [
        {"role": "system", "content": STABLE},
        HI,
        {"role": "assistant", "content": "Reading the test."},
        {"role": "user", "content": "Go on."},
    ]
    body = await sent(
        "anthropic",
        history,
        system_suffix=SUFFIX,
        prompt_cache=PromptCache(ttl="1h", breakpoints="explicit"),
    )
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    # The breakpoints end the system prompt and the conversation; the suffix follows them.
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": STABLE, "cache_control": one_hour}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the build."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Reading the test."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Go on.", "cache_control": one_hour}],
            },
            {"role": "user", "content": SUFFIX},
        ],
        "stream": False,
    }


async def test_openai_prompt_cache_key_and_retention() -> None:
    body = await sent(
        "openai", [HI], prompt_cache=PromptCache(key="repo-polythink", retention="24h")
    )
    assert body == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Fix the build."}],
        "stream": False,
        "prompt_cache_key": "repo-polythink",
        "prompt_cache_retention": "24h",
    }


async def test_responses_prompt_cache_key() -> None:
    body = await sent("openai-responses", [HI], prompt_cache=PromptCache(key="repo-polythink"))
    assert body == {
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "Fix the build."}],
        "stream": False,
        "prompt_cache_key": "repo-polythink",
    }


async def test_openrouter_passes_both_spellings_to_the_providers_behind_it() -> None:
    body = await sent(
        "openrouter",
        [HI],
        prompt_cache=PromptCache(key="repo-polythink", retention="in_memory", ttl="5m"),
    )
    assert body == {
        "model": "openai/gpt-4o",
        "messages": [{"role": "user", "content": "Fix the build."}],
        "stream": False,
        "prompt_cache_key": "repo-polythink",
        "prompt_cache_retention": "in_memory",
        "cache_control": {"type": "ephemeral", "ttl": "5m"},
    }


@pytest.mark.parametrize("provider", ["gemini", "deepseek"])
async def test_wires_without_a_request_marker_send_nothing(provider: str) -> None:
    plain = await sent(provider, [HI])
    marked = await sent(provider, [HI], prompt_cache=PromptCache(key="k", retention="24h"))
    assert marked == plain


def test_the_marker_and_the_suffix_are_part_of_the_cache_key_only_when_set() -> None:
    messages = (Message(role="user", content="Fix the build."),)
    plain = canonical_request(Request(messages=messages))
    assert "system_suffix" not in plain
    assert "prompt_cache" not in plain
    assert canonical_request(Request(messages=messages, system_suffix="a")) != plain
    assert canonical_request(Request(messages=messages, prompt_cache=PromptCache())) != plain


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"key": ""}, "PromptCache.key must be a string of 1 to 64 characters"),
        ({"key": "k" * 65}, "PromptCache.key must be a string of 1 to 64 characters"),
        ({"retention": "1d"}, "PromptCache.retention must be one of in_memory, 24h"),
        ({"ttl": "10m"}, "PromptCache.ttl must be one of 5m, 1h"),
        ({"breakpoints": "all"}, "PromptCache.breakpoints must be one of auto, explicit"),
    ],
)
def test_prompt_cache_values_are_checked(value: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PromptCache(**value)


async def test_a_bad_prompt_cache_or_suffix_fails_before_sending() -> None:
    async with Client([Source("openai", "gpt-4o", api_key="sk-test-0123456789")]) as client:
        with pytest.raises(ValueError, match="prompt_cache must be True, False, None or a"):
            await client.complete([HI], prompt_cache="yes")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="system_suffix must be a string"):
            await client.complete([HI], system_suffix=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- tool_choice none

CALL = ToolCall(id="call_1", name="shell", arguments='{"cmd":"make"}')
LOOP = [
    HI,
    Message(role="assistant", tool_calls=(CALL,)),
    Message(role="tool", tool_call_id="call_1", name="shell", content="build ok"),
]


async def test_tool_choice_none_keeps_the_tools_on_chat() -> None:
    body = await sent("openai", LOOP, tools=[SHELL], tool_choice="none")
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "Run a command",
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == "none"


async def test_tool_choice_none_keeps_the_tools_on_responses() -> None:
    body = await sent("openai-responses", LOOP, tools=[SHELL], tool_choice="none")
    assert [t["name"] for t in body["tools"]] == ["shell"]
    assert body["tool_choice"] == "none"


async def test_tool_choice_none_keeps_the_tools_on_anthropic() -> None:
    body = await sent("anthropic", LOOP, tools=[SHELL], tool_choice="none")
    assert body["tools"] == [
        {
            "name": "shell",
            "description": "Run a command",
            "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        }
    ]
    assert body["tool_choice"] == {"type": "none"}


async def test_tool_choice_none_keeps_the_tools_on_gemini() -> None:
    body = await sent("gemini", LOOP, tools=[SHELL], tool_choice="none")
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "shell",
                    "description": "Run a command",
                    "parametersJsonSchema": {
                        "type": "object",
                        "properties": {"cmd": {"type": "string"}},
                    },
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


# ---------------------------------------------------------------- tool results with images

SHOT_RESULT = Message(
    role="tool",
    tool_call_id="call_1",
    name="shell",
    content=[{"type": "text", "text": "Screenshot of the page:"}, SCREENSHOT],
)


async def test_anthropic_tool_result_holds_the_image_block() -> None:
    body = await sent("anthropic", [*LOOP[:2], SHOT_RESULT], tools=[SHELL])
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": [
                    {"type": "text", "text": "Screenshot of the page:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
                    },
                ],
            }
        ],
    }


async def test_gemini_function_response_carries_the_image_part() -> None:
    body = await sent("gemini", [*LOOP[:2], SHOT_RESULT], tools=[SHELL])
    assert body["contents"][2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "shell",
                    "response": {"result": "Screenshot of the page:"},
                    "parts": [{"inlineData": {"mimeType": "image/png", "data": PIXEL}}],
                }
            }
        ],
    }


async def test_gemini_refuses_a_tool_image_given_by_url() -> None:
    linked = Message(
        role="tool",
        tool_call_id="call_1",
        name="shell",
        content=[{"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}}],
    )
    async with Client([Source("gemini", "gemini-2.5-flash", api_key="gm-key")]) as client:
        with pytest.raises(RequestRejectedError, match="only inline, as a data:<mime type>"):
            await client.complete([*LOOP[:2], linked], tools=[SHELL])


async def test_chat_moves_tool_images_into_a_user_turn_after_the_results() -> None:
    second = Message(role="tool", tool_call_id="call_2", content="exit 0")
    calls = (CALL, ToolCall(id="call_2", name="shell", arguments='{"cmd":"ls"}'))
    history = [HI, Message(role="assistant", tool_calls=calls), SHOT_RESULT, second]
    body = await sent("openai", history, tools=[SHELL])
    assert body["messages"][2:] == [
        {
            "role": "tool",
            "content": "Screenshot of the page:",
            "tool_call_id": "call_1",
        },
        {"role": "tool", "content": "exit 0", "tool_call_id": "call_2"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Images from tool call call_1:"}, SCREENSHOT],
        },
    ]


async def test_chat_image_only_tool_result_points_to_the_next_message() -> None:
    only = Message(role="tool", tool_call_id="call_1", content=[SCREENSHOT])
    body = await sent("openai", [*LOOP[:2], only, {"role": "user", "content": "What now?"}])
    assert body["messages"][2:] == [
        {
            "role": "tool",
            "content": "The result is the image in the next message.",
            "tool_call_id": "call_1",
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "Images from tool call call_1:"}, SCREENSHOT],
        },
        {"role": "user", "content": "What now?"},
    ]


async def test_responses_function_output_is_a_content_array_with_the_image() -> None:
    body = await sent("openai-responses", [*LOOP[:2], SHOT_RESULT], tools=[SHELL])
    # The tool message's name is the output's name (FunctionCallOutputItemParam.name,
    # openai_openapi.yaml 2026-08-21).
    assert body["input"][2] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "name": "shell",
        "output": [
            {"type": "input_text", "text": "Screenshot of the page:"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{PIXEL}",
                "detail": "auto",
            },
        ],
    }
