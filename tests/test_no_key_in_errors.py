"""No API key in anything a failed call leaves behind, whatever the server sends back.

A family of loopback servers answers with replies no HTTP client can read (a garbage status
line, a header without a colon, a 256 KiB header, a bad chunk size, broken gzip, a reset, TLS
spoken to a server that does not speak it), before the first event and after it. Each runs
through both HTTP layers, ``complete`` and ``stream``, with the key in each header form the
providers use (``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key``, and an
Azure-style ``api-key`` header). The raised error must be polythink's, of the class a caller
acts on (transient before any output, so retry and failover act; ``StreamInterruptedError``
with the partial after), and no string reachable from it (``str``, ``repr``, ``args``,
attributes, ``__cause__``/``__context__`` chains), from the captured logs, from the recorded
spans or from the response cache holds the key.

A server that answers 4xx/5xx with the request's credential headers in its error's type field
(OpenAI's ``code``, Anthropic's ``type``, Gemini's ``status``) and the key as the request id
header leaves none in any field either: the type is the status's, the request id redacted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import gzip
import json
import logging
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from polythink import Client, Source
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    StreamInterruptedError,
    TransientError,
)

LAYERS = ("httpx", "aiohttp")
PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]

# None of them is shaped like a known provider key, so only the verbatim secret can find them.
KEYS = {
    "bearer": "loopback-bearer-7f3a9c2e41d8b6a5",
    "x-api-key": "loopback-xapikey-0c9e8d7f6a5b4c3d",
    "x-goog-api-key": "loopback-goog-5e4d3c2b1a0f9e8d",
    "api-key": "loopback-azure-9a8b7c6d5e4f3a2b",
}


def sources(base_url: str, **kwargs: Any) -> dict[str, Source]:
    """One source per header form, all at ``base_url``."""
    return {
        "bearer": Source("openai", "gpt-5.5", api_key=KEYS["bearer"], base_url=base_url, **kwargs),
        "x-api-key": Source(
            "anthropic",
            "claude-sonnet-4-5",
            api_key=KEYS["x-api-key"],
            base_url=base_url,
            **kwargs,
        ),
        "x-goog-api-key": Source(
            "gemini",
            "gemini-2.5-flash",
            api_key=KEYS["x-goog-api-key"],
            base_url=base_url,
            **kwargs,
        ),
        "api-key": Source(
            "openai",
            "gpt-5.5",
            api_key="",
            headers={"api-key": KEYS["api-key"]},
            base_url=base_url,
            **kwargs,
        ),
    }


# -- what the servers send ----------------------------------------------------------------

FIRST_EVENT = {
    # Path fragment of the request -> the first event of that wire, text "Hel".
    "chat/completions": (
        b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5.5",'
        b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},'
        b'"finish_reason":null}]}\n\n'
    ),
    "messages": (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
        b'"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hel"}}\n\n'
    ),
    "GenerateContent": (
        b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]},'
        b'"index":0}],"modelVersion":"gemini-2.5-flash"}\n\n'
    ),
}

# Every reply closes its connection, so each attempt reaches the server on a new one.
OK = b"HTTP/1.1 200 OK\r\nconnection: close\r\n"
SSE_CHUNKED = OK + b"content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
SSE_GZIP = (
    OK + b"content-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def gzip_prefix(data: bytes) -> bytes:
    """A gzip stream of ``data`` flushed so far, without its end (more may follow)."""
    compressor = __import__("zlib").compressobj(wbits=31)
    return compressor.compress(data) + compressor.flush(__import__("zlib").Z_SYNC_FLUSH)


@dataclasses.dataclass(frozen=True)
class Fault:
    """What a server sends: ``before`` the first event, or a first event then ``after``."""

    name: str
    before: bytes = b""
    after: bytes | None = None
    gzip: bool = False
    reset: bool = False
    tls: bool = False
    echo: bool = False

    @property
    def after_first_event(self) -> bool:
        return self.after is not None


FAULTS = (
    Fault("garbage_status_line", before=b"GARBAGE\r\n\r\n"),
    Fault("header_without_colon", before=OK + b"no colon here\r\n\r\n"),
    Fault(
        "oversize_header",
        before=OK + b"x-big: " + b"a" * 256 * 1024 + b"\r\ncontent-length: 2\r\n\r\n{}",
    ),
    Fault("bad_chunk_size", before=SSE_CHUNKED + b"zz\r\nhello\r\n"),
    Fault(
        "truncated_gzip",
        before=OK + b"content-type: application/json\r\ncontent-encoding: gzip\r\n"
        b"content-length: 12\r\n\r\n" + gzip.compress(b'{"id": "x"}' * 40)[:12],
    ),
    Fault(
        "corrupt_gzip",
        before=OK + b"content-type: application/json\r\ncontent-encoding: gzip\r\n"
        b"content-length: 20\r\n\r\n" + b"\x1f\x8b\x08\x00" + b"\xff" * 16,
    ),
    Fault("closed_without_reply"),
    Fault("tls_to_plain_server", before=b"GARBAGE GARBAGE\r\n\r\n", tls=True),
    # A proxy that answers with the request it got, headers and key included, as one event
    # that is not JSON: the parser's error holds that text.
    Fault("request_echoed_as_the_body", echo=True),
    Fault("bad_chunk_size_after_first_event", after=b"zz\r\nhello\r\n"),
    Fault("reset_after_first_event", after=b"", reset=True),
    Fault("corrupt_gzip_after_first_event", after=chunk(b"\xff" * 64), gzip=True),
)


@contextlib.asynccontextmanager
async def serve(fault: Fault) -> AsyncIterator[tuple[str, list[str]]]:
    """Serve ``fault`` on 127.0.0.1; yield the base URL and the request paths seen."""
    seen: list[str] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            if fault.tls:
                await reader.read(1)
                seen.append("tls")
            else:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                seen.append(path)
            writer.write(fault.before)
            if fault.echo:
                echoed = b"data: " + head.replace(b"\r\n", b" ") + b"\n\n"
                writer.write(OK + b"content-length: %d\r\n\r\n%s" % (len(echoed), echoed))
            if fault.after is not None:
                wire = next(v for k, v in FIRST_EVENT.items() if k in path)
                if fault.gzip:
                    writer.write(SSE_GZIP + chunk(gzip_prefix(wire)))
                else:
                    writer.write(SSE_CHUNKED + chunk(wire))
                await writer.drain()
                # Long enough for the first event to reach the caller on its own.
                await asyncio.sleep(0.02)
                writer.write(fault.after)
            await writer.drain()
            if fault.reset:
                writer.transport.abort()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if fault.tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{port}/v1", seen
    finally:
        server.close()


# -- where a key could hide ---------------------------------------------------------------

_SKIPPED = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
    types.TracebackType,
)


def reachable_strings(root: object) -> Iterator[tuple[str, str]]:
    """Every (path, string) reachable from ``root`` without a traceback: strings, bytes,
    ``str``/``repr`` of every object, ``args``, ``__cause__``, ``__context__``, notes,
    attributes and slots, container items."""
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(root, "error")]
    while stack:
        value, path = stack.pop()
        if id(value) in seen or value is None or isinstance(value, (*_SKIPPED, enum.Enum)):
            continue
        seen.add(id(value))
        if isinstance(value, str):
            yield path, value
            continue
        if isinstance(value, bytes | bytearray | memoryview):
            yield path, bytes(value).decode("latin-1")
            continue
        if isinstance(value, int | float):
            continue
        with contextlib.suppress(Exception):
            yield f"str({path})", str(value)
            yield f"repr({path})", repr(value)
        if isinstance(value, BaseException):
            stack.append((value.args, f"{path}.args"))
            stack.append((value.__cause__, f"{path}.__cause__"))
            stack.append((value.__context__, f"{path}.__context__"))
            stack.append((getattr(value, "__notes__", None), f"{path}.__notes__"))
        if isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, f"{path}[key]"))
                stack.append((item, f"{path}[{key!r}]"))
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))
        attributes = getattr(value, "__dict__", None)
        if isinstance(attributes, dict):
            stack.extend((item, f"{path}.{name}") for name, item in attributes.items())
        for cls in type(value).__mro__:
            slots = getattr(cls, "__slots__", ())
            for name in (slots,) if isinstance(slots, str) else slots:
                with contextlib.suppress(Exception):
                    stack.append((getattr(value, name), f"{path}.{name}"))


def leaks(key: str, error: BaseException, logs: list[logging.LogRecord], spans: Any) -> list[str]:
    """Where ``key`` appears: paths from the error, then log records and span fields."""
    found = [path for path, text in reachable_strings(error) if key in text]
    formatter = logging.Formatter()
    for record in logs:
        text = formatter.format(record)
        if key in text or key in repr(record.args):
            found.append(f"log {record.name}: {text[:120]}")
    for span in spans:
        if key in span.to_json():
            found.append(f"span {span.name}")
    return found


def stored_bytes(root: Path) -> bytes:
    """Every byte of every file under ``root`` (the response cache)."""
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    caplog.set_level(logging.DEBUG)
    return caplog.records


@pytest.fixture(autouse=True)
def quiet_asyncio_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONASYNCIODEBUG", raising=False)


def test_the_scanner_finds_a_key_in_a_header_held_by_a_chained_error() -> None:
    import httpx

    request = httpx.Request("POST", "http://h/v1", headers={"x-api-key": KEYS["x-api-key"]})
    inner = httpx.ReadError("boom", request=request)
    outer = TransientError("outer")
    outer.__cause__ = inner
    paths = [p for p, text in reachable_strings(outer) if KEYS["x-api-key"] in text]
    assert any(p.startswith("error.__cause__._request") for p in paths)


# -- the calls ------------------------------------------------------------------------------


async def call(client: Client, mode: str) -> BaseException:
    """Run one call that must fail; return what it raised."""
    try:
        if mode == "complete":
            await client.complete(PROMPT)
        else:
            async for _ in client.stream(PROMPT):
                pass
    except BaseException as exc:
        return exc
    raise AssertionError("the call did not fail")


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
async def test_no_key_reachable_and_the_error_is_typed(
    fault: Fault, layer: str, logs: list[logging.LogRecord], tmp_path: Path
) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with serve(fault) as (base_url, seen):
        for form, source in sources(base_url, max_retries=1).items():
            async with Client(
                [source],
                http=layer,  # type: ignore[arg-type]
                cache=tmp_path / "cache",
                tracer_provider=tracer_provider,
            ) as client:
                for mode in ("complete", "stream"):
                    seen.clear()
                    exporter.clear()
                    error = await call(client, mode)
                    where = (form, mode, repr(error))
                    assert isinstance(error, PolythinkError), where
                    if mode == "stream" and fault.after_first_event:
                        assert type(error) is StreamInterruptedError, where
                        assert error.partial.text == "Hel"
                        assert len(seen) == 1  # never retried once output reached the caller
                    else:
                        assert type(error) is TransientError, where
                        assert error.should_retry is not False
                        assert len(seen) == 2  # the retry layer sent it again
                    found = leaks(KEYS[form], error, logs, exporter.get_finished_spans())
                    assert found == [], where
    assert all(key.encode() not in stored_bytes(tmp_path) for key in KEYS.values())


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize(
    "fault", [f for f in FAULTS if not f.after_first_event], ids=lambda f: f.name
)
async def test_failover_takes_the_call_to_the_next_source(fault: Fault, layer: str) -> None:
    good = (
        b'{"id":"c2","object":"chat.completion","created":1,"model":"gpt-5.5","choices":'
        b'[{"index":0,"message":{"role":"assistant","content":"Blue."},"finish_reason":"stop"}]}'
    )

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                OK
                + b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(good), good)
            )
            await writer.drain()
        writer.close()

    backup = await asyncio.start_server(answer, "127.0.0.1", 0)
    backup_url = f"http://127.0.0.1:{backup.sockets[0].getsockname()[1]}/v1"
    try:
        async with serve(fault) as (base_url, seen):
            first = Source("openai", "gpt-5.5", api_key=KEYS["bearer"], base_url=base_url)
            second = Source("openai", "gpt-5.5", api_key=KEYS["bearer"], base_url=backup_url)
            async with Client([first, second], http=layer) as client:  # type: ignore[arg-type]
                response = await client.complete(PROMPT)
    finally:
        backup.close()
    assert (response.text, response.source_index) == ("Blue.", 1)
    assert len(seen) == 3  # the first source's attempt and its two retries
    assert all(KEYS["bearer"] not in warning for warning in response.warnings)


def test_an_error_from_below_is_chained_only_without_a_key() -> None:
    import httpx

    from polythink.transports.error_map import error_from_transport

    key = KEYS["bearer"]
    request = httpx.Request("POST", "http://h/v1", headers={"authorization": f"Bearer {key}"})
    holding = httpx.ConnectError("refused", request=request)
    mapped = error_from_transport(holding, provider="openai", source_index=0, secrets=[key])
    assert (mapped.__cause__, mapped.__suppress_context__) == (None, True)
    assert mapped.message == "openai: connection error (ConnectError: refused)"
    clean = ConnectionResetError(104, "Connection reset by peer")
    mapped = error_from_transport(clean, provider="openai", source_index=0, secrets=[key])
    assert mapped.__cause__ is clean


@pytest.mark.anyio
async def test_any_other_exception_of_the_http_layer_is_a_polythink_error() -> None:
    import httpx

    def broken(request: httpx.Request) -> httpx.Response:
        raise ValueError(f"a transport bug that shows {request.headers['authorization']}")

    http = httpx.AsyncClient(transport=httpx.MockTransport(broken))
    source = Source("openai", "gpt-5.5", api_key=KEYS["bearer"], base_url="http://h/v1")
    async with Client([source], http_client=http) as client:
        error = await call(client, "complete")
    assert type(error) is TransientError
    assert (error.error_type, error.should_retry, error.attempts) == ("http_layer_error", False, 1)
    assert error.message == (
        "openai: the HTTP layer failed (ValueError: a transport bug that shows Bearer [REDACTED])"
    )
    assert [p for p, text in reachable_strings(error) if KEYS["bearer"] in text] == []


def test_a_base_url_with_a_query_is_refused_without_echoing_it() -> None:
    key = KEYS["x-goog-api-key"]
    with pytest.raises(ValueError, match=r"must not carry a query") as caught:
        Source("gemini", "gemini-2.5-flash", base_url=f"https://proxy.test/v1beta?key={key}")
    assert str(caught.value) == (
        "Source.base_url must not carry a query (?...) or fragment (#...): polythink appends "
        "the API path to it; got 'https://proxy.test/v1beta' followed by ?... (give a key as "
        "api_key= or headers=)"
    )


# -- a server that echoes the request's credentials into its error's fields ----------------

CUSTOM = "loopback-custom-3c2b1a0f9e8d7c6b"
"""The value of a Source's own ``x-custom-auth`` header: a credential by its name."""

