"""Amazon Bedrock: Claude through InvokeModel, every other vendor through Converse.

InvokeModel (``POST {endpoint}/model/{modelId}/invoke``, ``…/invoke-with-response-stream``)
takes the Anthropic Messages body with these differences (CLOUDS.md §1.2, from botocore
1.44.8's service model and the Anthropic SDK's Bedrock client, read 2026-12-04): no ``model``
(it is the URL's path segment, an ARN's ``/`` as ``%2F``, ``:`` kept: :func:`model_path`)
and no ``stream`` (the path chooses); ``"anthropic_version": "bedrock-2023-05-31"`` in the
body instead of the header; betas as ``"anthropic_beta": [...]`` in the body instead of
the ``anthropic-beta`` header. The answer is the Messages JSON; a stream is AWS event-stream
frames (:mod:`polythink.transports.eventstream`) whose ``chunk`` events carry one Anthropic
stream event each, base64-encoded in ``bytes``. Everything else (thinking blocks and their
signatures, usage, refusals) is the Anthropic wire's (:mod:`polythink.transports.anthropic`).

Converse (``POST {endpoint}/model/{modelId}/converse``, ``…/converse-stream``) has its own
shapes (CLOUDS.md §1.3): ``messages[].content[]`` blocks of one key each (``text``, ``image``,
``toolUse``, ``toolResult``, ``reasoningContent``, ``cachePoint``), ``system[]``,
``inferenceConfig`` (``maxTokens``, ``temperature``, ``topP``, ``stopSequences``),
``toolConfig`` and ``additionalModelRequestFields``, where each vendor's reasoning field goes
(:mod:`polythink.reasoning.converse`). Reasoning comes back as ``reasoningContent`` blocks:
``reasoningText`` (``text`` and ``signature``) or ``redactedContent``; an assistant turn that
has them is kept whole in ``Message.reasoning_items`` (``reasoning_format``
``"bedrock-converse"``) and sent back unmodified, as Bedrock requires ("include the text and
its signature unmodified"; clients that dropped the signature or read it at the wrong level
broke every later turn: RooCodeInc/Roo-Code#11238, NousResearch/hermes-agent#36260,
UKGovernmentBEIS/inspect_ai#5300).

Errors: the rest-json shape, ``{"message": …}`` with the type in ``x-amzn-ErrorType``
(:func:`polythink.transports.error_map.aws_error_type`), and exception frames inside a stream
(``throttlingException`` -> :class:`~polythink.errors.RateLimitedError`, …).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

import httpx

from polythink.errors import (
    ContentUnsupportedError,
    OutputFormatUnsupportedError,
    PolythinkError,
    RequestRejectedError,
    TransientError,
)
from polythink.providers import ProviderProfile
from polythink.reasoning.converse import converse_dialect
from polythink.transports.anthropic import AnthropicTransport, thinking_conflicts
from polythink.transports.base import (
    HTTPTransport,
    apply_overrides,
    assistant_response,
    check_parts,
    part_types,
    token_count,
    with_notes,
)
from polythink.transports.carry import (
    EMPTY_TURN,
    EMPTY_WHY,
    LATER_SYSTEM,
    REASONING,
    LeftOut,
    empty_turn,
    later_system_why,
    name_note,
    reasoning_unsent,
    refuse_chat_only,
)
from polythink.transports.eventstream import EXCEPTION, EventStreamDecoder
from polythink.transports.finish import CONVERSE, map_finish
from polythink.types import (
    Message,
    NativeRelay,
    Request,
    Response,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from polythink.wire_json import loads_json

__all__ = [
    "BEDROCK_ANTHROPIC_VERSION",
    "BedrockConverseTransport",
    "BedrockTransport",
    "ConverseStreamAssembler",
    "build_converse_body",
    "invoke_body",
    "model_path",
    "parse_converse",
    "parse_converse_usage",
]

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
"""The body's ``anthropic_version`` on InvokeModel (AWS docs, the Anthropic SDK's Bedrock
client before 2.x, Vercel's Bedrock-Anthropic model; CLOUDS.md §1.2)."""

_EVENT_STREAM = "application/vnd.amazon.eventstream"
_EXCEPTION_STATUS = {
    "throttlingException": 429,
    "validationException": 400,
    "modelStreamErrorException": 424,
    "modelTimeoutException": 408,
    "internalServerException": 500,
    "serviceUnavailableException": 503,
}
"""The modelled HTTP status of each stream exception (the service model's ``httpStatusCode``;
botocore's own ``to_response_dict`` says 400 for every one, CLOUDS.md §1.7)."""


