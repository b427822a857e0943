"""What every transport shares: the HTTP plumbing and the helpers that build responses.

A transport is the innermost handler of a source's onion: it builds the provider's body,
sends it with the client's one ``httpx.AsyncClient``, parses JSON or SSE, and maps every
failure to polythink's error taxonomy exactly once, with ``raise … from`` (the table is in
:mod:`polythink.transports.error_map`; SSE rules in :mod:`~polythink.transports.sse`; header
parsing in :mod:`~polythink.transports.headers`).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
import math
import re
import time
import urllib.parse
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager
from types import TracebackType
from typing import Any, Protocol, cast

import anyio
import httpx
import orjson

from polythink.auth import cloud_auth
from polythink.clouds import azure_url
from polythink.config import Source, check_headers
from polythink.errors import (
    ContentUnsupportedError,
    InvalidInputError,
    ModelNotFoundError,
    PolythinkError,
    RequestRejectedError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
    holds_secret,
)
from polythink.http import running_asyncio_loop
from polythink.providers import ProviderProfile
from polythink.reasoning.tiers import capacity_error, served_tier
from polythink.transports.carry import ttl_notes
from polythink.transports.error_map import (
    deadline_error,
    error_from_body,
    error_from_status,
    error_from_transport,
    sealed,
)
from polythink.transports.headers import header_request_id, parse_rate_limit
from polythink.transports.sse import SSEDecoder, SSELimitError
from polythink.types import (
    Cost,
    Effort,
    Message,
    MessageMetadata,
    NativeRelay,
    PromptCache,
    RateLimit,
    Request,
    Response,
    StreamEvent,
    ThinkingObservation,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from polythink.wire_json import loads_json

_log = logging.getLogger("polythink.transport")

__all__ = [
    "DONE",
    "LIST_HEADERS",
    "NOT_WHOLE",
    "SHAPE_ERRORS",
    "FrameDecoder",
    "HTTPTransport",
    "PartTypes",
    "answer_events",
    "append_system_suffix",
    "apply_overrides",
    "assistant_response",
    "check_parts",
    "deep_merge",
    "dumps",
    "joined_list",
    "joined_system",
    "mark_last_entry",
    "marked_content",
    "output_with_reasoning",
    "part_types",
    "path_segment",
    "prompt_cache_fields",
    "sampling_conflicts",
    "text_of",
    "token_count",
    "unwrapped_comments",
    "usage_counts",
    "with_notes",
    "with_rate_limit",
]

_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}
LIST_HEADERS = frozenset({"anthropic-beta", "openai-beta"})
"""Request headers whose value is a comma-separated list: a caller's and a source's are
joined (:meth:`HTTPTransport.native_headers`), never one replacing the other."""
_SSE_ACCEPT = "text/event-stream"


def dumps(body: Any) -> bytes:
    """Serialise a request body compactly as UTF-8 JSON.

    orjson writes the bytes ``json.dumps(body, separators=(",", ":"), ensure_ascii=False)``
    writes, about 18 times faster on a 700 KB conversation (0.45 ms against 8.4 ms,
    2026-12-01), with two differences that change no value a provider parses: a float below
    1e-4 is written in decimal or with a one-digit exponent (``0.00001``, ``1e-7`` where
    ``json`` writes ``1e-05``, ``1e-07``), and NaN or an infinity, which JSON cannot represent,
    is written as ``null`` rather than as the invalid ``NaN``. What orjson refuses (an integer
    beyond 64 bits, a key that is not a string) goes through ``json``.

    Raises:
        TypeError: a value neither encoder can represent.
        ValueError: a string with a lone surrogate (messages, tools, response formats and
            ``extra_body`` are checked when built; this guards any other field).
    """
    try:
        return orjson.dumps(body)
    except TypeError:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        found = text[exc.start : exc.end]
        where = _surrogate_at(body) or "the request body"
        raise InvalidInputError(
            f"{where} holds a lone surrogate U+{ord(found[0]):04X} near "
            f"{text[max(exc.start - 40, 0) : exc.start]!r}: text must be valid Unicode "
            "(UTF-8 encodable); it usually comes from bytes decoded with "
            "errors='surrogateescape' or a cut UTF-16 pair"
        ) from None


def _surrogate_at(value: Any, path: str = "") -> str | None:
    """The path in a request body (``stop[0]``, ``messages[1].content``) of the first
    string holding a lone surrogate, key or value; ``None`` if there is none. Run only
    when encoding failed, so the walk costs nothing on a good body."""
    if isinstance(value, str):
        return path or "the request body" if _LONE.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            at = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _LONE.search(key):
                return f"the key {at!r}"
            found = _surrogate_at(item, at)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _surrogate_at(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


_LONE = re.compile("[\ud800-\udfff]")


def path_segment(value: str, what: str, refused: str = "", why: str = "") -> str:
    """``value`` as one segment of a URL path: every character but letters, digits and
    ``-._~`` percent-encoded (RFC 3986 §2.1), so a ``/``, ``?``, ``#`` or ``%`` in it cannot
    leave the segment, add a query or cut the path (``../../../evil/x``, ``m?key=zzz&alt=x``,
    ``m#frag`` reach the provider as one odd name, which it refuses).

    Encoding cannot protect a character the path itself uses as a separator within a
    segment (Gemini's ``:`` before the method name): aiohttp's URL parser writes ``%3A``,
    ``%3D``, ``%26`` and the other characters a path may hold back as they are. Such
    characters, ``refused``, are refused instead, with ``why``.

    Raises:
        ValueError: ``value`` is empty, ``.`` or ``..`` (a dot segment, which URL
            normalisation resolves instead of sending), or holds one of ``refused``; the
            message names ``what``.
    """
    if value in ("", ".", ".."):
        raise InvalidInputError(f"{what} {value!r} cannot be a segment of a URL path")
    found = next((c for c in value if c in refused), None)
    if found is not None:
        raise InvalidInputError(f"{what} {value!r} holds {found!r}, {why}")
    return urllib.parse.quote(value, safe="")


SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError)
"""What reading an answer of the wrong shape raises (a ``choices`` item that is a number, a
text that is a list): the transports turn them into :class:`TransientError`
(``malformed_body`` / ``malformed_event``) so no Python error leaves polythink."""


def text_of(value: Any, where: str) -> str:
    """``value`` when it is text, ``""`` when absent (``None``).

    Raises:
        TypeError: naming ``where`` and the type, for anything else (a number where the
            wire has text is a broken answer, never an empty one).
    """
    if value is None:
        return ""
    if value.__class__ is not str and not isinstance(value, str):
        raise TypeError(f"{where} is {type(value).__name__}, not text")
    return value


def joined_list(*values: str | Iterable[str] | None) -> str | None:
    """One value of a list header (:data:`LIST_HEADERS`: ``anthropic-beta``, ``OpenAI-Beta``)
    holding every value of ``values`` once: the first one given as it was written, then each
    value of the others (a comma-separated header value, or a list) that it lacks, in order;
    ``None`` when there is none. Values polythink does not know pass through, as Anthropic asks
    of libraries and gateways (CONTINUITY.md §1.9)."""
    first: str | None = None
    seen: set[str] = set()
    extra: list[str] = []
    for value in values:
        if value is None:
            continue
        parts = [p.strip() for p in (value.split(",") if isinstance(value, str) else value)]
        if first is None and isinstance(value, str) and value.strip():
            first = value
            seen.update(p for p in parts if p)
            continue
        for part in parts:
            if part and part not in seen:
                seen.add(part)
                extra.append(part)
    if first is None:
        return ",".join(extra) or None
    return ",".join([first, *extra]) if extra else first


def deep_merge(base: dict[str, Any], fragment: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``fragment`` into ``base`` in place, recursing into nested objects.

    Values in ``fragment`` win; nested dicts merge key by key; lists are replaced whole.
    Returns ``base``.
    """
    for key, value in fragment.items():
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            deep_merge(current, value)
        elif isinstance(value, Mapping):
            base[key] = deep_merge({}, value)
        else:
            base[key] = value
    return base


_DEADLINE = "polythink.deadline"
"""Key in ``httpx.Response.extensions`` under which :meth:`HTTPTransport.open_stream` leaves
the stream's deadline (``time.monotonic()`` seconds) for :meth:`HTTPTransport.sse_events`."""
_BUDGET = "polythink.budget"
"""Key beside :data:`_DEADLINE`: the deadline's length in seconds, for the error message."""
_CHUNKS = "polythink.chunks"
"""Key beside :data:`_DEADLINE`: the body's one byte iterator (``aiter_bytes``), read by
:meth:`HTTPTransport.sse_events`, finished and closed by :meth:`HTTPTransport.open_stream`."""

DRAIN_BYTES = 64 * 1024
"""Most bytes read after a stream's end marker to reach the end of its body (see
:meth:`HTTPTransport.open_stream`). Providers end the body right after the marker: what is
left is the chunked encoding's terminator, which carries no data."""
DRAIN_SECONDS = 0.1
"""Longest wait, in seconds, for the end of a body after its stream's end marker."""


ERROR_BODY_BYTES = 64 * 1024
"""Most bytes of an error answer's body read (a polythink error keeps its first 2,000
characters); the rest is not read."""


FAIR_SLICE = 0.01
"""Longest a body reader runs, in seconds, before it lets the event loop's other tasks run.
A read whose data is already buffered returns without giving the loop a turn (aiohttp's
does), so a server sending faster than its answer is parsed would otherwise hold the loop
for as long as it keeps sending: other calls, timers and cancel scopes would wait."""

_SUSPENDED = 0.0005
"""A read that took longer than this, in seconds, is taken to have waited for the socket,
giving the loop a turn."""


def _turn(before: float, after: float, turn: float) -> float:
    """When the loop last had a turn, as a reader sees it: ``after`` when the read between
    ``before`` and ``after`` took long enough to have waited, else ``turn``."""
    return after if after - before > _SUSPENDED else turn


class BodyOverLimit(Exception):
    """Raised by :class:`_Metered` below httpx once a body passes ``max_body``; the transport
    reading it turns it into :class:`~polythink.errors.ResponseTooLargeError`."""


class _Metered(httpx.AsyncByteStream):
    """A response's raw byte stream that stops once more than ``limit`` bytes came through."""

    __slots__ = ("_inner", "_limit")

    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for chunk in self._inner:
            left -= len(chunk)
            if left < 0:
                raise BodyOverLimit
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class FrameDecoder(Protocol):
    """What :meth:`HTTPTransport.sse_events` reads a body with: bytes in, ``(event type,
    data)`` pairs out (:class:`~polythink.transports.sse.SSEDecoder`, or the AWS event-stream
    one); ``close()`` at the end of the body, after which ``closed`` is true."""

    closed: bool

    def feed(self, chunk: bytes) -> list[tuple[str, str]]: ...

    def close(self) -> list[tuple[str, str]]: ...


class HTTPTransport:
    """Base class of the provider transports: one source, the shared client, the URL.

    Subclasses implement ``complete`` and ``stream`` with the helpers here. Everything
    that does not change per call (URL, headers, timeouts) is computed once in
    ``__init__``.

    Timeouts (:class:`~polythink.config.Timeout` of the source): ``connect`` bounds the
    connection (and a write, and waiting for a pooled connection); ``first_byte`` the wait
    for the response head after sending (unset: ``idle`` for a stream, nothing but the
    deadline for a non-streamed answer); ``idle`` the silence between two chunks of a
    streamed body; the deadline (``request.timeout`` when set — the retry layer sets it to
    what is left of the total — else ``total``) the whole exchange, streams included.

    Args:
        source: the source this transport serves.
        index: the source's position in the client (reported on responses and errors).
        profile: the provider profile.
        client: the client's shared ``httpx.AsyncClient``.
        api_key: the resolved key, or ``None``.
    """

    def __init__(
        self,
        *,
        source: Source,
        index: int,
        profile: ProviderProfile,
        client: httpx.AsyncClient,
        api_key: str | None,
    ) -> None:
        self.source = source
        self.index = index
        self.profile = profile
        self.client = client
        self._keys = (api_key, *source.secrets())
        self.auth = cloud_auth(source, profile, api_key, index)
        """The request signer of a cloud source without a key (:mod:`polythink.auth`), or
        ``None``; httpx runs it on each request once built."""
        self._auth: Any = self.auth if self.auth is not None else httpx.USE_CLIENT_DEFAULT
        self._logged_drops: set[str] = set()
        self.capability = source.capability
        """The model's registry entry (``None``: not registered; :attr:`Source.capability`:
        an Azure deployment's is its ``base_model``'s)."""
        capability = self.capability if profile.strict_sampling else None
        self._sampling = capability.sampling if capability is not None else "any"
        self._capability_for_cache = capability if "key" in profile.prompt_cache else None
        self._reasons_by_default = capability is not None and capability.default_reasons
        headers = dict(_JSON_HEADERS)
        if api_key:
            if profile.auth == "bearer":
                headers["authorization"] = f"Bearer {api_key}"
            else:
                headers[profile.auth] = api_key
        headers.update(self.extra_headers())
        if source.headers:
            headers.update({k.lower(): v for k, v in source.headers.items()})
        self.headers = headers
        self.stream_headers = {**headers, "accept": _SSE_ACCEPT}
        t = source.timeouts
        self._timeout = httpx.Timeout(
            connect=t.connect, read=t.first_byte, write=t.connect, pool=t.connect
        )
        head = t.first_byte if t.first_byte is not None else t.idle
        self._stream_timeout = httpx.Timeout(
            connect=t.connect, read=head, write=t.connect, pool=t.connect
        )
        self._idle = t.idle
        self._total = t.total
        self.read_limits = source.read_limits
        self._urls: dict[str, httpx.URL] = {}

    def _url(self, url: str) -> httpx.URL:
        """``url`` parsed once: a source posts to a handful of URLs, and httpx parses a string
        again on every request it builds."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= 64:
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def api_url(self, path: str) -> str:
        """The URL of the API ``path`` (``/chat/completions``, ``/responses``) on this source:
        ``{endpoint}{path}``; on Azure with a dated ``api_version``, the deployments API's
        (:func:`polythink.clouds.azure_url`)."""
        source = self.source
        if self.profile.cloud == "azure":
            return azure_url(source.endpoint, path, source.model, source.api_version)
        return f"{source.endpoint}{path}"

    @property
    def _secrets(self) -> tuple[str | None, ...]:
        """The credentials redacted from every error: the key, credential headers, and the
        bearer token a cloud signer sends now."""
        token = getattr(self.auth, "secret", None)
        return (*self._keys, token) if token else self._keys

    def extra_headers(self) -> dict[str, str]:
        """Provider headers sent on every call (for example ``anthropic-version``)."""
        return {}

    def secrets(self) -> tuple[str | None, ...]:
        """The credentials this transport sends: its key and the source's credential
        headers (redacted from every error it maps)."""
        return self._secrets

    async def complete(self, request: Request) -> Response:
        """Send a non-streaming call; subclasses implement."""
        raise NotImplementedError

    def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        """Send a streaming call; subclasses implement."""
        raise NotImplementedError

    def relay(self, request: Request) -> NativeRelay | None:
        """Where this transport hands its raw answer to ``request``: the relay of its
        :class:`~polythink.types.NativeBody` when the body is written for this wire (the
        call is sent as written), else ``None``."""
        native = request.native
        if native is None or native.relay is None or native.wire != self.profile.wire:
            return None
        return native.relay

    def relay_notes(self, relay: NativeRelay | None, notes: Sequence[str]) -> None:
        """Hand a streamed attempt's notes to ``relay`` (:meth:`relay`) before it is sent,
        when there are some: a relayed stream's head goes out before the response that
        carries them."""
        if relay is not None and notes:
            relay.noted(self.index, notes)

    def native_headers(self, headers: dict[str, str], request: Request) -> dict[str, str]:
        """``headers`` with the caller's request headers of this wire over them, when the
        call carries a body written for this wire (:class:`~polythink.types.NativeBody`);
        a list header (:data:`LIST_HEADERS`) joins the caller's values and the source's
        (the caller's as given, then the source's it lacks)."""
        native = request.native
        if native is None or not native.headers or native.wire != self.profile.wire:
            return headers
        merged = dict(headers)
        for name, value in native.headers.items():
            lowered = name.lower()
            current = merged.get(lowered)
            if lowered in LIST_HEADERS and current:
                merged[lowered] = joined_list(value, current) or value
            else:
                merged[lowered] = value
        return merged

    def _headers(self, headers: dict[str, str], request: Request) -> dict[str, str]:
        """``headers`` with the caller's headers of this wire (:meth:`native_headers`), then
        the call's ``extra_headers``, merged over them (they win).

        Raises:
            ValueError: ``extra_headers`` is not a mapping of strings to strings, or holds
                a name or value that is not valid HTTP (:func:`~polythink.config.check_headers`).
        """
        tier = request.tier_resolution
        if tier is not None and tier.headers:
            headers = {**headers, **{name.lower(): v for name, v in tier.headers.items()}}
        if request.native is not None:
            headers = self.native_headers(headers, request)
        extra = request.extra_headers
        if not extra:
            return headers
        if not isinstance(extra, Mapping) or not all(
            isinstance(name, str) and isinstance(value, str) for name, value in extra.items()
        ):
            # The values are never echoed: they may be credentials.
            raise InvalidInputError(
                "Request.extra_headers must map header names to string values; got a "
                f"{type(extra).__name__} holding something else"
            )
        check_headers(extra, "Request.extra_headers")
        return {**headers, **{name.lower(): value for name, value in extra.items()}}

    def _budget(self, request: Request) -> float | None:
        return request.timeout if request.timeout is not None else self._total

    def _transport_error(
        self,
        exc: BaseException,
        stage: str = "response",
        *,
        streamed: bool = False,
        budget: float | None = None,
    ) -> PolythinkError:
        """The mapped error for ``exc`` from the HTTP layer, ``exc`` chained only when no key
        is reachable from it; raise it after the ``except`` block, so ``exc`` is not its
        context either (:func:`~polythink.transports.error_map.error_from_transport`). A
        timeout's message names the source's timeout that fired, read for a ``streamed``
        answer or not, or the ``budget`` seconds the call had left."""
        return error_from_transport(
            exc,
            provider=self.profile.id,
            source_index=self.index,
            stage=stage,
            secrets=self._secrets,
            timeouts=self.source.timeouts,
            streamed=streamed,
            budget=budget,
        )

    def _clean(self, exc: BaseException) -> BaseException | None:
        """``exc`` when no key is reachable from it, else ``None``: what may be chained."""
        return None if holds_secret(exc, self._secrets) else exc

    def _deadline_error(self, budget: float | None) -> RequestTimeoutError:
        return deadline_error(self.profile.id, self.index, budget)

    async def post_json(self, url: str, body: Mapping[str, Any], request: Request) -> Any:
        """POST ``body`` and return the parsed JSON of a 2xx answer.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer, a transport failure or
                timeout, the deadline (:class:`RequestTimeoutError`, ``"deadline"``), or a
                body that is not JSON (:class:`TransientError`, ``"malformed_body"``).
        """
        data, _ = await self.post_json_with_rate_limit(url, body, request)
        return data

    async def post_json_with_rate_limit(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> tuple[Any, RateLimit | None]:
        """POST ``body``; return the parsed JSON of a 2xx answer and its rate-limit headers.

        Raises:
            PolythinkError: as :meth:`post_json_with_headers`.
        """
        data, headers = await self.post_json_with_headers(url, body, request)
        return data, parse_rate_limit(headers)

    async def post_json_with_headers(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> tuple[Any, httpx.Headers]:
        """POST ``body``; return the parsed JSON of a 2xx answer and the answer's headers.

        The body is read within the source's :class:`~polythink.config.ReadLimits` and the
        call's deadline, both checked on every chunk read; an error answer's first
        :data:`ERROR_BODY_BYTES` only.

        Raises:
            PolythinkError: as :meth:`post_json`, and
                :class:`~polythink.errors.ResponseTooLargeError` for a body over a limit.
        """
        budget = self._budget(request)
        req = self.client.build_request(
            "POST",
            self._url(url),
            content=dumps(body),
            headers=self._headers(self.headers, request),
            timeout=self._timeout,
        )
        response: httpx.Response | None = None
        content: bytes | None = None
        failure: PolythinkError | None = None
        deadline = None if budget is None else time.monotonic() + budget
        try:
            with deadline_scope(budget):
                # Per request, so a caller's own http_client with follow_redirects=True
                # cannot carry the key to another host either.
                response = await self.client.send(
                    req, stream=True, follow_redirects=False, auth=self._auth
                )
                try:
                    if response.status_code >= 300:
                        content = await self._read_error_body(response)
                    else:
                        content = await self._read_body(response, deadline, budget)
                finally:
                    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                        await response.aclose()
                    _unbind(response)
        except PolythinkError:
            raise
        except Exception as exc:
            stage = "body" if response is not None else "response"
            failure = self._transport_error(exc, stage, budget=budget)
        if failure is not None:
            raise failure
        if response is None or content is None:
            raise self._deadline_error(budget)
        relay = self.relay(request)
        if response.status_code >= 300:
            if relay is not None:
                relay.failed(self.index, response.status_code, response.headers, content)
            raise self._status_error(response, content)
        if relay is not None:
            relay.answered(self.index, response.status_code, response.headers, content)
        try:
            return loads_json(content), response.headers
        except ValueError as exc:
            malformed = self._not_json(response, content, exc)
        # Outside the handler: the decoder's error holds the whole body (its ``doc``).
        raise malformed

    def _not_json(
        self, response: httpx.Response, content: bytes, exc: ValueError
    ) -> TransientError:
        """The error for an answer whose body is not JSON (``malformed_body``), with its start."""
        malformed = sealed(
            TransientError(
                f"{self.profile.id} answered HTTP {response.status_code} with a body that is "
                "not JSON",
                provider=self.profile.id,
                source_index=self.index,
                status_code=response.status_code,
                error_type="malformed_body",
                request_id=header_request_id(response.headers),
                body=content[:2000].decode("utf-8", "replace"),
            ),
            self._secrets,
        )
        malformed.__cause__ = self._clean(exc)
        return malformed

    async def _read_body(
        self, response: httpx.Response, deadline: float | None, budget: float | None
    ) -> bytes:
        """Read the whole body of ``response`` within the read limits and ``deadline``
        (``time.monotonic()`` seconds), both checked on every chunk.

        Raises:
            ResponseTooLargeError: over ``max_body`` (a ``content-length`` over it before
                anything is read) or ``max_decoded``.
            RequestTimeoutError: the deadline passed.
        """
        return await self._collect(self._chunks(response), response, deadline, budget)

    async def _collect(
        self,
        chunks: AsyncGenerator[bytes, None],
        response: httpx.Response,
        deadline: float | None,
        budget: float | None,
    ) -> bytes:
        """Read ``chunks`` (from :meth:`_chunks`) to their end; see :meth:`_read_body`."""
        limit = self.read_limits.max_decoded
        parts: list[bytes] = []
        size = 0
        monotonic = time.monotonic
        over = False
        async with aclosing(chunks):
            try:
                turn = before = monotonic()
                async for chunk in chunks:
                    now = monotonic()
                    turn = _turn(before, now, turn)
                    size += len(chunk)
                    if size > limit:
                        raise self._too_large("max_decoded", limit, response)
                    if deadline is not None and now > deadline:
                        raise self._deadline_error(budget)
                    parts.append(chunk)
                    if now - turn > FAIR_SLICE:
                        await anyio.lowlevel.checkpoint()
                        now = monotonic()
                        turn = now
                    before = now
            except BodyOverLimit:
                over = True
        if over:
            raise self._too_large("max_body", self.read_limits.max_body, response)
        return b"".join(parts)

    async def whole_answer(self, response: httpx.Response) -> Any:
        """The parsed JSON body of a streamed call the server answered whole, as JSON
        (``content-type: application/json``), as some servers do whatever ``stream: true``
        says; :data:`NOT_WHOLE` for an event stream. Read within the read limits and the
        call's deadline, from the response :meth:`open_stream` yielded; the transport parses
        it as a non-streamed answer and streams that (:func:`answer_events`).

        Raises:
            TransientError: a body that is not JSON (``"malformed_body"``).
            ResponseTooLargeError, RequestTimeoutError: as :meth:`_read_body`.
        """
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json" and not kind.endswith("+json"):
            return NOT_WHOLE
        chunks = response.extensions.get(_CHUNKS) or self._chunks(response)
        deadline: float | None = response.extensions.get(_DEADLINE)
        failure: PolythinkError | None = None
        try:
            content = await self._collect(
                chunks, response, deadline, response.extensions.get(_BUDGET)
            )
        except PolythinkError:
            raise
        except Exception as exc:
            failure = self._transport_error(
                exc, "body", streamed=True, budget=response.extensions.get(_BUDGET)
            )
        if failure is not None:
            raise failure
        try:
            return loads_json(content)
        except ValueError as exc:
            malformed = self._not_json(response, content, exc)
        raise malformed

    async def _read_error_body(self, response: httpx.Response) -> bytes:
        """The start of an error answer's body: at most :data:`ERROR_BODY_BYTES` bytes are
        read (an error keeps 2,000 characters of it), the rest is left unread."""
        parts: list[bytes] = []
        size = 0
        with contextlib.suppress(Exception):
            async for chunk in response.aiter_bytes():
                parts.append(chunk)
                size += len(chunk)
                if size >= ERROR_BODY_BYTES:
                    break
        return b"".join(parts)[:ERROR_BODY_BYTES]

    def _chunks(self, response: httpx.Response) -> AsyncGenerator[bytes, None]:
        """The decoded byte iterator of ``response``'s body, its raw bytes metered against
        ``max_body``.

        Raises:
            ResponseTooLargeError: at once when ``content-length`` is over ``max_body``.
        """
        limit = self.read_limits.max_body
        length = response.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise self._too_large("max_body", limit, response)
        response.stream = _Metered(cast(httpx.AsyncByteStream, response.stream), limit)
        return cast(AsyncGenerator[bytes, None], response.aiter_bytes())

    def _too_large(
        self, limit: str, value: int, response: httpx.Response | None
    ) -> ResponseTooLargeError:
        what = {
            "max_line": f"a line of its event stream over {value:,} characters",
            "max_event": f"an event whose data is over {value:,} characters",
            "max_body": f"a body over {value:,} bytes",
            "max_decoded": f"a body over {value:,} bytes once decompressed",
        }[limit]
        return ResponseTooLargeError(
            f"{self.profile.id} sent {what}; not read further (ReadLimits.{limit}; "
            "Source(read_limits=ReadLimits(...)) raises it)",
            limit=limit,
            limit_value=value,
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code if response is not None else None,
            error_type="response_too_large",
            request_id=header_request_id(response.headers) if response is not None else None,
            should_retry=False,
        )

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        files: Mapping[str, Any] | None = None,
        data: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[bytes, httpx.Headers]:
        """Send one request of a batch's life (upload, create, poll, cancel, download) with
        this source's credentials and headers; return a 2xx answer's body and headers.

        ``json_body`` is sent as JSON; ``files`` and ``data`` as ``multipart/form-data``
        (httpx sets its content type). ``timeout`` bounds the whole exchange, in seconds
        (``None``: the source's total).

        Raises:
            PolythinkError: the mapped error of a non-2xx answer, a transport failure or the
                deadline, as for a call.
        """
        headers = dict(self.headers)
        if json_body is None:
            headers.pop("content-type", None)
        budget = timeout if timeout is not None else self._total
        response: httpx.Response | None = None
        failure: PolythinkError | None = None
        try:
            req = self.client.build_request(
                method,
                url,
                content=dumps(json_body) if json_body is not None else None,
                files=files,
                data=data,
                headers=headers,
                timeout=self._timeout,
            )
            # A multipart body is a stream httpx encodes lazily; read it here, so every HTTP
            # layer under httpx (aiohttp's too) is handed plain bytes.
            req.read()
            with deadline_scope(budget):
                response = await self.client.send(req, follow_redirects=False)
        except Exception as exc:
            failure = self._transport_error(exc, budget=budget)
        if failure is not None:
            raise failure
        if response is None:
            raise self._deadline_error(budget)
        content = response.content
        _unbind(response)
        if response.status_code >= 300:
            raise self._status_error(response, content)
        return content, response.headers

    def batch_body(self, request: Request) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """The body a batch sends for ``request`` (the non-streamed body :meth:`complete`
        would send), the notes its answer carries, and what :meth:`parse_answer` needs to
        parse that answer (JSON-ready: it is saved with the batch job).

        Raises:
            PolythinkError: what :meth:`complete` raises before sending (a tier, a content
                part or a format this source cannot take).
        """
        raise NotImplementedError(f"{self.profile.wire} has no batch body")

    def parse_answer(self, data: Any, hints: Mapping[str, Any], notes: list[str]) -> Response:
        """Parse a non-streamed answer body (a batch result) as :meth:`complete` does.

        Raises:
            PolythinkError: a body that is not an answer (mapped as :meth:`complete` maps it).
        """
        raise NotImplementedError(f"{self.profile.wire} parses no batch answers")

    @asynccontextmanager
    async def open_stream(
        self, url: str, body: Mapping[str, Any], request: Request
    ) -> AsyncIterator[httpx.Response]:
        """Open a streamed POST; yields the response once its status is known to be 2xx.

        The deadline covers the whole exchange: the wait for the head here, and the body
        read through :meth:`sse_events`. After the head, httpx's read timeout becomes the
        idle timeout. The connection is released when the block exits, however it exits.

        A block that exits normally has read its stream to the end marker (``data: [DONE]``,
        ``message_stop``, ``response.completed``) or to the end of the body: what is left of
        the body is then read, at most :data:`DRAIN_BYTES` within :data:`DRAIN_SECONDS` (or
        what is left of the deadline, when less), so the connection goes back to the pool
        for the next call; a connection whose body has not ended by then is closed. A block
        left by an exception (an error, a cancellation, a caller that stopped reading) closes
        the connection without reading further.

        Raises:
            PolythinkError: the mapped error for a non-2xx answer, a transport failure or
                timeout, or the deadline.
        """
        budget = self._budget(request)
        req = self.client.build_request(
            "POST",
            self._url(url),
            content=dumps(body),
            headers=self._headers(self.stream_headers, request),
            timeout=self._stream_timeout,
        )
        response: httpx.Response | None = None
        chunks: AsyncGenerator[bytes, None] | None = None
        failure: PolythinkError | None = None
        try:
            with deadline_scope(budget):
                response = await self.client.send(
                    req, stream=True, follow_redirects=False, auth=self._auth
                )
        except Exception as exc:
            failure = self._transport_error(exc, streamed=True, budget=budget)
        if failure is not None:
            raise failure
        if response is None:
            raise self._deadline_error(budget)
        relay = self.relay(request)
        try:
            if response.status_code >= 300:
                content = await self._read_error_body(response)
                if relay is not None:
                    relay.failed(self.index, response.status_code, response.headers, content)
                raise self._status_error(response, content)
            if relay is not None:
                relay.opened(self.index, response.status_code, response.headers)
            # httpcore reads the read timeout from the request's extensions when the body
            # iteration starts, so from here on it bounds the silence between chunks.
            timeouts = response.request.extensions.get("timeout")
            if isinstance(timeouts, dict):
                timeouts["read"] = self._idle
            if budget is not None:
                response.extensions[_DEADLINE] = time.monotonic() + budget
                response.extensions[_BUDGET] = budget
            chunks = self._chunks(response)
            response.extensions[_CHUNKS] = chunks
            yield response
            await self._finish_body(response, chunks)
        finally:
            # A connection that fails to close is gone either way; what ended the block
            # (the answer, or its error) is what the caller needs.
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                if chunks is not None:
                    # The iterator refers to the response: dropping it here leaves no cycle.
                    del response.extensions[_CHUNKS]
                    await chunks.aclose()
                await response.aclose()
                _unbind(response)

    @staticmethod
    async def _finish_body(response: httpx.Response, chunks: AsyncGenerator[bytes, None]) -> None:
        """Read the rest of a body whose stream ended, within :data:`DRAIN_BYTES` and
        :data:`DRAIN_SECONDS`; a body read to its end returns the connection to the pool
        (httpx closes the response then). A read error is left to the close that follows:
        the answer is complete."""
        if response.is_closed:
            return
        seconds = DRAIN_SECONDS
        deadline: float | None = response.extensions.get(_DEADLINE)
        if deadline is not None:
            seconds = min(seconds, deadline - time.monotonic())
        left = DRAIN_BYTES
        with anyio.move_on_after(seconds), contextlib.suppress(Exception):
            async for chunk in chunks:
                left -= len(chunk)
                if left < 0:
                    return

    async def sse_events(
        self, response: httpx.Response, decoder: FrameDecoder | None = None
    ) -> AsyncGenerator[tuple[str, str], None]:
        """Yield ``(event_type, data)`` pairs from a streamed response.

        When the body ends, the event still pending in ``decoder`` (one without its closing
        blank line) is yielded last, with ``decoder.closed`` set (see :mod:`.sse`). A
        decoder of another framing (:class:`~polythink.transports.eventstream.EventStreamDecoder`
        for AWS event streams) is read the same way.

        Silence longer than the idle timeout fails through httpx's read timeout; the
        deadline is checked against the clock per chunk, and a cancel scope bounds a read
        only once less than the idle timeout is left before it, so the common chunk costs
        one clock read rather than a scope.

        Raises:
            PolythinkError: a transport failure mid-stream, the idle timeout
                (``"idle_timeout"``) or the deadline (``"deadline"``), mapped at this
                boundary.
        """
        limits = self.read_limits
        if decoder is None:
            decoder = self.sse_decoder()
        deadline: float | None = response.extensions.get(_DEADLINE)
        idle = math.inf if self._idle is None else self._idle
        monotonic = time.monotonic
        # The iterator open_stream made (it finishes and closes it), or, for a response
        # opened elsewhere, the body's own.
        chunks: AsyncGenerator[bytes, None] = response.extensions.get(_CHUNKS) or cast(
            AsyncGenerator[bytes, None], response.aiter_bytes()
        )
        decoded = 0
        turn = monotonic()
        while True:
            failure: PolythinkError | None = None
            try:
                now = monotonic()
                if now - turn > FAIR_SLICE:
                    # Every chunk so far was already buffered: let the loop's other tasks run.
                    await anyio.lowlevel.checkpoint()
                    now = monotonic()
                if deadline is None:
                    chunk = await chunks.__anext__()
                else:
                    # Checked here as well as by the scope: a read of what is already buffered
                    # returns without giving the scope's timer a chance to fire.
                    left = deadline - now
                    if left <= 0:
                        raise self._deadline_error(response.extensions.get(_BUDGET))
                    if left > idle:
                        chunk = await chunks.__anext__()
                    else:
                        chunk = b""
                        with anyio.move_on_after(left) as scope:
                            chunk = await chunks.__anext__()
                        if scope.cancelled_caught:
                            raise self._deadline_error(response.extensions.get(_BUDGET))
                turn = _turn(now, monotonic(), turn)
                decoded += len(chunk)
                if decoded > limits.max_decoded:
                    raise self._too_large("max_decoded", limits.max_decoded, response)
                events = decoder.feed(chunk)
            except StopAsyncIteration:
                try:
                    events = decoder.close()
                except SSELimitError as exc:
                    raise self._too_large(exc.limit, exc.limit_value, response) from None
                for event in events:
                    yield event
                return
            except PolythinkError:
                raise
            except SSELimitError as exc:
                failure = self._too_large(exc.limit, exc.limit_value, response)
            except BodyOverLimit:
                failure = self._too_large("max_body", limits.max_body, response)
            except Exception as exc:
                budget = response.extensions.get(_BUDGET)
                failure = self._transport_error(exc, "body", streamed=True, budget=budget)
            if failure is not None:
                raise failure
            for event in events:
                yield event

    def sse_decoder(self) -> SSEDecoder:
        """A decoder for one stream of this source, within its line and event limits."""
        return SSEDecoder(self.read_limits.max_line, self.read_limits.max_event)

    def in_band_error(self, error: Any, response: httpx.Response | None = None) -> PolythinkError:
        """Map an error found inside a 2xx stream or body (with the answer's rate limits)."""
        mapped = error_from_body(
            error,
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code if response is not None else None,
            request_id=header_request_id(response.headers) if response is not None else None,
            secrets=self._secrets,
        )
        if response is not None:
            mapped.rate_limit = parse_rate_limit(response.headers)
        return self.about_model(mapped)

    def _status_error(self, response: httpx.Response, content: bytes) -> PolythinkError:
        """The mapped error of a non-2xx answer (see :func:`error_from_status`); a "no
        capacity at this service tier" answer of this provider is a
        :class:`~polythink.errors.CapacityUnavailableError`
        (:func:`~polythink.reasoning.tiers.capacity_error`)."""
        error = error_from_status(
            response.status_code,
            response.headers,
            content,
            provider=self.profile.id,
            source_index=self.index,
            secrets=self._secrets,
        )
        return self.about_model(capacity_error(error, self.profile.service_tiers))

    def served_tier(self, raw: object) -> str | None:
        """The service tier an answer reported (``raw`` as the provider spelt it), in
        polythink's vocabulary where this provider's row maps it; ``None`` for no value."""
        return served_tier(self.profile.service_tiers, raw)

    def served_tier_header(self, headers: Mapping[str, str]) -> str | None:
        """The service tier a response header reports, where this provider's row says one
        does (Gemini's ``x-gemini-service-tier``); ``None`` otherwise."""
        wire = self.profile.service_tiers
        if wire is None or wire.served is None or wire.served[0] != "header":
            return None
        return served_tier(wire, headers.get(wire.served[1]))

    def about_model(self, error: PolythinkError) -> PolythinkError:
        """Name this source's model, and its replacement when the registry knows one, on a
        :class:`~polythink.errors.ModelNotFoundError`; return ``error``."""
        if isinstance(error, ModelNotFoundError) and error.model is None:
            error.model = self.source.model
            capability = self.source.capability
            if capability is not None and capability.replacement:
                error.replacement = capability.replacement
                error.message = (
                    f"{error.message} (model {self.source.model!r}; the registry names "
                    f"{capability.replacement!r} as its replacement)"
                )
                error.args = (error.message,)
        return error

    def refuse_or_drop(
        self,
        body: dict[str, Any],
        conflicts: list[tuple[str, str]],
        context: str,
        error_type: str = "parameter_conflict",
    ) -> list[str]:
        """Refuse a body with parameters this source's model rejects, or drop them.

        ``conflicts`` are ``(parameter, reason)`` pairs; ``context`` says when they conflict
        (``"while thinking is on"``). Without ``drop_params`` the call fails before any HTTP
        request with :class:`ThinkingUnsupportedError` (another source may take it, so
        failover moves on); with it each parameter is removed from ``body`` and logged (a
        warning) once per source and parameter. Returns the notes for the response's warnings.
        """
        if not conflicts:
            return []
        model = self.source.model
        if not self.source.drop_params:
            names = ", ".join(name for name, _ in conflicts)
            reasons = "; ".join(reason for _, reason in conflicts)
            raise ThinkingUnsupportedError(
                f"{self.profile.id} model {model!r} rejects {names} {context}: {reasons}. "
                "Remove it, or set drop_params=True on the source to drop it with a warning",
                provider=self.profile.id,
                source_index=self.index,
                error_type=error_type,
            )
        notes = []
        for name, reason in conflicts:
            body.pop(name, None)
            note = f"dropped {reason} for {self.profile.id} model {model!r} (drop_params=True)"
            notes.append(note)
            if name not in self._logged_drops:
                self._logged_drops.add(name)
                # A value the caller sent is lost: a warning, once (every response it
                # affects says so in its warnings too).
                _log.warning("source %d: %s", self.index, note)
        return notes

    def sampling_notes(self, body: dict[str, Any], request: Request) -> list[str]:
        """Apply the model's sampling rule (``Capability.sampling``) on strict providers.

        Returns the notes for dropped parameters.

        Raises:
            ThinkingUnsupportedError: a rejected parameter while ``drop_params`` is off.
        """
        rule = self._sampling
        if rule == "any":
            return []
        if rule == "one_of":
            return self._one_of(body)
        if rule == "without_reasoning":
            resolution = request.resolution
            applied = resolution.applied_effort if resolution is not None else None
            off = not self._reasons_by_default if applied is None else applied is Effort.NONE
            if off:
                return []
            context = "while it reasons (reasoning_effort='none' lifts this where accepted)"
        else:
            context = "(only the defaults are accepted)"
        return self.refuse_or_drop(body, sampling_conflicts(body), context)

    def explicit_breakpoints(self, request: Request) -> bool:
        """Whether this call's body carries OpenAI's explicit prompt-cache breakpoints: a
        :class:`~polythink.types.PromptCache` with ``breakpoints="explicit"``, to a model
        that takes ``prompt_cache_options`` (gpt-5.6 and later). The body builders then mark
        the stable system prompt and the last message (:func:`mark_last_entry`)."""
        cache = request.prompt_cache
        capability = self._capability_for_cache
        return (
            cache is not None
            and cache.breakpoints == "explicit"
            and capability is not None
            and capability.prompt_cache_options
        )

    def prompt_cache_notes(self, body: dict[str, Any], request: Request) -> list[str]:
        """Apply the model's prompt-cache rules on OpenAI-shaped wires; return notes for drops.

        - ``ttl="1h"`` is honoured only where a ``cache_control`` field carries it
          (:func:`ttl_notes`); elsewhere the response says so.
        - ``prompt_cache_retention`` takes only the values the model accepts
          (``Capability.prompt_cache_retention``: ``24h`` from gpt-5.5 on; openai_openapi.yaml
          2026-08-21): another value is refused before sending, or dropped under
          ``drop_params``.
        - With explicit breakpoints (:meth:`explicit_breakpoints`) the body gets
          ``prompt_cache_options: {"mode": "explicit", "ttl": "30m"}`` (``30m`` is the only
          TTL; with explicit mode and no breakpoint nothing is cached; at most four
          breakpoints are written per request). ``breakpoints="auto"`` leaves the implicit
          breakpoint OpenAI places itself.

        Raises:
            ThinkingUnsupportedError: a retention the model refuses while ``drop_params`` is off.
        """
        cache = request.prompt_cache
        if cache is None:
            return []
        notes = ttl_notes(cache, self.profile)
        capability = self._capability_for_cache
        if capability is None:
            return notes
        retention = body.get("prompt_cache_retention")
        accepted = capability.prompt_cache_retention
        if retention is not None and accepted and retention not in accepted:
            notes += self.refuse_or_drop(
                body,
                [
                    (
                        "prompt_cache_retention",
                        f"prompt_cache_retention={retention!r} (accepted: {', '.join(accepted)})",
                    )
                ],
                "for this model",
            )
        if self.explicit_breakpoints(request):
            body.setdefault("prompt_cache_options", {"mode": "explicit", "ttl": "30m"})
        return notes

    def _one_of(self, body: dict[str, Any]) -> list[str]:
        """``temperature`` or ``top_p``, not both (``Capability.sampling == "one_of"``).

        Anthropic answers 400 "`temperature` and `top_p` cannot both be specified for this
        model. Please use only one." on these models. Without ``drop_params`` the call is
        refused before sending; with it ``top_p`` is dropped, ``temperature`` kept, and the
        note (logged once per source) says which was kept.

        Raises:
            RequestRejectedError: both set while ``drop_params`` is off.
        """
        if body.get("temperature") is None or body.get("top_p") is None:
            return []
        model = self.source.model
        temperature, top_p = body["temperature"], body["top_p"]
        if not self.source.drop_params:
            raise RequestRejectedError(
                f"{self.profile.id} model {model!r} accepts temperature or top_p, not both "
                f"(got temperature={temperature!r}, top_p={top_p!r}). Send one of them, or set "
                "drop_params=True on the source to keep temperature and drop top_p",
                provider=self.profile.id,
                source_index=self.index,
                error_type="parameter_conflict",
            )
        del body["top_p"]
        note = (
            f"kept temperature={temperature!r} and dropped top_p={top_p!r}: {self.profile.id} "
            f"model {model!r} accepts only one of them (drop_params=True)"
        )
        if "top_p/one_of" not in self._logged_drops:
            self._logged_drops.add("top_p/one_of")
            _log.warning("source %d: %s", self.index, note)
        return [note]

    async def json_events(
        self, response: httpx.Response, relay: NativeRelay | None = None
    ) -> AsyncGenerator[tuple[str, Any], None]:
        """Yield ``(event_type, parsed JSON)`` for each event of a streamed response.

        With ``relay`` (:meth:`relay`), each event is handed to it as decoded, before it is
        read here, ``[DONE]`` included.

        Events with blank data are skipped, as are JSON values that are not objects, and
        leading data lines that are themselves SSE comments (``data: : OPENROUTER PROCESSING``: a
        gateway wrapped the provider's keep-alive comment in ``data:``, case C17); a
        ``[DONE]`` event yields ``(event_type, DONE)`` and the caller stops there. The event
        left pending when the connection closed is yielded when its data parses, and dropped
        when it does not (it was cut), which leaves the caller's stream unfinished.

        Raises:
            TransientError: an event whose data is not JSON (``error_type`` ``"malformed_event"``).
            PolythinkError: a transport failure mid-stream (see :meth:`sse_events`).
        """
        decoder = self.sse_decoder()
        async with aclosing(self.sse_events(response, decoder)) as events:
            async for event_type, data in events:
                if relay is not None:
                    await relay.event(event_type, data)
                if data == "[DONE]":
                    yield event_type, DONE
                    return
                if data[:1] == ":":
                    data = unwrapped_comments(data)
                if not data or data.isspace():
                    continue
                malformed: TransientError | None = None
                try:
                    parsed = loads_json(data)
                except ValueError as exc:
                    if decoder.closed:
                        return
                    malformed = sealed(
                        TransientError(
                            f"{self.profile.id} sent a stream event that is not JSON",
                            provider=self.profile.id,
                            source_index=self.index,
                            status_code=response.status_code,
                            error_type="malformed_event",
                            body=data[:2000],
                        ),
                        self._secrets,
                    )
                    malformed.__cause__ = self._clean(exc)
                if malformed is not None:
                    raise malformed
                if isinstance(parsed, Mapping):
                    yield event_type, parsed

    def parsed_answer(
        self,
        data: Any,
        rate_limit: RateLimit | None,
        response: httpx.Response | None,
        *,
        failed: Any,
        parse: Callable[[Any], Response],
    ) -> Response:
        """The :class:`Response` of a whole answer's parsed JSON ``data`` (a non-streamed
        answer, a batch result, a stream answered whole): ``parse(data)``, or the in-band
        error ``failed`` carries (the wire's error object, ``None`` when it carries none).

        Raises:
            PolythinkError: the error it carries (with ``rate_limit``), or a
                :class:`TransientError` (``malformed_body``) for a shape that is not the wire's.
        """
        if failed is not None:
            error = self.in_band_error(failed, response)
            error.rate_limit = rate_limit
            raise error
        try:
            return parse(data)
        except SHAPE_ERRORS as exc:
            raise self.malformed(exc, response) from None

    def malformed(
        self, exc: BaseException, response: httpx.Response | None = None, *, event: bool = False
    ) -> TransientError:
        """The error for an answer (or, with ``event``, a stream event) whose JSON does not
        have the wire's shape (``exc``, one of :data:`SHAPE_ERRORS`, says where); raise it
        ``from None``: a retry or another source may answer properly."""
        what = "a stream event" if event else "an answer"
        return sealed(
            TransientError(
                f"{self.profile.id} sent {what} polythink cannot read ({type(exc).__name__}: "
                f"{exc})",
                provider=self.profile.id,
                source_index=self.index,
                status_code=response.status_code if response is not None else None,
                error_type="malformed_event" if event else "malformed_body",
                request_id=header_request_id(response.headers) if response is not None else None,
            ),
            self._secrets,
        )

    def incomplete(self, response: httpx.Response) -> TransientError:
        """The error for a stream the server closed before it finished."""
        return TransientError(
            f"{self.profile.id} closed the stream before it finished",
            provider=self.profile.id,
            source_index=self.index,
            status_code=response.status_code,
            error_type="stream_incomplete",
        )

    def interrupted(self, error: PolythinkError, partial: Response) -> StreamInterruptedError:
        """The error for a stream that broke after output reached the caller.

        Carries ``partial`` (the response assembled so far, marked ``interrupted``, its
        message too) and the cause's status, type and request id; raise it ``from error``.
        """
        marked = dataclasses.replace(
            partial,
            interrupted=True,
            message=dataclasses.replace(
                partial.message,
                metadata=MessageMetadata(
                    provider=partial.provider,
                    model=partial.model,
                    source_index=partial.source_index,
                    interrupted=True,
                ),
            ),
        )
        return StreamInterruptedError(
            f"stream from {self.profile.id} broke after output began: {error.message}",
            partial=marked,
            provider=self.profile.id,
            source_index=self.index,
            status_code=error.status_code,
            error_type=error.error_type,
            request_id=error.request_id,
        )


_BREAKPOINT = {"mode": "explicit"}


def marked_content(content: Any, text_type: str) -> list[Any] | None:
    """``content`` whose last part carries OpenAI's ``prompt_cache_breakpoint: {"mode":
    "explicit"}`` (a copy); a string becomes one part of ``text_type`` (``text`` on Chat,
    ``input_text`` on Responses). ``None`` when there is no part to carry it.

    Chat's text, image, audio and file parts and Responses' ``input_text``, ``input_image``
    and ``input_file`` declare the field (``PromptCacheBreakpointParam``, openai_openapi.yaml
    2026-08-21); a Responses ``output_text`` does not.
    """
    if isinstance(content, str):
        return [{"type": text_type, "text": content, "prompt_cache_breakpoint": dict(_BREAKPOINT)}]
    if isinstance(content, list) and content and isinstance(content[-1], Mapping):
        return [*content[:-1], {**content[-1], "prompt_cache_breakpoint": dict(_BREAKPOINT)}]
    return None


def mark_last_entry(
    entries: list[Any], *, text_type: str, roles: Iterable[str] | None = None
) -> None:
    """Put a breakpoint on the last entry of ``entries`` that can carry one (of a role in
    ``roles`` when given), in place: the entry is replaced by a marked copy (message bodies
    are memoised and shared). A Responses ``function_call_output`` is a ``tool`` entry and
    carries it on its ``output``; an entry with no content part (an assistant turn of tool
    calls only, a reasoning item) is passed over for the one before it."""
    wanted = frozenset(roles) if roles is not None else None
    for position in range(len(entries) - 1, -1, -1):
        entry = entries[position]
        if not isinstance(entry, Mapping):
            continue
        kind = entry.get("type", "message")
        role: Any
        if kind == "function_call_output":
            role, key = "tool", "output"
        elif kind == "message":
            role, key = entry.get("role"), "content"
        else:
            continue
        if wanted is not None and role not in wanted:
            continue
        marked = marked_content(entry.get(key), text_type)
        if marked is not None:
            entries[position] = {**entry, key: marked}
            return


def sampling_conflicts(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(parameter, reason)`` for each sampling parameter set to a non-default value:
    ``temperature`` or ``top_p`` other than 1, any ``top_k``."""
    conflicts = []
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and value != 1:
            conflicts.append((name, f"{name}={value!r}"))
    if body.get("top_k") is not None:
        conflicts.append(("top_k", f"top_k={body['top_k']!r}"))
    return conflicts


def token_count(value: Any) -> int | None:
    """A provider's token count as an ``int``, or ``None`` when absent or not a count >= 0."""
    return value if type(value) is int and value >= 0 else None


def output_with_reasoning(
    completion: int | None,
    reasoning: int | None,
    *,
    prompt: int | None,
    total: int | None,
    counts_reasoning: bool | None,
) -> int | None:
    """The output tokens of an answer, reasoning included, from an OpenAI-shaped usage.

    ``completion`` is the provider's ``completion_tokens`` (``output_tokens`` on Responses),
    ``reasoning`` its ``reasoning_tokens``, ``prompt`` and ``total`` its prompt and total
    counts. ``counts_reasoning`` is the provider's documented convention
    (:attr:`~polythink.providers.ProviderProfile.completion_counts_reasoning`): ``True``, the
    completion count includes reasoning (OpenAI); ``False``, reasoning is counted beside it
    and only the total has both (xAI: total = prompt + completion + reasoning); ``None``,
    undocumented: the numbers decide. Reasoning is counted beside the completion when the
    total is exactly prompt + completion + reasoning (and not prompt + completion), or, with no
    total, when the reasoning alone exceeds the completion (a part cannot exceed its whole);
    otherwise the completion includes it, as on OpenAI's wire.

    Returns ``completion``, or ``completion + reasoning``; ``None`` without a completion count.
    """
    if completion is None or not reasoning:
        return completion
    if counts_reasoning is None:
        if total is not None and prompt is not None:
            outside = total == prompt + completion + reasoning != prompt + completion
        else:
            outside = reasoning > completion
        counts_reasoning = not outside
    return completion if counts_reasoning else completion + reasoning


def usage_counts(
    usage: Mapping[str, Any],
    details: Mapping[str, Any],
    *,
    prompt_key: str,
    output_key: str,
    counts_reasoning: bool | None,
) -> tuple[int | None, int | None, int | None]:
    """``(input, output, reasoning)`` tokens of an OpenAI-shaped ``usage`` whose prompt and
    output counts are under ``prompt_key`` / ``output_key`` and whose reasoning count is
    ``details["reasoning_tokens"]``; the output includes reasoning
    (:func:`output_with_reasoning`)."""
    prompt = token_count(usage.get(prompt_key))
    reasoning = token_count(details.get("reasoning_tokens"))
    output = output_with_reasoning(
        token_count(usage.get(output_key)),
        reasoning,
        prompt=prompt,
        total=token_count(usage.get("total_tokens")),
        counts_reasoning=counts_reasoning,
    )
    return prompt, output, reasoning


def prompt_cache_fields(cache: PromptCache | None, profile: ProviderProfile) -> dict[str, Any]:
    """The top-level body fields that spell ``cache`` on an OpenAI-shaped wire.

    Per ``profile.prompt_cache``: ``key`` gives ``prompt_cache_key`` and
    ``prompt_cache_retention`` (each only when set on the marker), ``cache_control`` gives
    Anthropic's ``cache_control`` object. Empty when there is no marker.
    """
    if cache is None or not profile.prompt_cache:
        return {}
    fields: dict[str, Any] = {}
    if "key" in profile.prompt_cache:
        if cache.key is not None:
            fields["prompt_cache_key"] = cache.key
        if cache.retention is not None:
            fields["prompt_cache_retention"] = cache.retention
    if "cache_control" in profile.prompt_cache:
        fields["cache_control"] = cache.cache_control()
    return fields


SYSTEM_SUFFIX_SEPARATOR = "\n\n"
"""What joins the stable system prompt and ``system_suffix`` on wires with one system text."""


def joined_system(stable: str | None, suffix: str | None) -> str | None:
    """The stable system text with ``suffix`` appended after a blank line (either may be
    missing)."""
    if not suffix:
        return stable
    if not stable:
        return suffix
    return stable + SYSTEM_SUFFIX_SEPARATOR + suffix


def append_system_suffix(entries: list[Any], suffix: str, text_type: str) -> None:
    """Append ``suffix`` to the last leading system (or developer) message of ``entries``
    (Chat messages or Responses input items), else open them with a system message holding
    it. A string content gets it after a blank line, a list of parts as one more part of
    ``text_type`` (after a breakpoint the stable parts may carry)."""
    position = None
    for index, entry in enumerate(entries):
        if entry.get("role") not in ("system", "developer"):
            break
        position = index
    if position is None:
        entries.insert(0, {"role": "system", "content": suffix})
        return
    # A copy: the message's own body is memoised on it and shared with later calls.
    target = entries[position] = dict(entries[position])
    content = target["content"]
    if isinstance(content, list):
        target["content"] = [*content, {"type": text_type, "text": suffix}]
    else:
        target["content"] = joined_system(content if isinstance(content, str) else None, suffix)


class deadline_scope:
    """``anyio.move_on_after(seconds)`` whose timer keeps nothing of the call alive.

    asyncio keeps a cancelled timer in its schedule until the time it was set for (or until
    cancelled timers are half of the schedule), with the context it was made in: a call's
    timer, cancelled when the call ends within its deadline, as it nearly always does,
    would hold the call's context (its telemetry span, its own state) for as long, and
    the collector would then move them all to its oldest generation. Under asyncio the
    timer here is made with an empty context and cancels the scope; under any other loop
    the scope's own deadline is used. ``None`` seconds: no deadline.
    """

    __slots__ = ("_handle", "_scope", "_seconds")

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._scope = anyio.CancelScope()
        self._handle: Any = None

    def __enter__(self) -> anyio.CancelScope:
        scope = self._scope.__enter__()
        seconds = self._seconds
        if seconds is not None:
            loop = running_asyncio_loop()
            if loop is None:
                scope.deadline = anyio.current_time() + seconds
            else:
                self._handle = loop.call_later(seconds, scope.cancel, context=_NO_CONTEXT)
        return scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if self._handle is not None:
            self._handle.cancel()
        return bool(self._scope.__exit__(exc_type, exc, traceback))


_NO_CONTEXT = contextvars.Context()


def _unbind(response: httpx.Response) -> None:
    """Break the cycle httpx leaves between a closed response and its stream (the stream
    holds the response to stamp its ``elapsed`` on close): refcounting then frees the
    response and what hangs off it (its request, headers, the HTTP layer's objects: about
    40 objects a call) when the call is done, instead of the cyclic collector, whose
    collections those objects would otherwise trigger and then survive to older
    generations under concurrency. What was read stays readable (``content``)."""
    if response.is_closed:
        try:
            content = response.content
        except httpx.ResponseNotRead:
            content = b""  # a stream read chunk by chunk
        response.stream = httpx.ByteStream(content)


def apply_overrides(
    body: dict[str, Any], request: Request, extra_body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Deep-merge, in this order, the service-tier fragment of ``request.tier_resolution``,
    the reasoning fragment of ``request.resolution``, the source's ``extra_body`` and the
    call's ``extra_body`` into ``body`` (later wins)."""
    tier = request.tier_resolution
    if tier is not None and tier.body:
        deep_merge(body, tier.body)
    if request.resolution is not None and request.resolution.payload:
        deep_merge(body, request.resolution.payload)
    if extra_body:
        deep_merge(body, extra_body)
    if request.extra_body:
        deep_merge(body, request.extra_body)
    return body


def with_notes(response: Response, notes: list[str]) -> Response:
    """Return ``response`` with ``notes`` added to its warnings (the same object when none)."""
    if not notes:
        return response
    return response.with_(warnings=[*response.warnings, *notes])


def with_rate_limit(response: Response, rate_limit: RateLimit | None) -> Response:
    """Return ``response`` carrying ``rate_limit`` (the same object when there is none)."""
    if rate_limit is None:
        return response
    return response.with_(rate_limit=rate_limit)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the same object when none)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


PartTypes = Mapping[str, frozenset[str]]
"""The content part ``type`` s a wire carries, by message role."""


def part_types(
    *, system: Iterable[str], user: Iterable[str], assistant: Iterable[str], tool: Iterable[str]
) -> PartTypes:
    """A :data:`PartTypes` table (``developer`` messages go where ``system`` ones go)."""
    return {
        "system": frozenset(system),
        "developer": frozenset(system),
        "user": frozenset(user),
        "assistant": frozenset(assistant),
        "tool": frozenset(tool),
    }


def check_parts(
    message: Message,
    accepted: PartTypes,
    profile: ProviderProfile,
    source_index: int | None,
    position: int | None = None,
) -> None:
    """Refuse a content part of ``message`` that this wire cannot carry, before sending.

    ``accepted`` is the wire's table; ``position`` the message's index in the call's
    messages. A message whose content is not a list passes at the cost of one class check.
    The parts' own keys were checked when the message was built
    (:func:`polythink.types.check_part`).

    Raises:
        ContentUnsupportedError: naming the message's index and role, the part's index and
            type, and the types this wire takes in such a message.
    """
    content = message.content
    if content.__class__ is not list:
        return
    allowed = accepted[message.role]
    which = f"message {position} ({message.role})" if position is not None else "a message"
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            raise ContentUnsupportedError(
                f"{profile.id} cannot carry content part {index} of {which} "
                f"(type {kind!r}); accepted in {message.role} messages on this wire: "
                f"{', '.join(sorted(allowed))}",
                provider=profile.id,
                source_index=source_index,
                error_type="unsupported_content",
            )


def unwrapped_comments(data: str) -> str:
    """Event data without its leading lines that are SSE comments (they start with ``:``,
    as no JSON text does): what is left when a gateway sent a keep-alive comment as
    ``data:``, empty when that was all the event held."""
    lines = data.split("\n")
    first = 0
    while first < len(lines) and lines[first][:1] == ":":
        first += 1
    return "\n".join(lines[first:])


DONE: Any = object()
"""Marker :meth:`HTTPTransport.json_events` yields for a ``[DONE]`` event."""

NOT_WHOLE: Any = object()
"""What :meth:`HTTPTransport.whole_answer` returns for an answer that is an event stream."""


def answer_events(answer: Response) -> list[StreamEvent]:
    """The events of a stream that carries ``answer`` whole (a server that answered a
    streamed call in one JSON body): its reasoning, its text, each tool call (one
    ``tool_call_delta`` with everything, then the ``tool_call``), its usage, and ``done``
    with ``answer``, as every stream ends."""
    events: list[StreamEvent] = []
    if answer.reasoning:
        events.append(StreamEvent("reasoning", text=answer.reasoning))
    if answer.text:
        events.append(StreamEvent("text", text=answer.text))
    for index, call in enumerate(answer.tool_calls):
        delta = ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments)
        events.append(StreamEvent("tool_call_delta", tool_call_delta=delta))
        events.append(StreamEvent("tool_call", tool_call=call))
    if answer.usage is not None:
        events.append(StreamEvent("usage", usage=answer.usage))
    events.append(StreamEvent("done", response=answer))
    return events


def assistant_response(
    *,
    text: str,
    reasoning: str | None,
    calls: list[ToolCall],
    items: tuple[Mapping[str, Any], ...],
    finish: str,
    usage: Usage | None,
    model: str,
    response_id: str | None,
    profile: ProviderProfile,
    source_index: int,
    rate_limit: RateLimit | None = None,
    thinking: ThinkingObservation = ThinkingObservation.UNKNOWN,
    native_finish_reason: str | None = None,
    warnings: list[str] | None = None,
    cost: Cost | None = None,
    refusal: str | None = None,
    service_tier: str | None = None,
) -> Response:
    """Build a :class:`Response` and the assistant :class:`Message` it carries.

    ``items`` are the provider's opaque reasoning items, kept verbatim on the message with
    the profile's ``reasoning_format`` (also set when the turn has reasoning text alone, so
    the provider's own turns are told from others', the profile's id where it names no
    format; none when it has neither). The
    message's content is ``None`` when the turn is only tool calls, as the chat wire
    expects. ``thinking`` is ``observed`` when the transport saw evidence of reasoning that no
    text or count shows.
    ``native_finish_reason`` is the provider's own finish value; ``warnings`` start the
    response's warnings (an unknown finish value, for example).
    ``cost`` is what the provider said it billed (:func:`polythink.pricing.reported_cost`).
    ``refusal`` is the model's refusal message where the wire carries one apart.
    ``service_tier`` is the tier the answer reported (see :meth:`HTTPTransport.served_tier`).

    A lone surrogate in the text, the reasoning or a call's arguments (JSON may escape one,
    ``"\\ud83d"``, though no UTF-8 text can hold it) becomes U+FFFD, so the turn can be
    sent back on the next call.
    """
    text = _valid_text(text)
    reasoning = _valid_text(reasoning) if reasoning is not None else None
    calls = [
        call
        if call.arguments.isascii()
        else dataclasses.replace(call, arguments=_valid_text(call.arguments))
        for call in calls
    ]
    message = Message(
        role="assistant",
        content=text if (text or not calls) else None,
        tool_calls=tuple(calls),
        reasoning=reasoning,
        reasoning_items=items,
        reasoning_format=(profile.reasoning_format or profile.id) if items or reasoning else None,
    )
    return Response(
        text=text,
        reasoning=reasoning,
        tool_calls=calls,
        finish_reason=finish,
        usage=usage,
        model=model,
        provider=profile.id,
        source_index=source_index,
        message=message,
        output_limited=finish == "length",
        id=response_id,
        rate_limit=rate_limit,
        thinking=thinking,
        native_finish_reason=native_finish_reason,
        warnings=list(warnings) if warnings else [],
        cost=cost,
        refusal=refusal,
        service_tier=service_tier,
    )
