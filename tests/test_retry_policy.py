"""The retry decisions as pure functions: retryable?, how long?, and Retry-After parsing."""

from __future__ import annotations

import asyncio
import email.utils
import math

import pytest

from polythink.errors import (
    AuthError,
    RateLimitedError,
    RequestRejectedError,
    RequestTimeoutError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
    TransientError,
)
from polythink.middleware.retry import RetryPolicy, backoff, is_retryable, retry_delay
from polythink.transports.headers import parse_retry_after

WHEN = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT


def test_backoff_doubles_from_half_a_second_and_caps_at_eight() -> None:
    assert [backoff(n, 0.0) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_backoff_jitter_scales_into_the_upper_quarter() -> None:
    assert backoff(0, 0.5) == 0.4375
    assert backoff(2, 0.5) == 1.75
    assert backoff(4, 0.999) == pytest.approx(8.0 * (1 - 0.25 * 0.999))
    assert backoff(3, 0.0, initial=0.1, cap=0.5) == 0.5
    assert backoff(1000, 0.0) == 8.0


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RateLimitedError("x", status_code=429), True),
        (TransientError("x", status_code=503), True),
        (TransientError("x", status_code=529, error_type="overloaded_error"), True),
        (TransientError("x", status_code=200, error_type="overloaded_error"), True),
        (RequestTimeoutError("x", error_type="idle_timeout"), True),
        (TransientError("x", error_type="connection_error"), True),
        (RequestRejectedError("x", status_code=400), False),
        (RequestRejectedError("x", status_code=422), False),
        (AuthError("x", status_code=401), False),
        (ThinkingUnsupportedError("x"), False),
        (StreamInterruptedError("x", should_retry=True), False),
        (RequestRejectedError("x", status_code=400, should_retry=True), True),
        (TransientError("x", status_code=503, should_retry=False), False),
        (RateLimitedError("x", status_code=429, should_retry=False), False),
        (ValueError("bug"), False),
        (asyncio.CancelledError(), False),
    ],
)
def test_is_retryable(error: BaseException, expected: bool) -> None:
    assert is_retryable(error) is expected


def test_retry_delay_honours_the_server_wait_exactly() -> None:
    assert retry_delay(RateLimitedError("x", retry_after=5.0), 0, 0.9) == 5.0
    assert retry_delay(TransientError("x", retry_after=0.25), 3, 0.9) == 0.25


def test_retry_delay_of_zero_means_retry_now() -> None:
    assert retry_delay(TransientError("x", retry_after=0.0), 2, 0.5) == 0.0
    assert retry_delay(RateLimitedError("x", retry_after=0.0), 0, 0.9) == 0.0


def test_retry_delay_above_the_cap_means_raise_now() -> None:
    error = RateLimitedError("x", retry_after=90.0)
    assert retry_delay(error, 0, 0.0) is None
    assert retry_delay(error, 0, 0.0, RetryPolicy(max_retry_after=120.0)) == 90.0
    assert retry_delay(RateLimitedError("x", retry_after=math.inf), 0, 0.0) is None


def test_retry_delay_falls_back_to_backoff_without_a_usable_server_wait() -> None:
    assert retry_delay(TransientError("x"), 0, 0.0) == 0.5
    assert retry_delay(TransientError("x"), 1, 0.0) == 1.0
    policy = RetryPolicy(initial_delay=0.01, max_delay=0.02)
    assert retry_delay(TransientError("x"), 5, 0.0, policy) == 0.02


def test_retry_delay_is_none_for_what_is_not_retryable() -> None:
    assert retry_delay(RequestRejectedError("x", status_code=400, retry_after=1.0), 0, 0.0) is None
    assert retry_delay(AuthError("x", status_code=401), 0, 0.0) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"max_retries": True},
        {"max_retries": 1.5},
        {"initial_delay": 0},
        {"max_delay": -1.0},
        {"max_retry_after": 0},
    ],
)
def test_policy_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="must be"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "20.5"}, 0.0205),
        ({"retry-after": "5"}, 5.0),
        ({"retry-after": " 2.5 "}, 2.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after-ms": "-1", "retry-after": "9"}, 9.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:29:30 GMT"}, 90.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:29:30 -0000"}, 90.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "later"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, lambda: WHEN) == expected


def test_parse_retry_after_overflow_is_infinite() -> None:
    assert parse_retry_after({"retry-after": "9" * 400}) == math.inf


def test_parse_retry_after_reads_the_wall_clock_by_default() -> None:
    ahead = email.utils.formatdate(4_000_000_000, usegmt=True)
    wait = parse_retry_after({"retry-after": ahead})
    assert wait is not None
    assert 0 < wait < 4_000_000_000
