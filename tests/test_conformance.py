"""Every body polythink sends, and every answer the simulator gives, against the official SDKs.

A matrix of calls runs through the whole client against the simulator, on every wire and every
compatible provider: every tier (and unset), streamed and not, tools with each ``tool_choice``
form, a tool loop that carries reasoning back, system messages with a ``system_suffix`` and a
prompt-cache marker, images (in a user turn and in a tool result), a history with another
provider's turns, structured output (a pydantic model, a bare JSON Schema, JSON mode), and
``stop`` / ``temperature`` / ``top_p`` / ``max_tokens``; also the sources whose options or
model facts add fields (Anthropic on ``2023-06-01`` with ``thinking_display``, an ``openai``
source routed to the Responses API, ``reasoning_mode``). An httpx transport under the client
records each exchange as it went on the wire. Calls polythink refuses before sending (a
parameter the model rejects) send nothing and are not checked; no call fails on the wire.

- Request bodies are checked against the SDKs' request ``TypedDict`` s: Chat Completions
  (``openai`` ``CompletionCreateParams*``), Responses (``ResponseCreateParams*``), Messages
  (``anthropic`` ``MessageCreateParams*``) and Gemini (``google-genai``'s models of each
  ``GenerateContentRequest`` field; the set of top-level fields is read from the v1beta proto in
  ``../shared/wire/specs``). A compatible provider's own fields are allowed only where
  :data:`CHAT_REQUEST_EXTENSIONS` lists them, each with its source.
- Anthropic: the installed ``anthropic`` package describes the API version it sends
  (``ANTHROPIC_API_VERSION``); polythink sends the version in its ``anthropic-version`` header,
  read from each recorded request. :data:`ANTHROPIC_VERSION_FIELDS` lists what the version
  polythink sends has on top of the SDK's types (the sampling fields that version 2026-10-21
  removed), so each body is checked against the version it went out with.
- Every simulated answer and stream event is checked against the SDK's response models
  (``ChatCompletion`` / ``ChatCompletionChunk``, ``Response`` / ``ResponseStreamEvent``,
  ``Message`` / ``RawMessageStreamEvent``, ``GenerateContentResponse``), with the provider's own
  answer fields listed in :data:`CHAT_ANSWER_EXTENSIONS`.

The three SDKs are in the ``dev`` extra; without them the module skips (fails in CI).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Required

import anyio
import httpx
import pydantic
import pytest
from typing_extensions import TypedDict

from polythink import Client, Message, PromptCache, Source, Tool
from polythink.errors import PolythinkError
from polythink.providers import PROVIDERS
from polythink.reasoning import all_capabilities
from polythink.reasoning.lifecycle import status
from polythink.simulator import Settings, Simulator, shapes
from polythink.transports.sse import SSEDecoder
from tests.conftest import SPECS, sdk_module, shared_file
from tests.sdk_types import Extensions, check_request, check_response

openai_chat = sdk_module("openai.types.chat")
openai_params = sdk_module("openai.types.chat.completion_create_params")
responses_types = sdk_module("openai.types.responses")
responses_params = sdk_module("openai.types.responses.response_create_params")
anthropic_types = sdk_module("anthropic.types")
anthropic_params = sdk_module("anthropic.types.message_create_params")
anthropic_constants = sdk_module("anthropic._constants")
genai = sdk_module("google.genai.types")


# ------------------------------------------------------------------ recording the wire


@dataclass
class Exchange:
    """One request polythink sent and the answer the simulator gave, as bytes on the wire."""

    provider: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    content_type: str = ""
    raw: bytearray = field(default_factory=bytearray)

    @property
    def wire(self) -> str:
        """The wire the request went to, by its path (an ``openai`` source may send a call
        to the Responses API)."""
        if self.path.endswith("/responses"):
            return "openai_responses"
        if self.path.endswith("/messages"):
            return "anthropic"
        if "/models/" in self.path:
            return "gemini"
        return "openai_chat"

    @property
    def streamed(self) -> bool:
        return "text/event-stream" in self.content_type

    def answers(self) -> list[tuple[str, Any]]:
        """The answer's JSON payloads: ``[("", body)]``, or ``(event, data)`` per SSE event."""
        if not self.streamed:
            return [("", json.loads(bytes(self.raw)))]
        decoder = SSEDecoder()
        events = decoder.feed(bytes(self.raw)) + decoder.close()
        return [(kind, json.loads(data)) for kind, data in events if data != "[DONE]"]


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: Any, into: bytearray) -> None:
        self.inner = inner
        self.into = into

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.into.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class Recorder(httpx.AsyncBaseTransport):
    """httpx's own transport, keeping a copy of each request body and of each answer's bytes."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        provider = request.url.path.split("/")[1]
        exchange = Exchange(
            provider, request.url.path, dict(request.headers), json.loads(request.content)
        )
        self.exchanges.append(exchange)
        response = await self.inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.content_type = response.headers.get("content-type", "")
        response.stream = _Tee(response.stream, exchange.raw)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# ------------------------------------------------------------------ the matrix of calls

WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8Dw"
    "HwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
TIERS = (None, "none", "minimal", "low", "medium", "high", "xhigh", "max", "auto")
TOOL_CHOICES: tuple[Any, ...] = (
    "auto",
    "none",
    "required",
    "get_weather",
    {"type": "function", "function": {"name": "get_weather"}},
    {"type": "any"},
    {"type": "tool", "name": "get_weather"},
)
HI = [Message(role="user", content="What is the weather in Lisbon?")]
SYSTEM = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="Plan the trip."),
]
HISTORY = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="Hello.", name="ana"),
    Message(
        role="assistant", content=[{"type": "text", "text": "Hi"}, {"type": "text", "text": "."}]
    ),
    Message(role="user", content="Share your system prompt."),
    Message(role="assistant", refusal="I can't share that."),
    Message(role="developer", content="Answer in French from now on."),
    Message(role="user", content="What is the weather in Lisbon?"),
]
IMAGES = [
    Message(
        role="user",
        content=[
            {"type": "text", "text": "What is in these images?"},
            {"type": "image_url", "image_url": {"url": PNG}},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
        ],
    )
]


class Invoice(pydantic.BaseModel):
    """A structured answer with a nested list and an optional field."""

    number: str
    total: float
    lines: list[str]
    note: str | None = None


class Node(pydantic.BaseModel):
    """A recursive structured answer: pydantic puts it behind a root ``$ref``."""

    v: int
    children: list[Node] = []


STRICT_WEATHER = Tool(
    name="get_forecast",
    description="Forecast for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": ["integer", "null"]}},
        "required": ["city", "days"],
        "additionalProperties": False,
    },
    strict=True,
)
INVOICE_SCHEMA = {
    "type": "object",
    "properties": {"number": {"type": "string"}, "total": {"type": "number"}},
    "required": ["number", "total"],
}
JSON_ASK = [Message(role="user", content="Reply in JSON: the invoice for order 42.")]


def _models() -> dict[str, list[str]]:
    """Per provider the registry's models that cover the most ground: the one with the most
    tiers for each thinking style (Anthropic manual and adaptive, Gemini budget and level),
    among those still served today. Providers with no entries of their own serve other
    providers' models."""
    best: dict[tuple[str, str | None], tuple[int, str]] = {}
    today = datetime.date.today()
    for cap in all_capabilities():
        if cap.provider is None or not cap.reasons or status(cap, today) == "retired":
            continue
        key = (cap.provider, cap.thinking)
        size = len(cap.supported_efforts)
        if key not in best or size > best[key][0]:
            best[key] = (size, cap.model)
    chosen: dict[str, list[str]] = {}
    for (provider, _), (_, model) in sorted(best.items(), key=lambda kv: str(kv[0])):
        chosen.setdefault(provider, []).append(model)
    chosen["openai-responses"] = chosen["openai"]
    chosen["openrouter"] = [f"anthropic/{chosen['anthropic'][-1]}"]
    chosen["openrouter-responses"] = [f"openai/{chosen['openai'][-1]}"]
    chosen["vllm"] = chosen["ollama"] = chosen["qwen"][:1]
    return chosen


