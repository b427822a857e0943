"""The OpenAI Chat Completions front door: ``POST /v1/chat/completions``.

The OpenAI SDKs, Cursor and most agent tools speak it. A body routed to a source of the Chat
wire (OpenAI and every OpenAI-compatible provider) goes as written, its reasoning field
translated where the provider spells it otherwise (``reasoning_effort`` to DeepSeek's
``thinking``, Qwen's ``enable_thinking`` …), and the provider's answer and stream come back
as it wrote them; a stream asks the provider for usage, and the usage chunk is passed on
only when the caller asked for it (``stream_options.include_usage``).

Parsed into polythink's types for every other source: messages as
:meth:`polythink.Message.coerce` reads them (``reasoning_content``, ``reasoning`` and
OpenRouter's ``reasoning_details`` included), ``tools`` (function tools), ``tool_choice``,
``response_format``, ``max_completion_tokens`` (else ``max_tokens``), ``temperature``,
``top_p``, ``stop``; effort from ``reasoning_effort``, else OpenRouter's ``reasoning``
(``effort``, ``max_tokens`` as the nearest tier, ``enabled``), else DeepSeek's ``thinking``
(``{"type": "enabled" | "disabled"}``). Custom tools, ``n`` above 1, ``logprobs`` and audio
output only a Chat source serves; other fields are noted in the answer's warnings when
another wire answers. ``api_base``, ``base_url`` and ``api_key`` are refused (upstream URLs
and keys come from the server's configuration only: LiteLLM's SSRF, CVE-2024-6587). A body
with ``input`` and no ``messages`` (Cursor's agent mode has been seen sending Responses
bodies here) is read as a Responses request and answered in Chat.

Where reasoning rides when another wire answered (GATEWAY.md §1.5, §4.1): the text in
``reasoning_content`` (DeepSeek's field, which agent clients read), the whole turn's
reasoning in OpenRouter's ``reasoning_details`` as one ``{"type": "reasoning.encrypted",
"format": "polythink-v1", "data": <envelope>}`` entry (:mod:`polythink.serve.envelope`); an
OpenRouter answer keeps its own ``reasoning_details``. Clients that keep a message's unknown
fields (the OpenAI SDK's message objects do) send them back, and the next turn restores the
reasoning; a turn carrying an envelope goes to the sources as the typed request.

Errors are ``{"error": {"message", "type", "param", "code"}}`` with the status the OpenAI SDK
maps to its exception classes; an overload is 503, a spent budget 402 with
``code: "budget_exceeded"``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from polythink.reasoning.resolve import effort_for_budget
from polythink.serve.envelope import open_envelope
from polythink.serve.exchange import Call, DoorError, sse_frame
from polythink.serve.translate import (
    BuildRequest,
    build_request,
    envelope_of,
    flag,
    new_id,
    parse_effort,
    restored,
    split_usage,
)
from polythink.types import (
    MESSAGE_KEYS,
    Effort,
    Message,
    NativeBody,
    Response,
    StreamEvent,
    Tool,
    ToolCall,
)

__all__ = ["ENVELOPE_FORMAT", "ChatDoor", "OpenAIDoor", "openai_error", "openai_status"]

ENVELOPE_FORMAT = "polythink-v1"
"""The ``format`` of the ``reasoning_details`` entry that carries polythink's envelope."""

_REFUSED = ("api_base", "base_url", "api_key")
_ONLY_CHAT_TOOLS = frozenset({"custom"})
_TYPED = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "reasoning_effort",
        "reasoning",
        "thinking",
        "tools",
        "tool_choice",
        "response_format",
        "temperature",
        "top_p",
        "stop",
        "n",
        "logprobs",
        "top_logprobs",
        "modalities",
        "audio",
    }
)
_FINISH = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
}
_OPENAI_ERRORS = {
    "invalid_request": ("invalid_request_error", None),
    "context_length": ("invalid_request_error", "context_length_exceeded"),
    "authentication": ("invalid_request_error", "invalid_api_key"),
    "billing": ("insufficient_quota", "budget_exceeded"),
    "permission": ("invalid_request_error", "permission_denied"),
    "not_found": ("invalid_request_error", "model_not_found"),
    "too_large": ("invalid_request_error", "request_too_large"),
    "rate_limit": ("rate_limit_error", "rate_limit_exceeded"),
    "api_error": ("server_error", None),
    "overloaded": ("server_error", "overloaded"),
    "timeout": ("server_error", "timeout"),
}
_OPENAI_STATUS = {"overloaded": 503, "timeout": 504, "too_large": 413}


