"""The HTTP layer under httpx: httpx's own connection pool, or aiohttp's.

Every transport sends through one ``httpx.AsyncClient``; what carries its requests is
chosen here. aiohttp's pool, through the ``httpx-aiohttp`` transport, keeps httpx's API and
exceptions and costs much less CPU per call: in the full runs of ``polythink bench`` on
2026-11-30 (``benchmarks/README.md``), the transport alone over aiohttp spent 0.5x to 0.8x
the CPU of raw httpx per call one at a time and about a quarter at 64 concurrent calls, and
its p99 latency at 64 calls was about 2x its p50 where httpx's own pool reached 5x to 6x.
So ``"auto"`` picks it under asyncio when the package is installed; under trio, or without
the package, httpx's own.

Two things httpx-aiohttp does differently from httpcore are put right here, so every
transport sees the same behaviour on both layers:

- a connection that fails or is reset before the response arrives raises
  ``httpx.ConnectError``, and one reset while the body is read ``httpx.ReadError``
  (httpx-aiohttp maps every aiohttp connection error to ``httpx.ConnectTimeout``, which
  would read as a timeout that never happened);
- a response head is read up to :data:`HEAD_BYTES` (httpcore's limit, 100 KiB) on both:
  aiohttp's own limits (8 KiB a line, 128 header lines) are raised to it, and a head over it
  raises ``httpx.RemoteProtocolError`` on both, measured the same way (httpcore alone refuses
  such a head only when it has not arrived whole in its last read);
- a reply aiohttp cannot parse (a bad status line, a header without a colon or over
  :data:`HEAD_BYTES`, a bad chunk size) raises ``httpx.RemoteProtocolError``, as httpcore
  does: httpx-aiohttp
  lets aiohttp's ``ClientResponseError`` through, and that error holds the request's
  headers, API key included. Every other aiohttp error it lets through becomes an
  ``httpx.TransportError``; none of them is chained;
- a body that stops parsing after it began (a bad chunk size mid-stream) raises
  ``httpx.ReadError`` at once: aiohttp 3.14 records that parse error on the connection but
  not on the body being read, which then waits until a timeout (the idle timeout of a
  stream, the whole deadline of a non-streamed call);
- the read timeout is taken again from the request's ``timeout`` extension when the body
  starts to be read, as httpcore does, so a stream's idle timeout can differ from its
  first-byte timeout;
- proxies come from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``), as with
  httpx's own client;
- a request body larger than :data:`CHUNK_BYTES` is sent in chunks of that size, each write
  waiting for the socket to drain: aiohttp warns (``ResourceWarning``, an error under
  ``-W error``) that one raw write of more than 1 MiB may block the event loop.

httpcore's DEBUG log quotes what it reads (every response header, an exception's text), so
a server that echoes the request's headers back puts the key there. While a
:class:`~polythink.Client` is open, :func:`redact_http_logs` keeps its keys out of the
records of httpcore's loggers (:data:`HTTP_LOGGERS`).
"""

from __future__ import annotations

import importlib.util
import logging
import ssl
import sys
import threading
import urllib.request
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal, get_args

import httpx

from polythink.errors import InvalidInputError, redact

__all__ = [
    "CHUNK_BYTES",
    "HEAD_BYTES",
    "HTTP_LOGGERS",
    "LIMITS",
    "HTTPLayer",
    "build_http_client",
    "check_http_layer",
    "default_ssl_context",
    "redact_http_logs",
    "release_http_logs",
    "running_asyncio_loop",
]

LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
"""Pool limits of the client polythink creates (connections)."""

CHUNK_BYTES = 256 * 1024
"""Bodies above this size (bytes) go to aiohttp as a stream of chunks of this size; aiohttp's
own warning threshold for one raw write is 1 MiB (``aiohttp.payload.TOO_LARGE_BYTES_BODY``)."""

HEAD_BYTES = 100 * 1024
"""The largest response head (status line and header lines, in bytes) either layer reads:
httpcore's own limit (``AsyncHTTP11Connection.MAX_INCOMPLETE_EVENT_SIZE``, h11's
``max_incomplete_event_size``: 102,400 in httpcore 1.0; a test holds the two equal, so
``import polythink`` need not load httpcore, h11 and h2 to read it). aiohttp's defaults are
far lower (8,190 bytes a line, 128 header lines) and would refuse replies httpcore reads."""

HTTPLayer = Literal["auto", "httpx", "aiohttp"]
"""Which HTTP implementation carries httpx's requests (see :func:`build_http_client`)."""

