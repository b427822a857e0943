"""The simulator refuses what the real APIs refuse, in each provider's own error shape, and
closes without a traceback while a request is still being answered.

Each body here is sent raw (not through polythink, whose own checks would refuse it first):
a tool result that answers no call, a message whose content is null, a content part of a
type the wire does not have. The expected bodies are the providers' (sources in the
simulator modules' docstrings).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polythink.simulator import Settings, Simulator

USER = {"role": "user", "content": "What is the weather in Lisbon?"}
VIDEO = {"type": "video", "video": {"url": "https://x.test/clip.mp4"}}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator() as simulator:
        yield simulator


def post(sim: Simulator, provider: str, path: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"anthropic-version": "2023-06-01"} if provider == "anthropic" else {}
    return httpx.post(f"{sim.base_url(provider)}{path}", json=body, headers=headers, timeout=10)


def openai(message: str, param: str, code: str | None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


CHAT_PARTS = "'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'"


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [USER, {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
            openai(
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                "messages.[1].role",
                None,
            ),
        ),
        (
            [{"role": "user", "content": None}],
            openai(
                "Invalid value for 'content': expected a string, got null.",
                "messages.[0].content",
                None,
            ),
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, VIDEO]}],
            openai(
                f"Invalid value: 'video'. Supported values are: {CHAT_PARTS}.",
                "messages[0].content[1].type",
                "invalid_value",
            ),
        ),
    ],
)
@pytest.mark.parametrize("provider", ["openai", "deepseek"])
def test_chat_refuses_in_openais_words(
    sim: Simulator, provider: str, messages: list[Any], expected: dict[str, Any]
) -> None:
    model = "gpt-5.5" if provider == "openai" else "deepseek-v4-pro"
    answer = post(sim, provider, "/chat/completions", {"model": model, "messages": messages})
    assert (answer.status_code, answer.json()) == (400, expected)


def test_chat_takes_a_tool_result_that_answers_a_call(sim: Simulator) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
    messages = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    ]
    answer = post(sim, "openai", "/chat/completions", {"model": "gpt-5.5", "messages": messages})
    assert answer.status_code == 200


ANTHROPIC_TAGS = (
    "'code_execution_tool_result', 'container_upload', 'document', 'image', "
    "'mcp_tool_result', 'mcp_tool_use', 'redacted_thinking', 'search_result', "
    "'server_tool_use', 'text', 'thinking', 'tool_result', 'tool_use', 'web_search_tool_result'"
)


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (
            [
                USER,
                {"role": "assistant", "content": "Let me look."},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18"}],
                },
            ],
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
            "toolu_1. Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message.",
        ),
        ([{"role": "user", "content": None}], "messages.0.content: Input should be a valid list"),
        (
            [{"role": "user", "content": [VIDEO]}],
            "messages.0.content.0: Input tag 'video' found using 'type' does not match any of the "
            f"expected tags: {ANTHROPIC_TAGS}",
        ),
    ],
)
def test_anthropic_refuses_in_its_words(sim: Simulator, messages: list[Any], message: str) -> None:
    body = {"model": "claude-sonnet-5-5", "max_tokens": 100, "messages": messages}
    answer = post(sim, "anthropic", "/messages", body)
    assert (answer.status_code, answer.json()) == (
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}},
    )


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (
            [
                {"role": "user", "parts": [{"text": "Weather?"}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "w", "response": {"c": 18}}}],
                },
            ],
            "Please ensure that function response turn comes immediately after a function call "
            "turn.",
        ),
        (
            [{"role": "user", "parts": []}],
            "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.",
        ),
        (
            [{"role": "user", "parts": [{"text": "What is it?"}, VIDEO]}],
            "Invalid JSON payload received. Unknown name \"type\" at 'contents[0].parts[1]': "
            "Cannot find field.",
        ),
    ],
)
def test_gemini_refuses_in_its_words(sim: Simulator, contents: list[Any], message: str) -> None:
    answer = post(sim, "gemini", "/models/gemini-2.5-flash:generateContent", {"contents": contents})
    assert (answer.status_code, answer.json()) == (
        400,
        {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}},
    )


RESPONSES_PARTS = (
    "'input_text', 'input_image', 'input_audio', 'output_text', 'refusal', 'input_file', "
    "'computer_screenshot', 'summary_text', and 'encrypted_content'"
)


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (
            [USER, {"type": "function_call_output", "call_id": "call_9", "output": "18 C"}],
            openai(
                "No tool call found for function call output with call_id call_9.", "input", None
            ),
        ),
        (
            [{"role": "user", "content": None}],
            openai(
                "Invalid type for 'input[0].content': expected one of a string or array of "
                "objects, but got null instead.",
                "input[0].content",
                "invalid_type",
            ),
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            openai(
                f"Invalid value: 'text'. Supported values are: {RESPONSES_PARTS}.",
                "input[0].content[0].type",
                "invalid_value",
            ),
        ),
    ],
)
def test_responses_refuses_in_openais_words(
    sim: Simulator, items: list[Any], expected: dict[str, Any]
) -> None:
    answer = post(sim, "openai-responses", "/responses", {"model": "gpt-5.5", "input": items})
    assert (answer.status_code, answer.json()) == (400, expected)


@pytest.mark.parametrize("stream", [False, True])
def test_closing_with_a_request_in_flight_prints_no_traceback(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    simulator = Simulator(Settings(latency=0.0 if stream else 5.0, chunk_delay=0.5)).start()
    body = {"model": "gpt-5.5", "messages": [USER], "stream": stream}
    outcome: list[str] = []
    url = f"{simulator.base_url('openai')}/chat/completions"

    def call() -> None:
        try:
            with httpx.stream("POST", url, json=body, timeout=10) as answer:
                for _ in answer.iter_bytes():
                    pass
            outcome.append("finished")
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 60  # a loaded machine may be slow to send the request
    while simulator.stats.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert simulator.stats.in_flight == 1
    began = time.monotonic()
    simulator.stop()
    caller.join(30)
    # A handler task left pending is reported when it is collected ("Task was destroyed but
    # it is pending!"): drop every reference to the server first.
    del simulator
    gc.collect()
    # Well within the 5 s the non-streamed answer would take (its handler is not waited for),
    # with room for a loaded machine.
    assert time.monotonic() - began < 4.5
    assert outcome == ["RemoteProtocolError"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