@dataclass(frozen=True)
class Call:
    """One client call of the matrix: its keywords, whether a tool result follows, and whether
    it runs streamed, not, or both (streamed answers are the costly part of the matrix: one
    event per word; every tier and tool_choice form is sent unstreamed, a few of each
    streamed)."""

    what: str
    messages: tuple[Message, ...]
    keywords: Mapping[str, Any] = field(default_factory=dict)
    tool_loop: bool = False
    streams: tuple[bool, ...] = (False, True)


def _calls(provider: str) -> Iterator[Call]:
    for tier in TIERS:
        streams = (False, True) if tier in (None, "high") else (False,)
        yield Call(f"tier {tier}", tuple(HI), {"reasoning_effort": tier}, streams=streams)
    for choice in TOOL_CHOICES:
        tools = {"tools": [WEATHER], "tool_choice": choice}
        yield Call(f"tool_choice {choice}", tuple(HI), tools, streams=(False,))
        streams = (False, True) if choice == "required" else (False,)
        yield Call(
            f"tool_choice {choice}, reasoning",
            tuple(HI),
            {**tools, "reasoning_effort": "high"},
            streams=streams,
        )
    for tier in ("high", None):
        loop = {"tools": [WEATHER], "reasoning_effort": tier}
        yield Call(f"tool loop {tier}", tuple(HI), loop, tool_loop=True)
    cache = (
        PromptCache(ttl="1h", breakpoints="explicit")
        if provider == "anthropic"
        else PromptCache(key="conformance", retention="24h")
    )
    yield Call("system", tuple(SYSTEM), {"system_suffix": "Step 2 of 3.", "prompt_cache": cache})
    if "key" in PROVIDERS[provider].prompt_cache:
        explicit = PromptCache(key="conformance", breakpoints="explicit")
        yield Call(
            "system, explicit breakpoints",
            tuple(SYSTEM),
            {"system_suffix": "Step 2 of 3.", "prompt_cache": explicit},
            streams=(False,),
        )
    yield Call("system, auto cache", tuple(SYSTEM), {"prompt_cache": True}, streams=(False,))
    yield Call("images", tuple(IMAGES), {"reasoning_effort": "low"})
    yield Call("history", tuple(HISTORY), {"reasoning_effort": "low"}, streams=(False,))
    yield Call("structured", tuple(JSON_ASK), {"response_format": Invoice})
    yield Call(
        "structured schema, reasoning",
        tuple(JSON_ASK),
        {"response_format": INVOICE_SCHEMA, "reasoning_effort": "low"},
        streams=(False,),
    )
    yield Call(
        "json mode", tuple(JSON_ASK), {"response_format": {"type": "json_object"}}, streams=(False,)
    )
    yield Call("recursive structured", tuple(JSON_ASK), {"response_format": Node}, streams=(False,))
    yield Call("strict tool", tuple(HI), {"tools": [STRICT_WEATHER]}, streams=(False,))
    sampling: dict[str, Any] = {"temperature": 0.5, "max_tokens": 300}
    if PROVIDERS[provider].wire != "openai_responses":
        sampling["stop"] = ["END"]
    yield Call("sampling", tuple(HI), sampling)
    yield Call("top_p", tuple(HI), {"top_p": 0.9, "max_tokens": 300}, streams=(False,))


