"""Simulated Azure OpenAI: ``/{provider}/openai/v1/…`` and the deployments API.

- Routes (CLOUDS.md §3.1): the v1 API, ``/openai/v1/chat/completions`` and
  ``/openai/v1/responses``, the deployment named by the body's ``model``; the deployments API,
  ``/openai/deployments/{deployment}/chat/completions`` and ``/openai/responses``, which need
  a dated ``api-version`` query parameter (404 "Resource not found" without one).
- Auth: the ``api-key`` header :data:`~polythink.simulator.clouds.AZURE_API_KEY`, or an
  Entra ID bearer token that starts with :data:`~polythink.simulator.clouds.AZURE_TOKEN_PREFIX`;
  else 401 with Azure's words.
- A deployment serves the model ``Settings.deployments`` maps it to (else the model its name
  is); the simulated OpenAI API answers for that model (``model`` in the answer is the model,
  as Azure reports it), so its reasoning rules apply.
- Content filtering (CLOUDS.md §3.1, AZ-CF): a prompt with :data:`FILTERED_PROMPT` is refused
  with HTTP 400 ``code: content_filter`` and ``innererror.content_filter_result``; one with
  :data:`FILTERED_COMPLETION` is answered with ``finish_reason: "content_filter"`` and the
  choice's ``content_filter_results``. Every Chat answer carries ``prompt_filter_results``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from polythink.clouds import dated_api_version
from polythink.providers import PROVIDERS
from polythink.simulator import openai_chat, openai_responses, tiers
from polythink.simulator.clouds import AZURE_API_KEY, AZURE_TOKEN_PREFIX, Relay
from polythink.simulator.server import SimRequest, SimResponse

__all__ = ["FILTERED_COMPLETION", "FILTERED_PROMPT", "handle", "matches"]

FILTERED_PROMPT = "SIM_AZURE_FILTER_PROMPT"
"""A prompt holding this is refused by the simulated content filter (HTTP 400)."""
FILTERED_COMPLETION = "SIM_AZURE_FILTER_COMPLETION"
"""A prompt holding this gets a completion the simulated content filter stopped."""

_SAFE = {"filtered": False, "severity": "safe"}
_CATEGORIES = ("hate", "self_harm", "sexual", "violence")


def _results(filtered: str | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {name: dict(_SAFE) for name in _CATEGORIES}
    if filtered is not None:
        results[filtered] = {"filtered": True, "severity": "high"}
    return results


def matches(path: str) -> bool:
    """Whether ``path`` is an Azure OpenAI route (under the base URL of an Azure profile)."""
    provider, _, rest = path.lstrip("/").partition("/")
    profile = PROVIDERS.get(provider)
    return (
        profile is not None
        and profile.cloud == "azure"
        and rest.startswith("openai/")
        and path.endswith(("/chat/completions", "/responses"))
    )


def bad_request(message: str) -> dict[str, Any]:
    """Azure's 400 body (OpenAI's shape)."""
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


class _Annotated(Relay):
    """The simulated OpenAI answer with Azure's content-filter annotations."""

    def __init__(self, outer: SimResponse, request: SimRequest, filtered: bool) -> None:
        super().__init__(outer, request)
        self.filtered = filtered

    async def answer(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        data = json.loads(body)
        if status == 200 and isinstance(data.get("choices"), list):
            data["prompt_filter_results"] = [
                {"prompt_index": 0, "content_filter_results": _results()}
            ]
            for choice in data["choices"]:
                choice["content_filter_results"] = _results("violence" if self.filtered else None)
                if self.filtered:
                    choice["finish_reason"] = "content_filter"
                    choice["message"]["content"] = ""
        await self.outer.send_json(status, data, headers={"apim-request-id": "sim-azure"})


def _texts(body: Mapping[str, Any]) -> str:
    return json.dumps(body.get("messages", body.get("input", "")))


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Azure OpenAI request."""
    key = request.headers.get("api-key")
    token = request.headers.get("authorization", "")
    if key != AZURE_API_KEY and not token.startswith("Bearer " + AZURE_TOKEN_PREFIX):
        await response.send_json(
            401,
            {
                "error": {
                    "code": "401",
                    "message": "Access denied due to invalid subscription key or wrong API "
                    "endpoint. Make sure to provide a valid key for an active subscription "
                    "and use a correct regional API endpoint for your resource.",
                }
            },
        )
        return
    version = request.query.get("api-version")
    v1 = "/openai/v1/" in request.path
    if not v1 and (version is None or not dated_api_version(version)):
        await response.send_json(404, {"error": {"code": "404", "message": "Resource not found"}})
        return
    try:
        body = request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        await response.send_json(400, bad_request("The request body is not valid JSON."))
        return
    deployment = (
        request.path.split("/deployments/", 1)[1].split("/", 1)[0]
        if "/deployments/" in request.path
        else body.get("model")
    )
    if not isinstance(deployment, str) or not deployment:
        await response.send_json(400, bad_request("model: the deployment name is required"))
        return
    body["model"] = response.settings.deployments.get(deployment, deployment)
    texts = _texts(body)
    if FILTERED_PROMPT in texts:
        await response.send_json(
            400,
            {
                "error": {
                    "message": "The response was filtered due to the prompt triggering Azure "
                    "OpenAI's content management policy. Please modify your prompt and retry.",
                    "type": None,
                    "param": "prompt",
                    "code": "content_filter",
                    "status": 400,
                    "innererror": {
                        "code": "ResponsibleAIPolicyViolation",
                        "content_filter_result": {
                            **_results("violence"),
                            "jailbreak": {"filtered": False, "detected": False},
                        },
                    },
                }
            },
        )
        return
    # Azure refuses a tier the deployment's model lacks (400, no fallback); the OpenAI handler
    # below then plays the tiers it takes as OpenAI does.
    played = tiers.play(request.provider, body["model"], body, request, response.settings)
    if played.error is not None:
        await response.send_json(*played.error)
        return
    responses = request.path.endswith("/responses")
    inner = SimRequest(
        request.method,
        "/openai-responses/v1/responses" if responses else "/openai/v1/chat/completions",
        {},
        {k: v for k, v in request.headers.items() if k.startswith("x-sim-")},
        json.dumps(body).encode(),
    )
    if responses:
        await openai_responses.handle(inner, response)
        return
    relay = (
        response
        if body.get("stream")
        else _Annotated(response, inner, FILTERED_COMPLETION in texts)
    )
    await openai_chat.handle(inner, relay)
