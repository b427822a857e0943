"""OpenAI Chat Completions, and every OpenAI-compatible endpoint through its profile.

One transport serves OpenAI, OpenRouter, DeepSeek, Qwen/DashScope, GLM, Kimi, MiniMax, xAI,
Groq, Mistral, vLLM and Ollama. The profile (:mod:`polythink.providers`) says where each
dialect differs: the output-ceiling field (``max_completion_tokens`` on OpenAI, which
rejects ``max_tokens`` on reasoning models), what reasoning text is sent back on later
turns, and whether reasoning may arrive inline as ``<think>…</think>``.

Reasoning arrives as ``message.reasoning_content`` (DeepSeek, Qwen, GLM, Kimi, xAI
grok-3-mini), ``message.reasoning`` (OpenRouter, Groq ``parsed``, vLLM, Ollama), OpenRouter's
``reasoning_details[]`` (kept verbatim for the next turn), Mistral ``thinking`` content
chunks, or inline ``<think>`` tags (Groq ``raw``). OpenAI's own Chat Completions returns no
reasoning text, only ``usage.completion_tokens_details.reasoning_tokens``. Facts: WIRE.md
§1, §5, §6 and the recorded cassettes in ``../shared/fixtures/real`` (2025-04 to 2026-06).

``response_format`` goes out in each provider's form (:func:`output_plan`,
:mod:`polythink.transports.schema`). A refusal (``message.refusal``, streamed as
``delta.refusal``) is kept in ``Response.refusal`` and counted as text, with
``finish_reason`` ``content_filter``, as the Responses wire reads its refusal parts
(STRUCTURED.md §1.3).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import json
import secrets
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import httpx

from polythink.conversion import PrefixStates, tools_memo
from polythink.errors import (
    PolythinkError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.pricing import reported_cost
from polythink.providers import ProviderProfile
from polythink.reasoning.parameters import parameter_conflicts, parameter_rules
from polythink.reasoning.resolve import responses_route
from polythink.reasoning.tiers import served_tier
from polythink.transports.base import (
    DONE,
    NOT_WHOLE,
    SHAPE_ERRORS,
    HTTPTransport,
    answer_events,
    append_system_suffix,
    apply_overrides,
    assistant_response,
    check_parts,
    mark_last_entry,
    part_types,
    prompt_cache_fields,
    text_of,
    token_count,
    usage_counts,
    with_notes,
)
from polythink.transports.carry import (
    EMPTY_TURN,
    EMPTY_WHY,
    REASONING,
    REASONING_ITEMS,
    REASONING_ITEMS_WHY,
    LeftOut,
    empty_turn,
    extra_keys,
    items_unsent,
    part_keys,
    reasoning_unsent,
)
from polythink.transports.finish import chat_table, map_finish
from polythink.transports.headers import parse_rate_limit
from polythink.transports.instructions import (
    InstructionPlan,
    after_conversation,
    instruction_plan,
    per_call_text,
)
from polythink.transports.native import written_body
from polythink.transports.schema import OutputPlan, chat_output, for_call, merge_output
from polythink.types import (
    Cost,
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    Tool,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "ChatStreamAssembler",
    "OpenAIChatTransport",
    "build_body",
    "finish_reason",
    "new_tool_call_id",
    "output_plan",
    "parse_completion",
    "parse_usage",
    "split_think",
    "thinking_in_body",
]

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


def new_tool_call_id() -> str:
    """An id for a tool call that a compatible server sent without one.

    Older Ollama, llama.cpp and some vLLM tool parsers omit ``id`` from ``tool_calls[]``
    entries; a tool message must still answer its call by id, so polythink gives the call
    ``call_`` and 24 random hex digits (96 bits: unique within an answer and across a
    conversation), which is sent back on later turns like a provider's own id.
    """
    return "call_" + secrets.token_hex(12)


Notes = list[tuple[str, str]]
"""What a message's conversion left out: ``(what, why)`` pairs, in order."""

_CHAT_PART_KEYS = {
    "text": ("type", "text"),
    "image_url": ("type", "image_url"),
    "input_audio": ("type", "input_audio"),
    "file": ("type", "file"),
}
"""The keys of each Chat content part (``ChatCompletionRequestMessageContentPart{Text,Image,
Audio,File}`` in ``../shared/wire/specs/openai_openapi.yaml``, 2026-08-21); the refusal part
(``...ContentPartRefusal``) has ``type`` and ``refusal`` only."""