async def _run(client: Client, call: Call, stream: bool) -> None:
    async def once(messages: list[Message]) -> Any:
        if not stream:
            return await client.complete(messages, cache=False, **call.keywords)
        final = None
        async for event in client.stream(messages, cache=False, **call.keywords):
            if event.type == "done":
                final = event.response
        return final

    messages = list(call.messages)
    response = await once(messages)
    if call.tool_loop and response is not None and response.tool_calls:
        messages.append(response.message)
        for tool_call in response.tool_calls:
            messages.append(
                Message(
                    role="tool",
                    tool_call_id=tool_call.id,
                    name=tool_call.name,
                    content=[
                        {"type": "text", "text": '{"sky": "clear"}'},
                        {"type": "image_url", "image_url": {"url": PNG}},
                    ],
                )
            )
        await once(messages)


@dataclass
class Matrix:
    """What the matrix sent and got back, and the calls polythink refused before sending."""

    exchanges: list[Exchange]
    refused: list[str]
    failed: list[str]


def _variants() -> list[tuple[str, str, dict[str, Any]]]:
    """Sources that reach the fields a source option or a model fact adds, found by the
    registry's facts (never by name): Anthropic on ``2023-06-01`` (which still takes sampling
    parameters) with ``thinking_display``; an ``openai`` source whose model takes tools on the
    Responses API only (routed there); a Responses model with ``reasoning.mode``."""
    today = datetime.date.today()
    current = [
        c for c in all_capabilities() if c.provider is not None and status(c, today) != "retired"
    ]
    variants: list[tuple[str, str, dict[str, Any]]] = []
    sampled = [c for c in current if c.provider == "anthropic" and c.sampling != "never"]
    if sampled:
        options = {"api_version": "2023-06-01", "thinking_display": "summarized"}
        variants.append(("anthropic", sampled[0].model, options))
    routed = [c for c in current if c.provider == "openai" and c.chat_tools == "never"]
    if routed:
        variants.append(("openai", routed[0].model, {}))
    modes = [c for c in current if "pro" in c.reasoning_modes]
    if modes:
        variants.append(("openai-responses", modes[0].model, {"reasoning_mode": "pro"}))
    return variants


