"""The gateway's aiohttp application: a route table, one small handler per endpoint.

:func:`create_app` builds it from a :class:`~polythink.serve.config.GatewayConfig`; the
route table (:data:`ENDPOINTS`) is the whole surface. Middleware is for cross-cutting edges
only: :func:`create_app` takes the caller's own (``middlewares=``, outermost first: where
authentication goes), then the gateway's: an access line per request (method, path, status,
milliseconds: never a query string or header), and the error edge, which answers anything
unexpected with a 500 in the front door's error shape and logs it (no traceback reaches a
client).

Limits: a request body above ``max_body_bytes`` is answered 413 in the door's shape; a
request line or header field above ``max_header_bytes`` is answered 400 by aiohttp's parser,
before any door (aiohttp caps a request at 128 header fields).

No endpoint checks the caller's key: keep the gateway on loopback, or behind a proxy that
authenticates, until a key check is added as middleware. The caller's credential headers are
never forwarded, logged or echoed in an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from polythink.errors import PolythinkError
from polythink.providers import get_provider
from polythink.serve.chat import ChatDoor
from polythink.serve.config import GatewayConfig, load_config
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
from polythink.serve.models import model_entry, model_page
from polythink.serve.responses import ResponsesDoor
from polythink.serve.routing import Route, Router
from polythink.serve.translate import body_key

if TYPE_CHECKING:
    from polythink.transports.anthropic import AnthropicTransport

__all__ = ["ENDPOINTS", "GATEWAY", "Gateway", "create_app", "run"]

_log = logging.getLogger("polythink.serve")

Door = ChatDoor | ResponsesDoor | MessagesDoor


class Gateway:
    """What the handlers share: the configuration, the route table, the doors."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.router = Router(config, layers=Observer)
        self.chat = ChatDoor()
        self.responses = ResponsesDoor()
        self.messages = MessagesDoor()
        self.started = time.time()
        self._counters: dict[int, AnthropicTransport] = {}

    async def start(self, app: web.Application) -> None:
        """Build the routes (in the server's event loop)."""
        self.router.start()

    async def aclose(self, app: web.Application) -> None:
        """Close every route's client."""
        await self.router.aclose()

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

    def route(self, model: Any) -> Route:
        """The route of a request's ``model``.

        Raises:
            DoorError: no model, or one that routes nowhere (404, listing what does).
        """
        if not isinstance(model, str) or not model.strip():
            raise DoorError("model: Field required (a string)", param="model")
        try:
            route = self.router.find(model)
        except ValueError as exc:
            raise DoorError(f"model {model!r}: {exc}", param="model") from None
        if route is None:
            known = ", ".join(self.router.names()[:20]) or "none configured"
            raise DoorError(
                f"model {model!r} is not routed by this gateway; routed: {known}, or "
                "provider/model-id for a provider polythink knows",
                status=404,
                kind="not_found",
                param="model",
            )
        return route


GATEWAY = web.AppKey("gateway", Gateway)


def _error(door: Door, error: DoorError, headers: Mapping[str, str] | None = None) -> web.Response:
    status = door.error_status(error.status, error.kind)
    return web.Response(
        status=status,
        body=orjson.dumps(door.error_body(status, error.kind, error.message, error.param)),
        headers={**(headers or {}), "content-type": "application/json"},
    )


def _caller_secrets(request: web.Request) -> tuple[str, ...]:
    found = []
    for name in ("authorization", "x-api-key", "api-key"):
        value = request.headers.get(name)
        if value:
            found.append(value.split(" ", 1)[-1] if name == "authorization" else value)
    return tuple(found)


async def _body(request: web.Request) -> tuple[Mapping[str, Any], bytes]:
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise DoorError(
            f"the request body is larger than this gateway's limit ({exc.text or 'too large'})",
            status=413,
            kind="too_large",
        ) from None
    return json_body(raw), raw


def _headers(request: web.Request) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


async def _call(request: web.Request, door: Door) -> web.StreamResponse:
    gateway = request.app[GATEWAY]
    try:
        body, raw = await _body(request)
        route = gateway.route(body.get("model"))
        call: Call = door.parse(body, _headers(request), route.client.request, body_key(raw))
        if call.only_native and route.wires != {door.wire}:
            raise DoorError(
                f"{'; '.join(call.only_native)}: only a {door.wire} source can serve this, and "
                f"route {route.name!r} has sources of another wire",
            )
        exchange = Exchange(
            door,
            call,
            route,
            request,
            keepalive=gateway.config.settings.keepalive,
            caller_secrets=_caller_secrets(request),
        )
        if call.request.stream:
            return await exchange.stream()
        return await exchange.complete()
    except DoorError as exc:
        return _error(door, exc)


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
        route = gateway.route(body.get("model"))
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
        gateway.router.names(),
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
        gateway.route(name)
    except DoorError as exc:
        return _error(door, exc)
    return web.json_response(model_entry(name, gateway.started))


async def hello(request: web.Request) -> web.StreamResponse:
    """``HEAD /api/hello``: Claude Code's warm-up probe."""
    return web.Response(status=200)


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
)
"""The gateway's whole surface: method, path, handler."""


@web.middleware
async def _edges(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """An access line per request, and anything unexpected answered in the door's shape."""
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
            headers={"content-type": "application/json"},
        )
    except Exception:
        _log.exception("%s %s failed", request.method, request.path)
        door = request.app[GATEWAY].door_of(request.path)
        body = door.error_body(500, "api_error", "the gateway failed on this request", None)
        return web.Response(
            status=500, body=orjson.dumps(body), headers={"content-type": "application/json"}
        )
    finally:
        _log.info(
            "%s %s %d %.1f ms",
            request.method,
            request.path,
            status,
            (time.monotonic() - started) * 1000,
        )


def create_app(config: GatewayConfig, *, middlewares: Iterable[Any] = ()) -> web.Application:
    """Build the gateway's application (started and stopped by aiohttp's runner).

    Args:
        config: what to serve (:func:`polythink.serve.config.load_config`).
        middlewares: aiohttp middlewares of the caller's own, outermost first, around the
            gateway's (authentication, tenancy).

    The :class:`Gateway` is ``app[GATEWAY]``; its routes are built on startup.
    """
    settings = config.settings
    app = web.Application(
        middlewares=[*middlewares, _edges],
        client_max_size=settings.max_body_bytes,
        handler_args={
            "max_line_size": settings.max_header_bytes,
            "max_field_size": settings.max_header_bytes,
        },
    )
    gateway = Gateway(config)
    app[GATEWAY] = gateway
    app.on_startup.append(gateway.start)
    app.on_cleanup.append(gateway.aclose)
    for method, path, handler in ENDPOINTS:
        app.router.add_route(method, path, handler)
    return app


def run(config: str | Path | None, *, host: str | None, port: int | None) -> int:
    """Serve until SIGINT or SIGTERM (``polythink serve``); return the exit code.

    Raises:
        ValueError: a configuration the gateway refuses.
        FileNotFoundError: no file at ``config``.
        OSError: the address cannot be bound.
    """
    loaded = load_config(config)
    host = host or loaded.settings.host
    port = loaded.settings.port if port is None else port

    async def serve() -> None:
        runner = web.AppRunner(create_app(loaded), access_log=None)
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
