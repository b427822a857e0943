"""Gemini answers that carry nothing of an answer, and usage with no known field.

A ``GenerateContentResponse`` has ``candidates``, or ``promptFeedback`` when the prompt was
blocked; the REST API spells ``usageMetadata`` fields in camelCase
(WIRE.md §4.4, from the REST reference).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from polythink import Client, Source, Usage
from polythink.errors import TransientError
from polythink.providers import get_provider
from polythink.transports.gemini import parse_response, parse_usage
from tests.chatwire import collect, sse_response

BASE = "http://mock.test/v1beta"
URL = f"{BASE}/models/gemini-2.5-flash:generateContent"
STREAM_URL = f"{BASE}/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
HI = [{"role": "user", "content": "hi"}]
GOOD = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
}
MESSAGE = "gemini answered with neither candidates nor promptFeedback"


def _source(retries: int) -> Source:
    return Source(
        "gemini", "gemini-2.5-flash", api_key="k-test-gemini", base_url=BASE, max_retries=retries
    )


@pytest.mark.parametrize("junk", [{}, {"id": "junk"}, {"candidates": []}, {"usageMetadata": {}}])
@pytest.mark.anyio
async def test_a_body_without_candidates_or_feedback_raises_and_is_not_cached(
    junk: dict[str, Any], tmp_path: Path
) -> None:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(return_value=httpx.Response(200, json=junk))
        async with Client([_source(0)], cache=str(tmp_path)) as client:
            for _ in range(2):
                with pytest.raises(TransientError) as caught:
                    await client.complete(HI)
                assert type(caught.value) is TransientError
                assert caught.value.message == MESSAGE
                assert (caught.value.provider, caught.value.attempts) == ("gemini", 1)
    assert route.call_count == 2  # the failure was not cached


@pytest.mark.anyio
async def test_a_junk_body_is_retried() -> None:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL)
        route.side_effect = [httpx.Response(200, json={}), httpx.Response(200, json=GOOD)]
        async with Client([_source(1)]) as client:
            response = await client.complete(HI)
    assert route.call_count == 2
    assert (response.text, response.usage) == ("ok", Usage(input_tokens=3, output_tokens=1))


def _events(*chunks: Any) -> bytes:
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()


@pytest.mark.parametrize("junk", [{}, {"id": "junk"}, {"candidates": []}])
@pytest.mark.anyio
async def test_a_streamed_junk_chunk_raises_before_output(
    junk: dict[str, Any], tmp_path: Path
) -> None:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(STREAM_URL)
        route.side_effect = lambda request: sse_response(_events(junk, GOOD))
        async with Client([_source(0)], cache=str(tmp_path)) as client:
            for _ in range(2):
                seen: list[Any] = []
                with pytest.raises(TransientError) as caught:
                    await collect(client.stream(HI), seen)
                assert type(caught.value) is TransientError
                assert caught.value.message == MESSAGE
                assert seen == []
    assert route.call_count == 2


@pytest.mark.anyio
async def test_a_usage_only_chunk_is_not_junk() -> None:
    tail = {
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4}
    }
    head = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ]
    }
    with respx.mock(assert_all_called=True) as mock:
        mock.post(STREAM_URL).mock(return_value=sse_response(_events(head, tail)))
        async with Client([_source(0)]) as client:
            events = await collect(client.stream(HI))
    done = events[-1].response
    assert done is not None
    assert (done.text, done.usage) == ("ok", Usage(input_tokens=3, output_tokens=1))


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"prompt_token_count": 3, "candidates_token_count": 1, "total_token_count": 4},
        {"trafficType": "ON_DEMAND"},
        {"promptTokenCount": None, "totalTokenCount": "4"},
    ],
)
def test_usage_with_no_known_field_is_none(metadata: dict[str, Any]) -> None:
    assert parse_usage(metadata) is None
    body = {**GOOD, "usageMetadata": metadata}
    response = parse_response(body, profile=get_provider("gemini"), source_index=0, model="m")
    assert response.usage is None


def test_usage_with_one_known_field_is_kept() -> None:
    assert parse_usage({"promptTokenCount": 0}) == Usage(input_tokens=0)
    assert parse_usage({"cachedContentTokenCount": 7}) == Usage(cache_read_tokens=7)
