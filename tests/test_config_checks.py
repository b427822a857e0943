"""Configuration refused when it is built, with a ValueError that never shows a credential.

A base URL with a bad port, no host or user information; a header name or value that is not
valid HTTP (RFC 9110 §5.1, §5.5: a name is a token; polythink sends values of printable ASCII
with spaces and tabs only inside); a tool schema or ``extra_body`` JSON cannot represent; a
TOML path that is a directory or a file that is not UTF-8. Each would otherwise build and fail
on every call (or, for user information, log the key through httpx at INFO).
"""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

import pytest

from polythink import Client, ConfigFileNotFoundError, InvalidInputError, Source
from polythink.middleware.base import CompleteNext, Passthrough
from polythink.simulator import Simulator
from polythink.types import Request, Response, Tool

KEY = "sk-proj-SECRETSECRET0123456789"
PROMPT = [{"role": "user", "content": "Why is the sky blue?"}]


def build(**kwargs: Any) -> Source:
    return Source("openai", "gpt-5.5", api_key="sk-test-0000000000", **kwargs)


# ---------------------------------------------------------------- base URLs

BAD_PORT = (
    "Source.base_url's port is not a number from 1 to 65535 (what follows the host's ':' is "
    "not shown); expected an http:// or https:// URL such as 'https://api.openai.com/v1'"
)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://h.test:99999/v1",
            BAD_PORT,
        ),
        (
            "http://h.test:abc/v1",
            BAD_PORT,
        ),
        (
            "https://h.test:0/v1",
            BAD_PORT,
        ),
        (
            "http://h.test:/v1",
            BAD_PORT,
        ),
        (
            "http:///v1",
            "Source.base_url has no host; expected an http:// or https:// URL such as "
            "'https://api.openai.com/v1'",
        ),
        (
            "http://[::1/v1",
            "Source.base_url is not a valid URL (Invalid IPv6 URL); expected an http:// or "
            "https:// URL such as 'https://api.openai.com/v1'",
        ),
        (
            "ftp://h.test/v1",
            "Source.base_url's scheme must be http or https; got 'ftp' (expected an http:// or "
            "https:// URL such as 'https://api.openai.com/v1')",
        ),
        (
            "api.openai.com/v1",
            "Source.base_url's scheme must be http or https; got no scheme (expected an http:// "
            "or https:// URL such as 'https://api.openai.com/v1')",
        ),
        (
            "http://h.test/v1\n",
            "Source.base_url holds a line feed; expected an http:// or https:// URL such as "
            "'https://api.openai.com/v1'",
        ),
        (
            "http://my host/v1",
            "Source.base_url holds a space; expected an http:// or https:// URL such as "
            "'https://api.openai.com/v1'",
        ),
    ],
)
def test_a_base_url_no_call_could_reach_is_refused_at_build(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^Source\.base_url\b") as caught:
        build(base_url=url)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (f"http://127.0.0.1:{KEY}/v1", "'s port is not a number from 1 to 65535"),
        (f"https://proxy.test:{KEY}", "'s port is not a number from 1 to 65535"),
        (f"ftp://{KEY}/", "'s scheme must be http or https; got 'ftp'"),
        (f"{KEY}://proxy.test/v1", "'s scheme must be http or https; got a scheme that is not"),
        (f"http://:{KEY}/v1", " has no host"),
        (f"http://[{KEY}/v1", " is not a valid URL (Invalid IPv6 URL)"),
    ],
)
def test_a_bad_base_url_is_refused_without_echoing_its_host_port_or_path(
    url: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=r"^Source\.base_url") as caught:
        build(base_url=url)
    assert str(caught.value).startswith(f"Source.base_url{problem}")
    assert KEY not in str(caught.value)
    assert "SECRET" not in repr(caught.value.args)


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{KEY}@proxy.test/v1",
        f"https://{KEY}@proxy.test/v1",
        f"https://{KEY}:@proxy.test:8443/v1?x=1",
        f"ftp://user:{KEY}@proxy.test/v1",
    ],
)
def test_user_information_in_a_base_url_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(ValueError, match="must not carry user information") as caught:
        build(base_url=url)
    assert KEY not in str(caught.value)
    assert "...@proxy.test" in str(caught.value)


def test_the_user_information_message_names_the_host_and_path() -> None:
    with pytest.raises(ValueError, match="user information") as caught:
        build(base_url=f"http://user:{KEY}@proxy.test:8080/v1")
    assert str(caught.value) == (
        "Source.base_url must not carry user information (user:password@): give a key as "
        "api_key= or headers=; got http://...@proxy.test:8080/v1 (the user information is "
        "not shown)"
    )


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://[::1]:8443/v1/", "https://[::1]:8443/v1"),
        ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
        ("https://h.test:65535", "https://h.test:65535"),
        ("https://bücher.test/v1", "https://bücher.test/v1"),
    ],
)
def test_usable_base_urls_are_kept(url: str, kept: str) -> None:
    assert build(base_url=url).base_url == kept


