"""OpenAI Responses API (``POST {base_url}/responses``), and OpenRouter's Responses endpoint.

Requests are stateless: polythink never sends ``previous_response_id``; every call carries
the whole conversation in ``input``. An assistant turn that polythink parsed from this wire
keeps the response's output items verbatim (``Message.reasoning_items`` with
``reasoning_format`` equal to the profile's), and they are sent back unchanged on the next
turn: reasoning items with their ``encrypted_content``, message items, function calls.

``include`` and ``store``, decided from the recordings and the documented failure modes:

- ``include: ["reasoning.encrypted_content"]`` is sent when the profile asks for it
  (``encrypted_reasoning``, OpenAI) and the model reasons: by the capability registry, or,
  for an unregistered model, when the call applies a reasoning tier. Every recorded client
  that asked a reasoning model to reason sent it (pai_openai_responses_reasoning_summary_*,
  llm_openai_responses_plain_stream, pai_openai_chat_reasoning_effort_and_responses; the
  2025-03 recording pai_openai_responses_reasoning_effort_low predates that practice). It is
  never sent to a model that does not reason: OpenAI answers 400 "Encrypted content is not
  supported with this model" (ShishirPatil/gorilla#1148, 2025-08).
- ``store`` is left to the server (four of the five OpenAI recordings do not send it). With
  the encrypted content in hand the history replays under either setting; a caller who wants
  no retention sends ``{"store": false}`` through ``extra_body`` (as simonw/llm does). With
  ``store: false`` in the final body, reasoning items that carry no ``encrypted_content``
  are left out of ``input``: the server cannot look them up and answers 404 "Item with id
  'rs_…' not found. Items are not persisted when `store` is set to false" (vercel/ai#7543,
  2025-07).

Summaries are the caller's choice (``{"reasoning": {"summary": "auto"}}`` through
``extra_body``): OpenAI refuses them with 400 for organisations that are not verified, and
the reasoning-token count is enough to observe reasoning. Reasoning text is the summary
(``summary_text``) and raw reasoning (``reasoning_text`` content, OpenRouter's gpt-oss) of
every reasoning item, parts joined with a blank line. ``response_format`` is ``text.format``
(:func:`output_plan`); refusal parts count as text and are also ``Response.refusal``.
Facts: WIRE.md §2 (OpenAI SDK e43b4224, 2026-08-21), the Responses recordings in
``../shared/fixtures/real`` (2025-03 to 2026-05).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import httpx

from polythink.errors import (
    PolythinkError,
    RequestRejectedError,
    TransientError,
)
from polythink.pricing import reported_cost
from polythink.providers import ProviderProfile
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
    joined_system,
    mark_last_entry,
    part_types,
    prompt_cache_fields,
    text_of,
    token_count,
    usage_counts,
    with_notes,
    with_rate_limit,
)
from polythink.transports.carry import (
    EMPTY_TURN,
    EMPTY_WHY,
    REASONING,
    REASONING_ITEMS,
    REASONING_ITEMS_WHY,
    LeftOut,
    extra_keys,
    items_unsent,
    name_note,
    reasoning_unsent,
    refuse_chat_only,
)
from polythink.transports.finish import RESPONSES_INCOMPLETE, Finish, unknown_finish
from polythink.transports.headers import parse_rate_limit
from polythink.transports.instructions import (
    InstructionPlan,
    after_conversation,
    instruction_plan,
    per_call_text,
)
from polythink.transports.native import written_body
from polythink.transports.schema import OutputPlan, for_call, merge_output, responses_output
from polythink.types import (
    Cost,
    Effort,
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "ENCRYPTED_REASONING",
    "OpenAIResponsesTransport",
    "ResponsesStreamAssembler",
    "build_body",
    "finish_reason",
    "output_plan",
    "parse_response",
    "parse_usage",
]

logger = logging.getLogger("polythink.transports")

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that returns reasoning items with ``encrypted_content``."""

_PART_SEPARATOR = "\n\n"
_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
    }
)


_SYSTEM_KEYS = frozenset({"type", "text"})
_TEXT_KEYS = frozenset({"type", "text", "prompt_cache_breakpoint"})
_IMAGE_KEYS = frozenset({"type", "image_url", "prompt_cache_breakpoint"})
_FILE_KEYS = frozenset({"type", "file", "prompt_cache_breakpoint"})
_ASSISTANT_TEXT_KEYS = frozenset({"type", "text", "refusal"})
_WIRE = "the Responses API"
_REASONING_WHY = (
    f"{_WIRE} takes reasoning back only as its own reasoning items (encrypted_content); the "
    "turn goes without it"
)
"""Why a reasoning text another wire or the caller wrote is not sent: a ``reasoning`` input
item is one the API returned (``ResponseReasoningItemParam`` with its id and
``encrypted_content``, WIRE.md §2.5); an input message has no reasoning field."""


def _keys_note(
    part: Mapping[str, Any], carried: frozenset[str], index: int, left_out: LeftOut
) -> None:
    """Note the keys of content part ``index`` this wire has no field for."""
    extra = extra_keys(part, carried)
    if extra:
        left_out.add_part_keys(
            extra, index, f"{_WIRE} has no such field on a {part.get('type')} part"
        )


