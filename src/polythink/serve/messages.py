"""The Anthropic Messages front door: ``POST /v1/messages`` and ``/v1/messages/count_tokens``.

Claude Code and the Anthropic SDKs speak it (``?beta=true`` included: the path is matched,
not the query). A body routed to an Anthropic source goes as written, with its
``anthropic-version``, ``anthropic-beta`` (an open list), ``anthropic-workspace-id`` and
``anthropic-user-profile-id`` headers, and the API's answer, stream or error comes back as
the API wrote it (:mod:`polythink.serve.exchange`).

Parsed into polythink's types for every other source:

- ``system`` (a string, or text blocks keeping their ``cache_control``) becomes the first
  system message; a ``role: "system"`` message stays where it is;
- user turns become user messages, their ``tool_result`` blocks tool messages (in order),
  ``image`` blocks ``image_url`` parts, a base64 PDF ``document`` a ``file`` part, other
  blocks as given (a wire that cannot carry one refuses it, naming it);
- an assistant turn becomes text and tool calls; its blocks are kept verbatim as Anthropic
  reasoning items when it holds thinking or anything the typed turn cannot say, so an
  Anthropic source gets them back unchanged;
- effort from the caller's own fields: ``output_config.effort`` (a tier), else ``thinking``:
  ``disabled`` -> ``none``, ``adaptive`` -> ``auto``, ``enabled`` with ``budget_tokens`` ->
  the tier of the nearest budget (:func:`polythink.reasoning.resolve.effort_for_budget`);
- ``tools`` (custom tools with an ``input_schema``), ``tool_choice``, ``stop_sequences``,
  ``temperature``, ``top_p``, ``max_tokens``, ``output_config.format`` (structured output)
  and a top-level ``cache_control`` (the prompt cache); server tools, ``mcp_servers`` and
  ``container`` only an Anthropic source can serve; other fields (``context_management``,
  ``top_k`` …) are noted in the answer's warnings when another wire answers.

Where reasoning rides when another wire answered (GATEWAY.md §4.1): the readable text in a
``thinking`` block with an empty ``signature``, and the whole turn's reasoning, opaque items
included, in a ``redacted_thinking`` block after the answer's other blocks, whose ``data`` is
polythink's envelope (:mod:`polythink.serve.envelope`). Claude Code and the SDKs send both
back unchanged; the next turn restores the reasoning from the envelope, and a turn holding
one is not sent to an Anthropic source as written (its synthetic blocks would fail the API's
signature check): the typed request is.

Stop reasons: ``stop`` -> ``end_turn``, ``length`` -> ``max_tokens``, ``tool_calls`` ->
``tool_use``, ``content_filter`` -> ``refusal`` (an Anthropic source's own value is kept).
Usage: ``input_tokens`` counts the uncached part, beside ``cache_read_input_tokens`` and
``cache_creation_input_tokens``, as the API does; a stream gives it in ``message_delta``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from polythink.providers import get_provider
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
from polythink.transports.anthropic import parse_message
from polythink.types import (
    Effort,
    Message,
    NativeBody,
    PromptCache,
    Response,
    StreamEvent,
    Tool,
    ToolCall,
)

__all__ = ["MessagesDoor"]

FORWARDED_HEADERS = (
    "anthropic-version",
    "anthropic-beta",
    "anthropic-workspace-id",
    "anthropic-user-profile-id",
)
"""Request headers that go with a body sent as written (GATEWAY.md §3.2; never
credentials)."""

_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "context_length": "invalid_request_error",
    "authentication": "authentication_error",
    "billing": "billing_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "rate_limit": "rate_limit_error",
    "api_error": "api_error",
    "overloaded": "overloaded_error",
    "timeout": "timeout_error",
}
_STATUS = {"overloaded": 529, "timeout": 504, "too_large": 413}
_STOP = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "error": "end_turn",
}
_ANTHROPIC_STOPS = frozenset(
    {
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
    }
)
_ONLY_ANTHROPIC = ("mcp_servers", "container")
_TYPED = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "stream",
        "temperature",
        "top_p",
        "stop_sequences",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "cache_control",
        "metadata",
        *_ONLY_ANTHROPIC,
    }
)
_PROFILE = get_provider("anthropic")
_PLAIN = {
    "text": frozenset({"type", "text"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
}


def _blocks(content: Any, where: str) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, Mapping) for b in content):
        raise DoorError(f"{where}: content must be a string or a list of blocks", param=where)
    return content


def _user_part(block: Mapping[str, Any]) -> Any:
    """A user block as a content part every wire reads, where there is one."""
    kind = block.get("type")
    source = block.get("source")
    if kind == "image" and isinstance(source, Mapping):
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type')};base64,{source.get('data')}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": source.get("url")}}
    if (
        kind == "document"
        and isinstance(source, Mapping)
        and source.get("type") == "base64"
        and source.get("media_type") == "application/pdf"
    ):
        file: dict[str, Any] = {"file_data": f"data:application/pdf;base64,{source.get('data')}"}
        if isinstance(block.get("title"), str):
            file["filename"] = block["title"]
        return {"type": "file", "file": file}
    return dict(block)


def _tool_message(block: Mapping[str, Any], where: str, notes: list[str]) -> Message:
    content = block.get("content", "")
    if isinstance(content, list):
        content = [_user_part(part) for part in content if isinstance(part, Mapping)] or ""
    if block.get("is_error"):
        notes.append(f"{where}.is_error: no field for it on this wire")
    try:
        return Message(
            role="tool", tool_call_id=str(block.get("tool_use_id") or ""), content=content
        )
    except ValueError as exc:
        raise DoorError(f"{where}: {exc}", param=where) from None


def _assistant(blocks: list[Mapping[str, Any]], where: str) -> tuple[Message, bool]:
    """The assistant turn of ``blocks``, and whether it carries polythink's envelope.

    Read as the Anthropic transport reads an answer (text, tool calls, thinking text; every
    block kept verbatim when the turn has thinking), and kept verbatim too when a block has
    anything the typed turn cannot say, so an Anthropic source gets the turn unchanged."""
    sealed = None
    for block in blocks:
        kind = block.get("type")
        if kind == "redacted_thinking":
            sealed = open_envelope(block.get("data")) or sealed
        elif kind == "thinking":
            sealed = open_envelope(block.get("signature")) or sealed
    try:
        parsed = parse_message(
            {"content": [b for b in blocks if open_envelope(b.get("data")) is None]},
            profile=_PROFILE,
            source_index=0,
            model="",
        ).message
        if sealed is not None:
            return (
                restored(sealed, content=parsed.content, tool_calls=parsed.tool_calls),
                True,
            )
        plain = all(
            _PLAIN.get(str(block.get("type")), frozenset()).issuperset(block) for block in blocks
        )
        if parsed.reasoning_items or plain:
            return parsed, False
        return parsed.with_(
            reasoning_items=tuple(dict(b) for b in blocks), reasoning_format="anthropic"
        ), False
    except ValueError as exc:
        raise DoorError(f"{where}: {exc}", param=where) from None


def _messages(body: Mapping[str, Any], notes: list[str]) -> tuple[list[Message], bool]:
    """The conversation, and whether a turn carries polythink's envelope."""
    out: list[Message] = []
    sealed = False
    system = body.get("system")
    if isinstance(system, str) and system:
        out.append(_user("system", system, "system"))
    elif isinstance(system, list) and system:
        out.append(_user("system", [dict(b) for b in _blocks(system, "system")], "system"))
    elif system is not None and not isinstance(system, str | list):
        raise DoorError("system: must be a string or a list of text blocks", param="system")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise DoorError("messages: at least one message is required", param="messages")
    for i, turn in enumerate(turns):
        where = f"messages.{i}"
        if not isinstance(turn, Mapping):
            raise DoorError(f"{where}: must be an object", param=where)
        role = turn.get("role")
        blocks = _blocks(turn.get("content"), f"{where}.content")
        if role == "assistant":
            message, has_envelope = _assistant(blocks, where)
            sealed = sealed or has_envelope
            out.append(message)
            continue
        if role not in ("user", "system"):
            raise DoorError(f"{where}.role: Input should be 'user' or 'assistant'", param=where)
        parts: list[Any] = []
        for j, block in enumerate(blocks):
            if block.get("type") == "tool_result":
                if parts:
                    out.append(_user(role, parts, where))
                    parts = []
                out.append(_tool_message(block, f"{where}.content.{j}", notes))
            else:
                parts.append(_user_part(block))
        if parts:
            out.append(_user(role, parts, where))
    return out, sealed


