"""Provider stream shapes beyond the happy path, as bytes for :meth:`Fault.raw`.

Each builder returns the SSE body (or the part of it) one provider documents or was seen to
send; the simulator writes it verbatim, so the client is exercised on exactly that shape.
The source of each shape is in its docstring; the finish values themselves are listed in
:mod:`polythink.transports.finish`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polythink.errors import InvalidInputError

__all__ = [
    "anthropic_stop",
    "chat_chunk",
    "chat_finish",
    "chat_tool_calls",
    "chat_usage",
    "gemini_error",
    "gemini_finish",
    "openrouter_error_with_choices",
    "responses_ended",
    "responses_failed",
    "responses_incomplete",
    "sse",
    "vllm_error",
    "without_final_blank_line",
]

_ID = "chatcmpl-shape"
_CREATED = 1_765_000_000
"""A fixed ``created`` / ``created_at`` (Unix seconds): shapes are the same bytes every time."""


def sse(*payloads: Mapping[str, Any] | str, events: Sequence[str | None] = ()) -> bytes:
    """SSE frames for ``payloads`` (a string is sent as is, e.g. ``"[DONE]"``); ``events``
    names the ``event:`` line of each frame (``None`` = no line)."""
    out = []
    for i, payload in enumerate(payloads):
        name = events[i] if i < len(events) else None
        head = f"event: {name}\n" if name else ""
        data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


def without_final_blank_line(frames: bytes, *, keep_line_break: bool = True) -> bytes:
    """``frames`` with the last event's closing blank line removed (and, with
    ``keep_line_break=False``, its final line break too): a server that closes the
    connection right after its last ``data:`` line."""
    trimmed = frames[:-1] if frames.endswith(b"\n\n") else frames
    return trimmed if keep_line_break else trimmed.rstrip(b"\n")


def chat_chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish: str | None = None,
    model: str = "sim-model",
    **extra: Any,
) -> dict[str, Any]:
    """One Chat Completions chunk with a single choice (OpenAI ``chat.completion.chunk``)."""
    choice: dict[str, Any] = {"index": 0, "delta": dict(delta or {}), "finish_reason": finish}
    return {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": model,
        "choices": [choice],
        **extra,
    }


def chat_finish(finish: str, text: str = "ok", *, done: bool = True) -> bytes:
    """A Chat Completions stream answering ``text`` that ends with ``finish`` (any provider's
    own value), then ``[DONE]``."""
    frames: list[Mapping[str, Any] | str] = [
        chat_chunk({"role": "assistant", "content": text}),
        chat_chunk({}, finish=finish),
    ]
    if done:
        frames.append("[DONE]")
    return sse(*frames)


def chat_tool_calls(fragments: Iterable[Mapping[str, Any]], *, finish: str = "tool_calls") -> bytes:
    """A Chat Completions stream whose chunks carry the given ``delta.tool_calls`` entries,
    one per chunk, then ``finish`` and ``[DONE]``."""
    frames: list[Mapping[str, Any] | str] = [
        chat_chunk({"tool_calls": [dict(fragment)]}) for fragment in fragments
    ]
    frames += [chat_chunk({}, finish=finish), "[DONE]"]
    return sse(*frames)


def chat_usage(where: str, usage: Mapping[str, Any], text: str = "ok") -> bytes:
    """A Chat Completions stream whose usage sits where one provider puts it.

    ``where``: ``"final_chunk"`` (OpenAI ``include_usage``: an extra chunk with empty
    ``choices``), ``"top_level"`` (on the finishing chunk: Mistral, DeepSeek, GLM),
    ``"choice"`` (inside ``choices[0]``: Moonshot,
    https://platform.moonshot.ai/docs/api/chat), ``"x_groq"`` (Groq's ``x_groq.usage``,
    https://console.groq.com/docs/api-reference), or ``"none"``.

    Raises:
        ValueError: for another ``where``.
    """
    first = chat_chunk({"role": "assistant", "content": text})
    last = chat_chunk({}, finish="stop")
    frames: list[Mapping[str, Any] | str] = [first, last]
    if where == "final_chunk":
        frames.append(
            {
                "id": _ID,
                "object": "chat.completion.chunk",
                "created": _CREATED,
                "model": "sim-model",
                "choices": [],
                "usage": usage,
            }
        )
    elif where == "top_level":
        last["usage"] = dict(usage)
    elif where == "choice":
        last["choices"][0]["usage"] = dict(usage)
    elif where == "x_groq":
        last["x_groq"] = {"id": "req_sim", "usage": dict(usage)}
    elif where != "none":
        raise InvalidInputError(
            f"unknown usage place {where!r}; accepted: final_chunk, top_level, choice, x_groq, none"
        )
    frames.append("[DONE]")
    return sse(*frames)


def openrouter_error_with_choices(code: str | int, message: str) -> bytes:
    """OpenRouter's mid-stream error: a top-level ``error`` beside a choice whose
    ``finish_reason`` is ``"error"``, then ``[DONE]``
    (https://openrouter.ai/docs/api-reference/errors, "Error during streaming")."""
    chunk = chat_chunk({"content": ""}, finish="error", error={"code": code, "message": message})
    return sse(chunk, "[DONE]")


def vllm_error(message: str, kind: str = "BadRequestError", code: int = 400) -> bytes:
    """vLLM's in-stream ``ErrorResponse`` without an ``error`` wrapper (OpenAI-compatible
    server, 2025): ``{"object": "error", "message", "type", "param", "code"}``."""
    payload = {"object": "error", "message": message, "type": kind, "param": None, "code": code}
    return sse(payload, "[DONE]")


def _response(status: str, output: list[Any], **fields: Any) -> dict[str, Any]:
    """A Responses ``response`` object with the fields the SDK's ``Response`` model requires."""
    return {
        "id": "resp_shape",
        "object": "response",
        "created_at": _CREATED,
        "model": "sim-model",
        "status": status,
        "error": None,
        "incomplete_details": None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **fields,
    }


def responses_failed(code: str, message: str) -> bytes:
    """A Responses stream that fails: ``response.created`` then ``response.failed`` with the
    response's ``error`` (openai-openapi ``ResponseFailedEvent``)."""
    frames: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("queued", [])},
        {
            "type": "response.failed",
            "response": _response("failed", [], error={"code": code, "message": message}),
        },
    ]
    for number, frame in enumerate(frames):
        frame["sequence_number"] = number
    return sse(*frames, events=["response.created", "response.failed"])


