"""Transports: one module per wire protocol, each turning a Request into HTTP and back.

:func:`transport_class` finds the class for a wire by name, importing its module only when
a client first needs it (so ``import polythink`` does not load every wire).
"""

from __future__ import annotations

import importlib
from typing import Any

from polythink.errors import InvalidInputError

__all__ = ["WIRES", "transport_class"]

WIRES: dict[str, str] = {
    "openai_chat": "polythink.transports.openai_chat:OpenAIChatTransport",
    "openai_responses": "polythink.transports.openai_responses:OpenAIResponsesTransport",
    "anthropic": "polythink.transports.anthropic:AnthropicTransport",
    "gemini": "polythink.transports.gemini:GeminiTransport",
    "bedrock": "polythink.transports.bedrock:BedrockTransport",
    "bedrock_converse": "polythink.transports.bedrock:BedrockConverseTransport",
    "vertex": "polythink.transports.vertex:VertexTransport",
    "vertex_anthropic": "polythink.transports.vertex:VertexAnthropicTransport",
}
"""Wire name -> ``module:Class`` of its transport."""


def transport_class(wire: str) -> Any:
    """Return the transport class for ``wire``.

    Raises:
        ValueError: for an unknown wire, or one whose module is not available.
    """
    target = WIRES.get(wire)
    if target is None:
        raise InvalidInputError(f"unknown wire {wire!r}; known: {', '.join(WIRES)}")
    module_name, _, name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise InvalidInputError(f"the {wire} transport is not available in this build") from exc
    return getattr(module, name)
