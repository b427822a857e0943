"""Finish and stop reasons: each provider's documented values, mapped explicitly.

polythink's finish reasons are ``stop``, ``length``, ``tool_calls``, ``content_filter`` and
``error``. The rule for every table here: a content-safety stop is ``content_filter``; a stop
at the output ceiling *or* the context window is ``length`` (``Response.output_limited``); a
provider-side failure is ``error`` (never cached, see :mod:`polythink.middleware.cache`). A
value no table lists (``weird_failure``; ``error`` from a provider whose table has none)
is read as ``error`` too: nothing says the answer ended well, so it is never cached nor
taken for a normal stop, as Gemini's ``OTHER`` and a Responses ``incomplete`` reason no
table lists are read. A benign value added by a provider later costs a warning and a cache
miss until its table lists it. The response keeps the value in ``native_finish_reason``
and carries the warning, and it is logged once per provider and value.

Sources (each provider's API reference as published in 2025, not re-fetched; the URLs are
for re-checking when a value appears that no table lists):

- OpenAI Chat Completions: ``stop, length, tool_calls, content_filter, function_call``
  (openai-openapi ``CreateChatCompletionResponse``, ``../shared/wire/specs``).
- OpenRouter: normalised ``stop, length, tool_calls, content_filter, error``
  (https://openrouter.ai/docs/api-reference/overview, "Finish Reason").
- DeepSeek: ``stop, length, content_filter, tool_calls, insufficient_system_resource``
  (https://api-docs.deepseek.com/api/create-chat-completion).
- Zhipu GLM: ``stop, tool_calls, length, sensitive, network_error,
  model_context_window_exceeded`` (https://docs.bigmodel.cn/api-reference, chat completions;
  https://docs.z.ai/api-reference/llm/chat-completion). ``model_context_window_exceeded`` is
  also seen in real glm-5-turbo traffic (anomalyco/opencode issue 18813, 2026-03).
- Moonshot Kimi: ``stop, length, tool_calls, content_filter``
  (https://platform.moonshot.ai/docs/api/chat).
- Qwen / DashScope compatible mode: ``stop, length, tool_calls``; ``null`` while streaming
  (https://www.alibabacloud.com/help/en/model-studio/use-qwen-by-calling-api).
- Mistral: ``stop, length, model_length, error, tool_calls``
  (https://docs.mistral.ai/api/ ``ChatCompletionChoice.finish_reason``).
- xAI: ``stop, length, tool_calls, content_filter``, and ``end_turn`` from older Grok models
  (https://docs.x.ai/docs/api-reference#chat-completions).
- Groq: ``stop, length, tool_calls, function_call``
  (https://console.groq.com/docs/api-reference#chat-create).
- vLLM: ``stop, length, tool_calls``, ``abort`` for a request the engine aborted
  (https://docs.vllm.ai/en/stable/, OpenAI-compatible server).
- Anthropic ``stop_reason``: ``end_turn, max_tokens, stop_sequence, tool_use, pause_turn,
  refusal`` (Messages OpenAPI, ``../shared/wire/specs``) and
  ``model_context_window_exceeded`` (https://platform.claude.com/docs/en/api/handling-stop-reasons).
- Gemini ``finishReason``: the whole ``Candidate.FinishReason`` enum of
  ``google/ai/generativelanguage/v1beta/generative_service.proto`` (googleapis f8291d2b).
- OpenAI Responses ``incomplete_details.reason``: ``max_output_tokens, content_filter``
  (openai-openapi ``Response.incomplete_details``).
- Bedrock Converse ``stopReason``: ``end_turn, tool_use, max_tokens, stop_sequence,
  guardrail_intervened, content_filtered, malformed_model_output, malformed_tool_use,
  model_context_window_exceeded`` (bedrock-runtime service model, botocore 1.44.8,
  CLOUDS.md §1.3).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "CONVERSE",
    "GEMINI",
    "RESPONSES_INCOMPLETE",
    "Finish",
    "chat_table",
    "map_finish",
    "unknown_finish",
]

_log = logging.getLogger("polythink.transport")

CHAT: Mapping[str, str] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
"""OpenAI's own values; every compatible provider's table starts from these."""

_GATEWAY: Mapping[str, str] = {
    "error": "error",
    "abort": "error",
    "end_turn": "stop",
    "eos": "stop",
    "max_tokens": "length",
}
"""Values self-hosted servers and unknown gateways relay from the models behind them (vLLM
``abort``; Anthropic-style ``end_turn``/``max_tokens``; ``eos``): used for vLLM, Ollama,
``openai`` (which ``base_url`` / ``OPENAI_BASE_URL`` point at gateways and servers of one's
own; OpenAI itself sends none of them) and any provider id without a table of its own."""

_CHAT_DIALECTS: dict[str, Mapping[str, str]] = {
    "openrouter": {"error": "error"},
    "deepseek": {"insufficient_system_resource": "error"},
    "glm": {
        "sensitive": "content_filter",
        "network_error": "error",
        "model_context_window_exceeded": "length",
    },
    "kimi": {},
    "qwen": {},
    "mistral": {"model_length": "length", "error": "error"},
    "xai": {"end_turn": "stop"},
    "groq": {},
    "vllm": _GATEWAY,
    "ollama": _GATEWAY,
    "minimax": {},
    "openai": _GATEWAY,
}

_CHAT_TABLES: dict[str, Mapping[str, str]] = {
    provider: {**CHAT, **extra} for provider, extra in _CHAT_DIALECTS.items()
}

_DEFAULT_CHAT: Mapping[str, str] = {**CHAT, **_GATEWAY}

ANTHROPIC: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    # The server paused a long-running turn (server tools); the answer so far is whole and
    # the caller may send it back to continue. Not a failure, not a ceiling.
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

GEMINI: Mapping[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "LANGUAGE": "error",
    "OTHER": "error",
    "IMAGE_OTHER": "error",
    "NO_IMAGE": "error",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "FINISH_REASON_UNSPECIFIED": "error",
}

CONVERSE: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
}

RESPONSES_INCOMPLETE: Mapping[str, str] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def chat_table(provider: str) -> Mapping[str, str]:
    """The finish-reason table of a Chat Completions provider (OpenAI's for unknown ids)."""
    return _CHAT_TABLES.get(provider, _DEFAULT_CHAT)


@dataclass(frozen=True, slots=True)
class Finish:
    """A mapped finish reason: ``reason`` (polythink's), ``native`` (the provider's value as
    sent, ``None`` when none) and ``note`` (a warning for the response when the value was not
    in the table, else ``None``)."""

    reason: str
    native: str | None
    note: str | None = None


_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()


def map_finish(
    raw: Any, table: Mapping[str, str], *, provider: str, has_tool_calls: bool
) -> Finish:
    """Map the provider's finish value ``raw`` through ``table``.

    ``stop`` becomes ``tool_calls`` when the answer carries tool calls. An absent value is
    ``stop`` with no note. A value missing from ``table`` is ``error`` with a note
    (:func:`unknown_finish`).
    """
    if raw is None or raw == "":
        return Finish("tool_calls" if has_tool_calls else "stop", None)
    native = raw if isinstance(raw, str) else str(raw)
    mapped = table.get(native)
    if mapped is None:
        return unknown_finish(provider, native)
    if has_tool_calls and mapped == "stop":
        mapped = "tool_calls"
    return Finish(mapped, native)


def unknown_finish(provider: str, native: str) -> Finish:
    """The finish of a value ``native`` no table lists: ``error``, with a note for the
    response's warnings, logged once per ``provider`` and value."""
    note = (
        f"{provider} sent finish reason {native!r}, which polythink does not know; read as "
        "error, so the answer is not cached (kept in native_finish_reason)"
    )
    key = (provider, native)
    with _logged_lock:
        first = key not in _logged
        _logged.add(key)
    if first:
        _log.warning("%s", note)
    return Finish("error", native, note)
