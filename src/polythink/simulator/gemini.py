"""Simulated Gemini API: ``/{provider}/v1/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``.

Reasoning behaves like Gemini's (WIRE.md §4):

- ``generationConfig.thinkingConfig`` is read in both spellings the API accepts
  (``thinkingBudget`` / ``thinking_budget`` …); ``thinkingBudget`` together with
  ``thinkingLevel`` is a 400 ``INVALID_ARGUMENT``;
- budget models (2.5): ``0`` on a model that cannot switch off (2.5 Pro) and a budget
  outside the model's range are 400s; ``-1`` is dynamic; a ``thinkingLevel`` is a 400;
- level models (3.x): a level the model does not list is a 400; a budget is accepted for
  backwards compatibility and read as the nearest tier;
- thought parts (``thought: true``) come back only with ``includeThoughts``; the tokens are
  reported in ``usageMetadata.thoughtsTokenCount`` either way (omitted when 0, as proto3
  JSON does);
- level models sign their turns: the first answer part and every ``functionCall`` part
  carry a ``thoughtSignature`` (standard base64 of a keyed digest of the part). A model turn
  sent back with a function call whose signature is missing gets Gemini 3's 400 "Function call
  is missing a thought_signature"; an altered signature gets a 400 too;
- function calls come back without ids, as the Gemini API sends them, for ``tool_rounds``
  turns; streamed events are separated by CRLF, as recorded;
- ``generationConfig.responseMimeType: application/json`` (STRUCTURED.md §4) is answered with a
  text part holding an object that fits ``responseJsonSchema`` (or ``responseSchema``; a
  system instruction that asks for JSON likewise), in the mode
  ``Settings.structured_output`` asks for: a refusal is ``finishReason: "SAFETY"`` without
  text, a cut answer ``MAX_TOKENS``. Models before Gemini 3 refuse it beside function
  declarations with the API's 400.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from polythink.reasoning.resolve import TIER_BUDGET_TOKENS
from polythink.simulator import behaviour, tiers
from polythink.simulator.prompt_cache import automatic, tokens_of
from polythink.simulator.server import SimRequest, SimResponse
from polythink.transports.schema import listed
from polythink.types import Effort

__all__ = ["handle", "matches"]

_KEY = b"polythink-simulator-gemini"
_METHODS = (":generateContent", ":streamGenerateContent")
_LEVELS = frozenset({"minimal", "low", "medium", "high", "xhigh"})


def bad_request(message: str) -> dict[str, Any]:
    """Gemini's 400 body for a request it cannot read (``INVALID_ARGUMENT``)."""
    return _error(400, message)


def matches(path: str) -> bool:
    """Whether ``path`` is a Gemini generate route."""
    return path.endswith(_METHODS)


def _error(status: int, message: str) -> dict[str, Any]:
    names = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND"}
    return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}


def _field(config: Mapping[str, Any], camel: str, snake: str) -> Any:
    return config.get(camel, config.get(snake))


def _sign(model: str, part: Mapping[str, Any]) -> str:
    """The simulated ``thoughtSignature`` of a part (what it says, keyed by model).

    The two trailing bytes make the standard base64 form end in ``/w==``, so a client that
    re-encodes a signature URL-safe is visible on the wire.
    """
    what = part.get("functionCall") or {"text": part.get("text", "")}
    digest = hashlib.sha256(_KEY + model.encode() + json.dumps(what, sort_keys=True).encode())
    return base64.b64encode(digest.digest() + b"\xfb\xff").decode()


def _thinking(body: Mapping[str, Any]) -> Mapping[str, Any]:
    generation = _field(body, "generationConfig", "generation_config")
    if not isinstance(generation, Mapping):
        return {}
    config = _field(generation, "thinkingConfig", "thinking_config")
    return config if isinstance(config, Mapping) else {}


def _tier(model: str, config: Mapping[str, Any]) -> tuple[Effort | None, str | None]:
    """Return (tier, error message) from a ``thinkingConfig``."""
    cap = behaviour.capability(model)
    budget = _field(config, "thinkingBudget", "thinking_budget")
    level = _field(config, "thinkingLevel", "thinking_level")
    if budget is not None and level is not None:
        return None, ("You cannot use both thinking_level and thinking_budget in the same request.")
    if level is not None:
        if cap is not None and cap.thinking == "budget":
            return None, "Thinking level is not supported for this model."
        name = str(level).lower()
        tier = Effort(name) if name in _LEVELS else None
        if tier is None or (cap is not None and tier not in cap.supported_efforts):
            return None, f"Thinking level {level} is not supported for this model."
        return tier, None
    if isinstance(budget, int):
        if budget == -1:
            return Effort.AUTO, None
        if budget == 0:
            if cap is not None and not cap.can_disable:
                return None, "Budget 0 is invalid. This model only works in thinking mode."
            return Effort.NONE, None
        if cap is not None and cap.thinking == "budget":
            low, high = cap.budget_min or 1, cap.budget_max or budget
            if not low <= budget <= high:
                return None, (
                    f"The thinking budget {budget} is invalid. Please choose a value between "
                    f"{low} and {high}."
                )
        nearest = min(TIER_BUDGET_TOKENS, key=lambda e: abs(TIER_BUDGET_TOKENS[e] - budget))
        if cap is not None and cap.thinking == "level" and nearest not in cap.supported_efforts:
            nearest = cap.strengths[-1] if cap.strengths else Effort.AUTO
        return nearest, None
    return behaviour.default_tier(model), None


