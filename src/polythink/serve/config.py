"""What ``polythink serve`` reads: the client's TOML file, plus routes and the server's own
settings.

The file is the one :meth:`polythink.Client.from_toml` reads (``[[source]]``, ``[thinking]``,
``limits``, ``cache``, ``[[budget]]``; see :mod:`polythink.config`), with two more tables::

    [serve]
    host = "127.0.0.1"        # --host wins; without [[tenant]] keys, loopback only
    port = 4000               # --port wins
    workers = 1               # --workers wins: processes on one port (gunicorn)
    keepalive = 15            # seconds of upstream silence before a keep-alive frame
    max_body_bytes = 33554432 # a larger request body is answered 413
    max_header_bytes = 16384  # the longest request line or header field
    idle_timeout = 75         # seconds a connection may stay without a whole request
    body_timeout = 60         # seconds to receive a request's body
    write_timeout = 60        # seconds a client may take to read what was sent to it
    drain_timeout = 30        # seconds streams in flight get to finish on shutdown
    cors_origins = []         # browser origins allowed (none: no CORS headers at all)
    metrics = true            # GET /metrics for Prometheus

    [[route]]
    name = "claude-sonnet-4-6"                 # the model id clients send
    aliases = ["sonnet"]                       # more ids for the same route
    sources = ["anthropic/claude-sonnet-4-5", "deepseek/deepseek-v4"]   # tried in order

A route's source ``provider/model-id`` is the configured ``[[source]]`` of that provider and
model when there is one (its key, base URL, limits, effort), else the first configured
source of that provider with the model replaced, else the provider's defaults (its standard
key variable). Without a file, only ``provider/model-id`` names route (see
:mod:`polythink.serve.routing`). ``[[tenant]]`` tables give the gateway's own keys (see
:mod:`polythink.serve.tenancy`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polythink.config import Source, options_from_toml, read_toml, sources_from_toml, toml_tables
from polythink.errors import InvalidInputError
from polythink.providers import PROVIDERS
from polythink.serve.tenancy import Tenant, tenants_from_toml

__all__ = ["GatewayConfig", "RouteConfig", "ServeSettings", "load_config", "split_model"]

_MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """The server's own settings (the ``[serve]`` table).

    Attributes:
        host, port: where to listen (the command line's ``--host`` and ``--port`` win).
        keepalive: seconds without a byte to the client, on a stream, before the gateway
            sends a keep-alive frame (Claude Code aborts a stream silent for 300 s; Codex
            after its ``stream_idle_timeout_ms``, 300 s by default).
        max_body_bytes: the largest request body accepted; a larger one is answered 413 in
            the front door's error shape (32 MiB: Anthropic's own Messages limit).
        max_header_bytes: the longest request line or header field accepted (a longer one
            is answered 431 before any front door sees it).
        workers: processes serving one port (``--workers`` wins; more than one runs under
            gunicorn, see :mod:`polythink.serve.fleet`).
        idle_timeout: seconds a connection may stay open without a whole request: from
            when it opens, and from the end of its last answer (a client that sends its
            head a byte at a time is closed then).
        body_timeout: seconds to receive a request's body once its head arrived (408 after).
        write_timeout: seconds a write to a client may wait for it to read; a client that
            reads nothing for that long is dropped, and its upstream call ended.
        drain_timeout: seconds calls in flight, streams included, get to finish when the
            gateway stops (SIGTERM); then each open stream ends with an error event in its
            format.
        cors_origins: the browser origins answered with CORS headers (``"*"``: any); empty,
            the default: no CORS header at all, and a preflight is refused.
        metrics: whether ``GET /metrics`` serves the metrics for Prometheus (needs the
            ``otel`` extra).
    """

    host: str = "127.0.0.1"
    port: int = 4000
    keepalive: float = 15.0
    max_body_bytes: int = 32 * _MIB
    max_header_bytes: int = 16 * 1024
    workers: int = 1
    idle_timeout: float = 75.0
    body_timeout: float = 60.0
    write_timeout: float = 60.0
    drain_timeout: float = 30.0
    cors_origins: tuple[str, ...] = ()
    metrics: bool = True


@dataclass(frozen=True, slots=True)
class RouteConfig:
    """One ``[[route]]``: the model ids clients send, and the sources tried in order."""

    name: str
    sources: tuple[str, ...]
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything ``polythink serve`` runs from.

    Attributes:
        sources: the configured ``[[source]]`` tables, in order.
        routes: the ``[[route]]`` tables.
        client_options: the :class:`~polythink.Client` options of the file (``limits``,
            ``cache``, ``budgets``).
        settings: the ``[serve]`` table.
        tenants: the ``[[tenant]]`` tables: the gateway's keys (none: no key is checked,
            and the gateway listens on loopback only).
    """

    sources: tuple[Source, ...] = ()
    routes: tuple[RouteConfig, ...] = ()
    client_options: Mapping[str, Any] = field(default_factory=dict)
    settings: ServeSettings = field(default_factory=ServeSettings)
    tenants: tuple[Tenant, ...] = ()


