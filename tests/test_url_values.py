"""Values that could change where a request goes: each wire sends to its own path, whatever
the model id holds.

A loopback server records the request target exactly as it arrived (after both HTTP layers
built the request line), for a model id that tries to leave the base path, add a query
(Gemini's ``key=`` among them) or cut the path.
"""

from __future__ import annotations

import re
import urllib.parse

import pytest

from polythink import Client, Source
from polythink.errors import PolythinkError
from polythink.transports.base import path_segment
from tests.loopback import CannedServer

HOSTILE = ("../../../evil/x", "m?key=zzz&alt=x", "m#frag", "m%2F..%2Fx", "m/:streamGenerateContent")
ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
)
PROMPT = [{"role": "user", "content": "hi"}]

# Where each wire sends, below the base URL's path (/v1), for a model id in the body; Gemini
# puts the id in the path, percent-encoded as one segment.
WIRES = {
    "openai": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": None,
}


def encoded(model: str, kept: str = "") -> str:
    safe = "-._~" + kept
    return "".join(c if c.isalnum() or c in safe else f"%{ord(c):02X}" for c in model)


async def call(client: Client, stream: bool) -> None:
    if stream:
        async for _ in client.stream(PROMPT):
            pass
    else:
        await client.complete(PROMPT)


@pytest.mark.anyio
@pytest.mark.parametrize("layer", ["httpx", "aiohttp"])
@pytest.mark.parametrize("provider", list(WIRES))
@pytest.mark.parametrize("model", HOSTILE)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_model_id_never_changes_where_the_request_goes(
    layer: str, provider: str, model: str, stream: bool
) -> None:
    with CannedServer(ANSWER) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        source = Source(provider, model, api_key="sk-url-0001", base_url=base, max_retries=0)
        if provider == "gemini" and ":" in model:
            with pytest.raises(ValueError, match=r"holds ':', which Gemini's URL puts between"):
                Client([source], http=layer).start()
            return
        async with Client([source], http=layer, cache=False) as client:
            with pytest.raises(PolythinkError):
                await call(client, stream)
        (seen,) = server.seen
    expected = WIRES[provider]
    if expected is not None:
        assert seen.target == expected
        return
    # One segment under /models/, whatever characters a layer leaves unencoded (aiohttp's
    # yarl writes '=' and '&', which a path may hold, as they are); the query is Gemini's own.
    path, _, query = seen.target.partition("?")
    assert query == ("alt=sse" if stream else "")
    assert path.startswith("/v1/models/")
    segment = path.removeprefix("/v1/models/")
    assert "/" not in segment
    method = ":streamGenerateContent" if stream else ":generateContent"
    assert urllib.parse.unquote(segment) == model + method
    assert segment.removesuffix(method) in (encoded(model), encoded(model, "=&"))
    assert seen.target.count(":") == 1


def test_a_path_segment_is_percent_encoded_and_dot_segments_are_refused() -> None:
    assert path_segment("gemini-2.5-flash", "model") == "gemini-2.5-flash"
    assert path_segment("../../../evil/x", "model") == "..%2F..%2F..%2Fevil%2Fx"
    assert path_segment("m?key=zzz&alt=x", "model") == "m%3Fkey%3Dzzz%26alt%3Dx"
    assert path_segment("m#frag", "model") == "m%23frag"
    assert path_segment("m%2F", "model") == "m%252F"
    with pytest.raises(ValueError, match=r"model 'a:b' holds ':', it names a method"):
        path_segment("a:b", "model", refused=":", why="it names a method")
    for dots in ("", ".", ".."):
        with pytest.raises(ValueError, match=r"cannot be a segment of a URL path"):
            path_segment(dots, "model")


@pytest.mark.parametrize(
    ("model", "named"),
    [
        ("gpt-5.5\nx-injected: 1", "a line feed"),
        ("gpt-5.5\r", "a carriage return"),
        ("gpt 5.5", "a space"),
        ("gpt-5.5\t", "a tab"),
        ("gpt-5.5\x00", "a control character (U+0000)"),
        ("gpt-5.5\u2028", "a control character (U+2028)"),
    ],
)
@pytest.mark.parametrize("provider", list(WIRES))
def test_a_source_refuses_a_model_id_with_a_line_break_or_a_space(
    provider: str, model: str, named: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"Source.model holds {named}")):
        Source(provider, model, api_key="sk-url-0001")


def test_gemini_refuses_a_dot_segment_model_when_the_client_is_built() -> None:
    source = Source("gemini", "..", api_key="sk-url-0001")
    with pytest.raises(ValueError, match=r"model '\.\.' cannot be a segment of a URL path"):
        Client([source]).start()
