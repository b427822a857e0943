"""Simulated Amazon Bedrock runtime: ``/{provider}/v1/model/{modelId}/{operation}``.

Operations (CLOUDS.md §1.2, §1.3, §1.7, §1.9):

- every request must carry a valid SigV4 signature for the service ``bedrock``
  (:func:`polythink.simulator.clouds.sigv4_problem`) or the Bedrock API key
  (:data:`~polythink.simulator.clouds.BEDROCK_API_KEY`) as a bearer token; else 403 with
  Bedrock's rest-json error (``{"message": …}``, the type in ``x-amzn-ErrorType``:
  ``UnrecognizedClientException``, ``InvalidSignatureException`` or
  ``MissingAuthenticationTokenException``);
- ``invoke`` / ``invoke-with-response-stream`` (Claude): the Anthropic Messages body with
  ``"anthropic_version": "bedrock-2023-05-31"`` and no ``model`` or ``stream`` (a 400
  ``ValidationException`` "Malformed input request: #: extraneous key [model] is not
  permitted…" otherwise); ``anthropic_beta`` becomes the betas. It is answered by the
  simulated Messages API (:mod:`polythink.simulator.anthropic`: every reasoning rule and
  signature check of it applies); its errors become ``ValidationException`` (400),
  ``ResourceNotFoundException`` (404); a stream's events go out as ``chunk`` event-stream
  frames (``{"bytes": <base64 of the event>, "p": <padding>}``), the last with
  ``amazon-bedrock-invocationMetrics``;
- ``converse`` / ``converse-stream``: the Converse body, answered for Claude (``thinking`` in
  ``additionalModelRequestFields``) by the simulated Messages API and translated back
  (thinking -> ``reasoningContent.reasoningText`` with its signature, redacted thinking ->
  ``redactedContent``, tool use -> ``toolUse``); for other vendors from the registry's tiers
  (``reasoning_effort``, ``reasoning.effort`` or ``reasoningConfig``, refused with Bedrock's
  wrapped model error when the model lacks the tier), with unsigned reasoning text and, when
  tools are offered, a ``toolUse`` of the first one for ``tool_rounds`` turns. A stream
  sends Converse's events, text and reasoning without a start event, the signature as its own
  delta before the block's stop, usage last in ``metadata``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from polythink.simulator import anthropic, behaviour
from polythink.simulator.clouds import (
    BEDROCK_API_KEY,
    Relay,
    event,
    sigv4_problem,
)
from polythink.simulator.server import Settings, SimRequest, SimResponse
from polythink.types import Effort

__all__ = ["error_body", "handle", "matches"]

_OPERATIONS = ("/invoke", "/invoke-with-response-stream", "/converse", "/converse-stream")
_VERSION = "bedrock-2023-05-31"
_EVENT_STREAM = "application/vnd.amazon.eventstream"
_ERROR_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def matches(path: str) -> bool:
    """Whether ``path`` is a Bedrock runtime model operation."""
    return "/model/" in path and path.endswith(_OPERATIONS)


def error_body(message: str) -> dict[str, Any]:
    """Bedrock's rest-json error body."""
    return {"message": message}


def bad_request(message: str) -> dict[str, Any]:
    """Bedrock's 400 body for a request it cannot read."""
    return error_body(message)


def error_headers(status: int, kind: str | None = None) -> dict[str, str]:
    """The headers of a Bedrock error: its type in ``x-amzn-ErrorType``, a request id."""
    return {
        "x-amzn-ErrorType": f"{kind or _TYPES.get(status, 'InternalServerException')}:"
        f"{_ERROR_NAMESPACE}",
        "x-amzn-RequestId": "sim-bedrock-error",
    }


async def _fail(response: SimResponse, status: int, message: str, kind: str | None = None) -> None:
    await response.send_json(status, error_body(message), headers=error_headers(status, kind))


