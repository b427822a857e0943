"""Simulated OpenAI Responses API (``POST /{provider}/v1/responses``).

Reasoning behaves like OpenAI's (WIRE.md §2; error texts as observed, §1.2):

- the tier is ``reasoning.effort``, else the model's default; a registered model that does
  not accept the tier gets 400 ``unsupported_value`` (``param: reasoning.effort``), a model
  that does not reason gets 400 ``unsupported_parameter`` for ``reasoning`` and 400 "Encrypted
  content is not supported with this model" for ``include: [reasoning.encrypted_content]``;
- ``stop`` is an unknown parameter (400), as on the real endpoint;
- reasoning items carry a summary only when ``reasoning.summary`` asks for one, and an
  ``encrypted_content`` only when ``include`` asks for it. The encrypted content is a keyed
  digest of the item, checked when the item comes back: an altered one gets 400 "could not be
  verified", and a reasoning item without it under ``store: false`` gets OpenAI's 404 "Items
  are not persisted when `store` is set to false". In a stream, the ``.added`` event carries a
  truncated ``encrypted_content`` (the real one "may be incomplete"); only ``.done`` has the
  whole value;
- reasoning tokens grow with the tier; tool calls come back as ``function_call`` items for
  ``tool_rounds`` turns.

On ``/openrouter-responses/`` it speaks OpenRouter's variant: no tier validation, raw
reasoning as ``reasoning_text`` content, no ``event:`` lines, ``: OPENROUTER PROCESSING``
comments and a closing ``data: [DONE]``.

``text.format`` (STRUCTURED.md §2) is answered with an ``output_text`` holding an object that
fits its schema, in the mode ``Settings.structured_output`` asks for: a refusal is a
``refusal`` content part (``response.refusal.delta`` events), a cut answer ``status:
"incomplete"`` with ``max_output_tokens``. A strict schema OpenAI's strict mode does not take,
and ``json_object`` without "json" in an input message (``instructions`` do not count), get
OpenAI's 400.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from polythink.simulator import behaviour, tiers
from polythink.simulator.behaviour import openai_error as _error
from polythink.simulator.behaviour import quoted_list as _listing
from polythink.simulator.prompt_cache import automatic, tokens_of
from polythink.simulator.server import SimRequest, SimResponse
from polythink.types import Effort

__all__ = ["handle", "matches"]

_ENCRYPTED = "reasoning.encrypted_content"
_KEY = b"polythink-simulator-responses"


def bad_request(message: str) -> dict[str, Any]:
    """OpenAI's 400 body for a request it cannot read (``invalid_request_error``)."""
    return _error(message, param=None, code=None)


def matches(path: str) -> bool:
    """Whether ``path`` is a Responses route."""
    return path.endswith("/responses")


def _seal(item_id: str, model: str) -> str:
    """The simulated ``encrypted_content`` of a reasoning item."""
    return "gAAAAB" + hashlib.sha256(_KEY + f"{model}:{item_id}".encode()).hexdigest()


