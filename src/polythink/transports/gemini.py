"""Google Gemini API: ``models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``.

The body is the proto3 JSON form of ``GenerateContentRequest`` (lowerCamelCase field names;
the API also accepts the proto's snake_case names, which google-genai sends for some fields):
``contents`` with roles ``user``/``model``, ``systemInstruction``, ``generationConfig`` with
the ``thinkingConfig`` of the reasoning fragment, ``tools`` (``functionDeclarations`` with a
JSON Schema in ``parametersJsonSchema``) and ``toolConfig``. The key goes in
``x-goog-api-key`` (set by :class:`~polythink.transports.base.HTTPTransport`).

Thought parts (``thought: true``) are reasoning; every other text part is the answer. They
come back only when the request sets ``includeThoughts``, which the reasoning fragment does
for every tier but ``none``; with ``reasoning_effort`` unset nothing is injected (the model's
own default), and the thoughts can still be asked for through ``extra_body``. A
part's ``thoughtSignature`` stays on that part: the model turn's parts are kept verbatim in
``Message.reasoning_items`` (``reasoning_format="gemini"``) and sent back unchanged on the next
turn, function calls included, which Gemini 3 requires ("Missing signatures will result in
a 400 error", GEM-DOC-sigs). Signatures are sent back as received (standard base64): the API
also accepts the URL-safe form a recorded client sent (pai_gemini_stream_function_call_
thought_signature), but verbatim needs no decision about which form a signature is in.
A text part with empty text and no signature carries nothing and is not kept (the recorded
client drops it too).

Usage (``usageMetadata``): ``input_tokens`` is ``promptTokenCount`` (cached content included)
plus ``toolUsePromptTokenCount``; ``output_tokens`` is ``totalTokenCount - input_tokens``, which
holds whether ``candidatesTokenCount`` counts the thoughts or not (AI Studio and Vertex have
differed, simonw/llm-gemini#75); ``reasoning_tokens`` is ``thoughtsTokenCount``. Proto3 JSON
omits zero counts, so an absent count is reported as ``None`` (not said), not as 0. No
``usageMetadata`` gives ``usage=None``. ``response_format`` is
``generationConfig.responseMimeType`` with ``responseJsonSchema`` (:func:`output_plan`,
STRUCTURED.md §4). Facts: WIRE.md §4, the v1beta ``.proto`` files (googleapis bc7e3baa,
2025-12-18) and the Gemini recordings (2025-11 to 2026-01).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import httpx

from polythink.errors import (
    PolythinkError,
    RequestRejectedError,
    TransientError,
)
from polythink.providers import ProviderProfile
from polythink.reasoning.capabilities import get_capability
from polythink.reasoning.continuity import same_model, thinking_reading
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
    part_types,
    path_segment,
    text_of,
    token_count,
    with_notes,
    with_rate_limit,
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
    extra_keys,
    items_unsent,
    later_system_why,
    name_note,
    reasoning_unsent,
    refuse_blank_turn,
    refuse_chat_only,
    ttl_notes,
)
from polythink.transports.finish import GEMINI, Finish, map_finish
from polythink.transports.headers import parse_rate_limit
from polythink.transports.instructions import (
    InstructionPlan,
    instruction_plan,
    per_call_text,
)
from polythink.transports.schema import OutputPlan, gemini_output, merge_output
from polythink.types import (
    Message,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from polythink.wire_json import loads_json

__all__ = [
    "GeminiStreamAssembler",
    "GeminiTransport",
    "build_body",
    "finish_reason",
    "output_plan",
    "parse_response",
    "parse_usage",
    "tool_call_id",
]

_CONTENT_FILTER = "content_filter"
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}
_AUTO = {"functionCallingConfig": {"mode": "AUTO"}}
_PLAIN_TEXT_KEYS = frozenset({"text", "thought"})
_MERGEABLE_KEYS = frozenset({"text", "thought", "thoughtSignature"})


def _rejected(message: str, profile: ProviderProfile, source_index: int | None) -> PolythinkError:
    return RequestRejectedError(
        message,
        provider=profile.id,
        source_index=source_index,
        error_type="invalid_request",
    )


_WIRE = "Gemini"
_PLAIN_PART_KEYS = frozenset({"type", "text", "refusal", "image_url"})
"""What of a Chat part a Gemini ``Part`` carries: its text, or its image's URL
(google_generativelanguage_v1beta_content.proto: ``text``, ``inline_data``,
``file_data``, and nothing for a cache marker or an image's detail)."""


def _parts(content: Any, left_out: LeftOut) -> list[Any]:
    """Gemini parts for a message's content: a string, or OpenAI-style content parts (a
    ``refusal`` is an assistant's text). A part's keys Gemini has no field for (Anthropic's
    ``cache_control``, OpenAI's ``prompt_cache_breakpoint``, ``image_url.detail``) are
    noted: Gemini caches prefixes implicitly and sizes images itself."""
    if not isinstance(content, list):
        return [{"text": content if isinstance(content, str) else ""}]
    parts: list[Any] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("text", "refusal"):
            parts.append({"text": part.get(kind, "")})
        elif kind == "image_url":
            image = part.get("image_url")
            url = str(image.get("url") if isinstance(image, Mapping) else image)
            if url.startswith("data:") and ";base64," in url:
                mime, _, data = url[5:].partition(";base64,")
                parts.append({"inlineData": {"mimeType": mime, "data": data}})
            else:
                parts.append({"fileData": {"fileUri": url}})
            if isinstance(image, Mapping) and image.get("detail") is not None:
                left_out.add_part_keys(
                    ["image_url.detail"], index, f"{_WIRE} has no such field on a part"
                )
        else:
            parts.append(part)
            continue
        unsent = extra_keys(part, _PLAIN_PART_KEYS)
        if unsent:
            left_out.add_part_keys(
                unsent,
                index,
                f"{_WIRE} has no such field on a part; it caches prefixes implicitly",
            )
    return parts


def _arguments(call: ToolCall, profile: ProviderProfile, source_index: int | None) -> Any:
    try:
        args = loads_json(call.arguments) if call.arguments else {}
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise _rejected(
            f"tool call {call.id!r} ({call.name}) has arguments that are not a JSON object; "
            "Gemini's functionCall.args must be an object",
            profile,
            source_index,
        )
    return args


def _function_response_parts(
    message: Message, profile: ProviderProfile, source_index: int | None
) -> list[dict[str, Any]]:
    """The image parts of a tool result as ``FunctionResponse.parts`` (inline data only).

    ``FunctionResponsePart`` holds ``inline_data`` (a ``FunctionResponseBlob``: MIME type and
    bytes) and nothing else (google_generativelanguage_v1beta_content.proto, 2026), so an
    image must come as a ``data:<mime>;base64,`` URL.

    Raises:
        RequestRejectedError: an image given by a URL that is not a base64 data URL.
    """
    if not isinstance(message.content, list):
        return []
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if not (isinstance(part, Mapping) and part.get("type") == "image_url"):
            continue
        image = part.get("image_url")
        url = str(image.get("url") if isinstance(image, Mapping) else image)
        if not (url.startswith("data:") and ";base64," in url):
            raise _rejected(
                f"tool result {message.tool_call_id!r} has an image at {url[:80]!r}; Gemini "
                "takes images in a function response only inline, as a "
                "data:<mime type>;base64,<data> URL",
                profile,
                source_index,
            )
        mime, _, data = url[5:].partition(";base64,")
        parts.append({"inlineData": {"mimeType": mime, "data": data}})
    return parts


def _function_response(message: Message) -> dict[str, Any]:
    """The ``response`` object of a tool result: a JSON object as is, else ``{"result": …}``.

    ``FunctionResponse.response`` is a ``Struct`` (an object), so a result that is not a
    JSON object is wrapped, as Google's examples do. Only the text of the result counts
    here; its images go to ``parts`` (see :func:`_function_response_parts`).
    """
    text = message.text()
    try:
        value = loads_json(text)
    except ValueError:
        return {"result": text}
    return value if isinstance(value, dict) else {"result": value}


GEMINI_PARTS = part_types(
    system=("text",),
    user=("text", "image_url"),
    assistant=("text", "image_url", "refusal"),
    tool=("text", "image_url"),
)
"""Content part types this transport turns into Gemini parts, by role: ``text`` (and an
assistant's ``refusal``) into ``{"text"}``, ``image_url`` into ``inlineData`` /
``fileData``; ``systemInstruction`` takes text only
(google_generativelanguage_v1beta_content.proto, ``../shared/wire/specs``)."""


def _contents(
    messages: Sequence[Message],
    profile: ProviderProfile,
    source_index: int | None,
    left_out: LeftOut,
    model: str = "",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return ``(system instruction parts, contents)``.

    System and developer messages, wherever they are, go to ``systemInstruction`` (Gemini
    contents have no system role), each message and each of its text parts a part of its
    own. Consecutive tool results form one ``user`` turn, so the responses to parallel calls
    answer them together. A message's ``name`` has no field in a ``Content`` and is noted in
    ``left_out`` (a tool message's is ``functionResponse.name``). A model turn with nothing
    to send is left out and noted, and the user turns around it become one, so the roles
    still alternate. A model turn another Gemini model made (its ``metadata.model``) goes to
    ``model`` without its thought parts and signatures, which validate only where they were
    made (:func:`_foreign`): that reasoning is lost, and noted.

    Raises:
        ContentUnsupportedError: a content part, an assistant's ``audio`` or legacy
            ``function_call`` this wire cannot carry, naming the message.
    """
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    calls: dict[str, tuple[str, str | None]] = {}
    tool_turn: list[Any] | None = None
    joined = False
    for position, message in enumerate(messages):
        role = message.role
        left_out.position = position
        if message.content.__class__ is list:
            check_parts(message, GEMINI_PARTS, profile, source_index, position)
        if message.name is not None and role != "tool":
            name_note(left_out, _WIRE)
        if role in ("system", "developer"):
            parts = [p for p in _parts(message.content, left_out) if p.get("text")]
            if contents:
                # After the conversation began: where the caller put it (CONTINUITY.md §1.9).
                left_out.add(LATER_SYSTEM, _LATER_SYSTEM_WHY)
                contents.append({"role": "user", "parts": parts})
                tool_turn, joined = None, False
            else:
                system.extend(parts)
            continue
        if role == "tool":
            call_id = message.tool_call_id or ""
            name, gemini_id = calls.get(call_id, (message.name or "", None))
            if not name:
                raise _rejected(
                    f"tool result {call_id!r} answers no earlier tool call; set its name= "
                    "(Gemini's functionResponse needs the function name)",
                    profile,
                    source_index,
                )
            answer: dict[str, Any] = {"name": name, "response": _function_response(message)}
            if gemini_id:
                answer["id"] = gemini_id
            images = _function_response_parts(message, profile, source_index)
            if images:
                answer["parts"] = images
            if tool_turn is None:
                tool_turn = []
                contents.append({"role": "user", "parts": tool_turn})
            tool_turn.append({"functionResponse": answer})
            joined = False
            continue
        tool_turn = None
        if role == "assistant":
            if message.audio_id is not None or message.function_call is not None:
                refuse_chat_only(message, position, profile, source_index)
            if reasoning_unsent(message, profile):
                left_out.add(REASONING, _REASONING_WHY)
            if items_unsent(message, profile):
                left_out.add(REASONING_ITEMS, REASONING_ITEMS_WHY)
            parts = _model_parts(message, calls, profile, source_index, left_out)
            if model and parts and _foreign(message, model, profile):
                parts = [_unsigned(p) for p in parts if not p.get("thought")]
                left_out.add(THOUGHT_SIGNATURES, _foreign_why(message, model))
            if parts:
                contents.append({"role": "model", "parts": parts})
            else:
                left_out.add(EMPTY_TURN, EMPTY_WHY)
                joined = bool(contents) and contents[-1]["role"] == "user"
            continue
        parts = _parts(message.content, left_out)
        kept = [part for part in parts if _keep(part)]
        if len(kept) < len(parts):
            if not kept and not joined:
                raise refuse_blank_turn(message, position, profile, source_index, _BLANK_WHY)
            left_out.add(BLANK_PARTS, _BLANK_WHY)
            parts = kept
        if joined:
            contents[-1]["parts"].extend(parts)
            joined = False
        else:
            contents.append({"role": "user", "parts": parts})
    return system, contents


_LATER_SYSTEM_WHY = later_system_why("Gemini's contents have no system role")

_REASONING_WHY = (
    f"{_WIRE} takes reasoning back only as its own thought parts with their thoughtSignature; "
    "the turn goes without it"
)
"""Why a reasoning text another wire or the caller wrote is not sent: a thought part is the
model's own, returned "as received" with its signature (WIRE.md §4.4, §4.5)."""

_BLANK_WHY = (
    "Gemini refuses a text part whose text is empty (required oneof field 'data' must have "
    "one initialized field)"
)

SKIP_SIGNATURE_VALIDATION = "skip_thought_signature_validator"
"""Placeholder ``thoughtSignature`` for a function call Gemini did not make.

Gemini 3 answers 400 "Function call is missing a thought_signature in functionCall parts" for
a model turn's first function call without a signature (GEM-DOC-sigs); a turn made by another
provider before a failover has none, and none can be made up. SDKs send this documented
placeholder instead (WIRE.md §4.5: strands-agents PR #1298, erain/glue v1.8.0).
"""


THOUGHT_SIGNATURES = "the thoughts and thought signatures"
"""The note for a model turn another Gemini model made, sent without its reasoning."""


def _foreign(message: Message, model: str, profile: ProviderProfile) -> bool:
    """Whether ``message`` carries thought signatures another model made that ``model``
    does not validate (:func:`~polythink.reasoning.continuity.thinking_reading`); kept with
    the message per target model."""
    if message.reasoning_format != profile.reasoning_format or message.metadata is None:
        return False
    producer = message.metadata.model
    if producer is None:
        return False

    def reads(_: Message) -> bool:
        target = get_capability(model)
        if target is not None and target.replacement and same_model(target.replacement, producer):
            # A retired model the provider answers through its replacement (Gemini's
            # re-route, CURRENT.md §3.2): the replacement made the turn and serves this call.
            return False
        reading = thinking_reading(producer, model, provider=profile.id)
        return reading is not None and reading.reads is False

    return message.memo(f"gemini-foreign:{profile.id}:{model}", reads)


def _foreign_why(message: Message, model: str) -> str:
    producer = message.metadata.model if message.metadata is not None else None
    return (
        f"made by {producer!r}, whose thought signatures {model!r} does not validate (a "
        "signature validates only where it was made, CONTINUITY.md §3.2): sent without them, "
        "function calls with the documented placeholder; that reasoning is lost"
    )


def _unsigned(part: Mapping[str, Any]) -> dict[str, Any]:
    """``part`` without its ``thoughtSignature``."""
    return {key: value for key, value in part.items() if key != "thoughtSignature"}


def _signs_function_calls(model: str) -> bool:
    """Whether the model requires signed function calls (``Capability.signed_tool_calls``:
    Gemini 3 and later, by the registry or the model's family). A model neither knows gets
    the placeholder too: it is the documented value for a call the model did not sign, and
    every generation since Gemini 3 requires a signature (GEM-DOC-sigs)."""
    cap = get_capability(model)
    return cap is None or cap.signed_tool_calls


def _sign_foreign_calls(contents: list[dict[str, Any]]) -> None:
    """Give the first function call of each unsigned model turn the placeholder signature."""
    for content in contents:
        if content.get("role") != "model":
            continue
        parts = content["parts"]
        if any(isinstance(p, Mapping) and p.get("thoughtSignature") for p in parts):
            continue
        for position, part in enumerate(parts):
            if isinstance(part, Mapping) and isinstance(part.get("functionCall"), Mapping):
                parts[position] = {**part, "thoughtSignature": SKIP_SIGNATURE_VALIDATION}
                break


def _model_parts(
    message: Message,
    calls: dict[str, tuple[str, str | None]],
    profile: ProviderProfile,
    source_index: int | None,
    left_out: LeftOut,
) -> list[Any]:
    # Empty text parts are left out (see _keep): the API refuses them, and a model turn
    # left without parts is not sent at all ("contents.parts must not be empty").
    if message.reasoning_items and message.reasoning_format == profile.reasoning_format:
        parts = [p if isinstance(p, dict) else dict(p) for p in message.reasoning_items if _keep(p)]
        declared = [p["functionCall"] for p in parts if isinstance(p.get("functionCall"), Mapping)]
        for call, function in zip(message.tool_calls, declared, strict=False):
            calls[call.id] = (str(function.get("name") or call.name), function.get("id"))
        return parts
    content = _parts(message.content, left_out) if message.content else []
    parts = [p for p in content if not isinstance(p, Mapping) or _keep(p)]
    if message.refusal:
        parts.append({"text": message.refusal})
    for call in message.tool_calls:
        parts.append(
            {"functionCall": {"name": call.name, "args": _arguments(call, profile, source_index)}}
        )
        calls[call.id] = (call.name, None)
    return parts


def _tool_config(
    choice: str | Mapping[str, Any], profile: ProviderProfile, source_index: int | None
) -> dict[str, Any]:
    if isinstance(choice, str):
        mode = _TOOL_MODES.get(choice.strip().lower())
        if mode is None:
            raise _rejected(
                f"tool_choice {choice!r} has no Gemini equivalent; accepted: auto, none, "
                "required, or {'type': 'function', 'function': {'name': ...}}",
                profile,
                source_index,
            )
        return {"functionCallingConfig": {"mode": mode}}
    function = choice.get("function")
    name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
    if isinstance(name, str) and name:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    return dict(choice)


def _validated(body: dict[str, Any]) -> None:
    """Make a call with a ``strict`` tool validate its function calls.

    Gemini has no per-function ``strict``; its ``FunctionCallingConfig.mode`` ``VALIDATED``
    is the request-wide equivalent: the model "decides to predict either a function call or
    a natural language response, but will validate function calls with constrained
    decoding" (google_generativelanguage_v1beta_content.proto, copied 2026-11-28). So an
    unforced call (no ``tool_choice``, or ``auto``) goes out with mode ``VALIDATED``, for
    every declared function. A forced call keeps ``ANY`` (VALIDATED cannot force a call; ANY
    is "constrained to always predicting a function call"), and ``NONE`` calls no function.
    """
    if body.get("toolConfig", _AUTO) == _AUTO:
        body["toolConfig"] = {"functionCallingConfig": {"mode": "VALIDATED"}}


def output_plan(
    request: Request, *, model: str, profile: ProviderProfile, source_index: int | None = None
) -> OutputPlan | None:
    """What this call sends for its ``response_format``
    (:func:`polythink.transports.schema.gemini_output`), or ``None`` without one.

    Raises:
        OutputFormatUnsupportedError: function tools beside JSON output on a model before
            Gemini 3.
    """
    fmt = request.response_format
    if fmt is None:
        return None
    return gemini_output(
        fmt,
        model=model,
        has_tools=bool(request.tools),
        provider=profile.id,
        source_index=source_index,
    )


def _after_contents(contents: list[dict[str, Any]], text: str) -> None:
    """``text`` as a part at the end of the last user turn of ``contents`` (a copy of it,
    with its function responses first), or as a user turn of its own after a model turn."""
    last = contents[-1] if contents else None
    if last is not None and last.get("role") == "user":
        contents[-1] = {**last, "parts": [*last.get("parts", ()), {"text": text}]}
    else:
        contents.append({"role": "user", "parts": [{"text": text}]})


def build_body(
    request: Request,
    *,
    profile: ProviderProfile,
    extra_body: Mapping[str, Any] | None = None,
    source_index: int | None = None,
    sign_function_calls: bool = False,
    output: OutputPlan | None = None,
    model: str = "",
    left_out: LeftOut | None = None,
    placement: InstructionPlan | None = None,
) -> dict[str, Any]:
    """Build the ``GenerateContentRequest`` body for ``request`` (the model is in the URL).

    With ``sign_function_calls`` (Gemini 3 models), a model turn whose function calls carry
    no ``thoughtSignature`` (made by another provider) gets the documented placeholder on its
    first call (:data:`SKIP_SIGNATURE_VALIDATION`).

    Sets ``contents``, ``systemInstruction`` (with ``role: user``, as google-genai sends it;
    one part per system message and per text part of one),
    ``generationConfig`` (``maxOutputTokens``, ``temperature``, ``topP``, ``stopSequences``),
    ``tools`` and ``toolConfig`` (mode ``VALIDATED`` for an unforced call with a ``strict``
    tool, see :func:`_validated`); then deep-merges the reasoning fragment (its
    ``generationConfig.thinkingConfig``, and the raised ``maxOutputTokens`` of budget models),
    the source's ``extra_body`` and the call's, in that order (later wins).

    ``request.response_format`` adds ``generationConfig.responseMimeType`` and
    ``responseJsonSchema``, before those merges (:func:`output_plan` for ``model``;
    ``output`` when the caller computed it).

    The call's per-call instructions (``request.system_suffix``, then the format's
    instruction where it has one) go where ``placement`` says
    (:mod:`polythink.transports.instructions`; by default from the model and the profile):
    Gemini has no system role in ``contents``, so after the conversation as a text part of
    the last user turn (a user turn of its own after a model turn), and ``systemInstruction``
    with the contents already sent stays the prefix Gemini's implicit cache matches; or, with
    ``system``, as the last part of ``systemInstruction``.

    An assistant's ``refusal`` is a text part (what the model said); its ``audio`` and
    legacy ``function_call`` are refused. What Gemini has no field for (a message's
    ``name``, a part's cache marker, ``image_url.detail``) and model turns left empty are
    noted in ``left_out``.

    Raises:
        RequestRejectedError: a tool result that answers no known call and has no name; a
            tool call whose arguments are not a JSON object; a ``tool_choice`` with no Gemini
            equivalent.
        ContentUnsupportedError: a content part, ``audio`` or ``function_call`` Gemini
            cannot carry.
    """
    if output is None and request.response_format is not None:
        output = output_plan(request, model=model, profile=profile, source_index=source_index)
    system, contents = _contents(
        request.messages,
        profile,
        source_index,
        left_out if left_out is not None else LeftOut(profile.id),
        model,
    )
    if sign_function_calls:
        _sign_foreign_calls(contents)
    body: dict[str, Any] = {"contents": contents}
    plan = placement if placement is not None else instruction_plan(profile, model)
    text = per_call_text(request.system_suffix, output.instruction if output is not None else None)
    instruction = system
    if text and plan.placement == "system":
        instruction = [*system, {"text": text}]
    elif text:
        _after_contents(contents, text)
    if instruction:
        body["systemInstruction"] = {"role": "user", "parts": instruction}
    generation: dict[str, Any] = {}
    if request.max_tokens is not None:
        generation["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        generation["temperature"] = request.temperature
    if request.top_p is not None:
        generation["topP"] = request.top_p
    if request.stop:
        generation["stopSequences"] = list(request.stop)
    if generation:
        body["generationConfig"] = generation
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": tool.name,
                        "description": tool.description,
                        "parametersJsonSchema": tool.parameters,
                    }
                    for tool in request.tools
                ]
            }
        ]
    if request.tool_choice is not None:
        body["toolConfig"] = _tool_config(request.tool_choice, profile, source_index)
    if any(tool.strict for tool in request.tools):
        _validated(body)
    if output is not None:
        merge_output(body, output.fields, (extra_body, request.extra_body))
    return apply_overrides(body, request, extra_body)