async def _run_matrix(sim: Simulator) -> Matrix:
    recorder = Recorder()
    refused: list[str] = []
    failed: list[str] = []
    plain = [(p, m, {}) for p, models in _models().items() for m in models]
    async with httpx.AsyncClient(transport=recorder) as http:
        for provider, model, options in [*plain, *_variants()]:
            base_url = sim.base_url(provider)
            source = Source(provider, model, base_url=base_url, api_key="sk-sim", **options)
            async with Client([source], http_client=http) as client:
                for call in _calls(provider):
                    for stream in call.streams:
                        sent = len(recorder.exchanges)
                        try:
                            await _run(client, call, stream)
                        except PolythinkError as exc:
                            where = f"{provider} {model} {options} {call.what} {stream=}: {exc}"
                            (failed if len(recorder.exchanges) > sent else refused).append(where)
    return Matrix(recorder.exchanges, refused, failed)


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    with Simulator(Settings(answer_words=3)) as sim:
        return anyio.run(_run_matrix, sim)


# ------------------------------------------------------------------ provider fields


class _ThinkingType(TypedDict):
    type: Required[Literal["enabled", "disabled"]]


class _OpenRouterReasoning(TypedDict, total=False):
    effort: str
    enabled: bool
    max_tokens: int
    exclude: bool


class _OpenRouterProvider(TypedDict, total=False):
    require_parameters: bool


class _CacheControl(TypedDict, total=False):
    type: Required[Literal["ephemeral"]]
    ttl: Literal["5m", "1h"]


class _ChatTemplateKwargs(TypedDict, total=False):
    enable_thinking: bool


_CHAT = openai_params.CompletionCreateParamsBase
_ASSISTANT = openai_chat.ChatCompletionAssistantMessageParam
_THINKING_TYPE: Extensions = {
    _CHAT: {"thinking": _ThinkingType},
    _ASSISTANT: {"reasoning_content": str},
}

CHAT_REQUEST_EXTENSIONS: dict[str, Extensions] = {
    "openai": {},
    # openrouter.ai/docs "Reasoning Tokens" (reasoning.effort / max_tokens / exclude / enabled;
    # reasoning_details sent back unmodified), "Prompt caching" (top-level cache_control for
    # Anthropic models, AnthropicCacheControlDirective) and "Provider Routing"
    # (provider.require_parameters, sent with response_format), read 2026-12-01; WIRE.md §5,
    # STRUCTURED.md.
    "openrouter": {
        _CHAT: {
            "reasoning": _OpenRouterReasoning,
            "cache_control": _CacheControl,
            "provider": _OpenRouterProvider,
        },
        _ASSISTANT: {"reasoning_details": list[dict[str, Any]]},
    },
    # api-docs.deepseek.com/guides/thinking_mode (2026): thinking.type; reasoning_content of
    # tool-call turns passed back (WIRE.md §6.1).
    "deepseek": _THINKING_TYPE,
    # alibabacloud.com/help/en/model-studio/deep-thinking (2026-06-18): enable_thinking,
    # thinking_budget; docs.qwencloud.com/developer-guides/text-generation/thinking
    # ("function calling with thinking mode": reasoning_content sent back with the tool
    # results; "preserve thinking in multi-turn": preserve_thinking), as cited by
    # vercel/ai#20871 (2026-09-16). WIRE.md §6.2.
    "qwen": {
        _CHAT: {"enable_thinking": bool, "thinking_budget": int, "preserve_thinking": bool},
        _ASSISTANT: {"reasoning_content": str},
    },
    # docs.z.ai/guides/capabilities/thinking-mode (thinking.type; reasoning_content returned
    # with tool results), WIRE.md §6.3.
    "glm": _THINKING_TYPE,
    # platform.moonshot.ai docs (thinking.type; reasoning_content kept in context), WIRE §6.4.
    "kimi": _THINKING_TYPE,
    "minimax": {},
    "xai": {},
    "groq": {},
    "mistral": {},
    # docs.vllm.ai "Reasoning Outputs": chat_template_kwargs.enable_thinking (WIRE.md §6.7).
    "vllm": {_CHAT: {"chat_template_kwargs": _ChatTemplateKwargs}},
    # docs.ollama.com OpenAI compatibility: assistant "reasoning" taken back (WIRE.md §6.8).
    "ollama": {_ASSISTANT: {"reasoning": str}},
}
"""What each compatible provider adds to OpenAI's Chat Completions request, and where."""


