"""The gateway's aiohttp application: a route table, one small handler per endpoint.

:func:`create_app` builds it from a :class:`~polythink.serve.config.GatewayConfig`; the
route table (:data:`ENDPOINTS`) is the whole surface. Middleware is for cross-cutting edges
only, outermost first: the caller's own (``middlewares=``), then the gateway's: the edge (an
access line per request: method, path, status, milliseconds, never a query string or header;
the request's metrics; anything unexpected answered with a 500 in the front door's error
shape and logged, no traceback reaching a client), CORS (only with ``cors_origins``), and the
key check (only with ``[[tenant]]`` keys: a missing or unknown key is the front door's 401).

Open without a key: ``GET /health`` (the process answers), ``GET /health/ready`` (the
configuration is loaded, the Redis servers of ``limits`` and ``cache`` answer a PING and
every configured source's host accepts a TCP connection; 503 naming what failed
otherwise), ``GET /metrics`` (Prometheus; see :mod:`polythink.serve.metrics`) and Claude
Code's ``HEAD /api/hello``.

Limits: a request body above ``max_body_bytes`` is answered 413 in the door's shape, one
that takes longer than ``body_timeout`` to arrive 408; a request line or header field above
``max_header_bytes``, or more than 128 header fields, is answered 431 before any door, and
any other request aiohttp's parser cannot read 400, both in JSON quoting none of the request
(:func:`runner_for`); a connection without a whole request for ``idle_timeout``
seconds is closed, and a client that reads nothing for ``write_timeout`` dropped.

The caller's credential headers are never forwarded, logged or echoed in an error; every
log line of ``polythink serve`` goes through :class:`Redacting`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import math
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong

from polythink.errors import BudgetExceededError, InvalidInputError, PolythinkError, redact
from polythink.providers import get_provider
from polythink.serve.chat import ChatDoor
from polythink.serve.config import GatewayConfig, ServeSettings, load_config
from polythink.serve.exchange import (
    Call,
    DoorError,
    Exchange,
    Observer,
    classify,
    forwarded_headers,
    json_body,
)
from polythink.serve.messages import MessagesDoor
from polythink.serve.metrics import Exposition, GatewayMetrics, fleet_text, worker_socket
from polythink.serve.models import model_entry, model_page
from polythink.serve.responses import ResponsesDoor
from polythink.serve.routing import Route, Router
from polythink.serve.tenancy import (
    KeyRing,
    Tenant,
    TenantLimited,
    TenantLimits,
    presented_key,
)
from polythink.serve.translate import body_key

if TYPE_CHECKING:
    from polythink.transports.anthropic import AnthropicTransport

__all__ = [
    "ENDPOINTS",
    "GATEWAY",
    "OPEN_PATHS",
    "Gateway",
    "Redacting",
    "create_app",
    "is_loopback",
    "run",
    "runner_for",
]

_log = logging.getLogger("polythink.serve")

Door = ChatDoor | ResponsesDoor | MessagesDoor


TENANT = web.RequestKey("polythink_tenant", Tenant)
"""The tenant whose key a request presented (absent without keys)."""
ROUTE = web.RequestKey("polythink_route", str)
"""The route a request's call took, once known."""
ADDED = web.RequestKey("polythink_added", float)
"""Seconds the gateway added to the request's call, once it ran."""


