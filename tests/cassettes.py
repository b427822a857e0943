"""Read the recorded cassettes in ../shared/fixtures/real (VCR YAML, three flavours).

- ``pai_*`` (pydantic-ai): JSON bodies as ``parsed_body`` mappings; streamed bodies as text
  under ``body: {string: ...}``.
- ``llm*`` (vcrpy): the request ``body`` is the exact JSON string sent; response bodies are
  text, or ``!!binary`` gzip.
- ``vercel_*``: a bare JSON response body (use ``json.loads`` directly).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    pass


def _binary(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
    return base64.b64decode(loader.construct_scalar(node))  # type: ignore[arg-type]


_Loader.add_constructor("tag:yaml.org,2002:binary", _binary)


@dataclass(frozen=True)
class Interaction:
    """One recorded request and its response."""

    method: str
    uri: str
    request_headers: dict[str, list[str]]
    request_body: Any
    status: int
    response_headers: dict[str, list[str]]
    response_raw: bytes
    response_json: Any

    @property
    def streamed(self) -> bool:
        """Whether the response is a server-sent-event stream."""
        content_type = " ".join(self.response_headers.get("content-type", []))
        if "text/event-stream" in content_type:
            return True
        return self.response_json is None and (
            self.response_raw.lstrip().startswith((b"data:", b"event:", b":"))
        )

    def header(self, name: str) -> str | None:
        values = self.response_headers.get(name.lower())
        return values[0] if values else None


def _lower(headers: dict[str, Any] | None) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for key, value in (headers or {}).items():
        result[key.lower()] = [str(v) for v in (value if isinstance(value, list) else [value])]
    return result


def _response_bytes(response: dict[str, Any], headers: dict[str, list[str]]) -> bytes:
    body = response.get("body")
    if isinstance(body, dict):
        body = body.get("string")
    if body is None and "parsed_body" in response:
        return json.dumps(response["parsed_body"]).encode()
    if isinstance(body, str):
        raw = body.encode("utf-8")
    elif isinstance(body, bytes):
        raw = body
    else:
        raw = b""
    if raw[:2] == b"\x1f\x8b" or "gzip" in " ".join(headers.get("content-encoding", [])):
        with contextlib.suppress(OSError):
            raw = gzip.decompress(raw)
    return raw


@dataclass(frozen=True)
class Cassette:
    """A recording: its path and interactions in order."""

    path: Path
    interactions: list[Interaction]

    @classmethod
    def load(cls, path: Path) -> Cassette:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
        interactions = []
        for item in data["interactions"]:
            request, response = item["request"], item["response"]
            if "parsed_body" in request:
                request_body = request["parsed_body"]
            else:
                raw = request.get("body")
                if isinstance(raw, dict):
                    raw = raw.get("string")
                try:
                    request_body = json.loads(raw) if raw else None
                except (TypeError, ValueError):
                    request_body = raw
            headers = _lower(response.get("headers"))
            raw_bytes = _response_bytes(response, headers)
            if "parsed_body" in response:
                response_json = response["parsed_body"]
            else:
                try:
                    response_json = json.loads(raw_bytes)
                except ValueError:
                    response_json = None
            interactions.append(
                Interaction(
                    method=request.get("method", "POST"),
                    uri=request["uri"],
                    request_headers=_lower(request.get("headers")),
                    request_body=request_body,
                    status=int(response["status"]["code"]),
                    response_headers=headers,
                    response_raw=raw_bytes,
                    response_json=response_json,
                )
            )
        return cls(path=path, interactions=interactions)


RECORDED_STREAMS: list[tuple[str, str, str, str]] = [
    (
        "pai_anthropic_thinking_stream.yaml",
        "anthropic",
        "claude-sonnet-4-0",
        "https://api.anthropic.com/v1/messages",
    ),
    (
        "pai_openrouter_chat_reasoning_details_stream.yaml",
        "openrouter",
        "anthropic/claude-sonnet-4.5",
        "https://openrouter.ai/api/v1/chat/completions",
    ),
    (
        "pai_openai_responses_reasoning_summary_stream.yaml",
        "openai-responses",
        "o3-mini",
        "https://api.openai.com/v1/responses",
    ),
    (
        "pai_gemini_thinking_stream_sse.yaml",
        "gemini",
        "gemini-2.5-pro",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
    ),
]
"""One recorded stream per wire: the cassette, the provider and model of a source that replays
it, and the URL that source posts to."""