# ---------------------------------------------------------------- headers


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (
            {"X-Trace": KEY + "\r\nX-Injected: 1"},
            "Source.headers['X-Trace'] holds a carriage return; a header value is printable "
            "ASCII, with spaces and tabs only inside it. The value is not shown",
        ),
        (
            {"X-Trace": KEY + "\n"},
            "Source.headers['X-Trace'] holds a line feed; a header value is printable ASCII, "
            "with spaces and tabs only inside it. The value is not shown",
        ),
        (
            {"X-Team": KEY + "é"},
            "Source.headers['X-Team'] holds a non-ASCII character (U+00E9); a header value is "
            "printable ASCII, with spaces and tabs only inside it. The value is not shown",
        ),
        (
            {"X-Team": KEY + "\x00"},
            "Source.headers['X-Team'] holds a control character (U+0000); a header value is "
            "printable ASCII, with spaces and tabs only inside it. The value is not shown",
        ),
        (
            {"X-Team": " " + KEY},
            "Source.headers['X-Team'] starts or ends with whitespace; a header value is "
            "printable ASCII, with spaces and tabs only inside it. The value is not shown",
        ),
        (
            {"Bad Header": "v"},
            "Source.headers: a header name is a token of letters, digits and !#$%&'*+-.^_`|~ "
            "(no spaces, colons or control characters); got a name 'Bad' followed by a space",
        ),
        (
            {"X-Trace:": "v"},
            "Source.headers: a header name is a token of letters, digits and !#$%&'*+-.^_`|~ "
            "(no spaces, colons or control characters); got a name 'X-Trace' followed by ':'",
        ),
        (
            {"": "v"},
            "Source.headers: a header name is a token of letters, digits and !#$%&'*+-.^_`|~ "
            "(no spaces, colons or control characters); got a name empty",
        ),
    ],
)
def test_headers_that_are_not_valid_http_are_refused_at_build(
    headers: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^Source\.headers") as caught:
        build(headers=headers)
    assert str(caught.value) == message
    assert KEY not in repr(caught.value)


def test_valid_headers_are_kept() -> None:
    headers = {"anthropic-beta": "context-1m-2025-08-07", "X-Title": "My app\tv2", "X-Empty": ""}
    assert build(headers=headers).headers == headers


class BadHeader(Passthrough):
    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(request.with_(extra_headers={"x-trace": KEY + "\r\nx-a: 1"}))


@pytest.mark.anyio
async def test_a_call_header_that_is_not_valid_http_is_refused_before_sending() -> None:
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", api_key="sk-test", base_url=sim.base_url("openai"))
        async with Client([source], middleware=[BadHeader()], http="httpx") as client:
            with pytest.raises(ValueError, match="carriage return") as caught:
                await client.complete(PROMPT)
        assert sim.stats.requests == 0
    assert str(caught.value) == (
        "Request.extra_headers['x-trace'] holds a carriage return; a header value is printable "
        "ASCII, with spaces and tabs only inside it. The value is not shown"
    )


# ---------------------------------------------------------------- JSON bodies


def test_a_tool_schema_json_cannot_represent_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match="JSON cannot represent") as caught:
        Tool(name="f", parameters={"type": "object", "default": {1, 2}})
    assert str(caught.value) == (
        "tool 'f': parameters['default'] is of type set, which JSON cannot represent (give a "
        "list); a request body holds dicts with string keys, lists, strings, numbers, booleans "
        "and None"
    )


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"x": {1, 2}}, "['x'] is of type set"),
        ({"a": [1, {"b": object()}]}, "['a'][1]['b'] is of type object"),
        ({(1, 2): 3}, " has a key that is of type tuple"),
    ],
)
def test_an_extra_body_json_cannot_represent_is_refused(body: dict[Any, Any], where: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"Source.extra_body{where}")):
        build(extra_body=body)
    with pytest.raises(ValueError, match=re.escape(f"extra_body{where}")):
        Client([build()]).request(PROMPT, extra_body=body)


def test_values_json_writes_are_kept() -> None:
    body = {"a": (1, 2.5, None, True), "b": {"c": "d"}, "n": 10**30}
    assert build(extra_body=body).extra_body == body


# ---------------------------------------------------------------- TOML files


def test_a_toml_path_that_is_a_directory_is_a_value_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is a directory") as caught:
        Client.from_toml(tmp_path)
    assert str(caught.value) == f"{tmp_path}: is a directory, not a TOML file"