def openai_error(kind: str, message: str, param: str | None) -> dict[str, Any]:
    """An OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind_type, code = _OPENAI_ERRORS.get(kind, ("server_error", None))
    return {"error": {"message": message, "type": kind_type, "param": param, "code": code}}


def openai_status(status: int, kind: str) -> int:
    """The status of an error of ``kind`` on the OpenAI doors (503 for an overload)."""
    return _OPENAI_STATUS.get(kind, status)


def _sealed(details: Any) -> Any:
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, Mapping) and detail.get("format") == ENVELOPE_FORMAT:
            return open_envelope(detail.get("data"))
    return None


def _message(value: Any, index: int, notes: list[str]) -> tuple[Message, bool]:
    """A Chat message, and whether it carried polythink's envelope."""
    where = f"messages[{index}]"
    if not isinstance(value, Mapping):
        raise DoorError(f"{where}: must be an object with a role", param=where)
    unknown = sorted(set(value) - MESSAGE_KEYS)
    if unknown:
        notes.append(f"{where}: {', '.join(unknown)} not carried to this wire")
        value = {k: v for k, v in value.items() if k in MESSAGE_KEYS}
    sealed = _sealed(value.get("reasoning_details")) if value.get("role") == "assistant" else None
    try:
        if sealed is not None:
            calls = tuple(ToolCall.from_openai(c) for c in value.get("tool_calls") or ())
            return restored(sealed, content=value.get("content"), tool_calls=calls), True
        return Message.coerce(value), False
    except ValueError as exc:
        raise DoorError(f"{where}: {exc}", param=where) from None


def _effort(body: Mapping[str, Any]) -> tuple[Effort | None, str | None, tuple[str, ...]]:
    """``(tier, dialect, top-level key)`` of the caller's reasoning field."""
    if body.get("reasoning_effort") is not None:
        return (
            parse_effort(body["reasoning_effort"], "reasoning_effort"),
            "effort",
            ("reasoning_effort",),
        )
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping):
        if reasoning.get("effort") is not None:
            effort = parse_effort(reasoning["effort"], "reasoning.effort")
        elif type(reasoning.get("max_tokens")) is int:
            effort = effort_for_budget(reasoning["max_tokens"])
        elif isinstance(reasoning.get("enabled"), bool):
            effort = Effort.AUTO if reasoning["enabled"] else Effort.NONE
        else:
            return None, None, ()
        return effort, "openrouter", ("reasoning",)
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "disabled"):
        effort = Effort.AUTO if thinking["type"] == "enabled" else Effort.NONE
        return effort, "thinking_type", ("thinking",)
    return None, None, ()