_PCHAR = "!$&'()*+,;=:@"
"""What a path segment may hold unencoded besides the unreserved characters (RFC 3986
``pchar``): kept as they are, since an HTTP layer may decode their escapes (aiohttp's yarl
turns ``%3A`` back into ``:``), and SigV4 signs the path as sent."""


def model_path(model: str) -> str:
    """``model`` as one path segment: ``/`` (an ARN's) and what a path cannot hold
    percent-encoded, ``:`` and the other ``pchar`` s kept (the Anthropic SDK's Bedrock client
    keeps ``:`` too; Bedrock takes either form, CLOUDS.md §1.2).

    Raises:
        RequestRejectedError: ``.`` or ``..`` (which a path normaliser would remove; the
            Anthropic SDK refuses them too).
    """
    if model in (".", ".."):
        raise RequestRejectedError(
            f"a Bedrock model id cannot be {model!r}", error_type="invalid_request"
        )
    return quote(model, safe=_PCHAR)


def _betas(headers: Mapping[str, str]) -> list[str]:
    value = headers.get("anthropic-beta", "")
    return [beta.strip() for beta in value.split(",") if beta.strip()]


def invoke_body(
    body: Mapping[str, Any], *, version: str, betas: Sequence[str] = ()
) -> dict[str, Any]:
    """The InvokeModel body for a Messages API ``body``: without ``model`` and ``stream``,
    with ``anthropic_version`` and, when there are betas, ``anthropic_beta`` (those already in
    the body first, each once)."""
    out = {key: value for key, value in body.items() if key not in ("model", "stream")}
    out = {"anthropic_version": version, **out}
    given = out.get("anthropic_beta")
    merged = list(given) if isinstance(given, list) else []
    merged += [beta for beta in betas if beta not in merged]
    if merged:
        out["anthropic_beta"] = merged
    return out


def _stream_error(
    transport: HTTPTransport, kind: str, payload: str, response: httpx.Response
) -> PolythinkError:
    """The error of an exception frame (``kind`` without :data:`EXCEPTION`)."""
    try:
        parsed = loads_json(payload) if payload else {}
    except ValueError:
        parsed = {"message": payload}
    message = parsed.get("message") if isinstance(parsed, Mapping) else None
    error = transport.in_band_error({"error": {"type": kind, "message": message or kind}}, response)
    error.status_code = _EXCEPTION_STATUS.get(kind, error.status_code)
    return error


class BedrockTransport(AnthropicTransport):
    """Claude on Bedrock through InvokeModel / InvokeModelWithResponseStream.

    The body is the Anthropic wire's (every rule of
    :class:`~polythink.transports.anthropic.AnthropicTransport` applies) turned into the
    InvokeModel body (:func:`invoke_body`): ``anthropic_version`` is the source's
    ``api_version`` (default :data:`BEDROCK_ANTHROPIC_VERSION`), and ``anthropic-beta`` values
    given as headers (the source's or the call's) go in ``anthropic_beta``. Auth is SigV4 or
    a Bedrock API key (:mod:`polythink.auth`).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        root = f"{self.source.endpoint}/model/{model_path(self.source.model)}"
        self.url = f"{root}/invoke"
        self.stream_url = f"{root}/invoke-with-response-stream"
        self._source_betas = _betas(self.headers)
        self.headers.pop("anthropic-beta", None)
        self.stream_headers = {
            **self.headers,
            "accept": _EVENT_STREAM,
            "x-amzn-bedrock-accept": "application/json",
        }

    def extra_headers(self) -> dict[str, str]:
        """None: the version goes in the body."""
        return {}

    def _version(self) -> str:
        return self.source.api_version or BEDROCK_ANTHROPIC_VERSION

    def _headers(self, headers: dict[str, str], request: Request) -> dict[str, str]:
        """The call's headers without ``anthropic-beta`` (its betas go in the body)."""
        merged = super()._headers(headers, request)
        if "anthropic-beta" in merged:
            return {name: value for name, value in merged.items() if name != "anthropic-beta"}
        return merged

    def platform_body(self, body: dict[str, Any], request: Request) -> dict[str, Any]:
        """The InvokeModel body (:func:`invoke_body`)."""
        betas = list(self._source_betas)
        extra = request.extra_headers
        if extra:
            lowered = {name.lower(): value for name, value in extra.items()}
            betas += [beta for beta in _betas(lowered) if beta not in betas]
        return invoke_body(body, version=self._version(), betas=betas)

    async def events(
        self, response: httpx.Response, relay: NativeRelay | None = None
    ) -> AsyncGenerator[Mapping[str, Any], None]:
        """The Anthropic events inside the event-stream frames (``chunk.bytes``, base64).
        ``relay`` is never set here: a body written for the Messages API is not sent to
        InvokeModel as written.

        Raises:
            PolythinkError: an exception frame, mapped by its type; a frame that is not what
                InvokeModel sends (:class:`TransientError`, ``"malformed_event"``).
        """
        async with aclosing(self.sse_events(response, EventStreamDecoder())) as frames:
            async for kind, payload in frames:
                if kind.startswith(EXCEPTION):
                    raise _stream_error(self, kind[len(EXCEPTION) :], payload, response)
                if kind != "chunk":
                    continue
                try:
                    wrapped = loads_json(payload)
                    event = loads_json(base64.b64decode(wrapped["bytes"], validate=True))
                except (ValueError, KeyError, TypeError, binascii.Error):
                    raise self._malformed(response) from None
                if isinstance(event, Mapping):
                    yield event

    def _malformed(self, response: httpx.Response) -> TransientError:
        return TransientError(
            f"{self.profile.id} sent a stream chunk that is not an Anthropic event",
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code,
            error_type="malformed_event",
        )