@functools.cache
def _part_keys(prompt_cache: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """The keys a content part of each type carries on a Chat profile with ``prompt_cache``
    (:attr:`~polythink.providers.ProviderProfile.prompt_cache`): a part's own, then
    ``prompt_cache_breakpoint`` where the profile speaks OpenAI's cache fields (``key``: the
    four part schemas declare it) and ``cache_control`` where it speaks Anthropic's
    (OpenRouter, for the Anthropic models behind it)."""
    marks = (("prompt_cache_breakpoint",) if "key" in prompt_cache else ()) + (
        ("cache_control",) if "cache_control" in prompt_cache else ()
    )
    table = {kind: frozenset((*keys, *marks)) for kind, keys in _CHAT_PART_KEYS.items()}
    table["refusal"] = frozenset(("type", "refusal"))
    return table


def _carried(content: Any, profile: ProviderProfile, notes: Notes) -> Any:
    """``content`` with each part's keys this profile has no field for left out, and noted;
    the same object when nothing is left out (the common case: one length check a part)."""
    if content.__class__ is not list:
        return content
    table: dict[str, frozenset[str]] | None = None
    out: list[Any] | None = None
    for index, part in enumerate(content):
        if not isinstance(part, Mapping) or len(part) <= 2:
            continue
        table = table or _part_keys(profile.prompt_cache)
        kind = part.get("type")
        keys = table.get(kind) if isinstance(kind, str) else None
        if keys is None:
            continue
        unsent = extra_keys(part, keys)
        if unsent:
            if out is None:
                out = list(content)
            out[index] = {key: value for key, value in part.items() if key in keys}
            why = f"{profile.id} has no such field on a {kind} part"
            notes.append((part_keys(unsent, index), why))
    return content if out is None else out


def _reasoning_why(profile: ProviderProfile) -> str:
    """Why this profile sends no reasoning text with an assistant turn."""
    field = profile.reasoning_back
    if field is None:
        # ChatCompletionRequestAssistantMessage declares no reasoning field (openai_openapi.yaml
        # 2026-08-21), and OpenAI refuses unknown message fields.
        return f"{profile.id} takes no reasoning text on an assistant message"
    why = f"{profile.id} takes {field} back on tool-call turns only"
    flag = profile.reasoning_back_everywhere_with
    return why + (f" (on every turn with {flag}: true)" if flag else "")


def _message_body(
    message: Message, profile: ProviderProfile, notes: Notes, *, exchange: bool = False
) -> dict[str, Any]:
    role = message.role
    calls = message.tool_calls
    content = _carried(message.content, profile, notes)
    body: dict[str, Any]
    if calls:
        body = {
            "role": role,
            "content": content if content else None,
            "tool_calls": [call.to_openai() for call in calls],
        }
    else:
        body = {"role": role, "content": content}
    if message.tool_call_id is not None:
        body["tool_call_id"] = message.tool_call_id
    # A tool message's name is for Gemini's functionResponse; Chat's tool message declares
    # only role, content and tool_call_id (ChatCompletionRequestToolMessage,
    # ../shared/wire/specs/openai_openapi.yaml 2026-08-21).
    if message.name is not None and role != "tool":
        body["name"] = message.name
    if role != "assistant":
        return body
    # ChatCompletionRequestAssistantMessage's own fields (openai_openapi.yaml 2026-08-21).
    if message.refusal is not None:
        body["refusal"] = message.refusal
    if message.audio_id is not None:
        body["audio"] = {"id": message.audio_id}
    if message.function_call is not None:
        body["function_call"] = message.function_call.to_openai()["function"]
    if (
        message.reasoning_items
        and profile.reasoning_format is not None
        and message.reasoning_format == profile.reasoning_format
    ):
        # OpenRouter: reasoning_details unmodified, "or" the reasoning text (WIRE.md §5.5).
        body["reasoning_details"] = [dict(item) for item in message.reasoning_items]
        return body
    field = profile.reasoning_back
    if field:
        # ``exchange``: the turn answers tool results, in a tool exchange (DeepSeek).
        tool_turn = bool(message.tool_calls) or exchange
        if message.reasoning and (tool_turn or not profile.reasoning_back_tool_turns_only):
            body[field] = message.reasoning
            return body
        if tool_turn and profile.reasoning_back_required:
            # DeepSeek answers 400 "Missing reasoning_content field in the assistant message"
            # to a thinking-mode tool-call turn without the field (WIRE.md §6.1), so a turn
            # that has no reasoning (another provider's, or the caller's) sends it empty.
            body[field] = ""
    if reasoning_unsent(message, profile):
        notes.append((REASONING, _reasoning_why(profile)))
    if items_unsent(message, profile):
        notes.append((REASONING_ITEMS, REASONING_ITEMS_WHY))
    return body


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "image_url"


def _has_images(message: Message) -> bool:
    content = message.content
    return isinstance(content, list) and any(map(_is_image, content))


_IMAGE_PLACEHOLDER = "The result is the image in the next message."


def _text_only_tool_body(
    message: Message, profile: ProviderProfile, notes: Notes
) -> tuple[dict[str, Any], list[Any]]:
    """A tool message without its image parts (Chat tool messages take text only), and
    those parts: its text parts become one string, so their other keys are noted."""
    body = _message_body(message, profile, notes)
    text: list[str] = []
    images: list[Any] = []
    for index, part in enumerate(body["content"] or ()):
        if _is_image(part):
            images.append(part)
        elif isinstance(part, Mapping):
            text.append(str(part.get("text", "")))
            unsent = extra_keys(part, _TOOL_TEXT_KEYS)
            if unsent:
                notes.append((part_keys(unsent, index), _TOOL_TEXT_WHY))
    body["content"] = "".join(text) or _IMAGE_PLACEHOLDER
    return body, images


_TOOL_TEXT_KEYS = frozenset(("type", "text"))
_TOOL_TEXT_WHY = "a tool result with images goes to Chat as one string, its images in a user turn"


CHAT_PARTS = part_types(
    system=("text",),
    user=("text", "image_url", "input_audio", "file"),
    assistant=("text", "refusal"),
    tool=("text", "image_url"),
)
"""Content part types of the Chat Completions wire, by role: OpenAI's
``ChatCompletionRequest{System,User,Assistant,Tool}MessageContentPart`` (openai OpenAPI
document, 2026-11-28, ``../shared/wire/specs``); a tool message's images move to a user turn
(:func:`_chat_messages`). A compatible provider may accept fewer (it answers 400 then)."""


_NOTHING_SENT = frozenset({"role", "content", "name", "refusal"})
"""The keys of an assistant body that say nothing when its content and refusal are empty."""


def _chat_messages(
    messages: Sequence[Message],
    profile: ProviderProfile,
    left_out: LeftOut | None = None,
    source_index: int | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` array: one entry per message, except tool results with images and
    empty assistant turns.

    A Chat tool message takes text only, so the images of a run of consecutive tool results
    move into one user turn right after the run (after the last result, since every call
    of the assistant turn must be answered before anything else), each introduced by the
    id of the call that returned it; the tool message keeps its text. The tool message's
    content parts are text only (``ChatCompletionRequestToolMessageContentPart`` in
    ``../shared/wire/specs/openai_openapi.yaml``, 2026-08-21), while a user turn takes
    ``image_url`` parts. An assistant turn with nothing to send (:func:`~polythink.
    transports.carry.empty_turn`, and no reasoning this wire sends back) is left out, as on
    every wire, and noted in ``left_out``; so are a part's keys the profile has no field
    for (:func:`_part_keys`) and reasoning text it does not take back
    (:func:`~polythink.transports.carry.reasoning_unsent`).

    Each message's body, and what its conversion left out, depend on the message and the
    profile's reasoning and cache fields only: they are kept with the message
    (:meth:`Message.memo`), and the array of a conversation without moved images or
    left-out turns with its messages and its notes (:class:`~polythink.conversion.PrefixStates`),
    so a call sending a conversation again converts, and checks, only its new messages, and
    still reports the notes of those it did not convert.
    """
    memo = (
        f"openai_chat:{profile.id}:{profile.reasoning_back}:"
        f"{profile.reasoning_back_tool_turns_only}:{profile.reasoning_back_required}:"
        f"{profile.reasoning_format}:{profile.reasoning_back_everywhere_with}:"
        f"{profile.prompt_cache}:{profile.reasoning_back_tool_exchange}"
    )
    conversation = tuple(messages)
    kept_arrays = _arrays.setdefault(memo, PrefixStates())
    start, kept = kept_arrays.find(conversation)
    out: list[dict[str, Any]] = []
    found: dict[tuple[str, str], list[int]] = {}
    if kept is not None:
        array, kept_notes = kept
        out = array[:start]
        for key, positions in kept_notes:
            cut = bisect.bisect_left(positions, start)
            if cut:
                found[key] = list(positions[:cut])
    moved: list[Any] = []
    plain = True

    def convert(message: Message, exchange: bool = False) -> dict[str, Any] | _Noted:
        # A closure: a third cheaper per message than a partial with a keyword.
        notes: Notes = []
        body = _message_body(message, profile, notes, exchange=exchange)
        if message.role == "assistant" and body.keys() <= _NOTHING_SENT and empty_turn(message):
            return _Noted(None, ((EMPTY_TURN, EMPTY_WHY), *notes))
        return _Noted(body, tuple(notes)) if notes else body

    def convert_in_exchange(message: Message) -> dict[str, Any] | _Noted:
        return convert(message, True)

    exchanges = profile.reasoning_back_tool_exchange

    append = out.append
    for position, message in enumerate(conversation[start:], start):
        if message.content.__class__ is list:
            check_parts(message, CHAT_PARTS, profile, source_index, position)
        if message.role == "tool":
            if _has_images(message):
                plain = False
                notes: Notes = []
                body, images = _text_only_tool_body(message, profile, notes)
                append(body)
                moved.append(
                    {"type": "text", "text": f"Images from tool call {message.tool_call_id}:"}
                )
                moved.extend(dict(image) for image in images)
                for key in dict.fromkeys(notes):
                    found.setdefault(key, []).append(position)
                continue
        elif moved:
            append({"role": "user", "content": moved})
            moved = []
        if (
            exchanges
            and message.role == "assistant"
            and not message.tool_calls
            and position
            and conversation[position - 1].role == "tool"
        ):
            entry = message.memo(memo + ":exchange", convert_in_exchange)
        else:
            entry = message.memo(memo, convert)
        if entry.__class__ is _Noted:
            noted: _Noted = entry
            for key in noted.notes:
                found.setdefault(key, []).append(position)
            if noted.body is None:
                # Not kept: the array would no longer line up with the messages.
                plain = False
                continue
            entry = noted.body
        append(entry)  # type: ignore[arg-type]
    if moved:
        out.append({"role": "user", "content": moved})
    if plain:
        # The caller may change its list (a system suffix replaces an entry): keep a copy.
        notes_kept = tuple((key, tuple(positions)) for key, positions in found.items())
        kept_arrays.keep(conversation, (out.copy(), notes_kept))
    if left_out is not None and found:
        left_out.extend(found)
    return out


class _Noted:
    """A message's Chat body (``None``: the turn is left out) with what its conversion left
    out, ``(what, why)`` pairs; a message that lost nothing keeps its body alone."""

    __slots__ = ("body", "notes")

    def __init__(self, body: dict[str, Any] | None, notes: tuple[tuple[str, str], ...]) -> None:
        self.body = body
        self.notes = notes


_Kept = tuple[list[dict[str, Any]], tuple[tuple[tuple[str, str], tuple[int, ...]], ...]]
"""A conversation's array and its notes: positions (ascending) by ``(what, why)``."""

_arrays: dict[str, PrefixStates[_Kept]] = {}
"""The message arrays of recent conversations, with their notes, by the profile fields they
depend on."""


def output_plan(
    request: Request, *, model: str, profile: ProviderProfile, source_index: int | None = None
) -> OutputPlan | None:
    """What this call sends for its ``response_format`` on ``profile``'s provider
    (:func:`polythink.transports.schema.chat_output`), or ``None`` without one.

    Raises:
        OutputFormatUnsupportedError: the provider cannot produce the format.
    """
    fmt = request.response_format
    if fmt is None:
        return None
    plan = chat_output(
        fmt,
        provider=profile.id,
        model=model,
        has_tools=bool(request.tools),
        source_index=source_index,
    )
    return for_call(plan, fmt, request.messages, request.system_suffix)


def build_body(
    request: Request,
    *,
    model: str,
    profile: ProviderProfile,
    extra_body: Mapping[str, Any] | None = None,
    output: OutputPlan | None = None,
    breakpoints: bool = False,
    left_out: LeftOut | None = None,
    source_index: int | None = None,
    instructions: InstructionPlan | None = None,
) -> dict[str, Any]:
    """Build the Chat Completions request body for ``request``.

    Sets ``model``, ``messages``, ``stream`` (with ``stream_options.include_usage`` on
    streams where the profile asks for it), the caller's output ceiling under the
    profile's field, sampling parameters, ``stop``, ``tools`` and ``tool_choice`` when given;
    then deep-merges the reasoning fragment of ``request.resolution``, the source's
    ``extra_body`` and the call's ``extra_body``, in that order (later wins).

    Reasoning text goes back on the assistant turns the profile names
    (:class:`~polythink.providers.ProviderProfile` ``reasoning_back*``); where the profile sends
    it on tool-call turns only, a ``true`` ``reasoning_back_everywhere_with`` field in
    ``extra_body`` (DashScope's ``preserve_thinking``) sends it on every assistant turn.

    The call's per-call instructions (``request.system_suffix``, then the instruction of its
    ``response_format`` where the provider has no schema field) go where ``instructions``
    says (:mod:`polythink.transports.instructions`; by default decided from the model and
    the profile): after the conversation, as a system message (OpenAI) or in a user turn,
    so that the messages already sent stay the prefix of this call; or, with ``system``,
    appended after a blank line to the one system message. ``request.prompt_cache`` adds the
    profile's fields (:func:`~polythink.transports.base.prompt_cache_fields`). Images in a
    tool result move into a user turn right after it (see :func:`_chat_messages`).

    ``request.response_format`` sets ``response_format`` (and OpenRouter's
    ``provider.require_parameters``) as :func:`output_plan` says, before the overrides, so
    an ``extra_body`` may still replace them. ``output`` is that plan when the caller
    computed it already.

    With ``breakpoints`` (OpenAI's explicit prompt-cache breakpoints, decided by the
    transport: :meth:`~polythink.transports.base.HTTPTransport.explicit_breakpoints`) the
    last content part of the last system message, and of the last message that has
    content, both before the per-call instructions, carry
    ``prompt_cache_breakpoint: {"mode": "explicit"}``; a
    string content becomes one ``text`` part. An assistant's ``refusal``, ``audio``
    (``{"id"}``) and legacy ``function_call`` go out as the Chat fields they are. What is
    left out (an empty assistant turn) is noted in ``left_out``.

    ``source_index`` (the source's position in the client) is carried by every refusal.

    Raises:
        OutputFormatUnsupportedError: see :func:`output_plan`.
        ContentUnsupportedError: a content part this wire does not carry.
    """
    if output is None and request.response_format is not None:
        output = output_plan(request, model=model, profile=profile, source_index=source_index)
    flag = profile.reasoning_back_everywhere_with
    if flag is not None and profile.reasoning_back_tool_turns_only:
        asked = (extra_body or {}).get(flag)
        if request.extra_body and flag in request.extra_body:
            asked = request.extra_body[flag]
        if asked is True:
            profile = dataclasses.replace(profile, reasoning_back_tool_turns_only=False)
    messages = _chat_messages(request.messages, profile, left_out, source_index)
    if breakpoints:
        mark_last_entry(messages, text_type="text", roles=("system", "developer"))
    plan = instructions if instructions is not None else instruction_plan(profile, model)
    given = output.instruction if output is not None else None
    if plan.placement == "system":
        if request.system_suffix:
            append_system_suffix(messages, request.system_suffix, "text")
        if given:
            append_system_suffix(messages, given, "text")
        if breakpoints:
            mark_last_entry(messages, text_type="text")
    else:
        # The breakpoint ends the conversation before the call's own instructions.
        if breakpoints:
            mark_last_entry(messages, text_type="text")
        text = per_call_text(request.system_suffix, given)
        if text:
            after_conversation(messages, text, plan.placement)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": request.stream,
    }
    if request.stream and profile.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if request.max_tokens is not None:
        body[profile.max_tokens_field] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop"] = list(request.stop)
    if request.tools:
        body["tools"] = tools_memo(request.tools, "openai_chat", _chat_tools)
    if request.tool_choice is not None:
        body["tool_choice"] = request.tool_choice
    if request.prompt_cache is not None:
        body.update(prompt_cache_fields(request.prompt_cache, profile))
    if output is not None:
        merge_output(body, output.fields, (extra_body, request.extra_body))
    return apply_overrides(body, request, extra_body)


def _chat_tools(tools: tuple[Tool, ...]) -> list[dict[str, Any]]:
    """The ``tools`` array (shared between calls declaring the same tools: never changed in
    place; :func:`~polythink.transports.base.apply_overrides` replaces what it overrides)."""
    out = []
    for tool in tools:
        function: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        if tool.strict is not None:
            function["strict"] = tool.strict
        out.append({"type": "function", "function": function})
    return out


def parse_usage(usage: Any, *, counts_reasoning: bool | None = None) -> Usage | None:
    """Normalise a Chat Completions ``usage`` object; ``None`` when absent.

    ``prompt_tokens`` already includes cached tokens on OpenAI, OpenRouter, DeepSeek and
    Gemini-compat, so it is taken as is. Cache reads come from
    ``prompt_tokens_details.cached_tokens``, else DeepSeek's ``prompt_cache_hit_tokens``,
    else Moonshot's top-level ``cached_tokens``; cache writes from
    ``prompt_tokens_details.cache_write_tokens``; reasoning from
    ``completion_tokens_details.reasoning_tokens``. A field the provider did not send stays
    ``None``.

    ``output_tokens`` always includes reasoning: ``completion_tokens`` where the provider
    counts reasoning in it, ``completion_tokens + reasoning_tokens`` where it counts reasoning
    beside it (xAI). ``counts_reasoning`` is the provider's documented convention (``None``:
    decided from ``total_tokens``; see
    :func:`polythink.transports.base.output_with_reasoning`).
    """
    if not isinstance(usage, Mapping):
        return None
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    pd = prompt_details if isinstance(prompt_details, Mapping) else {}
    cd = completion_details if isinstance(completion_details, Mapping) else {}
    cache_read = token_count(pd.get("cached_tokens"))
    if cache_read is None:
        cache_read = token_count(usage.get("prompt_cache_hit_tokens"))
    if cache_read is None:
        cache_read = token_count(usage.get("cached_tokens"))
    prompt, output, reasoning = usage_counts(
        usage,
        cd,
        prompt_key="prompt_tokens",
        output_key="completion_tokens",
        counts_reasoning=counts_reasoning,
    )
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        reasoning_tokens=reasoning,
        cache_read_tokens=cache_read,
        cache_write_tokens=token_count(pd.get("cache_write_tokens")),
    )


def finish_reason(raw: Any, *, has_tool_calls: bool, provider: str = "openai") -> str:
    """Map ``provider``'s finish reason to ``stop``/``length``/``tool_calls``/
    ``content_filter``/``error`` by its documented table
    (:func:`polythink.transports.finish.chat_table`); ``stop`` with tool calls present becomes
    ``tool_calls``; a value not in the table is ``error`` (logged once)."""
    return map_finish(
        raw, chat_table(provider), provider=provider, has_tool_calls=has_tool_calls
    ).reason


def split_think(content: str) -> tuple[str | None, str]:
    """Split a leading ``<think>…</think>`` block off ``content``.

    Returns ``(reasoning, text)``: the reasoning stripped of surrounding whitespace (``None``
    when the block is empty) and the text after the closing tag verbatim; ``(None, content)``
    when there is no leading block. An unclosed block is all reasoning.
    """
    stripped = content.lstrip()
    if not stripped.startswith(_THINK_OPEN):
        return None, content
    body = stripped[len(_THINK_OPEN) :]
    end = body.find(_THINK_CLOSE)
    if end < 0:
        return body.strip() or None, ""
    return body[:end].strip() or None, body[end + len(_THINK_CLOSE) :]


def _content_parts(content: Any) -> tuple[str, str]:
    """Return ``(text, reasoning)`` from a string or a list of content chunks (Mistral).

    Raises:
        TypeError: content that is neither (a number, an object), or a part's text that is
            not text: a broken answer, never an empty one.
    """
    if isinstance(content, str):
        return content, ""
    if content is None:
        return "", ""
    if not isinstance(content, list):
        raise TypeError(f"the message content is {type(content).__name__}, not text or parts")
    text: list[str] = []
    reasoning: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            raise TypeError(f"a content part is {type(part).__name__}, not an object")
        if part.get("type") == "thinking":
            for inner in part.get("thinking") or ():
                if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                    reasoning.append(inner["text"])
        elif "text" in part:
            text.append(text_of(part["text"], "a content part's text"))
    return "".join(text), "".join(reasoning)


def _reasoning_field(container: Mapping[str, Any]) -> str | None:
    value = container.get("reasoning_content")
    if not isinstance(value, str):
        value = container.get("reasoning")
    return value if isinstance(value, str) else None


def filter_refusal(results: Any) -> str | None:
    """The refusal of a completion a content filter stopped (``finish_reason:
    "content_filter"``), from the choice's ``content_filter_results`` (Azure OpenAI:
    ``{"violence": {"filtered": true, "severity": "high"}, …}``; CLOUDS.md §3.1, AZ-CF):
    ``"content filter: violence (high)"``; ``None`` when no category says it filtered."""
    if not isinstance(results, Mapping):
        return None
    flagged = []
    for name, verdict in results.items():
        if isinstance(verdict, Mapping) and (verdict.get("filtered") or verdict.get("detected")):
            severity = verdict.get("severity")
            flagged.append(f"{name} ({severity})" if isinstance(severity, str) else str(name))
    return f"content filter: {', '.join(flagged)}" if flagged else None


def parse_completion(
    data: Any,
    *,
    profile: ProviderProfile,
    source_index: int,
    model: str,
    rate_limit: RateLimit | None = None,
) -> Response:
    """Parse a non-streaming Chat Completions body into a :class:`Response`.

    ``rate_limit`` is the answer's parsed rate-limit headers, carried on the response.

    Raises:
        TransientError: when the body has no choices (an in-band error is mapped by the
            caller before this point).
    """
    choices = data.get("choices") if isinstance(data, Mapping) else None
    if not choices:
        raise TransientError(
            f"{profile.id} answered without choices",
            provider=profile.id,
            source_index=source_index,
        )
    choice = choices[0]
    message = choice.get("message") or {}
    text, chunk_reasoning = _content_parts(message.get("content"))
    refusal = message.get("refusal")
    refusal = refusal if isinstance(refusal, str) and refusal else None
    if refusal is not None:
        text += refusal
    elif choice.get("finish_reason") == "content_filter":
        refusal = filter_refusal(choice.get("content_filter_results"))
    reasoning = _reasoning_field(message) or chunk_reasoning or None
    if reasoning is None and profile.inline_think_tags and text:
        reasoning, text = split_think(text)
    raw_details = message.get("reasoning_details")
    details = tuple(raw_details) if isinstance(raw_details, list) and raw_details else ()
    calls = [_complete_call(c, profile, source_index) for c in message.get("tool_calls") or ()]
    if any(not call.id for call in calls):
        calls = [call if call.id else _with_new_id(call) for call in calls]
    return _response(
        text=text,
        reasoning=reasoning,
        calls=calls,
        details=details,
        raw_finish=choice.get("finish_reason"),
        usage=parse_usage(data.get("usage"), counts_reasoning=profile.completion_counts_reasoning),
        model=data.get("model") or model,
        response_id=data.get("id"),
        profile=profile,
        source_index=source_index,
        rate_limit=rate_limit,
        cost=reported_cost(data.get("usage")),
        refusal=refusal,
        service_tier=served_tier(profile.service_tiers, data.get("service_tier")),
    )


def _complete_call(data: Any, profile: ProviderProfile, source_index: int) -> ToolCall:
    """A non-streamed ``tool_calls[]`` entry; ``arguments`` may be a string, an object (some
    compatible servers), or empty (read as ``{}``)."""
    if not isinstance(data, Mapping):
        raise _tool_call_error(profile, source_index, f"a tool_calls entry {data!r}")
    try:
        call = ToolCall.from_openai(data)
    except ValueError as exc:
        raise _tool_call_error(profile, source_index, str(exc)) from exc
    if not call.arguments:
        return ToolCall(id=call.id, name=call.name, arguments="{}")
    return call


def _with_new_id(call: ToolCall) -> ToolCall:
    return ToolCall(id=new_tool_call_id(), name=call.name, arguments=call.arguments)


def _carries_error(data: Mapping[str, Any]) -> bool:
    """Whether a 200 body or stream chunk reports a failure.

    An ``error`` object anywhere at the top level counts, even beside ``choices``
    (OpenRouter's mid-stream shape: ``error`` plus a choice with ``finish_reason: "error"``,
    https://openrouter.ai/docs/api-reference/errors, "Error during streaming", 2025), as does vLLM's
    bare ``{"object": "error", "message", "type", "code"}`` (vLLM ``ErrorResponse``, OpenAI
    server, 2025). ``"error": null`` does not.
    """
    error = data.get("error")
    if error:
        return True
    return data.get("object") == "error" and bool(data.get("message"))


def _tool_call_error(profile: ProviderProfile, source_index: int, why: str) -> TransientError:
    return TransientError(
        f"{profile.id} sent a tool call that cannot be assembled unambiguously: {why}",
        provider=profile.id,
        source_index=source_index,
        error_type="malformed_tool_call",
    )


def _response(
    *,
    text: str,
    reasoning: str | None,
    calls: list[ToolCall],
    details: tuple[Mapping[str, Any], ...],
    raw_finish: Any,
    usage: Usage | None,
    model: str,
    response_id: str | None,
    profile: ProviderProfile,
    source_index: int,
    finish: str | None = None,
    rate_limit: RateLimit | None = None,
    cost: Cost | None = None,
    refusal: str | None = None,
    service_tier: str | None = None,
) -> Response:
    mapped = map_finish(
        raw_finish, chat_table(profile.id), provider=profile.id, has_tool_calls=bool(calls)
    )
    notes = [mapped.note] if mapped.note else []
    if finish is None and mapped.reason == "error" and mapped.note is None:
        notes.append(f"{profile.id} reported a failure: finish reason {mapped.native!r}")
    reason = mapped.reason
    if refusal is not None and reason == "stop":
        # A refusal ends with finish_reason "stop" on the wire (OAI-DOC-SO): read it as the
        # Responses wire reads its refusal parts.
        reason = "content_filter"
    return assistant_response(
        text=text,
        reasoning=reasoning,
        calls=calls,
        items=details,
        finish=finish or reason,
        refusal=refusal,
        usage=usage,
        model=model,
        response_id=response_id,
        profile=profile,
        source_index=source_index,
        rate_limit=rate_limit,
        native_finish_reason=mapped.native,
        warnings=notes,
        cost=cost,
        service_tier=service_tier,
    )


class _ThinkSplitter:
    """Route streamed content inside a leading ``<think>…</think>`` block to reasoning.

    Splits exactly as :func:`split_think` does on the whole content: whitespace around the
    reasoning is dropped, so trailing whitespace is held back until more reasoning follows or
    the block closes, and so is a closing tag split across chunks.
    """

    __slots__ = ("_emitted", "_pending", "_state")

    def __init__(self) -> None:
        self._state = "start"  # start -> think -> text
        self._pending = ""
        self._emitted = False

    def feed(self, piece: str) -> list[tuple[str, str]]:
        if self._state == "text":
            return [("text", piece)]
        buf, self._pending = self._pending + piece, ""
        if self._state == "start":
            stripped = buf.lstrip()
            if len(stripped) < len(_THINK_OPEN) and _THINK_OPEN.startswith(stripped):
                self._pending = buf
                return []
            if not stripped.startswith(_THINK_OPEN):
                self._state = "text"
                return [("text", buf)]
            self._state = "think"
            buf = stripped[len(_THINK_OPEN) :]
        if not self._emitted:
            buf = buf.lstrip()
        out: list[tuple[str, str]] = []
        end = buf.find(_THINK_CLOSE)
        if end >= 0:
            reasoning = buf[:end].rstrip()
            if reasoning:
                out.append(("reasoning", reasoning))
            self._state = "text"
            rest = buf[end + len(_THINK_CLOSE) :]
            if rest:
                out.append(("text", rest))
            return out
        keep = 0
        for size in range(min(len(_THINK_CLOSE) - 1, len(buf)), 0, -1):
            if _THINK_CLOSE.startswith(buf[-size:]):
                keep = size
                break
        body = buf[: len(buf) - keep]
        emit = body.rstrip()
        self._pending = buf[len(emit) :]
        if emit:
            self._emitted = True
            out.append(("reasoning", emit))
        return out

    def flush(self) -> list[tuple[str, str]]:
        pending, self._pending = self._pending, ""
        if self._state == "think":
            reasoning = pending.rstrip()
            return [("reasoning", reasoning)] if reasoning else []
        return [("text", pending)] if pending else []


class _CallSlot:
    """One streamed tool call being assembled: id, name, and its arguments so far."""

    __slots__ = ("id", "name", "obj", "pieces", "position")

    def __init__(self, position: int) -> None:
        self.position = position
        self.id = ""
        self.name = ""
        self.pieces: list[str] = []
        self.obj: str | None = None

    def add(self, arguments: Any, ambiguous: Any) -> str:
        """Take one ``arguments`` value; return the text it adds (``""`` for none)."""
        if arguments is None or arguments == "":
            return ""
        if isinstance(arguments, str):
            if self.obj is not None:
                raise ambiguous(f"call {self.position} mixes an arguments object with text")
            self.pieces.append(arguments)
            return arguments
        if isinstance(arguments, Mapping | list):
            text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
            if self.pieces:
                raise ambiguous(f"call {self.position} mixes arguments text with an object")
            if self.obj is not None:
                if text == self.obj:
                    return ""
                raise ambiguous(f"call {self.position} received two different argument objects")
            self.obj = text
            return text
        raise ambiguous(
            f"call {self.position} has arguments of type {type(arguments).__name__} "
            "(accepted: a JSON string piece or a JSON object)"
        )

    def call(self) -> ToolCall:
        arguments = self.obj if self.obj is not None else "".join(self.pieces)
        return ToolCall(id=self.id, name=self.name, arguments=arguments or "{}")


class ChatStreamAssembler:
    """Turn Chat Completions stream chunks into events and, at the end, a :class:`Response`.

    Reasoning deltas come from ``delta.reasoning_content`` or ``delta.reasoning`` (each chunk
    that carries only reasoning still yields a reasoning event); OpenRouter's
    ``reasoning_details`` entries are merged by ``index`` (texts concatenated, the signature
    taken when it arrives) and kept verbatim; tool-call fragments are merged as
    :meth:`_merge_call` describes, each yields a ``tool_call_delta`` event, and every call is
    yielded whole once the choice finishes. Usage is read from the chunk's ``usage``, else
    Groq's ``x_groq.usage``, else ``choices[0].usage`` (Moonshot), the last one reported
    winning; a chunk with empty ``choices`` (OpenAI's ``include_usage`` chunk) is read too.
    """

    def __init__(self, profile: ProviderProfile, source_index: int, model: str) -> None:
        self.profile = profile
        self.source_index = source_index
        self.model = model
        self.response_id: str | None = None
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[_CallSlot] = []
        self._open: dict[int, _CallSlot] = {}
        self.details: dict[int, dict[str, Any]] = {}
        self.raw_finish: Any = None
        self.usage: Usage | None = None
        self.cost: Cost | None = None
        self.content_seen = False
        self.rate_limit: RateLimit | None = None
        self.service_tier: str | None = None
        self._calls_emitted = False
        self._think = _ThinkSplitter() if profile.inline_think_tags else None

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one parsed chunk; return the events it produces."""
        events: list[StreamEvent] = []
        model = chunk.get("model")
        if model:
            self.model = model
        if self.response_id is None and chunk.get("id"):
            self.response_id = chunk["id"]
        tier = chunk.get("service_tier")
        if tier:
            self.service_tier = served_tier(self.profile.service_tiers, tier)
        choice_usage: Any = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = _reasoning_field(delta)
            details = delta.get("reasoning_details")
            if isinstance(details, list) and details:
                merged_text = self._merge_details(details)
                if not reasoning and merged_text:
                    reasoning = merged_text
            if reasoning:
                self._reason(reasoning, events)
            content = delta.get("content")
            if content:
                text, chunk_reasoning = _content_parts(content)
                if chunk_reasoning:
                    self._reason(chunk_reasoning, events)
                if text:
                    if self._think is not None:
                        for kind, piece in self._think.feed(text):
                            self._emit(kind, piece, events)
                    else:
                        self._emit("text", text, events)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refusal.append(refusal)
                self._emit("text", refusal, events)
            calls = delta.get("tool_calls")
            if calls:
                if not isinstance(calls, list):
                    raise self._ambiguous(f"tool_calls that is not a list: {calls!r}")
                for call in calls:
                    fragment = self._merge_call(call)
                    if fragment is not None:
                        self.content_seen = True
                        events.append(StreamEvent("tool_call_delta", tool_call_delta=fragment))
            if choice.get("finish_reason"):
                self.raw_finish = choice["finish_reason"]
                events.extend(self._complete_calls())
                if self.raw_finish == "content_filter" and not self.refusal:
                    filtered = filter_refusal(choice.get("content_filter_results"))
                    if filtered is not None:
                        self.refusal.append(filtered)
            if choice_usage is None and isinstance(choice.get("usage"), Mapping):
                choice_usage = choice["usage"]
        usage = chunk.get("usage")
        if not isinstance(usage, Mapping):
            groq = chunk.get("x_groq")
            usage = groq.get("usage") if isinstance(groq, Mapping) else None
        if not isinstance(usage, Mapping):
            usage = choice_usage
        if isinstance(usage, Mapping):
            self.usage = parse_usage(
                usage, counts_reasoning=self.profile.completion_counts_reasoning
            )
            self.cost = reported_cost(usage)
            events.append(StreamEvent("usage", usage=self.usage))
        return events

    def _reason(self, piece: str, events: list[StreamEvent]) -> None:
        self.reasoning.append(piece)
        self.content_seen = True
        events.append(StreamEvent("reasoning", text=piece))

    def _emit(self, kind: str, piece: str, events: list[StreamEvent]) -> None:
        if kind == "reasoning":
            self._reason(piece, events)
        else:
            self.text.append(piece)
            self.content_seen = True
            events.append(StreamEvent("text", text=piece))

    def _merge_details(self, details: list[Any]) -> str:
        texts: list[str] = []
        for position, item in enumerate(details):
            if not isinstance(item, Mapping):
                continue
            index = item.get("index", position)
            current = self.details.get(index)
            if current is None:
                self.details[index] = dict(item)
                if item.get("type") == "reasoning.text" and isinstance(item.get("text"), str):
                    texts.append(item["text"])
                continue
            for key, value in item.items():
                if key in ("text", "summary", "data") and isinstance(value, str):
                    current[key] = (current.get(key) or "") + value
                    if key == "text":
                        texts.append(value)
                elif key == "signature":
                    if value:
                        current[key] = value
                elif key not in current:
                    current[key] = value
        return "".join(texts)

    def _merge_call(self, call: Any) -> ToolCallDelta | None:
        """Merge one ``delta.tool_calls[]`` fragment; return the delta event's payload.

        A fragment continues the call open at its ``index`` unless it carries an ``id``
        different from that call's, which starts a new call (servers that reuse index 0
        for every call). Without an ``index`` it continues the call with its ``id``, else
        the last call. ``id`` and ``name`` may come only on a call's first fragment.
        A call whose first fragment has no ``id`` gets one of polythink's
        (:func:`new_tool_call_id`), the same in every delta, the complete call and the
        response. ``arguments`` is a string piece, or a whole JSON object (some compatible
        servers), or empty. Anything else, a second name for the same call, or strings mixed with
        objects in one call, cannot be assembled without guessing and raises.
        """
        if not isinstance(call, Mapping):
            raise self._ambiguous(f"a tool_calls entry that is not an object: {call!r}")
        function = call.get("function") or {}
        if not isinstance(function, Mapping):
            raise self._ambiguous(f"a function that is not an object: {function!r}")
        wire_index = call.get("index")
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        name = function.get("name") if isinstance(function.get("name"), str) else None
        slot: _CallSlot | None = None
        if type(wire_index) is int:
            slot = self._open.get(wire_index)
            if slot is not None and call_id and slot.id and call_id != slot.id:
                slot = None
        elif call_id is not None:
            slot = next((c for c in self.calls if c.id == call_id), None)
        elif self.calls:
            slot = self.calls[-1]
        if slot is None:
            if call_id is None and name is None:
                raise self._ambiguous("a fragment with neither id nor name opens no call")
            slot = _CallSlot(position=len(self.calls))
            self.calls.append(slot)
            if type(wire_index) is int:
                self._open[wire_index] = slot
        new_head = False
        if not slot.id:
            slot.id, new_head = call_id or new_tool_call_id(), True
        if name:
            if slot.name and name != slot.name:
                raise self._ambiguous(
                    f"call {slot.position} named {slot.name!r} then {name!r} with no new id"
                )
            if not slot.name:
                slot.name, new_head = name, True
        piece = slot.add(function.get("arguments"), self._ambiguous)
        if not piece and not new_head:
            return None
        return ToolCallDelta(
            index=slot.position, id=slot.id, name=slot.name or None, arguments=piece
        )

    def _ambiguous(self, why: str) -> TransientError:
        return _tool_call_error(self.profile, self.source_index, why)

    def _tool_calls(self) -> list[ToolCall]:
        return [slot.call() for slot in self.calls]

    def _complete_calls(self) -> list[StreamEvent]:
        if self._calls_emitted or not self.calls:
            return []
        self._calls_emitted = True
        self.content_seen = True
        for slot in self.calls:
            if not slot.name:
                raise self._ambiguous(f"call {slot.position} never received a name")
        return [StreamEvent("tool_call", tool_call=call) for call in self._tool_calls()]

    def flush(self) -> list[StreamEvent]:
        """Release held-back text and any tool calls not yet yielded (end of stream)."""
        events: list[StreamEvent] = []
        if self._think is not None:
            for kind, piece in self._think.flush():
                self._emit(kind, piece, events)
        events.extend(self._complete_calls())
        return events

    def response(self, *, finish: str | None = None) -> Response:
        """Assemble the response from everything consumed so far."""
        reasoning = "".join(self.reasoning) or None
        details = tuple(self.details[i] for i in sorted(self.details))
        return _response(
            text="".join(self.text),
            reasoning=reasoning,
            calls=self._tool_calls(),
            details=details,
            raw_finish=self.raw_finish,
            usage=self.usage,
            model=self.model,
            response_id=self.response_id,
            profile=self.profile,
            source_index=self.source_index,
            finish=finish,
            rate_limit=self.rate_limit,
            cost=self.cost,
            refusal="".join(self.refusal) or None,
            service_tier=self.service_tier,
        )


def thinking_in_body(body: Mapping[str, Any], wire: str | None) -> bool | None:
    """Whether ``body`` switches thinking on (``True``) or off (``False``) in the reasoning
    dialect ``wire``; ``None`` when it says neither, and the model's default applies.

    ``thinking_type``: ``thinking.type`` (``disabled`` is off); ``qwen``: ``enable_thinking``;
    ``vllm``: ``chat_template_kwargs.enable_thinking``. Other dialects set a strength, not a
    switch: ``None``.
    """
    if wire == "thinking_type":
        thinking = body.get("thinking")
        kind = thinking.get("type") if isinstance(thinking, Mapping) else None
        return None if kind is None else kind != "disabled"
    if wire == "vllm":
        kwargs = body.get("chat_template_kwargs")
        body = kwargs if isinstance(kwargs, Mapping) else {}
    if wire in ("qwen", "vllm"):
        switch = body.get("enable_thinking")
        return switch if isinstance(switch, bool) else None
    return None


def _forces_a_tool(choice: Any) -> bool:
    """``required``, or a named function (the client gives every forced form this shape)."""
    return choice == "required" or (
        isinstance(choice, Mapping) and choice.get("type") == "function"
    )


class OpenAIChatTransport(HTTPTransport):
    """Chat Completions over HTTP for one source (``POST {base_url}/chat/completions``).

    Before any HTTP call, a body the provider would refuse raises
    :class:`~polythink.errors.ThinkingUnsupportedError` (failover moves on), or, with
    ``drop_params=True``, loses the parameter with a note in ``warnings``: sampling
    parameters the model rejects (strict providers), and a ``tool_choice`` that forces a call
    while the model thinks, where the provider refuses that
    (``ProviderProfile.thinking_refuses_forced_tool_choice``: DeepSeek, Qwen). Thinking is on
    when the body switches it on, or says nothing and the model thinks by default (the
    registry's ``default_effort``, or a model that cannot switch it off). The error says how
    to keep the forced call: ``reasoning_effort="none"`` on a model that can switch off.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = self.api_url("/chat/completions")
        self._extra_body = self.source.extra_body
        self._capability = self.capability
        self._instructions = instruction_plan(self.profile, self.source.model)
        self._parameter_rules = parameter_rules(self.profile.id, self.source.model)

    def _parameter_notes(self, body: dict[str, Any]) -> list[str]:
        """Apply the model's parameter rules at this endpoint (:mod:`polythink.reasoning.
        parameters`: Kimi's fixed sampling values, xAI's refused ``stop``, DashScope's JSON mode
        while thinking) to the built body: refused before sending, or dropped with a warning
        under ``drop_params``. Whether the call thinks is read from the body's switch, else
        the model's default (the registry's, else the rule's).

        Raises:
            ThinkingUnsupportedError: a parameter a rule forbids while ``drop_params`` is off.
        """
        rules = self._parameter_rules
        if not rules:
            return []
        thinking = thinking_in_body(body, self.profile.reasoning_wire)
        if thinking is None:
            cap = self._capability
            if cap is not None and cap.default_effort is not None:
                thinking = cap.default_reasons or not cap.can_disable
            else:
                thinking = any(rule.default_thinking for rule in rules)
        conflicts = parameter_conflicts(rules, body, thinking)
        return self.refuse_or_drop(body, conflicts, "at this endpoint", "parameter_conflict")

    @staticmethod
    def _streams_under_the_hood(request: Request) -> bool:
        """Whether the provider answers this call only when streamed, as the reasoning layer
        resolved it (``Resolution.stream_only``: DashScope's thinking-only and open-weight
        Qwen3 models, documented or learned from its 400 "parameter.enable_thinking must be
        set to false for non-streaming calls", WIRE.md §6.2)."""
        resolution = request.resolution
        return resolution is not None and resolution.stream_only

    async def _complete_by_stream(self, request: Request) -> Response:
        final: Response | None = None
        try:
            async with aclosing(self.stream(request.with_(stream=True))) as events:
                async for event in events:
                    if event.type == "done":
                        final = event.response
        except StreamInterruptedError as exc:
            # Nothing reached the caller yet: the cause is the error a complete() call has.
            cause = exc.__cause__
            raise (cause if isinstance(cause, PolythinkError) else exc) from exc
        if final is None:
            raise self.incomplete_answer()
        note = (
            f"{self.profile.id} answers reasoning calls to {self.source.model!r} only when "
            "streamed: complete() streamed and assembled the answer"
        )
        return with_notes(final, [note])

    def incomplete_answer(self) -> TransientError:
        """The error for a stream under ``complete()`` that ended without a response."""
        return TransientError(
            f"{self.profile.id} closed the stream before it finished",
            provider=self.profile.id,
            source_index=self.index,
            error_type="stream_incomplete",
        )

    def body(self, request: Request) -> dict[str, Any]:
        """Return the exact body this transport sends for ``request``.

        Raises:
            OutputFormatUnsupportedError: the source cannot produce its ``response_format``.
            ThinkingUnsupportedError: a call this model takes on the Responses API only, from a
                source that cannot send it there (see :mod:`polythink.transports.route`).
        """
        return self._prepare(request)[0]

    def _prepare(self, request: Request) -> tuple[dict[str, Any], list[str]]:
        """The body, and the notes its ``response_format`` and what it left out of the
        messages give the response's warnings."""
        written = written_body(self, request)
        if written is not None:
            return written
        self._check_route(request)
        output = output_plan(
            request, model=self.source.model, profile=self.profile, source_index=self.index
        )
        left_out = LeftOut(self.profile.id)
        body = build_body(
            request,
            model=self.source.model,
            profile=self.profile,
            extra_body=self._extra_body,
            output=output,
            breakpoints=self.explicit_breakpoints(request),
            left_out=left_out,
            source_index=self.index,
            instructions=self._instructions,
        )
        notes = list(output.notes) if output is not None else []
        return body, notes + left_out.notes()

    def _checked(self, request: Request) -> tuple[dict[str, Any], list[str]]:
        """The body and notes of :meth:`_prepare`, after the provider's sampling,
        prompt-cache, ``tool_choice`` and per-model parameter rules, which hold for a body
        of the caller's own (``Request.native``) too: the provider refuses ``temperature: 0``
        to a reasoning model whoever wrote it."""
        body, notes = self._prepare(request)
        notes += self.sampling_notes(body, request)
        notes += self.prompt_cache_notes(body, request)
        notes += self._tool_choice_notes(body)
        notes += self._parameter_notes(body)
        return body, notes

    def _check_route(self, request: Request) -> None:
        if self._capability is None or not self.profile.strict_sampling:
            return
        resolution = request.resolution
        applied = resolution.applied_effort if resolution is not None else None
        why = responses_route(self._capability, tools=bool(request.tools), applied=applied)
        if why is not None:
            raise ThinkingUnsupportedError(
                f"{self.profile.id} model {self.source.model!r} cannot take this call on Chat "
                f"Completions: {why}, and provider {self.profile.id!r} has no route to the "
                "Responses API; use an openai or openai-responses source, or send "
                "reasoning_effort='none' where the model takes tools on Chat with it",
                provider=self.profile.id,
                source_index=self.index,
                error_type="tools_need_responses",
            )

    def _tool_choice_notes(self, body: dict[str, Any]) -> list[str]:
        """Refuse or drop a forced ``tool_choice`` the provider refuses while the model
        thinks (see the class docstring); the notes for the response.

        Raises:
            ThinkingUnsupportedError: while ``drop_params`` is off.
        """
        choice = body.get("tool_choice")
        if not (self.profile.thinking_refuses_forced_tool_choice and _forces_a_tool(choice)):
            return []
        cap = self._capability
        thinking = thinking_in_body(body, self.profile.reasoning_wire)
        if thinking is None:
            thinking = cap is not None and (cap.default_reasons or not cap.can_disable)
        if not thinking:
            return []
        keep = (
            "the model cannot switch thinking off"
            if cap is not None and not cap.can_disable
            else "reasoning_effort='none' switches thinking off and keeps it"
        )
        reason = f"tool_choice={choice!r} forces a tool call ({keep})"
        return self.refuse_or_drop(
            body, [("tool_choice", reason)], "while thinking is on", "thinking_parameter_conflict"
        )

    def batch_body(self, request: Request) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """The Chat Completions body a batch line carries (see
        :meth:`~polythink.transports.base.HTTPTransport.batch_body`)."""
        body, notes = self._prepare(request.with_(stream=False))
        notes += self.sampling_notes(body, request)
        notes += self.prompt_cache_notes(body, request)
        notes += self._tool_choice_notes(body)
        return body, notes, {}

    def parse_answer(self, data: Any, hints: Mapping[str, Any], notes: list[str]) -> Response:
        """Parse a Chat Completions answer of a batch (see
        :meth:`~polythink.transports.base.HTTPTransport.parse_answer`)."""
        return with_notes(self._answer(data, None), notes)

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call and parse the answer.

        Raises:
            PolythinkError: the mapped HTTP, transport or in-band error.
        """
        if self._streams_under_the_hood(request):
            return await self._complete_by_stream(request)
        body, notes = self._checked(request)
        data, rate_limit = await self.post_json_with_rate_limit(self.url, body, request)
        return with_notes(self._answer(data, rate_limit), notes)

    def _answer(
        self, data: Any, rate_limit: RateLimit | None, response: httpx.Response | None = None
    ) -> Response:
        """The :class:`Response` of a whole answer's parsed JSON ``data``.

        Raises:
            PolythinkError: an error it carries, or a shape that is not the wire's.
        """
        return self.parsed_answer(
            data,
            rate_limit,
            response,
            failed=data if isinstance(data, Mapping) and _carries_error(data) else None,
            parse=lambda d: parse_completion(
                d,
                profile=self.profile,
                source_index=self.index,
                model=self.source.model,
                rate_limit=rate_limit,
            ),
        )

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; yield text, reasoning, tool-call and usage events, then
        ``done`` with the assembled response.

        Raises:
            PolythinkError: before the first content event, the mapped error (retryable
                where its class is); after it, :class:`StreamInterruptedError` carrying the
                partial response, with the underlying error as ``__cause__``.
        """
        if not request.stream:
            request = request.with_(stream=True)
        relay = self.relay(request)
        assembler = ChatStreamAssembler(self.profile, self.index, self.source.model)
        done = False
        whole: Response | None = None
        try:
            body, notes = self._checked(request)
            self.relay_notes(relay, notes)
            async with self.open_stream(self.url, body, request) as response:
                assembler.rate_limit = parse_rate_limit(response.headers)
                data = await self.whole_answer(response)
                if data is not NOT_WHOLE:
                    whole = self._answer(data, assembler.rate_limit, response)
                else:
                    async with aclosing(self.json_events(response, relay)) as events:
                        async for event_type, chunk in events:
                            if chunk is DONE:
                                done = True
                                break
                            # The event type names the whole event: an "error" event is an
                            # error whatever its data looks like (CASES.md C19).
                            if event_type == "error" or _carries_error(chunk):
                                raise self.in_band_error(chunk, response)
                            try:
                                produced = assembler.feed(chunk)
                            except SHAPE_ERRORS as exc:
                                raise self.malformed(exc, response, event=True) from None
                            for event in produced:
                                yield event
                    # [DONE] without a finish reason is accepted only after output: some
                    # compatible servers omit finish_reason, but a stream with neither is
                    # not a successful empty answer.
                    if assembler.raw_finish is None and not (done and assembler.content_seen):
                        raise self.incomplete(response)
        except PolythinkError as exc:
            if assembler.content_seen or (relay is not None and relay.committed):
                raise self.interrupted(exc, assembler.response(finish="error")) from exc
            raise
        if whole is not None:
            # The server answered in one JSON body, whatever stream: true asked for.
            for event in answer_events(with_notes(whole, notes)):
                yield event
            return
        for event in assembler.flush():
            yield event
        yield StreamEvent("done", response=with_notes(assembler.response(), notes))
