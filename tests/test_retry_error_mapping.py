"""The error boundary: HTTP statuses, in-band errors and transport failures -> typed errors."""

from __future__ import annotations

import json
import ssl

import anyio
import httpx
import pytest
import respx

from polythink import Client
from polythink.errors import (
    AuthError,
    PolythinkError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.transports.error_map import error_from_body, error_from_status, error_from_transport
from tests.resilience_helpers import MESSAGES, URL, mock_http, source

KEY = "sk-test-0123456789"
WHEN = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT


def _status(status: int, body: object = None, **headers: str) -> PolythinkError:
    content = b"" if body is None else json.dumps(body).encode()
    return error_from_status(
        status, headers, content, provider="openai", source_index=2, secrets=[KEY], now=lambda: WHEN
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, RequestRejectedError),
        (401, AuthError),
        (402, AuthError),
        (403, AuthError),
        (404, RequestRejectedError),
        (408, TransientError),
        (409, TransientError),
        (413, RequestRejectedError),
        (422, RequestRejectedError),
        (429, RateLimitedError),
        (500, TransientError),
        (502, TransientError),
        (503, TransientError),
        (504, TransientError),
        (529, TransientError),
    ],
)
def test_status_classes(status: int, cls: type[PolythinkError]) -> None:
    error = _status(status)
    assert type(error) is cls
    assert error.status_code == status
    assert error.source_index == 2
    assert error.provider == "openai"


def test_anthropic_529_overloaded() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = _status(529, body, **{"request-id": "req_011", "x-should-retry": "true"})
    assert type(error) is TransientError
    assert error.error_type == "overloaded_error"
    assert error.request_id == "req_011"
    assert error.should_retry is True
    assert error.message == "openai answered HTTP 529: Overloaded"


def test_retry_after_variants_and_should_retry() -> None:
    assert _status(429, **{"retry-after": "7"}).retry_after == 7.0
    assert _status(429, **{"retry-after-ms": "1250"}).retry_after == 1.25
    assert _status(503, **{"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}).retry_after == 30.0
    assert _status(503, **{"x-should-retry": "false"}).should_retry is False
    assert _status(400, **{"x-should-retry": "true"}).should_retry is True
    assert _status(503, **{"x-should-retry": "maybe"}).should_retry is None


def test_gemini_retry_info_gives_the_wait() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    error = _status(429, body)
    assert type(error) is RateLimitedError
    assert error.retry_after == 37.0
    assert error.error_type == "RESOURCE_EXHAUSTED"
    assert _status(429, body, **{"retry-after": "3"}).retry_after == 3.0


def test_openai_quota_429_is_not_retried_but_fails_over() -> None:
    body = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    error = _status(429, body)
    assert type(error) is RateLimitedError
    assert error.should_retry is False
    spend = {"error": {"type": "insufficient_quota", "code": "project_spend_limit_exceeded"}}
    assert _status(429, spend).should_retry is False
    assert _status(429, body, **{"x-should-retry": "true"}).should_retry is True
    assert _status(429, {"error": {"code": "rate_limit_exceeded"}}).should_retry is None


def test_reasoning_param_rejection_is_thinking_unsupported() -> None:
    body = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support 'none'",
            "type": "invalid_request_error",
            "param": "reasoning_effort",
            "code": "unsupported_value",
        }
    }
    error = _status(400, body)
    assert type(error) is ThinkingUnsupportedError
    assert error.error_type == "unsupported_value"


def test_body_that_is_not_json_and_secrets() -> None:
    error = error_from_status(
        502,
        {},
        f"<html>bad gateway for key {KEY}</html>".encode(),
        provider="openai",
        source_index=0,
        secrets=[KEY],
    )
    assert type(error) is TransientError
    assert error.body == "<html>bad gateway for key [REDACTED]</html>"
    assert error.message == "openai answered HTTP 502: <html>bad gateway for key [REDACTED]</html>"
    assert KEY not in str(error)


C18 = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize(
    ("payload", "cls", "error_type", "should_retry"),
    [
        (C18, TransientError, "overloaded_error", None),
        ({"type": "error", "error": {"type": "api_error"}}, TransientError, "api_error", None),
        (
            {"type": "error", "error": {"type": "rate_limit_error"}},
            RateLimitedError,
            "rate_limit_error",
            None,
        ),
        ({"type": "error", "error": {"type": "billing_error"}}, AuthError, "billing_error", None),
        (
            {"type": "error", "error": {"type": "invalid_request_error"}},
            RequestRejectedError,
            "invalid_request_error",
            None,
        ),
        ({"error": {"code": 429, "message": "slow down"}}, RateLimitedError, "429", None),
        ({"error": {"code": 502, "message": "upstream"}}, TransientError, "502", None),
        (
            {"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}},
            TransientError,
            "UNAVAILABLE",
            None,
        ),
        (
            {"type": "error", "code": "server_error", "message": "x", "sequence_number": 3},
            TransientError,
            "server_error",
            None,
        ),
        (
            {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}},
            RateLimitedError,
            "insufficient_quota",
            False,
        ),
    ],
)
def test_in_band_errors(
    payload: object, cls: type[PolythinkError], error_type: str, should_retry: bool | None
) -> None:
    error = error_from_body(payload, provider="anthropic", source_index=1, status_code=200)
    assert type(error) is cls
    assert error.error_type == error_type
    assert error.status_code == 200
    assert error.should_retry is should_retry


