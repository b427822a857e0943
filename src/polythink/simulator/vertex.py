"""Simulated Vertex AI: ``/{provider}/v1/projects/{p}/locations/{l}/publishers/{pub}/models/…``.

- Auth (CLOUDS.md §2.1, §2.4): a project path needs an OAuth access token (``Authorization:
  Bearer``) that starts with :data:`~polythink.simulator.clouds.GOOGLE_TOKEN_PREFIX`, else 401
  ``UNAUTHENTICATED`` with Google's words; express mode (``/v1/publishers/google/models/…``,
  no project) needs the API key :data:`~polythink.simulator.clouds.VERTEX_API_KEY` in
  ``x-goog-api-key``, else 400 "API key not valid"; Claude takes no API key.
- ``publishers/google``: the simulated Gemini API answers (:mod:`polythink.simulator.gemini`),
  ``alt=sse`` streams included.
- ``publishers/anthropic`` ``:rawPredict`` / ``:streamRawPredict``: the Messages body without
  ``model`` and with ``"anthropic_version": "vertex-2023-10-16"`` (a 400
  ``invalid_request_error`` otherwise), betas in the ``anthropic-beta`` header; answered by the
  simulated Messages API, a stream with one ``vertex_event`` event before ``message_stop``, as
  Vertex adds (vercel/ai#13576).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from polythink.simulator import anthropic, gemini
from polythink.simulator.clouds import GOOGLE_TOKEN_PREFIX, VERTEX_API_KEY, Relay
from polythink.simulator.server import SimRequest, SimResponse

__all__ = ["handle", "matches"]

_METHODS = (":generateContent", ":streamGenerateContent", ":rawPredict", ":streamRawPredict")
_VERSION = "vertex-2023-10-16"
_UNAUTHENTICATED = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)


def matches(path: str) -> bool:
    """Whether ``path`` is a Vertex publisher model method."""
    return "/publishers/" in path and path.endswith(_METHODS)


def bad_request(message: str) -> dict[str, Any]:
    """Google's 400 body."""
    return _error(400, "INVALID_ARGUMENT", message)


def _error(code: int, status: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


class _Raw(Relay):
    """The simulated Messages API's stream with Vertex's extra ``vertex_event``."""

    async def relay_event(self, data: str, event: str | None) -> None:
        if event == "message_stop":
            usage = {"type": "vertex_event", "usage": {"billed_tokens": 1}}
            await super().relay_event(json.dumps(usage), "vertex_event")
        await super().relay_event(data, event)


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Vertex request."""
    express = "/projects/" not in request.path
    head, _, method = request.path.rpartition(":")
    resource = head.rsplit("/publishers/", 1)[-1]
    publisher, _, model = resource.partition("/models/")
    if express:
        if publisher != "google":
            await response.send_json(
                401, _error(401, "UNAUTHENTICATED", "API keys are not supported by this API.")
            )
            return
        if request.headers.get("x-goog-api-key") != VERTEX_API_KEY:
            await response.send_json(
                400,
                _error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."),
            )
            return
    else:
        token = request.headers.get("authorization", "")
        if not token.startswith("Bearer " + GOOGLE_TOKEN_PREFIX):
            await response.send_json(401, _error(401, "UNAUTHENTICATED", _UNAUTHENTICATED))
            return
    if publisher == "google":
        await gemini.handle(request, response)
        return
    if publisher != "anthropic" or method not in ("rawPredict", "streamRawPredict"):
        await response.send_json(
            404, _error(404, "NOT_FOUND", f"Publisher Model `{resource}` was not found.")
        )
        return
    try:
        body = request.json()
    except ValueError:
        body = None
    problem = None
    if not isinstance(body, Mapping):
        problem = "The request body is not valid JSON."
    elif "model" in body:
        problem = "model: Extra inputs are not permitted"
    elif body.get("anthropic_version") != _VERSION:
        problem = f"anthropic_version: Input should be '{_VERSION}'"
    if problem is not None:
        await response.send_json(400, anthropic.bad_request(problem))
        return
    assert isinstance(body, Mapping)
    inner = {k: v for k, v in body.items() if k != "anthropic_version"}
    inner["model"] = model
    inner["stream"] = method == "streamRawPredict"
    headers = {
        **{k: v for k, v in request.headers.items() if k.startswith(("x-sim-", "anthropic-beta"))},
        "anthropic-version": "2023-06-01",
    }
    messages = SimRequest(
        "POST", f"/{request.provider}/v1/messages", {}, headers, json.dumps(inner).encode()
    )
    await anthropic.handle(messages, _Raw(response, messages))