# -- Converse -----------------------------------------------------------------------------

_WIRE = "Bedrock's Converse API"
_LATER_SYSTEM_WHY = later_system_why("Converse's messages have no system role")
CONVERSE_PARTS = part_types(
    system=("text",),
    user=("text", "image_url"),
    assistant=("text", "refusal"),
    tool=("text", "image_url"),
)
"""Content part types the Converse body carries, by role (``image_url`` as an ``image`` block
of inline bytes: Converse takes no image URL, only ``bytes`` or ``s3Location``)."""

_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_CHOICES: dict[str, dict[str, Any]] = {
    "auto": {"auto": {}},
    "required": {"any": {}},
    "any": {"any": {}},
}


def _refused(profile: ProviderProfile, source_index: int | None, what: str) -> PolythinkError:
    return ContentUnsupportedError(
        f"{profile.id}: {what}",
        provider=profile.id,
        source_index=source_index,
        error_type="unsupported_content",
    )


def _blocks(
    content: Any, profile: ProviderProfile, source_index: int | None
) -> list[dict[str, Any]]:
    """Converse content blocks for a message's content (a string, or Chat parts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("text", "refusal"):
            text = part.get(kind)
            if isinstance(text, str) and text.strip():
                blocks.append({"text": text})
        elif kind == "image_url":
            image = part.get("image_url")
            url = str(image.get("url") if isinstance(image, Mapping) else image)
            mime, _, data = (
                url[5:].partition(";base64,") if url.startswith("data:") else ("", "", "")
            )
            image_format = _IMAGE_FORMATS.get(mime)
            if not data or image_format is None:
                raise _refused(
                    profile,
                    source_index,
                    "Converse takes images as inline bytes only: give a data:image/<png|jpeg|"
                    "gif|webp>;base64,… URL",
                )
            blocks.append({"image": {"format": image_format, "source": {"bytes": data}}})
    return blocks


def _tool_input(call: ToolCall, profile: ProviderProfile, source_index: int | None) -> Any:
    try:
        value = loads_json(call.arguments or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise RequestRejectedError(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object; "
            "Converse's toolUse.input must be an object",
            provider=profile.id,
            source_index=source_index,
            error_type="invalid_request",
        )
    return value


def _messages(
    messages: Sequence[Message],
    profile: ProviderProfile,
    left_out: LeftOut,
    source_index: int | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system, messages)``: consecutive turns of one role (tool results and the user's
    words after them) are merged, as Converse alternates user and assistant."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    own = profile.reasoning_format
    for position, message in enumerate(messages):
        left_out.position = position
        role = message.role
        if message.content.__class__ is list:
            check_parts(message, CONVERSE_PARTS, profile, source_index, position)
        if message.name is not None and role != "tool":
            name_note(left_out, _WIRE)
        if role in ("system", "developer"):
            blocks = _blocks(message.content, profile, source_index)
            if turns:
                # After the conversation began: where the caller put it (CONTINUITY.md §1.9).
                left_out.add(LATER_SYSTEM, _LATER_SYSTEM_WHY)
                _append(turns, "user", blocks)
            else:
                system.extend(blocks)
            continue
        if role == "tool":
            content = message.content
            result: list[dict[str, Any]] = (
                [{"text": content}]
                if isinstance(content, str)
                else _blocks(content, profile, source_index)
            )
            block = {"toolResult": {"toolUseId": message.tool_call_id, "content": result}}
            _append(turns, "user", [block])
            continue
        if role == "user":
            _append(turns, "user", _blocks(message.content, profile, source_index))
            continue
        if message.audio_id is not None or message.function_call is not None:
            refuse_chat_only(message, position, profile, source_index)
        if message.reasoning_format == own and message.reasoning_items:
            blocks = [dict(item) for item in message.reasoning_items]
        else:
            if reasoning_unsent(message, profile):
                left_out.add(
                    REASONING,
                    f"{_WIRE} takes reasoning back only as its own signed reasoningContent "
                    "blocks; the turn goes without it",
                )
            blocks = _blocks(message.content, profile, source_index)
            if message.refusal and message.refusal.strip():
                blocks.append({"text": message.refusal})
            blocks += [
                {
                    "toolUse": {
                        "toolUseId": call.id,
                        "name": call.name,
                        "input": _tool_input(call, profile, source_index),
                    }
                }
                for call in message.tool_calls
            ]
        if blocks:
            _append(turns, "assistant", blocks)
        elif empty_turn(message):
            left_out.add(EMPTY_TURN, EMPTY_WHY)
    return system, turns


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1] = {"role": role, "content": [*turns[-1]["content"], *blocks]}
    else:
        turns.append({"role": role, "content": blocks})


def _tool_choice(
    choice: str | Mapping[str, Any], profile: ProviderProfile, source_index: int | None
) -> dict[str, Any] | None:
    """Converse's ``toolChoice``; ``None`` for ``none`` (Converse has no such choice)."""
    if isinstance(choice, str):
        if choice == "none":
            return None
        found = _CHOICES.get(choice)
        if found is not None:
            return found
    elif choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and name:
            return {"tool": {"name": name}}
    elif set(choice) <= {"auto", "any", "tool"} and len(choice) == 1:
        return dict(choice)
    raise RequestRejectedError(
        f"unknown tool_choice {choice!r}; accepted: auto, required, none, "
        '{"type": "function", "function": {"name": ...}} or a Converse toolChoice',
        provider=profile.id,
        source_index=source_index,
        error_type="invalid_request",
    )


