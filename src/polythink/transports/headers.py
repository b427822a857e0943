"""Response headers a transport reads: retry waits, rate-limit state, request ids.

Pure functions over a header mapping (and an injected clock where a header names an
instant), shared by every wire and tested alone.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from polythink.types import RateLimit

__all__ = [
    "header_request_id",
    "header_should_retry",
    "parse_duration",
    "parse_rate_limit",
    "parse_retry_after",
]

SECONDS = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def parse_retry_after(
    headers: Mapping[str, str], now: Callable[[], float] | None = None
) -> float | None:
    """Return the server's requested wait in seconds, or ``None``.

    Reads ``retry-after-ms`` (milliseconds, fractions allowed), then ``retry-after`` as
    seconds (fractions allowed) or as an HTTP date, minus ``now()`` (wall-clock seconds,
    ``time.time`` by default) and never below 0; a date without a zone is UTC. A value too
    large for a float gives ``math.inf`` so a cap check refuses it; anything else
    unparseable (negative numbers, ``inf``, ``nan``, garbage) gives ``None``. Conventions
    of the OpenAI and Anthropic SDKs (WIRE.md §8.3) and RFC 9110 §10.2.3.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None and SECONDS.fullmatch(raw_ms.strip()):
        return float(raw_ms) / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    if SECONDS.fullmatch(raw):
        return float(raw)
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return max(0.0, parsed.timestamp() - (now or time.time)())


_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(raw: str) -> float | None:
    """Return a Go duration string (``6m0s``, ``1s``, ``12ms``, ``1h2m3.5s``) in seconds.

    OpenAI sends its ``x-ratelimit-reset-*`` values in this form (WIRE.md §8.1; go-openai
    parses them with ``time.ParseDuration``). A bare number is taken as seconds. Anything
    else, or a negative value, gives ``None``.
    """
    text = raw.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    total = 0.0
    position = 0
    for match in _GO_DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match[1]) * _GO_UNITS[match[2]]
        position = match.end()
    if position != len(text) or position == 0:
        return None
    return total


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _reset_instant(raw: str | None, now: Callable[[], float]) -> float | None:
    if raw is None:
        return None
    try:
        instant = datetime.fromisoformat(raw.strip())
    except ValueError:
        return parse_duration(raw)
    if instant.tzinfo is None:
        return None
    return max(0.0, instant.timestamp() - now())


def parse_rate_limit(
    headers: Mapping[str, str], now: Callable[[], float] = time.time
) -> RateLimit | None:
    """Read the provider's rate-limit headers; ``None`` when it sent none.

    OpenAI (and the OpenAI-compatible providers that copy it):
    ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, resets as Go durations.
    Anthropic: ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, resets as
    RFC 3339 instants, turned into seconds from ``now()`` (wall clock, never below 0).
    Negative or malformed values become ``None``. Sources: WIRE.md §8.1-8.2; recorded
    headers in ``llm_openai_responses_plain_stream.yaml`` and ``llmanthropic_plain_stream.yaml``.
    """
    if headers.get("x-ratelimit-limit-requests") is not None or (
        headers.get("x-ratelimit-remaining-tokens") is not None
    ):
        reset_requests = headers.get("x-ratelimit-reset-requests")
        reset_tokens = headers.get("x-ratelimit-reset-tokens")
        return RateLimit(
            requests_limit=_header_int(headers, "x-ratelimit-limit-requests"),
            requests_remaining=_header_int(headers, "x-ratelimit-remaining-requests"),
            requests_reset=parse_duration(reset_requests) if reset_requests else None,
            tokens_limit=_header_int(headers, "x-ratelimit-limit-tokens"),
            tokens_remaining=_header_int(headers, "x-ratelimit-remaining-tokens"),
            tokens_reset=parse_duration(reset_tokens) if reset_tokens else None,
        )
    if headers.get("anthropic-ratelimit-requests-limit") is not None or (
        headers.get("anthropic-ratelimit-tokens-remaining") is not None
    ):
        return RateLimit(
            requests_limit=_header_int(headers, "anthropic-ratelimit-requests-limit"),
            requests_remaining=_header_int(headers, "anthropic-ratelimit-requests-remaining"),
            requests_reset=_reset_instant(headers.get("anthropic-ratelimit-requests-reset"), now),
            tokens_limit=_header_int(headers, "anthropic-ratelimit-tokens-limit"),
            tokens_remaining=_header_int(headers, "anthropic-ratelimit-tokens-remaining"),
            tokens_reset=_reset_instant(headers.get("anthropic-ratelimit-tokens-reset"), now),
        )
    return None


def header_request_id(headers: Mapping[str, str]) -> str | None:
    for name in (
        "x-request-id",
        "request-id",
        "x-amzn-requestid",
        "apim-request-id",
        "x-goog-request-id",
        "cf-ray",
    ):
        value = headers.get(name)
        if value:
            return value
    return None


def header_should_retry(headers: Mapping[str, str]) -> bool | None:
    value = headers.get("x-should-retry")
    if value == "true":
        return True
    if value == "false":
        return False
    return None
