"""The OpenAI Responses front door: ``POST /v1/responses`` (and what Codex asks around it).

Codex speaks only this (GATEWAY.md §2.4). A body routed to a Responses source goes as
written and comes back as the API wrote it. The gateway keeps no state: a request that needs
stored state (``previous_response_id``, ``conversation``, ``background``, an
``item_reference``) is refused with a 400 naming the field; ``store: true`` is answered as
if ``store`` were false (``"store": false`` in the response object: nothing is retrievable).
Codex's WebSocket transport is answered 426 at the upgrade (``GET /v1/responses``), which
makes it fall back to HTTP at once; a stored response (``GET /v1/responses/{id}``) is 404.

Parsed into polythink's types for every other source: ``instructions`` (the first system
message), ``input`` (a string, or items: messages with ``input_text`` / ``input_image`` /
``input_file`` parts, ``function_call`` and ``function_call_output``, ``reasoning``; an
assistant's consecutive items are one turn), function ``tools``, ``tool_choice``,
``max_output_tokens``, ``temperature``, ``top_p``, ``text.format`` (structured output),
``prompt_cache_key`` and effort from ``reasoning.effort``. Hosted and custom tools and items
only a Responses source serves; other fields are noted in the answer's warnings when
another wire answers.

Where reasoning rides when another wire answered (GATEWAY.md §4.1): a ``reasoning`` item
whose ``summary`` holds the text and whose ``encrypted_content`` is polythink's envelope
(:mod:`polythink.serve.envelope`). Codex sends reasoning items back with their
``encrypted_content`` (it asks for them with ``include``), and the next turn restores the
reasoning. In a stream that item is opened first, its summary streamed, and it is done last,
after the answer's other items, once the envelope is known; ``response.completed`` lists
the items in order.

Streams number their events from 0 (``sequence_number``) and end with
``response.completed`` (``response.incomplete`` for a cut answer), no ``[DONE]``; a failure
after the stream opened is ``response.failed`` with ``error.code``, which Codex reads
(``context_length_exceeded``, ``insufficient_quota``, ``rate_limit_exceeded`` …). While
silent, a started stream repeats ``response.in_progress``, an event Codex counts and ignores.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from polythink.errors import PolythinkError
from polythink.providers import get_provider
from polythink.serve.chat import OpenAIDoor, openai_error
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
from polythink.transports.openai_responses import parse_response
from polythink.types import Message, NativeBody, PromptCache, Response, StreamEvent, Tool, ToolCall

__all__ = ["ResponsesDoor", "ResponsesRenderer"]

_STATEFUL = ("previous_response_id", "conversation")
_TYPED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "stream",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "text",
        "store",
        "include",
        "prompt_cache_key",
        "stream_options",
        "background",
        *_STATEFUL,
    }
)
_ASSISTANT_ITEMS = frozenset({"reasoning", "function_call"})
_OWN_FORMATS = frozenset({"openai-responses", "openrouter-responses"})
_PROFILE = get_provider("openai-responses")


def _part(part: Any, where: str, only_native: list[str]) -> Any:
    """An input content part as a part every wire reads, where there is one."""
    if not isinstance(part, Mapping):
        raise DoorError(f"{where}: a content part must be an object", param=where)
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": str(part.get("text") or "")}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file" and isinstance(part.get("file_data"), str):
        file = {"file_data": part["file_data"]}
        if isinstance(part.get("filename"), str):
            file["filename"] = part["filename"]
        return {"type": "file", "file": file}
    if kind in ("input_image", "input_file"):
        only_native.append(f"{where}: a {kind} by file_id or URL")
    return dict(part)


def _content(content: Any, where: str, only_native: list[str]) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise DoorError(f"{where}: content must be a string or a list of parts", param=where)
    return [_part(part, f"{where}[{i}]", only_native) for i, part in enumerate(content)]


class _Turn:
    """An assistant's consecutive items, gathered into one turn."""

    def __init__(self) -> None:
        self.items: list[Mapping[str, Any]] = []
        self.sealed: Any = None

    def add(self, item: Mapping[str, Any], where: str) -> None:
        """Take an assistant item (``where``: its path in ``input``).

        Raises:
            DoorError: a part list of the item is not a list of objects.
        """
        keys = ("summary", "content") if item.get("type") == "reasoning" else ("content",)
        for key in keys:
            parts = item.get(key)
            if parts is None or (key == "content" and isinstance(parts, str)):
                continue
            if not isinstance(parts, list) or not all(isinstance(p, Mapping) for p in parts):
                raise DoorError(
                    f"{where}.{key}: must be a list of parts (objects with a type)",
                    param=f"{where}.{key}",
                )
        if item.get("type") == "reasoning":
            opened = open_envelope(item.get("encrypted_content"))
            if opened is not None:
                self.sealed = opened
                return
        self.items.append(item)

    def message(self, where: str) -> Message:
        """The turn, read as the Responses transport reads an answer (its items kept
        verbatim for a Responses source), or as its envelope describes it."""
        output = [{"type": "message", **i} if "type" not in i else i for i in self.items]
        try:
            parsed = parse_response(
                {"output": output, "status": "completed"},
                profile=_PROFILE,
                source_index=0,
                model="",
            ).message
            if self.sealed is None:
                return parsed
            return restored(self.sealed, content=parsed.content, tool_calls=parsed.tool_calls)
        except (ValueError, PolythinkError) as exc:
            raise DoorError(f"{where}: {exc}", param=where) from None


