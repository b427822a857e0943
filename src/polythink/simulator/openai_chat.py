"""Simulated OpenAI Chat Completions, in the dialect of the provider named by the path.

``POST /{provider}/v1/chat/completions``. Reasoning behaves like the provider's:

- the tier is read from the provider's own request fields (``reasoning_effort``; OpenRouter
  ``reasoning``; DeepSeek/GLM/Kimi ``thinking.type``; Qwen ``enable_thinking`` /
  ``thinking_budget``; vLLM ``chat_template_kwargs``), else the model's default;
- on effort-validating providers (OpenAI, xAI, Groq, Mistral, MiniMax) a registered model
  given a tier it does not accept gets OpenAI's 400 ``unsupported_value`` error, and a model
  that does not reason gets 400 ``unsupported_parameter``; xAI answers with its bare-string
  errors instead ("Model … does not support parameter reasoningEffort.", "Invalid reasoning
  effort."), Groq with "`reasoning_effort` must be one of …"; OpenAI also rejects ``max_tokens``
  on reasoning models (recorded: vercel_openai_chat_reasoning_max_tokens_error.json);
- Qwen (DashScope) refuses ``enable_thinking: false`` for a model that always thinks, with
  "The value of the enable_thinking parameter is restricted to True" (WIRE §6.2);
- providers that do not validate reason anyway when asked to switch off a model that cannot
  (as measured on GLM-5.3, 2026-09-05), which polythink's reconciliation reports;
- reasoning text comes back where the provider puts it (none on OpenAI, ``reasoning_content``,
  ``reasoning`` + OpenRouter ``reasoning_details``, Mistral thinking chunks), with token counts
  that grow with the tier;
- DeepSeek answers 400 when an earlier assistant tool-call turn lacks its
  ``reasoning_content`` while thinking is on (DS-DOC thinking_mode, 2026);
- DeepSeek and Qwen answer 400 to a forced ``tool_choice`` while the model thinks, and Qwen
  to a non-streamed reasoning call to a model it serves only streamed (WIRE §6.2);
- usage counts reasoning inside ``completion_tokens``, except on xAI, which counts it beside
  them (total = prompt + completion + reasoning).

Structured output (STRUCTURED.md §1, §5): ``response_format`` ``json_schema`` is answered
with an object that fits the schema, ``json_object`` with one that fits a schema quoted in
the prompt (else ``{"answer": ...}``), in the mode ``Settings.structured_output`` asks for
(a refusal comes as ``message.refusal`` / ``delta.refusal``, a cut answer with
``finish_reason: "length"``). As the providers do, OpenAI refuses a strict schema its strict
mode does not take and JSON mode without the word "json" in the messages, and DeepSeek, GLM
and Kimi refuse ``json_schema`` (DeepSeek's 2026 wording).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from polythink.providers import PROVIDERS
from polythink.reasoning.resolve import TIER_BUDGET_TOKENS
from polythink.simulator import behaviour, tiers
from polythink.simulator.behaviour import openai_error as _error
from polythink.simulator.behaviour import quoted_list as _listing
from polythink.simulator.prompt_cache import automatic
from polythink.simulator.server import SimRequest, SimResponse
from polythink.types import Effort

__all__ = ["handle", "matches"]

_VALIDATING = frozenset({"openai", "xai", "groq", "mistral", "minimax"})
NOT_PLAYABLE = frozenset({"deepseek", "glm", "kimi", "openrouter", "vllm", "ollama"})
"""Providers whose real API documents no rejection of a reasoning tier (they map or ignore
unknown tiers: WIRE §6.1, §6.3, §6.4, §6.7, §6.8, OpenRouter's normalised ``reasoning``), so
the simulator cannot play a model of theirs that refuses tiers."""
_REASONING_CONTENT = frozenset({"deepseek", "qwen", "glm", "kimi", "minimax", "xai"})
_REASONING_FIELD = frozenset({"groq", "vllm", "ollama", "openrouter"})


def bad_request(message: str) -> dict[str, Any]:
    """OpenAI's 400 body for a request it cannot read (``invalid_request_error``)."""
    return _error(message, param=None, code=None)


def matches(path: str) -> bool:
    """Whether ``path`` is a Chat Completions route."""
    return path.endswith("/chat/completions")


def _parse(raw: str, model: str) -> Effort:
    """Read a sent tier; a value outside the vocabulary reasons at the model's default."""
    try:
        parsed = Effort.parse(raw)
    except ValueError:
        parsed = None
    return parsed if parsed is not None else behaviour.default_tier(model)


def _tier(provider: str, body: Mapping[str, Any], model: str) -> tuple[Effort, str | None]:
    """Return (tier, raw effort value sent) from the provider's request fields."""
    wire = PROVIDERS[provider].reasoning_wire if provider in PROVIDERS else "effort"
    raw = body.get("reasoning_effort")
    if wire == "openrouter":
        reasoning = body.get("reasoning")
        if isinstance(reasoning, Mapping):
            if reasoning.get("enabled") is False or reasoning.get("effort") == "none":
                return Effort.NONE, "none"
            if isinstance(reasoning.get("effort"), str):
                return _parse(reasoning["effort"], model), reasoning["effort"]
            return Effort.AUTO, None
    elif wire == "thinking_type":
        thinking = body.get("thinking")
        if isinstance(thinking, Mapping) and thinking.get("type") == "disabled":
            return Effort.NONE, "none"
        # DeepSeek V4 and Kimi K3 reason by default, so an effort alone sets the depth.
        if isinstance(raw, str):
            return _parse(raw, model), raw
        if isinstance(thinking, Mapping):
            return Effort.AUTO, None
    elif wire == "qwen":
        if body.get("enable_thinking") is False:
            return Effort.NONE, "none"
        if isinstance(raw, str):
            # qwen3.8: enable_thinking with reasoning_effort (DEVTO-QWEN38).
            return _parse(raw, model), raw
        budget = body.get("thinking_budget")
        if isinstance(budget, int):
            nearest = min(TIER_BUDGET_TOKENS, key=lambda e: abs(TIER_BUDGET_TOKENS[e] - budget))
            return nearest, None
        if body.get("enable_thinking") is True:
            return Effort.AUTO, None
    elif wire == "vllm":
        kwargs = body.get("chat_template_kwargs")
        if isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is False:
            return Effort.NONE, "none"
        if isinstance(raw, str):
            return _parse(raw, model), raw
        if isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is True:
            return Effort.AUTO, None
    elif isinstance(raw, str):
        return _parse(raw, model), raw
    return behaviour.default_tier(model), None


_PART_TYPES = ["text", "image_url", "input_audio", "refusal", "audio", "file"]
"""The content part types Chat Completions takes (the request message content part unions of
the openai OpenAPI document, 2026-11-28), in the order its 400 lists them."""


def _answers_a_call(messages: list[Any], index: int) -> bool:
    """Whether the tool message at ``index`` follows, past other tool messages, an assistant
    message with ``tool_calls``."""
    before = index - 1
    while before >= 0 and isinstance(messages[before], Mapping):
        if messages[before].get("role") != "tool":
            break
        before -= 1
    previous = messages[before] if before >= 0 else None
    return (
        isinstance(previous, Mapping)
        and previous.get("role") == "assistant"
        and bool(previous.get("tool_calls"))
    )


def _malformed_messages(messages: list[Any]) -> Any:
    """OpenAI's 400 for a message it refuses, else ``None``: a null ``content`` where one is
    required ("Invalid value for 'content': expected a string, got null.", param
    ``messages.[i].content``, recorded in openai issues 2023-12 to 2026), a tool message that
    answers no call ("Invalid parameter: messages with role 'tool' must be a response to a
    preceeding message with 'tool_calls'.", param ``messages.[i].role``, its spelling), and a
    content part of another type ("Invalid value: 'image'. Supported values are: ...",
    param ``messages[i].content[j].type``, code ``invalid_value``)."""
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if content is None and role != "assistant":
            return _error(
                "Invalid value for 'content': expected a string, got null.",
                param=f"messages.[{i}].content",
                code=None,
            )
        if role == "tool" and not _answers_a_call(messages, i):
            return _error(
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                param=f"messages.[{i}].role",
                code=None,
            )
        for j, part in enumerate(content if isinstance(content, list) else ()):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in _PART_TYPES:
                return _error(
                    f"Invalid value: {kind!r}. Supported values are: {_listing(_PART_TYPES)}.",
                    param=f"messages[{i}].content[{j}].type",
                    code="invalid_value",
                )
    return None


def _reject(provider: str, body: Mapping[str, Any], model: str, raw: str | None) -> Any:
    """Return an error payload when the provider would reject this body, else ``None``."""
    cap = behaviour.capability(model)
    if provider == "openai" and "max_tokens" in body and (cap is None or cap.reasons):
        return _error(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            param="max_tokens",
            code="unsupported_parameter",
        )
    if provider == "qwen":
        return _qwen_reject(body, model)
    if provider not in _VALIDATING or raw is None:
        return None
    takes = behaviour.takes_parameter(model)
    if takes and cap is None:
        return None
    supported = [e.value for e in cap.supported_efforts if e is not Effort.AUTO] if cap else []
    if not takes or cap is None or not cap.reasons or not supported:
        # Non-reasoning models, and reasoning models with no strength to choose (xAI
        # grok-4, XAI-DOC 2025), refuse the field itself (wording: WIRE §1.2).
        if provider == "xai":
            return _xai_error(f"Model {model} does not support parameter reasoningEffort.")
        return _error(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            param="reasoning_effort",
            code="unsupported_parameter",
        )
    if raw not in supported:
        if provider == "xai":
            return _xai_error("Invalid reasoning effort.")
        if provider == "groq":
            listed = [f"`{v}`" for v in supported]
            tail = f"{', '.join(listed[:-1])} or {listed[-1]}" if len(listed) > 1 else listed[0]
            return {
                "error": {
                    "message": f"`reasoning_effort` must be one of {tail}",
                    "type": "invalid_request_error",
                }
            }
        return _error(
            f"Unsupported value: 'reasoning_effort' does not support '{raw}' with this model. "
            f"Supported values are: {_listing(supported)}.",
            param="reasoning_effort",
            code="unsupported_value",
        )
    return None


def _openai_rules(provider: str, body: Mapping[str, Any], model: str, tier: Effort) -> Any:
    """OpenAI's refusals of a reasoning call's other fields, by the model's capability.

    - Function tools on a model that takes them on the Responses API only, or on Chat only at
      ``reasoning_effort: none`` (GPT-6 Astra and 6.1 Sol; GPT-6 Sol and Luna): "Function
      tools with reasoning_effort are not supported for <model> in /v1/chat/completions. To use
      function tools, use /v1/responses" (O-DEPLOY; WIRE §1.1, 2026-09-21).
    - ``temperature`` / ``top_p`` other than 1 while the model reasons (sampling rule
      ``without_reasoning`` or ``never``): "Unsupported value: 'temperature' does not support 0
      with this model. Only the default (1) value is supported." (WIRE §1.1).
    """
    cap = behaviour.capability(model)
    if provider != "openai" or cap is None:
        return None
    reasons = tier is not Effort.NONE and cap.reasons
    if body.get("tools") and (
        cap.chat_tools == "never" or (cap.chat_tools == "without_reasoning" and reasons)
    ):
        return _error(
            f"Function tools with reasoning_effort are not supported for {model} in "
            "/v1/chat/completions. To use function tools, use /v1/responses",
            param="tools",
            code="unsupported_parameter",
        )
    if cap.sampling == "never" or (cap.sampling == "without_reasoning" and reasons):
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1:
                return _error(
                    f"Unsupported value: '{name}' does not support {value} with this model. "
                    "Only the default (1) value is supported.",
                    param=name,
                    code="unsupported_value",
                )
    return None


def _qwen_reject(body: Mapping[str, Any], model: str) -> Any:
    """DashScope's one documented reasoning refusal: switching off a model that always thinks
    (``enable_thinking: false``; WIRE §6.2). Other tiers go out as a ``thinking_budget``, which
    DashScope caps rather than refuses."""
    cap = behaviour.capability(model)
    if body.get("enable_thinking") is False and cap is not None and not cap.can_disable:
        return _error(
            "The value of the enable_thinking parameter is restricted to True",
            param=None,
            code="invalid_parameter_error",
        )
    return None


_FORCED_TOOL_WHILE_THINKING = {
    "deepseek": ("Thinking mode does not support this tool_choice", "invalid_request_error"),
    "qwen": (
        "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support "
        "being set to required or object in thinking mode",
        "invalid_parameter_error",
    ),
}
"""The 400 a thinking call with a forced tool_choice gets (DeepSeek V4: DeepSeek-V3#1376,
2026-08-21; DashScope: cloudwego/eino#994, 2026-04-24)."""


def _forces_a_tool(choice: Any) -> bool:
    return choice == "required" or (
        isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping)
    )