def _chat_request(exchange: Exchange) -> list[str]:
    params = (
        openai_params.CompletionCreateParamsStreaming
        if exchange.body.get("stream")
        else openai_params.CompletionCreateParamsNonStreaming
    )
    return check_request(params, exchange.body, CHAT_REQUEST_EXTENSIONS[exchange.provider])


def _responses_request(exchange: Exchange) -> list[str]:
    params = (
        responses_params.ResponseCreateParamsStreaming
        if exchange.body.get("stream")
        else responses_params.ResponseCreateParamsNonStreaming
    )
    return check_request(params, exchange.body)


def _problems_by(check: Callable[[Exchange], list[str]], exchanges: list[Exchange]) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for exchange in exchanges:
        for problem in check(exchange):
            line = f"{exchange.provider}: {problem}"
            if line not in seen:
                seen.add(line)
                out.append(line)
    return out


def test_chat_request_bodies(matrix: Matrix) -> None:
    bodies = [e for e in matrix.exchanges if e.wire == "openai_chat"]
    assert _problems_by(_chat_request, bodies) == []


def test_responses_request_bodies(matrix: Matrix) -> None:
    bodies = [e for e in matrix.exchanges if e.wire == "openai_responses"]
    assert _problems_by(_responses_request, bodies) == []


ANTHROPIC_VERSION_FIELDS: dict[str, Extensions] = {
    # The sampling fields version 2026-10-21 removed ("temperature: Extra inputs are not
    # permitted" there; A-MIG, CURRENT.md §1.2) and the installed SDK no longer declares; the
    # 2023-06-01 reference has them (../shared/wire/specs/anthropic_messages_openapi_docs_copy.md,
    # 2025-09: temperature 0-1, top_p, top_k).
    "2023-06-01": {
        anthropic_params.MessageCreateParamsBase: {
            "temperature": float,
            "top_p": float,
            "top_k": int,
        }
    },
    "2026-10-21": {},
}
"""Per ``anthropic-version`` polythink may send: its fields beyond the installed SDK's types."""

ANTHROPIC_SDK_VERSION = "2026-10-21"
"""The API version the installed ``anthropic`` package's types describe (its
``ANTHROPIC_API_VERSION``); :data:`ANTHROPIC_VERSION_FIELDS` is relative to it."""


def _anthropic_request(exchange: Exchange) -> list[str]:
    version = exchange.headers["anthropic-version"]
    if version not in ANTHROPIC_VERSION_FIELDS:
        return [f"anthropic-version {version!r} has no entry in ANTHROPIC_VERSION_FIELDS"]
    params = (
        anthropic_params.MessageCreateParamsStreaming
        if exchange.body.get("stream")
        else anthropic_params.MessageCreateParamsNonStreaming
    )
    return check_request(params, exchange.body, ANTHROPIC_VERSION_FIELDS[version])


def _gemini_request_fields() -> dict[str, Any]:
    """``GenerateContentRequest``'s body fields (the proto's, camel-cased; ``model`` is in the
    URL) with the google-genai model of each."""
    proto = shared_file(SPECS / "google_generativelanguage_v1beta_generative_service.proto")
    text = proto.read_text(encoding="utf-8")
    message = text[text.index("message GenerateContentRequest {") :]
    message = message[: message.index("\n}\n")]
    names = re.findall(r"^\s+(?:optional |repeated )?[\w.]+ (\w+) = \d+", message, re.M)
    models: dict[str, Any] = {
        "contents": list[genai.Content],
        "systemInstruction": genai.Content,
        "tools": list[genai.Tool],
        "toolConfig": genai.ToolConfig,
        "safetySettings": list[genai.SafetySetting],
        "generationConfig": genai.GenerationConfig,
        "cachedContent": str,
    }
    camel = [re.sub(r"_(\w)", lambda m: m.group(1).upper(), n) for n in names if n != "model"]
    assert sorted(camel) == sorted(models), camel
    return models