def _items(body: Mapping[str, Any]) -> list[Any]:
    value = body.get("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value if isinstance(value, list) else []


_PART_TYPES = [
    "input_text",
    "input_image",
    "input_audio",
    "output_text",
    "refusal",
    "input_file",
    "computer_screenshot",
    "summary_text",
    "encrypted_content",
]
"""The content part types the Responses API lists in its 400 for another one (``Invalid value:
'text'. Supported values are: ...``, param ``input[i].content[j].type``, code
``invalid_value``; MervinPraison/PraisonAI issue 3934, 2026-08-14)."""


def _malformed_input(body: Mapping[str, Any]) -> Any:
    """OpenAI's 400 for an input item it refuses, else ``None``: a message with a null
    ``content``, a content part of another type, and a ``function_call_output`` that answers
    no ``function_call`` of the input ("No tool call found for function call output with
    call_id call_….", param ``input``; continuedev/continue issue 10092, 2026-02), unless the
    call is in a stored response named by ``previous_response_id``."""
    calls: set[Any] = set()
    for i, item in enumerate(_items(body)):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            calls.add(item.get("call_id"))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls and not body.get("previous_response_id"):
                return _error(
                    f"No tool call found for function call output with call_id "
                    f"{item.get('call_id')}.",
                    param="input",
                    code=None,
                )
        elif kind == "message":
            content = item.get("content")
            if content is None:
                return _error(
                    f"Invalid type for 'input[{i}].content': expected one of a string or array "
                    "of objects, but got null instead.",
                    param=f"input[{i}].content",
                    code="invalid_type",
                )
            for j, part in enumerate(content if isinstance(content, list) else ()):
                part_type = part.get("type") if isinstance(part, Mapping) else None
                if part_type not in _PART_TYPES:
                    return _error(
                        f"Invalid value: {part_type!r}. Supported values are: "
                        f"{_listing(_PART_TYPES)}.",
                        param=f"input[{i}].content[{j}].type",
                        code="invalid_value",
                    )
    return None


def _reject(provider: str, body: Mapping[str, Any], model: str) -> tuple[int, Any] | None:
    """Return ``(status, error)`` when OpenAI would reject this body, else ``None``."""
    if "stop" in body:
        return 400, _error("Unknown parameter: 'stop'.", param="stop", code="unknown_parameter")
    malformed = _malformed_input(body)
    if malformed is not None:
        return 400, malformed
    items = _items(body)
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or item.get("type") != "reasoning":
            continue
        if "summary" not in item:
            return 400, _error(
                f"Missing required parameter: 'input[{index}].summary'.",
                param=f"input[{index}].summary",
                code="missing_required_parameter",
            )
        following = items[index + 1] if index + 1 < len(items) else None
        if not (
            isinstance(following, Mapping)
            and (
                following.get("type") in ("function_call", "reasoning")
                or following.get("role") == "assistant"
            )
        ):
            # The item the model produced right after it must come with it, in order
            # (MUX-59, [3rd] wording; CONTINUITY.md §3.1).
            return 400, _error(
                f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                "required following item.",
                param="input",
                code=None,
            )
        sealed = item.get("encrypted_content")
        if sealed is None and body.get("store") is False:
            return 404, _error(
                f"Item with id '{item.get('id')}' not found. Items are not persisted when "
                "`store` is set to false. Try again with `store` set to true, or remove this "
                "item from your input.",
                param="input",
                code=None,
            )
        if sealed is not None and sealed != _seal(str(item.get("id")), model):
            return 400, _error(
                f"The encrypted content for item {item.get('id')} could not be verified.",
                param=None,
                code="invalid_encrypted_content",
            )
    cap = behaviour.capability(model)
    reasoning = body.get("reasoning")
    if (
        provider == "openai-responses"
        and not behaviour.takes_parameter(model)
        and isinstance(reasoning, Mapping)
        and "effort" in reasoning
    ):
        return 400, _error(
            "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
            param="reasoning.effort",
            code="unsupported_parameter",
        )
    if provider != "openai-responses" or cap is None:
        return None
    include = body.get("include")
    if not cap.reasons and isinstance(include, list) and _ENCRYPTED in include:
        return 400, _error(
            "Encrypted content is not supported with this model.", param="include", code=None
        )
    if not isinstance(reasoning, Mapping) or "effort" not in reasoning:
        return None
    if not cap.reasons:
        return 400, _error(
            "Unsupported parameter: 'reasoning.effort' is not supported with this model.",
            param="reasoning.effort",
            code="unsupported_parameter",
        )
    raw = reasoning.get("effort")
    tier = Effort.parse(raw) if raw in {e.value for e in Effort} else None
    if tier is None or tier is Effort.AUTO or tier not in cap.supported_efforts:
        supported = [e.value for e in cap.supported_efforts if e is not Effort.AUTO]
        return 400, _error(
            f"Unsupported value: 'reasoning.effort' does not support '{raw}' with this model. "
            f"Supported values are: {_listing(supported)}.",
            param="reasoning.effort",
            code="unsupported_value",
        )
    return None


def _tier(body: Mapping[str, Any], model: str) -> Effort:
    reasoning = body.get("reasoning")
    raw = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    if isinstance(raw, str):
        try:
            tier = Effort.parse(raw)
        except ValueError:
            tier = None
        if tier is not None:
            return tier
    return behaviour.default_tier(model)


def _depth(model: str, tier: Effort) -> Effort:
    cap = behaviour.capability(model)
    if cap is None:
        return tier
    if not cap.reasons:
        return Effort.NONE
    if tier is Effort.NONE and not cap.can_disable:
        return cap.cheapest_effort or Effort.AUTO
    return tier


def _structured(body: Mapping[str, Any], items: list[Any]) -> tuple[Mapping[str, Any] | None, Any]:
    """``(schema, error)`` for ``text.format``: ``{}`` for JSON mode, ``None`` when no JSON
    is asked; ``error`` is OpenAI's 400 body when it refuses the request."""
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "json_object":
        if not behaviour.mentions_json(behaviour.message_texts(items)):
            return None, _error(
                "Response input messages must contain the word 'json' in some form to use "
                "'text.format' of type 'json_object'.",
                param="text.format",
                code=None,
            )
        return {}, None
    if kind != "json_schema" or not isinstance(fmt, Mapping):
        return None, None
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping):
        return {}, None
    refused = behaviour.strict_schema_error(fmt, schema, "text.format.schema")
    return (None, refused) if refused is not None else (schema, None)


