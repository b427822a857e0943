"""Anthropic Messages API (``POST {base_url}/messages``) for one source.

The request is built from polythink's neutral messages: system and developer turns become the
top-level ``system``; user turns become content blocks; assistant turns become text and
``tool_use`` blocks, or, when the turn came from this wire, its own content blocks verbatim
(thinking and redacted_thinking blocks with their signatures, in order, as the API requires
around tool use); tool results become ``tool_result`` blocks of one user turn. Reasoning comes
from the resolution's fragment (``thinking``, ``output_config``, a raised ``max_tokens``).

With thinking on the API rejects a non-default ``temperature``, any ``top_k``, ``top_p`` below
0.95 and, with manual thinking, a forced ``tool_choice``; the transport refuses those before
any HTTP call, or drops them with one warning when the source has ``drop_params=True``.

``response_format`` becomes ``output_config.format``, or on models without it one forced
output tool whose input is turned back into the answer's text (:func:`output_plan`,
STRUCTURED.md §3); a refusal's ``stop_details.explanation`` is ``Response.refusal``.

Facts: WIRE.md §3 (ANT-SDK @009b0353 2026-08-07, ANT-DOC pages to 2026-10), the docs copy in
``../shared/wire/specs/anthropic_messages_openapi_docs_copy.md`` (2025-09), and the recordings
``pai_anthropic_*`` (2025-2026) and ``llmanthropic_*`` (2026-02-17) in
``../shared/fixtures/real``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, Literal

import httpx

from polythink.errors import (
    PolythinkError,
    RequestRejectedError,
    ThinkingBindingError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.providers import ProviderProfile
from polythink.reasoning.continuity import Reading, thinking_reading
from polythink.reasoning.tiers import served_tier
from polythink.transports.base import (
    DONE,
    NOT_WHOLE,
    SHAPE_ERRORS,
    HTTPTransport,
    answer_events,
    apply_overrides,
    assistant_response,
    check_parts,
    joined_list,
    joined_system,
    part_types,
    text_of,
    token_count,
)
from polythink.transports.carry import (
    BLANK_PARTS,
    EMPTY_TURN,
    EMPTY_WHY,
    LATER_SYSTEM,
    REASONING,
    REASONING_ITEMS,
    REASONING_ITEMS_WHY,
    LeftOut,
    empty_turn,
    extra_keys,
    items_unsent,
    later_system_why,
    name_note,
    reasoning_unsent,
    refusal_text,
    refuse_blank_turn,
    refuse_chat_only,
)
from polythink.transports.finish import ANTHROPIC, map_finish
from polythink.transports.headers import parse_rate_limit
from polythink.transports.instructions import InstructionPlan, instruction_plan, per_call_text
from polythink.transports.native import written_body
from polythink.transports.schema import OutputPlan, anthropic_output, merge_output
from polythink.types import (
    Effort,
    Message,
    MessageMetadata,
    NativeRelay,
    PromptCache,
    RateLimit,
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
    "ANTHROPIC_VERSION",
    "BETA_BINDING",
    "BETA_CLEAR_AT",
    "CLEAR_AT",
    "SAMPLING_REMOVED_VERSIONS",
    "AnthropicStreamAssembler",
    "AnthropicTransport",
    "build_body",
    "finish_reason",
    "input_transformations",
    "merge_betas",
    "parse_message",
    "parse_usage",
    "thinking_conflicts",
    "transformation_note",
]


ANTHROPIC_VERSION = "2026-10-21"
"""The ``anthropic-version`` header a source sends unless it pins another
(``Source.api_version``): what the official SDK majors of 2026-10-21 send by default (Python
``anthropic`` 2.0.0, TypeScript 1.0.0, …; CURRENT.md §1.1, A-MIG, CODERSERA)."""

SAMPLING_REMOVED_VERSIONS = frozenset({"2026-10-21"})
"""API versions that answer 400 to ``temperature``, ``top_p`` or ``top_k`` in a request, even at
their default values ("temperature: Extra inputs are not permitted"; A-MIG, QIITA-SYNTH,
MINUSPOD, CURRENT.md §1.2)."""
_SAMPLING = ("temperature", "top_p", "top_k")

_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_FORCED_CHOICES = frozenset({"any", "tool"})
_ANTHROPIC_CHOICES = frozenset({"auto", "any", "tool", "none"})
_OPENAI_CHOICES = {"auto": "auto", "required": "any", "any": "any", "none": "none"}
_REASONING_JOIN = "\n\n"
_log = logging.getLogger("polythink.transport")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _rejected(message: str) -> RequestRejectedError:
    return RequestRejectedError(message, provider="anthropic", error_type="invalid_request")


_WIRE = "Anthropic's Messages API"
_TEXT_KEYS = frozenset({"type", "text", "cache_control", "citations"})
"""The fields of a ``text`` block (``RequestTextBlock``, Anthropic Messages OpenAPI)."""
_IMAGE_URL_KEYS = frozenset({"type", "image_url", "cache_control"})
"""What of a Chat ``image_url`` part an ``image`` block carries: the URL, and a
``cache_control`` put on the part (``RequestImageBlock``)."""


def _image_block(part: Mapping[str, Any], index: int, left_out: LeftOut) -> dict[str, Any]:
    """An ``image`` block for a Chat ``image_url`` part. ``image_url.detail`` has no field
    on Anthropic (the API sizes the image itself) and is noted, as is any part key but
    ``cache_control``, which the block keeps."""
    image = part.get("image_url")
    url = image.get("url") if isinstance(image, Mapping) else image
    if not isinstance(url, str) or not url:
        raise _rejected(f"an image_url content part needs a url; got {dict(part)!r}")
    unsent = extra_keys(part, _IMAGE_URL_KEYS)
    if isinstance(image, Mapping) and image.get("detail") is not None:
        unsent.insert(0, "image_url.detail")
    if unsent:
        left_out.add_part_keys(unsent, index, f"{_WIRE} has no such field on an image block")
    block: dict[str, Any]
    if url.startswith("data:"):
        header, _, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if encoding != "base64" or not data:
            raise _rejected("an image data URL must be base64: data:<media type>;base64,<data>")
        block = {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    else:
        block = {"type": "image", "source": {"type": "url", "url": url}}
    if "cache_control" in part:
        block["cache_control"] = part["cache_control"]
    return block


def _text_block(part: Mapping[str, Any], index: int, left_out: LeftOut) -> dict[str, Any]:
    """A ``text`` part as a text block: what a text block has a field for (``cache_control``
    too), without the rest (OpenAI's ``prompt_cache_breakpoint``), which is noted."""
    unsent = extra_keys(part, _TEXT_KEYS)
    if not unsent:
        return dict(part)
    left_out.add_part_keys(
        unsent,
        index,
        f"{_WIRE} has no such field on a text block"
        + (
            "; PromptCache(breakpoints='explicit') puts cache_control breakpoints"
            if "prompt_cache_breakpoint" in unsent
            else ""
        ),
    )
    return {key: value for key, value in part.items() if key in _TEXT_KEYS}


def _blank(block: Mapping[str, Any]) -> bool:
    """Whether ``block`` is a text block the API refuses: empty or whitespace only ("messages:
    text content blocks must contain non-whitespace text", home-assistant/core#175637,
    2026-07-04; "text content blocks must be non-empty", anthropics/claude-code#59812,
    2026-05-16)."""
    if block.get("type") != "text":
        return False
    text = block.get("text")
    return not (isinstance(text, str) and text.strip())


def _blocks(
    content: str | list[Any] | None, left_out: LeftOut, *, keep_empty: bool
) -> list[dict[str, Any]]:
    """Content as Anthropic blocks: text parts (:func:`_text_block`), images from
    ``image_url`` (:func:`_image_block`), a Chat ``refusal`` as text (an assistant's words),
    others as given.

    Without ``keep_empty``, text that is empty or whitespace only is left out (the API refuses
    such blocks; see :func:`_blank`).
    """
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if keep_empty or content.strip() else []
    blocks: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, Mapping):
            raise _rejected(f"a content part must be an object or a string; got {part!r}")
        kind = part.get("type")
        if kind == "image_url":
            blocks.append(_image_block(part, index, left_out))
            continue
        part = refusal_text(part) if kind == "refusal" else part
        if not keep_empty and _blank(part):
            continue
        blocks.append(
            _text_block(part, index, left_out) if part.get("type") == "text" else dict(part)
        )
    return blocks


