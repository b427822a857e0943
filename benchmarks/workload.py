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

__all__ = ["ANTHROPIC", "OPENAI_CHAT", "STREAM", "Workload", "prompt", "workload"]

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
    from polythink.providers import get_provider
    from polythink.reasoning.resolve import resolve
    from polythink.transports import transport_class
    from polythink.types import Request, coerce_messages

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

ANTHROPIC = ("anthropic", "anthropic", "claude-sonnet-4-5", "low")
"""The same call on the Anthropic Messages wire (for the ``anthropic`` SDK and its floor)."""

STREAM = ("openai_chat", "deepseek", "deepseek-v4-pro", "high")
"""Streams with reasoning deltas: DeepSeek's dialect sends ``reasoning_content`` deltas."""
