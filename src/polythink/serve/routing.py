"""Which sources a request's ``model`` names: the gateway's route table.

A name is looked up in this order:

1. a ``[[route]]``'s ``name`` or one of its ``aliases``: its sources, tried in order
   (failover);
2. the model id of configured ``[[source]]`` tables: those sources, in file order;
3. ``provider/model-id`` with a provider polythink knows: that model on the provider's
   configured source (its key, base URL and limits), else on the provider's defaults.

Each route is a :class:`~polythink.Client` of its own over its sources, so a gateway call
runs the onion a library call runs, with one difference: a gateway's caller cannot set
``drop_params``, so every source drops what its model refuses (``temperature: 0`` with
thinking on, ``top_k``, a forced ``tool_choice`` …) with a warning, in the answer's
``x-polythink-warnings`` and the log, where a library call would raise
:class:`~polythink.errors.ThinkingUnsupportedError`. The clients share what must be shared:
one HTTP client (one connection pool, one SSL context), the sources' rate limits (one budget
per account: :class:`~polythink.backends.local.ProcessLimits`, or the configured Redis
store), the cache store, and the spend budgets (shared by name). Routes of the first two
kinds are built when the server starts, so a bad one fails there; ``provider/model-id``
routes are built on first use and kept (at most :attr:`Router.MAX_NAMED`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from polythink.backends.local import ProcessLimits
from polythink.client import Client
from polythink.config import Source
from polythink.errors import InvalidInputError
from polythink.middleware.base import Middleware
from polythink.providers import get_provider
from polythink.serve.config import GatewayConfig, split_model

__all__ = ["Route", "Router", "source_for"]


@dataclass(frozen=True, slots=True)
class Route:
    """Where a model name goes: its sources (tried in order) and the client over them.

    ``wires`` are the transport wires of the sources (``anthropic``, ``openai_chat`` …): a
    front door sends a body as written only to a source of its own wire.
    """

    name: str
    sources: tuple[Source, ...]
    client: Client
    wires: frozenset[str]
    secrets: tuple[str, ...] = ()
    """The sources' credentials (never echoed in an answer), gathered once."""


def source_for(entry: str, configured: Sequence[Source]) -> Source:
    """The source a ``provider/model-id`` names (see the module docstring, rule 3).

    Raises:
        ValueError: ``entry`` is not ``provider/model-id`` with a known provider, or the
            source it gives is refused (see :class:`~polythink.Source`).
    """
    found = split_model(entry)
    if found is None:
        raise InvalidInputError(
            f"{entry!r} is not provider/model-id with a provider polythink knows"
        )
    provider, model = found
    for source in configured:
        if source.provider == provider and source.model == model:
            return source
    for source in configured:
        if source.provider == provider:
            return dataclasses.replace(source, model=model)
    return Source(provider, model)


class Router:
    """The route table of one gateway (see the module docstring).

    Args:
        config: the gateway's configuration.
        layers: makes the middleware put last on each source (innermost, just outside its
            transport), from the source's index: the gateway observes each attempt there.
        http_client: the HTTP client every route's client uses (``None``: one is built on
            :meth:`start`, and closed on :meth:`aclose`).

    Raises:
        ValueError: a configured route or source refused (on :meth:`start`).
    """

    MAX_NAMED = 256
    """Most ``provider/model-id`` routes kept; a name beyond is refused with a 400."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        layers: Callable[[int], Middleware] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = config
        self._layers = layers
        self._given_http = http_client
        self._http: httpx.AsyncClient | None = http_client
        self._routes: dict[str, Route] = {}
        self._named: dict[str, Route] = {}
        self._options: dict[str, Any] = {}

    def start(self) -> None:
        """Build the shared pieces and the configured routes (in the running event loop).

        Raises:
            ValueError: a route or source the configuration holds is refused.
        """
        from polythink.backends.stores import cache_store
        from polythink.http import build_http_client

        options = dict(self.config.client_options)
        limits = options.get("limits")
        if isinstance(limits, str):
            # One store for every route: one connection pool, and each account's limits
            # counted once.
            from polythink.backends.redis import RedisLimitStore
            from polythink.backends.stores import check_redis_url

            check_redis_url(limits, "limits")
            options["limits"] = RedisLimitStore(limits)
        elif limits is None:
            options["limits"] = ProcessLimits()
        if "cache" in options:
            options["cache"] = cache_store(options["cache"])
        if self._http is None:
            self._http = build_http_client("auto")
        self._options = options
        configured = self.config.sources
        for route in self.config.routes:
            built = self._build(
                route.name, tuple(source_for(entry, configured) for entry in route.sources)
            )
            for name in (route.name, *route.aliases):
                self._routes[name] = built
        for source in configured:
            if source.model not in self._routes:
                same = tuple(s for s in configured if s.model == source.model)
                self._routes[source.model] = self._build(source.model, same)

    def _build(self, name: str, sources: tuple[Source, ...]) -> Route:
        make = self._layers
        observed = tuple(
            dataclasses.replace(
                s,
                drop_params=True,
                middleware=(*s.middleware, make(i)) if make is not None else s.middleware,
            )
            for i, s in enumerate(sources)
        )
        client = Client(observed, http_client=self._http, **self._options)
        client.start()
        wires = frozenset(get_provider(s.provider).wire for s in sources)
        secrets = tuple(secret for source in sources for secret in source.secrets())
        return Route(name=name, sources=sources, client=client, wires=wires, secrets=secrets)

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client every route uses (after :meth:`start`)."""
        if self._http is None:
            raise RuntimeError("the router is not started")
        return self._http

    @property
    def limits(self) -> Any:
        """The limit store every route's client counts in (after :meth:`start`): the
        configured Redis store, else one :class:`~polythink.backends.local.ProcessLimits`."""
        if "limits" not in self._options:
            raise RuntimeError("the router is not started")
        return self._options["limits"]

    def find(self, name: str) -> Route | None:
        """The route ``name`` names, or ``None`` when it names none.

        Raises:
            ValueError: a ``provider/model-id`` whose source is refused (an effort the model
                cannot take, a missing key), or one more such name than :attr:`MAX_NAMED`.
        """
        route = self._routes.get(name) or self._named.get(name)
        if route is not None:
            return route
        if split_model(name) is None:
            return None
        if len(self._named) >= self.MAX_NAMED:
            raise InvalidInputError(
                f"this gateway already serves {self.MAX_NAMED} provider/model-id names; add a "
                "[[route]] for this one"
            )
        route = self._named[name] = self._build(name, (source_for(name, self.config.sources),))
        return route

    def names(self) -> list[str]:
        """The model ids the configuration routes (route names and aliases, then source
        model ids), each once, in file order."""
        return list(self._routes)

    async def aclose(self) -> None:
        """Close every route's client, and the HTTP client when the router built it."""
        seen: set[int] = set()
        for route in (*self._routes.values(), *self._named.values()):
            if id(route.client) not in seen:
                seen.add(id(route.client))
                await route.client.aclose()
        self._routes.clear()
        self._named.clear()
        if self._http is not None and self._given_http is None:
            await self._http.aclose()
        self._http = None