_LAYERS: tuple[str, ...] = get_args(HTTPLayer)


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def default_ssl_context() -> ssl.SSLContext:
    """Return the process's one verifying SSL context, built on first use.

    Built as httpx builds its default (``httpx.create_ssl_context()``: certifi's bundle, or
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set at that moment) and shared by every
    client polythink creates: loading the certificates costs about 30 to 40 ms, which an
    application building a client per tenant would otherwise pay per client. An SSL context
    may be shared between connections and threads.
    """
    global _ssl_context
    context = _ssl_context
    if context is None:
        with _ssl_lock:
            if _ssl_context is None:
                _ssl_context = httpx.create_ssl_context()
            context = _ssl_context
    return context


HTTP_LOGGERS = (
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)
"""The loggers httpcore 1.0 writes its DEBUG trace to (one per module; a filter on a logger
sees only the records made there, not those of its children). httpx's own INFO line
(``HTTP Request: POST <url> ...``) is not among them: no key is in a URL polythink sends
(``Source.base_url`` refuses user information and queries)."""


class _KeyFilter(logging.Filter):
    """Replaces the keys of the open clients in a record's message with ``[REDACTED]``.

    Attached to :data:`HTTP_LOGGERS` while at least one client is registered, and run by
    the logging module only for a record that passed its logger's level: while those
    loggers are not at DEBUG, httpcore makes no record and this costs nothing. Clients are
    held by weak reference; the keys only as long as their client is registered.
    """

    def __init__(self) -> None:
        super().__init__()
        # Re-entrant: a client collected while the lock is held (its weak reference's
        # callback runs in that thread) discards itself.
        self._lock = threading.RLock()
        self._owners: dict[int, tuple[weakref.ref[object], tuple[str, ...]]] = {}
        self._secrets: tuple[str, ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets
        if secrets:
            message = record.getMessage()
            cleaned = redact(message, secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True

    def add(self, owner: object, secrets: tuple[str, ...]) -> None:
        key = id(owner)
        with self._lock:
            ref = weakref.ref(owner, lambda _: self.discard(key))
            self._owners[key] = (ref, secrets)
            self._changed()

    def discard(self, key: int) -> None:
        with self._lock:
            if self._owners.pop(key, None) is not None:
                self._changed()

    def _changed(self) -> None:
        held = {s for _, secrets in list(self._owners.values()) for s in secrets}
        self._secrets = tuple(sorted(held, key=len, reverse=True))
        for name in HTTP_LOGGERS:
            logger = logging.getLogger(name)
            if self._owners:
                if self not in logger.filters:
                    logger.addFilter(self)
            else:
                logger.removeFilter(self)


_key_filter = _KeyFilter()


def redact_http_logs(owner: object, secrets: Iterable[str | None]) -> None:
    """Keep ``secrets`` out of httpcore's log records while ``owner`` is registered.

    Called by a :class:`~polythink.Client` when it starts, with its sources' keys and
    credential header values; :func:`release_http_logs` (its ``aclose``) ends it, as does
    ``owner`` being collected. A filter on each of :data:`HTTP_LOGGERS` replaces them in a
    record's message with ``[REDACTED]`` (and anything shaped like a provider key:
    :func:`~polythink.errors.redact`); it is attached only while some owner is registered.
    """
    held = tuple(s for s in secrets if s)
    if held:
        _key_filter.add(owner, held)


def release_http_logs(owner: object) -> None:
    """Forget ``owner``'s keys (:func:`redact_http_logs`); the filter leaves httpcore's
    loggers with the last owner."""
    _key_filter.discard(id(owner))


def _aiohttp_available() -> bool:
    return importlib.util.find_spec("httpx_aiohttp") is not None


def check_http_layer(http: str) -> None:
    """Check an ``http`` option when a client is built.

    Raises:
        ValueError: for a value other than ``auto``, ``httpx`` or ``aiohttp``, or for
            ``aiohttp`` when the ``httpx-aiohttp`` package is not installed.
    """
    if http not in _LAYERS:
        raise InvalidInputError(f"http must be one of {', '.join(_LAYERS)}; got {http!r}")
    if http == "aiohttp" and not _aiohttp_available():
        raise InvalidInputError(
            "http='aiohttp' needs the httpx-aiohttp package: pip install httpx-aiohttp"
        )


def running_asyncio_loop() -> Any:
    """The running asyncio event loop, or ``None`` (no loop running, or trio's). Without
    asyncio imported no asyncio loop can be running, and it is not imported for the answer."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _under_asyncio() -> bool:
    return running_asyncio_loop() is not None


def build_http_client(http: HTTPLayer = "auto") -> httpx.AsyncClient:
    """Create the ``httpx.AsyncClient`` a :class:`~polythink.Client` sends through.

    Args:
        http: ``"httpx"``: httpx's own connection pool (httpcore). ``"aiohttp"``: aiohttp's
            pool under httpx's API (asyncio only). ``"auto"``: aiohttp when called under a
            running asyncio loop with ``httpx-aiohttp`` installed, else httpx's own.

    Both verify certificates with the process's one SSL context
    (:func:`default_ssl_context`), have the same limits (:data:`LIMITS`), raise httpx's
    exceptions, and do not follow
    redirects (a provider key must never reach another host; a redirect becomes a
    :class:`~polythink.errors.RequestRejectedError` naming where it pointed).

    Raises:
        ValueError: see :func:`check_http_layer`; also ``aiohttp`` outside an asyncio loop
            (under trio).
    """
    check_http_layer(http)
    if http == "aiohttp" and not _under_asyncio():
        raise InvalidInputError(
            "http='aiohttp' runs only under asyncio; use http='httpx' (or 'auto') under trio"
        )
    if http == "auto":
        http = "aiohttp" if _under_asyncio() and _aiohttp_available() else "httpx"
    context = default_ssl_context()
    hooks = {"response": [_refuse_long_head]}
    if http == "aiohttp":
        return httpx.AsyncClient(
            transport=_aiohttp_transport(context),
            limits=LIMITS,
            follow_redirects=False,
            verify=context,
            event_hooks=hooks,
        )
    return httpx.AsyncClient(
        limits=LIMITS, follow_redirects=False, verify=context, event_hooks=hooks
    )


async def _refuse_long_head(response: httpx.Response) -> None:
    """Refuse a response head over :data:`HEAD_BYTES`, measured alike on both layers.

    The size counts ``HTTP/1.1 <status> <reason>``, each header as ``name: value`` and
    every line's CRLF. httpcore refuses a longer head only while it is still incomplete
    after a read (of up to 64 KiB), so one that arrives whole up to 64 KiB past the limit
    would pass there; aiohttp has no limit on the whole head at all.

    Raises:
        httpx.RemoteProtocolError: the head is over :data:`HEAD_BYTES`.
    """
    reason = response.extensions.get("reason_phrase", b"")
    size = 17 + len(reason)  # "HTTP/1.1 200 " + reason + CRLF, and the empty line's CRLF
    for name, value in response.headers.raw:
        size += len(name) + len(value) + 4
    if size > HEAD_BYTES:
        raise httpx.RemoteProtocolError(
            f"the response head is over {HEAD_BYTES} bytes ({size} bytes)",
            request=response.request,
        )


def _aiohttp_transport(context: ssl.SSLContext) -> httpx.AsyncBaseTransport:
    import aiohttp
    from httpx_aiohttp import AiohttpTransport

    class Transport(AiohttpTransport):
        def get_client(self) -> aiohttp.ClientSession:
            # Proxies from HTTP(S)_PROXY / NO_PROXY, as httpx's own client honours them
            # (httpx-aiohttp's default session ignores the environment). aiohttp's
            # trust_env re-reads the environment on every request, which more than doubles
            # the CPU of a call (measured 340 -> 830 us on loopback), so it is turned on only
            # when the environment names a proxy when the session is made.
            connector = aiohttp.TCPConnector(
                keepalive_timeout=self.limits.keepalive_expiry,
                ssl=self.ssl_context,
                limit=self.limits.max_connections or 0,
            )
            _fail_bodies_on_parse_errors(connector)
            proxied = any(
                scheme in ("http", "https", "all") for scheme in urllib.request.getproxies()
            )
            # Heads as long as httpcore reads: aiohttp's per-line and header-count limits
            # are raised to HEAD_BYTES, which _refuse_long_head holds for the whole head.
            return aiohttp.ClientSession(
                connector=connector,
                trust_env=proxied,
                max_line_size=HEAD_BYTES,
                max_field_size=HEAD_BYTES,
                max_headers=HEAD_BYTES // 4,
            )

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            content = request.content
            if len(content) > CHUNK_BYTES:
                # Same head (content-length included, so aiohttp does not switch to chunked
                # transfer encoding) and extensions; only the body is handed over in parts.
                request = httpx.Request(
                    request.method,
                    request.url,
                    headers=request.headers,
                    stream=_Chunks(content),
                    extensions=request.extensions,
                )
            failure: httpx.TransportError | None = None
            try:
                response: httpx.Response = await super().handle_async_request(request)
            except httpx.ConnectTimeout as exc:
                if isinstance(exc.__cause__, TimeoutError):
                    raise
                raise httpx.ConnectError(str(exc), request=request) from exc.__cause__
            except aiohttp.ClientError as exc:
                failure = _translated(exc, request, httpx.ConnectError)
            if failure is not None:
                # Raised outside the handler, so the aiohttp error is not its context either.
                raise failure
            response.stream = _BodyStream(response.stream, request)
            return response

    transport: httpx.AsyncBaseTransport = Transport(limits=LIMITS, verify=context)
    return transport


def _fail_bodies_on_parse_errors(connector: Any) -> None:
    """Make ``connector``'s connections fail the body being read when its parsing fails.

    aiohttp's ``ResponseHandler.data_received`` closes the connection and records the
    parser's error on itself, and its body reader keeps waiting (its own read timeout does
    pass the error on to the body). Connections made through a protocol whose
    ``set_exception`` also fails the current body with ``ClientPayloadError`` when the
    error is the parser's (``HttpProcessingError``) end that read at once. Left as it is
    when aiohttp's internals differ from 3.14's.
    """
    import functools

    from aiohttp import ClientPayloadError
    from aiohttp.client_proto import ResponseHandler
    from aiohttp.http_exceptions import HttpProcessingError

    loop = getattr(connector, "_loop", None)
    if loop is None or not isinstance(getattr(connector, "_factory", None), functools.partial):
        return

    class Handler(ResponseHandler):
        def set_exception(self, exc: BaseException, *args: Any) -> None:
            body = getattr(self, "_payload", None)
            super().set_exception(exc, *args)
            if (
                isinstance(exc, HttpProcessingError)
                and body is not None
                and body.exception() is None
                and not body.is_eof()
            ):
                body.set_exception(
                    ClientPayloadError(f"Response payload is not completed: {exc!r}"), exc
                )

    connector._factory = functools.partial(Handler, loop=loop)


def _translated(
    exc: Exception, request: httpx.Request, otherwise: type[httpx.TransportError]
) -> httpx.TransportError:
    """The httpx error for an aiohttp error httpx-aiohttp lets through.

    ``ClientResponseError`` (what aiohttp's parser raises for a reply it cannot read) gives
    ``httpx.RemoteProtocolError`` with the parser's own words only: its ``str`` and ``repr``
    would add the URL and its attributes hold the request's headers. Anything else gives
    ``otherwise`` (``ConnectError`` before the response, ``ReadError`` in the body) with
    the error's class and text.
    """
    import aiohttp

    if isinstance(exc, aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(
            " ".join(str(exc.message).split()) or f"HTTP {exc.status}", request=request
        )
    return otherwise(f"{type(exc).__name__}: {exc}", request=request)


class _Chunks(httpx.AsyncByteStream):
    """A request body handed to aiohttp :data:`CHUNK_BYTES` at a time (no copies)."""

    def __init__(self, content: bytes) -> None:
        self._content = memoryview(content)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        view = self._content
        for start in range(0, len(view), CHUNK_BYTES):
            yield view[start : start + CHUNK_BYTES]  # type: ignore[misc]


class _BodyStream(httpx.AsyncByteStream):
    """An aiohttp body whose socket read timeout follows the request's, read when it starts."""

    def __init__(self, inner: Any, request: httpx.Request) -> None:
        self._inner = inner
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        timeouts = self._request.extensions.get("timeout")
        response = getattr(self._inner, "_aiohttp_response", None)
        connection = getattr(response, "connection", None)
        protocol = getattr(connection, "protocol", None)
        if isinstance(timeouts, dict) and protocol is not None:
            protocol.read_timeout = timeouts.get("read")
            protocol.start_timeout()
        failure: httpx.TransportError | None = None
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx.ConnectTimeout as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise
            failure = httpx.ReadError(str(exc), request=self._request)
        except aiohttp.ClientError as exc:
            failure = _translated(exc, self._request, httpx.ReadError)
        if failure is not None:
            raise failure

    async def aclose(self) -> None:
        import aiohttp

        failure: httpx.TransportError | None = None
        try:
            await self._inner.aclose()
        except aiohttp.ClientError as exc:
            failure = _translated(exc, self._request, httpx.ReadError)
        if failure is not None:
            raise failure