def parse_usage(metadata: Any) -> Usage | None:
    """Normalise ``usageMetadata``; ``None`` when the response carries none (case C15).

    ``input_tokens + output_tokens == totalTokenCount`` whenever the total is reported
    (case C04): the output is derived from the total rather than from one formula over
    ``candidatesTokenCount`` and ``thoughtsTokenCount``, which providers have counted both
    ways. Without a total, the output is candidates plus thoughts.

    The REST wire spells these fields in camelCase (``usageMetadata.promptTokenCount`` …,
    WIRE.md §4.4); metadata in which none of them is a count (``{}``, or the snake_case
    names of the SDKs' own types, which some proxies forward) is ``None``, never a
    :class:`Usage` of all ``None``.
    """
    if not isinstance(metadata, Mapping):
        return None
    prompt = token_count(metadata.get("promptTokenCount"))
    tool_prompt = token_count(metadata.get("toolUsePromptTokenCount"))
    candidates = token_count(metadata.get("candidatesTokenCount"))
    thoughts = token_count(metadata.get("thoughtsTokenCount"))
    total = token_count(metadata.get("totalTokenCount"))
    input_tokens = None if prompt is None else prompt + (tool_prompt or 0)
    output_tokens: int | None
    if total is not None and input_tokens is not None and total >= input_tokens:
        output_tokens = total - input_tokens
    elif candidates is not None or thoughts is not None:
        output_tokens = (candidates or 0) + (thoughts or 0)
    else:
        output_tokens = None
    cache_read = token_count(metadata.get("cachedContentTokenCount"))
    if input_tokens is None and output_tokens is None and thoughts is None and cache_read is None:
        return None
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=thoughts,
        cache_read_tokens=cache_read,
    )