def responses_incomplete(reason: str, text: str = "ok") -> bytes:
    """A Responses stream that ends ``incomplete`` with ``incomplete_details.reason``."""
    return responses_ended("incomplete", text, incomplete_details={"reason": reason})


def responses_ended(status: str, text: str = "ok", **fields: Any) -> bytes:
    """A Responses stream answering ``text`` whose last event carries a response of
    ``status`` (``response.incomplete`` for ``incomplete``, else ``response.completed``) and
    ``fields`` (``incomplete_details`` …)."""
    message = {
        "type": "message",
        "id": "msg_shape",
        "role": "assistant",
        "status": "completed" if status == "completed" else "incomplete",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    last = "response.incomplete" if status == "incomplete" else "response.completed"
    frames: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("in_progress", [])},
        {
            "type": "response.output_text.delta",
            "item_id": "msg_shape",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        },
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": last, "response": _response(status, [message], **fields)},
    ]
    for number, frame in enumerate(frames):
        frame["sequence_number"] = number
    return sse(*frames, events=[str(f["type"]) for f in frames])


def anthropic_stop(stop_reason: str, text: str = "ok") -> bytes:
    """A Messages stream answering ``text`` that stops with ``stop_reason``."""
    frames: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_shape",
                "type": "message",
                "role": "assistant",
                "model": "sim-model",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    return sse(*frames, events=[str(f["type"]) for f in frames])


def gemini_finish(finish: str, text: str = "ok") -> bytes:
    """A ``streamGenerateContent`` stream answering ``text`` that ends with ``finishReason``
    ``finish`` (CRLF-separated, as recorded)."""
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": finish}
        ],
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 1, "totalTokenCount": 5},
        "modelVersion": "sim-model",
        "responseId": "gem_shape",
    }
    return sse(chunk).replace(b"\n", b"\r\n")


def gemini_error(code: int, status: str, message: str) -> bytes:
    """A Gemini error object inside the stream (``google.rpc.Status`` JSON, AIP-193)."""
    return sse({"error": {"code": code, "message": message, "status": status}})