def _auth_problem(request: SimRequest) -> tuple[str, str] | None:
    header = request.headers.get("authorization", "")
    if header.startswith("Bearer "):
        if header[len("Bearer ") :] == BEDROCK_API_KEY:
            return None
        return (
            "UnrecognizedClientException",
            "Invalid API Key format: Must start with pre-defined prefix",
        )
    problem = sigv4_problem(request)
    if problem is None:
        return None
    if problem == "Missing Authentication Token":
        return "MissingAuthenticationTokenException", problem
    if "security token" in problem:
        return "UnrecognizedClientException", problem
    return "InvalidSignatureException", problem


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Bedrock runtime request."""
    problem = _auth_problem(request)
    if problem is not None:
        await _fail(response, 403, problem[1], problem[0])
        return
    head, _, operation = request.path.rpartition("/")
    model = unquote(head.rsplit("/model/", 1)[-1])
    try:
        body = request.json()
    except ValueError:
        body = None
    if not isinstance(body, Mapping):
        await _fail(
            response, 400, "Malformed input request, please reformat your input and try again."
        )
        return
    if operation.startswith("invoke"):
        await _invoke(request, response, model, body, operation.endswith("stream"))
    else:
        await _converse(request, response, model, body, operation.endswith("stream"))


# -- InvokeModel --------------------------------------------------------------------------


class _Invoke(Relay):
    """The simulated Messages API's answer, as InvokeModel gives it."""

    def __init__(self, outer: SimResponse, request: SimRequest) -> None:
        super().__init__(outer, request)
        self.sent = 0

    async def answer(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        if status == 200:
            await self.outer.send(200, body, headers={"x-amzn-RequestId": "sim-bedrock-invoke"})
            return
        try:
            parsed = json.loads(body)
            message = parsed["error"]["message"]
            kind = parsed["error"]["type"]
        except (ValueError, KeyError, TypeError):
            message, kind = body.decode("utf-8", "replace"), None
        status = 404 if kind == "not_found_error" else status
        await self.outer.send_json(status, error_body(message), headers=error_headers(status))

    async def opened(self, status: int, headers: Mapping[str, str] | None) -> None:
        await self.outer.start_stream(
            status,
            content_type=_EVENT_STREAM,
            headers={"x-amzn-bedrock-content-type": "application/json"},
        )

    async def relay_event(self, data: str, event_name: str | None) -> None:
        parsed = json.loads(data)
        if parsed.get("type") == "message_stop":
            parsed["amazon-bedrock-invocationMetrics"] = {
                "inputTokenCount": 0,
                "outputTokenCount": 0,
                "invocationLatency": 1,
                "firstByteLatency": 1,
            }
        self.sent += 1
        wrapped = {
            "bytes": base64.b64encode(json.dumps(parsed).encode()).decode(),
            "p": "abcdefghijklmnopqrstuvwxyz"[: self.sent % 26],
        }
        await self.outer.write(event("chunk", wrapped))


async def _invoke(
    request: SimRequest, response: SimResponse, model: str, body: Mapping[str, Any], stream: bool
) -> None:
    for key in ("model", "stream"):
        if key in body:
            await _fail(
                response,
                400,
                f"Malformed input request: #: extraneous key [{key}] is not permitted, please "
                "reformat your input and try again.",
            )
            return
    if body.get("anthropic_version") != _VERSION:
        await _fail(
            response,
            400,
            f"Malformed input request: #/anthropic_version: expected {_VERSION!r}, got "
            f"{body.get('anthropic_version')!r}, please reformat your input and try again.",
        )
        return
    inner = {k: v for k, v in body.items() if k not in ("anthropic_version", "anthropic_beta")}
    headers = {
        **{k: v for k, v in request.headers.items() if k.startswith("x-sim-")},
        "anthropic-version": "2023-06-01",
    }
    betas = body.get("anthropic_beta")
    if isinstance(betas, list) and betas:
        headers["anthropic-beta"] = ",".join(str(beta) for beta in betas)
    messages_request = SimRequest(
        "POST",
        f"/{request.provider}/v1/messages",
        {},
        headers,
        json.dumps({"model": model, **inner, "stream": stream}).encode(),
    )
    await anthropic.handle(messages_request, _Invoke(response, messages_request))


# -- Converse -----------------------------------------------------------------------------


def _anthropic_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    if "text" in block:
        return {"type": "text", "text": block["text"]}
    if "toolUse" in block:
        use = block["toolUse"]
        return {
            "type": "tool_use",
            "id": use["toolUseId"],
            "name": use["name"],
            "input": use["input"],
        }
    if "toolResult" in block:
        result = block["toolResult"]
        content = [
            {"type": "text", "text": part["text"]}
            for part in result.get("content", [])
            if isinstance(part, Mapping) and "text" in part
        ]
        return {"type": "tool_result", "tool_use_id": result["toolUseId"], "content": content}
    if "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            return {"type": "redacted_thinking", "data": reasoning["redactedContent"]}
        text = reasoning["reasoningText"]
        return {
            "type": "thinking",
            "thinking": text["text"],
            "signature": text.get("signature", ""),
        }
    if "image" in block:
        image = block["image"]
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": f"image/{image['format']}",
                "data": image["source"]["bytes"],
            },
        }
    return None