def build_converse_body(
    request: Request,
    *,
    profile: ProviderProfile,
    extra_body: Mapping[str, Any] | None = None,
    left_out: LeftOut | None = None,
    source_index: int | None = None,
) -> dict[str, Any]:
    """Build the Converse request body for ``request`` (the model is in the URL).

    ``system`` and ``messages`` as Converse blocks (an assistant turn of this wire goes back
    verbatim, its ``reasoningContent`` blocks and their signatures included);
    ``inferenceConfig`` from ``max_tokens``, ``temperature``, ``top_p`` and ``stop``;
    ``toolConfig`` from the tools (``toolSpec`` with ``inputSchema.json``) and
    ``tool_choice`` (``auto`` -> ``{"auto": {}}``, ``required`` -> ``{"any": {}}``, a named
    function -> ``{"tool": {"name"}}``; ``none`` sends no choice, with a note, since
    Converse has none and a conversation with tool blocks needs ``toolConfig``). A prompt-
    cache marker puts ``cachePoint`` blocks after the system prompt and the last turn. The
    call's ``system_suffix`` ends the last user turn (a user turn of its own after an
    assistant turn), after its cache point: the next call replaces it, and the conversation
    before it stays the unchanged prefix of the next request. Then
    the reasoning fragment (``additionalModelRequestFields``, ``inferenceConfig.maxTokens``),
    the source's ``extra_body`` and the call's, deep-merged in that order.

    Raises:
        ContentUnsupportedError: a part Converse cannot carry (an image by URL, audio).
        RequestRejectedError: tool-call arguments that are not an object, an unknown
            ``tool_choice``.
        OutputFormatUnsupportedError: a ``response_format`` (not sent through Converse here).
    """
    if request.response_format is not None:
        raise OutputFormatUnsupportedError(
            f"{profile.id}: response_format is not sent through Converse by polythink; use "
            "a Claude model (InvokeModel) or ask for JSON in the prompt",
            provider=profile.id,
            source_index=source_index,
            error_type="response_format_unsupported",
        )
    notes = left_out if left_out is not None else LeftOut(profile.id)
    system, turns = _messages(request.messages, profile, notes, source_index)
    cache = request.prompt_cache
    if cache is not None:
        point: dict[str, Any] = {"type": "default"}
        if cache.ttl == "1h":
            point["ttl"] = "1h"
        if system:
            system = [*system, {"cachePoint": dict(point)}]
        if turns:
            last = turns[-1]
            turns[-1] = {**last, "content": [*last["content"], {"cachePoint": dict(point)}]}
    if request.system_suffix:
        # After the conversation (and its cache point), never in ``system``: the next call
        # replaces it, and the prefix it was sent after stays as it was.
        if turns and turns[-1]["role"] == "user":
            last = turns[-1]
            turns[-1] = {**last, "content": [*last["content"], {"text": request.system_suffix}]}
        else:
            turns.append({"role": "user", "content": [{"text": request.system_suffix}]})
    body: dict[str, Any] = {"messages": turns}
    if system:
        body["system"] = system
    inference: dict[str, Any] = {}
    if request.max_tokens is not None:
        inference["maxTokens"] = request.max_tokens
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    if request.top_p is not None:
        inference["topP"] = request.top_p
    if request.stop:
        inference["stopSequences"] = list(request.stop)
    if inference:
        body["inferenceConfig"] = inference
    if request.tools:
        tool_config: dict[str, Any] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": tool.name,
                        "description": tool.description,
                        "inputSchema": {"json": dict(tool.parameters)},
                    }
                }
                for tool in request.tools
            ]
        }
        if request.tool_choice is not None:
            choice = _tool_choice(request.tool_choice, profile, source_index)
            if choice is not None:
                tool_config["toolChoice"] = choice
            else:
                notes.add(
                    "tool_choice='none'",
                    f"{_WIRE} has no tool choice 'none'; the tools were sent with the model's "
                    "own choice",
                )
        body["toolConfig"] = tool_config
    return apply_overrides(body, request, extra_body)