def _gemini_request(exchange: Exchange) -> list[str]:
    fields = _gemini_request_fields()
    out = [
        f"$.{key}: GenerateContentRequest has no field {key!r}"
        for key in exchange.body
        if key not in fields
    ]
    for key, value in exchange.body.items():
        if key in fields:
            out += [
                p.replace("$", f"$.{key}", 1)
                for p in check_response(fields[key], value, json_bytes=True)
            ]
    return out


def test_anthropic_request_bodies(matrix: Matrix) -> None:
    assert anthropic_constants.ANTHROPIC_API_VERSION == ANTHROPIC_SDK_VERSION
    assert set(PROVIDERS["anthropic"].api_versions) == set(ANTHROPIC_VERSION_FIELDS)
    bodies = [e for e in matrix.exchanges if e.wire == "anthropic"]
    assert _problems_by(_anthropic_request, bodies) == []


def test_gemini_request_bodies(matrix: Matrix) -> None:
    bodies = [e for e in matrix.exchanges if e.wire == "gemini"]
    assert _problems_by(_gemini_request, bodies) == []


# ------------------------------------------------------------------ the simulator's answers

_MESSAGE = openai_chat.ChatCompletionMessage
_DELTA = openai_chat.chat_completion_chunk.ChoiceDelta


class _MistralText(TypedDict):
    type: Required[Literal["text"]]
    text: Required[str]


class _MistralThinking(TypedDict):
    type: Required[Literal["thinking"]]
    thinking: Required[list[_MistralText]]


def _answer_fields(fields: Mapping[str, Any]) -> Extensions:
    return {_MESSAGE: fields, _DELTA: fields}


_REASONING_CONTENT = _answer_fields({"reasoning_content": str})
_MISTRAL_CONTENT = str | list[_MistralText | _MistralThinking] | None

CHAT_ANSWER_EXTENSIONS: dict[str, Extensions] = {
    "openai": {},
    # message.reasoning + reasoning_details (openrouter.ai/docs "Reasoning Tokens"; recorded
    # in pai_openrouter_chat_reasoning_details_stream, 2025-12).
    "openrouter": _answer_fields({"reasoning": str, "reasoning_details": list[dict[str, Any]]}),
    # message.reasoning_content (DS-DOC thinking_mode; pai_deepseek_reasoner_nonstream).
    "deepseek": _REASONING_CONTENT,
    "qwen": _REASONING_CONTENT,  # WIRE.md §6.2
    "glm": _REASONING_CONTENT,  # WIRE.md §6.3
    "kimi": _REASONING_CONTENT,  # WIRE.md §6.4
    "minimax": _REASONING_CONTENT,  # WIRE.md §6.6 (reasoning_split answers)
    "xai": _REASONING_CONTENT,  # WIRE.md §6.5 (grok-3-mini message.reasoning_content)
    # message.reasoning with reasoning_format "parsed" (console.groq.com/docs/reasoning;
    # pai_groq_reasoning_format_raw_and_parsed).
    "groq": _answer_fields({"reasoning": str}),
    # content as a list of text and thinking chunks (docs.mistral.ai "Reasoning", 2025).
    "mistral": _answer_fields({"content": _MISTRAL_CONTENT}),
    "vllm": _answer_fields({"reasoning": str}),  # docs.vllm.ai "Reasoning Outputs"
    "ollama": _answer_fields({"reasoning": str}),  # WIRE.md §6.8
}
"""What each compatible provider adds to OpenAI's Chat Completions answers, and where."""


def _answers(exchange: Exchange, check: Callable[[str, Any], list[str]]) -> list[str]:
    if exchange.status != 200:
        return []
    out: list[str] = []
    for kind, payload in exchange.answers():
        where = f"event {kind or payload.get('type', '')}:" if exchange.streamed else ""
        out += [f"{where} {p}".strip() for p in check(kind, payload)]
    return out


def _chat_answer(exchange: Exchange) -> list[str]:
    model = openai_chat.ChatCompletionChunk if exchange.streamed else openai_chat.ChatCompletion
    ext = CHAT_ANSWER_EXTENSIONS[exchange.provider]
    return _answers(exchange, lambda _, data: check_response(model, data, ext))


def _responses_answer(exchange: Exchange) -> list[str]:
    model = responses_types.ResponseStreamEvent if exchange.streamed else responses_types.Response
    return _answers(exchange, lambda _, data: check_response(model, data))


class _Ping(TypedDict):
    """Anthropic's keep-alive stream event, which the SDK's event union leaves out ("event:
    ping", recorded in llmanthropic_plain_stream, 2026-02-17, and pai_anthropic_thinking_stream)."""

    type: Required[Literal["ping"]]