def _user(role: Any, content: Any, where: str) -> Message:
    """A message of ``content`` (a string or content parts); bad input is the door's 400
    naming ``where``."""
    try:
        return Message(role=str(role), content=content)
    except ValueError as exc:
        raise DoorError(f"{where}: {exc}", param=where) from None


def _tools(body: Mapping[str, Any], notes: list[str], only_native: list[str]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DoorError("tools: must be a list", param="tools")
    typed: list[Tool] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise DoorError(f"tools.{i}: must be an object", param="tools")
        name = tool.get("name")
        if tool.get("type") not in (None, "custom") or "input_schema" not in tool:
            only_native.append(f"tools.{i} ({tool.get('type') or name}): a server tool")
            continue
        try:
            typed.append(
                Tool(
                    name=str(name),
                    description=str(tool.get("description") or ""),
                    parameters=tool["input_schema"],
                    strict=tool.get("strict") if isinstance(tool.get("strict"), bool) else None,
                )
            )
        except ValueError as exc:
            only_native.append(f"tools.{i}: {exc}")
            continue
        extra = sorted(set(tool) - {"type", "name", "description", "input_schema", "strict"})
        if extra:
            notes.append(f"tools.{i}: {', '.join(extra)} not carried to this wire")
    return typed


def _effort(body: Mapping[str, Any]) -> tuple[Effort | None, str | None, list[tuple[str, ...]]]:
    """``(tier, thinking style, paths)`` of the caller's reasoning fields.

    The style is the one those fields are written in (:attr:`NativeBody.style`):
    ``output_config.effort`` is the strength of ``adaptive`` thinking (a ``manual`` model
    takes a budget instead), so with ``thinking.type: enabled`` beside it the fields mix
    both (``mixed``: no model takes them as written)."""
    thinking = body.get("thinking")
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, Mapping) else None
    paths: list[tuple[str, ...]] = []
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind is not None:
        paths += [("thinking", "type"), ("thinking", "budget_tokens")]
    style = {"enabled": "manual", "adaptive": "adaptive"}.get(str(kind))
    if effort is not None:
        paths.append(("output_config", "effort"))
        style = "mixed" if style == "manual" else "adaptive"
    if kind == "disabled":
        return Effort.NONE, style, paths
    if effort is not None:
        return parse_effort(effort, "output_config.effort"), style, paths
    if kind == "enabled":
        budget = thinking.get("budget_tokens") if isinstance(thinking, Mapping) else None
        if type(budget) is not int:
            raise DoorError(
                "thinking.budget_tokens: Field required (an integer) with thinking.type enabled",
                param="thinking.budget_tokens",
            )
        return effort_for_budget(budget), style, paths
    if kind is not None:
        return Effort.AUTO, style, paths
    return None, None, paths