def _text_message(role: str, text: str, where: str) -> Message:
    """A message of ``text``; bad input (a lone surrogate) is the door's 400 naming ``where``."""
    try:
        return Message(role=role, content=text)
    except ValueError as exc:
        raise DoorError(f"{where}: {exc}", param=where) from None


def _input(body: Mapping[str, Any], only_native: list[str]) -> tuple[list[Message], bool]:
    """The conversation of ``instructions`` and ``input``, and whether an assistant turn
    carried polythink's envelope."""
    messages: list[Message] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append(_text_message("system", instructions, "instructions"))
    elif instructions is not None and not isinstance(instructions, str):
        raise DoorError("instructions: must be a string", param="instructions")
    given = body.get("input")
    if isinstance(given, str):
        messages.append(_text_message("user", given, "input"))
        return messages, False
    if not isinstance(given, list) or not given:
        raise DoorError("input: a string or a non-empty list of items is required", param="input")
    sealed = False
    turn: _Turn | None = None

    def flush(where: str) -> None:
        nonlocal turn, sealed
        if turn is not None:
            sealed = sealed or turn.sealed is not None
            messages.append(turn.message(where))
            turn = None

    for i, item in enumerate(given):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            raise DoorError(f"{where}: an input item must be an object", param=where)
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in _ASSISTANT_ITEMS or (kind == "message" and role == "assistant"):
            turn = turn or _Turn()
            turn.add(item, where)
            continue
        flush(where)
        if kind == "item_reference":
            raise DoorError(
                f"{where}: item_reference needs stored items; this gateway stores none: send the "
                "items themselves",
                param=where,
            )
        try:
            if kind == "function_call_output":
                output = item.get("output")
                messages.append(
                    Message(
                        role="tool",
                        tool_call_id=str(item.get("call_id") or ""),
                        content=_content(output, where, only_native)
                        if isinstance(output, list)
                        else str(output if output is not None else ""),
                    )
                )
            elif kind == "message" and role in ("user", "system", "developer"):
                messages.append(
                    Message(role=role, content=_content(item.get("content"), where, only_native))
                )
            elif kind == "message":
                raise DoorError(f"{where}.role: unknown role {role!r}", param=f"{where}.role")
            else:
                only_native.append(f"{where}: a {kind} item")
        except ValueError as exc:
            raise DoorError(f"{where}: {exc}", param=where) from None
    flush(f"input[{len(given)}]")
    return messages, sealed