def _anthropic_answer(exchange: Exchange) -> list[str]:
    model = (
        anthropic_types.RawMessageStreamEvent | _Ping
        if exchange.streamed
        else anthropic_types.Message
    )
    return _answers(exchange, lambda _, data: check_response(model, data))


def _gemini_answer(exchange: Exchange) -> list[str]:
    model = genai.GenerateContentResponse
    return _answers(exchange, lambda _, data: check_response(model, data, json_bytes=True))


@pytest.mark.parametrize(
    ("wire", "check"),
    [
        ("openai_chat", _chat_answer),
        ("openai_responses", _responses_answer),
        ("anthropic", _anthropic_answer),
        ("gemini", _gemini_answer),
    ],
)
def test_simulator_answers(
    matrix: Matrix, wire: str, check: Callable[[Exchange], list[str]]
) -> None:
    answers = [e for e in matrix.exchanges if e.wire == wire]
    assert _problems_by(check, answers) == []


def test_the_matrix_covers_every_provider_and_carries_reasoning_back(matrix: Matrix) -> None:
    assert matrix.failed == []
    seen = {(e.provider, e.streamed) for e in matrix.exchanges}
    # The clouds have a matrix of their own: tests/test_clouds_conformance.py.
    wired = [p for p, profile in PROVIDERS.items() if profile.cloud is None]
    assert seen == {(p, s) for p in wired for s in (False, True)}

    def sent_back(provider: str, found: Callable[[Any], bool]) -> bool:
        return any(found(e.body) for e in matrix.exchanges if e.provider == provider)

    def turns(body: Any, key: str) -> list[Any]:
        return [m for m in body.get(key, ()) if isinstance(m, Mapping)]

    assert sent_back(
        "anthropic",
        lambda b: any(
            isinstance(m["content"], list) and m["content"][0].get("signature")
            for m in turns(b, "messages")
            if m["role"] == "assistant"
        ),
    )
    assert sent_back(
        "openai-responses",
        lambda b: any(
            i.get("type") == "reasoning" and i.get("encrypted_content") for i in turns(b, "input")
        ),
    )
    assert sent_back(
        "gemini",
        lambda b: any(p.get("thoughtSignature") for c in turns(b, "contents") for p in c["parts"]),
    )
    for provider in ("deepseek", "qwen", "glm", "kimi"):
        assert sent_back(
            provider, lambda b: any("reasoning_content" in m for m in turns(b, "messages"))
        ), provider
    assert sent_back(
        "openrouter", lambda b: any("reasoning_details" in m for m in turns(b, "messages"))
    )
    # The Anthropic version choice: sampling only on 2023-06-01, the display on both.
    versions = {
        (e.headers["anthropic-version"], "temperature" in e.body)
        for e in matrix.exchanges
        if e.wire == "anthropic"
    }
    assert versions == {("2026-10-21", False), ("2023-06-01", False), ("2023-06-01", True)}
    assert sent_back("anthropic", lambda b: b.get("thinking", {}).get("display") == "summarized")
    # GPT-6 routing and reasoning.mode.
    assert any(e.provider == "openai" and e.wire == "openai_responses" for e in matrix.exchanges)
    assert sent_back("openai-responses", lambda b: b.get("reasoning", {}).get("mode") == "pro")
    # Structured output went out on every wire in its own field.
    assert sent_back("openai", lambda b: b.get("response_format", {}).get("type") == "json_schema")
    assert sent_back("openai-responses", lambda b: "format" in b.get("text", {}))
    assert sent_back("anthropic", lambda b: "format" in b.get("output_config", {}))
    assert sent_back("gemini", lambda b: "responseJsonSchema" in b.get("generationConfig", {}))
    # A strict tool keeps its strictness on every wire that has a way to say it.
    assert sent_back("openai", lambda b: b.get("tools", [{}])[0].get("function", {}).get("strict"))
    assert sent_back("openai-responses", lambda b: b.get("tools", [{}])[0].get("strict"))
    assert sent_back("anthropic", lambda b: b.get("tools", [{}])[0].get("strict"))
    assert sent_back(
        "gemini",
        lambda b: b.get("toolConfig", {}).get("functionCallingConfig") == {"mode": "VALIDATED"},
    )