def test_a_toml_file_that_is_not_utf8_is_a_value_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_bytes(b'[[source]]\nprovider = "openai"\nmodel = "gpt-5.5\xe9"\n')
    with pytest.raises(ValueError, match="not valid TOML") as caught:
        Client.from_toml(path)
    assert str(caught.value) == (
        f"{path}: not valid TOML: TOML is UTF-8 text, and byte 0xe9 at offset 47 is not UTF-8"
    )


def test_a_missing_toml_file_is_file_not_found_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))) as caught:
        Client.from_toml(path)
    assert type(caught.value) is ConfigFileNotFoundError
    assert isinstance(caught.value, InvalidInputError)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOENT, str(path))
    assert str(caught.value) == (
        f"{path}: no such file (a TOML configuration file was expected there)"
    )


@pytest.mark.parametrize("path", [3, 0, None, "", b"sources.toml"])
def test_a_toml_path_that_is_not_a_path_is_refused_before_opening(path: Any) -> None:
    # An int would be opened as a file descriptor: 0 reads and closes standard input.
    with pytest.raises(InvalidInputError) as caught:
        Client.from_toml(path)
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == (
        "a TOML configuration is read from a path: a non-empty str or an os.PathLike such "
        f"as pathlib.Path; got {type(path).__name__} {path!r}"
    )


_SOURCE = '[[source]]\nprovider = "openai"\nmodel = "gpt-5.5"\n'
_WRONG_TYPES = {
    "thinking = 5\n" + _SOURCE: "thinking must be a [thinking] table of keys and values; got 5",
    "thinking = [1]\n" + _SOURCE: (
        "thinking must be a [thinking] table of keys and values; got [1]"
    ),
    "source = [1, 2]\n": "source #0 must be a [[source]] table of keys and values; got 1",
    "source = 5\n": "source must be [[source]] tables (an array of tables); got 5",
    '[source]\nprovider = "openai"\n': (
        "source must be [[source]] tables (an array of tables); got {'provider': 'openai'}"
    ),
    "budget = [1]\n" + _SOURCE: "budget #0 must be a [[budget]] table of keys and values; got 1",
    _SOURCE + "[budget]\nusd = 5.0\n": (
        "budget must be [[budget]] tables (an array of tables); got {'usd': 5.0}"
    ),
}


@pytest.mark.parametrize("text", list(_WRONG_TYPES))
def test_a_toml_table_of_the_wrong_type_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(text)
    with pytest.raises(InvalidInputError) as caught:
        Client.from_toml(path, api_key=KEY)
    assert type(caught.value) is InvalidInputError
    assert str(caught.value) == f"{path}: {_WRONG_TYPES[text]}"


# ---------------------------------------------------------------- repr


def test_repr_of_a_source_redacts_credentials_in_extra_body() -> None:
    source = Source(
        "openai",
        "gpt-5.5",
        api_key=KEY,
        headers={"X-Org-Token": "org-token-0123"},
        extra_body={
            "api_key": "plain-secret",
            "max_tokens": 3,
            "metadata": {"note": "made with org-token-0123", "accessToken": "t0", "user": "u1"},
            "keys": ["Bearer abcdefghijkl", KEY],
        },
    )
    shown = repr(source)
    assert shown == (
        "Source(provider='openai', model='gpt-5.5', base_url=None, reasoning_effort=None, "
        "effort_fallback='nearest', rpm=None, tpm=None, max_concurrency=None, "
        "timeout=Timeout(connect=5.0, first_byte=None, idle=120.0, total=600.0), "
        "max_retries=None, drop_params=False, extra_body={'api_key': '[REDACTED]', "
        "'max_tokens': 3, 'metadata': {'note': '[REDACTED]', 'accessToken': '[REDACTED]', "
        "'user': 'u1'}, 'keys': ['[REDACTED]', '[REDACTED]']}, api_version=None, "
        "thinking_display=None, reasoning_mode=None, service_tier=None, "
        "service_tier_fallback='nearest', capacity_fallback=<ServiceTier.STANDARD: 'standard'>, "
        "prefix_mismatch=None, region=None, project=None, base_model=None)"
    )
    # The values themselves are unchanged: only what is shown.
    assert source.extra_body is not None
    assert source.extra_body["api_key"] == "plain-secret"


def test_repr_of_a_request_redacts_credentials_in_extra_body() -> None:
    request = Request(messages=(), extra_body={"api_key": "plain-secret", "top_k": 3})
    assert "plain-secret" not in repr(request)
    assert "extra_body={'api_key': '[REDACTED]', 'top_k': 3}" in repr(request)