def _tools(body: Mapping[str, Any], only_native: list[str]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise DoorError("tools: must be a list", param="tools")
    typed = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            kind = tool.get("type") if isinstance(tool, Mapping) else None
            only_native.append(f"tools[{i}]: a {kind} tool")
            continue
        try:
            typed.append(
                Tool(
                    name=str(tool.get("name")),
                    description=str(tool.get("description") or ""),
                    parameters=tool.get("parameters") or {"type": "object", "properties": {}},
                    strict=tool.get("strict") if isinstance(tool.get("strict"), bool) else None,
                )
            )
        except ValueError as exc:
            raise DoorError(f"tools[{i}]: {exc}", param=f"tools[{i}]") from None
    return typed


class ResponsesDoor(OpenAIDoor):
    """The Responses front door (see the module docstring)."""

    wire = "openai_responses"

    def parse(
        self, body: Mapping[str, Any], headers: Mapping[str, str], build: BuildRequest, key: str
    ) -> Call:
        """Read a Responses request body.

        Raises:
            DoorError: a field is missing, malformed or needs stored state, or polythink
                refuses it (naming it).
        """
        for name in _STATEFUL:
            if body.get(name) is not None:
                raise DoorError(
                    f"{name}: this gateway keeps no conversation state; send the whole input "
                    "(with store: false)",
                    param=name,
                )
        if body.get("background"):
            raise DoorError(
                "background: this gateway answers while the request is open; send "
                "background: false",
                param="background",
            )
        notes: list[str] = []
        only_native: list[str] = []
        messages, sealed = _input(body, only_native)
        tools = _tools(body, only_native)
        reasoning = body.get("reasoning")
        given = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
        effort = parse_effort(given, "reasoning.effort") if given is not None else None
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") != "function":
            only_native.append(f"tool_choice of type {choice.get('type')!r}")
            choice = None
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, Mapping) else None
        cache_key = body.get("prompt_cache_key")
        unknown = sorted(set(body) - _TYPED)
        if unknown:
            notes.append(f"{', '.join(unknown)}: not carried to this wire")
        native = NativeBody(
            wire=self.wire,
            body=body,
            key=key,
            dialect="responses" if effort is not None else None,
            effort=effort,
            reasoning_paths=(("reasoning", "effort"),),
            max_tokens_key="max_output_tokens" if "max_output_tokens" in body else None,
        )
        request = build_request(
            build,
            native,
            messages=messages,
            reasoning_effort=effort,
            max_tokens=body.get("max_output_tokens"),
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            tools=tools or None,
            tool_choice=choice,
            response_format=fmt if isinstance(fmt, Mapping) else None,
            prompt_cache=PromptCache(key=cache_key[:64])
            if isinstance(cache_key, str) and cache_key
            else None,
            stream=flag(body, "stream"),
        )
        return Call(
            request=request,
            model=str(body.get("model")),
            body=body,
            native=not sealed,
            notes=notes,
            only_native=only_native,
        )

    # -- answers ---------------------------------------------------------------------

    def render(self, call: Call, response: Response) -> dict[str, Any]:
        """The ``response`` object for ``response``."""
        return _response_object(response, _output(response), response_id=_response_id(response))

    def renderer(self, call: Call, model: str) -> ResponsesRenderer:
        """A stream renderer naming ``model``."""
        return ResponsesRenderer(model)

    def preamble(self, event_type: str, data: str) -> bool:
        """``response.created`` and ``response.in_progress`` open a stream."""
        kind: Any = event_type
        if kind == "message":
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError:
                return False
            kind = parsed.get("type") if isinstance(parsed, dict) else None
        return kind in ("response.created", "response.in_progress")


def _response_id(response: Response) -> str:
    rid = response.id
    return rid if isinstance(rid, str) and rid.startswith("resp_") else new_id("resp_")


def _reasoning_item(response: Response, item_id: str | None = None) -> dict[str, Any] | None:
    envelope = envelope_of(response)
    if envelope is None:
        return None
    summary = [{"type": "summary_text", "text": response.reasoning}] if response.reasoning else []
    return {
        "type": "reasoning",
        "id": item_id or new_id("rs_"),
        "summary": summary,
        "encrypted_content": envelope,
        "status": "completed",
    }


