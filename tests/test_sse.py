"""The SSE decoder against the WHATWG event-stream parsing rules, alone and through the transport.

Rules: https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
(lines end at CRLF, LF or CR; one leading BOM is dropped; ``:`` starts a comment; ``data`` lines
of an event are joined with LF; the event type applies to the whole event and resets at each
blank line; an event whose data buffer is empty is not dispatched; ``id`` and ``retry`` only
update state; what is pending when the stream ends is discarded). Cases C16, C17 and C19 are
from ../shared/cases/CASES.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import respx

from polythink import Client, Source
from polythink.errors import StreamInterruptedError, TransientError
from polythink.transports.sse import SSEDecoder
from tests.cassettes import RECORDED_STREAMS
from tests.chatwire import ODD_SIZES, collect, split, sse_response
from tests.conftest import cassette

URL = "https://api.openai.com/v1/chat/completions"


def decode(*chunks: bytes) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    events: list[tuple[str, str]] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def test_comments_are_ignored() -> None:
    assert decode(b": hello\n:\ndata: x\n: between\n\n") == [("message", "x")]


def test_multi_line_data_is_joined_with_lf() -> None:
    assert decode(b"data: a\ndata:b\ndata:  c\ndata\n\n") == [("message", "a\nb\n c\n")]


def test_only_one_leading_space_is_removed_and_no_colon_means_empty_value() -> None:
    assert decode(b"data:  two\n\ndata\n\n") == [("message", " two"), ("message", "")]


def test_event_type_applies_to_the_whole_event_and_resets_after_dispatch() -> None:
    body = b"data: 1\nevent: error\ndata: 2\n\ndata: 3\n\n"
    assert decode(body) == [("error", "1\n2"), ("message", "3")]


def test_event_without_data_is_not_dispatched_and_its_type_is_dropped() -> None:
    body = b"event: ping\n\nid: 4\n\nretry: 10\n\ndata: real\n\n"
    assert decode(body) == [("message", "real")]


def test_empty_data_line_dispatches_an_empty_event() -> None:
    assert decode(b"data:\n\n") == [("message", "")]


def test_id_and_retry_only_update_state() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 7\nretry: 3000\n\n") == []
    assert (decoder.last_event_id, decoder.retry) == ("7", 3000)
    assert decoder.feed(b"retry: 12x\nid: a\x00b\n\n") == []
    assert (decoder.last_event_id, decoder.retry) == ("7", 3000)
    assert decoder.feed(b"id\ndata: d\n\n") == [("message", "d")]
    assert decoder.last_event_id == ""


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\ndata: x\nbaz\n\n") == [("message", "x")]


@pytest.mark.parametrize("eol", [b"\r\n", b"\r", b"\n"])
def test_line_ends(eol: bytes) -> None:
    body = b"event: e" + eol + b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert decode(body) == [("e", "a\nb"), ("message", "c")]
    assert decode(*split(body, (1,))) == [("e", "a\nb"), ("message", "c")]


def test_mixed_line_ends_in_one_stream() -> None:
    assert decode(b"data: a\r\ndata: b\rdata: c\n\r\n") == [("message", "a\nb\nc")]


def test_cr_at_chunk_end_then_lf_at_next_chunk_start_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [("message", "a\nb")]


def test_cr_at_chunk_end_followed_by_data_is_a_line_end() -> None:
    assert decode(b"data: a\r", b"data: b\r", b"\r") == [("message", "a\nb")]


def test_lone_cr_then_empty_chunks_then_lf() -> None:
    assert decode(b"data: a\r", b"", b"\n", b"\r\n") == [("message", "a")]


def test_leading_bom_is_dropped_once() -> None:
    bom = "\ufeff".encode()
    assert decode(bom + b"data: x\n\n") == [("message", "x")]
    assert decode(bom[:1], bom[1:2], bom[2:] + b"data: x\n\n") == [("message", "x")]
    assert decode(bom + bom + b"data: x\n\n") == []
    assert decode(b"data: x\n\n" + bom + b"data: y\n\n") == [("message", "x")]


def test_bom_only_counts_at_the_start_of_the_stream() -> None:
    body = "data: \ufeffy\n\n".encode()
    assert decode(body) == [("message", "\ufeffy")]


def test_utf8_split_at_every_byte_boundary() -> None:
    text = "h\u00e9 \u20ac \U0001d11e \u4e2d\u6587 \u0646"
    body = f"event: t\u00e9\ndata: {text}\n\n".encode()
    expected = [("t\u00e9", text)]
    for cut in range(1, len(body)):
        assert decode(body[:cut], body[cut:]) == expected, cut
    assert decode(*split(body, (1,))) == expected
    assert decode(*split(body, ODD_SIZES)) == expected


def test_line_separators_inside_data_are_kept() -> None:
    text = "a\u2028b\u2029c\u0085d\x0be\x0cf"
    assert decode(f"data: {text}\n\n".encode()) == [("message", text)]


def test_pending_data_at_end_of_stream_is_discarded() -> None:
    assert decode(b"data: done\n\ndata: half\n") == [("message", "done")]
    assert decode(b"data: no newline") == []


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode(b"data: a\xffb\n\n") == [("message", "a\ufffdb")]


# ---------------------------------------------------------------- CASES.md C16, C17, C19

C16_BODY = (
    b"retry: 3000\n\n"
    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
    b'{"content":"Hi"}}]}\nid: 7\n\n'
    b": ping\n\n"
    b"data: [DONE]\n\n"
)
C17_BODY = (
    b": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n'
    b"data: [DONE]\n\n"
)
C19_ERROR = b'event: error\ndata: {"error":\ndata: {"message":"bad key"}}\n\n'
C19_CONTENT = b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"ok"}}]}\n\n'


def test_c16_decoder_dispatches_only_events_with_data() -> None:
    events = decode(C16_BODY)
    assert events == [
        (
            "message",
            '{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
            '{"content":"Hi"}}]}',
        ),
        ("message", "[DONE]"),
    ]
    first = next(json.loads(d) for _, d in events if d != "[DONE]")
    assert first["choices"][0]["delta"] == {"content": "Hi"}


def test_c17_decoder_ignores_keepalive_comments() -> None:
    events = decode(C17_BODY)
    assert [d for _, d in events if d != "[DONE]"] == [
        '{"choices":[{"index":0,"delta":{"content":"ok"}}]}'
    ]


def test_c19_decoder_joins_data_lines_and_keeps_the_event_type() -> None:
    events = decode(C19_ERROR + C19_CONTENT)
    assert events == [
        ("error", '{"error":\n{"message":"bad key"}}'),
        ("message", '{"choices":[{"index":0,\n"delta":{"content":"ok"}}]}'),
    ]
    assert json.loads(events[0][1]) == {"error": {"message": "bad key"}}
    assert json.loads(events[1][1])["choices"][0]["delta"]["content"] == "ok"


def _client() -> Client:
    return Client([Source("openai", "gpt-4o-mini", api_key="sk-test-0000000000")])


@pytest.mark.anyio
async def test_error_event_type_raises_even_without_an_error_key() -> None:
    body = b'event: error\ndata: {"message":"Overloaded","type":"overloaded_error"}\n\n'
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=sse_response(body))
        async with _client() as client:
            with pytest.raises(TransientError) as info:
                await collect(client.stream([{"role": "user", "content": "hi"}]))
    assert info.value.error_type == "overloaded_error"
    assert info.value.message == "openai sent an in-stream error: Overloaded"


@pytest.mark.anyio
async def test_crlf_bom_and_split_utf8_through_the_transport() -> None:
    text = "caf\u00e9 \u20ac\u2028\U0001d11e"
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    body = (
        "\ufeff: keep-alive\r\n\r\ndata: "
        + json.dumps(chunk, ensure_ascii=False)
        + "\r\n\r\ndata: [DONE]\r\n\r\n"
    ).encode()
    for sizes in ((1,), (2,), ODD_SIZES):
        with respx.mock(assert_all_called=True) as mock:
            mock.post(URL).mock(return_value=sse_response(body, sizes))
            async with _client() as client:
                events = await collect(client.stream([{"role": "user", "content": "hi"}]))
        assert "".join(e.text or "" for e in events if e.type == "text") == text
        assert events[-1].response is not None
        assert events[-1].response.text == text


@pytest.mark.anyio
async def test_stream_cut_before_done_and_finish_is_transient_and_pending_data_is_dropped() -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\ndata: {"choi'
    with respx.mock(assert_all_called=True) as mock:
        mock.post(URL).mock(return_value=sse_response(body))
        async with _client() as client:
            with pytest.raises(TransientError) as info:
                await collect(client.stream([{"role": "user", "content": "hi"}]))
    assert info.value.error_type == "stream_incomplete"
    assert not isinstance(info.value, StreamInterruptedError)


# ---------------------------------------------------------------- C17's gateway fault, every wire

KEEPALIVE = b": OPENROUTER PROCESSING"
RECORDED = [
    *RECORDED_STREAMS,
    # OpenRouter's Responses stream, recorded with its own keep-alive comments.
    (
        "pai_openrouter_responses_reasoning_text_stream.yaml",
        "openrouter-responses",
        "openai/gpt-oss-20b",
        "https://openrouter.ai/api/v1/responses",
    ),
]


def _gateway_mangled(raw: bytes) -> bytes:
    """``raw`` as the gateway of case C17 forwards it, with a keep-alive before every event:
    each comment wrapped in ``data:``."""
    eol = b"\r\n" if b"\r\n\r\n" in raw else b"\n"
    wrapped = b"data: " + KEEPALIVE + eol + eol
    events = raw.replace(KEEPALIVE, b"data: " + KEEPALIVE).split(eol + eol)
    return wrapped + (eol + eol + wrapped).join(events)


async def _replay(source: Source, url: str, raw: bytes) -> tuple[list[tuple[str, Any]], Any]:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url).mock(return_value=sse_response(raw))
        async with Client([source]) as client:
            events = await collect(client.stream([{"role": "user", "content": "hi"}]))
    assert route.call_count == 1
    done = events[-1].response
    assert done is not None
    summary = (done.text, done.reasoning, done.usage, done.finish_reason, done.id)
    return [(e.type, e.text) for e in events], summary


@pytest.mark.anyio
@pytest.mark.fixture_replay
@pytest.mark.parametrize(("name", "provider", "model", "url"), RECORDED)
async def test_c17_keepalive_wrapped_in_data_is_ignored_on_every_wire(
    name: str, provider: str, model: str, url: str
) -> None:
    source = Source(provider, model, api_key="replay-key-0123")
    raw = cassette(name).interactions[0].response_raw
    mangled = _gateway_mangled(raw)
    assert mangled.count(b"data: " + KEEPALIVE) >= 2
    events, summary = await _replay(source, url, raw)
    assert summary[0]  # the recording answers with text
    assert await _replay(source, url, mangled) == (events, summary)