def _input_part(part: Any, index: int, left_out: LeftOut) -> Any:
    """A Chat content part as a Responses input part; a Responses part as it is.

    ``image_url`` becomes ``input_image`` with its ``detail`` (the chat part's
    ``image_url.detail``, else ``auto``, the API's default): ``InputImageContent`` requires
    both ``type`` and ``detail`` (``../shared/wire/specs/openai_openapi.yaml``, 2026-08-21;
    ``ResponseInputImageParam`` in the openai SDK 3.57). ``file`` becomes ``input_file``
    with the same ``file_data`` / ``file_id`` / ``filename``. A ``prompt_cache_breakpoint``
    goes with the part (``InputTextContentParam``, ``InputImageContentParamAutoParam`` and
    ``InputFileContentParam`` declare it); another key (Anthropic's ``cache_control``) has
    no field here and is noted.
    """
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind == "text":
        converted: dict[str, Any] = {"type": "input_text", "text": part.get("text", "")}
        carried = _TEXT_KEYS
    elif kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        detail = image.get("detail") if isinstance(image, Mapping) else None
        converted = {"type": "input_image", "image_url": url, "detail": detail or "auto"}
        carried = _IMAGE_KEYS
    elif kind == "file":
        converted = {"type": "input_file", **part["file"]}
        carried = _FILE_KEYS
    else:
        return part
    if len(part) > 2:
        if "prompt_cache_breakpoint" in part:
            converted["prompt_cache_breakpoint"] = part["prompt_cache_breakpoint"]
        _keys_note(part, carried, index, left_out)
    return converted


def _content(content: Any, role: str, left_out: LeftOut) -> Any:
    """Return Responses content for a message: strings as is, chat-style parts converted
    (:func:`_input_part`); ``left_out`` notes what is left out.

    An assistant's text and refusal parts become one string: an input message's content
    list declares input parts only (``EasyInputMessage``, ``InputMessageContentList``), while
    the API takes an assistant's text as ``output_text``, and a string is what both accept.
    A refusal is what the model said, so it is text here (the refusal part exists only in
    an ``OutputMessage``, which needs the item's id and status).
    """
    if not isinstance(content, list):
        return content if content is not None else ""
    if role != "assistant":
        return [_input_part(part, index, left_out) for index, part in enumerate(content)]
    texts: list[str] = []
    parts: list[Any] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("text", "refusal"):
            _keys_note(part, _ASSISTANT_TEXT_KEYS, index, left_out)
            texts.append(str(part.get(kind, "")))
            parts.append({"type": "output_text", "text": texts[-1]})
        else:
            parts.append(part)
    return "".join(texts) if len(texts) == len(parts) else parts


def _assistant_content(message: Message, left_out: LeftOut) -> Any:
    """An assistant turn's content with its ``refusal`` after the text (a blank line
    between); empty when it has neither."""
    content = _content(message.content, "assistant", left_out) if message.content else ""
    refusal = message.refusal
    if not refusal:
        return content
    if isinstance(content, list):
        return [*content, {"type": "output_text", "text": refusal}]
    return content + _PART_SEPARATOR + refusal if content else refusal


def _instructions_text(message: Message, left_out: LeftOut) -> str:
    """A leading system message as ``instructions`` text: its text parts joined by a blank
    line, as separate system messages are; ``instructions`` is one string, so a part's other
    keys (a cache marker) are noted."""
    content = message.content
    if not isinstance(content, list):
        return content or ""
    for index, part in enumerate(content):
        extra = extra_keys(part, _SYSTEM_KEYS)
        if extra:
            left_out.add_part_keys(
                extra,
                index,
                "instructions is one string; PromptCache(breakpoints='explicit') sends "
                "the system prompt as an input message with a breakpoint",
            )
    return _PART_SEPARATOR.join(str(part.get("text", "")) for part in content)


_INPUT = ("text", "image_url", "file", "input_text", "input_image", "input_file")
RESPONSES_PARTS = part_types(
    system=("text", "input_text"),
    user=_INPUT,
    assistant=("text", "refusal", "output_text"),
    tool=_INPUT,
)
"""Content part types of the Responses wire, by role: ``InputContent`` (``input_text``,
``input_image``, ``input_file``) and an assistant message's ``output_text`` / ``refusal``
(openai OpenAPI document, 2026-11-28, ``../shared/wire/specs``), plus the Chat parts this
transport converts (``text``, ``image_url`` to ``input_image``, ``file`` to ``input_file``
with the same ``file_data`` / ``file_id`` / ``filename``). System text only: a leading
system message becomes ``instructions``."""


_UNSEALED = "the reasoning items without encrypted_content"
_UNSEALED_WHY = (
    "store is false, so the server keeps no item to look them up by (404 'Items are not "
    "persisted when `store` is set to false', vercel/ai#7543): that reasoning is lost"
)


def _rejected(message: str, profile: ProviderProfile, source_index: int | None) -> PolythinkError:
    return RequestRejectedError(
        message,
        provider=profile.id,
        source_index=source_index,
        error_type="invalid_request",
    )