@pytest.mark.parametrize(("status", "error_type"), [(200, "http_200"), (None, None)])
def test_an_in_band_type_that_is_no_identifier_gives_the_status(
    status: int | None, error_type: str | None
) -> None:
    body = {"type": "error", "error": {"type": "bad type; see <logs>", "message": "gone"}}
    error = error_from_body(body, provider="anthropic", source_index=1, status_code=status)
    assert (type(error), error.error_type, error.status_code) == (
        TransientError,
        error_type,
        status,
    )


@pytest.mark.parametrize(
    ("exc", "stage", "cls", "error_type", "should_retry"),
    [
        (httpx.ConnectTimeout("t"), "response", RequestTimeoutError, "connect_timeout", None),
        (httpx.ReadTimeout("t"), "response", RequestTimeoutError, "first_byte_timeout", None),
        (httpx.ReadTimeout("t"), "body", RequestTimeoutError, "idle_timeout", None),
        (httpx.WriteTimeout("t"), "response", RequestTimeoutError, "write_timeout", None),
        (httpx.PoolTimeout("t"), "response", RequestTimeoutError, "pool_timeout", None),
        (TimeoutError(), "body", RequestTimeoutError, "deadline", None),
        (httpx.ConnectError("refused"), "response", TransientError, "connection_error", None),
        (httpx.ReadError("reset"), "body", TransientError, "connection_error", None),
        (httpx.RemoteProtocolError("eof"), "body", TransientError, "connection_error", None),
        (anyio.EndOfStream(), "body", TransientError, "connection_error", None),
        (anyio.BrokenResourceError(), "body", TransientError, "connection_error", None),
        (ssl.SSLError(1, "bad record mac"), "body", TransientError, "connection_error", None),
        (ConnectionResetError(104, "reset"), "body", TransientError, "connection_error", None),
        (httpx.DecodingError("gzip"), "body", TransientError, "decoding_error", None),
        (
            httpx.UnsupportedProtocol("ftp"),
            "response",
            TransientError,
            "unsupported_protocol",
            False,
        ),
        (
            httpx.LocalProtocolError("bad header"),
            "response",
            TransientError,
            "local_protocol_error",
            False,
        ),
    ],
)
def test_transport_errors(
    exc: BaseException,
    stage: str,
    cls: type[PolythinkError],
    error_type: str,
    should_retry: bool | None,
) -> None:
    error = error_from_transport(exc, provider="openai", source_index=0, stage=stage)
    assert type(error) is cls
    assert error.error_type == error_type
    assert error.should_retry is should_retry
    assert error.source_index == 0


def test_transport_error_message_is_redacted() -> None:
    exc = httpx.ConnectError(f"cannot reach https://x.test/?key={KEY}")
    error = error_from_transport(exc, provider="gemini", source_index=0, secrets=[KEY])
    assert KEY not in str(error)
    assert "[REDACTED]" in error.message


@pytest.mark.anyio
async def test_malformed_json_body_is_transient_with_one_call_per_attempt() -> None:
    with respx.mock(assert_all_called=True) as router:
        route = router.post(URL).respond(
            200, content=b'{"choices": [', headers={"x-request-id": "r1"}
        )
        async with Client([source(max_retries=0)], http_client=mock_http(router)) as client:
            with pytest.raises(TransientError) as caught:
                await client.complete(MESSAGES)
    assert caught.value.error_type == "malformed_body"
    assert caught.value.status_code == 200
    assert caught.value.request_id == "r1"
    assert caught.value.body == '{"choices": ['
    assert caught.value.attempts == 1
    assert route.call_count == 1


@pytest.mark.anyio
async def test_ssl_error_below_httpx_is_mapped() -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise ssl.SSLError(1, "decryption failed or bad record mac")

    http = httpx.AsyncClient(transport=httpx.MockTransport(fail))
    async with Client([source(max_retries=0)], http_client=http) as client:
        with pytest.raises(TransientError) as caught:
            await client.complete(MESSAGES)
    assert caught.value.error_type == "connection_error"
    assert isinstance(caught.value.__cause__, ssl.SSLError)