def _tool_input(call: ToolCall) -> Any:
    try:
        value = loads_json(call.arguments or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise _rejected(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object "
            f"({call.arguments[:200]!r}); Anthropic's tool_use.input must be an object"
        )
    return value


def _assistant_content(
    message: Message, left_out: LeftOut, own_format: str = "anthropic"
) -> list[dict[str, Any]]:
    """The blocks of an assistant turn: its own blocks verbatim when it came from this
    platform (``own_format``: Anthropic's API, or a cloud whose signatures are its own;
    thinking and redacted_thinking blocks with their signatures, in order), else text (a
    ``refusal`` after the content: it is what the model said) and ``tool_use`` blocks. Text
    blocks the API refuses (empty or whitespace only, which adaptive thinking can produce,
    even before its thinking block) are left out either way."""
    if message.reasoning_format == own_format and message.reasoning_items:
        return [dict(item) for item in message.reasoning_items if not _blank(item)]
    blocks = _blocks(message.content, left_out, keep_empty=False)
    if message.refusal and message.refusal.strip():
        blocks.append({"type": "text", "text": message.refusal})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return blocks


def _tool_result(message: Message, left_out: LeftOut) -> dict[str, Any]:
    content = message.content
    return {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content
        if isinstance(content, str)
        else _blocks(content, left_out, keep_empty=False),
    }


def _system(
    parts: list[tuple[str | list[Any] | None, int]], left_out: LeftOut
) -> str | list[dict[str, Any]]:
    """The ``system`` field from ``(content, message index)`` pairs: one string of the system
    messages joined by a blank line when they are strings, else their text blocks in order
    (each part its own block)."""
    if all(isinstance(p, str) or p is None for p, _ in parts):
        return "\n\n".join(p for p, _ in parts if isinstance(p, str) and p)
    blocks: list[dict[str, Any]] = []
    for part, position in parts:
        left_out.position = position
        blocks.extend(_blocks(part, left_out, keep_empty=False))
    return blocks


_NATIVE_BLOCKS = (
    "code_execution_tool_result",
    "container_upload",
    "document",
    "image",
    "mcp_tool_result",
    "mcp_tool_use",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
    "text",
    "thinking",
    "tool_result",
    "tool_use",
    "web_search_tool_result",
)
ANTHROPIC_PARTS = part_types(
    system=("text",),
    user=(*_NATIVE_BLOCKS, "image_url"),
    assistant=(*_NATIVE_BLOCKS, "image_url", "refusal"),
    tool=("text", "image", "search_result", "image_url"),
)
"""Content part types of the Messages wire, by role: the ``InputMessage.content`` blocks, the
``tool_result`` content blocks and the text-only ``system`` (Anthropic Messages OpenAPI,
``../shared/wire/specs/anthropic_messages_openapi_docs_copy.md``), plus ``image_url``,
which becomes an ``image`` block, and an assistant's ``refusal``, which becomes text."""


_REASONING_WHY = (
    f"{_WIRE} takes reasoning back only as its own thinking blocks, whose signatures it "
    "checks; the turn goes without it"
)
"""Why a reasoning text another wire or the caller wrote is not sent: thinking blocks go back
unmodified, as the model made them ("you cannot rearrange or modify", WIRE.md §3.6), and
Anthropic answers with no field for unsigned reasoning text."""


class _Scan:
    """What :func:`_messages` learns about the conversation on its one pass: the model the
    body is for and where it takes per-call instructions (in), the turns whose thinking that
    model will not read and whether the conversation keeps ``drop_block`` (out)."""

    __slots__ = ("clear_at", "entry", "foreign", "model", "plan", "provider", "remembered")

    def __init__(self, model: str, plan: InstructionPlan, provider: str) -> None:
        self.model = model
        self.plan = plan
        self.provider = provider
        self.foreign: dict[tuple[str, Reading], list[int]] = {}
        self.remembered: str | None = None
        self.entry: dict[str, Any] | None = None
        """The message this call's instructions went in (``None``: in the system prompt)."""
        self.clear_at = False
        """A message of the body carries ``clear_at`` (its beta must be sent)."""

    def assistant(self, message: Message, position: int) -> None:
        """Note the turn's remembered ``prefix_mismatch`` and whether ``model`` reads its
        thinking blocks (:func:`~polythink.reasoning.continuity.thinking_reading`, kept with
        the message per target model, so a long conversation costs one lookup a turn)."""
        metadata = message.metadata
        if metadata is None:
            return
        if metadata.prefix_mismatch is not None:
            self.remembered = metadata.prefix_mismatch
        if not message.reasoning_items or metadata.model is None:
            return
        found = message.memo(f"anthropic-reads:{self.provider}:{self.model}", self._reading)
        if found is not None:
            self.foreign.setdefault(found, []).append(position)

    def _reading(self, message: Message) -> tuple[str, Reading] | None:
        producer = message.metadata.model if message.metadata is not None else None
        if producer is None or not any(
            isinstance(item, Mapping) and item.get("type") in _THINKING_BLOCKS
            for item in message.reasoning_items
        ):
            return None
        reading = thinking_reading(producer, self.model, provider=self.provider)
        if reading is None or reading.reads is True:
            return None
        return producer, reading

    def notes(self) -> list[str]:
        """One warning per model whose thinking ``model`` drops or may drop, naming turns."""
        out = []
        for (producer, reading), positions in self.foreign.items():
            listed = ", ".join(map(str, positions[:8]))
            if len(positions) > 8:
                listed += f", ... ({len(positions)} in all)"
            verdict = (
                "cannot read them: the API drops them before the model reads them, so that "
                "reasoning is lost for this call"
                if reading.reads is False
                else "may not read them (not documented): the API may drop them"
            )
            out.append(
                f"reasoning lost on anthropic {self.model!r}: the thinking blocks of messages "
                f"{listed} were made by {producer!r}, and {self.model!r} {verdict}; they are "
                f"sent unchanged and stay readable for a model that can ({reading.source})"
            )
            if (producer, self.model) not in _switches_logged:
                _switches_logged.add((producer, self.model))
                _log.warning("%s", out[-1])
        return out


_switches_logged: set[tuple[str, str]] = set()
"""(producer, reader) pairs whose lost reasoning was logged once."""


def _kept(entry: Mapping[str, Any], plan: InstructionPlan) -> dict[str, Any]:
    """An earlier call's instructions message, as this model takes it: as sent, unless the
    model takes no mid-conversation system message (a conversation that moved to another
    model: then its text as a user message) or no ``clear_at``."""
    if entry.get("role") != "system":
        return dict(entry)
    if plan.placement != "system_message":
        return {"role": "user", "content": entry.get("content")}
    if "clear_at" in entry and not plan.clear_at:
        return {key: value for key, value in entry.items() if key != "clear_at"}
    return dict(entry)


_LATER_SYSTEM_WHY = later_system_why(
    "the model takes no mid-conversation system message, or not there (one must follow a "
    "user turn and be last or followed by an assistant turn)"
)


def _later_system(
    message: Message,
    position: int,
    messages: Sequence[Message],
    turns: list[dict[str, Any]],
    plan: InstructionPlan,
    left_out: LeftOut,
) -> dict[str, Any]:
    """A system (or developer) message the caller put after the conversation began, where
    the caller put it: the top-level ``system`` is the start of the prefix every thinking
    block is bound to, so moving a later message into it would invalidate them all
    ("Leave a role:system message where the caller put it", CONTINUITY.md §1.9, preserved
    thinking page read 2026-12-04). A model that takes mid-conversation system messages gets
    one where their rules allow it (right after a user turn, and last or followed by an
    assistant turn: CONTINUITY.md §2.3); otherwise its text is a user turn of its own (the
    API joins consecutive user turns), noted in ``left_out``. Either form depends only on
    the message and its neighbours, so it stays the same on every later call."""
    blocks = _blocks(message.content, left_out, keep_empty=False)
    following = messages[position + 1].role if position + 1 < len(messages) else None
    if (
        plan.placement == "system_message"
        and turns[-1].get("role") == "user"
        and following in (None, "assistant")
    ):
        content = message.content if isinstance(message.content, str) else blocks
        return {"role": "system", "content": content}
    left_out.add(LATER_SYSTEM, _LATER_SYSTEM_WHY)
    return {"role": "user", "content": blocks}


def _messages(
    messages: Sequence[Message],
    profile: ProviderProfile,
    left_out: LeftOut,
    source_index: int | None = None,
    scan: _Scan | None = None,
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """``(system, turns)``; what the wire has no field for (a message's ``name``, part keys)
    and assistant turns left empty are noted in ``left_out``.

    An assistant turn that carries the instructions an earlier call put before it
    (:attr:`Message.instructions`) gets them back in place, so the conversation stays what
    was sent. With ``scan``, the same pass notes which turns' thinking the target model
    will not read and whether the conversation keeps ``drop_block``.

    Raises:
        ContentUnsupportedError: a content part, an assistant's ``audio`` or legacy
            ``function_call`` this wire cannot carry, naming the message.
    """
    system: list[tuple[str | list[Any] | None, int]] = []
    turns: list[dict[str, Any]] = []
    merging_results = False
    plan = scan.plan if scan is not None else InstructionPlan("system_message", clear_at=True)
    for position, message in enumerate(messages):
        role = message.role
        left_out.position = position
        if message.content.__class__ is list:
            check_parts(message, ANTHROPIC_PARTS, profile, source_index, position)
        if message.name is not None and role != "tool":
            name_note(left_out, _WIRE)
        if role in ("system", "developer"):
            if turns:
                turns.append(_later_system(message, position, messages, turns, plan, left_out))
            else:
                system.append((message.content, position))
            merging_results = False
        elif role == "tool":
            block = _tool_result(message, left_out)
            if merging_results:
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
                merging_results = True
        elif role == "user":
            content = message.content
            blocks = _blocks(content, left_out, keep_empty=False)
            if not blocks:
                raise refuse_blank_turn(message, position, profile, source_index, _BLANK_WHY)
            if content.__class__ is list and len(blocks) < len(content):
                left_out.add(BLANK_PARTS, _BLANK_WHY)
            turns.append({"role": "user", "content": blocks})
            merging_results = False
        else:
            if message.audio_id is not None or message.function_call is not None:
                refuse_chat_only(message, position, profile, source_index)
            if reasoning_unsent(message, profile):
                left_out.add(REASONING, _REASONING_WHY)
            if items_unsent(message, profile):
                left_out.add(REASONING_ITEMS, REASONING_ITEMS_WHY)
            if scan is not None:
                scan.assistant(message, position)
            if message.instructions is not None:
                kept = _kept(message.instructions, plan)
                turns.append(kept)
                if scan is not None and "clear_at" in kept:
                    scan.clear_at = True
            content = _assistant_content(message, left_out, profile.reasoning_format or "anthropic")
            # A turn left with no block says nothing; the API refuses it ("all messages must
            # have non-empty content except for the optional final assistant message"), and
            # merges the user turns around it ("consecutive user or assistant turns ... will
            # be combined into a single turn", MessageCreateParams.messages).
            if content:
                turns.append({"role": "assistant", "content": content})
            elif empty_turn(message):
                left_out.add(EMPTY_TURN, EMPTY_WHY)
            else:
                left_out.add(EMPTY_TURN, f"{_WIRE} refuses its blank text blocks")
            merging_results = False
    return (_system(system, left_out) if system else None), turns


_BLANK_WHY = (
    "Anthropic refuses a text block that is empty or whitespace only (messages: text content "
    "blocks must contain non-whitespace text)"
)


def _system_blocks(system: str | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return [dict(block) for block in system]


def _marked(block: Mapping[str, Any], cache_control: Mapping[str, Any]) -> dict[str, Any]:
    return {**block, "cache_control": dict(cache_control)}


def _cached_system(
    system: str | list[dict[str, Any]] | None,
    suffix: str | None,
    cache: PromptCache | None,
) -> str | list[dict[str, Any]] | None:
    """The ``system`` field with the dynamic suffix and the stable prefix's breakpoint.

    With a suffix: the stable blocks, the last of them carrying a ``cache_control``
    breakpoint, then the suffix as its own text block, so the cached prefix ends where the
    per-call part begins. With explicit breakpoints and no suffix: the last system block
    carries one. Otherwise ``system`` is returned as built.
    """
    explicit = cache is not None and cache.breakpoints == "explicit"
    if not suffix and not explicit:
        return system
    control = cache.cache_control() if cache is not None else {"type": "ephemeral"}
    blocks = _system_blocks(system)
    if blocks:
        blocks[-1] = _marked(blocks[-1], control)
    if suffix:
        blocks.append({"type": "text", "text": suffix})
    return blocks or None


def _mark_last_turn(turns: list[dict[str, Any]], control: Mapping[str, Any]) -> None:
    """Put a breakpoint on the last block of the last turn (the end of the prefix so far)."""
    if not turns:
        return
    content = turns[-1]["content"]
    if isinstance(content, list) and content:
        turns[-1] = {**turns[-1], "content": [*content[:-1], _marked(content[-1], control)]}


def _tool_choice(choice: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(choice, str):
        kind = _OPENAI_CHOICES.get(choice)
        if kind is None:
            raise _rejected(
                f"unknown tool_choice {choice!r}; accepted: auto, required, none, "
                '{"type": "function", "function": {"name": ...}} or an Anthropic tool_choice'
            )
        return {"type": kind}
    kind = choice.get("type")
    if kind == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or not name:
            raise _rejected(f"tool_choice {dict(choice)!r} names no function")
        return {"type": "tool", "name": name}
    if kind in _ANTHROPIC_CHOICES:
        return dict(choice)
    raise _rejected(
        f"unknown tool_choice {dict(choice)!r}; accepted types: function (OpenAI shape), "
        "auto, any, tool, none"
    )


def output_plan(
    request: Request, *, model: str, profile: ProviderProfile, source_index: int | None = None
) -> OutputPlan | None:
    """What this call sends for its ``response_format``
    (:func:`polythink.transports.schema.anthropic_output`), or ``None`` without one.

    Raises:
        OutputFormatUnsupportedError: the model cannot produce the format with this request.
    """
    fmt = request.response_format
    if fmt is None:
        return None
    return anthropic_output(
        fmt,
        model=model,
        has_tools=bool(request.tools) or request.tool_choice is not None,
        prefill=request.messages[-1].role == "assistant",
        provider=profile.id,
        source_index=source_index,
    )


CLEAR_AT = "next_user_message"
"""The ``clear_at`` of a turn-scoped system message: cleared once the next user message (a
``tool_result`` turn counts) arrives; once cleared, it costs no input tokens (PT-SEP)."""


def _instructions_entry(text: str, plan: InstructionPlan) -> dict[str, Any]:
    """The message that carries a call's instructions after the last user turn."""
    if plan.placement == "system_message":
        entry: dict[str, Any] = {"role": "system", "content": text}
        if plan.clear_at:
            entry["clear_at"] = CLEAR_AT
        return entry
    return {"role": "user", "content": text}


def _with_instruction(
    system: str | list[dict[str, Any]] | None, instruction: str
) -> str | list[dict[str, Any]]:
    """``system`` with ``instruction`` after it: joined to a string, or as a last text block
    (never a new cache breakpoint)."""
    if system is None or isinstance(system, str):
        return joined_system(system, instruction) or instruction
    return [*system, {"type": "text", "text": instruction}]


def build_body(
    request: Request,
    *,
    model: str,
    profile: ProviderProfile,
    extra_body: Mapping[str, Any] | None = None,
    output: OutputPlan | None = None,
    left_out: LeftOut | None = None,
    source_index: int | None = None,
    scan: _Scan | None = None,
) -> dict[str, Any]:
    """Build the Messages API request body for ``request``.

    Sets ``model``; ``max_tokens`` (required by the API: the caller's value, else the
    profile's default, 4096); ``system`` from system and developer turns (one string when
    they are strings, else text blocks); ``messages`` as content blocks; ``stream``;
    ``temperature``, ``top_p``, ``stop_sequences``, ``tools`` (``name``, ``description``,
    ``input_schema``, and ``strict`` when the tool sets it: anthropic-sdk-python
    ``ToolParam.strict``, "guarantees schema validation on tool names and inputs";
    STRUCTURED.md §3.5) and ``tool_choice`` (OpenAI's ``auto``/``required``/``none``/
    ``{"type": "function", ...}`` mapped to ``auto``/``any``/``none``/``{"type": "tool"}``;
    Anthropic-shaped values pass through) when given. Then deep-merges the reasoning fragment
    of ``request.resolution`` (which may raise ``max_tokens``), the source's ``extra_body``
    and the call's ``extra_body``, in that order (later wins).

    The call's per-call instructions (``request.system_suffix``, then the instruction of the
    ``response_format`` where the format needs one) go where the model takes them
    (:func:`~polythink.transports.instructions.instruction_plan`): a mid-conversation
    ``{"role": "system"}`` message after the last user turn (with ``clear_at:
    "next_user_message"`` where the model takes turn-scoped ones), or a ``{"role": "user"}``
    message there on models without mid-conversation system messages. An assistant turn
    that carries an earlier call's instructions (:attr:`~polythink.Message.instructions`,
    which the transport sets on the turns it returns) gets them back in place, so every
    request is the unchanged prefix of the next and thinking blocks stay bound to it
    (CONTINUITY.md §2.4). With the ``system`` placement, or when the conversation does not
    end with a user turn, they end the system prompt instead: the suffix as one more text
    block after a ``cache_control`` breakpoint on the stable ones. ``request.prompt_cache``
    adds the top-level ``cache_control`` (``breakpoints="auto"``: the API places it on the
    last cacheable block), or breakpoints on the last system block and on the last block
    of the conversation before the instructions (``"explicit"``); see
    :class:`~polythink.types.PromptCache`.

    ``request.response_format`` sets ``output_config.format``, or on models without it the
    forced output tool (``tools`` and ``tool_choice``), before the overrides
    (:func:`output_plan`; ``output`` when the caller computed it).

    An assistant's ``refusal`` is a text block (what the model said); its ``audio`` and
    legacy ``function_call`` are refused, the errors carrying ``source_index``. What the wire
    has no field for (a message's ``name``, ``image_url.detail``, a part's
    ``prompt_cache_breakpoint``) and assistant turns left with no block are noted in
    ``left_out``.

    Raises:
        RequestRejectedError: for a message or ``tool_choice`` Anthropic cannot take (an
            unknown role, a tool message without ``tool_call_id``, tool-call arguments that
            are not a JSON object, an unknown ``tool_choice``); a
            ``ContentUnsupportedError`` for a content part, ``audio`` or ``function_call``
            this wire cannot carry.
        OutputFormatUnsupportedError: see :func:`output_plan`.
    """
    if output is None and request.response_format is not None:
        output = output_plan(request, model=model, profile=profile, source_index=source_index)
    scan = scan if scan is not None else _Scan(model, instruction_plan(profile, model), profile.id)
    system, turns = _messages(
        request.messages,
        profile,
        left_out if left_out is not None else LeftOut(profile.id),
        source_index,
        scan,
    )
    cache = request.prompt_cache
    given = output.instruction if output is not None else None
    text = per_call_text(request.system_suffix, given)
    placed: dict[str, Any] | None = None
    if text and scan.plan.placement != "system" and turns and turns[-1]["role"] == "user":
        placed = _instructions_entry(text, scan.plan)
    if placed is None:
        # The system prompt: the source's choice, or a conversation that does not end with
        # a user turn (nothing may follow the final assistant turn it continues).
        if request.system_suffix or cache is not None:
            system = _cached_system(system, request.system_suffix, cache)
        if given:
            system = _with_instruction(system, given)
    elif cache is not None and cache.breakpoints == "explicit":
        system = _cached_system(system, None, cache)
    if cache is not None and cache.breakpoints == "explicit":
        _mark_last_turn(turns, cache.cache_control())
    if placed is not None:
        turns.append(placed)
        scan.entry = placed
        scan.clear_at = scan.clear_at or "clear_at" in placed
    max_tokens = request.max_tokens
    if max_tokens is None:
        max_tokens = profile.default_max_tokens or 4096
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system is not None:
        body["system"] = system
    body["messages"] = turns
    body["stream"] = request.stream
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.tools:
        tools = []
        for tool in request.tools:
            entry: dict[str, Any] = {
                "name": tool.name,
                "description": tool.description,
                "input_schema": dict(tool.parameters),
            }
            if tool.strict is not None:
                entry["strict"] = tool.strict
            tools.append(entry)
        body["tools"] = tools
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if cache is not None and cache.breakpoints == "auto":
        body["cache_control"] = cache.cache_control()
    if output is not None:
        merge_output(body, output.fields, (extra_body, request.extra_body))
    return apply_overrides(body, request, extra_body)


def _sets_display(extra: Mapping[str, Any] | None) -> bool:
    thinking = extra.get("thinking") if extra else None
    return isinstance(thinking, Mapping) and "display" in thinking


def _continues_unsigned_tool_turn(body: Mapping[str, Any]) -> bool:
    """Whether manual thinking is on and the last assistant turn, a tool-use turn whose
    results follow, does not start with a thinking or redacted_thinking block."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return False
    messages = body.get("messages") or []
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list) or not content:
            return False
        uses_tools = any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)
        first = content[0]
        signed = isinstance(first, Mapping) and first.get("type") in _THINKING_BLOCKS
        return uses_tools and not signed and position < len(messages) - 1
    return False


def thinking_conflicts(
    body: Mapping[str, Any], *, thinking_by_default: bool = False
) -> list[tuple[str, str]]:
    """Return ``(parameter, reason)`` for each body field the API rejects with thinking on.

    Thinking is on when ``thinking.type`` is ``enabled`` or ``adaptive``, or when the body
    has no ``thinking`` and the model thinks by default (``thinking_by_default``). Then
    ``temperature`` must be absent or 1, ``top_k`` absent, ``top_p`` absent or within
    [0.95, 1] ("Thinking isn't compatible with temperature or top_k modifications as well as
    forced tool use … you can set top_p to values between 1 and 0.95", ANT-DOC-ext, WIRE
    §3.2). A forced ``tool_choice`` (``any``/``tool``) conflicts only with manual thinking
    (``enabled``): adaptive thinking with ``tool_choice: any`` was answered 200, the model
    simply not thinking (recorded: pai_anthropic_count_tokens_adaptive_thinking,
    ``thinking_tokens: 0``).
    """
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if not (kind in ("enabled", "adaptive") or (thinking is None and thinking_by_default)):
        return []
    mode = f"thinking.type={kind}" if kind else "thinking on by default"
    conflicts: list[tuple[str, str]] = []
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        conflicts.append(
            ("temperature", f"temperature={temperature!r} (only 1 or unset with {mode})")
        )
    if "top_k" in body:
        conflicts.append(("top_k", f"top_k={body['top_k']!r} (not accepted with {mode})"))
    top_p = body.get("top_p")
    if top_p is not None and not 0.95 <= top_p <= 1:
        conflicts.append(("top_p", f"top_p={top_p!r} (only 0.95 to 1 or unset with {mode})"))
    choice = body.get("tool_choice")
    if kind == "enabled" and isinstance(choice, Mapping) and choice.get("type") in _FORCED_CHOICES:
        conflicts.append(
            (
                "tool_choice",
                f"tool_choice={choice.get('type')!r} forces tool use (only auto or none with "
                f"{mode})",
            )
        )
    return conflicts


def parse_usage(usage: Any) -> Usage | None:
    """Normalise an Anthropic ``usage`` object; ``None`` when absent.

    Anthropic's ``input_tokens`` counts only the tokens after the last cache breakpoint, so
    ``Usage.input_tokens`` = ``input_tokens + cache_read_input_tokens +
    cache_creation_input_tokens`` (ANT-DOC-caching); the two cache counts are exposed as
    ``cache_read_tokens`` and ``cache_write_tokens``. ``output_tokens`` already includes
    thinking; ``reasoning_tokens`` comes from ``output_tokens_details.thinking_tokens``
    (ANT-SDK 2b826760, 2026-05-28) and is ``None`` when the API did not send it.
    ``cache_write_1h_tokens`` is ``cache_creation.ephemeral_1h_input_tokens``, the writes to a
    1-hour cache (``cache_control.ttl: "1h"``), which cost 2x the input price where 5-minute
    writes cost 1.25x (ANT-DOC-caching; WIRE.md §3.5; the split is in the SDK's ``Usage``
    and in a recorded answer, WIRE.md §3: ``ephemeral_5m_input_tokens`` 148 +
    ``ephemeral_1h_input_tokens`` 100 = ``cache_creation_input_tokens`` 248). A field the API
    did not send stays ``None``.
    """
    if not isinstance(usage, Mapping):
        return None
    uncached = token_count(usage.get("input_tokens"))
    cache_read = token_count(usage.get("cache_read_input_tokens"))
    cache_write = token_count(usage.get("cache_creation_input_tokens"))
    details = usage.get("output_tokens_details")
    reasoning = (
        token_count(details.get("thinking_tokens")) if isinstance(details, Mapping) else None
    )
    creation = usage.get("cache_creation")
    hour = (
        token_count(creation.get("ephemeral_1h_input_tokens"))
        if isinstance(creation, Mapping)
        else None
    )
    total_input = None
    if uncached is not None:
        total_input = uncached + (cache_read or 0) + (cache_write or 0)
    return Usage(
        input_tokens=total_input,
        output_tokens=token_count(usage.get("output_tokens")),
        reasoning_tokens=reasoning,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        cache_write_1h_tokens=hour,
    )


def finish_reason(raw: Any, *, has_tool_calls: bool) -> str:
    """Map ``stop_reason`` to polythink's finish reason (table:
    :data:`polythink.transports.finish.ANTHROPIC`).

    ``end_turn``, ``stop_sequence`` and ``pause_turn`` -> ``stop``; ``max_tokens`` and
    ``model_context_window_exceeded`` -> ``length``; ``tool_use`` -> ``tool_calls``;
    ``refusal`` -> ``content_filter``; an unknown value ``error`` (never cached), logged
    once.
    """
    return map_finish(raw, ANTHROPIC, provider="anthropic", has_tool_calls=has_tool_calls).reason


def _response(
    *,
    blocks: list[dict[str, Any]],
    text: str,
    reasoning: str | None,
    calls: list[ToolCall],
    raw_finish: Any,
    usage: Usage | None,
    model: str,
    response_id: str | None,
    profile: ProviderProfile,
    source_index: int,
    finish: str | None = None,
    refusal: str | None = None,
    answered_by_tool: bool = False,
    transformations: Any = None,
    raw_usage: Any = None,
) -> Response:
    mapped = map_finish(raw_finish, ANTHROPIC, provider=profile.id, has_tool_calls=bool(calls))
    reason = mapped.reason
    if answered_by_tool and reason == "tool_calls" and not calls:
        # The forced output tool was the answer: the turn is complete, not a tool turn.
        reason = "stop"
    finish = finish or reason
    items: tuple[Mapping[str, Any], ...] = ()
    if any(block.get("type") in _THINKING_BLOCKS for block in blocks):
        items = tuple(blocks)
    # Redacted thinking, or a signed thinking block whose text is omitted, is direct evidence
    # that the model reasoned even though no reasoning text or token count is visible.
    opaque = any(
        block.get("type") == "redacted_thinking"
        or (block.get("type") == "thinking" and block.get("signature"))
        for block in blocks
    )
    entries = input_transformations(transformations)
    warnings = [mapped.note] if mapped.note else []
    warnings += [transformation_note(entry) for entry in entries]
    response = assistant_response(
        text=text,
        reasoning=reasoning,
        calls=calls,
        items=items,
        finish=finish,
        usage=usage,
        model=model,
        response_id=response_id,
        profile=profile,
        source_index=source_index,
        thinking=ThinkingObservation.OBSERVED if opaque else ThinkingObservation.UNKNOWN,
        native_finish_reason=mapped.native,
        warnings=warnings,
        refusal=refusal,
        service_tier=served_tier(
            profile.service_tiers,
            raw_usage.get("service_tier") if isinstance(raw_usage, Mapping) else None,
        ),
    )
    return response.with_(input_transformations=entries) if entries else response


_REASONS = {
    "model_binding_mismatch": "it was made by a model this one cannot read",
    "prefix_binding_mismatch": "what came before it changed since it was made",
    "organization_binding_mismatch": "it was made under another organization",
    "end_user_binding_mismatch": "it was made for another end user",
}
"""What each ``reason`` of an ``input_transformations`` entry means (SDK-PY docstrings,
CONTINUITY.md §1.6)."""


def input_transformations(value: Any) -> list[Mapping[str, Any]]:
    """The entries of an answer's ``input_transformations`` (objects only, each kept as
    sent: types and reasons polythink does not know included, as Anthropic asks)."""
    if not isinstance(value, list):
        return []
    return [dict(entry) for entry in value if isinstance(entry, Mapping)]


def transformation_note(entry: Mapping[str, Any]) -> str:
    """The warning for one ``input_transformations`` entry: what happened to which block
    (its ``path``) and why (its ``reason``)."""
    kind = entry.get("type")
    path = entry.get("path") or "a block"
    reason = entry.get("reason")
    why = _REASONS.get(str(reason), "")
    because = f"{reason}: {why}" if why else str(reason)
    if kind == "thinking_dropped":
        return (
            f"reasoning dropped by anthropic: the block at {path} was removed before the model "
            f"read it ({because}); it is not billed, and that reasoning is lost for this call"
        )
    if kind == "thinking_mismatch_allowed":
        return (
            f"reasoning unchecked by anthropic: the thinking block at {path} failed the "
            f"prefix check ({because}) but the check is not enforced for this account, so "
            "it reached the model and is billed; send the conversation unchanged to keep "
            "its reasoning valid"
        )
    return f"anthropic input transformation {kind!r} at {path} ({because})"


def _is_output(block: Mapping[str, Any], tool: str) -> bool:
    return block.get("type") == "tool_use" and block.get("name") == tool


def _refusal(data: Mapping[str, Any]) -> str | None:
    """The refusal's explanation (``stop_details``, ANT-SDK ``refusal_stop_details``), or
    ``""`` for a refusal without one; ``None`` when the model did not refuse."""
    if data.get("stop_reason") != "refusal":
        return None
    details = data.get("stop_details")
    explanation = details.get("explanation") if isinstance(details, Mapping) else None
    return explanation if isinstance(explanation, str) else ""


def parse_message(
    data: Any,
    *,
    profile: ProviderProfile,
    source_index: int,
    model: str,
    output_tool: str | None = None,
) -> Response:
    """Parse a non-streaming Messages API answer into a :class:`Response`.

    ``text`` joins the text blocks; ``reasoning`` joins the non-empty thinking texts with a
    blank line (``None`` when there are none: redacted or omitted thinking carries no text);
    each ``tool_use`` block becomes a :class:`ToolCall` whose ``arguments`` is the compact
    JSON of its ``input``. When the answer has thinking or redacted_thinking blocks, the
    assistant ``message`` carries every content block verbatim in ``reasoning_items`` (with
    ``reasoning_format="anthropic"``) so the next turn sends them back unchanged.

    ``output_tool`` names the forced tool of the structured-output fallback: its input is
    the answer, so it becomes the text (compact JSON) and its block a text block, not a
    tool call. A refusal's ``stop_details.explanation`` is the response's ``refusal``.

    Raises:
        TransientError: when the body has no ``content`` list.
    """
    content = data.get("content") if isinstance(data, Mapping) else None
    if not isinstance(content, list):
        raise TransientError(
            f"{profile.id} answered without a content list",
            provider=profile.id,
            source_index=source_index,
        )
    texts: list[str] = []
    answers: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    blocks: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if output_tool is not None and _is_output(block, output_tool):
            block = {"type": "text", "text": _compact(block.get("input", {}))}
            answers.append(block["text"])
        blocks.append(dict(block))
        kind = block.get("type")
        if kind == "text":
            texts.append(text_of(block.get("text"), "a text block's text"))
        elif kind == "thinking":
            thought = block.get("thinking")
            if isinstance(thought, str) and thought:
                thoughts.append(thought)
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    id=str(block.get("id") or ""),
                    name=str(block.get("name") or ""),
                    arguments=_compact(block.get("input", {})),
                )
            )
    return _response(
        blocks=blocks,
        # Through the fallback the answer is the output tool's input alone: prose the model
        # wrote beside it (possible only when the tool was not forced) is not the answer.
        text="".join(answers) if answers else "".join(texts),
        reasoning=_REASONING_JOIN.join(thoughts) or None,
        calls=calls,
        raw_finish=data.get("stop_reason"),
        usage=parse_usage(data.get("usage")),
        model=data.get("model") or model,
        response_id=data.get("id"),
        profile=profile,
        source_index=source_index,
        refusal=_refusal(data),
        answered_by_tool=bool(answers),
        transformations=data.get("input_transformations"),
        raw_usage=data.get("usage"),
    )


@dataclasses.dataclass(slots=True)
class _Block:
    """One content block being streamed: its start object and the pieces that follow."""

    start: dict[str, Any]
    pieces: list[str] = dataclasses.field(default_factory=list)
    signature: str | None = None
    closed: bool = False
    position: int = 0
    output: bool = False
    """The structured-output fallback's tool call, streamed as the answer's text."""

    @property
    def kind(self) -> Any:
        return self.start.get("type")

    def final(self) -> dict[str, Any]:
        """The block as a non-streaming answer would carry it."""
        kind = self.kind
        joined = "".join(self.pieces)
        if kind == "text":
            return {**self.start, "text": joined}
        if kind == "thinking":
            signature = (
                self.signature if self.signature is not None else self.start.get("signature")
            )
            return {**self.start, "thinking": joined, "signature": signature or ""}
        if self.pieces:
            try:
                parsed = loads_json(joined)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return {**self.start, "input": parsed}
        return dict(self.start)


class AnthropicStreamAssembler:
    """Turn Messages API stream events into :class:`StreamEvent` s and, at the end, a
    :class:`Response`.

    ``message_start`` gives the id, model and input usage; ``content_block_start`` /
    ``_delta`` / ``_stop`` build text, thinking (``thinking_delta``, then one
    ``signature_delta`` just before the stop), redacted_thinking (no deltas) and ``tool_use``
    blocks (``input_json_delta`` fragments concatenated verbatim into ``arguments``; the call
    is yielded when its block stops); ``message_delta`` carries the stop reason and usage,
    which is cumulative: each field takes its latest value, never a sum (ANT-SDK
    ``message_delta_usage``); ``message_stop`` ends the message; ``ping`` and unknown events
    are ignored. Only blocks that reached ``content_block_stop`` go into ``reasoning_items``,
    so a cut stream never hands back a thinking block without its signature.

    ``output_tool`` names the structured-output fallback's forced tool: its
    ``input_json_delta`` pieces are the answer, yielded as ``text`` events, and its block
    ends as a text block rather than a tool call.
    """

    def __init__(
        self,
        profile: ProviderProfile,
        source_index: int,
        model: str,
        *,
        output_tool: str | None = None,
    ) -> None:
        self.profile = profile
        self.source_index = source_index
        self.model = model
        self.output_tool = output_tool
        self.response_id: str | None = None
        self.blocks: dict[int, _Block] = {}
        self.raw_usage: dict[str, Any] = {}
        self.raw_finish: Any = None
        self.stop_details: Any = None
        self.stopped = False
        self.content_seen = False
        self._thinking_started = False
        self._tool_calls = 0
        self.transformations: Any = None

    @property
    def finished(self) -> bool:
        """Whether the message ended (``message_stop``, or a stop reason was given)."""
        return self.stopped or self.raw_finish is not None

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one parsed event; return the stream events it produces."""
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(event)
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping):
                self.response_id = message.get("id") or self.response_id
                self.model = message.get("model") or self.model
                self._merge_usage(message.get("usage"))
                if "input_transformations" in message:
                    self.transformations = message["input_transformations"]
            return []
        if kind == "message_delta":
            if "input_transformations" in event:
                # Only after a server-side fallback mid-stream: the serving model's entries
                # replace those of message_start (SDK-JAVA BetaRawMessageDeltaEvent, PT-SEP).
                self.transformations = event["input_transformations"]
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason"):
                self.raw_finish = delta["stop_reason"]
                self.stop_details = delta.get("stop_details")
            if isinstance(event.get("usage"), Mapping):
                self._merge_usage(event["usage"])
                return [StreamEvent("usage", usage=parse_usage(self.raw_usage))]
            return []
        if kind == "message_stop":
            self.stopped = True
        return []

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, Mapping):
            for key, value in usage.items():
                if value is not None:
                    self.raw_usage[key] = value

    def _start(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        block = event.get("content_block")
        index = event.get("index", len(self.blocks))
        if not isinstance(block, Mapping):
            return []
        if self.output_tool is not None and _is_output(block, self.output_tool):
            state = self.blocks[index] = _Block({"type": "text", "text": ""}, output=True)
            given = block.get("input")
            return self._piece(state, "text", _compact(given)) if given else []
        state = self.blocks[index] = _Block(dict(block))
        if state.kind == "tool_use":
            state.position = self._tool_calls
            self._tool_calls += 1
            self.content_seen = True
            return [self._tool_delta(state, "")]
        if state.kind == "text" and block.get("text"):
            return self._piece(state, "text", str(block["text"]))
        if state.kind == "thinking" and block.get("thinking"):
            return self._piece(state, "reasoning", str(block["thinking"]))
        return []

    def _delta(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        state = self.blocks.get(event.get("index", -1))
        delta = event.get("delta")
        if state is None or not isinstance(delta, Mapping):
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            return self._piece(state, "text", str(delta.get("text") or ""))
        if kind == "thinking_delta":
            return self._piece(state, "reasoning", str(delta.get("thinking") or ""))
        if kind == "signature_delta":
            state.signature = str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            partial = delta.get("partial_json")
            if partial and state.output:
                return self._piece(state, "text", str(partial))
            if partial and state.kind == "tool_use":
                state.pieces.append(str(partial))
                return [self._tool_delta(state, str(partial))]
        elif kind == "citations_delta":
            state.start.setdefault("citations", []).append(delta.get("citation"))
        return []

    def _piece(
        self, state: _Block, kind: Literal["text", "reasoning"], piece: str
    ) -> list[StreamEvent]:
        if not piece:
            return []
        out = piece
        if kind == "reasoning":
            if not state.pieces and self._thinking_started:
                out = _REASONING_JOIN + piece
            self._thinking_started = True
        state.pieces.append(piece)
        self.content_seen = True
        return [StreamEvent(kind, text=out)]

    def _stop(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        state = self.blocks.get(event.get("index", -1))
        if state is None or state.closed:
            return []
        state.closed = True
        if state.kind == "tool_use":
            self.content_seen = True
            call = self._call(state)
            out = []
            if not state.pieces and state.start.get("input"):
                # Compatible servers may put the whole input on the block start and send no
                # input_json_delta: the delta still carries the arguments.
                out.append(self._tool_delta(state, call.arguments))
            out.append(StreamEvent("tool_call", tool_call=call))
            return out
        return []

    @staticmethod
    def _tool_delta(state: _Block, piece: str) -> StreamEvent:
        start = state.start
        return StreamEvent(
            "tool_call_delta",
            tool_call_delta=ToolCallDelta(
                index=state.position,
                id=str(start.get("id") or "") or None,
                name=str(start.get("name") or "") or None,
                arguments=piece,
            ),
        )

    @staticmethod
    def _call(state: _Block) -> ToolCall:
        arguments = "".join(state.pieces) or _compact(state.start.get("input", {}))
        return ToolCall(
            id=str(state.start.get("id") or ""),
            name=str(state.start.get("name") or ""),
            arguments=arguments,
        )

    def response(self, *, finish: str | None = None) -> Response:
        """Assemble the response from everything consumed so far."""
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        thoughts = ["".join(b.pieces) for b in ordered if b.kind == "thinking" and b.pieces]
        return _response(
            blocks=[b.final() for b in ordered if b.closed],
            text="".join(
                "".join(b.pieces)
                for b in ordered
                if b.kind == "text" and (b.output or not any(o.output for o in ordered))
            ),
            reasoning=_REASONING_JOIN.join(thoughts) or None,
            calls=[self._call(b) for b in ordered if b.kind == "tool_use" and b.closed],
            raw_finish=self.raw_finish,
            usage=parse_usage(self.raw_usage) if self.raw_usage else None,
            model=self.model,
            response_id=self.response_id,
            profile=self.profile,
            source_index=self.source_index,
            finish=finish,
            refusal=_refusal({"stop_reason": self.raw_finish, "stop_details": self.stop_details}),
            answered_by_tool=any(b.output for b in ordered),
            transformations=self.transformations,
            raw_usage=self.raw_usage,
        )


BETA_BINDING = "thinking-binding-controls-2026-08-01"
"""The ``anthropic-beta`` value that adds ``thinking.block_binding`` and
``input_transformations`` (CONTINUITY.md §1.5, PT-SEP, A-BETAS)."""

BETA_CLEAR_AT = "mid-conversation-system-clear-at-2026-08-21"
"""The ``anthropic-beta`` value a turn-scoped system message (``clear_at``) needs
(CONTINUITY.md §2.1, PT-SEP)."""


def merge_betas(*given: str | Iterable[str] | None) -> str | None:
    """The ``anthropic-beta`` header value that carries every beta of ``given``, each once:
    the first given as written, then the others' it lacks, in order; ``None`` when there are
    none.

    Each of ``given`` is a header value (comma-separated, as the API and the official SDKs
    join several) or a list of values: the source's ``headers``, the caller's own (the
    gateway's, the call's ``extra_headers``), then polythink's. Values polythink does not know
    pass through unchanged, as Anthropic asks of libraries and gateways (CONTINUITY.md §1.9).
    The one rule for list headers (:func:`~polythink.transports.base.joined_list`), which the
    gateway's pass-through uses too.
    """
    return joined_list(*given)


def _set_binding(body: dict[str, Any], behavior: str, *, adaptive: bool) -> None:
    """``thinking.block_binding.prefix_mismatch_behavior`` set to ``behavior`` in ``body``,
    unless the body's ``thinking`` already sets it (an ``extra_body`` wins) or thinking is
    off (the field is for thinking requests). A body without ``thinking`` gets
    ``{"type": "adaptive"}`` on a model that thinks adaptively: such a model thinks by
    default, so the field changes nothing else (FIX)."""
    thinking = body.get("thinking")
    if thinking is None:
        if not adaptive:
            return
        thinking = body["thinking"] = {"type": "adaptive"}
    if not isinstance(thinking, dict) or thinking.get("type") not in ("adaptive", "enabled"):
        return
    binding = thinking.get("block_binding")
    binding = dict(binding) if isinstance(binding, Mapping) else {}
    if "prefix_mismatch_behavior" in binding:
        return
    binding["prefix_mismatch_behavior"] = behavior
    thinking["block_binding"] = binding


@dataclasses.dataclass(slots=True)
class _Call:
    """One call as the transport sends it, and what its response carries."""

    body: dict[str, Any]
    """The body as sent (the platform's: :meth:`AnthropicTransport.platform_body`)."""
    built: dict[str, Any]
    """The Messages body before the platform's changes (sent again with ``drop_block``)."""
    notes: list[str]
    switched_off: bool
    tool: str | None
    request: Request
    """The request with this call's ``anthropic-beta`` in its ``extra_headers``."""
    entry: dict[str, Any] | None
    """The message this call's instructions went in, for the response's message."""
    may_drop: bool
    """A "bound to a different conversation" 400 may be sent again with ``drop_block``."""
    remembered: str | None
    """The conversation's ``prefix_mismatch``, for the response's message metadata."""


class AnthropicTransport(HTTPTransport):
    """Messages API over HTTP for one source (``POST {base_url}/messages``).

    Sends ``x-api-key`` (from the profile; still valid on 2026-10-21, whose migration guide
    authenticates with it, A-MIG) and ``anthropic-version``: the source's ``api_version``, else
    :data:`ANTHROPIC_VERSION`. Before any HTTP call, in this order, a body the API would refuse
    (the one it builds, or a caller's own: :class:`~polythink.types.NativeBody`, judged on
    the ``anthropic-version`` the caller sent)
    raises :class:`~polythink.errors.ThinkingUnsupportedError` naming the parameter, or, with
    ``drop_params=True`` on the source, loses those parameters (the first drop of each is
    logged; every response it affects carries a note in ``warnings``):

    - on 2026-10-21, any ``temperature``, ``top_p`` or ``top_k``
      (:data:`SAMPLING_REMOVED_VERSIONS`): a model that takes non-default values needs the
      source pinned to ``2023-06-01``;
    - the model's sampling rule (``Capability.sampling``: none on Claude 4.7 and later);
    - a forced ``tool_choice`` (``any``/``tool``) on a model that rejects it
      (``Capability.forced_tool_choice``: Fable/Mythos 5.1+, Opus 5.5, Sonnet 5.5), dropped
      to the default ``auto``;
    - a parameter that conflicts with thinking (see :func:`thinking_conflicts`).

    ``Source.thinking_display`` sets ``thinking.display`` whenever thinking is on (an
    ``extra_body`` that sets it still wins).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = f"{self.source.endpoint}/messages"
        self.stream_url = self.url
        self._extra_body = self.source.extra_body
        capability = self.capability
        self._thinking_by_default = capability is not None and capability.default_reasons
        self._forced_choice = capability is None or capability.forced_tool_choice
        self._display = self.source.thinking_display
        self._display_set = _sets_display(self._extra_body)
        self._plan = instruction_plan(self.profile, self.source.model)
        self._binds = capability is not None and capability.thinking_binding is not None
        self._adaptive = capability is None or capability.thinking == "adaptive"
        self._caller_betas = next(
            (value for name, value in self.headers.items() if name == "anthropic-beta"), None
        )

    def _version(self) -> str:
        return self.source.api_version or ANTHROPIC_VERSION

    def extra_headers(self) -> dict[str, str]:
        """``anthropic-version``, required on every Messages API call."""
        return {"anthropic-version": self._version()}

    def body(self, request: Request) -> dict[str, Any]:
        """Return the exact body this transport sends for ``request``.

        Raises:
            RequestRejectedError: for input Anthropic cannot take (see :func:`build_body`),
                or a parameter that conflicts with thinking while ``drop_params`` is off.
        """
        return self._prepare(request).body

    def headers_for(self, request: Request) -> dict[str, str]:
        """Return the exact headers this transport sends for ``request`` (``anthropic-beta``
        merged as :func:`merge_betas` says)."""
        call = self._prepare(request)
        return self._headers(self.headers, call.request)

    def _prepare(self, request: Request) -> _Call:
        """Build the body, apply the thinking and binding rules; return it with the notes
        for the response, whether thinking was switched off for this call, the output tool's
        name when the answer comes through the forced-tool fallback, the request carrying
        this call's ``anthropic-beta``, and what the response must remember."""
        written = written_body(self, request)
        if written is not None:
            # The caller's own body keeps the model's rules too: the API answers 400 to
            # temperature 0 with thinking on whoever wrote it (case C02).
            sent, noted = written
            noted += self._model_rules(sent, request, self._sent_version(request))
            return _Call(
                body=sent,
                built=sent,
                notes=noted,
                switched_off=False,
                tool=None,
                request=self._with_betas(request, []),
                entry=None,
                may_drop=False,
                remembered=None,
            )
        try:
            output = output_plan(
                request, model=self.source.model, profile=self.profile, source_index=self.index
            )
            left_out = LeftOut(self.profile.id)
            scan = _Scan(self.source.model, self._plan, self.profile.id)
            body = build_body(
                request,
                model=self.source.model,
                profile=self.profile,
                extra_body=self._extra_body,
                output=output,
                left_out=left_out,
                source_index=self.index,
                scan=scan,
            )
        except RequestRejectedError as exc:
            exc.source_index = self.index
            raise
        notes: list[str] = list(output.notes) if output is not None else []
        notes += left_out.notes()
        notes += scan.notes()
        switched_off = _continues_unsigned_tool_turn(body)
        if switched_off:
            # The API answers 400 "a final assistant message must start with a thinking
            # block … To avoid this requirement, disable thinking": the tool-use turn being
            # continued was made without one (by another provider before a failover, or
            # without thinking), and no signature can be made up for it.
            del body["thinking"]
            config = body.get("output_config")
            if isinstance(config, dict):
                config.pop("effort", None)
                if not config:
                    del body["output_config"]
            notes.append(
                f"thinking switched off for this call to anthropic model {self.source.model!r}:"
                " the tool-use turn it continues carries no signed thinking block"
            )
        tool = output.tool if output is not None else None
        if tool is not None:
            notes += self._unforce_output_tool(body, tool)
        notes += self._model_rules(body, request, self._version())
        thinking = body.get("thinking")
        if (
            self._display is not None
            and isinstance(thinking, dict)
            and thinking.get("type") in ("adaptive", "enabled")
            and not self._display_set
            and not _sets_display(request.extra_body)
        ):
            thinking["display"] = self._display
        asked = request.prefix_mismatch or self.source.prefix_mismatch
        remembered = scan.remembered if asked != "error" else None
        behavior = remembered or (asked if asked == "error" else None)
        if behavior is not None:
            _set_binding(body, behavior, adaptive=self._adaptive)
        outgoing = self._with_betas(request, self._betas(body, scan))
        return _Call(
            body=self.platform_body(body, outgoing),
            built=body,
            notes=notes,
            switched_off=switched_off,
            tool=tool,
            request=outgoing,
            entry=scan.entry,
            may_drop=asked == "drop_block" and remembered is None,
            remembered=remembered,
        )

    def _sent_version(self, request: Request) -> str:
        """The ``anthropic-version`` a call goes with: the caller's own, with a body of its
        own (:meth:`~polythink.transports.base.HTTPTransport.native_headers`), else the
        source's."""
        native = request.native
        given = native.headers.get("anthropic-version") if native is not None else None
        return given or self._version()

    def _model_rules(self, body: dict[str, Any], request: Request, version: str) -> list[str]:
        """Apply, to a built body or the caller's own, what the API refuses on this model
        (see the class docstring): sampling parameters on a ``version`` that removed them,
        the model's sampling rule, a forced ``tool_choice`` the model rejects, and what
        conflicts with thinking; each refused, or dropped under ``drop_params``. Returns
        the notes for the response's warnings.

        Raises:
            ThinkingUnsupportedError: a parameter the API refuses while ``drop_params`` is
                off (``RequestRejectedError`` for both ``temperature`` and ``top_p`` on a
                model that takes one of them).
        """
        notes: list[str] = []
        if version in SAMPLING_REMOVED_VERSIONS:
            sent = [(name, f"{name}={body[name]!r}") for name in _SAMPLING if name in body]
            notes += self.refuse_or_drop(
                body,
                sent,
                f"on anthropic-version {version}, which removed sampling parameters "
                "(set api_version='2023-06-01' on the source for a model that takes them)",
            )
        notes += self.sampling_notes(body, request)
        choice = body.get("tool_choice")
        if (
            not self._forced_choice
            and isinstance(choice, Mapping)
            and choice.get("type") in _FORCED_CHOICES
        ):
            forced = [
                (
                    "tool_choice",
                    f"tool_choice={choice.get('type')!r} (forced tool use; the model takes auto "
                    "or none)",
                )
            ]
            notes += self.refuse_or_drop(body, forced, "(A-FABLE51, A-OPUS55, A-SONNET55)")
        conflicts = thinking_conflicts(body, thinking_by_default=self._thinking_by_default)
        notes += self.refuse_or_drop(
            body, conflicts, "while thinking is on", "thinking_parameter_conflict"
        )
        return notes

    def _betas(self, body: Mapping[str, Any], scan: _Scan) -> list[str]:
        """polythink's ``anthropic-beta`` values for ``body``: the binding controls on a model
        that binds thinking (its ``input_transformations`` say what was dropped) or when the
        body sets ``thinking.block_binding``; ``clear_at`` when a message carries one."""
        ours = []
        thinking = body.get("thinking")
        if self._binds or (isinstance(thinking, Mapping) and "block_binding" in thinking):
            ours.append(BETA_BINDING)
        if scan.clear_at:
            ours.append(BETA_CLEAR_AT)
        return ours

    def _with_betas(self, request: Request, ours: list[str]) -> Request:
        """``request`` whose ``extra_headers`` carry the merged ``anthropic-beta`` (the
        source's values, the call's, then polythink's, each once)."""
        extra = request.extra_headers
        given = None
        if extra:
            given = next((v for k, v in extra.items() if k.lower() == "anthropic-beta"), None)
        if not ours and given is None:
            return request
        merged = merge_betas(self._caller_betas, given, ours)
        if merged is None:
            return request
        headers = {k: v for k, v in (extra or {}).items() if k.lower() != "anthropic-beta"}
        headers["anthropic-beta"] = merged
        return request.with_(extra_headers=headers)

    def _dropping(self, call: _Call) -> _Call:
        """``call`` sent again with ``drop_block``: Anthropic's documented recovery from a
        thinking block bound to a different conversation (CONTINUITY.md §1.4, FIX)."""
        body = dict(call.built)
        thinking = body.get("thinking")
        body["thinking"] = dict(thinking) if isinstance(thinking, Mapping) else thinking
        _set_binding(body, "drop_block", adaptive=self._adaptive)
        request = self._with_betas(call.request, [BETA_BINDING])
        return dataclasses.replace(
            call,
            body=self.platform_body(body, request),
            built=body,
            request=request,
            remembered="drop_block",
            may_drop=False,
        )

    def platform_body(self, body: dict[str, Any], request: Request) -> dict[str, Any]:
        """The Messages body as this platform takes it: unchanged on Anthropic's API; the
        clouds that serve Claude move the model to the URL and the version into the body
        (:mod:`polythink.transports.bedrock`, :mod:`polythink.transports.vertex`)."""
        return body

    async def events(
        self, response: httpx.Response, relay: NativeRelay | None = None
    ) -> AsyncGenerator[Mapping[str, Any], None]:
        """The Messages stream events of a streamed answer, parsed (SSE here; a cloud may
        frame them otherwise), up to ``[DONE]`` where a server sends one; each handed to
        ``relay`` first (:meth:`~polythink.transports.base.HTTPTransport.json_events`)."""
        async with aclosing(self.json_events(response, relay)) as events:
            async for _, event in events:
                if event is DONE:
                    return
                yield event

    def _unforce_output_tool(self, body: dict[str, Any], tool: str) -> list[str]:
        """Manual thinking rejects the fallback's forced tool (400 "Thinking may not be
        enabled when tool_choice forces tool use.", STRUCTURED.md §3.5): refuse before
        sending, or with ``drop_params`` leave the output tool unforced (the model may then
        answer in prose, which fails validation).

        Raises:
            ThinkingUnsupportedError: manual thinking on and ``drop_params`` off.
        """
        thinking = body.get("thinking")
        if not (isinstance(thinking, Mapping) and thinking.get("type") == "enabled"):
            return []
        model = self.source.model
        if not self.source.drop_params:
            raise ThinkingUnsupportedError(
                f"anthropic model {model!r} has no output_config.format, and its structured "
                "output fallback forces a tool, which manual thinking rejects: ask for "
                "reasoning_effort='none', use Claude 4.5 or later, or set drop_params=True on "
                "the source to send the output tool unforced",
                provider=self.profile.id,
                source_index=self.index,
                error_type="thinking_parameter_conflict",
            )
        body["tool_choice"] = {"type": "auto"}
        return [
            f"sent the output tool {tool!r} unforced (tool_choice auto): manual thinking on "
            f"anthropic model {model!r} rejects a forced tool (drop_params=True)"
        ]

    @staticmethod
    def _noted(
        response: Response,
        call: _Call,
        rate_limit: RateLimit | None = None,
    ) -> Response:
        """``response`` with the call's notes and rate limit, and its message carrying what
        later calls of the conversation send again: the instructions message placed before
        it, and a remembered ``drop_block``."""
        message = response.message
        if call.entry is not None or call.remembered is not None:
            metadata = message.metadata
            if call.remembered is not None:
                metadata = dataclasses.replace(
                    metadata or MessageMetadata(), prefix_mismatch=call.remembered
                )
            message = dataclasses.replace(message, instructions=call.entry, metadata=metadata)
        if not call.notes and rate_limit is None and message is response.message:
            return response
        return dataclasses.replace(
            response,
            message=message,
            warnings=[*response.warnings, *call.notes],
            rate_limit=rate_limit,
            applied_effort=Effort.NONE if call.switched_off else response.applied_effort,
        )

    def batch_body(self, request: Request) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """The Messages body a batch request carries as its ``params`` (see
        :meth:`~polythink.transports.base.HTTPTransport.batch_body`); the hints name the
        output tool of the structured-output fallback, whether thinking was switched off,
        and the message the call's instructions went in (its answer's message keeps it)."""
        call = self._prepare(request.with_(stream=False))
        hints: dict[str, Any] = {"output_tool": call.tool, "switched_off": call.switched_off}
        if call.entry is not None:
            hints["entry"] = call.entry
        return call.body, call.notes, hints

    def parse_answer(self, data: Any, hints: Mapping[str, Any], notes: list[str]) -> Response:
        """Parse a Messages answer of a batch (see
        :meth:`~polythink.transports.base.HTTPTransport.parse_answer`)."""
        tool = hints.get("output_tool")
        response = self._answer(data, None, tool if isinstance(tool, str) else None)
        entry = hints.get("entry")
        call = _Call(
            body={},
            built={},
            notes=notes,
            switched_off=bool(hints.get("switched_off")),
            tool=None,
            request=Request(messages=()),
            entry=dict(entry) if isinstance(entry, Mapping) else None,
            may_drop=False,
            remembered=None,
        )
        return self._noted(response, call)

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call and parse the answer.

        A :class:`~polythink.errors.ThinkingBindingError` is sent once more with
        ``drop_block`` when the call allows it (``prefix_mismatch="drop_block"``); the answer
        says so, and its message keeps the choice for the conversation.

        Raises:
            PolythinkError: a local rejection (before any HTTP call), or the mapped HTTP,
                transport or in-band error.
        """
        if request.stream:
            request = request.with_(stream=False)
        call = self._prepare(request)
        try:
            data, rate_limit = await self.post_json_with_rate_limit(
                self.url, call.body, call.request
            )
        except ThinkingBindingError as exc:
            if not call.may_drop:
                raise
            call = self._retried(call, exc)
            data, rate_limit = await self.post_json_with_rate_limit(
                self.url, call.body, call.request
            )
        return self._noted(self._answer(data, rate_limit, call.tool), call, rate_limit)

    def _retried(self, call: _Call, error: ThinkingBindingError) -> _Call:
        """The call again with ``drop_block``, and a note (logged too) saying why."""
        retried = self._dropping(call)
        note = (
            f"anthropic refused the thinking block at {error.path or 'an earlier turn'} "
            f"({error.changed or 'bound to a different conversation'}); sent again with "
            "thinking.block_binding.prefix_mismatch_behavior 'drop_block' "
            "(prefix_mismatch='drop_block'): the API drops such blocks, and this conversation "
            "keeps sending drop_block"
        )
        _log.warning("%s/%s: %s", self.profile.id, self.source.model, note)
        retried.notes = [*retried.notes, note]
        return retried

    def _answer(
        self,
        data: Any,
        rate_limit: RateLimit | None,
        tool: str | None,
        response: httpx.Response | None = None,
    ) -> Response:
        """The :class:`Response` of a whole answer's parsed JSON ``data``.

        Raises:
            PolythinkError: an error it carries, or a shape that is not the wire's.
        """
        return self.parsed_answer(
            data,
            rate_limit,
            response,
            failed=data if isinstance(data, Mapping) and data.get("type") == "error" else None,
            parse=lambda d: parse_message(
                d,
                profile=self.profile,
                source_index=self.index,
                model=self.source.model,
                output_tool=tool,
            ),
        )

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; yield text, reasoning, tool-call and usage events, then
        ``done`` with the assembled response.

        An in-band ``error`` event is mapped by its ``error.type`` (``overloaded_error`` and
        ``api_error`` -> :class:`~polythink.errors.TransientError`, ``rate_limit_error`` ->
        :class:`~polythink.errors.RateLimitedError`, ``invalid_request_error`` ->
        :class:`RequestRejectedError`, …).

        Raises:
            PolythinkError: before the first content event, the mapped error (retryable
                where its class is); after it, :class:`StreamInterruptedError` carrying the
                partial response, with the underlying error as ``__cause__``.
        """
        if not request.stream:
            request = request.with_(stream=True)
        call = self._prepare(request)
        relay = self.relay(request)
        self.relay_notes(relay, call.notes)
        assembler = AnthropicStreamAssembler(
            self.profile, self.index, self.source.model, output_tool=call.tool
        )
        whole: Response | None = None
        try:
            async with self._opened(call) as (response, call):
                rate_limit = parse_rate_limit(response.headers)
                data = await self.whole_answer(response)
                if data is not NOT_WHOLE:
                    whole = self._answer(data, rate_limit, call.tool, response)
                else:
                    async with aclosing(self.events(response, relay)) as events:
                        async for event in events:
                            if event.get("type") == "error":
                                raise self.in_band_error(event, response)
                            try:
                                produced = assembler.feed(event)
                            except SHAPE_ERRORS as exc:
                                raise self.malformed(exc, response, event=True) from None
                            for item in produced:
                                yield item
                            if assembler.stopped:
                                break
                    if not assembler.finished:
                        raise self.incomplete(response)
        except PolythinkError as exc:
            if assembler.content_seen or (relay is not None and relay.committed):
                partial = self._noted(assembler.response(finish="error"), call)
                raise self.interrupted(exc, partial) from exc
            raise
        if whole is not None:
            # The server answered in one JSON body, whatever stream: true asked for.
            for item in answer_events(self._noted(whole, call, rate_limit)):
                yield item
            return
        done = self._noted(assembler.response(), call, rate_limit)
        yield StreamEvent("done", response=done)

    @asynccontextmanager
    async def _opened(self, call: _Call) -> AsyncIterator[tuple[Any, _Call]]:
        """Open the stream of ``call``; a :class:`~polythink.errors.ThinkingBindingError`,
        which comes before any event, opens it once more with ``drop_block`` when allowed.
        Yields the open response and the call it answers."""
        opened = False
        try:
            async with self.open_stream(self.stream_url, call.body, call.request) as response:
                opened = True
                yield response, call
                return
        except ThinkingBindingError as exc:
            if opened or not call.may_drop:
                raise
            call = self._retried(call, exc)
        async with self.open_stream(self.stream_url, call.body, call.request) as response:
            yield response, call