def parse_converse_usage(usage: Any) -> Usage | None:
    """Normalise a Converse ``usage``; ``None`` when absent.

    ``inputTokens`` counts the tokens after the cache, as Anthropic's ``input_tokens`` does
    (one third-party table, CLOUDS.md §1.3, UNVERIFIED; the Anthropic convention the Claude
    models on Converse follow), so ``Usage.input_tokens`` adds ``cacheReadInputTokens`` and
    ``cacheWriteInputTokens``. ``outputTokens`` includes reasoning; Converse reports no
    reasoning count (``reasoning_tokens`` ``None``).
    """
    if not isinstance(usage, Mapping):
        return None
    uncached = token_count(usage.get("inputTokens"))
    read = token_count(usage.get("cacheReadInputTokens"))
    write = token_count(usage.get("cacheWriteInputTokens"))
    return Usage(
        input_tokens=None if uncached is None else uncached + (read or 0) + (write or 0),
        output_tokens=token_count(usage.get("outputTokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _reasoning_of(block: Mapping[str, Any]) -> tuple[str | None, bool]:
    """``(reasoning text, opaque)`` of a ``reasoningContent`` block: its text, and whether it
    carries a signature or redacted content (evidence of reasoning without text)."""
    content = block.get("reasoningContent")
    if not isinstance(content, Mapping):
        return None, False
    if content.get("redactedContent") is not None:
        return None, True
    text_block = content.get("reasoningText")
    if not isinstance(text_block, Mapping):
        return None, False
    text = text_block.get("text")
    return (text if isinstance(text, str) and text else None), bool(text_block.get("signature"))


def _converse_response(
    *,
    blocks: list[dict[str, Any]],
    raw_finish: Any,
    usage: Usage | None,
    model: str,
    profile: ProviderProfile,
    source_index: int,
    finish: str | None = None,
) -> Response:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    opaque = False
    for block in blocks:
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif "reasoningContent" in block:
            thought, signed = _reasoning_of(block)
            opaque = opaque or signed
            if thought:
                thoughts.append(thought)
        elif isinstance(block.get("toolUse"), Mapping):
            use = block["toolUse"]
            calls.append(
                ToolCall(
                    id=str(use.get("toolUseId") or ""),
                    name=str(use.get("name") or ""),
                    arguments=json.dumps(
                        use.get("input", {}), separators=(",", ":"), ensure_ascii=False
                    ),
                )
            )
    mapped = map_finish(raw_finish, CONVERSE, provider=profile.id, has_tool_calls=bool(calls))
    items = tuple(blocks) if any("reasoningContent" in b for b in blocks) else ()
    return assistant_response(
        text="".join(texts),
        reasoning="\n\n".join(thoughts) or None,
        calls=calls,
        items=items,
        finish=finish or mapped.reason,
        usage=usage,
        model=model,
        response_id=None,
        profile=profile,
        source_index=source_index,
        thinking=ThinkingObservation.OBSERVED if opaque else ThinkingObservation.UNKNOWN,
        native_finish_reason=mapped.native,
        warnings=[mapped.note] if mapped.note else None,
    )


def parse_converse(
    data: Any, *, profile: ProviderProfile, source_index: int, model: str
) -> Response:
    """Parse a Converse answer into a :class:`Response`.

    Text blocks join into ``text``; ``reasoningText`` texts into ``reasoning`` (a blank line
    between blocks); each ``toolUse`` is a :class:`ToolCall` (its ``input`` as compact
    JSON). When the answer has ``reasoningContent`` blocks, every block is kept verbatim in
    the message's ``reasoning_items`` for the next turn. Converse names no model in its
    answer: ``model`` is the source's.

    Raises:
        TransientError: the body has no ``output.message.content`` list.
    """
    output = data.get("output") if isinstance(data, Mapping) else None
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        raise TransientError(
            f"{profile.id} answered without output.message.content",
            provider=profile.id,
            source_index=source_index,
            error_type="malformed_body",
        )
    return _converse_response(
        blocks=[dict(block) for block in content if isinstance(block, Mapping)],
        raw_finish=data.get("stopReason"),
        usage=parse_converse_usage(data.get("usage")),
        model=model,
        profile=profile,
        source_index=source_index,
    )


@dataclasses.dataclass(slots=True)
class _Block:
    kind: str = "text"
    pieces: list[str] = dataclasses.field(default_factory=list)
    signature: str | None = None
    redacted: str | None = None
    tool: dict[str, Any] = dataclasses.field(default_factory=dict)
    position: int = 0
    closed: bool = False

    def final(self) -> dict[str, Any]:
        joined = "".join(self.pieces)
        if self.kind == "reasoning":
            if self.redacted is not None:
                return {"reasoningContent": {"redactedContent": self.redacted}}
            text: dict[str, Any] = {"text": joined}
            if self.signature is not None:
                text["signature"] = self.signature
            return {"reasoningContent": {"reasoningText": text}}
        if self.kind == "toolUse":
            try:
                arguments = loads_json(joined) if joined else {}
            except ValueError:
                arguments = {}
            return {"toolUse": {**self.tool, "input": arguments}}
        return {"text": joined}


class ConverseStreamAssembler:
    """Turn ConverseStream events into :class:`StreamEvent` s and, at the end, a
    :class:`Response`.

    ``contentBlockStart`` opens a ``toolUse`` block (text and reasoning blocks get none: their
    first delta opens them); ``contentBlockDelta`` carries ``text``, ``toolUse.input`` (a
    piece of the arguments' JSON), or ``reasoningContent`` (``text``, then one ``signature``
    before the stop, or ``redactedContent``); ``messageStop`` the stop reason; ``metadata``,
    last, the usage. Only blocks that reached ``contentBlockStop`` go into
    ``reasoning_items``, so a cut stream never hands back reasoning without its signature.
    """

    def __init__(self, profile: ProviderProfile, source_index: int, model: str) -> None:
        self.profile = profile
        self.source_index = source_index
        self.model = model
        self.blocks: dict[int, _Block] = {}
        self.raw_finish: Any = None
        self.usage: Usage | None = None
        self.content_seen = False
        self._tools = 0
        self._reasoned = False

    @property
    def finished(self) -> bool:
        """Whether ``messageStop`` arrived."""
        return self.raw_finish is not None

    def _block(self, event: Mapping[str, Any], kind: str) -> _Block:
        index = event.get("contentBlockIndex", 0)
        found = self.blocks.get(index)
        if found is None:
            found = self.blocks[index] = _Block(kind)
        return found

    def feed(self, kind: str, event: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one event (its ``:event-type`` and payload); return what it produces."""
        if kind == "contentBlockDelta":
            return self._delta(event)
        if kind == "contentBlockStart":
            start = event.get("start")
            use = start.get("toolUse") if isinstance(start, Mapping) else None
            if isinstance(use, Mapping):
                block = self._block(event, "toolUse")
                block.kind = "toolUse"
                block.tool = {k: v for k, v in use.items() if k in ("toolUseId", "name", "type")}
                block.position = self._tools
                self._tools += 1
                self.content_seen = True
                return [self._tool_delta(block, "")]
            return []
        if kind == "contentBlockStop":
            stopped = self.blocks.get(event.get("contentBlockIndex", -1))
            if stopped is None or stopped.closed:
                return []
            stopped.closed = True
            if stopped.kind == "toolUse":
                return [StreamEvent("tool_call", tool_call=self._call(stopped))]
            return []
        if kind == "messageStop":
            self.raw_finish = event.get("stopReason") or "end_turn"
            return []
        if kind == "metadata":
            self.usage = parse_converse_usage(event.get("usage"))
            return [StreamEvent("usage", usage=self.usage)] if self.usage is not None else []
        return []

    def _delta(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            return []
        if isinstance(delta.get("text"), str):
            block = self._block(event, "text")
            return self._piece(block, "text", delta["text"])
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, Mapping):
            block = self._block(event, "reasoning")
            if isinstance(reasoning.get("text"), str):
                return self._piece(block, "reasoning", reasoning["text"])
            if isinstance(reasoning.get("signature"), str):
                block.signature = reasoning["signature"]
            elif reasoning.get("redactedContent") is not None:
                block.redacted = str(reasoning["redactedContent"])
                self.content_seen = True
            return []
        use = delta.get("toolUse")
        if isinstance(use, Mapping) and isinstance(use.get("input"), str):
            block = self._block(event, "toolUse")
            block.pieces.append(use["input"])
            return [self._tool_delta(block, use["input"])]
        return []

    def _piece(self, block: _Block, kind: str, piece: str) -> list[StreamEvent]:
        if not piece:
            return []
        out = piece
        if kind == "reasoning":
            if not block.pieces and self._reasoned:
                out = "\n\n" + piece
            self._reasoned = True
        block.pieces.append(piece)
        self.content_seen = True
        return [StreamEvent("text" if kind == "text" else "reasoning", text=out)]

    @staticmethod
    def _tool_delta(block: _Block, piece: str) -> StreamEvent:
        return StreamEvent(
            "tool_call_delta",
            tool_call_delta=ToolCallDelta(
                index=block.position,
                id=str(block.tool.get("toolUseId") or "") or None,
                name=str(block.tool.get("name") or "") or None,
                arguments=piece,
            ),
        )

    @staticmethod
    def _call(block: _Block) -> ToolCall:
        return ToolCall(
            id=str(block.tool.get("toolUseId") or ""),
            name=str(block.tool.get("name") or ""),
            arguments="".join(block.pieces) or "{}",
        )

    def response(self, *, finish: str | None = None) -> Response:
        """Assemble the response from everything consumed so far."""
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        return _converse_response(
            blocks=[b.final() for b in ordered if b.closed],
            raw_finish=self.raw_finish,
            usage=self.usage,
            model=self.model,
            profile=self.profile,
            source_index=self.source_index,
            finish=finish,
        )


class BedrockConverseTransport(HTTPTransport):
    """Any Bedrock model through Converse / ConverseStream
    (``POST {endpoint}/model/{modelId}/converse``, ``…/converse-stream``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        root = f"{self.source.endpoint}/model/{model_path(self.source.model)}"
        self.url = f"{root}/converse"
        self.stream_url = f"{root}/converse-stream"
        self._extra_body = self.source.extra_body
        self.stream_headers = {**self.headers, "accept": _EVENT_STREAM}
        capability = self.source.capability
        self._claude = (
            converse_dialect(
                self.source.registry_model, capability.provider if capability else None
            )
            == "anthropic"
        )
        self._thinks_by_default = capability is not None and capability.default_reasons

    def body(self, request: Request) -> dict[str, Any]:
        """Return the exact body this transport sends for ``request`` (see
        :func:`build_converse_body`)."""
        return self._prepare(request)[0]

    def _prepare(self, request: Request) -> tuple[dict[str, Any], list[str]]:
        left_out = LeftOut(self.profile.id)
        body = build_converse_body(
            request,
            profile=self.profile,
            extra_body=self._extra_body,
            left_out=left_out,
            source_index=self.index,
        )
        notes = self._claude_rules(body, request) if self._claude else []
        return body, notes + left_out.notes()

    def _claude_rules(self, body: dict[str, Any], request: Request) -> list[str]:
        """Claude's refusals, as on the Messages API, of the Converse fields that carry them:
        the model's sampling rule, and with thinking on a non-default ``temperature``, a
        ``topP`` below 0.95, a ``top_k``, and with manual thinking a forced ``toolChoice``
        (:func:`polythink.transports.anthropic.thinking_conflicts`). Refused before sending,
        or dropped with ``drop_params``; returns the notes.

        Raises:
            ThinkingUnsupportedError: a conflict while ``drop_params`` is off.
        """
        fields = body.get("additionalModelRequestFields") or {}
        inference = body.get("inferenceConfig") or {}
        tools = body.get("toolConfig") or {}
        choice = tools.get("toolChoice")
        projected: dict[str, Any] = {
            key: value
            for key, value in (
                ("thinking", fields.get("thinking")),
                ("temperature", inference.get("temperature")),
                ("top_p", inference.get("topP")),
                ("top_k", fields.get("top_k")),
                ("tool_choice", {"type": next(iter(choice))} if choice else None),
            )
            if value is not None
        }
        kept = dict(projected)
        notes = self.sampling_notes(projected, request)
        conflicts = thinking_conflicts(projected, thinking_by_default=self._thinks_by_default)
        notes += self.refuse_or_drop(
            projected, conflicts, "while thinking is on", "thinking_parameter_conflict"
        )
        for name, where, key in (
            ("temperature", inference, "temperature"),
            ("top_p", inference, "topP"),
            ("top_k", fields, "top_k"),
            ("tool_choice", tools, "toolChoice"),
        ):
            if name in kept and name not in projected:
                del where[key]
        if "inferenceConfig" in body and not inference:
            del body["inferenceConfig"]
        return notes

    async def complete(self, request: Request) -> Response:
        """Send a Converse call and parse the answer.

        Raises:
            PolythinkError: a local rejection, or the mapped HTTP or transport error.
        """
        body, notes = self._prepare(request)
        data, rate_limit = await self.post_json_with_rate_limit(self.url, body, request)
        response = parse_converse(
            data, profile=self.profile, source_index=self.index, model=self.source.model
        )
        if rate_limit is not None:
            response = response.with_(rate_limit=rate_limit)
        return with_notes(response, notes)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a ConverseStream call; yield text, reasoning, tool-call and usage events, then
        ``done``.

        Raises:
            PolythinkError: before the first content event, the mapped error (an exception
                frame by its type: ``throttlingException`` -> :class:`RateLimitedError` …);
                after it, :class:`StreamInterruptedError` carrying the partial response.
        """
        body, notes = self._prepare(request)
        assembler = ConverseStreamAssembler(self.profile, self.index, self.source.model)
        try:
            async with self.open_stream(self.stream_url, body, request) as response:
                async with aclosing(self.sse_events(response, EventStreamDecoder())) as frames:
                    async for kind, payload in frames:
                        if kind.startswith(EXCEPTION):
                            raise _stream_error(self, kind[len(EXCEPTION) :], payload, response)
                        try:
                            event = loads_json(payload) if payload else {}
                        except ValueError:
                            raise TransientError(
                                f"{self.profile.id} sent a stream event that is not JSON",
                                provider=self.profile.id,
                                source_index=self.index,
                                status_code=response.status_code,
                                error_type="malformed_event",
                            ) from None
                        if isinstance(event, Mapping):
                            for item in assembler.feed(kind, event):
                                yield item
                if not assembler.finished:
                    raise self.incomplete(response)
        except PolythinkError as exc:
            if assembler.content_seen:
                raise self.interrupted(exc, assembler.response(finish="error")) from exc
            raise
        yield StreamEvent("done", response=with_notes(assembler.response(), notes))