def _xai_error(message: str) -> dict[str, Any]:
    """xAI's error body: a bare string under ``error``, no ``param`` (BerriAI/litellm#16265,
    2025-11; chenyme/grok2api#814, 2026-07)."""
    return {"code": "Client specified an invalid argument", "error": message}


def _effective(model: str, tier: Effort) -> Effort:
    """The depth the model really reasons at: a model that cannot switch off still reasons."""
    cap = behaviour.capability(model)
    if cap is None:
        return tier
    if tier is Effort.NONE:
        return Effort.NONE if cap.can_disable else (cap.cheapest_effort or Effort.AUTO)
    return tier if cap.reasons else Effort.NONE


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


_JSON_MODE_ONLY = frozenset({"deepseek", "glm", "kimi"})


def _structured(
    provider: str, body: Mapping[str, Any], messages: list[Any]
) -> tuple[Mapping[str, Any] | None, Any]:
    """``(schema, error)`` for the body's ``response_format``: ``schema`` is ``{}`` for JSON
    mode without a schema in the prompt, ``None`` when no structured output is asked;
    ``error`` is the provider's 400 body when it refuses the request."""
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping) or fmt.get("type") not in ("json_schema", "json_object"):
        return behaviour.asked_in_prompt(behaviour.instruction_texts(messages)), None
    texts = behaviour.message_texts(messages)
    if fmt["type"] == "json_object":
        if provider in ("openai", "deepseek", "qwen") and not behaviour.mentions_json(texts):
            return None, _error(
                "'messages' must contain the word 'json' in some form, to use "
                "'response_format' of type 'json_object'.",
                param="messages",
                code=None,
            )
        return behaviour.schema_in_prompt(texts) or {}, None
    if provider in _JSON_MODE_ONLY:
        return None, _error(
            "This response_format type is unavailable now", param=None, code="invalid_request_error"
        )
    spec: Mapping[str, Any] = fmt.get("json_schema") or {}
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    if not isinstance(schema, Mapping):
        return {}, None
    refused = None
    if provider == "openai":
        refused = behaviour.strict_schema_error(spec, schema, "response_format")
    return (None, refused) if refused is not None else (schema, None)