def _input(
    messages: Sequence[Message],
    profile: ProviderProfile,
    source_index: int | None,
    left_out: LeftOut,
    *,
    system_items: bool = False,
    unsealed: list[int] | None = None,
) -> tuple[str | None, list[Any]]:
    """Return ``(instructions, input items)`` for the conversation.

    System and developer messages before the first other message become ``instructions``
    (joined by a blank line, as pai_openai_responses_reasoning_summary_auto sends its system
    prompt; so are the text parts of one message); later ones stay in ``input`` with their
    role, and so do the leading ones with ``system_items`` (a breakpoint needs a content
    part to sit on, and ``instructions`` is a string).

    A message's ``name`` has no field in an input message and is noted in ``left_out``; a
    tool message's ``name`` is ``function_call_output.name``. An assistant's ``refusal`` is
    its text; ``audio`` and a legacy ``function_call`` are refused. An assistant turn with
    nothing to send is left out and noted.

    Raises:
        ContentUnsupportedError: a content part, ``audio`` or ``function_call`` this wire
            cannot carry, naming the message.
    """
    instructions: list[str] = []
    items: list[Any] = []
    leading = not system_items
    for position, message in enumerate(messages):
        role = message.role
        left_out.position = position
        if message.content.__class__ is list:
            check_parts(message, RESPONSES_PARTS, profile, source_index, position)
        if message.name is not None and role != "tool":
            name_note(left_out, _WIRE)
        if role in ("system", "developer"):
            if leading:
                instructions.append(_instructions_text(message, left_out))
            else:
                items.append({"role": role, "content": _content(message.content, role, left_out)})
            continue
        leading = False
        if role == "tool":
            # A list (text and images: a screenshot tool) becomes the content array the
            # API takes as a function call's output (FunctionCallOutputItemParam.output,
            # openai_openapi.yaml 2026-08-21); plain text stays a string.
            output = (
                _content(message.content, "user", left_out)
                if isinstance(message.content, list)
                else message.text()
            )
            result: dict[str, Any] = {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": output,
            }
            if message.name:
                result["name"] = message.name
            items.append(result)
        elif role == "assistant":
            if message.audio_id is not None or message.function_call is not None:
                refuse_chat_only(message, position, profile, source_index)
            if reasoning_unsent(message, profile):
                left_out.add(REASONING, _REASONING_WHY)
            if items_unsent(message, profile):
                left_out.add(REASONING_ITEMS, REASONING_ITEMS_WHY)
            if message.reasoning_items and message.reasoning_format == profile.reasoning_format:
                items.extend(i if isinstance(i, dict) else dict(i) for i in message.reasoning_items)
                if unsealed is not None and any(
                    i.get("type") == "reasoning" and not i.get("encrypted_content")
                    for i in message.reasoning_items
                ):
                    unsealed.append(position)
                continue
            content = (
                message.content
                if message.content.__class__ is str and message.refusal is None
                else _assistant_content(message, left_out)
            )
            if content:
                items.append({"role": "assistant", "content": content})
            elif not message.tool_calls:
                left_out.add(EMPTY_TURN, EMPTY_WHY)
            for call in message.tool_calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
        else:
            items.append({"role": role, "content": _content(message.content, role, left_out)})
    return (_PART_SEPARATOR.join(instructions) if instructions else None), items


