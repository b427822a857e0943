"""The simulator answers malformed input as the providers do: a 4xx with their error body.

Garbage bodies go to every route (each wire, streaming and not, several dialects of the
Chat Completions wire): bytes that are not JSON, JSON that is not an object, and a valid
body with one field at a time replaced by a value of the wrong type, at the top level and
inside messages, content parts and tools. No answer may be a dropped connection or a 5xx.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from polythink.simulator import Simulator

CHAT = {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]}
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("openai", "/openai/v1/chat/completions", CHAT),
    ("openai", "/openai/v1/chat/completions", {**CHAT, "stream": True}),
    ("openai", "/deepseek/v1/chat/completions", {**CHAT, "model": "deepseek-v4-pro"}),
    ("openai", "/qwen/v1/chat/completions", {**CHAT, "model": "qwen3-max", "stream": True}),
    ("openai", "/openrouter/v1/chat/completions", {**CHAT, "model": "openai/gpt-5.5"}),
    ("openai", "/openai/v1/responses", {"model": "gpt-5.5", "input": "hi"}),
    ("openai", "/openai/v1/responses", {"model": "gpt-5.5", "input": "hi", "stream": True}),
    (
        "anthropic",
        "/anthropic/v1/messages",
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": CHAT["messages"]},
    ),
    (
        "anthropic",
        "/anthropic/v1/messages",
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "messages": CHAT["messages"],
            "stream": True,
        },
    ),
    (
        "gemini",
        "/gemini/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
    (
        "gemini",
        "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
]
GARBAGE: list[Any] = [None, -5, 1.5, "x", True, [], {}, [1], [None], [{}], {"type": 1}, [[1]]]
TOP_KEYS = [
    "model", "messages", "input", "contents", "tools", "tool_choice", "reasoning_effort",
    "reasoning", "thinking", "output_config", "max_tokens", "max_output_tokens", "stream",
    "stream_options", "temperature", "system", "systemInstruction", "generationConfig",
    "enable_thinking", "thinking_budget", "chat_template_kwargs", "include", "stop",
]  # fmt: skip
TOOLS = {
    "openai": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "anthropic": [{"name": "f", "input_schema": {"type": "object"}}],
    "gemini": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
}


def mutations(shape: str, base: dict[str, Any]) -> list[bytes]:
    bodies = [b"", b"\xff\xfe{", b"{not json", b"[]", b"1", b'"x"', b"null", b"{}"]

    def add(body: dict[str, Any]) -> None:
        bodies.append(json.dumps(body).encode())

    for key in TOP_KEYS:
        for value in GARBAGE:
            add({**base, key: value})
    turns_key = "contents" if shape == "gemini" else "messages" if "messages" in base else None
    with_tools = {**base, "tools": TOOLS[shape]}
    for value in GARBAGE:
        if turns_key is not None:
            for path in ((0,), (0, "role"), (0, "content"), (0, "parts"), (0, "parts", 0)):
                body = copy.deepcopy(base)
                target: Any = body[turns_key]
                try:
                    for step in path[:-1]:
                        target = target[step]
                    target[path[-1]] = value
                except (KeyError, IndexError, TypeError):
                    continue
                add(body)
        else:
            add({**base, "input": [value]})
            add({**base, "input": [{"role": "user", "content": value}]})
        add({**with_tools, "tools": [value]})
        body = copy.deepcopy(with_tools)
        tool = body["tools"][0]
        inner = tool.get("function") or (tool.get("functionDeclarations") or [tool])[0]
        for key in ("name", "parameters", "input_schema"):
            changed = copy.deepcopy(body)
            changed_tool = changed["tools"][0]
            target = (
                changed_tool.get("function")
                or (changed_tool.get("functionDeclarations") or [changed_tool])[0]
            )
            if key in inner:
                target[key] = value
                add(changed)
    return bodies


def provider_error(shape: str, status: int, body: Any) -> bool:
    if shape == "anthropic":
        error = body.get("error") if isinstance(body, dict) else None
        return (
            body.get("type") == "error"
            and isinstance(error, dict)
            and isinstance(error.get("type"), str)
            and isinstance(error.get("message"), str)
        )
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return False
    if shape == "gemini":
        return error.get("code") == status and isinstance(error.get("status"), str)
    return isinstance(error.get("type"), str)


def test_garbage_on_every_route_gets_a_4xx_with_the_providers_error_body() -> None:
    answered: dict[int, int] = {}
    wrong: list[str] = []
    with Simulator() as sim, httpx.Client(base_url=f"http://127.0.0.1:{sim.port}") as http:
        for shape, path, base in ROUTES:
            for body in mutations(shape, base):
                try:
                    reply = http.post(path, content=body, headers={"content-type": "x"})
                except httpx.TransportError as exc:
                    wrong.append(f"{path} {body[:80]!r}: {type(exc).__name__}")
                    continue
                answered[reply.status_code] = answered.get(reply.status_code, 0) + 1
                if "could not be read" in reply.text:
                    # The dispatcher's last resort: every input here has its own check.
                    wrong.append(f"{path} {body[:80]!r}: caught only by the last resort")
                elif 400 <= reply.status_code < 500:
                    if not provider_error(shape, reply.status_code, reply.json()):
                        wrong.append(f"{path} {body[:80]!r}: {reply.status_code} {reply.text}")
                elif reply.status_code != 200:
                    wrong.append(f"{path} {body[:80]!r}: HTTP {reply.status_code}")
        # The server is still there and well after all of it.
        assert http.post(ROUTES[0][1], json=ROUTES[0][2]).status_code == 200
    assert wrong == []
    assert sum(answered.values()) > 2000
    assert answered[400] > 500


@pytest.mark.parametrize(
    "raw",
    [b"GARBAGE\r\n\r\n", b"POST /openai/v1/chat/completions HTTP/1.1\r\ncontent-length: x\r\n\r\n"],
)
def test_a_malformed_request_head_does_not_take_the_server_down(raw: bytes) -> None:
    import socket

    with Simulator() as sim:
        with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as sock:
            sock.sendall(raw)
            sock.recv(65536)
        with httpx.Client() as http:
            reply = http.post(f"{sim.base_url('openai')}/chat/completions", json=CHAT)
    assert reply.status_code == 200
