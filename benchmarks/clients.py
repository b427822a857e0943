"""The clients under test, each behind the same small adapter interface.

An adapter opens its client against the simulator, then makes call ``i`` of a
:class:`~benchmarks.workload.Workload` as that client's users would write it: ``complete``
returns the answer text, ``stream`` returns how many text and reasoning deltas it saw and
calls ``first()`` at the first one. Every import of a client's package happens inside its
adapter, so a worker process loads only the client it measures (which keeps peak RSS and
CPU honest) and a missing package is reported as :class:`Missing`, not a crash.

Clients:

- ``raw-httpx``: ``httpx.AsyncClient`` POST and ``json.loads``; streams split SSE lines by
  hand. The floor every ratio is taken against.
- ``raw-aiohttp``: the same with ``aiohttp.ClientSession`` (a reference below the floor).
- ``polythink-bare-httpx``: polythink's transport driven directly (no layers), over httpx's own
  pool; ``polythink-bare-aiohttp`` over the aiohttp-backed httpx transport.
- ``polythink-full-httpx``: a :class:`polythink.Client` with every option it accepts turned on
  (see :func:`full_options`); ``polythink-full-aiohttp`` the same over aiohttp.
- ``polythink-default``: a :class:`polythink.Client` with one source and every option at its
  default (the quick start's client).
- ``polythink-client`` and ``polythink-client+{telemetry,limits,cache,budget}``: a client
  over aiohttp with no option group on, then one group at a time (the layer breakdown);
  ``polythink-client+telemetry+cost`` adds pricing every call (``Response.cost``) to
  telemetry.
- ``openai``, ``anthropic``: the official SDKs with their defaults, pointed at the simulator.
- ``litellm``: ``litellm.acompletion`` with an ``openai/`` model and ``api_base``.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from benchmarks.workload import Workload, prompt

__all__ = ["ADAPTERS", "Adapter", "Missing", "full_options", "make_adapter"]

API_KEY = "sim-key"
_LIMIT_CONNECTIONS = 1000
_LIMIT_KEEPALIVE = 100


class Missing(Exception):
    """The client's package is not installed (or cannot run here); the message says which."""


