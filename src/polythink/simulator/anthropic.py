"""Simulated Anthropic Messages API: ``POST /{provider}/v1/messages``.

Reasoning behaves like Anthropic's, from the same capability registry polythink resolves
against (WIRE.md §3):

- the request needs the ``anthropic-version`` header (``2023-06-01`` or ``2026-10-21``),
  ``model``, ``max_tokens`` and non-empty ``messages``; ``max_tokens`` above a registered
  model's maximum output is a 400; a model its provider has retired is a 404
  ``not_found_error`` "model: <id>" (continuedev/continue#9476);
- on ``2026-10-21`` (CURRENT.md §1.2, A-MIG): ``temperature``, ``top_p`` or ``top_k``, even at
  the default value, is a 400 "temperature: Extra inputs are not permitted" (QIITA-SYNTH), a
  ``document`` block in an assistant turn is a 400, and so is a user ``text`` block with
  ``citations``;
- a model that takes only the default sampling values (``Capability.sampling`` ``never``:
  Claude 4.7 and later) answers a non-default one with "`temperature` is deprecated for this
  model." on every version (WIRE §3.2); a model that rejects forced tool use
  (``forced_tool_choice``) answers ``tool_choice`` ``any``/``tool`` with 'tool_choice: type
  "tool" and "any" are not supported for this model.' (A-FABLE51, A-OPUS55, A-SONNET55);
- ``thinking: {type: enabled, budget_tokens}`` is accepted on ``manual`` models with
  ``1024 <= budget_tokens < max_tokens`` and rejected on ``adaptive`` ones with the message
  Anthropic sends for 4.7 and later (3rd-party NousResearch/hermes-agent#11137);
  thinking on a model that does not reason gets "'<model>' does not support thinking."
  (anthropics/claude-code#11388, 2025-11);
  ``{type: adaptive}`` is rejected on ``manual`` models; ``{type: disabled}`` is rejected on
  models that cannot switch thinking off; ``output_config.effort`` outside an adaptive model's
  tiers is rejected (Anthropic returns an error for ``max`` where the model lacks it,
  ANT-DOC-effort); ``output_config.effort`` alone does not switch thinking on where the model's
  default is off (recorded: llmanthropic_effort_no_thinking_stream);
- with thinking on, ``temperature`` other than 1, ``top_k``, ``top_p`` outside [0.95, 1] and,
  with manual thinking, a forced ``tool_choice`` are 400s; adaptive thinking with a forced tool
  answers without thinking (recorded: pai_anthropic_count_tokens_adaptive_thinking);
- every error body is ``{"type": "error", "error": {"type": "invalid_request_error",
  "message": ...}}``;
- the reasoning depth follows the tier (manual budgets map to the nearest tier's budget),
  arrives as a ``thinking`` block with a signature (empty text where the model omits it by
  default and ``display: summarized`` was not asked), or as a ``redacted_thinking`` block when
  the prompt carries Anthropic's documented trigger string; usage reports
  ``output_tokens_details.thinking_tokens``;
- a text block that is empty or whitespace only is a 400, as on the API; a thinking answer to
  a prompt starting with :data:`BLANK_TEXT_TRIGGER` carries such blocks, as adaptive thinking
  can; so is a message with empty content (``[]`` or ``""``) other than a final assistant
  turn ("all messages must have non-empty content except for the optional final assistant
  message"), and a text block with a field ``RequestTextBlock`` does not have (OpenAI's
  ``prompt_cache_breakpoint``: "Extra inputs are not permitted");
- thinking blocks sent back must carry the signature the simulator made for their text, and
  with manual thinking on, the assistant turn before the final ``tool_result`` turn must start
  with its thinking block (the API's rule for tool use with thinking, ANT-DOC-ext);
- offered tools are called for ``tool_rounds`` turns (a forced ``tool_choice`` always on the
  first), then the model answers in text; a tool the ``tool_choice`` names gets every
  property of its input filled;
- ``output_config.format`` (STRUCTURED.md §3) is answered with a text block holding an object
  that fits its schema (a system prompt that asks for JSON likewise), in the mode
  ``Settings.structured_output`` asks for: a refusal is ``stop_reason: "refusal"`` with
  ``stop_details``, a cut answer ``stop_reason: "max_tokens"``.

Streams follow the recorded event order (``message_start``, blocks with ``ping`` after the
first start, ``signature_delta`` before a thinking block's stop, ``message_delta`` with
cumulative usage, ``message_stop``) and pad ``data:`` lines with trailing spaces as the
recordings do. Manual thinking is also accepted on adaptive models from 4.6 (deprecated there,
ANT-DOC-adaptive) by the real API; the registry does not tell 4.6 from 4.7, so the simulator
rejects it on every adaptive model. ``output_config.effort`` on manual models is not checked.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from polythink.reasoning.resolve import ANTHROPIC_MIN_BUDGET, TIER_BUDGET_TOKENS
from polythink.simulator import behaviour, tiers
from polythink.simulator.binding import (
    BETA_BINDING,
    BETA_CLEAR_AT,
    Prefixes,
    bound_text,
    check,
    sign,
    well_formed,
)
from polythink.simulator.prompt_cache import CacheUse, tokens_of, unit
from polythink.simulator.server import SimRequest, SimResponse
from polythink.types import Effort

__all__ = ["BLANK_TEXT_TRIGGER", "REDACTED_TRIGGER", "handle", "matches", "signature_for"]

REDACTED_TRIGGER = "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_"
"""Prompt prefix that makes the model answer with redacted thinking (Anthropic's test string,
recorded: pai_anthropic_redacted_thinking_nonstream)."""

BLANK_TEXT_TRIGGER = "SIM_BLANK_TEXT_"
"""Prompt prefix (the simulator's own) that makes a thinking answer carry whitespace-only
text blocks, one before the thinking block and one after it, as Claude adaptive thinking can
(the blank blocks stored in conversations and refused when sent back:
NousResearch/hermes-agent#69517, 2026-07-22; home-assistant/core#175637, 2026-07-04)."""

_SECRET = b"polythink-simulator"
_SIGNATURE_PREFIX = "sim1."
_BOUND_PREFIX = "sim2."
_REDACTED_PREFIX = "sim1r."
_THINKING_TYPES = ("enabled", "adaptive", "disabled", "between_tools")
_TOOL_USE_TOKENS = 8


class _Rejected(Exception):
    """A request the API answers with 400 ``invalid_request_error``."""


def bad_request(message: str) -> dict[str, Any]:
    """Anthropic's 400 body for a request it cannot read (``invalid_request_error``)."""
    return _error(message)


def matches(path: str) -> bool:
    """Whether ``path`` is a Messages API route (``/messages`` or
    ``/messages/count_tokens``)."""
    return path.endswith(("/messages", "/messages/count_tokens"))


def signature_for(thinking: str) -> str:
    """The signature the simulator puts on a thinking block with this (full) text."""
    digest = hashlib.sha256(_SECRET + thinking.encode()).digest()
    return _SIGNATURE_PREFIX + base64.urlsafe_b64encode(digest).decode()


def _redacted_data(thinking: str) -> str:
    digest = hashlib.sha256(_SECRET + b"redacted" + thinking.encode()).digest()
    return _REDACTED_PREFIX + base64.urlsafe_b64encode(digest).decode()


def _error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return " ".join(
        str(b.get("text", ""))
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "text"
    )


def _prompt(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            text = _text_of(message.get("content"))
            if text:
                return text
    return ""


def _blocks(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping)]


_BLOCK_TYPES = (
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
"""The ``InputMessage.content`` block types (Anthropic Messages OpenAPI,
``../shared/wire/specs/anthropic_messages_openapi_docs_copy.md``)."""


def _check_blocks(i: int, message: Mapping[str, Any], previous: Any) -> None:
    """Refuse a null content, a block of an unknown type, and a ``tool_result`` whose
    ``tool_use_id`` no ``tool_use`` of the previous message has (the API's words:
    "messages.48.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_…",
    anthropics/claude-code issues, 2025-12 to 2026-02)."""
    content = message.get("content")
    if content is None:
        raise _Rejected(f"messages.{i}.content: Input should be a valid list")
    calls = {b.get("id") for b in _blocks(previous) if b.get("type") == "tool_use"}
    for j, block in enumerate(_blocks(message)):
        kind = block.get("type")
        if kind not in _BLOCK_TYPES:
            raise _Rejected(
                f"messages.{i}.content.{j}: Input tag {kind!r} found using 'type' does not match "
                "any of the expected tags: " + ", ".join(f"'{t}'" for t in _BLOCK_TYPES)
            )
        if kind == "tool_result" and block.get("tool_use_id") not in calls:
            raise _Rejected(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {block.get('tool_use_id')}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )


_TEXT_BLOCK_FIELDS = frozenset({"type", "text", "cache_control", "citations"})
"""The fields of ``RequestTextBlock`` (Anthropic Messages OpenAPI docs copy)."""


def _check_system_message(i: int, messages: list[Any], model: str, betas: frozenset[str]) -> None:
    """A mid-conversation system message (CONTINUITY.md §2.1-2.3): on a model that takes
    them; not first; right after a user message (or an assistant turn ending in a server
    tool use); last, or followed by an assistant turn; ``clear_at`` only with its beta, on a
    model that takes it. The wording is the simulator's own where none was recorded."""
    cap = behaviour.capability(model)
    if cap is None or cap.per_call_instructions != "system_message":
        raise _Rejected(f"messages.{i}.role: role 'system' is not supported on this model")
    message = messages[i]
    extra = sorted(set(message) - {"role", "content", "clear_at", "cache_control"})
    if extra:
        raise _Rejected(f"messages.{i}.{extra[0]}: Extra inputs are not permitted")
    if "clear_at" in message:
        if BETA_CLEAR_AT not in betas or not cap.clear_at:
            raise _Rejected(f"messages.{i}.clear_at: Extra inputs are not permitted")
        if message["clear_at"] != "next_user_message":
            raise _Rejected(
                f"messages.{i}.clear_at: Input should be 'next_user_message'; got "
                f"{message['clear_at']!r}"
            )
    previous = messages[i - 1] if i else None
    if previous is None:
        raise _Rejected(f"messages.{i}: a system message cannot be the first message")
    after_server_tool = previous.get("role") == "assistant" and (
        (_blocks(previous) or [{}])[-1].get("type") == "server_tool_use"
    )
    if previous.get("role") != "user" and not after_server_tool:
        raise _Rejected(
            f"messages.{i}: a system message must immediately follow a user message or an "
            "assistant message that ends in a server tool use"
        )
    following = messages[i + 1] if i + 1 < len(messages) else None
    if following is not None and following.get("role") != "assistant":
        raise _Rejected(
            f"messages.{i}: a system message must be the last message or be followed by an "
            "assistant message"
        )


def _cleared(messages: list[Any]) -> set[int]:
    """The turn-scoped system messages that a later user message cleared: they cost no
    input tokens and the model does not see them (PT-SEP)."""
    last_user = max(
        (i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"),
        default=-1,
    )
    return {
        i
        for i, m in enumerate(messages[:last_user])
        if isinstance(m, Mapping) and m.get("role") == "system" and "clear_at" in m
    }


def _check_history(
    messages: list[Any],
    manual_thinking: bool,
    model: str = "",
    betas: frozenset[str] = frozenset(),
) -> None:
    last = len(messages) - 1
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "system":
            _check_system_message(i, messages, model, betas)
            continue
        if role not in ("user", "assistant"):
            raise _Rejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        _check_blocks(i, message, messages[i - 1] if i else None)
        content = message.get("content")
        if content in ("", []) and not (i == last and message.get("role") == "assistant"):
            raise _Rejected(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for j, block in enumerate(_blocks(message)):
            kind = block.get("type")
            extra = sorted(set(block) - _TEXT_BLOCK_FIELDS) if kind == "text" else []
            if extra:
                raise _Rejected(
                    f"messages.{i}.content.{j}.text.{extra[0]}: Extra inputs are not permitted"
                )
            if kind == "text" and not str(block.get("text") or "").strip():
                raise _Rejected(
                    "messages: text content blocks must be non-empty"
                    if not block.get("text")
                    else "messages: text content blocks must contain non-whitespace text"
                )
            if kind == "thinking":
                thinking = block.get("thinking")
                signature = block.get("signature")
                if isinstance(signature, str) and signature.startswith(_BOUND_PREFIX):
                    valid = (
                        bound_text(signature, str(thinking)) if thinking else well_formed(signature)
                    )
                else:
                    valid = isinstance(signature, str) and signature.startswith(_SIGNATURE_PREFIX)
                    if valid and thinking:
                        valid = signature == signature_for(str(thinking))
                if not valid:
                    raise _Rejected(
                        f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                    )
            elif kind == "redacted_thinking" and not str(block.get("data", "")).startswith(
                _REDACTED_PREFIX
            ):
                raise _Rejected(
                    f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
                )
    if not manual_thinking or len(messages) < 2:
        return
    # Consecutive user turns are one turn to the API ("combined into a single turn").
    turns = [m for m in messages if m.get("role") != "system"]
    end = len(turns)
    while end > 0 and turns[end - 1].get("role") == "user":
        end -= 1
    if end == 0 or end == len(turns):
        return
    previous = turns[end - 1]
    answers_tools = any(b.get("type") == "tool_result" for m in turns[end:] for b in _blocks(m))
    if not answers_tools or previous.get("role") != "assistant":
        return
    blocks = _blocks(previous)
    if blocks and blocks[0].get("type") not in ("thinking", "redacted_thinking"):
        index = next(i for i, m in enumerate(messages) if m is previous)
        raise _Rejected(
            f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block (preceding the lastmost set of `tool_use` "
            "and `tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`."
        )


def _nearest_budget_tier(budget: int) -> Effort:
    return min(TIER_BUDGET_TOKENS, key=lambda e: abs(TIER_BUDGET_TOKENS[e] - budget))


def _forced(choice: Any) -> bool:
    return isinstance(choice, Mapping) and choice.get("type") in ("any", "tool")


def _depth(body: Mapping[str, Any], model: str, max_tokens: int) -> tuple[Effort, bool]:
    """Validate the reasoning fields; return (depth reasoned at, manual thinking on).

    Raises:
        _Rejected: for what the API answers with 400.
    """
    cap = behaviour.capability(model)
    raw_thinking = body.get("thinking")
    thinking: Mapping[str, Any] = raw_thinking if isinstance(raw_thinking, Mapping) else {}
    kind: Any = None
    if raw_thinking is not None:
        kind = thinking.get("type")
        if kind not in _THINKING_TYPES:
            raise _Rejected(
                f"thinking.type: Input tag {kind!r} found using 'type' does not match any of the "
                "expected tags: 'adaptive', 'disabled', 'enabled'"
            )
    config = body.get("output_config")
    effort_raw = config.get("effort") if isinstance(config, Mapping) else None
    effort: Effort | None = None
    if effort_raw is not None:
        try:
            parsed = Effort.parse(effort_raw) if isinstance(effort_raw, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed in (Effort.NONE, Effort.AUTO, Effort.MINIMAL):
            raise _Rejected(
                f"output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or "
                f"'max'; got {effort_raw!r}"
            )
        effort = parsed
    style = cap.thinking if cap is not None else None
    if kind in ("enabled", "adaptive") and (
        not behaviour.takes_parameter(model) or (cap is not None and not cap.reasons)
    ):
        raise _Rejected(f"'{model}' does not support thinking.")
    if (
        cap is not None
        and style == "adaptive"
        and effort is not None
        and effort not in cap.strengths
    ):
        accepted = ", ".join(f"'{e.value}'" for e in cap.strengths)
        raise _Rejected(
            f"output_config.effort: '{effort.value}' is not supported for model {model}; "
            f"supported values: {accepted}"
        )
    if kind == "enabled":
        if style == "adaptive":
            raise _Rejected(
                '"thinking.type.enabled" is not supported for this model. Use '
                '"thinking.type.adaptive" and "output_config.effort" to control thinking '
                "behavior."
            )
        budget = thinking.get("budget_tokens")
        if type(budget) is not int or budget < ANTHROPIC_MIN_BUDGET:
            raise _Rejected(
                f"thinking.enabled.budget_tokens: Input should be greater than or equal to "
                f"{ANTHROPIC_MIN_BUDGET}"
            )
        if budget >= max_tokens:
            raise _Rejected(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                "documentation at https://docs.claude.com/en/docs/build-with-claude/"
                "extended-thinking#max-tokens-and-context-window-size"
            )
        if _forced(body.get("tool_choice")):
            raise _Rejected("Thinking may not be enabled when tool_choice forces tool use.")
        return _nearest_budget_tier(budget), True
    if kind == "adaptive":
        if style == "manual":
            raise _Rejected(
                '"thinking.type.adaptive" is not supported for this model. Use '
                '"thinking.type.enabled" with "budget_tokens".'
            )
        if _forced(body.get("tool_choice")):
            return Effort.NONE, False
        return effort or Effort.AUTO, False
    if kind in ("disabled", "between_tools"):
        if kind == "disabled" and cap is not None and not cap.can_disable:
            raise _Rejected(
                f'"thinking.type.disabled" is not supported for model {model}; thinking cannot '
                "be switched off on it."
            )
        return Effort.NONE, False
    default = behaviour.default_tier(model)
    if default is Effort.NONE:
        return Effort.NONE, False
    return effort or default, False


def _sampling(body: Mapping[str, Any]) -> None:
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise _Rejected(
            "`temperature` may only be set to 1 when thinking is enabled or in adaptive mode. "
            "Please consult our documentation at https://docs.claude.com/en/docs/"
            "build-with-claude/extended-thinking#feature-compatibility"
        )
    if "top_k" in body:
        raise _Rejected("`top_k` is not supported when thinking is enabled.")
    top_p = body.get("top_p")
    if top_p is not None and not 0.95 <= top_p <= 1:
        raise _Rejected("`top_p` must be between 0.95 and 1 when thinking is enabled.")


_VERSIONS = ("2023-06-01", "2026-10-21")
_SAMPLING = ("temperature", "top_p", "top_k")


def _version_rules(version: str, body: Mapping[str, Any], messages: list[Any]) -> None:
    """What 2026-10-21 refuses that 2023-06-01 takes (CURRENT.md §1.2)."""
    if version != "2026-10-21":
        return
    for name in _SAMPLING:
        if name in body:
            raise _Rejected(f"{name}: Extra inputs are not permitted")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        for j, block in enumerate(_blocks(message)):
            if role == "assistant" and block.get("type") == "document":
                raise _Rejected(
                    f"messages.{i}.content.{j}: document blocks are not allowed in assistant "
                    "messages; send documents in user messages"
                )
            if role == "user" and block.get("type") == "text" and block.get("citations"):
                raise _Rejected(
                    f"messages.{i}.content.{j}.citations: citations are not allowed in user "
                    "messages"
                )


def _model_rules(body: Mapping[str, Any], model: str) -> None:
    """The model's own refusals: non-default sampling, forced tool use."""
    cap = behaviour.capability(model)
    if cap is None:
        return
    if cap.sampling == "never":
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1:
                raise _Rejected(f"`{name}` is deprecated for this model.")
        if "top_k" in body:
            raise _Rejected("`top_k` is deprecated for this model.")
    if not cap.forced_tool_choice and _forced(body.get("tool_choice")):
        raise _Rejected('tool_choice: type "tool" and "any" are not supported for this model.')


def _validate(request: SimRequest, body: Any) -> tuple[str, list[Any], int]:
    version = request.headers.get("anthropic-version")
    if version is None:
        raise _Rejected("anthropic-version: header is required")
    if version not in _VERSIONS:
        raise _Rejected(
            f"anthropic-version: {version!r} is not a valid version; use one of "
            + ", ".join(_VERSIONS)
        )
    if not isinstance(body, Mapping):
        raise _Rejected("The request body is not valid JSON.")
    model = body.get("model")
    messages = body.get("messages")
    max_tokens = body.get("max_tokens")
    if not isinstance(model, str) or not model:
        raise _Rejected("model: Field required")
    if type(max_tokens) is not int or max_tokens < 1:
        raise _Rejected("max_tokens: Field required (an integer of at least 1)")
    if not isinstance(messages, list) or not messages:
        raise _Rejected("messages: at least one message is required")
    _version_rules(version, body, messages)
    _model_rules(body, model)
    cap = behaviour.capability(model)
    if cap is not None and cap.max_output_tokens is not None and max_tokens > cap.max_output_tokens:
        raise _Rejected(
            f"max_tokens: {max_tokens} > {cap.max_output_tokens}, which is the maximum allowed "
            f"number of output tokens for {model}"
        )
    return model, messages, max_tokens


def _tool_use(body: Mapping[str, Any], messages: list[Any], rounds: int) -> dict[str, Any] | None:
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if not isinstance(tools, list) or not tools:
        return None
    if isinstance(choice, Mapping) and choice.get("type") == "none":
        return None
    done = sum(
        1
        for m in messages
        if isinstance(m, Mapping)
        and m.get("role") == "assistant"
        and any(b.get("type") == "tool_use" for b in _blocks(m))
    )
    if done >= rounds and not (_forced(choice) and done == 0):
        return None
    tool = tools[0]
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        for candidate in tools:
            if isinstance(candidate, Mapping) and candidate.get("name") == choice.get("name"):
                tool = candidate
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]
    schema = tool.get("input_schema")
    named = isinstance(choice, Mapping) and choice.get("type") == "tool"
    return {
        "type": "tool_use",
        "id": f"toolu_sim_{seed}",
        "name": tool.get("name", "tool"),
        # A tool the request names is answered with every property filled, as a structured
        # answer through a forced tool is.
        "input": behaviour.example_value(schema)
        if named
        else json.loads(behaviour.tool_arguments(schema)),
    }


def _structured(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema of ``output_config.format`` (STRUCTURED.md §3.1), else what the system
    prompt asks for (:func:`behaviour.asked_in_prompt`), else ``None``."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, Mapping) else None
    if isinstance(fmt, Mapping) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return schema if isinstance(schema, Mapping) else {}
    messages = body.get("messages")
    texts = behaviour.instruction_texts(messages if isinstance(messages, list) else [])
    return behaviour.asked_in_prompt([_text_of(body.get("system")), *texts])


def _shows_thinking(body: Mapping[str, Any], model: str) -> bool:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("display") in ("summarized", "omitted"):
        return bool(thinking["display"] == "summarized")
    cap = behaviour.capability(model)
    return cap is None or cap.thinking_display != "omitted"


async def _count(request: SimRequest, response: SimResponse) -> None:
    """``POST /v1/messages/count_tokens``: the prompt's tokens as the Messages answer's
    ``usage.input_tokens`` counts them (``MessageTokensCount``: ``{"input_tokens": N}``)."""
    version = request.headers.get("anthropic-version")
    try:
        body = request.json()
    except ValueError:
        body = None
    if version not in _VERSIONS:
        await response.send_json(400, _error("anthropic-version: header is required"))
        return
    if not isinstance(body, Mapping) or not isinstance(body.get("model"), str):
        await response.send_json(400, _error("model: Field required"))
        return
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        await response.send_json(400, _error("messages: at least one message is required"))
        return
    conversation = [body["system"], *messages] if body.get("system") else messages
    await response.send_json(200, {"input_tokens": behaviour.prompt_tokens(conversation)})


async def handle(request: SimRequest, response: SimResponse) -> None:
    """Answer one Messages API request."""
    if request.path.endswith("/count_tokens"):
        await _count(request, response)
        return
    try:
        try:
            body = request.json()
        except ValueError:
            raise _Rejected("The request body is not valid JSON.") from None
        model = body.get("model") if isinstance(body, Mapping) else None
        if isinstance(model, str) and behaviour.retired(
            model, request.provider, response.settings.today
        ):
            await response.send_json(
                404,
                {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": f"model: {model}"},
                },
            )
            return
        model, messages, max_tokens = _validate(request, body)
        betas = _betas(request.headers)
        _check_binding_field(body, betas)
        depth, manual = _depth(body, model, max_tokens)
        thinking_on = depth is not Effort.NONE or (
            isinstance(body.get("thinking"), Mapping)
            and body["thinking"].get("type") in ("enabled", "adaptive")
        )
        if thinking_on:
            _sampling(body)
        _check_history(messages, manual, model, betas)
        prefixes = Prefixes(body, messages)
        verdict = check(
            body,
            messages,
            model,
            prefixes,
            beta=BETA_BINDING in betas,
            new_account=response.settings.new_account,
        )
        if verdict.error is not None:
            raise _Rejected(verdict.error)
    except _Rejected as exc:
        await response.send_json(400, _error(str(exc)))
        return
    settings = response.settings
    words = int(request.header_float("x-sim-answer-words", settings.answer_words))
    rounds = int(request.header_float("x-sim-tool-rounds", settings.tool_rounds))
    prompt = _prompt(messages)
    conversation = [body["system"], *messages] if body.get("system") else messages
    answer = behaviour.answer_for(model, prompt, depth, words, conversation)
    cache = _cache_use(request.provider, model, body, messages, verdict, response)
    answer = dataclasses.replace(answer, prompt_tokens=cache.total)
    call = _tool_use(body, messages, rounds)
    # A forced tool gets no prose before it: the API prefills the turn to force the tool.
    preamble = [] if _forced(body.get("tool_choice")) else answer.words[:3]
    answer_words = answer.words if call is None else preamble
    thinking_tokens = answer.reasoning_tokens
    stop_reason = "tool_use" if call is not None else "end_turn"
    stop_details = None
    schema = _structured(body)
    mode = behaviour.structured_mode(request.headers, settings.structured_output)
    choice = body.get("tool_choice")
    if call is not None and isinstance(choice, Mapping) and choice.get("type") == "tool":
        # A named forced tool is how a model without output_config.format answers in JSON:
        # its input takes the asked mode (a refusal or a cut answer has no call).
        if mode == "invalid":
            call["input"] = {}
        elif mode != "valid":
            schema, call, stop_reason = {}, None, "end_turn"
    if schema is not None and call is None:
        if mode == "refusal":
            answer_words, stop_reason = [], "refusal"
            stop_details = {
                "type": "refusal",
                "category": "general_harms",
                "explanation": behaviour.REFUSAL,
            }
        else:
            answer_words = behaviour.structured_pieces(schema or None, mode, prompt)
            if mode == "truncated":
                stop_reason = "max_tokens"
    if thinking_tokens + len(answer_words) > max_tokens:
        thinking_tokens = min(thinking_tokens, max_tokens)
        answer_words = answer_words[: max(0, max_tokens - thinking_tokens)]
        stop_reason, call = "max_tokens", None
    content: list[dict[str, Any]] = []
    if thinking_tokens:
        full = answer.reasoning
        blank = prompt.startswith(BLANK_TEXT_TRIGGER)
        if blank:
            content.append({"type": "text", "text": "\n\n"})
        if prompt.startswith(REDACTED_TRIGGER):
            content.append({"type": "redacted_thinking", "data": _redacted_data(full)})
        else:
            shown = full if _shows_thinking(body, model) else ""
            signature = sign(
                full,
                model=model,
                prefixes=prefixes,
                index=len(messages),
                count=verdict.count,
                last=verdict.last,
            )
            content.append({"type": "thinking", "thinking": shown, "signature": signature})
        if blank:
            content.append({"type": "text", "text": " "})
    if answer_words:
        content.append({"type": "text", "text": "".join(answer_words)})
    if call is not None:
        content.append(call)
    output = thinking_tokens + len(answer_words) + (_TOOL_USE_TOKENS if call else 0)
    hour = _hour_ttl(body)
    usage = {
        "input_tokens": cache.total - cache.read - cache.written,
        "cache_creation_input_tokens": cache.written,
        "cache_read_input_tokens": cache.read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 0 if hour else cache.written,
            "ephemeral_1h_input_tokens": cache.written if hour else 0,
        },
        "output_tokens": output,
        "output_tokens_details": {"thinking_tokens": thinking_tokens},
    }
    played = tiers.play(request.provider, model, body, request, settings)
    if played.reported is not None:
        usage["service_tier"] = played.reported
    seed = hashlib.sha256(request.body).hexdigest()[:20]
    message: dict[str, Any] = {
        "id": f"msg_sim_{seed}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    if stop_details is not None:
        message["stop_details"] = stop_details
    cap = behaviour.capability(model)
    if BETA_BINDING in betas and (cap is None or cap.reasons):
        # On every answer of a thinking-capable model under the beta, [] when nothing
        # happened (CONTINUITY.md §1.6).
        message["input_transformations"] = verdict.transformations
    headers = {"request-id": f"req_sim_{seed}"}
    if body.get("stream"):
        await _stream(response, message, headers)
    else:
        await response.send_json(200, message, headers=headers)


def _betas(headers: Mapping[str, str]) -> frozenset[str]:
    """The ``anthropic-beta`` values of a request (comma-separated in one header)."""
    raw = headers.get("anthropic-beta", "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _check_binding_field(body: Mapping[str, Any], betas: frozenset[str]) -> None:
    """``thinking.block_binding`` needs its beta, and takes ``prefix_mismatch_behavior``
    ``error`` or ``drop_block`` (CONTINUITY.md §1.3-1.4)."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or "block_binding" not in thinking:
        return
    if BETA_BINDING not in betas:
        raise _Rejected("thinking.block_binding: Extra inputs are not permitted")
    binding = thinking["block_binding"]
    if not isinstance(binding, Mapping):
        raise _Rejected("thinking.block_binding: Input should be a valid dictionary")
    behavior = binding.get("prefix_mismatch_behavior")
    if behavior is not None and behavior not in ("error", "drop_block"):
        raise _Rejected(
            "thinking.block_binding.prefix_mismatch_behavior: Input should be 'error' or "
            f"'drop_block'; got {behavior!r}"
        )


def _hour_ttl(body: Mapping[str, Any]) -> bool:
    control = body.get("cache_control")
    return isinstance(control, Mapping) and control.get("ttl") == "1h"


def _marked(value: Any) -> bool:
    """Whether ``value`` (a message, or the ``system`` field) carries a ``cache_control``."""
    if isinstance(value, Mapping):
        return "cache_control" in value or _marked(value.get("content"))
    if isinstance(value, list):
        return any(isinstance(b, Mapping) and "cache_control" in b for b in value)
    return False


def _cache_use(
    provider: str,
    model: str,
    body: Mapping[str, Any],
    messages: list[Any],
    verdict: Any,
    response: SimResponse,
) -> CacheUse:
    """The request's input tokens and what the prompt cache did for them: units are the
    system prompt with the tools, then each message (a cleared turn-scoped system message
    costs no tokens; dropped thinking blocks are not counted); the prefix up to each
    breakpoint (top-level ``cache_control``: the last unit; a marked block: its message) is
    written, and the longest written prefix within 20 units before a breakpoint is read
    (:mod:`polythink.simulator.prompt_cache`)."""
    system = body.get("system")
    units = [
        unit({"system": system, "tools": body.get("tools")}, tokens_of(system) if system else 0)
    ]
    cleared = _cleared(messages)
    for i, message in enumerate(messages):
        shown = message
        if verdict.dropped and isinstance(message.get("content"), list):
            shown = {
                **message,
                "content": [
                    b for j, b in enumerate(message["content"]) if (i, j) not in verdict.dropped
                ],
            }
        units.append(unit(message, 0 if i in cleared else tokens_of(shown)))
    writes: list[int] = []
    if isinstance(body.get("cache_control"), Mapping):
        writes.append(len(units))
    if _marked(system):
        writes.append(1)
    writes += [i + 2 for i, message in enumerate(messages) if _marked(message)]
    return response.prompt_cache.serve(
        f"anthropic:{provider}:{model}", units, writes=writes, lookback=20
    )


def _dump(payload: Mapping[str, Any], pad: int) -> str:
    return json.dumps(payload, separators=(",", ":")) + " " * pad


async def _stream(
    response: SimResponse, message: Mapping[str, Any], headers: Mapping[str, str]
) -> None:
    await response.start_stream(headers=headers)
    sent = 0

    async def event(name: str, payload: Mapping[str, Any]) -> None:
        nonlocal sent
        sent += 1
        await response.write_event(_dump(payload, sent % 5), event=name)

    usage = message["usage"]
    start_usage = {**usage, "output_tokens": 1}
    del start_usage["output_tokens_details"]
    await event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": start_usage,
            },
        },
    )
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        opening: dict[str, Any]
        if kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "text":
            opening = {"type": "text", "text": ""}
        elif kind == "tool_use":
            opening = {**block, "input": {}}
        else:
            opening = dict(block)
        await event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        if index == 0:
            await response.write_event(json.dumps({"type": "ping"}), event="ping")
        for delta in _deltas(block):
            await event(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        await event("content_block_stop", {"type": "content_block_stop", "index": index})
    # The delta's usage is cumulative and has no cache_creation split (MessageDeltaUsage).
    delta_usage = {k: v for k, v in usage.items() if k != "cache_creation"}
    await event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": None,
                **({"stop_details": message["stop_details"]} if "stop_details" in message else {}),
            },
            "usage": delta_usage,
        },
    )
    await event("message_stop", {"type": "message_stop"})


def _deltas(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "thinking":
        words = block["thinking"].split(" ") if block["thinking"] else []
        deltas: list[dict[str, Any]] = [
            {"type": "thinking_delta", "thinking": w if i == 0 else " " + w}
            for i, w in enumerate(words)
        ]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
        return deltas
    if kind == "text":
        words = block["text"].split(" ")
        return [
            {"type": "text_delta", "text": w if i == 0 else " " + w} for i, w in enumerate(words)
        ]
    if kind == "tool_use":
        arguments = json.dumps(block["input"], separators=(",", ":"))
        half = len(arguments) // 2
        return [
            {"type": "input_json_delta", "partial_json": part}
            for part in (arguments[:half], arguments[half:])
            if part
        ]
    return []