def _depth(model: str, tier: Effort) -> Effort:
    cap = behaviour.capability(model)
    if cap is None:
        return tier
    if not cap.reasons:
        return Effort.NONE
    return tier


SKIP_VALIDATION = "skip_thought_signature_validator"
"""The placeholder signature Gemini accepts for a function call it did not sign (WIRE §4.5)."""


def _signed(model: str) -> bool:
    cap = behaviour.capability(model)
    return cap is None or cap.signed_tool_calls or cap.thinking == "level"


def _check_history(model: str, contents: list[Any]) -> str | None:
    """Return Gemini's 400 message when a model turn lost or altered a signature."""
    if not _signed(model):
        return None
    for content in contents:
        if not isinstance(content, Mapping) or content.get("role") != "model":
            continue
        first_call = True
        for position, part in enumerate(content.get("parts") or ()):
            if not isinstance(part, Mapping):
                continue
            is_call = isinstance(part.get("functionCall"), Mapping)
            signature = _field(part, "thoughtSignature", "thought_signature")
            if signature == SKIP_VALIDATION:
                first_call = first_call and not is_call
                continue
            if signature is None:
                # Only the first function call of a step carries the signature
                # (GEM-DOC-sigs: parallel calls after it come without one).
                if is_call and first_call:
                    name = part["functionCall"].get("name")
                    return (
                        "Function call is missing a thought_signature in functionCall parts. "
                        "This is required for tools to work correctly, and missing "
                        "thought_signature may lead to degraded model performance. Additional "
                        f"data, function call `default_api:{name}`, position {position + 1}."
                    )
                first_call = first_call and not is_call
                continue
            first_call = first_call and not is_call
            url_safe = "-" in signature or "_" in signature
            try:
                given = base64.b64decode(signature, altchars=b"-_" if url_safe else None)
            except ValueError:
                given = b""
            if given != base64.b64decode(_sign(model, part)):
                return "Thought signature is not valid."
    return None


def _malformed(body: Mapping[str, Any], contents: list[Any]) -> str | None:
    """The 400 message Gemini gives a ``tools`` or ``parts`` that is not a list, a content
    without parts, a part with a field ``Part`` does not have (``type``: an OpenAI-shaped
    part sent as is; google_generativelanguage_v1beta_content.proto), and a function
    response that follows no function call ("Please ensure that function response turn
    comes immediately after a function call turn.", langchain and GoogleCloudPlatform
    issues, 2024)."""
    if not isinstance(body.get("tools", []), list):
        return "Invalid value at 'tools': expected a list of \"Tool\" objects."
    previous: Any = None
    for i, content in enumerate(contents):
        if not isinstance(content, Mapping):
            continue
        parts = content.get("parts", [])
        if not isinstance(parts, list):
            return f"Invalid value at 'contents[{i}].parts': expected a list of \"Part\" objects."
        if not parts:
            return (
                f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            )
        for j, part in enumerate(parts):
            unknown = sorted(set(part) - _PART_FIELDS) if isinstance(part, Mapping) else []
            if unknown:
                return (
                    f'Invalid JSON payload received. Unknown name "{unknown[0]}" at '
                    f"'contents[{i}].parts[{j}]': Cannot find field."
                )
        answers = any(
            isinstance(p, Mapping) and _field(p, "functionResponse", "function_response")
            for p in parts
        )
        if answers and not _calls(previous):
            return (
                "Please ensure that function response turn comes immediately after a function "
                "call turn."
            )
        previous = content
    return None


_PART_FIELDS = frozenset(
    {
        "text",
        "thought",
        "thoughtSignature",
        "thought_signature",
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "functionCall",
        "function_call",
        "functionResponse",
        "function_response",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
        "videoMetadata",
        "video_metadata",
        "partMetadata",
        "part_metadata",
    }
)
"""The fields of ``Part`` (google_generativelanguage_v1beta_content.proto, both spellings the
JSON mapping accepts)."""