def _messages_body(body: Mapping[str, Any], model: str) -> tuple[dict[str, Any], list[str]]:
    """The Messages body a Converse request of a Claude model stands for, and its betas."""
    extra = dict(body.get("additionalModelRequestFields") or {})
    betas = extra.pop("anthropic_beta", [])
    config = body.get("inferenceConfig") or {}
    out: dict[str, Any] = {
        "model": model,
        "max_tokens": config.get("maxTokens", 4096),
        "messages": [
            {
                "role": message["role"],
                "content": [b for b in map(_anthropic_block, message["content"]) if b is not None],
            }
            for message in body["messages"]
        ],
    }
    system = [block["text"] for block in body.get("system", []) if "text" in block]
    if system:
        out["system"] = "\n\n".join(system)
    for source, target in (
        ("temperature", "temperature"),
        ("topP", "top_p"),
        ("stopSequences", "stop_sequences"),
    ):
        if source in config:
            out[target] = config[source]
    tools = body.get("toolConfig")
    if isinstance(tools, Mapping):
        out["tools"] = [
            {
                "name": t["toolSpec"]["name"],
                "description": t["toolSpec"].get("description", ""),
                "input_schema": t["toolSpec"]["inputSchema"]["json"],
            }
            for t in tools.get("tools", [])
            if "toolSpec" in t
        ]
        choice = tools.get("toolChoice")
        if isinstance(choice, Mapping):
            kind = next(iter(choice))
            out["tool_choice"] = (
                {"type": "tool", "name": choice["tool"]["name"]}
                if kind == "tool"
                else {"type": kind}
            )
    out.update(extra)
    return out, [str(beta) for beta in betas]


def _converse_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "thinking":
        return {
            "reasoningContent": {
                "reasoningText": {"text": block["thinking"], "signature": block["signature"]}
            }
        }
    if kind == "redacted_thinking":
        return {"reasoningContent": {"redactedContent": block["data"]}}
    if kind == "tool_use":
        return {
            "toolUse": {"toolUseId": block["id"], "name": block["name"], "input": block["input"]}
        }
    return {"text": block.get("text", "")}


class _Capture(Relay):
    """Keeps the simulated Messages API's whole answer instead of sending it."""

    def __init__(self, outer: SimResponse, request: SimRequest) -> None:
        super().__init__(outer, request)
        self.code = 0
        self.payload: Any = None

    async def answer(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None
    ) -> None:
        self.code = status
        self.payload = json.loads(body)


def _prompt(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            texts = [b["text"] for b in message.get("content", []) if "text" in b]
            if texts:
                return " ".join(texts)
    return ""


def _tool_use(body: Mapping[str, Any], messages: list[Any], rounds: int) -> dict[str, Any] | None:
    """A ``toolUse`` block for the first offered tool, for ``rounds`` assistant turns."""
    tools = (body.get("toolConfig") or {}).get("tools") or []
    specs = [t["toolSpec"] for t in tools if isinstance(t, Mapping) and "toolSpec" in t]
    done = sum(
        1
        for m in messages
        if m.get("role") == "assistant" and any("toolUse" in b for b in m.get("content", []))
    )
    if not specs or done >= rounds:
        return None
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]
    arguments = behaviour.tool_arguments(specs[0].get("inputSchema", {}).get("json"))
    return {
        "toolUse": {
            "toolUseId": f"tooluse_sim_{seed}",
            "name": specs[0]["name"],
            "input": json.loads(arguments),
        }
    }


def _other_vendor(
    request: SimRequest, body: Mapping[str, Any], model: str, settings: Settings
) -> tuple[int, dict[str, Any]]:
    """A Converse answer of a non-Claude model: its tier from the vendor's field, checked
    against the registry, unsigned reasoning text and the simulator's words."""
    extra = body.get("additionalModelRequestFields") or {}
    raw: Any = extra.get("reasoning_effort")
    if isinstance(extra.get("reasoning"), Mapping):
        raw = extra["reasoning"].get("effort")
    config = extra.get("reasoningConfig")
    if isinstance(config, Mapping):
        raw = (
            "none"
            if config.get("type") == "disabled"
            else config.get("maxReasoningEffort", "medium")
        )
    tier = behaviour.default_tier(model) if raw is None else Effort.parse(raw) or Effort.NONE
    if raw is not None and not behaviour.accepts(model, tier):
        listed = ", ".join(behaviour.supported_listing(model))
        return 400, error_body(
            "The model returned the following errors: Invalid reasoning effort "
            f"{raw!r}; supported values are {listed}"
        )
    words = int(request.header_float("x-sim-answer-words", settings.answer_words))
    rounds = int(request.header_float("x-sim-tool-rounds", settings.tool_rounds))
    prompt = _prompt(body)
    messages = body.get("messages", [])
    answer = behaviour.answer_for(model, prompt, tier, words, messages)
    content: list[dict[str, Any]] = []
    if answer.reasoning_tokens:
        content.append({"reasoningContent": {"reasoningText": {"text": answer.reasoning}}})
    call = _tool_use(body, messages, rounds)
    content.append({"text": answer.text} if call is None else call)
    return 200, {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn" if call is None else "tool_use",
        "usage": {
            "inputTokens": answer.prompt_tokens,
            "outputTokens": answer.completion_tokens,
            "totalTokens": answer.prompt_tokens + answer.completion_tokens,
        },
        "metrics": {"latencyMs": 1},
    }