def _message_item(text: str, item_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id or new_id("msg_"),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _call_item(call: ToolCall, item_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id or new_id("fc_"),
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": "completed",
    }


def _output(response: Response) -> list[dict[str, Any]]:
    message = response.message
    if message.reasoning_format in _OWN_FORMATS and message.reasoning_items:
        return [dict(item) for item in message.reasoning_items]
    output: list[dict[str, Any]] = []
    reasoning = _reasoning_item(response)
    if reasoning is not None:
        output.append(reasoning)
    if response.text:
        output.append(_message_item(response.text))
    output.extend(_call_item(call) for call in response.tool_calls)
    return output


def _status(response: Response) -> tuple[str, dict[str, Any] | None]:
    if response.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if response.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _usage(response: Response) -> dict[str, Any]:
    uncached, read, write, output, reasoning = split_usage(response.usage)
    total_input = uncached + read + write
    return {
        "input_tokens": total_input,
        "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": total_input + output,
    }


def _response_object(
    response: Response | None,
    output: list[dict[str, Any]],
    *,
    response_id: str,
    model: str | None = None,
    created: float | None = None,
) -> dict[str, Any]:
    status, incomplete = _status(response) if response is not None else ("in_progress", None)
    effort = response.applied_effort if response is not None else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created if created is not None else time.time(),
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "model": response.model if response is not None else model,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": effort.value if effort is not None else None, "summary": None},
        "store": False,
        "temperature": None,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "truncation": "disabled",
        "usage": _usage(response) if response is not None else None,
        "metadata": {},
    }