def _tool_choice(choice: str | Mapping[str, Any]) -> Any:
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def build_body(
    request: Request,
    *,
    model: str,
    profile: ProviderProfile,
    extra_body: Mapping[str, Any] | None = None,
    include_encrypted: bool = False,
    drop_params: bool = False,
    source_index: int | None = None,
    output: OutputPlan | None = None,
    breakpoints: bool = False,
    left_out: LeftOut | None = None,
    placement: InstructionPlan | None = None,
) -> dict[str, Any]:
    """Build the Responses request body for ``request``.

    Sets ``model``, ``input`` (and ``instructions`` from leading system messages),
    ``stream``, ``include`` when ``include_encrypted``, ``max_output_tokens``, sampling,
    ``tools`` (``strict`` is always sent, false unless the tool sets it: the field is
    required, openai_openapi.yaml ``FunctionTool`` 2026-08-21) and ``tool_choice``; then
    deep-merges the reasoning fragment, the source's
    ``extra_body`` and the call's, in that order (later wins; lists are replaced whole).
    The call's per-call instructions (``request.system_suffix``, then the JSON-mode
    instruction where one is needed) go where ``placement`` says
    (:mod:`polythink.transports.instructions`; by default from the model and the profile):
    after the conversation, as a last ``system`` input message on OpenAI, so that
    ``instructions`` and the items already sent stay this call's prefix; or, with
    ``system``, the suffix appended to ``instructions`` after a blank line and the JSON-mode
    instruction opening ``input`` as a developer message (OpenAI looks for "json" in the
    input messages, not in ``instructions``).
    ``request.prompt_cache`` adds ``prompt_cache_key`` / ``prompt_cache_retention``.
    With ``store: false`` in the result, reasoning items without ``encrypted_content`` are
    left out of ``input`` (see the module docstring).

    ``request.response_format`` sets ``text.format`` (:func:`output_plan`; ``output`` when
    the caller computed it), before the overrides.

    With ``breakpoints`` (OpenAI's explicit prompt-cache breakpoints, decided by the
    transport: :meth:`~polythink.transports.base.HTTPTransport.explicit_breakpoints`) the
    system prompt stays in ``input`` as system (or developer) messages, since
    ``instructions`` is a string and a breakpoint sits on a content part: the last
    ``input_text`` of the last of them carries ``prompt_cache_breakpoint: {"mode":
    "explicit"}``; so does the last input message or function call output before the
    per-call instructions (with ``system``, the suffix follows the system prompt's
    breakpoint as one more part). What the wire has no field for (a message's ``name``, a
    part's ``cache_control``, an empty assistant turn) is noted in ``left_out``.

    Raises:
        RequestRejectedError: ``stop`` was given (the Responses API has no stop sequences)
            and ``drop_params`` is false.
        OutputFormatUnsupportedError: see :func:`output_plan`.
        ContentUnsupportedError: a content part, an assistant's ``audio`` or legacy
            ``function_call`` this wire cannot carry.
    """
    if request.stop and not drop_params:
        raise _rejected(
            "the Responses API has no stop sequences; remove stop= or set "
            "Source(drop_params=True) to drop it for this source",
            profile,
            source_index,
        )
    if output is None and request.response_format is not None:
        output = output_plan(request, model=model, profile=profile, source_index=source_index)
    unsealed: list[int] = []
    instructions, items = _input(
        request.messages,
        profile,
        source_index,
        left_out if left_out is not None else LeftOut(profile.id),
        system_items=breakpoints,
        unsealed=unsealed,
    )
    plan = placement if placement is not None else instruction_plan(profile, model)
    given = output.instruction if output is not None else None
    if breakpoints:
        mark_last_entry(items, text_type="input_text", roles=("system", "developer"))
    if plan.placement == "system":
        if breakpoints:
            if request.system_suffix:
                append_system_suffix(items, request.system_suffix, "input_text")
        else:
            instructions = joined_system(instructions, request.system_suffix)
        if given:
            items = [{"role": "developer", "content": given}, *items]
    text = per_call_text(request.system_suffix, given)
    if breakpoints:
        mark_last_entry(
            items, text_type="input_text", roles=("user", "system", "developer", "tool")
        )
    if plan.placement != "system" and text:
        after_conversation(items, text, plan.placement, text_type="input_text")
    body: dict[str, Any] = {"model": model, "input": items}
    if instructions is not None:
        body["instructions"] = instructions
    body["stream"] = request.stream
    if include_encrypted:
        body["include"] = [ENCRYPTED_REASONING]
    if request.max_tokens is not None:
        body[profile.max_tokens_field] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": bool(tool.strict),
            }
            for tool in request.tools
        ]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.prompt_cache is not None:
        body.update(prompt_cache_fields(request.prompt_cache, profile))
    if output is not None:
        merge_output(body, output.fields, (extra_body, request.extra_body))
    apply_overrides(body, request, extra_body)
    if body.get("store") is False:
        if unsealed and left_out is not None:
            left_out.extend({(_UNSEALED, _UNSEALED_WHY): unsealed})
        body["input"] = [
            item
            for item in body["input"]
            if not (
                isinstance(item, Mapping)
                and item.get("type") == "reasoning"
                and not item.get("encrypted_content")
            )
        ]
    return body


def output_plan(
    request: Request, *, model: str, profile: ProviderProfile, source_index: int | None = None
) -> OutputPlan | None:
    """What this call sends for its ``response_format``
    (:func:`polythink.transports.schema.responses_output`), or ``None`` without one.

    Raises:
        OutputFormatUnsupportedError: a schema strict mode cannot express.
    """
    fmt = request.response_format
    if fmt is None:
        return None
    plan = responses_output(fmt, provider=profile.id, model=model, source_index=source_index)
    return for_call(plan, fmt, request.messages)


def parse_usage(usage: Any, *, counts_reasoning: bool | None = None) -> Usage | None:
    """Normalise a Responses ``usage`` object; ``None`` when absent.

    ``input_tokens`` already includes cached tokens; cache reads come from
    ``input_tokens_details.cached_tokens``, writes from ``input_tokens_details.
    cache_write_tokens`` (2026), reasoning from ``output_tokens_details.reasoning_tokens``
    (part of ``output_tokens`` on OpenAI). A field the provider did not send stays ``None``.
    ``output_tokens`` always includes reasoning; ``counts_reasoning`` is the provider's
    documented convention, ``None`` to decide it from ``total_tokens``
    (:func:`polythink.transports.base.output_with_reasoning`).
    """
    if not isinstance(usage, Mapping):
        return None
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    ind = input_details if isinstance(input_details, Mapping) else {}
    outd = output_details if isinstance(output_details, Mapping) else {}
    prompt, output, reasoning = usage_counts(
        usage,
        outd,
        prompt_key="input_tokens",
        output_key="output_tokens",
        counts_reasoning=counts_reasoning,
    )
    return Usage(
        input_tokens=prompt,
        output_tokens=output,
        reasoning_tokens=reasoning,
        cache_read_tokens=token_count(ind.get("cached_tokens")),
        cache_write_tokens=token_count(ind.get("cache_write_tokens")),
    )