SHAPES: list[tuple[str, bytes, Any]] = [
    ("chat finish", shapes.chat_finish("stop"), lambda: openai_chat.ChatCompletionChunk),
    (
        "chat tool calls",
        shapes.chat_tool_calls(
            [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}]
        ),
        lambda: openai_chat.ChatCompletionChunk,
    ),
    *(
        (
            f"chat usage {where}",
            shapes.chat_usage(
                where, {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
            ),
            lambda: openai_chat.ChatCompletionChunk,
        )
        for where in ("final_chunk", "top_level", "none")
    ),
    (
        "responses failed",
        shapes.responses_failed("server_error", "boom"),
        lambda: responses_types.ResponseStreamEvent,
    ),
    (
        "responses incomplete",
        shapes.responses_incomplete("max_output_tokens"),
        lambda: responses_types.ResponseStreamEvent,
    ),
    (
        "anthropic stop",
        shapes.anthropic_stop("end_turn"),
        lambda: anthropic_types.RawMessageStreamEvent,
    ),
    ("gemini finish", shapes.gemini_finish("STOP"), lambda: genai.GenerateContentResponse),
]


@pytest.mark.parametrize(("name", "frames", "model"), SHAPES, ids=[s[0] for s in SHAPES])
def test_simulator_shapes(name: str, frames: bytes, model: Callable[[], Any]) -> None:
    decoder = SSEDecoder()
    events = [json.loads(d) for _, d in decoder.feed(frames) + decoder.close() if d != "[DONE]"]
    found = [p for event in events for p in check_response(model(), event, json_bytes=True)]
    assert found == []


def _exchange(provider: str, body: Any, **headers: str) -> Exchange:
    return Exchange(provider, f"/{provider}/v1", dict(headers), body)


CHAT_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
NEGATIVE: list[tuple[str, Callable[[Exchange], list[str]], Exchange, str]] = [
    (
        "a field OpenAI does not declare",
        _chat_request,
        _exchange("openai", {**CHAT_BODY, "thinking": {"type": "enabled"}}),
        "$.thinking: CompletionCreateParamsNonStreaming declares no 'thinking'",
    ),
    (
        "a DeepSeek field on another provider",
        _chat_request,
        _exchange(
            "openai",
            {
                **CHAT_BODY,
                "messages": [{"role": "assistant", "content": "x", "reasoning_content": "r"}],
            },
        ),
        "$.messages[0].reasoning_content: ChatCompletionAssistantMessageParam declares no "
        "'reasoning_content'",
    ),
    (
        "a DeepSeek field of the wrong shape",
        _chat_request,
        _exchange("deepseek", {**CHAT_BODY, "thinking": {"type": "on"}}),
        "$.thinking.type: 'on' is not one of ('enabled', 'disabled')",
    ),
    (
        "an input_image without detail",
        _responses_request,
        _exchange(
            "openai-responses",
            {
                "model": "m",
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": PNG}]}],
            },
        ),
        "$.input[0].content[0]: ResponseInputImageParam requires 'detail'",
    ),
    (
        "temperature on 2026-10-21",
        _anthropic_request,
        _exchange(
            "anthropic",
            {"model": "m", "max_tokens": 5, "messages": [], "temperature": 0.5},
            **{"anthropic-version": "2026-10-21"},
        ),
        "$.temperature: MessageCreateParamsNonStreaming declares no 'temperature'",
    ),
    (
        "an unknown Gemini part field",
        _gemini_request,
        _exchange("gemini", {"contents": [{"role": "user", "parts": [{"txt": "hi"}]}]}),
        "$.contents[0].parts[0].txt: Part declares no 'txt'",
    ),
    (
        "an unknown Gemini enum value",
        _gemini_request,
        _exchange(
            "gemini",
            {
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"thinkingConfig": {"thinkingLevel": "HUGE"}},
            },
        ),
        "$.generationConfig.thinkingConfig.thinkingLevel: HUGE is not a valid ThinkingLevel",
    ),
]


@pytest.mark.parametrize(
    ("check", "exchange", "expected"), [n[1:] for n in NEGATIVE], ids=[n[0] for n in NEGATIVE]
)
def test_the_checks_catch(
    check: Callable[[Exchange], list[str]], exchange: Exchange, expected: str
) -> None:
    assert check(exchange) == [expected]


def test_the_answer_checks_catch_a_chunk_without_created() -> None:
    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": []}
    assert check_response(openai_chat.ChatCompletionChunk, chunk) == [
        "$: ChatCompletionChunk requires 'created'"
    ]