class Gateway:
    """What the handlers share: the configuration, the route table, the doors, the keys,
    the tenants' limits and the metrics.

    Args:
        config: what to serve.
        meter_provider: where the metrics go (``None``: a Prometheus exposition of this
            process when ``[serve] metrics`` is on, else none).
        fleet: the fleet's directory and this worker's slot, when it is one of several
            (:mod:`polythink.serve.fleet`): ``/metrics`` then answers for all of them.
    """

    def __init__(
        self,
        config: GatewayConfig,
        *,
        meter_provider: Any = None,
        fleet: tuple[str, int] | None = None,
    ) -> None:
        self.config = config
        self.exposition: Exposition | None = None
        if meter_provider is None and config.settings.metrics:
            self.exposition = Exposition()
            meter_provider = self.exposition.meter_provider
        self.metrics = GatewayMetrics(meter_provider) if meter_provider is not None else None
        options = dict(config.client_options)
        tenant_budgets = [b for tenant in config.tenants for b in tenant.budgets]
        if tenant_budgets:
            options["budgets"] = [*options.get("budgets", ()), *tenant_budgets]
        if meter_provider is not None:
            options["meter_provider"] = meter_provider
        self.router = Router(dataclasses.replace(config, client_options=options), layers=Observer)
        self.keys = KeyRing(config.tenants)
        self.tenant_budgets = frozenset(b.label for b in tenant_budgets)
        self.tenant_limits: TenantLimits | None = None
        self.fleet = fleet
        self.chat = ChatDoor()
        self.responses = ResponsesDoor()
        self.messages = MessagesDoor()
        self.started = time.time()
        self._counters: dict[int, AnthropicTransport] = {}
        self._own_metrics: web.AppRunner | None = None
        self.streams: set[Exchange] = set()
        """The streams under way (ended with an error event when the drain time is over)."""

    async def start(self, app: web.Application) -> None:
        """Build the routes (in the server's event loop), and serve this worker's own
        metrics on its socket when it is one of a fleet."""
        self.router.start()
        self.tenant_limits = TenantLimits(self.router.limits)
        if self.fleet is not None and self.exposition is not None:
            directory, slot = self.fleet
            path = worker_socket(directory, slot)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            own = web.Application()
            own.router.add_get("/metrics", self._own_text)
            self._own_metrics = web.AppRunner(own, access_log=None)
            await self._own_metrics.setup()
            await web.UnixSite(self._own_metrics, str(path)).start()

    async def stopping(self, app: web.Application) -> None:
        """The server stops accepting: streams under way get most of ``drain_timeout`` to
        end, then each still open ends with an error event in its format (before aiohttp
        closes the connections at ``drain_timeout``)."""
        drain = self.config.settings.drain_timeout
        delay = max(drain * 0.8, drain - 1.0)
        asyncio.get_running_loop().call_later(delay, self._cut_streams)

    def _cut_streams(self) -> None:
        for exchange in list(self.streams):
            exchange.cut()

    async def _own_text(self, request: web.Request) -> web.StreamResponse:
        assert self.exposition is not None
        return web.Response(body=self.exposition.text(), content_type="text/plain")

    async def metrics_text(self) -> bytes | None:
        """The metrics ``/metrics`` serves: this process's, or the whole fleet's (``None``:
        metrics are off)."""
        if self.exposition is None:
            return None
        own = self.exposition.text()
        if self.fleet is None:
            return own
        directory, slot = self.fleet
        return await fleet_text(directory, slot, own)

    async def aclose(self, app: web.Application) -> None:
        """Close every route's client, and the metrics."""
        if self._own_metrics is not None:
            await self._own_metrics.cleanup()
        await self.router.aclose()
        if self.exposition is not None:
            self.exposition.shutdown()

    def counter(self, route: Route) -> AnthropicTransport:
        """The Anthropic transport that counts tokens for ``route``'s first source (built
        once per route, on the routes' HTTP client)."""
        from polythink.transports.anthropic import AnthropicTransport

        transport = self._counters.get(id(route))
        if transport is None:
            source = route.sources[0]
            transport = self._counters[id(route)] = AnthropicTransport(
                source=source,
                index=0,
                profile=get_provider(source.provider),
                client=self.router.http,
                api_key=source.resolve_api_key(),
            )
        return transport

    def door_of(self, path: str) -> Door:
        """The front door whose error shape a path's answers use."""
        if path.startswith("/v1/messages"):
            return self.messages
        if path.startswith("/v1/responses"):
            return self.responses
        return self.chat

    def route(self, model: Any, tenant: Tenant | None = None) -> Route:
        """The route of a request's ``model``, for ``tenant``.

        Raises:
            DoorError: no model, one that routes nowhere (404, listing what does), or one
                the tenant may not call (403).
        """
        if not isinstance(model, str) or not model.strip():
            raise DoorError("model: Field required (a string)", param="model")
        try:
            route = self.router.find(model)
        except ValueError as exc:
            raise DoorError(f"model {model!r}: {exc}", param="model") from None
        if (
            route is not None
            and tenant is not None
            and not (tenant.may_call(model) or tenant.may_call(route.name))
        ):
            raise DoorError(
                f"model {model!r} is not one this key may call",
                status=403,
                kind="permission",
                param="model",
            )
        if route is None:
            known = ", ".join(self.names(tenant)[:20]) or "none configured"
            raise DoorError(
                f"model {model!r} is not routed by this gateway; routed: {known}, or "
                "provider/model-id for a provider polythink knows",
                status=404,
                kind="not_found",
                param="model",
            )
        return route

    def names(self, tenant: Tenant | None) -> list[str]:
        """The routed model ids ``tenant`` may call (every one without keys)."""
        names = self.router.names()
        return names if tenant is None else [n for n in names if tenant.may_call(n)]

    def budget_refusal(self, error: PolythinkError, tenant: Tenant | None) -> DoorError | None:
        """The answer when ``error`` is the tenant's own budget refusing: 429 with
        ``retry-after`` (the seconds until its window resets) and ``x-should-retry: false``,
        so the SDKs do not send it again before then; ``None`` for any other error."""
        if (
            tenant is None
            or not isinstance(error, BudgetExceededError)
            or error.budget not in self.tenant_budgets
        ):
            return None
        wait = max(0.0, error.retry_after or 0.0)
        return DoorError(
            f"tenant {tenant.name!r} has spent its budget {error.budget!r} "
            f"(${error.limit:g} per {error.window}); it resets in {math.ceil(wait)} s",
            status=429,
            kind="rate_limit",
            headers={
                "retry-after": str(math.ceil(wait)),
                "retry-after-ms": str(round(wait * 1000)),
                "x-should-retry": "false",
            },
        )