def finish_reason(raw: Any, *, has_tool_calls: bool, blocked: bool = False) -> str:
    """Map a candidate ``finishReason`` to polythink's finish reason (the whole
    ``Candidate.FinishReason`` enum: :data:`polythink.transports.finish.GEMINI`).

    ``STOP`` -> ``stop`` (``tool_calls`` when the turn calls functions); ``MAX_TOKENS`` ->
    ``length``; the safety, recitation, blocklist, prohibited-content and SPII reasons (and a
    prompt blocked by ``promptFeedback.blockReason``) -> ``content_filter``; malformed or
    unexpected tool calls, ``LANGUAGE``, ``OTHER`` and ``FINISH_REASON_UNSPECIFIED`` ->
    ``error``; an unknown value ``error`` too, logged once.
    """
    return _finish(raw, has_tool_calls=has_tool_calls, blocked=blocked, provider="gemini").reason


def _finish(raw: Any, *, has_tool_calls: bool, blocked: bool, provider: str) -> Finish:
    if blocked:
        return Finish(_CONTENT_FILTER, raw if isinstance(raw, str) else None)
    return map_finish(raw, GEMINI, provider=provider, has_tool_calls=has_tool_calls)


def tool_call_id(response_id: str | None, index: int, name: str, args: Any) -> str:
    """A stable id for a function call that came without one.

    Derived from the response id and the call's position (and its name and arguments), so
    the same response parsed again, streamed or not, gives the same ids.
    """
    seed = json.dumps([response_id, index, name, args], sort_keys=True, separators=(",", ":"))
    return "call_" + hashlib.sha256(seed.encode()).hexdigest()[:24]