class ResponsesRenderer:
    """A Responses event stream rendered from polythink's typed events (see the module
    docstring for the reasoning item's place)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.id = new_id("resp_")
        self.created = time.time()
        self.sequence = 0
        self.started = False
        self.output: list[dict[str, Any]] = []
        self.reasoning: int | None = None
        self.summary: list[str] = []
        self.summary_open = False
        self.message: int | None = None
        self.text: list[str] = []
        self.calls: dict[int, int] = {}
        self.arguments: dict[int, list[str]] = {}

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return sse_frame(kind, orjson.dumps(payload).decode())

    def _snapshot(self, response: Response | None = None) -> dict[str, Any]:
        return _response_object(
            response, self.output, response_id=self.id, model=self.model, created=self.created
        )

    def start(self) -> list[bytes]:
        """``response.created`` and ``response.in_progress``."""
        self.started = True
        return [
            self._event("response.created", response=self._snapshot()),
            self._event("response.in_progress", response=self._snapshot()),
        ]

    def _add(self, item: dict[str, Any]) -> tuple[int, bytes]:
        index = len(self.output)
        self.output.append(item)
        return index, self._event("response.output_item.added", output_index=index, item=item)

    def _close_summary(self) -> list[bytes]:
        if not self.summary_open or self.reasoning is None:
            return []
        self.summary_open = False
        item = self.output[self.reasoning]
        text = "".join(self.summary)
        part = {"type": "summary_text", "text": text}
        item["summary"] = [part]
        common = {"item_id": item["id"], "output_index": self.reasoning, "summary_index": 0}
        return [
            self._event("response.reasoning_summary_text.done", text=text, **common),
            self._event("response.reasoning_summary_part.done", part=part, **common),
        ]

    def _close_message(self) -> list[bytes]:
        if self.message is None:
            return []
        index, self.message = self.message, None
        item = self.output[index]
        text = "".join(self.text)
        part = {"type": "output_text", "text": text, "annotations": []}
        item.update({"status": "completed", "content": [part]})
        common = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            self._event("response.output_text.done", text=text, **common),
            self._event("response.content_part.done", part=part, **common),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def feed(self, event: StreamEvent) -> list[bytes]:
        """The events of one typed event."""
        frames: list[bytes] = []
        if event.type == "reasoning" and event.text:
            if self.reasoning is None:
                item: dict[str, Any] = {"type": "reasoning", "id": new_id("rs_"), "summary": []}
                self.reasoning, added = self._add(item)
                frames.append(added)
            item = self.output[self.reasoning]
            common = {"item_id": item["id"], "output_index": self.reasoning, "summary_index": 0}
            if not self.summary_open:
                self.summary_open = True
                part = {"type": "summary_text", "text": ""}
                frames.append(
                    self._event("response.reasoning_summary_part.added", part=part, **common)
                )
            self.summary.append(event.text)
            frames.append(
                self._event("response.reasoning_summary_text.delta", delta=event.text, **common)
            )
        elif event.type == "text" and event.text:
            frames += self._close_summary()
            if self.message is None:
                item = {
                    "type": "message",
                    "id": new_id("msg_"),
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                }
                self.message, added = self._add(item)
                self.text = []
                opening: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
                common = {"item_id": item["id"], "output_index": self.message, "content_index": 0}
                frames += [
                    added,
                    self._event("response.content_part.added", part=opening, **common),
                ]
            item = self.output[self.message]
            self.text.append(event.text)
            frames.append(
                self._event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=self.message,
                    content_index=0,
                    delta=event.text,
                )
            )
        elif event.type == "tool_call_delta" and event.tool_call_delta is not None:
            delta = event.tool_call_delta
            frames += self._close_summary() + self._close_message()
            if delta.index not in self.calls:
                item = {
                    "type": "function_call",
                    "id": new_id("fc_"),
                    "call_id": delta.id or "",
                    "name": delta.name or "",
                    "arguments": "",
                    "status": "in_progress",
                }
                self.calls[delta.index], added = self._add(item)
                frames.append(added)
            index = self.calls[delta.index]
            if delta.arguments:
                self.arguments.setdefault(delta.index, []).append(delta.arguments)
                frames.append(
                    self._event(
                        "response.function_call_arguments.delta",
                        item_id=self.output[index]["id"],
                        output_index=index,
                        delta=delta.arguments,
                    )
                )
        elif event.type == "tool_call" and event.tool_call is not None:
            position = next(
                (
                    p
                    for p, i in self.calls.items()
                    if self.output[i]["call_id"] == event.tool_call.id
                ),
                None,
            )
            if position is not None:
                index = self.calls[position]
                item = self.output[index]
                item.update({"arguments": event.tool_call.arguments, "status": "completed"})
                frames += [
                    self._event(
                        "response.function_call_arguments.done",
                        item_id=item["id"],
                        output_index=index,
                        arguments=event.tool_call.arguments,
                    ),
                    self._event("response.output_item.done", output_index=index, item=item),
                ]
        return frames

    def finish(self, response: Response) -> list[bytes]:
        """Close what is open, the reasoning item with its envelope, then
        ``response.completed`` (``response.incomplete`` for a cut answer)."""
        frames = self._close_summary() + self._close_message()
        reasoning = _reasoning_item(
            response, self.output[self.reasoning]["id"] if self.reasoning is not None else None
        )
        if reasoning is not None:
            if self.reasoning is None:
                self.reasoning, added = self._add(reasoning)
                frames.append(added)
            else:
                self.output[self.reasoning] = reasoning
            frames.append(
                self._event(
                    "response.output_item.done", output_index=self.reasoning, item=reasoning
                )
            )
        snapshot = self._snapshot(response)
        kind = "response.completed" if snapshot["status"] == "completed" else "response.incomplete"
        frames.append(self._event(kind, response=snapshot))
        return frames

    def fail(self, status: int, kind: str, message: str) -> list[bytes]:
        """``response.failed`` with the error's code, once the stream started; an ``error``
        event before."""
        error = openai_error(kind, message, None)["error"]
        # The codes Codex acts on (its SSE loop, GATEWAY.md §2.4): a spent budget is fatal.
        code = "insufficient_quota" if kind == "billing" else error["code"] or error["type"]
        if not self.started:
            return [self._event("error", code=code, message=message, param=None)]
        snapshot = self._snapshot()
        snapshot.update({"status": "failed", "error": {"code": code, "message": message}})
        return [self._event("response.failed", response=snapshot)]

    def keepalive(self) -> bytes:
        """``response.in_progress`` again."""
        return self._event("response.in_progress", response=self._snapshot())