GATEWAY = web.AppKey("gateway", Gateway)


def _error(door: Door, error: DoorError, headers: Mapping[str, str] | None = None) -> web.Response:
    status = door.error_status(error.status, error.kind)
    return web.Response(
        status=status,
        body=orjson.dumps(door.error_body(status, error.kind, error.message, error.param)),
        headers={**(headers or {}), **(error.headers or {}), "content-type": "application/json"},
    )


def _caller_secrets(request: web.Request) -> tuple[str, ...]:
    found = []
    for name in ("authorization", "x-api-key", "api-key"):
        value = request.headers.get(name)
        if value:
            found.append(value.split(" ", 1)[-1] if name == "authorization" else value)
    return tuple(found)


async def _body(request: web.Request) -> tuple[Mapping[str, Any], bytes]:
    limit = request.app[GATEWAY].config.settings.body_timeout
    try:
        async with asyncio.timeout(limit):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise DoorError(
            f"the request body is larger than this gateway's limit ({exc.text or 'too large'})",
            status=413,
            kind="too_large",
        ) from None
    except TimeoutError:
        raise DoorError(f"the request body did not arrive within {limit:g} s", status=408) from None
    return json_body(raw), raw


def _article(word: str) -> str:
    """``an`` before a vowel (``an anthropic source``), else ``a``."""
    return "an" if word[:1] in "aeiou" else "a"


def _headers(request: web.Request) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


async def _call(request: web.Request, door: Door) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    tenant = request.get(TENANT)
    try:
        body, raw = await _body(request)
        route = gateway.route(body.get("model"), tenant)
        request[ROUTE] = route.name
        call: Call = door.parse(body, _headers(request), route.client.request, body_key(raw))
        if call.only_native and route.wires != {door.wire}:
            raise DoorError(
                f"{'; '.join(call.only_native)}: only {_article(door.wire)} {door.wire} source can "
                f"serve this, and "
                f"route {route.name!r} has sources of another wire",
            )
        if tenant is not None:
            call.request = call.request.with_(tag=tenant.name, cache_namespace=tenant.name)
        settings = gateway.config.settings
        exchange = Exchange(
            door,
            call,
            route,
            request,
            keepalive=settings.keepalive,
            caller_secrets=_caller_secrets(request),
            write_timeout=settings.write_timeout,
        )
        return await _run(gateway, exchange, tenant)
    except DoorError as exc:
        return _error(door, exc)
    except InvalidInputError as exc:
        # What a door read and polythink's types then refused (the doors name the field
        # where they can): the caller's input, answered 400 like any other.
        return _error(door, DoorError(str(exc)))


async def _run(gateway: Gateway, exchange: Exchange, tenant: Tenant | None) -> web.StreamResponse:
    """Run ``exchange`` within its tenant's limits, and answer its budget's refusal as the
    tenant's own 429."""
    from polythink.middleware.ratelimit import estimate_tokens

    admission = None
    if tenant is not None and tenant.limited:
        assert gateway.tenant_limits is not None
        try:
            admission = await gateway.tenant_limits.admit(tenant, estimate_tokens(exchange.request))
        except TenantLimited as exc:
            wait = max(exc.retry_after, 0.001)
            raise DoorError(
                exc.message,
                status=429,
                kind="rate_limit",
                headers={
                    "retry-after": str(math.ceil(wait)),
                    "retry-after-ms": str(round(wait * 1000)),
                },
            ) from None
    try:
        exchange.on_error = lambda error: gateway.budget_refusal(error, tenant)
        if not exchange.request.stream:
            return await exchange.complete()
        gateway.streams.add(exchange)
        return await exchange.stream()
    finally:
        gateway.streams.discard(exchange)
        exchange.http_request[ADDED] = exchange.gateway_seconds()
        if admission is not None:
            usage = exchange.final.usage if exchange.final is not None else None
            used = (usage.input_tokens or 0) + (usage.output_tokens or 0) if usage else None
            assert gateway.tenant_limits is not None
            await gateway.tenant_limits.finish(admission, used)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    """``POST /v1/chat/completions``."""
    return await _call(request, request.app[GATEWAY].chat)


