"""The Client: an async context manager that owns one HTTP client and the onion.

``Client(sources=[...])`` validates its sources when it is built (unknown provider or
effort, missing key, a source effort its model cannot satisfy: ``ValueError`` or
:class:`~polythink.errors.ThinkingUnsupportedError` right there). Entering the context
creates one ``httpx.AsyncClient`` (one connection pool, one SSL context) and composes the
layers once: per call the outer layers, then failover across one stack per source, each
ending in that source's transport. A call then goes straight through prebuilt objects.

The HTTP layer under httpx is chosen with ``http=``: httpx's own connection pool, or
aiohttp's through the ``httpx-aiohttp`` transport (see :mod:`polythink.http`).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypedDict, cast, overload

import httpx
from typing_extensions import TypeVar, Unpack

from polythink.auth import check_cloud
from polythink.backends.local import LocalLimits, MonotonicClock, process_budgets
from polythink.backends.stores import check_redis_url
from polythink.budgets import Budget, CallPlan, account_id, check_tag
from polythink.capability_store import CapabilityStore, open_store
from polythink.config import (
    Source,
    check_prefix_mismatch,
    options_from_env,
    options_from_toml,
    sources_from_env,
    sources_from_toml,
)
from polythink.conversion import coerce_messages, coerce_tools
from polythink.errors import (
    ClientClosedError,
    ClientLoopError,
    InvalidInputError,
    StreamInterruptedError,
)
from polythink.http import (
    HTTPLayer,
    build_http_client,
    check_http_layer,
    redact_http_logs,
    release_http_logs,
    running_asyncio_loop,
)
from polythink.middleware.base import Chain, Middleware, UserLayer, compose, user_layers
from polythink.middleware.failover import Failover
from polythink.middleware.ratelimit import RateLimitMiddleware
from polythink.middleware.reasoning import ReasoningMiddleware
from polythink.middleware.tiers import ServiceTierMiddleware
from polythink.providers import get_provider
from polythink.structured import parse_output, schema_validator
from polythink.transports import transport_class
from polythink.types import (
    CacheMode,
    Effort,
    Message,
    MessageMetadata,
    PromptCache,
    Request,
    Response,
    ResponseFormat,
    ServiceTier,
    StreamEvent,
    Tool,
    TypedStreamEvent,
    check_text,
)
from polythink.wire_json import check_extra_body

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from polythink.backends.base import BudgetBackend
    from polythink.backends.redis import RedisLimitStore
    from polythink.batch import BatchJob
    from polythink.middleware.budget import BudgetMiddleware
    from polythink.middleware.cache import CacheMiddleware
    from polythink.middleware.retry import RetryMiddleware
    from polythink.transports.base import HTTPTransport

__all__ = ["Client"]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


_wall_clock = time.time
_monotonic = time.monotonic


_T = TypeVar("_T", Message, Response)
_M = TypeVar("_M")


class CallOptions(TypedDict, total=False):
    """The keywords ``complete`` and ``stream`` take besides ``response_format`` (for the type
    checker's view of their overloads; see :meth:`Client.complete`)."""

    reasoning_effort: Effort | str | bool | None
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    tools: Sequence[Tool | Mapping[str, Any]] | None
    tool_choice: str | Mapping[str, Any] | None
    stop: str | Sequence[str] | None
    cache: CacheMode
    timeout: float | None
    extra_body: Mapping[str, Any] | None
    system_suffix: str | None
    prompt_cache: PromptCache | bool | None
    tag: str | None
    prefix_mismatch: str | None
    service_tier: ServiceTier | str | None


def _field_setter(cls: type[_T], name: str) -> Callable[[_T, Any], _T]:
    """Build ``copy(value, new)``: a copy of a frozen, slotted ``cls`` value with field
    ``name`` replaced, the others taken as they are (already validated).

    ``dataclasses.replace`` would run ``__post_init__``'s checks again on every call; the
    slot descriptors, looked up once here, copy in about half the time (measured
    2026-12-01 on the 2-core dev machine: stamping a response's metadata 11 us with
    ``replace``, 6 us this way).
    """
    members: tuple[Any, ...] = tuple(cls.__dict__[slot] for slot in cls.__slots__)
    target: Any = cls.__dict__[name]
    new_instance = object.__new__

    def copy(value: _T, new: Any) -> _T:
        result: _T = new_instance(cls)
        for member in members:
            member.__set__(result, member.__get__(value))
        target.__set__(result, new)
        return result

    return copy


_with_message = _field_setter(Response, "message")
_with_metadata = _field_setter(Message, "metadata")


def _recorded(response: Response, started_at: float, duration: float) -> Response:
    """``response`` with its message's :class:`MessageMetadata` filled in for the caller
    (the transport's ``prefix_mismatch``, the conversation's remembered choice, kept)."""
    given = response.message.metadata
    metadata = MessageMetadata(
        provider=response.provider,
        model=response.model,
        source_index=response.source_index,
        started_at=started_at,
        duration=duration,
        interrupted=response.interrupted,
        prefix_mismatch=given.prefix_mismatch if given is not None else None,
    )
    return _with_message(response, _with_metadata(response.message, metadata))


def _stop_sequences(stop: Any) -> tuple[str, ...] | None:
    if stop is None:
        return None
    if isinstance(stop, str):
        check_text(stop, "stop")
        return (stop,)
    if isinstance(stop, Sequence) and all(isinstance(s, str) for s in stop):
        for i, sequence in enumerate(stop):
            check_text(sequence, f"stop[{i}]")
        return tuple(stop) or None
    raise InvalidInputError(f"stop must be a string or a list of strings; got {stop!r}")


_TOOL_CHOICE_MODES = ("auto", "none", "required")
_ANTHROPIC_MODES = {"auto": "auto", "none": "none", "any": "required"}


def _tool_choice(choice: Any, tools: Sequence[Tool] | None) -> str | Mapping[str, Any] | None:
    """Check ``tool_choice`` against the declared tools; a forced tool in the Chat shape.

    Accepted: ``"auto"``, ``"none"``, ``"required"`` (with at least one tool), the name of a
    declared tool, or OpenAI's forcing shapes ``{"type": "function", "function": {"name":
    ...}}`` (Chat) and ``{"type": "function", "name": ...}`` (Responses), naming a declared
    tool. A name, or the Responses shape, becomes the Chat shape, which every wire maps.
    Anthropic's own shapes (https://docs.anthropic.com/en/api/messages, ``tool_choice``) are
    read as the same vocabulary so they work on every wire: ``{"type": "auto"}``,
    ``{"type": "none"}``, ``{"type": "any"}`` (= ``"required"``) and ``{"type": "tool",
    "name": ...}``. Provider options beyond these (``disable_parallel_tool_use``) go through
    ``extra_body``.

    Raises:
        ValueError: for anything else, listing what is accepted.
    """
    if choice is None:
        return None
    names = [tool.name for tool in tools or ()]
    declared = ", ".join(repr(name) for name in names) if names else "none"
    forced: Any = None
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_MODES:
            if choice == "required" and not names:
                raise InvalidInputError('tool_choice="required" needs at least one tool in tools=')
            return choice
        if choice in names:
            forced = choice
    elif (
        isinstance(choice, Mapping)
        and set(choice) <= {"type", "name"}
        and (choice.get("type") in _ANTHROPIC_MODES)
    ):
        if choice["type"] == "any" and not tools:
            raise InvalidInputError(
                'tool_choice {"type": "any"} (= "required") needs at least one tool in tools='
            )
        return _tool_choice(_ANTHROPIC_MODES[choice["type"]], tools)
    elif (
        isinstance(choice, Mapping)
        and set(choice) <= {"type", "name"}
        and choice.get("type") == "tool"
        and isinstance(choice.get("name"), str)
        and choice["name"]
    ):
        return _tool_choice({"type": "function", "name": choice["name"]}, tools)
    elif isinstance(choice, Mapping) and choice.get("type") == "function":
        function = choice.get("function")
        forced = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        if isinstance(forced, str) and forced and forced not in names:
            raise InvalidInputError(
                f"tool_choice forces the tool {forced!r}, which is not declared; "
                f"declared tools: {declared}"
            )
    if not isinstance(forced, str) or not forced:
        raise InvalidInputError(
            'tool_choice must be "auto", "none", "required", the name of a declared tool '
            f'(declared: {declared}), {{"type": "function", "function": {{"name": ...}}}}, '
            f'{{"type": "function", "name": ...}} or Anthropic\'s {{"type": "auto" | "none" | '
            f'"any"}} / {{"type": "tool", "name": ...}}; got {choice!r}'
        )
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        return choice
    return {"type": "function", "function": {"name": forced}}


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _shared_limits(limits: Any) -> RedisLimitStore | None:
    if limits is None:
        return None
    if isinstance(limits, str) and limits.startswith(_REDIS_SCHEMES):
        check_redis_url(limits, "limits")
        try:
            from polythink.backends.redis import RedisLimitStore
        except ModuleNotFoundError as exc:
            raise InvalidInputError(str(exc)) from None
        return RedisLimitStore(limits)
    if callable(getattr(limits, "for_source", None)):
        shared: RedisLimitStore = limits
        return shared
    raise InvalidInputError(
        "limits must be None (this process) or a redis:// URL such as "
        f"'redis://localhost:6379/0' (or a RedisLimitStore); got {type(limits).__name__}"
    )


def _budgets(budgets: Any) -> tuple[Budget, ...]:
    if budgets is None:
        return ()
    if isinstance(budgets, Budget):
        raise InvalidInputError("budgets must be a list of Budget; wrap the one budget: [budget]")
    if isinstance(budgets, str | bytes | Mapping) or not isinstance(budgets, Iterable):
        raise InvalidInputError(
            f"budgets must be a list of Budget (or None for none); got {type(budgets).__name__}"
        )
    found = tuple(budgets)
    names: dict[str, Budget] = {}
    for i, budget in enumerate(found):
        if not isinstance(budget, Budget):
            raise InvalidInputError(f"budgets[{i}] is {type(budget).__name__}, expected Budget")
        seen = names.setdefault(budget.label, budget)
        if seen != budget:
            raise InvalidInputError(
                f"budgets[{i}] and an earlier budget are both named {budget.label!r} but differ; "
                "a name identifies one budget: give them distinct names"
            )
    if found:
        from polythink.pricing import price_table_version

        if price_table_version() is None:
            raise InvalidInputError(
                "spend budgets price every call with the genai-prices table, which is not "
                "installed: pip install 'polythink[cost]'"
            )
    return found


class Client:
    """A chat client over an ordered list of sources.

    Each source keeps its own ``rpm``, ``tpm`` and ``max_concurrency``: a call that a source
    cannot take at once goes to the next source, and the last source makes it wait, up to the
    call's deadline (see :class:`~polythink.middleware.ratelimit.RateLimitMiddleware`).

    Args:
        sources: where calls may go, tried in order (see :class:`~polythink.Source`).
        cache: response cache: ``None``/``False`` (off), ``True`` (a diskcache in the user
            cache directory, ``$XDG_CACHE_HOME/polythink`` or ``~/.cache/polythink``), a
            directory path, or a store object with ``get``/``set``/``delete`` such as a
            ``diskcache.Cache`` or a :class:`~polythink.backends.disk.DiskStore` (which
            also takes a TTL and a size limit); see
            :class:`~polythink.backends.base.CacheStore`.
            A ``redis://`` URL (or a :class:`~polythink.backends.redis.RedisCache`, which
            also takes a TTL and a size limit) shares the cache with every process naming
            that server (extra ``polythink[redis]``, asyncio only).
        limits: where the sources' ``rpm``, ``tpm`` and ``max_concurrency`` budgets live:
            ``None`` (this process), or a ``redis://`` URL (or a
            :class:`~polythink.backends.redis.RedisLimitStore`) shared by every process
            naming that server; a budget belongs to an account (provider, base URL and a
            SHA-256 fingerprint of the API key). A server that does not answer never
            fails a call: each process keeps its share of the limits (one warning), and
            ``?workers=N`` in the URL sets that share for a server it never reached. Spend
            ``budgets`` live there too (without ``workers``, calls under a budget whose
            spend was never read are refused while the server does not answer).
        budgets: spend caps in US dollars per UTC calendar window (see
            :class:`~polythink.Budget`): each call reserves its worst-case cost in every
            budget that applies before it is sent and is corrected to what it cost; a call
            none of them can afford raises :class:`~polythink.errors.BudgetExceededError`
            unsent (or goes to the next source), and a budget with ``step_down_at`` sends
            cheaper tiers as it runs low. Budgets are shared by name: in this process
            without ``limits``, across processes with ``limits="redis://…"``. Needs the
            ``cost`` extra (genai-prices). ``None`` or empty: no budget.
        budget_store: where the budgets' spend is counted instead: a
            :class:`~polythink.backends.base.BudgetBackend` such as
            :class:`~polythink.backends.local.LocalBudgets` (this client's own count, with
            an injectable clock); ``None``: as described under ``budgets``.
        http_client: an ``httpx.AsyncClient`` to use instead of creating one; the caller
            keeps ownership (it is not closed with the client).
        tracer_provider: OpenTelemetry tracer provider for the one span per call; ``None``
            uses the global one (a no-op unless the application installed the SDK).
        meter_provider: OpenTelemetry meter provider for the call metrics; ``None`` uses
            the global one.
        capture_content: record prompts and completions on spans (off by default).
        cost: price every call into :attr:`Response.cost` from the price table
            (:mod:`polythink.pricing`; needs the ``cost`` extra); ``False`` leaves only the
            cost a provider reports itself.
        capabilities_store: where learned and imported capabilities live: ``None`` (the
            per-user file, ``$POLYTHINK_CAPABILITIES`` or ``capabilities.json`` in the user
            cache directory, shared by every client of the process), a file path, ``False``
            (memory only, this client alone) or a
            :class:`~polythink.capability_store.CapabilityStore`.
        http: the HTTP layer of the client's own ``httpx.AsyncClient``: ``"auto"``
            (default: aiohttp's pool under asyncio when ``httpx-aiohttp`` is installed,
            else httpx's own), ``"httpx"`` or ``"aiohttp"``; see
            :func:`polythink.http.build_http_client`.
            Ignored when ``http_client`` is given.
        prefix_mismatch: the :attr:`~polythink.Source.prefix_mismatch` of every source that
            sets none (``"error"`` or ``"drop_block"``; ``None``: the API's default).
        reasoning_affinity: a conversation whose last turn with reasoning came from one of
            this client's sources (its message's ``metadata.source_index``, provider and
            model) goes to that source first, while its circuit is closed, whatever the
            source order: the reasoning made there is readable there, where another model
            drops it (:mod:`polythink.reasoning.continuity`). Failover still moves on when
            it fails. Off by default: calls follow the source order.
        middleware: layers of the caller's own around the whole call, outermost first,
            outside every built-in layer: they see the request as the caller made it (the
            requested tier, before the cache) and the final response or error, cache hits
            and failover included. Layers around each attempt on one source go on that
            :class:`~polythink.Source` (``middleware=``). See :class:`~polythink.Middleware`;
            a layer that breaks the contract raises
            :class:`~polythink.errors.MiddlewareError` naming it.

    Raises:
        ValueError: for an empty source list, a bad source, a missing API key, a
            provider whose transport is not available, an unusable ``cache`` or ``limits``
            value (a Redis URL without the ``redis`` package, a ``str`` with another URL
            scheme), an ``http_client`` that is not an ``httpx.AsyncClient``, an unknown or
            unavailable ``http``, a ``capabilities_store`` file that is not a store, a
            ``middleware`` list (the client's or a source's) holding something that is not
            a layer, or ``budgets`` that are not :class:`~polythink.Budget` values, share a
            name while they differ, or are given without the price table installed.
        ThinkingUnsupportedError: a source's own ``reasoning_effort`` cannot be satisfied
            by its model (for example ``none`` on a model that always reasons).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        cache: bool | str | Path | Any | None = None,
        limits: str | Any | None = None,
        http_client: httpx.AsyncClient | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool = False,
        http: HTTPLayer = "auto",
        cost: bool = True,
        capabilities_store: str | Path | bool | CapabilityStore | None = None,
        middleware: Sequence[Middleware] = (),
        budgets: Sequence[Budget] | None = (),
        budget_store: BudgetBackend | None = None,
        prefix_mismatch: str | None = None,
        reasoning_affinity: bool = False,
    ) -> None:
        # Imported here, not with the module: tenacity, diskcache and opentelemetry then load
        # when the first client is built, and ``import polythink`` stays close to
        # ``import httpx`` (benchmarks/README.md, import time).
        from polythink.backends.stores import cache_store
        from polythink.middleware.cache import CacheMiddleware
        from polythink.middleware.cost import CostMiddleware
        from polythink.middleware.retry import RetryMiddleware
        from polythink.middleware.telemetry import TelemetryMiddleware
        from polythink.refresh import schedule_refresh

        check_http_layer(http)
        if http_client is not None and not isinstance(http_client, httpx.AsyncClient):
            raise InvalidInputError(
                "Client(http_client=) must be an httpx.AsyncClient, or None for one of the "
                f"client's own; got {type(http_client).__name__}"
            )
        if isinstance(sources, Source):
            raise InvalidInputError(
                "sources must be a list of Source; wrap the one source: [source]"
            )
        if isinstance(sources, str | bytes | Mapping) or not isinstance(sources, Iterable):
            raise InvalidInputError(
                f"sources must be a list of Source; got {type(sources).__name__}"
            )
        sources = tuple(sources)
        if not sources:
            raise InvalidInputError("Client needs at least one Source")
        for name, provider, method in (
            ("tracer_provider", tracer_provider, "get_tracer"),
            ("meter_provider", meter_provider, "get_meter"),
        ):
            if provider is not None and not callable(getattr(provider, method, None)):
                raise InvalidInputError(
                    f"{name} must be an OpenTelemetry {name.title().replace('_', '')} (with "
                    f"{method}()) or None; got {type(provider).__name__}"
                )
        for i, source in enumerate(sources):
            if not isinstance(source, Source):
                raise InvalidInputError(f"sources[{i}] is {type(source).__name__}, expected Source")
        check_prefix_mismatch(prefix_mismatch, "Client(prefix_mismatch=)")
        if not isinstance(reasoning_affinity, bool):
            raise InvalidInputError(
                f"Client(reasoning_affinity=) must be True or False; got {reasoning_affinity!r}"
            )
        if prefix_mismatch is not None:
            sources = tuple(
                source
                if source.prefix_mismatch is not None
                else dataclasses.replace(source, prefix_mismatch=prefix_mismatch)
                for source in sources
            )
        self.sources = sources
        self.reasoning_affinity = reasoning_affinity
        self.cache = cache
        self.capabilities = open_store(capabilities_store)
        # At most once a day, in a daemon thread: never on the path of a call.
        schedule_refresh(self.capabilities)
        self.limits = limits
        shared = _shared_limits(limits)
        self._shared = shared
        self._given_http = http_client
        self.http: HTTPLayer = http
        self._http: httpx.AsyncClient | None = None
        self._chain: Chain | None = None
        self._closed = False
        self._loop: Any = None
        self._keys: list[str | None] = []
        self._transport_classes: list[Any] = []
        self._transports: list[HTTPTransport] = []
        self._reasoning: list[ReasoningMiddleware] = []
        self._tiers: list[ServiceTierMiddleware] = []
        self._limits: list[RateLimitMiddleware] = []
        self._retry: list[RetryMiddleware] = []
        self._middleware = user_layers(middleware, "Client")
        self._source_middleware: list[tuple[UserLayer, ...]] = []
        self.budgets = _budgets(budgets)
        self._budget_layers: list[BudgetMiddleware | None] = []
        budget_backend: BudgetBackend | None = None
        budget_meter = None
        if self.budgets:
            from polythink.middleware.budget import BudgetMeter, BudgetMiddleware

            shared_budgets = getattr(shared, "budgets", None)
            if budget_store is not None:
                budget_backend = budget_store
            elif callable(shared_budgets):
                budget_backend = shared_budgets()
            else:
                budget_backend = process_budgets()
            budget_meter = BudgetMeter(meter_provider)
        for i, source in enumerate(sources):
            profile = source.profile
            key = source.resolve_api_key()
            if key is None and profile.key_required and source.base_url is None:
                raise InvalidInputError(
                    f"sources[{i}] ({source.provider}/{source.model}) has no API key: pass "
                    f"api_key= or set {' or '.join(profile.api_key_env)}"
                )
            if profile.cloud is not None:
                check_cloud(source, profile, key, i)
            self._keys.append(key)
            self._source_middleware.append(
                user_layers(
                    source.middleware,
                    f"sources[{i}] ({source.provider}/{source.model})",
                    provider=source.provider,
                    source_index=i,
                )
            )
            self._transport_classes.append(transport_class(profile.wire))
            reasoning = ReasoningMiddleware(source, i, profile, self.capabilities)
            self._reasoning.append(reasoning)
            tiers = ServiceTierMiddleware(source, i, profile, reasoning.capability)
            self._tiers.append(tiers)
            budget_layer = None
            if budget_backend is not None:
                budget_layer = BudgetMiddleware(
                    self.budgets,
                    source,
                    i,
                    profile,
                    reasoning,
                    budget_backend,
                    account=account_id(source.provider, source.endpoint, key),
                    meter=budget_meter,
                    tiers=tiers,
                )
            self._budget_layers.append(
                budget_layer if budget_layer is not None and budget_layer.applies else None
            )
            # Every source but the last hands a call it cannot take at once to the next one.
            wait = None if i == len(sources) - 1 else 0.0
            backend = None
            if shared is not None:
                backend = shared.for_source(
                    source.provider,
                    source.endpoint,
                    key,
                    rpm=source.rpm,
                    tpm=source.tpm,
                    max_concurrency=source.max_concurrency,
                    fallback=LocalLimits(
                        source.rpm, source.tpm, source.max_concurrency, MonotonicClock()
                    ),
                )
            limiter = RateLimitMiddleware(source, i, profile, max_wait=wait, backend=backend)
            self._limits.append(limiter)
            # Retried attempts count against the budget and pause it at once (the layer
            # outside retry observes them).
            self._retry.append(RetryMiddleware(source, i, observer=limiter))
        try:
            store = cache_store(cache)
        except ModuleNotFoundError as exc:
            raise InvalidInputError(str(exc)) from None
        self._store = store
        self._cache: CacheMiddleware | None = (
            CacheMiddleware(store, sources, ttl=getattr(store, "ttl", None))
            if store is not None
            else None
        )
        self._cost = CostMiddleware(sources) if cost else None
        self._telemetry = TelemetryMiddleware(
            sources,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=capture_content,
        )

    @classmethod
    def from_env(cls, scope: str, **kwargs: Any) -> Client:
        """Build a client from ``{SCOPE}__{PROVIDER}__{N}__{FIELD}`` environment variables.

        See :func:`polythink.config.sources_from_env`; ``{SCOPE}__LIMITS`` and
        ``{SCOPE}__CACHE`` give ``limits`` and ``cache`` (see
        :func:`polythink.config.options_from_env`); ``kwargs`` go to the constructor and
        win over both.
        """
        return cls(sources_from_env(scope), **{**options_from_env(scope), **kwargs})

    @classmethod
    def from_toml(cls, path: str | Path, **kwargs: Any) -> Client:
        """Build a client from a TOML file of ``[[source]]`` tables.

        See :func:`polythink.config.sources_from_toml`; top-level ``limits`` and ``cache``
        keys and ``[[budget]]`` tables give those options and ``budgets``
        (:func:`polythink.config.options_from_toml`); ``kwargs``
        go to the constructor and win over them.

        Raises:
            ValueError: ``path`` is not a ``str`` or ``os.PathLike``, is a directory or
                not a TOML file (not UTF-8, a syntax error), naming it; or a value the file
                holds is refused (:class:`~polythink.errors.InvalidInputError`).
            ConfigFileNotFoundError: no file at ``path``, naming it; a
                ``FileNotFoundError`` and a ``ValueError`` as well.
        """
        return cls(sources_from_toml(path), **{**options_from_toml(path), **kwargs})

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        """Show the sources (provider, model, base URL given, tier) and the state; no keys."""
        shown = []
        for source in self.sources:
            text = f"{source.provider}/{source.model}"
            if source.base_url is not None:
                text += f" at {source.base_url}"
            if source.effort is not None:
                text += f" reasoning_effort={source.effort.value}"
            shown.append(text)
        state = "closed" if self._closed else "open" if self._chain is not None else "not started"
        cache = "on" if self._cache is not None else "off"
        return f"<Client sources=[{', '.join(shown)}] http={self.http} cache={cache} {state}>"

    def __del__(self) -> None:
        # A started client owns an HTTP pool (aiohttp's session) that only aclose() releases.
        if getattr(self, "_chain", None) is not None and getattr(self, "_given_http", 1) is None:
            warnings.warn(
                f"{self!r} was started and never closed: call 'await client.aclose()' or use "
                "'async with Client(...)'",
                ResourceWarning,
                source=self,
                stacklevel=2,
            )

    def start(self) -> None:
        """Create the HTTP client and compose the onion (``async with`` calls this).

        A plain, synchronous method: call ``client.start()`` without ``await`` (it does no
        I/O). A client started this way owns a connection pool: end it with ``await aclose()``
        (a client collected while still open warns with ``ResourceWarning``, and then so does
        the pool under it: aiohttp's "Unclosed client session" / "Unclosed connector", or
        asyncio's "unclosed transport" on httpx; aiohttp 3.14 offers no synchronous close).
        """
        if self._chain is not None:
            return
        from polythink.middleware.semconv import (
            GEN_AI_PROVIDER_NAME,
            GEN_AI_REQUEST_MODEL,
            POLYTHINK_SOURCE_INDEX,
        )
        from polythink.middleware.telemetry import provider_name
        from polythink.transports.route import with_responses_route

        self._closed = False
        self._loop = running_asyncio_loop()
        if self._cost is not None:
            from polythink.pricing import preload

            preload()
        http = self._given_http or build_http_client(self.http)
        self._http = http
        redact_http_logs(self, [*self._keys, *(s for src in self.sources for s in src.secrets())])
        stacks = []
        self._transports = []
        for i, source in enumerate(self.sources):
            transport = self._transport_classes[i](
                source=source,
                index=i,
                profile=source.profile,
                client=http,
                api_key=self._keys[i],
            )
            self._transports.append(transport)
            # Calls its model takes only on the Responses API go there (GPT-6 tools).
            transport = with_responses_route(transport, client=http, api_key=self._keys[i])
            stacks.append(compose(self._source_layers(i), transport))
        names = [f"{source.provider} {source.model}" for source in self.sources]
        windows = [
            cap.context_window if (cap := source.capability) is not None else None
            for source in self.sources
        ]
        spans = [
            {
                POLYTHINK_SOURCE_INDEX: i,
                GEN_AI_PROVIDER_NAME: provider_name(source.provider),
                GEN_AI_REQUEST_MODEL: source.model,
            }
            for i, source in enumerate(self.sources)
        ]
        self._chain = compose(
            self._call_layers(),
            Failover(
                stacks,
                names=names,
                context_windows=windows,
                span_attributes=spans,
                models=[(source.provider, source.model) for source in self.sources]
                if self.reasoning_affinity
                else None,
            ),
        )

    async def send(self, request: Request) -> Response:
        """Send a :class:`~polythink.types.Request` made by :meth:`request` (and perhaps
        derived with ``request.with_(...)``) through the whole onion; return the response.

        The lower level of :meth:`complete`, as httpx's ``send`` is of its ``post``: the
        answer is not validated against the request's ``response_format`` (``parsed`` stays
        ``None``; read ``text``). ``polythink serve`` sends every call this way, with the
        caller's own body attached (``Request.native``).

        Raises:
            PolythinkError: as :meth:`complete`.
            ClientClosedError: the client is closed.
        """
        if request.stream:
            request = request.with_(stream=False)
        chain = self._started()
        started_at, start = _wall_clock(), _monotonic()
        try:
            response = await chain.complete(request)
        except Exception as exc:
            if self._closed:
                raise self._closed_error() from exc
            raise
        return _recorded(response, started_at, _monotonic() - start)

    async def send_stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Stream a :class:`~polythink.types.Request` through the whole onion (see
        :meth:`send`); yield its events, ``done`` last.

        Raises:
            PolythinkError: as :meth:`stream`.
            ClientClosedError: the client is closed, or was closed while the stream was read.
        """
        if not request.stream:
            request = request.with_(stream=True)
        async with aclosing(self._events(request, None)) as events:
            async for event in events:
                yield event

    async def _events(
        self, request: Request, fmt: ResponseFormat[Any] | None
    ) -> AsyncGenerator[StreamEvent, None]:
        """The onion's events for ``request``, the ``done`` response recorded (and, with
        ``fmt``, validated)."""
        events = self._started().stream(request)
        started_at, start = _wall_clock(), _monotonic()
        try:
            async with aclosing(events) as iterator:
                async for event in iterator:
                    # Either HTTP layer may still hold buffered events, or fail in its own way
                    # (aiohttp: a bare RuntimeError), once the client is closed.
                    if self._closed:
                        raise self._closed_error()
                    if event.type == "done" and event.response is not None:
                        response = _recorded(event.response, started_at, _monotonic() - start)
                        if fmt is not None and response.parsed is None:
                            response = parse_output(response, fmt)
                        event = dataclasses.replace(event, response=response)
                    yield event
        except StreamInterruptedError as exc:
            if self._closed:
                raise self._closed_error() from exc
            exc.partial = _recorded(exc.partial, started_at, _monotonic() - start)
            raise
        except ClientClosedError:
            raise
        except Exception as exc:
            if self._closed:
                raise self._closed_error() from exc
            raise

    # The order of the onion, outermost first, is listed here and nowhere else:
    #   per call:    the client's middleware, telemetry, cache, cost, then failover
    #   per source:  rate limit, retry, budget (when one applies), service tier, reasoning,
    #                the source's middleware, then its transport

    def _source_layers(self, index: int) -> list[Middleware | UserLayer]:
        """Per-source layers, outermost first: rate limit, retry, spend budgets (when any
        applies to the source: each attempt reserves, and may step its reasoning tier down
        or move it to flex before the inner layers resolve them), service tier (resolves
        it; resends once after "no capacity"), reasoning, then the source's own middleware
        (it sees each attempt as sent, with the applied tiers)."""
        layers: list[Middleware | UserLayer] = [self._limits[index], self._retry[index]]
        budget = self._budget_layers[index]
        if budget is not None:
            layers.append(budget)
        return [
            *layers,
            self._tiers[index],
            self._reasoning[index],
            *self._source_middleware[index],
        ]

    def _call_layers(self) -> list[Middleware | UserLayer]:
        """Per-call layers above failover, outermost first: the client's own middleware
        (it sees the call as made, cache hits included), telemetry, cache, cost."""
        layers: list[Middleware | UserLayer] = [*self._middleware, self._telemetry]
        if self._cache is not None:
            layers.append(self._cache)
        if self._cost is not None:
            layers.append(self._cost)
        return layers

    async def batch(
        self,
        requests: Mapping[str, Request] | Sequence[Request],
        *,
        source: int | None = None,
        name: str | None = None,
    ) -> BatchJob:
        """Submit ``requests`` as one batch: answered within the provider's 24-hour window,
        at batch prices (about half), through one source's batch API.

        Build each request as a call is made: ``client.request(messages, ...)`` takes
        :meth:`complete`'s arguments (tools, ``reasoning_effort``, ``response_format``,
        ``max_tokens``, ``tag`` …). Each goes through the same reasoning resolution and body
        builder as a call to that source; spend budgets reserve the batch's worst case at
        batch prices now and are corrected request by request as results are read. See
        :mod:`polythink.batch` for each provider's API.

        Args:
            requests: the requests, by id (1 to 64 letters, digits, ``_`` or ``-``), or a
                list (ids ``"0"``, ``"1"`` …).
            source: the source to submit to (its index); ``None``: the first source whose
                provider has a batch API (``openai``, ``openai-responses``, ``anthropic``,
                ``gemini``). A batch is not failed over: it lives at one provider.
            name: the batch's name at the provider (OpenAI ``metadata.name``, Gemini
                ``displayName``); default ``polythink-<unix time>``.

        Returns:
            the :class:`~polythink.batch.BatchJob`: ``await job.wait()``, ``async for id,
            result in job.results()``, ``job.save(path)``, ``await job.cancel()``.

        Raises:
            ValueError: malformed requests or ids (ids are ``str``), a ``source`` that is
                not an index of this client's sources, a ``name`` that is not a non-empty
                ``str`` of at most 512 characters, no source with a batch API.
            PolythinkError: a request this source cannot take (named by its id; nothing
                submitted), :class:`~polythink.errors.BudgetExceededError`, or the
                provider's refusal of the batch.
            ClientClosedError: the client is closed.
        """
        from polythink.batch import submit_batch

        self._started()
        if source is None:
            found = [
                i
                for i, s in enumerate(self.sources)
                if get_provider(s.provider).batches is not None
            ]
            if not found:
                raise InvalidInputError(
                    "no source of this client has a batch API (openai, openai-responses, "
                    "anthropic and gemini have one)"
                )
            source = found[0]
        if isinstance(source, bool) or not isinstance(source, int):
            raise InvalidInputError(
                f"source must be a source index (an int from 0 to {len(self.sources) - 1}) or "
                f"None for the first source with a batch API; got {type(source).__name__} "
                f"{source!r}"
            )
        if not 0 <= source < len(self.sources):
            raise InvalidInputError(
                f"source must be a source index from 0 to {len(self.sources) - 1}"
            )
        return await submit_batch(self, source, requests, name=name)

    def resume_batch(
        self, saved: str | Path | Mapping[str, Any], *, response_format: Any = None
    ) -> BatchJob:
        """Attach a batch job saved by :meth:`BatchJob.save` (or its ``to_dict()``), in this
        or another process, to this client's matching source (same provider, model and
        endpoint); its results are then read as if it had been submitted here.

        ``response_format`` replaces the requests' saved formats (a model class saved with
        the job is imported by its module path when this is not given).

        Raises:
            ValueError: not a saved job, no matching source, or a saved model class that
                cannot be imported.
        """
        from polythink.batch import resume_batch

        return resume_batch(self, saved, response_format=response_format)

    def _source_parts(
        self, index: int
    ) -> tuple[HTTPTransport, ReasoningMiddleware, BudgetMiddleware | None]:
        """The transport, reasoning layer and budget layer of source ``index`` (for batches,
        which build and parse bodies as calls do, outside the onion).

        Raises:
            ClientClosedError: the client is closed (or RuntimeError: never started).
        """
        self._started()
        return self._transports[index], self._reasoning[index], self._budget_layers[index]

    async def aclose(self) -> None:
        """Commit the cache entries still pending, close the HTTP client if this client
        created it, and the Redis connections.

        Afterwards ``complete`` and ``stream``, and any stream still being read, raise
        :class:`~polythink.errors.ClientClosedError` until the client is started again.
        """
        http, self._http, self._chain = self._http, None, None
        release_http_logs(self)
        if self._cache is not None:
            await self._cache.aclose()
        if http is not None:
            self._closed = True
        if http is not None and self._given_http is None:
            await http.aclose()
        for shared in (self._shared, self._store):
            close = getattr(shared, "aclose", None)
            if close is not None and callable(close):
                await close()

    def _started(self) -> Chain:
        if self._chain is None:
            if self._closed:
                raise self._closed_error()
            raise RuntimeError(
                "use the client inside 'async with Client(...)', or call client.start() (no "
                "await) and later 'await client.aclose()'"
            )
        if self._given_http is not None and self._given_http.is_closed:
            raise ClientClosedError(
                "the client is closed: the httpx.AsyncClient given as http_client was closed "
                "by its owner"
            )
        loop = running_asyncio_loop()
        if loop is not self._loop:
            if self._loop is None:
                self._loop = loop  # started outside any loop: the first call's is its own
            elif loop is not None:
                raise ClientLoopError(
                    "this Client was started in another event loop, whose connections it holds "
                    "(a Client made once and used under several asyncio.run() calls, or from "
                    "another thread's loop): create it inside the loop that uses it, or "
                    "'await client.aclose()' in its own loop and start it again in this one"
                )
        return self._chain

    def _closed_error(self) -> ClientClosedError:
        return ClientClosedError(
            "the client is closed (aclose() ran, or its 'async with' block ended); open it "
            "again with 'async with client:' or client.start()"
        )

    def request(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        reasoning_effort: Effort | str | bool | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        stop: str | Sequence[str] | None = None,
        cache: CacheMode = True,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        stream: bool = False,
        system_suffix: str | None = None,
        prompt_cache: PromptCache | bool | None = None,
        response_format: type[Any] | ResponseFormat[Any] | Mapping[str, Any] | None = None,
        tag: str | None = None,
        prefix_mismatch: str | None = None,
        service_tier: ServiceTier | str | None = None,
    ) -> Request:
        """Build and validate the :class:`Request` for a call (what ``complete`` sends).

        Raises:
            ValueError: for malformed messages or tools, an unknown effort, a
                non-positive ``max_tokens`` or ``timeout``, a ``temperature`` outside
                [0, 2] or ``top_p`` outside [0, 1], a ``stop`` that is not strings, an
                ``extra_body`` that is not a dict, a ``cache`` other than ``True``,
                ``False`` or ``"refresh"``, a ``system_suffix`` that is not a string, a
                ``prompt_cache`` that is not ``True``/``False``/``None``/``PromptCache``, or
                a ``tool_choice`` other than ``"auto"``, ``"none"``, ``"required"`` (with
                tools), a declared tool's name, or OpenAI's ``{"type": "function", ...}``
                naming one (a name becomes that shape), a ``response_format`` that is not
                one of :class:`~polythink.types.ResponseFormat`'s forms (or whose schema is
                not valid under its JSON Schema draft), a ``tag`` that is
                not 1 to 128 printable characters, an unknown ``service_tier``, or a
                ``prefix_mismatch`` other than ``"error"``, ``"drop_block"`` or ``None``.
        """
        check_prefix_mismatch(prefix_mismatch, "prefix_mismatch")
        if system_suffix is not None and not isinstance(system_suffix, str):
            raise InvalidInputError(
                f"system_suffix must be a string; got {type(system_suffix).__name__}"
            )
        if system_suffix:
            check_text(system_suffix, "system_suffix")
        if cache is not True and cache is not False and cache != "refresh":
            raise InvalidInputError(f'cache must be True, False or "refresh"; got {cache!r}')
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens <= 0):
            raise InvalidInputError(
                f"max_tokens must be a positive int (tokens); got {max_tokens!r}"
            )
        if timeout is not None and not (_is_number(timeout) and 0 < timeout < math.inf):
            raise InvalidInputError(
                f"timeout must be a positive number of seconds; got {timeout!r}"
            )
        if temperature is not None and not (_is_number(temperature) and 0 <= temperature <= 2):
            raise InvalidInputError(
                f"temperature must be a number from 0 to 2; got {temperature!r}"
            )
        if top_p is not None and not (_is_number(top_p) and 0 <= top_p <= 1):
            raise InvalidInputError(f"top_p must be a number from 0 to 1; got {top_p!r}")
        check_extra_body(extra_body, "extra_body")
        declared = coerce_tools(tools)
        fmt = ResponseFormat.coerce(response_format)
        if fmt is not None and fmt.output_type is None and fmt.schema is not None:
            schema_validator(fmt)  # a schema that is not JSON Schema fails before sending
        return Request(
            messages=coerce_messages(messages),
            reasoning_effort=Effort.parse(reasoning_effort),
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=_stop_sequences(stop),
            tools=declared,
            tool_choice=_tool_choice(tool_choice, declared),
            extra_body=extra_body,
            stream=stream,
            timeout=timeout,
            cache=cache,
            system_suffix=system_suffix or None,
            prompt_cache=PromptCache.coerce(prompt_cache),
            response_format=fmt,
            tag=check_tag(tag),
            prefix_mismatch=prefix_mismatch,
            service_tier=ServiceTier.parse(service_tier),
        )

    async def plan(
        self,
        messages: Iterable[Message | Mapping[str, Any]] = (),
        *,
        reasoning_effort: Effort | str | bool | None = None,
        max_tokens: int | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        prompt_cache: PromptCache | bool | None = None,
        tag: str | None = None,
        service_tier: ServiceTier | str | None = None,
    ) -> list[CallPlan]:
        """Say what a call would get from each source now, and why; nothing is sent or
        reserved.

        Per source, in order: the tier that would be applied (after a spend budget's
        step-down and the model's nearest-mapping), the body fragment, the output ceiling,
        the state of every budget that applies (spent, limit, reset), the call's worst-case
        cost in US dollars and whether the budgets can afford it now, with the reasons in
        words. ``messages`` (optional) make the worst case include the prompt. The budgets'
        spend is read where it lives (this process, or Redis with shared limits). Works
        without budgets too (the reasoning resolution alone), and before the client is
        started.

        Raises:
            ValueError: for malformed arguments (see :meth:`request`).
        """
        from polythink.middleware.budget import plain_plan

        request = self.request(
            list(messages) or [{"role": "user", "content": ""}],
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
            tools=tools,
            prompt_cache=prompt_cache,
            tag=tag,
            service_tier=service_tier,
        )
        plans = []
        for i, reasoning in enumerate(self._reasoning):
            layer = self._budget_layers[i]
            if layer is not None:
                plans.append(await layer.plan(request))
            else:
                plans.append(plain_plan(reasoning, request, i, tiers=self._tiers[i]))
        return plans

    @overload
    async def complete(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: None = None,
        **options: Unpack[CallOptions],
    ) -> Response: ...

    @overload
    async def complete(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: type[_M] | ResponseFormat[_M],
        **options: Unpack[CallOptions],
    ) -> Response[_M]: ...

    @overload
    async def complete(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any],
        **options: Unpack[CallOptions],
    ) -> Response[Any]: ...

    async def complete(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        reasoning_effort: Effort | str | bool | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        stop: str | Sequence[str] | None = None,
        cache: CacheMode = True,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        system_suffix: str | None = None,
        prompt_cache: PromptCache | bool | None = None,
        response_format: type[Any] | ResponseFormat[Any] | Mapping[str, Any] | None = None,
        tag: str | None = None,
        prefix_mismatch: str | None = None,
        service_tier: ServiceTier | str | None = None,
    ) -> Response[Any]:
        """Send a chat call and return the whole :class:`Response`.

        Args:
            messages: ``Message`` objects or OpenAI-style dicts.
            reasoning_effort: this call's tier (wins over the source's); ``None`` = unset.
            max_tokens: output ceiling in tokens (reasoning included where the provider
                counts it there).
            temperature, top_p, stop, tools, tool_choice: as in the OpenAI chat API;
                ``tool_choice="none"`` keeps the tools declared (and the cached prefix
                intact) while forbidding calls, on every wire: the way to ask for a final
                answer at the end of a tool loop.
            cache: ``True`` use the cache, ``False`` bypass it, ``"refresh"`` call and
                overwrite.
            timeout: total deadline in seconds for this call.
            extra_body: provider-specific body fields, merged last.
            system_suffix: what changes every call (a plan, memory, the date), sent after
                the conversation so that everything sent before stays the provider's cached
                prefix and keeps its thinking valid: on Anthropic a mid-conversation system
                message after the last user turn (turn-scoped with ``clear_at`` where the
                model takes it, or a user message on models without them), kept in place on
                later calls through the returned ``message``; on OpenAI a system message
                after the conversation; on Gemini and the compatible providers a user turn
                (see :mod:`polythink.transports.instructions`; Mistral edits the system
                prompt, its API refusing both).
            prefix_mismatch: what Anthropic does with a thinking block bound to a different
                conversation, for this call (see :attr:`~polythink.Source.prefix_mismatch`).
            prompt_cache: mark the prefix for the provider's prompt cache: ``True`` or a
                :class:`~polythink.PromptCache` (key, retention, TTL); see there for what
                each wire sends.
            response_format: ask for a JSON answer: a pydantic model class, a JSON Schema
                dict (bare or in OpenAI's ``{"type": "json_schema", "json_schema": {...}}``),
                ``{"type": "json_object"}``, or a :class:`~polythink.ResponseFormat` (name,
                description, ``strict``). ``response.parsed`` is then the validated value,
                typed as the model class (``Response[Invoice]``).
            tag: the caller's label for the call (a tenant or customer id): budgets scoped
                by ``tag`` count it under this value. Never sent, never part of the cache
                key.
            service_tier: this call's service tier (``flex``, ``standard``, ``priority``,
                ``auto``; wins over the source's): the price and the wait, sent as each
                provider spells it and mapped to the nearest one it takes (see
                :class:`~polythink.Source`). ``response.service_tier`` says which served the
                call, and its cost is priced there. Not part of the cache key.

        The returned ``response.message.metadata`` records provider, model as served,
        source index, start (Unix seconds) and duration (seconds) of the call; none of
        it is ever sent.

        Raises:
            ValueError: for malformed input (see :meth:`request`).
            PolythinkError: the typed error of the last source tried
                (:class:`~polythink.errors.OutputFormatUnsupportedError` when a source
                cannot produce ``response_format`` and no later one could either).
            OutputValidationError: the answer does not fit ``response_format``
                (:class:`~polythink.errors.OutputRefusedError`,
                :class:`~polythink.errors.OutputTruncatedError`), with its raw text.
                (:class:`~polythink.errors.BudgetExceededError` when no source's budgets
                could afford the call).
            ClientClosedError: the client is closed (see :meth:`aclose`).
        """
        request = self.request(
            messages,
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            tools=tools,
            tool_choice=tool_choice,
            stop=stop,
            cache=cache,
            timeout=timeout,
            extra_body=extra_body,
            system_suffix=system_suffix,
            prompt_cache=prompt_cache,
            response_format=response_format,
            tag=tag,
            prefix_mismatch=prefix_mismatch,
            service_tier=service_tier,
        )
        response = await self.send(request)
        if request.response_format is not None and response.parsed is None:
            # Not validated yet (the cache layer validates the answers it may store).
            return parse_output(response, request.response_format)
        return response

    @overload
    def stream(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: None = None,
        **options: Unpack[CallOptions],
    ) -> AsyncGenerator[TypedStreamEvent, None]: ...

    @overload
    def stream(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: type[_M] | ResponseFormat[_M],
        **options: Unpack[CallOptions],
    ) -> AsyncGenerator[TypedStreamEvent[_M], None]: ...

    @overload
    def stream(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        response_format: Mapping[str, Any],
        **options: Unpack[CallOptions],
    ) -> AsyncGenerator[TypedStreamEvent[Any], None]: ...

    async def stream(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        *,
        reasoning_effort: Effort | str | bool | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        tools: Sequence[Tool | Mapping[str, Any]] | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        stop: str | Sequence[str] | None = None,
        cache: CacheMode = True,
        timeout: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        system_suffix: str | None = None,
        prompt_cache: PromptCache | bool | None = None,
        response_format: type[Any] | ResponseFormat[Any] | Mapping[str, Any] | None = None,
        tag: str | None = None,
        prefix_mismatch: str | None = None,
        service_tier: ServiceTier | str | None = None,
    ) -> AsyncGenerator[TypedStreamEvent[Any], None]:
        """Send a chat call and yield its :class:`StreamEvent` s; ``done`` comes last.

        For a type checker each event is the view of its kind (:data:`TypedStreamEvent`):
        after ``if event.type == "done":`` its ``response`` is a ``Response``, after
        ``"text"`` its ``text`` a ``str``. An async generator: ``aclose()`` (or leaving an
        ``async with aclosing(...)`` block) ends it early and releases the connection. Same
        arguments as :meth:`complete`. With ``response_format`` the JSON arrives as
        ``text`` deltas (:class:`~polythink.structured.PartialJSON` turns them into the
        partial value) and the ``done`` event's ``response.parsed`` is the validated value;
        an answer that does not fit raises :class:`~polythink.errors.OutputValidationError`
        in place of ``done``.

        Raises:
            ValueError: for malformed input.
            PolythinkError: before the first event, the typed error of the last source
                tried; after it, :class:`~polythink.errors.StreamInterruptedError`, whose
                ``partial`` is marked ``interrupted`` (and its message's metadata too).
            ClientClosedError: the client is closed, or was closed while the stream was
                read.
        """
        request = self.request(
            messages,
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            tools=tools,
            tool_choice=tool_choice,
            stop=stop,
            cache=cache,
            timeout=timeout,
            extra_body=extra_body,
            stream=True,
            system_suffix=system_suffix,
            prompt_cache=prompt_cache,
            response_format=response_format,
            tag=tag,
            prefix_mismatch=prefix_mismatch,
            service_tier=service_tier,
        )
        async with aclosing(self._events(request, request.response_format)) as events:
            async for event in events:
                yield cast(TypedStreamEvent[Any], event)