def _tool_choice(choice: Any, tools: list[Tool], notes: list[str], only_native: list[str]) -> Any:
    if not isinstance(choice, Mapping):
        return choice
    if choice.get("disable_parallel_tool_use"):
        notes.append("tool_choice.disable_parallel_tool_use: not carried to this wire")
    kind = choice.get("type")
    if kind == "tool":
        if choice.get("name") not in {t.name for t in tools}:
            only_native.append(f"tool_choice names {choice.get('name')!r}, a server tool")
            return None
        return {"type": "tool", "name": choice.get("name")}
    return {"type": kind}


class MessagesDoor:
    """The Anthropic Messages front door (see the module docstring)."""

    wire = "anthropic"
    request_id_header = "request-id"

    def parse(
        self,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        build: BuildRequest,
        key: str,
        *,
        counting: bool = False,
    ) -> Call:
        """Read a Messages request body (``counting``: a count_tokens body, without
        ``max_tokens``).

        Raises:
            DoorError: a field the API requires is missing or malformed, or polythink
                refuses it (naming the field).
        """
        model = body.get("model")
        max_tokens = body.get("max_tokens")
        if not counting and (type(max_tokens) is not int or max_tokens < 1):
            raise DoorError(
                "max_tokens: Field required (an integer of at least 1)", param="max_tokens"
            )
        notes: list[str] = []
        messages, sealed = _messages(body, notes)
        effort, style, paths = _effort(body)
        forwarded = {name: headers[name] for name in FORWARDED_HEADERS if name in headers}
        native = NativeBody(
            wire=self.wire,
            body=body,
            key=key,
            dialect="anthropic" if effort is not None else None,
            effort=effort,
            style=style,
            reasoning_paths=tuple(paths),
            max_tokens_key="max_tokens",
            headers=forwarded,
        )
        only_native: list[str] = []
        tools = _tools(body, notes, only_native)
        for name in _ONLY_ANTHROPIC:
            if body.get(name) is not None:
                only_native.append(name)
        unknown = sorted(set(body) - _TYPED)
        if unknown:
            notes.append(f"{', '.join(unknown)}: not carried to this wire")
        config = body.get("output_config")
        fmt = config.get("format") if isinstance(config, Mapping) else None
        control = body.get("cache_control")
        prompt_cache = None
        if isinstance(control, Mapping):
            ttl = control.get("ttl")
            prompt_cache = PromptCache(ttl=ttl if ttl in ("5m", "1h") else None)
        stop = body.get("stop_sequences")
        request = build_request(
            build,
            native,
            messages=messages,
            reasoning_effort=effort,
            max_tokens=max_tokens if not counting else None,
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stop=stop if stop else None,
            tools=tools or None,
            tool_choice=_tool_choice(body.get("tool_choice"), tools, notes, only_native),
            stream=flag(body, "stream") and not counting,
            prompt_cache=prompt_cache,
            response_format=(
                fmt.get("schema")
                if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema"
                else None
            ),
            cache=not counting,
        )
        return Call(
            request=request,
            model=str(model),
            body=body,
            native=not sealed,
            notes=notes,
            only_native=only_native,
        )

    # -- answers ---------------------------------------------------------------------

    def render(self, call: Call, response: Response) -> dict[str, Any]:
        """The Messages API ``Message`` for ``response``."""
        return {
            "id": _message_id(response),
            "type": "message",
            "role": "assistant",
            "model": response.model,
            "content": _content(response),
            "stop_reason": _stop_reason(response),
            "stop_sequence": None,
            "usage": _usage(response),
        }

    def renderer(self, call: Call, model: str) -> MessagesRenderer:
        """A stream renderer naming ``model``."""
        return MessagesRenderer(model)

    def error_body(self, status: int, kind: str, message: str, param: str | None) -> Any:
        """``{"type": "error", "error": {"type", "message"}}``."""
        return {
            "type": "error",
            "error": {"type": _ERROR_TYPES.get(kind, "api_error"), "message": message},
        }

    def error_status(self, status: int, kind: str) -> int:
        """529 for an overload, 504 for a timeout, 413 for a body too large."""
        return _STATUS.get(kind, status)

    def idle_frame(self) -> bytes:
        """A ``ping`` event (the SDKs skip it anywhere)."""
        return sse_frame("ping", '{"type": "ping"}')

    def relayed(self, call: Call, event_type: str, data: str) -> bytes | None:
        """The API's event as it sent it."""
        return sse_frame(event_type, data)

    def preamble(self, event_type: str, data: str) -> bool:
        """``message_start`` and ``ping`` open a stream."""
        return event_type in ("message_start", "ping")