def finish_reason(
    status: Any, incomplete: Any, *, has_tool_calls: bool, refused: bool = False
) -> str:
    """Map a response ``status`` (and ``incomplete_details``) to polythink's finish reason.

    ``completed`` (or no status) -> ``tool_calls`` when the output has function calls,
    ``content_filter`` when the model refused, else ``stop``; ``incomplete`` with reason
    ``max_output_tokens`` -> ``length``, with ``content_filter`` -> ``content_filter``
    (:data:`polythink.transports.finish.RESPONSES_INCOMPLETE`); ``failed`` or ``cancelled``
    -> ``error``; any other status, or any other incomplete reason, -> ``error`` with a
    warning, logged once (:func:`polythink.transports.finish.unknown_finish`; statuses:
    openai-openapi ``Response.status``, ``../shared/wire/specs``).
    """
    return _finish(
        status, incomplete, has_tool_calls=has_tool_calls, refused=refused, provider="openai"
    ).reason


def _finish(
    status: Any, incomplete: Any, *, has_tool_calls: bool, refused: bool, provider: str
) -> Finish:
    """The mapped finish with the native value: the incomplete reason, else the status."""
    native = status if isinstance(status, str) else None
    if status == "incomplete":
        reason = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
        native = reason if isinstance(reason, str) else native
        mapped = RESPONSES_INCOMPLETE.get(reason) if isinstance(reason, str) else None
        if mapped is not None:
            return Finish(mapped, native)
        return unknown_finish(provider, native or "incomplete")
    if status in ("failed", "cancelled"):
        return Finish("error", native)
    if status is not None and status != "completed":
        return unknown_finish(provider, str(status))
    if has_tool_calls:
        return Finish("tool_calls", native)
    return Finish("content_filter" if refused else "stop", native)


def _reasoning_parts(item: Mapping[str, Any]) -> list[str]:
    """The non-empty texts of a reasoning item: summary parts, then reasoning content."""
    texts: list[str] = []
    for key in ("summary", "content"):
        parts = item.get(key)
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) and part["text"]:
                texts.append(part["text"])
    return texts


def _message_text(item: Mapping[str, Any]) -> tuple[str, str | None]:
    """Return ``(text, refusal)`` of a message item: refusal text counts as text, and is also
    returned on its own (``None`` when the item has no refusal part)."""
    pieces: list[str] = []
    refusals: list[str] = []
    parts = item.get("content")
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "output_text":
            pieces.append(text_of(part.get("text"), "an output_text part's text"))
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            pieces.append(part["refusal"])
            refusals.append(part["refusal"])
    return "".join(pieces), "".join(refusals) if refusals else None


def _call(item: Mapping[str, Any]) -> ToolCall:
    arguments = item.get("arguments")
    return ToolCall(
        id=str(item.get("call_id") or item.get("id") or ""),
        name=str(item.get("name") or ""),
        arguments=arguments if isinstance(arguments, str) and arguments else "{}",
    )