def _need(module: str, package: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Missing(f"{package} is not installed (pip install '.[bench]')") from exc


def _chat_delta(chunk: dict[str, Any]) -> int:
    """Text and reasoning deltas in one parsed Chat Completions chunk (0 or 1)."""
    choices = chunk.get("choices")
    if not choices:
        return 0
    delta = choices[0].get("delta") or {}
    return 1 if (delta.get("content") or delta.get("reasoning_content")) else 0


def _anthropic_delta(event: dict[str, Any]) -> int:
    if event.get("type") != "content_block_delta":
        return 0
    delta = event.get("delta") or {}
    return 1 if (delta.get("text") or delta.get("thinking")) else 0


class Adapter:
    """One client. Subclasses set ``name`` and implement the four methods."""

    name = ""
    limitable = False
    """Whether the client takes per-source rate limits (``limits``)."""

    def __init__(self, root: str, work: Workload, limits: dict[str, Any] | None = None) -> None:
        self.root = root
        self.work = work
        self.limits = limits
        self.base_url = f"{root}/{work.provider}/v1"
        path = "/chat/completions" if work.wire == "openai_chat" else "/messages"
        self.url = self.base_url + path
        self.notes: list[str] = []

    async def open(self) -> None:
        """Create the client (imports happen here).

        Raises:
            Missing: the client's package is not installed.
        """

    async def complete(self, i: int) -> str:
        raise NotImplementedError

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        raise NotImplementedError

    async def converse(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        """Send a whole conversation with ``tools``; return the assistant turn to append,
        in the form this client's users keep their conversation in."""
        raise Missing(f"{self.name} does not take a conversation")

    def keep(self, messages: list[dict[str, Any]]) -> list[Any]:
        """A conversation of OpenAI Chat dicts as this client's users keep it across turns."""
        return messages

    def user_turn(self, text: str) -> Any:
        """A user message in the form :meth:`keep` holds."""
        return {"role": "user", "content": text}

    async def close(self) -> None:
        """Release the client."""


def _auth_headers(work: Workload) -> dict[str, str]:
    headers = {"content-type": "application/json", **work.headers}
    if work.wire == "anthropic":
        headers["x-api-key"] = API_KEY
    else:
        headers["authorization"] = f"Bearer {API_KEY}"
    return headers


class _RawBase(Adapter):
    def _conversation_body(self, messages: list[Any], tools: list[dict[str, Any]]) -> bytes:
        return json.dumps({**self.work.body, "messages": messages, "tools": tools}).encode()

    def _text(self, data: dict[str, Any]) -> str:
        if self.work.wire == "anthropic":
            return "".join(b.get("text", "") for b in data["content"] if b["type"] == "text")
        return str(data["choices"][0]["message"]["content"])

    def _count(self, data: bytes) -> int:
        event = json.loads(data)
        return _anthropic_delta(event) if self.work.wire == "anthropic" else _chat_delta(event)

    def _line(self, line: bytes, seen: int, first: Callable[[], None]) -> int | None:
        """Count one SSE line by hand (the floor): the new total, or ``None`` at ``[DONE]``."""
        if not line.startswith(b"data:"):
            return seen
        data = line[5:].strip()
        if data == b"[DONE]":
            return None
        if self._count(data):
            if not seen:
                first()
            seen += 1
        return seen


class RawHttpx(_RawBase):
    name = "raw-httpx"

    async def open(self) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            limits=httpx.Limits(
                max_connections=_LIMIT_CONNECTIONS, max_keepalive_connections=_LIMIT_KEEPALIVE
            )
        )
        self.headers = _auth_headers(self.work)
        self.stream_headers = {**self.headers, "accept": "text/event-stream"}

    async def complete(self, i: int) -> str:
        body = json.dumps(self.work.body_for(i)).encode()
        response = await self.client.post(self.url, content=body, headers=self.headers)
        response.raise_for_status()
        return self._text(json.loads(response.content))

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        body = json.dumps(self.work.body_for(i)).encode()
        seen = 0
        async with self.client.stream(
            "POST", self.url, content=body, headers=self.stream_headers
        ) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    counted = self._line(line, seen, first)
                    if counted is None:
                        return seen
                    seen = counted
        return seen

    async def converse(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        body = self._conversation_body(messages, tools)
        response = await self.client.post(self.url, content=body, headers=self.headers)
        response.raise_for_status()
        return json.loads(response.content)["choices"][0]["message"]

    async def close(self) -> None:
        await self.client.aclose()


class RawAiohttp(_RawBase):
    name = "raw-aiohttp"

    async def open(self) -> None:
        aiohttp = _need("aiohttp", "aiohttp")
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=_LIMIT_CONNECTIONS)
        )
        self.headers = _auth_headers(self.work)
        self.stream_headers = {**self.headers, "accept": "text/event-stream"}

    async def complete(self, i: int) -> str:
        body = json.dumps(self.work.body_for(i)).encode()
        async with self.session.post(self.url, data=body, headers=self.headers) as response:
            response.raise_for_status()
            return self._text(json.loads(await response.read()))

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        body = json.dumps(self.work.body_for(i)).encode()
        seen = 0
        async with self.session.post(self.url, data=body, headers=self.stream_headers) as response:
            response.raise_for_status()
            async for line in response.content:
                counted = self._line(line, seen, first)
                if counted is None:
                    break
                seen = counted
        return seen

    async def converse(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        body = self._conversation_body(messages, tools)
        async with self.session.post(self.url, data=body, headers=self.headers) as response:
            response.raise_for_status()
            return json.loads(await response.read())["choices"][0]["message"]

    async def close(self) -> None:
        await self.session.close()


def _polythink_http(kind: str) -> Any:
    from polythink.http import build_http_client

    return build_http_client(kind)


class PolythinkBare(Adapter):
    """The transport alone: the body, HTTP, parsing and error mapping, no layers."""

    name = "polythink-bare-httpx"
    http = "httpx"

    async def open(self) -> None:
        from polythink.config import Source
        from polythink.conversion import coerce_messages
        from polythink.providers import get_provider
        from polythink.transports import transport_class
        from polythink.types import Request

        profile = get_provider(self.work.provider)
        fragment = {
            k: v
            for k, v in self.work.params().items()
            if k not in ("stream", "stream_options", "max_tokens")
        }
        source = Source(
            self.work.provider,
            self.work.model,
            api_key=API_KEY,
            base_url=self.base_url,
            extra_body=fragment,
        )
        self.http_client = _polythink_http(self.http)
        self.transport = transport_class(profile.wire)(
            source=source, index=0, profile=profile, client=self.http_client, api_key=API_KEY
        )
        self._request = Request
        self._coerce = coerce_messages
        self._max_tokens = (
            self.work.body.get("max_tokens") if self.work.wire == "anthropic" else None
        )

    def _build(self, i: int, stream: bool) -> Any:
        return self._request(
            messages=self._coerce([{"role": "user", "content": prompt(i)}]),
            max_tokens=self._max_tokens,
            stream=stream,
        )

    async def complete(self, i: int) -> str:
        response = await self.transport.complete(self._build(i, False))
        return str(response.text)

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        seen = 0
        async for event in self.transport.stream(self._build(i, True)):
            if event.type in ("text", "reasoning"):
                if not seen:
                    first()
                seen += 1
        return seen

    async def close(self) -> None:
        await self.http_client.aclose()


class PolythinkBareAiohttp(PolythinkBare):
    name = "polythink-bare-aiohttp"
    http = "aiohttp"


def _otel_providers() -> tuple[Any, Any]:
    """An OTel SDK tracer and meter provider exporting to nowhere (the exporters do nothing)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class NoSpans(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class NoMetrics(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 0, **kwargs: Any) -> Any:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 0) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 0, **kwargs: Any) -> None:
            return None

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoSpans()))
    reader = PeriodicExportingMetricReader(NoMetrics(), export_interval_millis=60_000)
    return tracer_provider, MeterProvider(metric_readers=[reader])


_GROUP_OF = {
    "budgets": "budget",
    "cache": "cache",
    "cost": "cost",
    "tracer_provider": "telemetry",
    "meter_provider": "telemetry",
    "capture_content": "telemetry",
    "rpm": "limits",
    "tpm": "limits",
    "max_concurrency": "limits",
}


def full_options(
    effort: str | None,
    *,
    http: str | None = None,
    cache_dir: str | None = None,
    groups: frozenset[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Turn on every option ``Client`` and ``Source`` accept: ``(client_kw, source_kw, notes)``.

    The options are read from the signatures, so a layer that lands with a new option is
    picked up here, or named in ``notes`` when this table does not know how to turn it on.
    ``groups`` limits the grouped options (``telemetry``, ``limits``, ``cache``, ``cost``) to
    those groups (``None``: all);
    the tier (``reasoning_effort``), retries and the HTTP layer are always set.
    Limits are set far above what the benchmark sends (so the layer runs but never waits):
    ``rpm`` 10 000 000, ``tpm`` 10 000 000 000, ``max_concurrency`` 1 000. The cache is on but
    empty (every call's prompt differs, so every lookup misses and every answer is stored).
    Telemetry uses the OTel SDK with exporters that drop everything. One spend budget of
    $1,000,000 a day, counted in this process, reserves and corrects every call (``budget``
    group) and never refuses one. ``capture_content`` stays off: recording prompts is a
    debugging switch, not a layer. Not layers, so left alone: the learned-capability store
    (read when a client starts, written only when a model refuses a tier), a shared budget
    store or shared limits (Redis: ``benchmarks/budgets.py``, ``benchmarks/shared_limits.py``),
    user middleware (the user-layers row), the per-source wire options
    (``api_version``, ``thinking_display``, ``reasoning_mode``, ``prefix_mismatch``) and the
    source order of ``reasoning_affinity`` (a conversation's, not a layer).
    ``response_format`` is per call: no scenario here asks for structured output.
    """
    from polythink.budgets import Budget
    from polythink.client import Client
    from polythink.config import Source

    notes: list[str] = []
    tracer_provider, meter_provider = _otel_providers()
    known_client: dict[str, Any] = {
        "cache": cache_dir or tempfile.mkdtemp(prefix="polythink-bench-cache-"),
        "tracer_provider": tracer_provider,
        "meter_provider": meter_provider,
        "capture_content": False,
        "http": http,
        "cost": True,
        "budgets": [Budget(1_000_000.0, per="day", unpriced="allow", name="bench")],
    }
    # Options a Client turns on by default: passed as False when their group is off.
    on_by_default = {"cost"}
    # Shared limits need a Redis server; benchmarks/shared_limits.py measures them.
    # Layers of the caller's own are not an option to turn on: the user-layers row and
    # benchmarks/user_layers.py measure them.
    left_alone_client = {
        "sources",
        "http_client",
        "limits",
        "middleware",
        "capabilities_store",
        "budget_store",
        "prefix_mismatch",
        "reasoning_affinity",
    }
    client_kw: dict[str, Any] = {}
    for name in inspect.signature(Client.__init__).parameters:
        if name == "self" or name in left_alone_client:
            continue
        if name in known_client:
            wanted = groups is None or _GROUP_OF.get(name) in (None, *groups)
            if name in on_by_default:
                client_kw[name] = known_client[name] if wanted else False
            elif known_client[name] is not None and wanted:
                client_kw[name] = known_client[name]
        else:
            notes.append(f"Client option {name!r} is not turned on by the benchmark")
    known_source: dict[str, Any] = {
        "reasoning_effort": effort,
        "rpm": 10_000_000,
        "tpm": 10_000_000_000,
        "max_concurrency": 1000,
        "max_retries": 2,
    }
    left_alone_source = {
        "provider",
        "model",
        "api_key",
        "base_url",
        "effort_fallback",
        "timeout",
        "headers",
        "drop_params",
        "extra_body",
        "middleware",
        "api_version",
        "thinking_display",
        "reasoning_mode",
        "prefix_mismatch",
    }
    source_kw: dict[str, Any] = {}
    for spec in fields(Source):
        if spec.name in known_source:
            if groups is None or _GROUP_OF.get(spec.name) in (None, *groups):
                source_kw[spec.name] = known_source[spec.name]
        elif spec.name not in left_alone_source:
            notes.append(f"Source option {spec.name!r} is not turned on by the benchmark")
    if http is not None and "http" not in client_kw:
        notes.append("this build's Client has no 'http' option; it uses httpx's own pool")
    return client_kw, source_kw, notes


class PolythinkFull(Adapter):
    """A whole :class:`polythink.Client`: every layer of this build, every option on."""

    name = "polythink-full-httpx"
    http = "httpx"
    limitable = True
    groups: frozenset[str] | None = None
    """Option groups turned on (``None``: every option)."""
    user_layers = False
    """One no-op layer of the caller's own at each position (the client's and the source's)."""

    async def open(self) -> None:
        from polythink.client import Client
        from polythink.config import Source

        client_kw, source_kw, notes = full_options(
            self.work.effort, http=self.http, groups=self.groups
        )
        source_kw.update(self.limits or {})
        self.notes.extend(notes)
        if self.user_layers:
            from benchmarks.user_layers import NoOpLayer

            client_kw["middleware"] = [NoOpLayer()]
            source_kw["middleware"] = [NoOpLayer()]
        source = Source(
            self.work.provider,
            self.work.model,
            api_key=API_KEY,
            base_url=self.base_url,
            **source_kw,
        )
        self.client = Client([source], **client_kw)
        await self.client.__aenter__()

    async def complete(self, i: int) -> str:
        response = await self.client.complete([{"role": "user", "content": prompt(i)}])
        return str(response.text)

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        seen = 0
        async for event in self.client.stream([{"role": "user", "content": prompt(i)}]):
            if event.type in ("text", "reasoning"):
                if not seen:
                    first()
                seen += 1
        return seen

    async def converse(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        return (await self.client.complete(messages, tools=tools)).message

    def keep(self, messages: list[dict[str, Any]]) -> list[Any]:
        # An agent loop appends the Message values of its answers and keeps them.
        from polythink.types import Message

        return [Message.coerce(m) for m in messages]

    def user_turn(self, text: str) -> Any:
        from polythink.types import Message

        return Message(role="user", content=text)

    async def close(self) -> None:
        await self.client.aclose()


class PolythinkFullAiohttp(PolythinkFull):
    name = "polythink-full-aiohttp"
    http = "aiohttp"


class PolythinkDefault(PolythinkFull):
    """A :class:`polythink.Client` as the quick start builds it: one source with the tier,
    every other option at its default (the default layers, the default HTTP layer)."""

    name = "polythink-default"
    limitable = False

    async def open(self) -> None:
        from polythink.client import Client
        from polythink.config import Source

        source = Source(
            self.work.provider,
            self.work.model,
            api_key=API_KEY,
            base_url=self.base_url,
            reasoning_effort=self.work.effort,
        )
        self.client = Client([source])
        await self.client.__aenter__()


class PolythinkClient(PolythinkFullAiohttp):
    """A :class:`polythink.Client` over aiohttp with no option groups on (the layer
    breakdown's base): reasoning, failover and retries run; telemetry goes to the
    OpenTelemetry API's no-op; no limits; no cache."""

    name = "polythink-client"
    limitable = False
    groups = frozenset()


class PolythinkClientTelemetry(PolythinkClient):
    name = "polythink-client+telemetry"
    groups = frozenset({"telemetry"})


class PolythinkClientTelemetryCost(PolythinkClient):
    name = "polythink-client+telemetry+cost"
    groups = frozenset({"telemetry", "cost"})


class PolythinkClientLimits(PolythinkClient):
    name = "polythink-client+limits"
    groups = frozenset({"limits"})


class PolythinkClientCache(PolythinkClient):
    name = "polythink-client+cache"
    groups = frozenset({"cache"})


class PolythinkClientBudget(PolythinkClient):
    name = "polythink-client+budget"
    groups = frozenset({"budget"})


class PolythinkClientUserLayers(PolythinkClient):
    name = "polythink-client+user-layers"
    user_layers = True


_OPENAI_PARAMS = frozenset(
    {"stream", "stream_options", "reasoning_effort", "max_completion_tokens", "max_tokens"}
)
_ANTHROPIC_PARAMS = frozenset({"max_tokens", "thinking", "stream", "temperature", "system"})


class OpenAISDK(Adapter):
    name = "openai"

    async def open(self) -> None:
        openai = _need("openai", "openai")
        self.client = openai.AsyncOpenAI(base_url=self.base_url, api_key=API_KEY)
        params = self.work.params()
        self.kwargs = {k: v for k, v in params.items() if k in _OPENAI_PARAMS}
        extra = {k: v for k, v in params.items() if k not in _OPENAI_PARAMS}
        if extra:
            self.kwargs["extra_body"] = extra

    async def complete(self, i: int) -> str:
        completion = await self.client.chat.completions.create(
            model=self.work.model,
            messages=[{"role": "user", "content": prompt(i)}],
            **self.kwargs,
        )
        return str(completion.choices[0].message.content)

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        seen = 0
        chunks = await self.client.chat.completions.create(
            model=self.work.model,
            messages=[{"role": "user", "content": prompt(i)}],
            **self.kwargs,
        )
        async for chunk in chunks:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content or getattr(delta, "reasoning_content", None):
                if not seen:
                    first()
                seen += 1
        return seen

    async def converse(self, messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        completion = await self.client.chat.completions.create(
            model=self.work.model, messages=messages, tools=tools, **self.kwargs
        )
        return {"role": "assistant", "content": completion.choices[0].message.content}

    async def close(self) -> None:
        await self.client.close()


class AnthropicSDK(Adapter):
    name = "anthropic"

    async def open(self) -> None:
        anthropic = _need("anthropic", "anthropic")
        self.client = anthropic.AsyncAnthropic(base_url=f"{self.root}/anthropic", api_key=API_KEY)
        params = self.work.params()
        self.kwargs = {k: v for k, v in params.items() if k in _ANTHROPIC_PARAMS}
        extra = {k: v for k, v in params.items() if k not in _ANTHROPIC_PARAMS}
        if extra:
            self.kwargs["extra_body"] = extra

    async def complete(self, i: int) -> str:
        message = await self.client.messages.create(
            model=self.work.model,
            messages=[{"role": "user", "content": prompt(i)}],
            **self.kwargs,
        )
        return "".join(b.text for b in message.content if b.type == "text")

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        seen = 0
        events = await self.client.messages.create(
            model=self.work.model,
            messages=[{"role": "user", "content": prompt(i)}],
            **self.kwargs,
        )
        async for event in events:
            if event.type != "content_block_delta":
                continue
            delta = event.delta
            if getattr(delta, "text", None) or getattr(delta, "thinking", None):
                if not seen:
                    first()
                seen += 1
        return seen

    async def close(self) -> None:
        await self.client.close()


class LiteLLM(Adapter):
    name = "litellm"

    async def open(self) -> None:
        # Use the cost map shipped in the package instead of fetching it over the network.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self.litellm = _need("litellm", "litellm")
        self.litellm.suppress_debug_info = True
        params = self.work.params()
        self.stream_flag = bool(params.pop("stream", False))
        params.pop("stream_options", None)
        self.kwargs = {"extra_body": params} if params else {}

    def _call(self, i: int, stream: bool) -> Any:
        return self.litellm.acompletion(
            model=f"openai/{self.work.model}",
            messages=[{"role": "user", "content": prompt(i)}],
            api_base=self.base_url,
            api_key=API_KEY,
            stream=stream,
            **self.kwargs,
        )

    async def complete(self, i: int) -> str:
        response = await self._call(i, False)
        return str(response.choices[0].message.content)

    async def stream(self, i: int, first: Callable[[], None]) -> int:
        seen = 0
        chunks = await self._call(i, True)
        async for chunk in chunks:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if getattr(delta, "content", None) or getattr(delta, "reasoning_content", None):
                if not seen:
                    first()
                seen += 1
        return seen


ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls
    for cls in (
        RawHttpx,
        RawAiohttp,
        PolythinkBare,
        PolythinkBareAiohttp,
        PolythinkFull,
        PolythinkFullAiohttp,
        PolythinkDefault,
        PolythinkClient,
        PolythinkClientTelemetry,
        PolythinkClientTelemetryCost,
        PolythinkClientLimits,
        PolythinkClientCache,
        PolythinkClientBudget,
        PolythinkClientUserLayers,
        OpenAISDK,
        AnthropicSDK,
        LiteLLM,
    )
}
"""Client name -> adapter class."""


def make_adapter(
    name: str, root: str, work: Workload, *, limits: dict[str, Any] | None = None
) -> Adapter:
    """Build the adapter for client ``name`` (``limits``: a polythink client's rate limits).

    Raises:
        ValueError: for an unknown client name (the message lists the known ones).
        Missing: ``limits`` for a client without a rate limiter.
    """
    cls = ADAPTERS.get(name)
    if cls is None:
        raise ValueError(f"unknown client {name!r}; known: {', '.join(ADAPTERS)}")
    if limits and not cls.limitable:
        raise Missing(f"{name} has no rate limiter to configure")
    return cls(root, work, limits)