def _message_id(response: Response) -> str:
    rid = response.id
    return rid if isinstance(rid, str) and rid.startswith("msg_") else new_id("msg_")


def _anthropic_items(response: Response) -> list[dict[str, Any]] | None:
    message = response.message
    if message.reasoning_format == "anthropic" and message.reasoning_items:
        return [dict(item) for item in message.reasoning_items]
    return None


def _tool_use(call: ToolCall) -> dict[str, Any]:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        value = None
    return {
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": value if isinstance(value, dict) else {},
    }


def _content(response: Response) -> list[dict[str, Any]]:
    own = _anthropic_items(response)
    if own is not None:
        return own
    blocks: list[dict[str, Any]] = []
    envelope = envelope_of(response)
    if response.reasoning:
        blocks.append({"type": "thinking", "thinking": response.reasoning, "signature": ""})
    if response.text:
        blocks.append({"type": "text", "text": response.text})
    blocks.extend(_tool_use(call) for call in response.tool_calls)
    if envelope is not None:
        blocks.append({"type": "redacted_thinking", "data": envelope})
    return blocks


def _stop_reason(response: Response) -> str:
    native = response.native_finish_reason
    if response.message.reasoning_format == "anthropic" and native in _ANTHROPIC_STOPS:
        return str(native)
    if response.provider == "anthropic" and native in _ANTHROPIC_STOPS:
        return str(native)
    return _STOP.get(response.finish_reason, "end_turn")