def parse_response(
    data: Any, *, profile: ProviderProfile, source_index: int, model: str
) -> Response:
    """Parse a non-streaming Responses body into a :class:`Response`.

    Text is every ``output_text`` part of the message items; reasoning every summary and
    ``reasoning_text`` part of the reasoning items, joined with a blank line; tool calls the
    ``function_call`` items (``call_id``, ``name``, ``arguments``). All output items are
    kept verbatim on ``message.reasoning_items``.

    Raises:
        TransientError: when the body is not a response object.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("output"), list):
        raise TransientError(
            f"{profile.id} answered without an output list",
            provider=profile.id,
            source_index=source_index,
        )
    output = [item for item in data["output"] if isinstance(item, Mapping)]
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    refusals: list[str] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            piece, refusal = _message_text(item)
            text.append(piece)
            if refusal is not None:
                refusals.append(refusal)
        elif kind == "reasoning":
            reasoning.extend(_reasoning_parts(item))
        elif kind == "function_call":
            calls.append(_call(item))
    mapped = _finish(
        data.get("status"),
        data.get("incomplete_details"),
        has_tool_calls=bool(calls),
        refused=bool(refusals),
        provider=profile.id,
    )
    return assistant_response(
        text="".join(text),
        reasoning=_PART_SEPARATOR.join(reasoning) or None,
        calls=calls,
        items=tuple(output),
        finish=mapped.reason,
        native_finish_reason=mapped.native,
        warnings=[mapped.note] if mapped.note else None,
        usage=parse_usage(data.get("usage"), counts_reasoning=profile.completion_counts_reasoning),
        cost=reported_cost(data.get("usage")),
        model=data.get("model") or model,
        response_id=data.get("id"),
        profile=profile,
        source_index=source_index,
        refusal="".join(refusals) if refusals else None,
        service_tier=served_tier(profile.service_tiers, data.get("service_tier")),
    )


class ResponsesStreamAssembler:
    """Turn Responses stream events into polythink events and, at the end, a :class:`Response`.

    Text comes from ``response.output_text.delta``, reasoning from
    ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` (a blank
    line between two parts, so the streamed reasoning equals the non-streamed one); a tool
    call is yielded once its arguments are complete (``response.function_call_arguments.done``,
    else its ``response.output_item.done``). The final items kept for
    the next turn are those of ``response.output_item.done``: the ``encrypted_content`` of
    ``.added`` may be incomplete (OpenAI SDK f38355ec, 2026-08-14), and OpenRouter renames
    items in its final ``response.completed``. An item whose text never arrived as deltas
    yields it from its ``.done`` item. Usage and status come from ``response.completed`` or
    ``response.incomplete``.
    """

    def __init__(self, profile: ProviderProfile, source_index: int, model: str) -> None:
        self.profile = profile
        self.source_index = source_index
        self.model = model
        self.response_id: str | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.items: dict[int, Mapping[str, Any]] = {}
        self.calls: dict[int, ToolCall] = {}
        self.status: Any = None
        self.incomplete: Any = None
        self.usage: Usage | None = None
        self.cost: Cost | None = None
        self.finished = False
        self.refused = False
        self.refusal: list[str] = []
        self.content_seen = False
        self.service_tier: str | None = None
        self._parts: set[tuple[int, str, int]] = set()
        self._streamed: set[Any] = set()
        self._added: dict[int, Mapping[str, Any]] = {}
        self._positions: dict[int, int] = {}
        self._delta_args: dict[int, list[str]] = {}

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one parsed stream event; return the events it produces."""
        kind = event.get("type")
        out: list[StreamEvent] = []
        index = event.get("output_index")
        index = index if type(index) is int else -1
        if kind in _DELTAS:
            item_id = event.get("item_id")
            if item_id:
                self._streamed.add(item_id)
            if index >= 0:
                self._streamed.add(index)
        if kind == "response.output_text.delta":
            self._text(event.get("delta"), out)
        elif kind == "response.reasoning_summary_text.delta":
            self._reason(event.get("delta"), (index, "summary", event.get("summary_index", 0)), out)
        elif kind == "response.reasoning_text.delta":
            self._reason(event.get("delta"), (index, "content", event.get("content_index", 0)), out)
        elif kind == "response.refusal.delta":
            self.refused = True
            delta = event.get("delta")
            if isinstance(delta, str):
                self.refusal.append(delta)
            self._text(delta, out)
        elif kind == "response.output_item.added":
            item = event.get("item")
            if isinstance(item, Mapping) and item.get("type") == "function_call":
                self._added[index] = item
                self._call_delta(index, item, item.get("arguments"), out)
        elif kind == "response.function_call_arguments.delta":
            added = self._added.get(index)
            if added is not None:
                self._call_delta(index, added, event.get("delta"), out)
        elif kind == "response.function_call_arguments.done":
            added = self._added.get(index)
            if added is not None:
                self._emit_call(index, {**added, "arguments": event.get("arguments")}, out)
        elif kind == "response.output_item.done":
            item = event.get("item")
            if isinstance(item, Mapping):
                self._item_done(index, item, out)
        elif kind in ("response.completed", "response.incomplete"):
            self._finish(event.get("response"), out)
        elif kind in ("response.created", "response.in_progress"):
            self._meta(event.get("response"))
        return out

    def _meta(self, response: Any) -> None:
        if not isinstance(response, Mapping):
            return
        if response.get("model"):
            self.model = response["model"]
        if self.response_id is None and response.get("id"):
            self.response_id = response["id"]
        tier = response.get("service_tier")
        if tier:
            self.service_tier = served_tier(self.profile.service_tiers, tier)

    def _text(self, delta: Any, out: list[StreamEvent]) -> None:
        if not isinstance(delta, str) or not delta:
            return
        self.text.append(delta)
        self.content_seen = True
        out.append(StreamEvent("text", text=delta))

    def _reason(self, delta: Any, part: tuple[int, str, int], out: list[StreamEvent]) -> None:
        if not isinstance(delta, str) or not delta:
            return
        if part not in self._parts:
            self._parts.add(part)
            if self.reasoning:
                delta = _PART_SEPARATOR + delta
        self.reasoning.append(delta)
        self.content_seen = True
        out.append(StreamEvent("reasoning", text=delta))

    def _item_done(self, index: int, item: Mapping[str, Any], out: list[StreamEvent]) -> None:
        if index < 0:
            index = max(self.items, default=-1) + 1
        self.items[index] = item
        kind = item.get("type")
        if kind == "function_call":
            self._emit_call(index, item, out)
        elif index not in self._streamed and item.get("id") not in self._streamed:
            if kind == "message":
                text, refusal = _message_text(item)
                if refusal is not None:
                    self.refused = True
                    self.refusal.append(refusal)
                self._text(text, out)
            elif kind == "reasoning":
                for position, piece in enumerate(_reasoning_parts(item)):
                    self._reason(piece, (index, "done", position), out)

    def _call_delta(
        self, index: int, item: Mapping[str, Any], piece: Any, out: list[StreamEvent]
    ) -> None:
        position = self._positions.get(index)
        if position is None:
            position = self._positions[index] = len(self._positions)
        elif not isinstance(piece, str) or not piece:
            return
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name")
        delta = ToolCallDelta(
            index=position,
            id=str(call_id) if call_id else None,
            name=str(name) if name else None,
            arguments=piece if isinstance(piece, str) else "",
        )
        if delta.arguments:
            self._delta_args.setdefault(index, []).append(delta.arguments)
        self.content_seen = True
        out.append(StreamEvent("tool_call_delta", tool_call_delta=delta))

    def _emit_call(self, index: int, item: Mapping[str, Any], out: list[StreamEvent]) -> None:
        if index in self.calls:
            return
        call = _call(item)
        if index not in self._positions:
            # A call that came whole (no .added, no argument deltas) still gets its delta.
            self._call_delta(index, item, call.arguments, out)
        elif not self._delta_args.get(index) and call.arguments != "{}":
            self._call_delta(index, item, call.arguments, out)
        self.calls[index] = call
        self.content_seen = True
        out.append(StreamEvent("tool_call", tool_call=call))

    def _finish(self, response: Any, out: list[StreamEvent]) -> None:
        self.finished = True
        if not isinstance(response, Mapping):
            return
        self._meta(response)
        self.status = response.get("status")
        self.incomplete = response.get("incomplete_details")
        output = response.get("output")
        if isinstance(output, list):
            for index, item in enumerate(output):
                if index not in self.items and isinstance(item, Mapping):
                    self._item_done(index, item, out)
        self.usage = parse_usage(
            response.get("usage"), counts_reasoning=self.profile.completion_counts_reasoning
        )
        self.cost = reported_cost(response.get("usage"))
        if self.usage is not None:
            out.append(StreamEvent("usage", usage=self.usage))

    def response(self, *, finish: str | None = None) -> Response:
        """Assemble the response from everything consumed so far."""
        calls = [self.calls[i] for i in sorted(self.calls)]
        mapped = _finish(
            self.status,
            self.incomplete,
            has_tool_calls=bool(calls),
            refused=self.refused,
            provider=self.profile.id,
        )
        return assistant_response(
            text="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            calls=calls,
            items=tuple(self.items[i] for i in sorted(self.items)),
            finish=finish or mapped.reason,
            native_finish_reason=mapped.native,
            warnings=[mapped.note] if mapped.note else None,
            usage=self.usage,
            cost=self.cost,
            model=self.model,
            response_id=self.response_id,
            profile=self.profile,
            source_index=self.source_index,
            refusal="".join(self.refusal) or None,
            service_tier=self.service_tier,
        )


class OpenAIResponsesTransport(HTTPTransport):
    """The Responses API over HTTP for one source (``POST {base_url}/responses``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = self.api_url("/responses")
        self._extra_body = self.source.extra_body
        capability = self.capability
        self._model_reasons = capability.reasons if capability is not None else None
        self._modes = capability.reasoning_modes if capability is not None else None
        self._dropped_stop = False
        self._placement = instruction_plan(self.profile, self.source.model)

    def _include_encrypted(self, request: Request) -> bool:
        if not self.profile.encrypted_reasoning:
            return False
        if self._model_reasons is not None:
            return self._model_reasons
        resolution = request.resolution
        applied = resolution.applied_effort if resolution is not None else None
        return applied is not None and applied is not Effort.NONE

    def body(self, request: Request) -> dict[str, Any]:
        """Return the exact body this transport sends for ``request``.

        Raises:
            RequestRejectedError: see :func:`build_body`.
        """
        return self._build(request, LeftOut(self.profile.id))

    def _build(self, request: Request, left_out: LeftOut) -> dict[str, Any]:
        drop = self.source.drop_params
        if request.stop and drop and not self._dropped_stop:
            self._dropped_stop = True
            logger.warning(
                "%s/%s: dropped stop=%r, the Responses API has no stop sequences "
                "(drop_params=True; logged once per source)",
                self.profile.id,
                self.source.model,
                list(request.stop),
            )
        return build_body(
            request,
            model=self.source.model,
            profile=self.profile,
            extra_body=self._extra_body,
            include_encrypted=self._include_encrypted(request),
            drop_params=drop,
            source_index=self.index,
            output=self._output(request),
            breakpoints=self.explicit_breakpoints(request),
            left_out=left_out,
            placement=self._placement,
        )

    def _prepare(self, request: Request) -> tuple[dict[str, Any], list[str]]:
        """The body and the notes for the response's warnings (:meth:`_notes`, then what
        the body left out of the messages); a body of the caller's own (``Request.native``)
        as written (:func:`~polythink.transports.native.native_body`), under the model's
        sampling and prompt-cache rules."""
        written = written_body(self, request)
        if written is not None:
            body, notes = written
            notes += self.sampling_notes(body, request)
            notes += self.prompt_cache_notes(body, request)
            return body, notes
        left_out = LeftOut(self.profile.id)
        body = self._build(request, left_out)
        return body, self._notes(body, request) + left_out.notes()

    def _output(self, request: Request) -> OutputPlan | None:
        return output_plan(
            request, model=self.source.model, profile=self.profile, source_index=self.index
        )

    def _notes(self, body: dict[str, Any], request: Request) -> list[str]:
        """The response's notes: the ``response_format``'s, then the sampling, prompt-cache and
        ``reasoning.mode`` rules' (applied to ``body``)."""
        output = self._output(request)
        notes = list(output.notes) if output is not None else []
        notes += self.sampling_notes(body, request)
        notes += self.prompt_cache_notes(body, request)
        mode = self.source.reasoning_mode
        if mode is None:
            return notes
        if self._modes is not None and mode not in self._modes:
            takes = ", ".join(self._modes) or "no reasoning.mode"
            return notes + self.refuse_or_drop(
                body,
                [("reasoning.mode", f"reasoning_mode={mode!r} (the model takes {takes})")],
                "(reasoning.mode is for GPT-5.6 and later: O-SDK, OR-DOC)",
            )
        reasoning = body.get("reasoning")
        if not isinstance(reasoning, dict):
            reasoning = body["reasoning"] = {}
        reasoning.setdefault("mode", mode)
        return notes

    def batch_body(self, request: Request) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """The Responses body a batch line carries (see
        :meth:`~polythink.transports.base.HTTPTransport.batch_body`)."""
        body, notes = self._prepare(request.with_(stream=False))
        return body, notes, {}

    def parse_answer(self, data: Any, hints: Mapping[str, Any], notes: list[str]) -> Response:
        """Parse a Responses answer of a batch (see
        :meth:`~polythink.transports.base.HTTPTransport.parse_answer`)."""
        return with_notes(self._answer(data, None), notes)

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call and parse the answer.

        Raises:
            PolythinkError: the mapped HTTP, transport or in-band error (a ``failed``
                response is mapped by its ``error.code``).
        """
        body, notes = self._prepare(request)
        data, rate_limit = await self.post_json_with_rate_limit(self.url, body, request)
        return with_notes(self._answer(data, rate_limit), notes)

    def _answer(
        self, data: Any, rate_limit: RateLimit | None, response: httpx.Response | None = None
    ) -> Response:
        """The :class:`Response` of a whole answer's parsed JSON ``data``.

        Raises:
            PolythinkError: an error it carries, or a shape that is not the wire's.
        """
        failed = isinstance(data, Mapping) and (
            data.get("status") == "failed" or (data.get("error") and not data.get("output"))
        )
        answer = self.parsed_answer(
            data,
            rate_limit,
            response,
            failed=(data.get("error") or data) if failed else None,
            parse=lambda d: parse_response(
                d, profile=self.profile, source_index=self.index, model=self.source.model
            ),
        )
        return with_rate_limit(answer, rate_limit)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; yield text, reasoning, tool-call and usage events, then
        ``done`` with the assembled response.

        The event kind is read from each JSON event's ``type`` (OpenRouter sends no
        ``event:`` lines). ``response.completed`` or ``response.incomplete`` ends the
        stream (the last event of openai_openapi.yaml's streamed example), as does
        ``data: [DONE]`` (OpenRouter's, after ``response.completed``).

        Raises:
            PolythinkError: before the first content event, the mapped error (an ``error``
                event or ``response.failed`` by its code); after it,
                :class:`StreamInterruptedError` carrying the partial response, with the
                underlying error as ``__cause__``.
        """
        if not request.stream:
            request = request.with_(stream=True)
        relay = self.relay(request)
        assembler = ResponsesStreamAssembler(self.profile, self.index, self.source.model)
        whole: Response | None = None
        try:
            body, notes = self._prepare(request)
            self.relay_notes(relay, notes)
            async with self.open_stream(self.url, body, request) as response:
                rate_limit = parse_rate_limit(response.headers)
                data = await self.whole_answer(response)
                if data is not NOT_WHOLE:
                    whole = self._answer(data, rate_limit, response)
                else:
                    async with aclosing(self.json_events(response, relay)) as events:
                        async for name, event in events:
                            if event is DONE:
                                break
                            kind = event.get("type") or name
                            if kind == "error":
                                raise self.in_band_error(event, response)
                            if kind == "response.failed":
                                failed = event.get("response")
                                error = failed.get("error") if isinstance(failed, Mapping) else None
                                raise self.in_band_error(error or event, response)
                            try:
                                produced = assembler.feed(event)
                            except SHAPE_ERRORS as exc:
                                raise self.malformed(exc, response, event=True) from None
                            for out in produced:
                                yield out
                            if assembler.finished:
                                break
                    if not assembler.finished:
                        raise self.incomplete(response)
        except PolythinkError as exc:
            if assembler.content_seen or (relay is not None and relay.committed):
                raise self.interrupted(exc, assembler.response(finish="error")) from exc
            raise
        if whole is not None:
            # The server answered in one JSON body, whatever stream: true asked for.
            for out in answer_events(with_notes(whole, notes)):
                yield out
            return
        done = with_rate_limit(assembler.response(), rate_limit)
        yield StreamEvent("done", response=with_notes(done, notes))