_REASONING_BACK = {
    "deepseek": (
        True,
        "Missing reasoning_content field in the assistant message at message index {index}. "
        "The reasoning_content in the thinking mode must be passed back to the API.",
    ),
    # [3rd] wording, citing Moonshot's FAQ (LIBRECHAT-KIMI, CONTINUITY.md §3.3).
    "kimi": (
        False,
        "thinking is enabled but reasoning_content is missing in assistant tool call message "
        "at index {index}",
    ),
}
"""Providers that refuse a thinking-mode conversation without ``reasoning_content`` on an
assistant turn: whether every turn of a tool exchange needs it, and the 400's words."""


def _missing_reasoning_content(messages: list[Any], *, whole_exchange: bool) -> int | None:
    """The index of the first assistant turn that must carry ``reasoning_content`` and does
    not: a tool-call turn, and with ``whole_exchange`` (DeepSeek: "if there was a tool call
    between two user messages, it must be passed back in all subsequent requests", DS,
    CONTINUITY.md §3.3) every assistant turn between two user messages when one of them
    called a tool."""
    exchange: list[int] = []
    called = False
    for index, message in enumerate([*messages, {"role": "user"}]):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "user":
            for turn in exchange:
                if (
                    (whole_exchange and called) or messages[turn].get("tool_calls")
                ) and not isinstance(messages[turn].get("reasoning_content"), str):
                    return turn
            exchange, called = [], False
        elif role == "assistant":
            exchange.append(index)
            called = called or bool(message.get("tool_calls"))
    return None