def _usage(response: Response) -> dict[str, Any]:
    uncached, read, write, output, _ = split_usage(response.usage)
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": output,
    }


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return sse_frame(kind, orjson.dumps({"type": kind, **payload}).decode())


class MessagesRenderer:
    """A Messages event stream rendered from polythink's typed events: one content block
    per run of reasoning, text or one tool call, in order; the envelope block and the stop
    reason and usage (``message_delta``) at the end."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.index = -1
        self.open: str | None = None
        self.calls: dict[int, int] = {}
        self.started = False

    def start(self) -> list[bytes]:
        """``message_start`` with an empty message (usage comes with ``message_delta``)."""
        self.started = True
        message: dict[str, Any] = {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [_event("message_start", {"message": message})]

    def _open(self, kind: str, block: dict[str, Any]) -> list[bytes]:
        frames = self._close()
        self.index += 1
        self.open = kind
        frames.append(_event("content_block_start", {"index": self.index, "content_block": block}))
        return frames

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [_event("content_block_stop", {"index": self.index})]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return _event("content_block_delta", {"index": self.index, "delta": delta})

    def feed(self, event: StreamEvent) -> list[bytes]:
        """The frames of one typed event."""
        frames: list[bytes] = []
        if event.type == "reasoning" and event.text:
            if self.open != "thinking":
                frames += self._open(
                    "thinking", {"type": "thinking", "thinking": "", "signature": ""}
                )
            frames.append(self._delta({"type": "thinking_delta", "thinking": event.text}))
        elif event.type == "text" and event.text:
            if self.open != "text":
                frames += self._open("text", {"type": "text", "text": ""})
            frames.append(self._delta({"type": "text_delta", "text": event.text}))
        elif event.type == "tool_call_delta" and event.tool_call_delta is not None:
            delta = event.tool_call_delta
            if delta.index not in self.calls:
                block = {
                    "type": "tool_use",
                    "id": delta.id or "",
                    "name": delta.name or "",
                    "input": {},
                }
                frames += self._open("tool_use", block)
                self.calls[delta.index] = self.index
            if delta.arguments:
                frames.append(
                    self._delta({"type": "input_json_delta", "partial_json": delta.arguments})
                )
        return frames

    def finish(self, response: Response) -> list[bytes]:
        """Close the last block; the envelope, ``message_delta`` and ``message_stop``."""
        frames = self._close()
        envelope = envelope_of(response) if _anthropic_items(response) is None else None
        if envelope is not None:
            frames += self._open(
                "redacted_thinking", {"type": "redacted_thinking", "data": envelope}
            )
            frames += self._close()
        usage = _usage(response)
        frames.append(
            _event(
                "message_delta",
                {
                    "delta": {"stop_reason": _stop_reason(response), "stop_sequence": None},
                    "usage": usage,
                },
            )
        )
        frames.append(_event("message_stop", {}))
        return frames

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """An ``error`` event, as the API sends one in a stream."""
        error = {"type": _ERROR_TYPES.get(kind, "api_error"), "message": message}
        return [_event("error", {"error": error})]

    def keepalive(self) -> bytes:
        """A ``ping`` event."""
        return sse_frame("ping", '{"type": "ping"}')
