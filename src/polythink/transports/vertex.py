"""Vertex AI: Gemini through ``generateContent``, Claude through ``rawPredict``.

Gemini (``POST {endpoint}/publishers/google/models/{model}:generateContent``,
``:streamGenerateContent?alt=sse``) takes the Gemini API's body as it is; the differences are
the host and path (a project and location, or express mode's ``/v1/publishers/…`` with an API
key), the auth (OAuth tokens), and thought signatures, which are not portable between the
Gemini API and Vertex (AI Studio answers a Vertex signature with 400 "Corrupted thought
signature."; CLOUDS.md §2.2): a Vertex turn's parts carry ``reasoning_format`` ``"vertex"``
and go back to Vertex only. ``alt=sse`` matters: without it Vertex streams one JSON array
(CLOUDS.md §2.2, litellm#4459).

Claude (``POST {endpoint}/publishers/anthropic/models/{model}:rawPredict``,
``:streamRawPredict``) takes the Anthropic Messages body without ``model`` (it is in the URL)
and with ``"anthropic_version": "vertex-2023-10-16"`` in the body instead of the header;
``stream`` stays in the body and betas stay in the ``anthropic-beta`` header (CLOUDS.md §2.3,
the Anthropic SDK's Vertex client). Streams are Anthropic's SSE, plus ``vertex_event`` events,
which are ignored. Errors are Anthropic-shaped. A model id may name its publisher
(``anthropic/claude-…``, ``publishers/anthropic/models/claude-…``); versions use ``@``
(``claude-sonnet-4-5@20250929``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from polythink.transports.anthropic import AnthropicTransport
from polythink.transports.gemini import GeminiTransport
from polythink.types import Request

__all__ = [
    "VERTEX_ANTHROPIC_VERSION",
    "VertexAnthropicTransport",
    "VertexTransport",
    "model_resource",
]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
"""The body's ``anthropic_version`` on Vertex (platform.claude.com "Claude on Vertex AI"; the
Anthropic SDK's Vertex client; CLOUDS.md §2.3)."""


def model_resource(model: str, publisher: str) -> str:
    """``publishers/{publisher}/models/{name}`` for a Vertex model id: a bare name, or one
    that names its publisher (``anthropic/claude-opus-4-8``,
    ``publishers/anthropic/models/claude-opus-4-8``); the name percent-encoded as one path
    segment (``@`` kept)."""
    if model.startswith("publishers/"):
        return model
    if "/" in model:
        publisher, _, model = model.partition("/")
    return f"publishers/{publisher}/models/{quote(model, safe='@')}"


class VertexTransport(GeminiTransport):
    """Gemini on Vertex AI; auth by OAuth token or an express-mode key (:mod:`polythink.auth`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        root = f"{self.source.endpoint}/{model_resource(self.source.model, 'google')}"
        self.url = f"{root}:generateContent"
        self.stream_url = f"{root}:streamGenerateContent?alt=sse"


class VertexAnthropicTransport(AnthropicTransport):
    """Claude on Vertex AI (``rawPredict`` / ``streamRawPredict``); every rule of
    :class:`~polythink.transports.anthropic.AnthropicTransport` applies to the body, which
    then loses ``model`` and gains ``anthropic_version`` (the source's ``api_version``, default
    :data:`VERTEX_ANTHROPIC_VERSION`). Auth is an OAuth token (:mod:`polythink.auth`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        root = f"{self.source.endpoint}/{model_resource(self.source.model, 'anthropic')}"
        self.url = f"{root}:rawPredict"
        self.stream_url = f"{root}:streamRawPredict"

    def extra_headers(self) -> dict[str, str]:
        """None: the version goes in the body."""
        return {}

    def _version(self) -> str:
        return self.source.api_version or VERTEX_ANTHROPIC_VERSION

    def platform_body(self, body: dict[str, Any], request: Request) -> dict[str, Any]:
        """The body without ``model``, with ``anthropic_version`` first."""
        rest = {key: value for key, value in body.items() if key != "model"}
        return {"anthropic_version": self._version(), **rest}