async def responses(request: web.Request) -> web.StreamResponse:
    """``POST /v1/responses``."""
    return await _call(request, request.app[GATEWAY].responses)


async def messages(request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages``."""
    return await _call(request, request.app[GATEWAY].messages)


async def responses_upgrade(request: web.Request) -> web.StreamResponse:
    """``GET /v1/responses``: Codex's WebSocket upgrade, answered 426 so that it falls back
    to HTTP at once (GATEWAY.md §2.4)."""
    error = DoorError(
        "this gateway serves the Responses API over HTTP (POST /v1/responses), not WebSocket",
        status=426,
    )
    return _error(request.app[GATEWAY].responses, error, {"upgrade": "HTTP/1.1"})


async def stored_response(request: web.Request) -> web.StreamResponse:
    """``GET /v1/responses/{id}``: nothing is stored (404)."""
    error = DoorError(
        "this gateway stores no responses (every request carries its whole input)",
        status=404,
        kind="not_found",
    )
    return _error(request.app[GATEWAY].responses, error)


async def count_tokens(request: web.Request) -> web.StreamResponse:
    """``POST /v1/messages/count_tokens``: the Anthropic source's own count when the route
    starts with one (the body as written), else polythink's estimate (about 4 characters a
    token); ``x-polythink-token-count`` says which (``provider`` or ``estimate``)."""
    gateway = request.app[GATEWAY]
    door = gateway.messages
    try:
        body, raw = await _body(request)
        route = gateway.route(body.get("model"), request.get(TENANT))
        request[ROUTE] = route.name
        call = door.parse(
            body, _headers(request), route.client.request, body_key(raw), counting=True
        )
        first = route.sources[0]
        if call.native and get_provider(first.provider).wire == door.wire:
            return await _provider_count(gateway, route, call, request)
        from polythink.middleware.ratelimit import estimate_prompt_tokens

        tokens = estimate_prompt_tokens(call.request)
        return web.json_response(
            {"input_tokens": tokens},
            headers={"x-polythink-token-count": "estimate", "x-polythink-route": route.name},
        )
    except DoorError as exc:
        return _error(door, exc)


class _Captured:
    """The relay of a count: keeps the provider's error body."""

    committed = False

    def __init__(self) -> None:
        self.failure: tuple[int, Mapping[str, str], bytes] | None = None

    def noted(self, source_index: int, notes: Sequence[str]) -> None:
        """Not used by a count."""

    def opened(self, source_index: int, status: int, headers: Mapping[str, str]) -> None:
        """Not used by a count."""

    async def event(self, event_type: str, data: str) -> None:
        """Not used by a count."""

    def answered(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """Not needed: the answer is returned."""

    def failed(
        self, source_index: int, status: int, headers: Mapping[str, str], content: bytes
    ) -> None:
        """Keep the error body."""
        self.failure = (status, headers, content)


async def _provider_count(
    gateway: Gateway, route: Route, call: Call, request: web.Request
) -> web.StreamResponse:
    source = route.sources[0]
    transport = gateway.counter(route)
    captured = _Captured()
    native = call.request.native
    assert native is not None
    sent = call.request.with_(native=dataclasses.replace(native, relay=captured))
    body = {**call.body, "model": source.model}
    try:
        data = await transport.post_json(f"{transport.url}/count_tokens", body, sent)
    except PolythinkError as exc:
        if captured.failure is not None and captured.failure[0] == exc.status_code:
            status, headers, content = captured.failure
            return web.Response(
                status=status,
                body=content,
                headers={**forwarded_headers(headers), "content-type": "application/json"},
            )
        status, kind = classify(exc)
        return _error(gateway.messages, DoorError(exc.message, status=status, kind=kind))
    return web.json_response(
        data, headers={"x-polythink-token-count": "provider", "x-polythink-route": route.name}
    )


async def list_models(request: web.Request) -> web.StreamResponse:
    """``GET /v1/models``: see :mod:`polythink.serve.models`."""
    gateway = request.app[GATEWAY]
    page = model_page(
        gateway.names(request.get(TENANT)),
        created=gateway.started,
        codex="client_version" in request.query,
    )
    return web.json_response(page)


async def get_model(request: web.Request) -> web.StreamResponse:
    """``GET /v1/models/{id}``: one entry, for any id that routes."""
    gateway = request.app[GATEWAY]
    name = request.match_info["model"]
    door = gateway.messages if "anthropic-version" in request.headers else gateway.chat
    try:
        gateway.route(name, request.get(TENANT))
    except DoorError as exc:
        return _error(door, exc)
    return web.json_response(model_entry(name, gateway.started))


async def hello(request: web.Request) -> web.StreamResponse:
    """``HEAD /api/hello``: Claude Code's warm-up probe."""
    return web.Response(status=200)


async def health(request: web.Request) -> web.StreamResponse:
    """``GET /health``: liveness; the process answers (no upstream or Redis is asked)."""
    return web.json_response({"status": "ok"})


async def ready(request: web.Request) -> web.StreamResponse:
    """``GET /health/ready``: readiness; 200 when every check passes, else 503, with each
    check's result (see :func:`readiness`)."""
    checks = await readiness(request.app[GATEWAY])
    ok = all(check["ok"] for check in checks.values())
    return web.json_response(
        {"status": "ready" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )


async def readiness(gateway: Gateway, timeout: float = 2.0) -> dict[str, dict[str, Any]]:
    """Each readiness check, by name: ``redis <url>`` (a PING to the ``limits`` and
    ``cache`` servers), ``upstream <host:port>`` (a TCP connection to each configured
    source's host); each ``{"ok": bool}`` with an ``error`` when it failed. No model is
    called and no credential is sent; URLs are shown without their password."""
    from polythink.backends.share import split_workers

    checks: dict[str, Awaitable[None]] = {}
    options = gateway.config.client_options
    for url in {options.get(name) for name in ("limits", "cache")}:
        if isinstance(url, str) and url.startswith(("redis://", "rediss://", "unix://")):
            plain = split_workers(url)[0]
            checks[f"redis {_shown(plain)}"] = _ping(plain, timeout)
    for host, port in sorted(_upstreams(gateway.config.sources)):
        checks[f"upstream {host}:{port}"] = _connect(host, port, timeout)
    names = list(checks)
    results = await asyncio.gather(*checks.values(), return_exceptions=True)
    return {
        name: {"ok": True}
        if result is None
        else {"ok": False, "error": redact(f"{type(result).__name__}: {result}")}
        for name, result in zip(names, results, strict=True)
    }


def _shown(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return url


def _upstreams(sources: Sequence[Any]) -> set[tuple[str, int]]:
    found = set()
    for source in sources:
        parts = urlsplit(source.endpoint)
        if parts.hostname:
            found.add((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)))
    return found


async def _ping(url: str, timeout: float) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        await client.ping()
    finally:
        await client.aclose()


async def _connect(host: str, port: int, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        _, writer = await asyncio.open_connection(host, port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


async def metrics(request: web.Request) -> web.StreamResponse:
    """``GET /metrics``: Prometheus's text format (404 when ``[serve] metrics`` is off)."""
    text = await request.app[GATEWAY].metrics_text()
    if text is None:
        raise web.HTTPNotFound(reason="metrics are off ([serve] metrics = false)")
    return web.Response(body=text, content_type="text/plain", charset="utf-8")


ENDPOINTS: tuple[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]], ...] = (
    ("POST", "/v1/chat/completions", chat_completions),
    ("POST", "/v1/responses", responses),
    ("GET", "/v1/responses", responses_upgrade),
    ("GET", "/v1/responses/{id}", stored_response),
    ("POST", "/v1/messages", messages),
    ("POST", "/v1/messages/count_tokens", count_tokens),
    ("GET", "/v1/models", list_models),
    ("GET", "/v1/models/{model:.+}", get_model),
    ("HEAD", "/api/hello", hello),
    ("GET", "/health", health),
    ("GET", "/health/ready", ready),
    ("GET", "/metrics", metrics),
)
"""The gateway's whole surface: method, path, handler."""

OPEN_PATHS = frozenset({"/health", "/health/ready", "/metrics", "/api/hello"})
"""The paths answered without a key."""

_UNCOUNTED = frozenset({"/health", "/health/ready", "/metrics"})


@web.middleware
async def _edges(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """An access line per request, its metrics, and anything unexpected answered in the
    door's shape."""
    started = time.monotonic()
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        door = request.app[GATEWAY].door_of(request.path)
        kind = "not_found" if exc.status == 404 else "invalid_request"
        message = f"{request.method} {request.path}: {exc.reason}"
        return web.Response(
            status=exc.status,
            body=orjson.dumps(door.error_body(exc.status, kind, message, None)),
            headers={**exc.headers, "content-type": "application/json"},
        )
    except Exception:
        _log.exception("%s %s failed", request.method, request.path)
        door = request.app[GATEWAY].door_of(request.path)
        body = door.error_body(500, "api_error", "the gateway failed on this request", None)
        return web.Response(
            status=500, body=orjson.dumps(body), headers={"content-type": "application/json"}
        )
    finally:
        seconds = time.monotonic() - started
        tenant = request.get(TENANT)
        resource = request.match_info.route.resource
        # After the answer is written (the handler's task writes it before it yields): the
        # access line and the metrics are not on the caller's clock.
        asyncio.get_running_loop().call_soon(
            _account,
            request.app[GATEWAY].metrics if request.path not in _UNCOUNTED else None,
            request.method,
            request.path,
            resource.canonical if resource is not None else "unmatched",
            status,
            request.get(ROUTE),
            tenant.name if tenant is not None else None,
            seconds,
            request.get(ADDED),
        )


def _account(
    gauges: GatewayMetrics | None,
    method: str,
    path: str,
    endpoint: str,
    status: int,
    route: str | None,
    tenant: str | None,
    seconds: float,
    added: float | None,
) -> None:
    """One answer's access line and metrics."""
    _log.info(
        "%s %s %d %.1f ms%s",
        method,
        path,
        status,
        seconds * 1000,
        f" tenant={tenant}" if tenant is not None else "",
    )
    if gauges is not None:
        gauges.record(
            method=method,
            endpoint=endpoint,
            status=status,
            route=route,
            tenant=tenant,
            seconds=seconds,
            added=added,
        )


@web.middleware
async def _keys(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """The tenant of the request's key; a missing or unknown key is the door's 401."""
    gateway = request.app[GATEWAY]
    if request.path in OPEN_PATHS or request.method == "OPTIONS":
        return await handler(request)
    key = presented_key(request.headers)
    tenant = gateway.keys.find(key) if key else None
    if tenant is None:
        door: Door = gateway.door_of(request.path)
        if request.path.startswith("/v1/models") and "anthropic-version" in request.headers:
            door = gateway.messages
        message = (
            "no API key: send this gateway's key as Authorization: Bearer <key> or x-api-key"
            if key is None
            else "the API key is not one of this gateway's"
        )
        return _error(door, DoorError(message, status=401, kind="authentication"))
    request[TENANT] = tenant
    return await handler(request)


_EXPOSED = (
    "x-polythink-route, x-polythink-source, x-polythink-requested-effort, "
    "x-polythink-applied-effort, x-polythink-reasoning, x-polythink-cost-usd, x-polythink-cache, "
    "x-polythink-gateway-ms, x-polythink-request-id, x-polythink-warnings, request-id, "
    "x-request-id, retry-after"
)


def _cors(origins: tuple[str, ...]) -> Any:
    """The CORS middleware for ``origins`` (``"*"``: any)."""
    anyone = "*" in origins

    @web.middleware
    async def cors(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        origin = request.headers.get("origin")
        allowed = origin is not None and (anyone or origin in origins)
        if request.method == "OPTIONS" and "access-control-request-method" in request.headers:
            if not allowed:
                raise web.HTTPForbidden(reason="origin not allowed")
            assert origin is not None
            return web.Response(
                status=204,
                headers={
                    "access-control-allow-origin": origin,
                    "access-control-allow-methods": "GET, POST, HEAD, OPTIONS",
                    "access-control-allow-headers": request.headers.get(
                        "access-control-request-headers", "authorization, content-type"
                    ),
                    "access-control-max-age": "600",
                    "vary": "origin",
                },
            )
        response = await handler(request)
        if allowed:
            assert origin is not None
            response.headers["access-control-allow-origin"] = origin
            response.headers["access-control-expose-headers"] = _EXPOSED
            response.headers["vary"] = "origin"
        return response

    return cors


class Redacting(logging.Filter):
    """A log filter that writes each record's message with every secret replaced
    (:func:`polythink.errors.redact`: the given ones, ``Bearer …`` values and anything
    shaped like a provider key)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; keep it."""
        message = record.getMessage()
        cleaned = redact(message, self.secrets)
        if record.exc_info and record.exc_info[1] is not None:
            import traceback

            shown = "".join(traceback.format_exception(*record.exc_info))
            cleaned += "\n" + redact(shown, self.secrets)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = cleaned, None
        return True


def create_app(
    config: GatewayConfig,
    *,
    middlewares: Iterable[Any] = (),
    meter_provider: Any = None,
    fleet: tuple[str, int] | None = None,
) -> web.Application:
    """Build the gateway's application (started and stopped by aiohttp's runner).

    Args:
        config: what to serve (:func:`polythink.serve.config.load_config`).
        middlewares: aiohttp middlewares of the caller's own, outermost first, around the
            gateway's (the edge, CORS, the key check).
        meter_provider: where the gateway's and the calls' metrics go (``None``: this
            process's Prometheus exposition, served at ``/metrics``, when ``[serve]
            metrics`` is on).
        fleet: the fleet's directory and this worker's slot (:mod:`polythink.serve.fleet`).

    The :class:`Gateway` is ``app[GATEWAY]``; its routes are built on startup.

    Raises:
        ImportError: metrics on without the ``otel`` extra.
    """
    settings = config.settings
    own = [_edges]
    if settings.cors_origins:
        own.append(_cors(settings.cors_origins))
    if config.tenants:
        own.append(_keys)
    app = web.Application(
        middlewares=[*middlewares, *own],
        client_max_size=settings.max_body_bytes,
        handler_args={
            "max_line_size": settings.max_header_bytes,
            "max_field_size": settings.max_header_bytes,
        },
    )
    gateway = Gateway(config, meter_provider=meter_provider, fleet=fleet)
    app[GATEWAY] = gateway
    app.on_startup.append(gateway.start)
    app.on_shutdown.append(gateway.stopping)
    app.on_cleanup.append(gateway.aclose)
    for method, path, handler in ENDPOINTS:
        app.router.add_route(method, path, handler)
    return app


def _refusal(status: int, exc: BaseException | None, limit: int) -> tuple[int, str, str]:
    """The status, error code and message of a request aiohttp's server refused before the
    application saw it (``exc``: what its parser raised): none of the request's bytes."""
    if isinstance(exc, LineTooLong) or (
        isinstance(exc, BadHttpMessage) and exc.message.startswith("Too many headers")
    ):
        return (
            431,
            "request_header_fields_too_large",
            f"the request line or its headers are too large: at most {limit} bytes a line "
            f"or field ([serve] max_header_bytes) and {_MAX_HEADERS} header fields",
        )
    if isinstance(exc, BadHttpMessage):
        return 400, "malformed_request", "the request is not well-formed HTTP/1.1"
    if status == 504:
        return 504, "timeout", "the gateway timed out on this request"
    return status, "server_error", "the gateway failed on this request"


_MAX_HEADERS = 128
"""aiohttp's cap on a request's header fields (``max_headers``' default)."""


class _Connection(web.RequestHandler):
    """aiohttp's connection protocol, answering what its server refuses itself (a request
    its parser cannot read, a handler that escaped every middleware) without echoing any
    byte of the request: aiohttp's own answer quotes the offending line, which can be a
    caller's ``Authorization`` header.

    The answer is JSON both SDKs read, as the door is unknown (the request line may be what
    failed): ``{"type": "error", "error": {"type", "message", "param", "code"}}``, Anthropic's
    shape with OpenAI's fields inside.
    """

    __slots__ = ("_header_limit",)

    def __init__(self, manager: web.Server, *, header_limit: int, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_limit = header_limit

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The JSON error answering a refused request; the connection is closed after it.

        Raises:
            ConnectionError: part of an answer was already sent.
        """
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already begun on this connection")
        status, code, text = _refusal(status, exc, self._header_limit)
        what = type(exc).__name__ if exc is not None else "no exception"
        if status >= 500 and not isinstance(exc, HttpProcessingError):
            _log.error(
                "request from %s failed outside the gateway's handlers: %s", request.remote, what
            )
        else:
            _log.warning(
                "refused a request from %s: %s (%d %s)", request.remote, what, status, code
            )
        kind = "invalid_request_error" if status < 500 else "api_error"
        body = {
            "type": "error",
            "error": {"type": kind, "message": text, "param": None, "code": code},
        }
        answer = web.Response(
            status=status, body=orjson.dumps(body), content_type="application/json"
        )
        answer.force_close()
        return answer


class _Server(web.Server):
    """aiohttp's low-level server, with :class:`_Connection` as its protocol."""

    def __init__(
        self,
        handler: Any,
        *,
        request_factory: Any,
        handler_cancellation: bool,
        protocol: Mapping[str, Any],
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(
            handler,
            request_factory=request_factory,
            handler_cancellation=handler_cancellation,
            loop=loop,
            **protocol,
        )
        self._protocol = {**protocol, "loop": loop}

    def __call__(self) -> web.RequestHandler:
        return _Connection(self, **self._protocol)


class _Runner(web.AppRunner):
    """aiohttp's application runner serving through :class:`_Server`."""

    def __init__(
        self,
        app: web.Application,
        *,
        shutdown_timeout: float,
        protocol: Mapping[str, Any],
        header_limit: int,
    ) -> None:
        super().__init__(app, shutdown_timeout=shutdown_timeout, **protocol)
        self._protocol = {**protocol, "header_limit": header_limit}

    async def _make_server(self) -> web.Server:
        # The runner's own hook (BaseRunner's abstract method): the application is started
        # as aiohttp starts it, and served by a server whose protocol is the gateway's.
        made = await super()._make_server()
        return _Server(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            protocol=self._protocol,
        )


def runner_for(app: web.Application, settings: ServeSettings) -> web.AppRunner:
    """The runner of ``app``: connections idle past ``idle_timeout`` closed, calls in
    flight given ``drain_timeout`` on shutdown; a request aiohttp's parser refuses (a line
    or header field above ``max_header_bytes``, more than 128 header fields: 431; anything
    else malformed: 400) answered in JSON without any byte of the request."""
    return _Runner(
        app,
        shutdown_timeout=settings.drain_timeout,
        protocol={
            "access_log": None,
            "keepalive_timeout": settings.idle_timeout,
            "max_line_size": settings.max_header_bytes,
            "max_field_size": settings.max_header_bytes,
        },
        header_limit=settings.max_header_bytes,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_host(config: GatewayConfig, host: str | None) -> tuple[str, str | None]:
    """The address to listen on, and the notice to print: without keys, loopback only
    (``host`` given elsewhere is replaced by ``127.0.0.1``)."""
    wanted = host or config.settings.host
    if config.tenants:
        return wanted, None
    if is_loopback(wanted):
        return (
            wanted,
            "no [[tenant]] keys are configured: every caller that reaches this address may "
            "call with the sources' keys; listening on loopback only",
        )
    return (
        "127.0.0.1",
        f"no [[tenant]] keys are configured, so the gateway listens on 127.0.0.1 only, not "
        f"{wanted} (add [[tenant]] keys to serve other hosts)",
    )


def install_redaction(config: GatewayConfig) -> Redacting:
    """Put a :class:`Redacting` filter, with every source's credentials, on each handler of
    the root logger (every log line of the process goes through one)."""
    secrets = [secret for source in config.sources for secret in source.secrets()]
    found = Redacting(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(found)
    return found


def run(
    config: str | Path | None,
    *,
    host: str | None,
    port: int | None,
    workers: int | None = None,
) -> int:
    """Serve until SIGINT or SIGTERM (``polythink serve``); return the exit code.

    With more than one worker (``workers``, else ``[serve] workers``) the fleet runs under
    gunicorn (:func:`polythink.serve.fleet.run_fleet`).

    Raises:
        ValueError: a configuration the gateway refuses.
        FileNotFoundError: no file at ``config``.
        OSError: the address cannot be bound.
        ImportError: more than one worker without gunicorn, or metrics without the
            ``otel`` extra.
    """
    loaded = load_config(config)
    host, notice = bind_host(loaded, host)
    port = loaded.settings.port if port is None else port
    count = workers or loaded.settings.workers
    install_redaction(loaded)
    if notice:
        print(f"polythink serve: {notice}", flush=True)
    if count > 1:
        from polythink.serve.fleet import run_fleet

        return run_fleet(config, host=host, port=port, workers=count)

    async def serve() -> None:
        runner = runner_for(create_app(loaded), loaded.settings)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or ()
            bound = sockets[0].getsockname()[1] if sockets else port
            root = f"http://{host}:{bound}"
            print(
                f"polythink serve listening on {root}: OpenAI base URL {root}/v1, Anthropic "
                f"base URL {root} (Ctrl-C stops)",
                flush=True,
            )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError):
                    loop.add_signal_handler(signum, stop.set)
            await stop.wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0