ECHO_WIRES = {
    # provider -> (model, its key header, the response header its request id is read from)
    "openai": ("gpt-5.5", "authorization", "x-request-id"),
    "openai-responses": ("gpt-5.5", "authorization", "x-request-id"),
    "anthropic": ("claude-sonnet-4-5", "x-api-key", "request-id"),
    "gemini": ("gemini-2.5-flash", "x-goog-api-key", "x-request-id"),
}
ECHO_STATUSES = {
    400: RequestRejectedError,
    401: AuthError,
    429: RateLimitedError,
    503: TransientError,
}


def echoed_error(path: str, status: int, dump: str) -> bytes:
    """Each wire's own error shape with the request's headers (``dump``) in the field its
    SDKs read as the error's type: OpenAI's ``code``, Anthropic's ``type``, Gemini's
    ``status``."""
    message = f"headers were {dump}"
    if "/messages" in path:
        error: dict[str, Any] = {"type": "error", "error": {"type": dump, "message": message}}
    elif "GenerateContent" in path:
        error = {"error": {"code": status, "status": dump, "message": message}}
    else:
        error = {"error": {"type": "invalid_request_error", "code": dump, "message": message}}
    return json.dumps(error).encode()


@contextlib.asynccontextmanager
async def echoing(status: int, key_header: str, id_header: str) -> AsyncIterator[str]:
    """Answer ``status`` with the request's credential headers in the error's type field and
    the key header's value as the request id; yield the base URL."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            lines = head.split("\r\n")
            headers = {
                name.lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            credentials = {
                name: value
                for name, value in headers.items()
                if name in ("authorization", "x-api-key", "x-goog-api-key", "x-custom-auth")
            }
            body = echoed_error(lines[0].split(" ")[1], status, json.dumps(credentials))
            writer.write(
                b"HTTP/1.1 %d Echo\r\nconnection: close\r\ncontent-type: application/json\r\n"
                b"%s: %s\r\ncontent-length: %d\r\n\r\n%s"
                % (status, id_header.encode(), headers[key_header].encode(), len(body), body)
            )
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    finally:
        server.close()


@pytest.mark.anyio
@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("status", ECHO_STATUSES)
@pytest.mark.parametrize("provider", ECHO_WIRES)
async def test_credentials_echoed_into_the_error_type_and_request_id_are_not_kept(
    provider: str, status: int, layer: str, logs: list[logging.LogRecord]
) -> None:
    model, key_header, id_header = ECHO_WIRES[provider]
    key = f"loopback-{provider}-5e4d3c2b1a0f9e8d"
    async with echoing(status, key_header, id_header) as base_url:
        source = Source(
            provider,
            model,
            api_key=key,
            base_url=base_url,
            headers={"x-custom-auth": CUSTOM},
            max_retries=0,
        )
        async with Client([source], http=layer) as client:  # type: ignore[arg-type]
            for mode in ("complete", "stream"):
                error = await call(client, mode)
                where = (mode, repr(error))
                assert type(error) is ECHO_STATUSES[status], where
                # Not an identifier: the status gives the type, the body keeps the echo.
                assert error.error_type == f"http_{status}", where
                shown = "Bearer [REDACTED]" if key_header == "authorization" else "[REDACTED]"
                assert error.request_id == shown, where
                assert error.message == (
                    f'{provider} answered HTTP {status}: headers were {{"{key_header}": '
                    f'"{shown}", "x-custom-auth": "[REDACTED]"}}'
                ), where
                # The echo in the type field and in the message, two credentials in each.
                assert (error.body or "").count("[REDACTED]") == 4, where
                for secret in (key, CUSTOM):
                    assert leaks(secret, error, logs, []) == [], where


def test_a_plausible_error_type_that_is_the_key_is_not_kept() -> None:
    from polythink.transports.error_map import error_from_body, error_from_status

    key = KEYS["x-goog-api-key"]
    body = json.dumps({"error": {"code": 429, "status": key, "message": "slow down"}})
    headers = {"x-goog-request-id": key}
    mapped = error_from_status(
        429, headers, body.encode(), provider="gemini", source_index=2, secrets=[key]
    )
    assert (type(mapped), mapped.error_type, mapped.request_id, mapped.source_index) == (
        RateLimitedError,
        "http_429",
        "[REDACTED]",
        2,
    )
    assert mapped.body == '{"error": {"code": 429, "status": "[REDACTED]", "message": "slow down"}}'
    in_band = error_from_body(
        {"type": "error", "error": {"type": key, "message": f"echo {key}"}},
        provider="anthropic",
        source_index=1,
        status_code=200,
        request_id=key,
        secrets=[key],
    )
    assert (type(in_band), in_band.error_type, in_band.request_id) == (
        TransientError,
        "http_200",
        "[REDACTED]",
    )
    assert in_band.message == "anthropic sent an in-stream error: echo [REDACTED]"
    kept = error_from_body(
        {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}},
        provider="anthropic",
        source_index=1,
    )
    assert (type(kept), kept.error_type) == (TransientError, "overloaded_error")