def _calls(content: Any) -> bool:
    """Whether ``content`` (a turn) holds a function call."""
    parts = content.get("parts") if isinstance(content, Mapping) else None
    return any(
        isinstance(p, Mapping) and _field(p, "functionCall", "function_call") for p in parts or ()
    )


def _structured(model: str, body: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """``(schema, problem)``: the schema asked for (``{}`` for JSON without one, ``None``
    when no JSON is asked), and the 400 message when the request is refused."""
    generation = _field(body, "generationConfig", "generation_config")
    generation = generation if isinstance(generation, Mapping) else {}
    mime = _field(generation, "responseMimeType", "response_mime_type")
    if mime != "application/json":
        instruction = _field(body, "systemInstruction", "system_instruction")
        parts = list(instruction.get("parts") or ()) if isinstance(instruction, Mapping) else []
        contents = body.get("contents")
        last = contents[-1] if isinstance(contents, list) and contents else None
        if isinstance(last, Mapping) and last.get("role") == "user":
            # Per-call instructions end the last user turn (polythink's placement).
            parts += last.get("parts") or ()
        texts = [p["text"] for p in parts if isinstance(p, Mapping) and "text" in p]
        return behaviour.asked_in_prompt(texts), None
    if body.get("tools") and listed("gemini", "no_json_with_tools", model):
        return None, "Function calling with a response mime type: 'application/json' is unsupported"
    for camel, snake in (
        ("responseJsonSchema", "response_json_schema"),
        ("responseSchema", "response_schema"),
    ):
        schema = _field(generation, camel, snake)
        if isinstance(schema, Mapping):
            return schema, None
    return {}, None


def _last_user_text(contents: list[Any]) -> str:
    for content in reversed(contents):
        if isinstance(content, Mapping) and content.get("role", "user") == "user":
            texts = [
                p["text"]
                for p in content.get("parts") or ()
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            ]
            if texts:
                return " ".join(texts)
    return ""


def _function_call(
    body: Mapping[str, Any], contents: list[Any], rounds: int
) -> dict[str, Any] | None:
    declarations = [
        d
        for tool in body.get("tools") or ()
        if isinstance(tool, Mapping)
        for d in _field(tool, "functionDeclarations", "function_declarations") or ()
        if isinstance(d, Mapping)
    ]
    config = _field(body, "toolConfig", "tool_config")
    calling = (
        _field(config, "functionCallingConfig", "function_calling_config")
        if isinstance(config, Mapping)
        else None
    )
    mode = calling.get("mode") if isinstance(calling, Mapping) else None
    if not declarations or mode == "NONE":
        return None
    done = sum(
        1
        for c in contents
        if isinstance(c, Mapping) and c.get("role") == "model"
        for p in c.get("parts") or ()
        if isinstance(p, Mapping) and "functionCall" in p
    )
    if done >= rounds and not (mode == "ANY" and done == 0):
        return None
    allowed = calling.get("allowedFunctionNames") if isinstance(calling, Mapping) else None
    declaration = declarations[0]
    if allowed:
        declaration = next((d for d in declarations if d.get("name") in allowed), declaration)
    schema = _field(declaration, "parametersJsonSchema", "parameters_json_schema")
    args = json.loads(behaviour.tool_arguments(schema or declaration.get("parameters")))
    return {"name": declaration.get("name", "tool"), "args": args}


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one ``generateContent`` or ``streamGenerateContent`` request."""
    name = request.path.rsplit("/models/", 1)[-1]
    model, _, method = name.partition(":")
    try:
        body = request.json()
    except ValueError:
        await response.send_json(400, _error(400, "Invalid JSON payload received."))
        return
    contents = body.get("contents") if isinstance(body, Mapping) else None
    if not isinstance(contents, list) or not contents:
        await response.send_json(
            400, _error(400, "* GenerateContentRequest.contents: contents is not specified")
        )
        return
    problem = _malformed(body, contents)
    if problem is not None:
        await response.send_json(400, _error(400, problem))
        return
    gone = behaviour.retired(model, request.provider, response.settings.today)
    if gone is not None:
        if gone.replacement is None:
            await response.send_json(
                404,
                _error(
                    404,
                    f"models/{model} is not found for API version v1beta, or is not supported "
                    "for generateContent. Call ListModels to see the list of available models "
                    "and their supported methods.",
                ),
            )
            return
        # A shut-down model is re-routed to its replacement, billed at its price; the answer's
        # modelVersion is the only tell (CURRENT.md §3.2, AIDEPR-GEM).
        model = gone.replacement
    config = _thinking(body)
    tier, problem = _tier(model, config)
    schema, refused = _structured(model, body)
    problem = problem or refused or _check_history(model, contents)
    if problem is not None or tier is None:
        await response.send_json(400, _error(400, problem or "Invalid thinking config."))
        return
    depth = _depth(model, tier)
    settings = response.settings
    played = tiers.play(request.provider, model, body, request, settings)
    if played.error is not None:
        await response.send_json(*played.error)
        return
    tier_header = (
        {played.header: played.reported}
        if played.header is not None and played.reported is not None
        else None
    )
    words = int(request.header_float("x-sim-answer-words", settings.answer_words))
    rounds = int(request.header_float("x-sim-tool-rounds", settings.tool_rounds))
    answer = behaviour.answer_for(model, _last_user_text(contents), depth, words, contents)
    system = body.get("systemInstruction", body.get("system_instruction"))
    cache = automatic(
        response.prompt_cache,
        f"gemini:{request.provider}:{model}",
        {"systemInstruction": system, "tools": body.get("tools")},
        tokens_of(system) if system else 0,
        contents,
    )
    answer = dataclasses.replace(answer, prompt_tokens=cache.total)
    call = _function_call(body, contents, rounds)
    answer_words = answer.words if call is None else []
    thoughts = answer.reasoning_tokens
    finish = "STOP"
    generation = _field(body, "generationConfig", "generation_config")
    limit = (
        _field(generation, "maxOutputTokens", "max_output_tokens")
        if isinstance(generation, Mapping)
        else None
    )
    if schema is not None and call is None:
        mode = behaviour.structured_mode(request.headers, settings.structured_output)
        if mode == "refusal":
            answer_words, finish = [], "SAFETY"
        else:
            prompt = _last_user_text(contents)
            answer_words = behaviour.structured_pieces(schema or None, mode, prompt)
            if mode == "truncated":
                finish = "MAX_TOKENS"
    if isinstance(limit, int) and limit > 0 and thoughts + len(answer_words) > limit:
        answer_words = answer_words[: max(0, limit - thoughts)]
        thoughts = min(thoughts, limit)
        finish = "MAX_TOKENS"
    include = bool(_field(config, "includeThoughts", "include_thoughts"))
    seed = hashlib.sha256(request.body).hexdigest()[:16]
    chunks = _chunks(
        model,
        answer.reasoning if (include and thoughts) else "",
        answer_words,
        call,
        _signed(model) and depth is not Effort.NONE,
    )
    candidates_tokens = len(answer_words) + (8 if call else 0)

    def usage(candidates: int, reported_thoughts: int) -> dict[str, Any]:
        metadata: dict[str, Any] = {"promptTokenCount": answer.prompt_tokens}
        if cache.read:
            metadata["cachedContentTokenCount"] = cache.read
        if candidates:
            metadata["candidatesTokenCount"] = candidates
        if reported_thoughts:
            metadata["thoughtsTokenCount"] = reported_thoughts
        metadata["totalTokenCount"] = answer.prompt_tokens + candidates + reported_thoughts
        if played.usage_key is not None:
            metadata[played.usage_key] = played.reported
        return metadata

    def envelope(parts: list[dict[str, Any]], candidates: int, last: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": usage(candidates, thoughts),
            "modelVersion": model,
            "responseId": f"sim-{seed}",
        }

    if method == "streamGenerateContent":
        await response.start_stream(headers=tier_header)
        produced = 0
        for i, part in enumerate(chunks):
            if not part.get("thought"):
                produced += 8 if "functionCall" in part else 1
            data = json.dumps(envelope([part], produced, i == len(chunks) - 1))
            await response.write_event(data, sep="\r\n")
        return
    merged = _merge(chunks)
    await response.send_json(200, envelope(merged, candidates_tokens, True), headers=tier_header)


def _chunks(
    model: str,
    reasoning: str,
    words: list[str],
    call: dict[str, Any] | None,
    signed: bool,
) -> list[dict[str, Any]]:
    """The parts of the answer as a stream sends them: thoughts, then text or a call."""
    parts: list[dict[str, Any]] = []
    pieces = reasoning.split(" ") if reasoning else []
    for i, piece in enumerate(pieces):
        parts.append({"text": piece if i == 0 else " " + piece, "thought": True})
    if call is not None:
        part: dict[str, Any] = {"functionCall": call}
        if signed:
            part["thoughtSignature"] = _sign(model, part)
        parts.append(part)
    else:
        parts.extend({"text": word} for word in words)
        if signed and words:
            whole = {"text": "".join(words)}
            parts[len(pieces)]["thoughtSignature"] = _sign(model, whole)
    if not parts:
        parts.append({"text": ""})
    return parts


def _merge(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-streamed parts: consecutive text of the same kind joined into one part."""
    merged: list[dict[str, Any]] = []
    for part in chunks:
        last = merged[-1] if merged else None
        if (
            last is not None
            and "text" in part
            and "text" in last
            and "thoughtSignature" not in part
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            last["text"] += part["text"]
        else:
            merged.append(dict(part))
    return merged