async def _converse(
    request: SimRequest, response: SimResponse, model: str, body: Mapping[str, Any], stream: bool
) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        await _fail(
            response,
            400,
            "1 validation error detected: Value at 'messages' failed to satisfy constraint: "
            "Member must not be null",
        )
        return
    cap = behaviour.capability(model)
    claude = "anthropic." in model or (cap is not None and cap.provider == "anthropic")
    if claude:
        inner_body, betas = _messages_body(body, model)
        headers = {
            **{k: v for k, v in request.headers.items() if k.startswith("x-sim-")},
            "anthropic-version": "2023-06-01",
        }
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        inner = SimRequest(
            "POST", f"/{request.provider}/v1/messages", {}, headers, json.dumps(inner_body).encode()
        )
        capture = _Capture(response, inner)
        await anthropic.handle(inner, capture)
        if capture.code != 200:
            error = capture.payload.get("error", {}) if isinstance(capture.payload, Mapping) else {}
            await _fail(
                response,
                404 if error.get("type") == "not_found_error" else 400,
                str(error.get("message", "invalid request")),
            )
            return
        message = capture.payload
        usage = message["usage"]
        data = {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [_converse_block(b) for b in message["content"]],
                }
            },
            "stopReason": message["stop_reason"],
            "usage": {
                "inputTokens": usage["input_tokens"],
                "outputTokens": usage["output_tokens"],
                "totalTokens": usage["input_tokens"] + usage["output_tokens"],
            },
            "metrics": {"latencyMs": 1},
        }
    else:
        status, data = _other_vendor(request, body, model, response.settings)
        if status != 200:
            await _fail(response, status, data["message"])
            return
    if not stream:
        await response.send_json(200, data, headers={"x-amzn-RequestId": "sim-bedrock-converse"})
        return
    await _converse_stream(response, data)


async def _converse_stream(response: SimResponse, data: Mapping[str, Any]) -> None:
    await response.start_stream(content_type=_EVENT_STREAM)
    seed = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    async def send(kind: str, payload: dict[str, Any]) -> None:
        payload["p"] = seed[: len(kind) % 16]
        await response.write(event(kind, payload))

    await send("messageStart", {"role": "assistant"})
    for index, block in enumerate(data["output"]["message"]["content"]):
        if "toolUse" in block:
            use = block["toolUse"]
            await send(
                "contentBlockStart",
                {
                    "contentBlockIndex": index,
                    "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}},
                },
            )
            arguments = json.dumps(use["input"], separators=(",", ":"))
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                if piece:
                    await send(
                        "contentBlockDelta",
                        {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}},
                    )
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"]
            if "redactedContent" in reasoning:
                deltas = [{"reasoningContent": {"redactedContent": reasoning["redactedContent"]}}]
            else:
                text = reasoning["reasoningText"]
                words = text["text"].split(" ") if text["text"] else []
                deltas = [
                    {"reasoningContent": {"text": w if i == 0 else " " + w}}
                    for i, w in enumerate(words)
                ]
                if text.get("signature"):
                    deltas.append({"reasoningContent": {"signature": text["signature"]}})
            for delta in deltas:
                await send("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
        else:
            words = block["text"].split(" ")
            for i, word in enumerate(words):
                await send(
                    "contentBlockDelta",
                    {"contentBlockIndex": index, "delta": {"text": word if i == 0 else " " + word}},
                )
        await send("contentBlockStop", {"contentBlockIndex": index})
    await send("messageStop", {"stopReason": data["stopReason"]})
    await send("metadata", {"usage": dict(data["usage"]), "metrics": {"latencyMs": 1}})
    await response.end()