def _malformed_tools(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return an error payload when ``tools`` or ``tool_choice`` is not shaped as OpenAI's."""
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list)
        and all(
            isinstance(tool, Mapping)
            and isinstance(tool.get("function"), Mapping)
            and isinstance(tool["function"].get("name"), str)
            for tool in tools
        )
    ):
        return _error(
            "Invalid 'tools': expected an array of {'type': 'function', 'function': "
            "{'name': ..., 'parameters': ...}} objects.",
            param="tools",
            code="invalid_value",
        )
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto", "required"):
        return None
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        return None
    return _error(
        "Invalid 'tool_choice': expected 'none', 'auto', 'required' or "
        "{'type': 'function', 'function': {'name': ...}}.",
        param="tool_choice",
        code="invalid_value",
    )


def _tool_call(body: Mapping[str, Any], messages: list[Any], rounds: int) -> dict[str, Any] | None:
    tools = body.get("tools")
    if not tools or body.get("tool_choice") == "none":
        return None
    done = sum(
        1
        for m in messages
        if isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("tool_calls")
    )
    forced = body.get("tool_choice") in ("required",) or isinstance(body.get("tool_choice"), dict)
    if done >= rounds and not (forced and done == 0):
        return None
    choice = body.get("tool_choice")
    function = tools[0].get("function", {})
    if isinstance(choice, Mapping):
        wanted = (choice.get("function") or {}).get("name")
        for tool in tools:
            if tool.get("function", {}).get("name") == wanted:
                function = tool["function"]
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:12]
    return {
        "id": f"call_{seed}",
        "type": "function",
        "function": {
            "name": function.get("name", "tool"),
            "arguments": behaviour.tool_arguments(function.get("parameters")),
        },
    }