def _tools(body: Mapping[str, Any], only_native: list[str]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DoorError("tools: must be a list of tools", param="tools")
    typed = []
    for i, tool in enumerate(tools):
        if isinstance(tool, Mapping) and tool.get("type") in _ONLY_CHAT_TOOLS:
            only_native.append(f"tools[{i}]: a {tool['type']} tool")
            continue
        try:
            typed.append(Tool.coerce(tool))
        except (ValueError, AttributeError) as exc:
            raise DoorError(f"tools[{i}]: {exc}", param=f"tools[{i}]") from None
    return typed


class OpenAIDoor:
    """What OpenAI's two front doors share: the error shape and status, the keep-alive
    comment, and provider events relayed as they came."""

    request_id_header = "x-request-id"

    def error_body(self, status: int, kind: str, message: str, param: str | None) -> Any:
        """An OpenAI error body."""
        return openai_error(kind, message, param)

    def error_status(self, status: int, kind: str) -> int:
        """503 for an overload, 504 for a timeout, 413 for a body too large."""
        return openai_status(status, kind)

    def idle_frame(self) -> bytes:
        """An SSE comment (the SDKs skip it; valid before a stream's first event)."""
        return b": keepalive\n\n"

    def relayed(self, call: Call, event_type: str, data: str) -> bytes | None:
        """The provider's event as it sent it."""
        return sse_frame(event_type, data)

    def preamble(self, event_type: str, data: str) -> bool:
        """Every event is content (a role-only chunk precedes content at once)."""
        return False


class ChatDoor(OpenAIDoor):
    """The Chat Completions front door (see the module docstring)."""

    wire = "openai_chat"

    def parse(
        self, body: Mapping[str, Any], headers: Mapping[str, str], build: BuildRequest, key: str
    ) -> Call:
        """Read a Chat Completions request body.

        Raises:
            DoorError: a field is missing or malformed, or polythink refuses it (naming it).
        """
        for name in _REFUSED:
            if name in body:
                raise DoorError(
                    f"{name}: not accepted: upstream URLs and keys come from the gateway's "
                    "configuration",
                    param=name,
                )
        if "messages" not in body and "input" in body:
            from polythink.serve.responses import ResponsesDoor

            call = ResponsesDoor().parse(body, headers, build, key)
            call.native = False
            call.options["include_usage"] = True
            return call
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise DoorError("messages: a non-empty list of messages is required", param="messages")
        notes: list[str] = []
        only_native: list[str] = []
        parsed = [_message(m, i, notes) for i, m in enumerate(messages)]
        sealed = any(has for _, has in parsed)
        effort, dialect, paths = _effort(body)
        tools = _tools(body, only_native)
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") not in (None, "function"):
            only_native.append(f"tool_choice of type {choice.get('type')!r}")
            choice = None
        n = body.get("n")
        if n not in (None, 1):
            only_native.append("n above 1")
        if body.get("logprobs"):
            only_native.append("logprobs")
        if "audio" in (body.get("modalities") or ()):
            only_native.append("audio output")
        unknown = sorted(set(body) - _TYPED)
        if unknown:
            notes.append(f"{', '.join(unknown)}: not carried to this wire")
        max_key = next((k for k in ("max_completion_tokens", "max_tokens") if k in body), None)
        options = body.get("stream_options")
        native = NativeBody(
            wire=self.wire,
            body=body,
            key=key,
            dialect=dialect,
            effort=effort,
            reasoning_paths=tuple((path,) for path in paths),
            max_tokens_key=max_key,
        )
        request = build_request(
            build,
            native,
            messages=[message for message, _ in parsed],
            reasoning_effort=effort,
            max_tokens=body.get(max_key) if max_key else None,
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stop=body.get("stop"),
            tools=tools or None,
            tool_choice=choice,
            response_format=body.get("response_format"),
            stream=flag(body, "stream"),
        )
        return Call(
            request=request,
            model=str(body.get("model")),
            body=body,
            native=not sealed,
            notes=notes,
            only_native=only_native,
            options={
                "include_usage": isinstance(options, Mapping)
                and options.get("include_usage") is True
            },
        )

    # -- answers ---------------------------------------------------------------------

    def render(self, call: Call, response: Response) -> dict[str, Any]:
        """The ``chat.completion`` object for ``response``."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": response.text if response.text or not response.tool_calls else None,
            "refusal": response.refusal,
        }
        if response.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in response.tool_calls]
        message.update(_reasoning_fields(response))
        return {
            "id": _completion_id(response),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": response.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _FINISH.get(response.finish_reason, "stop"),
                    "logprobs": None,
                }
            ],
            "usage": _usage(response),
        }

    def renderer(self, call: Call, model: str) -> ChatRenderer:
        """A stream renderer naming ``model``."""
        return ChatRenderer(model, include_usage=bool(call.options.get("include_usage")))

    def relayed(self, call: Call, event_type: str, data: str) -> bytes | None:
        """The provider's chunk as it sent it, but the usage chunk the caller did not ask
        for (polythink asks for usage on every stream)."""
        if (
            not call.options.get("include_usage")
            and ('"usage":{' in data or '"usage": {' in data)
            and _usage_only(data)
        ):
            return None
        return sse_frame(event_type, data)


def _usage_only(data: str) -> bool:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return isinstance(chunk, dict) and chunk.get("choices") == [] and bool(chunk.get("usage"))


def _completion_id(response: Response) -> str:
    rid = response.id
    return rid if isinstance(rid, str) and rid.startswith("chatcmpl") else new_id("chatcmpl-")


def _reasoning_fields(response: Response) -> dict[str, Any]:
    """Where the answer's reasoning rides on a Chat message (see the module docstring)."""
    fields: dict[str, Any] = {}
    message = response.message
    if response.reasoning:
        fields["reasoning_content"] = response.reasoning
    if message.reasoning_format == "openrouter" and message.reasoning_items:
        fields["reasoning_details"] = [dict(item) for item in message.reasoning_items]
        return fields
    envelope = envelope_of(response)
    if envelope is not None:
        fields["reasoning_details"] = [
            {"type": "reasoning.encrypted", "format": ENVELOPE_FORMAT, "data": envelope, "index": 0}
        ]
    return fields


def _usage(response: Response) -> dict[str, Any]:
    uncached, read, write, output, reasoning = split_usage(response.usage)
    prompt = uncached + read + write
    details: dict[str, Any] = {"cached_tokens": read}
    if response.usage is not None and response.usage.cache_write_tokens is not None:
        details["cache_write_tokens"] = write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


class ChatRenderer:
    """A Chat Completions chunk stream rendered from polythink's typed events."""

    def __init__(self, model: str, *, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.id = new_id("chatcmpl-")
        self.created = int(time.time())
        self.calls: set[int] = set()

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return sse_frame(None, orjson.dumps(chunk).decode())

    def start(self) -> list[bytes]:
        """The first chunk: the role."""
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, event: StreamEvent) -> list[bytes]:
        """The chunk of one typed event."""
        if event.type == "text" and event.text:
            return [self._chunk({"content": event.text})]
        if event.type == "reasoning" and event.text:
            return [self._chunk({"reasoning_content": event.text})]
        if event.type == "tool_call_delta" and event.tool_call_delta is not None:
            delta = event.tool_call_delta
            entry: dict[str, Any] = {
                "index": delta.index,
                "function": {"arguments": delta.arguments},
            }
            if delta.index not in self.calls:
                self.calls.add(delta.index)
                entry.update({"id": delta.id or "", "type": "function"})
                entry["function"]["name"] = delta.name or ""
            return [self._chunk({"tool_calls": [entry]})]
        return []

    def finish(self, response: Response) -> list[bytes]:
        """The last chunk (finish reason, the reasoning envelope), the usage chunk when
        asked for, ``[DONE]``."""
        delta: dict[str, Any] = {}
        details = _reasoning_fields(response).get("reasoning_details")
        if details is not None:
            delta["reasoning_details"] = details
        frames = [self._chunk(delta, _FINISH.get(response.finish_reason, "stop"))]
        if self.include_usage:
            chunk = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": _usage(response),
            }
            frames.append(sse_frame(None, orjson.dumps(chunk).decode()))
        frames.append(b"data: [DONE]\n\n")
        return frames

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """A chunk holding the error (the SDK raises on it)."""
        return [sse_frame(None, orjson.dumps(openai_error(kind, message, None)).decode())]

    def keepalive(self) -> bytes:
        """An SSE comment."""
        return b": keepalive\n\n"