def _last_user_text(items: list[Any]) -> str:
    for item in reversed(items):
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _function_call(
    body: Mapping[str, Any], items: list[Any], rounds: int, seed: str
) -> dict[str, Any] | None:
    tools = [t for t in body.get("tools") or () if isinstance(t, Mapping)]
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return None
    done = sum(1 for i in items if isinstance(i, Mapping) and i.get("type") == "function_call")
    forced = choice == "required" or isinstance(choice, Mapping)
    if done >= rounds and not (forced and done == 0):
        return None
    tool = tools[0]
    if isinstance(choice, Mapping):
        tool = next((t for t in tools if t.get("name") == choice.get("name")), tool)
    return {
        "type": "function_call",
        "id": f"fc_{seed}",
        "call_id": f"call_{seed}",
        "name": tool.get("name", "tool"),
        "arguments": behaviour.tool_arguments(tool.get("parameters")),
        "status": "completed",
    }


def _reasoning_item(
    provider: str, body: Mapping[str, Any], model: str, text: str, seed: str
) -> dict[str, Any]:
    item: dict[str, Any] = {"id": f"rs_{seed}", "type": "reasoning", "summary": []}
    reasoning = body.get("reasoning")
    if provider == "openrouter-responses":
        item["content"] = [{"type": "reasoning_text", "text": text}]
    elif isinstance(reasoning, Mapping) and reasoning.get("summary"):
        item["summary"] = [{"type": "summary_text", "text": text}]
    include = body.get("include")
    if isinstance(include, list) and _ENCRYPTED in include:
        item["encrypted_content"] = _seal(item["id"], model)
    return item


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Responses request in the dialect of ``request.provider``."""
    try:
        body = request.json()
    except ValueError:
        await response.send_json(
            400,
            _error("We could not parse the JSON body of your request.", param=None, code=None),
        )
        return
    model = body.get("model") if isinstance(body, Mapping) else None
    if not isinstance(model, str) or not _items(body):
        await response.send_json(
            400,
            _error("'model' and 'input' are required.", param="input", code="missing_required"),
        )
        return
    if not isinstance(body.get("tools", []), list):
        await response.send_json(
            400,
            _error(
                "Invalid type for 'tools': expected an array.", param="tools", code="invalid_type"
            ),
        )
        return
    provider = request.provider
    if behaviour.retired(model, provider, response.settings.today) is not None:
        await response.send_json(*behaviour.openai_not_found(model, provider))
        return
    played = tiers.play(provider, model, body, request, response.settings)
    if played.error is not None:
        await response.send_json(*played.error)
        return
    rejection = _reject(provider, body, model)
    if rejection is not None:
        await response.send_json(*rejection)
        return
    items = _items(body)
    schema, refused = _structured(body, items)
    if refused is not None:
        await response.send_json(400, refused)
        return
    depth = _depth(model, _tier(body, model))
    settings = response.settings
    words = int(request.header_float("x-sim-answer-words", settings.answer_words))
    rounds = int(request.header_float("x-sim-tool-rounds", settings.tool_rounds))
    answer = behaviour.answer_for(model, _last_user_text(items), depth, words, items)
    instructions = body.get("instructions")
    cache = automatic(
        response.prompt_cache,
        f"responses:{provider}:{model}",
        {"instructions": instructions, "tools": body.get("tools")},
        tokens_of(instructions) if instructions else 0,
        items,
        increment=128,
    )
    answer = dataclasses.replace(answer, prompt_tokens=cache.total)
    seed = hashlib.sha256(request.body).hexdigest()[:12]
    call = _function_call(body, items, rounds, seed)
    answer_words = answer.words if call is None else []
    reasoning_tokens = answer.reasoning_tokens
    status, incomplete = "completed", None
    refusal = None
    if schema is not None and call is None:
        mode = behaviour.structured_mode(request.headers, settings.structured_output)
        if mode == "refusal":
            refusal, answer_words = behaviour.REFUSAL, []
        else:
            prompt = _last_user_text(items)
            answer_words = behaviour.structured_pieces(schema or None, mode, prompt)
            if mode == "truncated":
                status, incomplete = "incomplete", {"reason": "max_output_tokens"}
    limit = body.get("max_output_tokens")
    if isinstance(limit, int) and limit > 0 and reasoning_tokens + len(answer_words) > limit:
        answer_words = answer_words[: max(0, limit - reasoning_tokens)]
        reasoning_tokens = min(reasoning_tokens, limit)
        status, incomplete = "incomplete", {"reason": "max_output_tokens"}
    output: list[dict[str, Any]] = []
    if reasoning_tokens:
        output.append(_reasoning_item(provider, body, model, answer.reasoning, seed))
    if answer_words or refusal is not None:
        part: dict[str, Any] = (
            {"type": "refusal", "refusal": refusal}
            if refusal is not None
            else {"type": "output_text", "annotations": [], "text": "".join(answer_words)}
        )
        output.append(
            {
                "type": "message",
                "id": f"msg_{seed}",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    if call is not None:
        output.append(call)
    output_tokens = reasoning_tokens + len(answer_words) + (8 if call else 0)
    # The fields the SDK's Response model requires echo the request, with the API's defaults.
    result = {
        "id": f"resp_sim_{seed}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": status,
        "incomplete_details": incomplete,
        "error": None,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "usage": {
            "input_tokens": answer.prompt_tokens,
            "input_tokens_details": {"cached_tokens": cache.read, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": answer.prompt_tokens + output_tokens,
        },
    }
    if played.reported is not None:
        result["service_tier"] = played.reported
    if body.get("stream"):
        await _stream(response, provider, result, answer_words)
    else:
        await response.send_json(200, result)


async def _stream(
    response: SimResponse, provider: str, result: dict[str, Any], words: list[str]
) -> None:
    openrouter = provider == "openrouter-responses"
    await response.start_stream()
    sequence = 0

    async def emit(event: dict[str, Any]) -> None:
        nonlocal sequence
        event["sequence_number"] = sequence
        sequence += 1
        data = json.dumps(event, separators=(",", ":"))
        await response.write_event(data, None if openrouter else event["type"])

    if openrouter:
        await response.write(b": OPENROUTER PROCESSING\n\n")
    head = {**result, "status": "in_progress", "output": [], "usage": None}
    await emit({"type": "response.created", "response": head})
    for index, item in enumerate(result["output"]):
        kind = item["type"]
        added = {**item}
        if kind == "reasoning":
            added["summary"] = []
            added.pop("content", None)
            if "encrypted_content" in item:
                added["encrypted_content"] = item["encrypted_content"][:20]
        elif kind == "message":
            added["content"], added["status"] = [], "in_progress"
        elif kind == "function_call":
            added["arguments"], added["status"] = "", "in_progress"
        await emit({"type": "response.output_item.added", "output_index": index, "item": added})
        if kind == "reasoning":
            await _stream_reasoning(emit, index, item)
        elif kind == "message":
            refusal = item["content"][0].get("refusal")
            pieces = refusal.split(" ") if refusal else words
            for i, word in enumerate(pieces):
                delta: dict[str, Any] = {
                    "type": "response.refusal.delta" if refusal else "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": index,
                    "content_index": 0,
                    "delta": " " + word if refusal and i else word,
                }
                if not refusal:
                    delta["logprobs"] = []
                await emit(delta)
        elif kind == "function_call":
            arguments = item["arguments"]
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                await emit(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "delta": piece,
                    }
                )
            await emit(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": index,
                    "arguments": arguments,
                }
            )
        await emit({"type": "response.output_item.done", "output_index": index, "item": item})
    final = "response.incomplete" if result["status"] == "incomplete" else "response.completed"
    await emit({"type": final, "response": result})
    if openrouter:
        await response.write_event("[DONE]")


async def _stream_reasoning(
    emit: Callable[[dict[str, Any]], Awaitable[None]], index: int, item: Mapping[str, Any]
) -> None:
    for key, delta_type in (
        ("summary", "response.reasoning_summary_text.delta"),
        ("content", "response.reasoning_text.delta"),
    ):
        for position, part in enumerate(item.get(key) or ()):
            pieces = part["text"].split(" ")
            for i, piece in enumerate(pieces):
                await emit(
                    {
                        "type": delta_type,
                        "item_id": item["id"],
                        "output_index": index,
                        f"{key}_index": position,
                        "delta": piece if i == 0 else " " + piece,
                    }
                )