def _limit(body: Mapping[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _reasoning_fields(provider: str, text: str, seed: str) -> dict[str, Any]:
    if not text:
        return {}
    if provider == "openrouter":
        return {
            "reasoning": text,
            "reasoning_details": [
                {
                    "type": "reasoning.text",
                    "text": text,
                    "signature": f"sim-signature-{seed}",
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
            ],
        }
    if provider in _REASONING_CONTENT:
        return {"reasoning_content": text}
    if provider in _REASONING_FIELD:
        return {"reasoning": text}
    return {}


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Chat Completions request in the dialect of ``request.provider``."""
    try:
        body = request.json()
    except ValueError:
        await response.send_json(
            400,
            _error(
                "We could not parse the JSON body of your request.", param=None, code="invalid_json"
            ),
        )
        return
    provider = request.provider
    model = body.get("model") if isinstance(body, Mapping) else None
    messages = body.get("messages") if isinstance(body, Mapping) else None
    if not isinstance(model, str) or not isinstance(messages, list) or not messages:
        await response.send_json(
            400,
            _error(
                "'model' and a non-empty 'messages' are required.",
                param="messages",
                code="missing_required_parameter",
            ),
        )
        return
    if behaviour.retired(model, provider, response.settings.today) is not None:
        await response.send_json(*behaviour.openai_not_found(model, provider))
        return
    played = tiers.play(provider, model, body, request, response.settings)
    if played.error is not None:
        await response.send_json(*played.error)
        return
    tier, raw = _tier(provider, body, model)
    schema, refused = _structured(provider, body, messages)
    rejection = (
        _malformed_messages(messages)
        or _malformed_tools(body)
        or _reject(provider, body, model, raw)
        or _openai_rules(provider, body, model, tier)
        or refused
    )
    if rejection is not None:
        await response.send_json(400, rejection)
        return
    depth = _effective(model, tier)
    cap = behaviour.capability(model)
    if (
        provider == "qwen"
        and depth is not Effort.NONE
        and not body.get("stream")
        and cap is not None
        and cap.stream_only_reasoning
    ):
        await response.send_json(
            400,
            _error(
                "<400> InternalError.Algo.InvalidParameter: parameter.enable_thinking must be "
                "set to false for non-streaming calls",
                param=None,
                code="invalid_parameter_error",
            ),
        )
        return
    forced = _FORCED_TOOL_WHILE_THINKING.get(provider)
    if forced is not None and depth is not Effort.NONE and _forces_a_tool(body.get("tool_choice")):
        await response.send_json(400, _error(forced[0], param="tool_choice", code=forced[1]))
        return
    required = _REASONING_BACK.get(provider)
    if required is not None and depth is not Effort.NONE:
        whole_exchange, wording = required
        index = _missing_reasoning_content(messages, whole_exchange=whole_exchange)
        if index is not None:
            await response.send_json(
                400,
                _error(wording.format(index=index), param="messages", code="invalid_request_error"),
            )
            return
    settings = response.settings
    words = int(request.header_float("x-sim-answer-words", settings.answer_words))
    rounds = int(request.header_float("x-sim-tool-rounds", settings.tool_rounds))
    answer = behaviour.answer_for(model, _last_user_text(messages), depth, words, messages)
    call = _tool_call(body, messages, rounds)
    seed = hashlib.sha256(request.body).hexdigest()[:10]
    limit = _limit(body)
    answer_words = answer.words if call is None else []
    finish = "tool_calls" if call is not None else "stop"
    reasoning_tokens = answer.reasoning_tokens
    if limit is not None and reasoning_tokens + len(answer_words) > limit:
        answer_words = answer_words[: max(0, limit - reasoning_tokens)]
        reasoning_tokens = min(reasoning_tokens, limit)
        finish = "length"
    refusal = None
    if schema is not None and call is None:
        mode = behaviour.structured_mode(request.headers, settings.structured_output)
        prompt = _last_user_text(messages)
        if mode == "refusal":
            refusal, answer_words = behaviour.REFUSAL, []
        else:
            answer_words = behaviour.structured_pieces(schema or None, mode, prompt)
            if mode == "truncated":
                finish = "length"
    completion = reasoning_tokens + len(answer_words) + (8 if call else 0)
    # Every prefix is cached on its own; hits in steps of 128 tokens from 1,024 (OpenAI).
    cache = automatic(
        response.prompt_cache,
        f"chat:{provider}:{model}",
        {"tools": body.get("tools")},
        0,
        messages,
        increment=128,
    )
    answer = dataclasses.replace(answer, prompt_tokens=cache.total)
    usage: dict[str, Any] = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": answer.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": cache.read},
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
    }
    if provider == "xai":
        # xAI counts reasoning beside completion_tokens, in total_tokens only
        # (docs.x.ai consumption-and-rate-limits; providers.ProviderProfile).
        usage["completion_tokens"] = completion - reasoning_tokens
    reasoning = answer.reasoning if reasoning_tokens else ""
    response_id = f"chatcmpl-sim-{seed}"
    if body.get("stream"):
        await _stream(
            response,
            provider,
            model,
            response_id,
            reasoning,
            answer_words,
            call,
            finish,
            usage,
            body,
            seed,
            refusal,
            played.reported,
        )
        return
    message: dict[str, Any] = {"role": "assistant", "content": "".join(answer_words)}
    if refusal is not None:
        message.update(content=None, refusal=refusal)
    if call is not None:
        message["content"] = None
        message["tool_calls"] = [call]
    if provider == "mistral" and reasoning:
        message["content"] = [
            {"type": "thinking", "thinking": [{"type": "text", "text": reasoning}]},
            {"type": "text", "text": message["content"] or ""},
        ]
    else:
        message.update(_reasoning_fields(provider, reasoning, seed))
    answered: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    if played.reported is not None:
        answered["service_tier"] = played.reported
    await response.send_json(200, answered)


async def _stream(
    response: SimResponse,
    provider: str,
    model: str,
    response_id: str,
    reasoning: str,
    words: list[str],
    call: dict[str, Any] | None,
    finish: str,
    usage: dict[str, Any],
    body: Mapping[str, Any],
    seed: str,
    refusal: str | None = None,
    service_tier: str | None = None,
) -> None:
    await response.start_stream()
    created = int(time.time())
    tier = {"service_tier": service_tier} if service_tier is not None else {}

    def chunk(
        delta: dict[str, Any],
        finish_reason: str | None = None,
        chunk_usage: dict[str, Any] | None = None,
    ) -> str:
        data: dict[str, Any] = {
            "id": response_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            **tier,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
        if chunk_usage is not None:
            data["usage"] = chunk_usage
        return json.dumps(data, separators=(",", ":"))

    await response.write_event(chunk({"role": "assistant", "content": ""}))
    if reasoning:
        pieces = reasoning.split(" ")
        for i, piece in enumerate(pieces):
            text = piece if i == 0 else " " + piece
            if provider == "mistral":
                delta: dict[str, Any] = {
                    "content": [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]
                }
            elif provider == "openrouter":
                detail: dict[str, Any] = {
                    "type": "reasoning.text",
                    "text": text,
                    "format": "anthropic-claude-v1",
                    "index": 0,
                }
                if i == len(pieces) - 1:
                    detail["signature"] = f"sim-signature-{seed}"
                delta = {"reasoning": text, "reasoning_details": [detail]}
            else:
                fields = _reasoning_fields(provider, text, seed)
                if not fields:
                    break
                delta = fields
            await response.write_event(chunk(delta))
    for word in words:
        await response.write_event(chunk({"content": word}))
    if refusal is not None:
        for i, piece in enumerate(refusal.split(" ")):
            await response.write_event(chunk({"refusal": " " + piece if i else piece}))
    if call is not None:
        head = {
            "index": 0,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        await response.write_event(chunk({"tool_calls": [head]}))
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            if part:
                await response.write_event(
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
                )
    # Mistral takes no stream_options and puts usage on its last chunk, the one with the
    # finish reason (https://docs.mistral.ai/api/, chat completions, 2025).
    await response.write_event(chunk({}, finish, usage if provider == "mistral" else None))
    options = body.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        await response.write_event(
            json.dumps(
                {
                    "id": response_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    **tier,
                    "choices": [],
                    "usage": usage,
                },
                separators=(",", ":"),
            )
        )
    await response.write_event("[DONE]")