def _tool_call(part: Mapping[str, Any], response_id: str | None, index: int) -> ToolCall:
    function = part["functionCall"]
    name = str(function.get("name") or "")
    args = function.get("args")
    if args is None:
        args = {}
    call_id = function.get("id")
    return ToolCall(
        id=str(call_id) if call_id else tool_call_id(response_id, index, name, args),
        name=name,
        arguments=json.dumps(args, ensure_ascii=False, separators=(",", ":")),
    )


def _keep(part: Mapping[str, Any]) -> bool:
    """Whether a part carries anything: an empty unsigned text part does not, and the API
    refuses one ("GenerateContentRequest.contents[1].parts[0].data: required oneof field
    'data' must have one initialized field", router-for-me/CLIProxyAPI#1292, 2026-01-28: in
    proto3 JSON an empty string is an unset field). Whitespace is text and is kept."""
    return not (part.get("text") == "" and set(part) <= _PLAIN_TEXT_KEYS)


def _candidate(data: Mapping[str, Any]) -> Mapping[str, Any]:
    candidates = data.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
        return candidates[0]
    return {}


def _candidate_parts(candidate: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return [p for p in parts if isinstance(p, Mapping)] if isinstance(parts, list) else []


def _blocked(data: Mapping[str, Any]) -> bool:
    feedback = data.get("promptFeedback")
    return isinstance(feedback, Mapping) and bool(feedback.get("blockReason"))


def _answers(data: Mapping[str, Any]) -> bool:
    """Whether a response object carries candidates or prompt feedback."""
    candidates = data.get("candidates")
    return (isinstance(candidates, list) and bool(candidates)) or isinstance(
        data.get("promptFeedback"), Mapping
    )


def _no_answer(profile: ProviderProfile, source_index: int) -> TransientError:
    return TransientError(
        f"{profile.id} answered with neither candidates nor promptFeedback",
        provider=profile.id,
        source_index=source_index,
    )


def parse_response(
    data: Any, *, profile: ProviderProfile, source_index: int, model: str
) -> Response:
    """Parse a ``GenerateContentResponse`` into a :class:`Response` (first candidate).

    Raises:
        TransientError: when the body is not a response object, or has neither
            ``candidates`` nor ``promptFeedback`` (a blocked prompt has the latter; an answer
            with neither is malformed, never an empty success: DESIGN §4).
    """
    if not isinstance(data, Mapping):
        raise TransientError(
            f"{profile.id} answered with a body that is not a response object",
            provider=profile.id,
            source_index=source_index,
        )
    if not _answers(data):
        raise _no_answer(profile, source_index)
    response_id = data.get("responseId")
    candidate = _candidate(data)
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    kept: list[Mapping[str, Any]] = []
    for part in _candidate_parts(candidate):
        if isinstance(part.get("functionCall"), Mapping):
            calls.append(_tool_call(part, response_id, len(calls)))
        elif "text" in part:
            piece = text_of(part["text"], "a part's text")
            (reasoning if part.get("thought") else text).append(piece)
        if _keep(part):
            kept.append(part)
    mapped = _finish(
        candidate.get("finishReason"),
        has_tool_calls=bool(calls),
        blocked=_blocked(data),
        provider=profile.id,
    )
    return assistant_response(
        text="".join(text),
        reasoning="".join(reasoning) or None,
        calls=calls,
        items=tuple(kept),
        finish=mapped.reason,
        usage=parse_usage(data.get("usageMetadata")),
        model=data.get("modelVersion") or model,
        response_id=response_id,
        profile=profile,
        source_index=source_index,
        native_finish_reason=mapped.native,
        warnings=[mapped.note] if mapped.note else None,
        service_tier=_usage_tier(profile, data.get("usageMetadata")),
    )


def _usage_tier(profile: ProviderProfile, metadata: Any) -> str | None:
    """The served tier ``usageMetadata`` reports, where the profile's row reads it there
    (Vertex AI's ``trafficType``); the Gemini API reports it in a header instead."""
    wire = profile.service_tiers
    if wire is None or wire.served is None or wire.served[0] != "usage":
        return None
    if not isinstance(metadata, Mapping):
        return None
    return served_tier(wire, metadata.get(wire.served[1]))


class GeminiStreamAssembler:
    """Turn ``streamGenerateContent`` chunks into events and, at the end, a :class:`Response`.

    Each chunk is a whole ``GenerateContentResponse`` carrying the next parts. Thought text is
    yielded as reasoning, other text as text, each ``functionCall`` part (complete in one
    chunk) as a tool call. The parts kept for the next turn are rebuilt as the non-streamed
    response has them: a text chunk without a signature continues the previous text part of
    the same kind; a part with a signature starts a new part and keeps its signature; a
    function call is always its own part. Usage is the last chunk's ``usageMetadata``, yielded
    once when the stream ends.
    """

    def __init__(self, profile: ProviderProfile, source_index: int, model: str) -> None:
        self.profile = profile
        self.source_index = source_index
        self.model = model
        self.response_id: str | None = None
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        # (part, its text pieces): streamed text is joined once, at the end.
        self._parts: list[tuple[dict[str, Any], list[str] | None]] = []
        self.raw_finish: Any = None
        self.blocked = False
        self._metadata: Any = None
        self.content_seen = False

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one parsed chunk; return the events it produces."""
        out: list[StreamEvent] = []
        if chunk.get("modelVersion"):
            self.model = chunk["modelVersion"]
        if self.response_id is None and chunk.get("responseId"):
            self.response_id = chunk["responseId"]
        if "usageMetadata" in chunk:
            self._metadata = chunk["usageMetadata"]
        if _blocked(chunk):
            self.blocked = True
        candidate = _candidate(chunk)
        for part in _candidate_parts(candidate):
            if isinstance(part.get("functionCall"), Mapping):
                call = _tool_call(part, self.response_id, len(self.calls))
                delta = ToolCallDelta(
                    index=len(self.calls), id=call.id, name=call.name, arguments=call.arguments
                )
                self.calls.append(call)
                self.content_seen = True
                out.append(StreamEvent("tool_call_delta", tool_call_delta=delta))
                out.append(StreamEvent("tool_call", tool_call=call))
            elif text_of(part.get("text"), "a part's text"):
                self.content_seen = True
                if part.get("thought"):
                    self.reasoning.append(part["text"])
                    out.append(StreamEvent("reasoning", text=part["text"]))
                else:
                    self.text.append(part["text"])
                    out.append(StreamEvent("text", text=part["text"]))
            self._keep(part)
        if candidate.get("finishReason"):
            self.raw_finish = candidate["finishReason"]
        return out

    def _keep(self, part: Mapping[str, Any]) -> None:
        if not _keep(part):
            return
        text = part.get("text")
        if not isinstance(text, str):
            self._parts.append((dict(part), None))
            return
        last = self._parts[-1] if self._parts else None
        if (
            last is not None
            and last[1] is not None
            and set(part) <= _PLAIN_TEXT_KEYS
            and set(last[0]) <= _MERGEABLE_KEYS
            and bool(last[0].get("thought")) == bool(part.get("thought"))
        ):
            last[1].append(text)
            return
        self._parts.append((dict(part), [text]))

    def _kept_parts(self) -> tuple[dict[str, Any], ...]:
        parts = []
        for head, pieces in self._parts:
            part = dict(head)
            if pieces is not None:
                part["text"] = "".join(pieces)
            parts.append(part)
        return tuple(parts)

    @property
    def usage(self) -> Usage | None:
        """The usage of the last chunk that reported one (parsed once, when asked)."""
        return parse_usage(self._metadata)

    @property
    def finished(self) -> bool:
        """Whether a chunk carried a finish reason (or the prompt was blocked)."""
        return self.raw_finish is not None or self.blocked

    def flush(self) -> list[StreamEvent]:
        """The final usage event (end of stream), if any usage was reported."""
        usage = self.usage
        return [StreamEvent("usage", usage=usage)] if usage is not None else []

    def response(self, *, finish: str | None = None) -> Response:
        """Assemble the response from everything consumed so far."""
        mapped = _finish(
            self.raw_finish,
            has_tool_calls=bool(self.calls),
            blocked=self.blocked,
            provider=self.profile.id,
        )
        return assistant_response(
            text="".join(self.text),
            reasoning="".join(self.reasoning) or None,
            calls=list(self.calls),
            items=self._kept_parts(),
            finish=finish or mapped.reason,
            usage=self.usage,
            model=self.model,
            response_id=self.response_id,
            profile=self.profile,
            source_index=self.source_index,
            native_finish_reason=mapped.native,
            warnings=[mapped.note] if mapped.note else None,
            service_tier=_usage_tier(self.profile, self._metadata),
        )


class GeminiTransport(HTTPTransport):
    """The Gemini API over HTTP for one source.

    ``POST {base_url}/models/{model}:generateContent`` and
    ``:streamGenerateContent?alt=sse``; both URLs are built once, the model id percent-encoded
    as one path segment (:func:`~polythink.transports.base.path_segment`), so no id leaves
    ``/models/`` or adds a query; an id with a ``:`` (which would name another method) is
    refused when the client is built.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        model = path_segment(
            self.source.model,
            "model",
            refused=":",
            why="which Gemini's URL puts between the model and the method "
            "(models/M:generateContent)",
        )
        root = f"{self.source.endpoint}/models/{model}"
        self.url = f"{root}:generateContent"
        self.stream_url = f"{root}:streamGenerateContent?alt=sse"
        self._extra_body = self.source.extra_body
        self._sign_calls = _signs_function_calls(self.source.model)
        self._placement = instruction_plan(self.profile, self.source.model)

    def body(self, request: Request) -> dict[str, Any]:
        """Return the exact body this transport sends for ``request``.

        Raises:
            RequestRejectedError: see :func:`build_body`.
            OutputFormatUnsupportedError: see :func:`output_plan`.
        """
        return self._prepare(request)[0]

    def _prepare(self, request: Request) -> tuple[dict[str, Any], list[str]]:
        """The body, and the notes for the response's warnings: the ``response_format``'s,
        a ``ttl`` Gemini cannot set, and what the body left out of the messages."""
        left_out = LeftOut(self.profile.id)
        output = output_plan(
            request, model=self.source.model, profile=self.profile, source_index=self.index
        )
        body = build_body(
            request,
            profile=self.profile,
            extra_body=self._extra_body,
            source_index=self.index,
            sign_function_calls=self._sign_calls,
            output=output,
            model=self.source.model,
            left_out=left_out,
            placement=self._placement,
        )
        notes = list(output.notes) if output is not None else []
        notes += ttl_notes(request.prompt_cache, self.profile)
        return body, notes + left_out.notes()

    def batch_body(self, request: Request) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """The ``GenerateContentRequest`` a batch's inlined request carries (see
        :meth:`~polythink.transports.base.HTTPTransport.batch_body`)."""
        body, notes = self._prepare(request.with_(stream=False))
        return body, notes, {}

    def parse_answer(self, data: Any, hints: Mapping[str, Any], notes: list[str]) -> Response:
        """Parse a ``GenerateContentResponse`` of a batch (see
        :meth:`~polythink.transports.base.HTTPTransport.parse_answer`)."""
        return with_notes(self._answer(data, None), notes)

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call and parse the answer.

        Raises:
            PolythinkError: the mapped HTTP, transport or in-band error.
        """
        body, notes = self._prepare(request)
        data, headers = await self.post_json_with_headers(self.url, body, request)
        answer = self._answer(data, parse_rate_limit(headers))
        return with_notes(self._with_header_tier(answer, headers), notes)

    def _answer(
        self, data: Any, rate_limit: RateLimit | None, response: httpx.Response | None = None
    ) -> Response:
        """The :class:`Response` of a whole answer's parsed JSON ``data``.

        Raises:
            PolythinkError: an error it carries, or a shape that is not the wire's.
        """
        answer = self.parsed_answer(
            data,
            rate_limit,
            response,
            failed=data if isinstance(data, Mapping) and data.get("error") else None,
            parse=lambda d: parse_response(
                d, profile=self.profile, source_index=self.index, model=self.source.model
            ),
        )
        return with_rate_limit(answer, rate_limit)

    def _with_header_tier(self, response: Response, headers: Mapping[str, str]) -> Response:
        """``response`` with the served tier of the ``x-gemini-service-tier`` header, where
        this profile reads it there and the body said nothing."""
        if response.service_tier is not None:
            return response
        tier = self.served_tier_header(headers)
        return response if tier is None else response.with_(service_tier=tier)

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; yield text, reasoning, tool-call and usage events, then
        ``done`` with the assembled response.

        Gemini separates events with CRLF (recorded); the SSE decoder handles every line
        ending. The stream ends when the server closes it after the chunk with a finish
        reason.

        Raises:
            PolythinkError: before the first content event, the mapped error (an in-stream
                ``{"error": …}`` chunk by its ``status``; a chunk with neither
                ``candidates``, ``promptFeedback`` nor ``usageMetadata`` is a
                :class:`TransientError`); after it,
                :class:`StreamInterruptedError` carrying the partial response, with the
                underlying error as ``__cause__``.
        """
        assembler = GeminiStreamAssembler(self.profile, self.index, self.source.model)
        body, notes = self._prepare(request)
        whole: Response | None = None
        try:
            async with self.open_stream(self.stream_url, body, request) as response:
                rate_limit = parse_rate_limit(response.headers)
                tier_headers = response.headers
                data = await self.whole_answer(response)
                if data is not NOT_WHOLE:
                    whole = self._with_header_tier(
                        self._answer(data, rate_limit, response), tier_headers
                    )
                else:
                    async with aclosing(self.json_events(response)) as events:
                        async for _, chunk in events:
                            if chunk is DONE:
                                break
                            if chunk.get("error"):
                                raise self.in_band_error(chunk, response)
                            # A chunk may carry usage alone; one with nothing of an answer is junk.
                            if not _answers(chunk) and not isinstance(
                                chunk.get("usageMetadata"), Mapping
                            ):
                                raise _no_answer(self.profile, self.index)
                            try:
                                produced = assembler.feed(chunk)
                            except SHAPE_ERRORS as exc:
                                raise self.malformed(exc, response, event=True) from None
                            for event in produced:
                                yield event
                    if not assembler.finished:
                        raise self.incomplete(response)
        except PolythinkError as exc:
            if assembler.content_seen:
                raise self.interrupted(exc, assembler.response(finish="error")) from exc
            raise
        if whole is not None:
            # The server answered in one JSON body, whatever alt=sse asked for.
            for event in answer_events(with_notes(whole, notes)):
                yield event
            return
        for event in assembler.flush():
            yield event
        done = with_rate_limit(
            self._with_header_tier(assembler.response(), tier_headers), rate_limit
        )
        yield StreamEvent("done", response=with_notes(done, notes))