def split_model(name: str) -> tuple[str, str] | None:
    """``(provider, model)`` of a ``provider/model-id`` name whose provider polythink knows
    (``openrouter/anthropic/claude-sonnet-4.5`` is OpenRouter's ``anthropic/claude-…``),
    else ``None``."""
    provider, slash, model = name.partition("/")
    if not slash or not model.strip() or provider not in PROVIDERS:
        return None
    return provider, model


def _number(value: Any, where: str, *, low: float, integer: bool = False) -> Any:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value):
        raise InvalidInputError(
            f"{where} must be a {'whole ' if integer else ''}number; got {value!r}"
        )
    if value < low:
        raise InvalidInputError(f"{where} must be at least {low:g}; got {value!r}")
    return value


def _settings(table: Any, where: str) -> ServeSettings:
    if table is None:
        return ServeSettings()
    if not isinstance(table, Mapping):
        raise InvalidInputError(f"{where} must be a table; got {table!r}")
    known = set(ServeSettings.__dataclass_fields__)
    unknown = sorted(set(table) - known)
    if unknown:
        raise InvalidInputError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
    values: dict[str, Any] = {}
    if "host" in table:
        if not isinstance(table["host"], str) or not table["host"].strip():
            raise InvalidInputError(f"{where} host must be an address such as 127.0.0.1")
        values["host"] = table["host"].strip()
    if "port" in table:
        port = _number(table["port"], f"{where} port", low=0, integer=True)
        if port > 65535:
            raise InvalidInputError(f"{where} port must be from 0 to 65535; got {port}")
        values["port"] = port
    for name in ("keepalive", "idle_timeout", "body_timeout", "write_timeout", "drain_timeout"):
        if name in table:
            values[name] = float(_number(table[name], f"{where} {name}", low=0.01))
    for name in ("max_body_bytes", "max_header_bytes"):
        if name in table:
            values[name] = _number(table[name], f"{where} {name}", low=1024, integer=True)
    if "workers" in table:
        values["workers"] = _number(table["workers"], f"{where} workers", low=1, integer=True)
    if "cors_origins" in table:
        values["cors_origins"] = _names(table["cors_origins"], f"{where} cors_origins")
    if "metrics" in table:
        if not isinstance(table["metrics"], bool):
            raise InvalidInputError(
                f"{where} metrics must be true or false; got {table['metrics']!r}"
            )
        values["metrics"] = table["metrics"]
    return ServeSettings(**values)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise InvalidInputError(f"{where} must be a list of strings; got {value!r}")
    names = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise InvalidInputError(f"{where} must hold non-empty strings; got {item!r}")
        names.append(item.strip())
    return tuple(names)


def _routes(tables: Any, where: str) -> tuple[RouteConfig, ...]:
    routes: list[RouteConfig] = []
    taken: dict[str, int] = {}
    for i, table in enumerate(toml_tables(tables, "route", where)):
        at = f"{where} [[route]] #{i}"
        unknown = sorted(set(table) - {"name", "aliases", "sources"})
        if unknown:
            raise InvalidInputError(f"{at}: unknown keys {unknown}; known: aliases, name, sources")
        name = table.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"{at}: a route needs a name, the model id clients send")
        sources = _names(table.get("sources", []), f"{at} sources")
        if not sources:
            raise InvalidInputError(f"{at}: a route needs at least one source")
        for entry in sources:
            if split_model(entry) is None:
                raise InvalidInputError(
                    f"{at}: source {entry!r} is not provider/model-id with a known provider "
                    f"(known: {', '.join(PROVIDERS)})"
                )
        aliases = _names(table.get("aliases", []), f"{at} aliases")
        for taken_name in (name.strip(), *aliases):
            if taken_name in taken:
                raise InvalidInputError(
                    f"{at}: {taken_name!r} already names route #{taken[taken_name]}; a model id "
                    "routes one way"
                )
            taken[taken_name] = i
        routes.append(RouteConfig(name=name.strip(), sources=sources, aliases=aliases))
    return tuple(routes)


def load_config(path: str | Path | None) -> GatewayConfig:
    """Read ``path`` (``None``: no file, the defaults) into a :class:`GatewayConfig`.

    Raises:
        ValueError: for a file that is not valid TOML, a bad source, budget, route, tenant
            or ``[serve]`` value (naming the table and the key).
        FileNotFoundError: no file at ``path``.
    """
    if path is None:
        return GatewayConfig()
    data = read_toml(path)
    sources = tuple(sources_from_toml(path)) if data.get("source") else ()
    return GatewayConfig(
        sources=sources,
        routes=_routes(data.get("route"), str(path)),
        client_options=options_from_toml(path),
        settings=_settings(data.get("serve"), f"{path} [serve]"),
        tenants=tenants_from_toml(
            toml_tables(data.get("tenant"), "tenant", str(path)) or None, str(path)
        ),
    )
