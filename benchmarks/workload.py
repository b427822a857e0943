"""The calls every client makes: one provider dialect, one model, one tier, one body.

A :class:`Workload` is computed once by the orchestrator and handed to every worker, so every
client sends the same JSON body (the one polythink's own transport builds for the call) and
the simulator answers every client the same way. Only the prompt changes per call
(``prompt(i)``), so a response cache on the client side misses unless a scenario wants hits.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC",
    "OPENAI_CHAT",
    "STREAM",
    "TOOLS",
    "Workload",
    "conversation",
    "prompt",
    "tools",
    "workload",
]

_PROMPT = "Request {i}: why is the sky blue at noon today?"


def prompt(i: int) -> str:
    """The user prompt of call ``i`` (same word count for every ``i``)."""
    return _PROMPT.format(i=i)


@dataclass(frozen=True)
class Workload:
    """One kind of call, as JSON-able data for the worker processes.

    Attributes:
        wire: ``openai_chat`` or ``anthropic``.
        provider: the simulated provider (first path segment) and polythink provider id.
        model: the model id.
        effort: the tier polythink is asked for (``None`` = unset).
        stream: whether the call streams.
        body: the body polythink sends for ``prompt(0)``; other clients send the same with
            their own prompt in ``messages``.
        headers: provider headers beyond authentication (``anthropic-version``).
    """

    wire: str
    provider: str
    model: str
    effort: str | None
    stream: bool
    body: dict[str, Any]
    headers: dict[str, str]

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Workload:
        return cls(**data)

    def body_for(self, i: int) -> dict[str, Any]:
        """The body of call ``i``: the reference body with call ``i``'s prompt."""
        return {**self.body, "messages": [{"role": "user", "content": prompt(i)}]}

    def params(self) -> dict[str, Any]:
        """Every body field except ``model`` and ``messages`` (what SDK calls pass on)."""
        return {k: v for k, v in self.body.items() if k not in ("model", "messages")}


def workload(wire: str, provider: str, model: str, effort: str | None, *, stream: bool) -> Workload:
    """Build the workload, asking polythink's own transport for the exact body it sends."""
    import httpx

    from polythink.config import Source
    from polythink.conversion import coerce_messages
    from polythink.providers import get_provider
    from polythink.reasoning.resolve import resolve
    from polythink.transports import transport_class
    from polythink.types import Request

    profile = get_provider(provider)
    source = Source(provider, model, api_key="sim", base_url="http://127.0.0.1:1/v1")
    transport = transport_class(profile.wire)(
        source=source,
        index=0,
        profile=profile,
        client=httpx.AsyncClient(),
        api_key="sim",
    )
    request = Request(
        messages=coerce_messages([{"role": "user", "content": prompt(0)}]),
        stream=stream,
        resolution=resolve(effort, provider=profile, model=model),
    )
    body = transport.body(request)
    headers = {
        k: v
        for k, v in transport.extra_headers().items()
        if k not in ("authorization", profile.auth)
    }
    return Workload(wire, provider, model, effort, stream, body, headers)


OPENAI_CHAT = ("openai_chat", "openai", "gpt-5.5", "low")
"""Non-streaming calls: OpenAI Chat Completions, a reasoning model at ``low``."""

ANTHROPIC = ("anthropic", "anthropic", "claude-haiku-4-5", "low")
"""The same call on the Anthropic Messages wire (for the ``anthropic`` SDK and its floor)."""

STREAM = ("openai_chat", "deepseek", "deepseek-v4-pro", "high")
"""Streams with reasoning deltas: DeepSeek's dialect sends ``reasoning_content`` deltas."""


TOOLS = 30
"""Tools sent with every call of the conversation-size scenario."""

_TURN_TEXT = (
    "Step {k}: the caller asked about the deployment log of service {k} — the last run "
    "ended with exit code {code}; the retry policy waited {wait} s before the next attempt, "
    "and the operator wants a short summary of what changed since the previous release."
)


def tools(n: int = TOOLS) -> list[dict[str, Any]]:
    """``n`` OpenAI Chat tools of a realistic size (about 280 bytes of JSON each)."""
    return [
        {
            "type": "function",
            "function": {
                "name": f"lookup_{k}",
                "description": f"Look up record {k} of the inventory and return its fields.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "the record id"},
                        "fields": {"type": "array", "items": {"type": "string"}},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                    "required": ["id"],
                },
            },
        }
        for k in range(n)
    ]


def _turn(k: int) -> list[dict[str, Any]]:
    """Four messages of an agent turn: a question, a tool call, its result, an answer."""
    text = _TURN_TEXT.format(k=k, code=k % 7, wait=k % 5 + 1)
    call_id = f"call_{k:06d}"
    return [
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": f"lookup_{k % TOOLS}", "arguments": f'{{"id":"r{k}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f'{{"id":"r{k}","status":"ok"}}'},
        {"role": "assistant", "content": "Summary: " + text},
    ]


def conversation(size: int, i: int) -> list[dict[str, Any]]:
    """A conversation of ``size`` OpenAI Chat dicts (at least 2) ending with ``prompt(i)``.

    A system message, then agent turns (question, tool call, tool result, answer) cut to
    ``size - 2`` messages, then call ``i``'s user prompt: the same conversation for every
    ``i`` but its last message, so a response cache misses on every call.
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an operator."}]
    k = 0
    while len(messages) < size - 1:
        messages.extend(_turn(k)[: size - 1 - len(messages)])
        k += 1
    messages.append({"role": "user", "content": prompt(i)})
    return messages
