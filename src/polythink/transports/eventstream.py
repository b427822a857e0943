"""The AWS event-stream framing (``application/vnd.amazon.eventstream``), read with botocore.

Bedrock's streamed answers (InvokeModelWithResponseStream, ConverseStream) are binary frames:
a 12-byte prelude (total length, headers length, CRC32 of the first 8 bytes), headers, the
payload and a CRC32 of the whole message (CLOUDS.md §1.7). botocore's sans-IO
``EventStreamBuffer`` parses them and checks both checksums; it is fed here at the transport's
byte boundary, the same place the SSE decoder is, so deadlines and idle timeouts apply alike
(:meth:`polythink.transports.base.HTTPTransport.sse_events`). botocore is imported when the
first decoder is built (about 10 ms; CLOUDS.md §4), never by ``import polythink``.

Each message becomes ``(event type, payload text)``:

- ``:message-type`` ``event``: the ``:event-type`` header (``chunk`` for InvokeModel, whose
  payload is ``{"bytes": "<base64 of one Anthropic stream event>", "p": "…"}``;
  ``messageStart``, ``contentBlockDelta`` … for Converse, whose payload is the event itself);
- ``exception``: :data:`EXCEPTION` + the ``:exception-type`` header (``throttlingException``,
  ``modelStreamErrorException`` …), its payload the exception's JSON (``{"message": …}``);
- ``error``: :data:`EXCEPTION` + the ``:error-code`` header, its payload
  ``{"message": <:error-message>}``.
"""

from __future__ import annotations

import json
from typing import Any

from polythink.errors import InvalidInputError, TransientError

__all__ = ["EXCEPTION", "EventStreamDecoder", "MalformedFrame"]

EXCEPTION = ":exception:"
"""Prefix of the event type of an exception or error message."""


class MalformedFrame(TransientError):
    """A frame whose checksum or lengths are wrong (botocore's ``ParserError``)."""


class EventStreamDecoder:
    """Bytes of an AWS event stream in, ``(event type, payload)`` pairs out.

    Raises (from :meth:`feed`):
        MalformedFrame: a frame botocore refuses (checksum mismatch, bad lengths, duplicate
            header); ``error_type`` ``"malformed_event"``.
        ValueError: botocore is not installed (naming the extra; a client refuses a Bedrock
            source without it when it is built, :func:`polythink.auth.check_cloud`).
    """

    __slots__ = ("_buffer", "_left", "_parser_error", "closed", "pending")

    def __init__(self) -> None:
        try:
            from botocore.eventstream import EventStreamBuffer, ParserError
        except ImportError:
            raise InvalidInputError(
                "Bedrock streams are AWS event streams, read with botocore, which is not "
                "installed: pip install 'polythink[bedrock]'"
            ) from None
        self._buffer: Any = EventStreamBuffer()
        self._parser_error: type[Exception] = ParserError
        self._left = 0
        self.closed = False
        self.pending = False
        """Whether bytes of an unfinished frame were left when the body ended."""

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Add ``chunk``; return the messages it completed, in order."""
        self._buffer.add_data(chunk)
        self._left += len(chunk)
        out: list[tuple[str, str]] = []
        try:
            for message in self._buffer:
                self._left -= message.prelude.total_length
                out.append(_pair(message.headers, message.payload))
        except self._parser_error as exc:
            raise MalformedFrame(
                f"a Bedrock stream frame could not be read ({type(exc).__name__})",
                error_type="malformed_event",
            ) from None
        return out

    def close(self) -> list[tuple[str, str]]:
        """End of the body: nothing is pending in this framing (a cut frame is lost)."""
        self.closed = True
        self.pending = self._left > 0
        return []


def _pair(headers: dict[str, Any], payload: bytes) -> tuple[str, str]:
    kind = headers.get(":message-type")
    text = payload.decode("utf-8", "replace")
    if kind == "exception":
        return EXCEPTION + str(headers.get(":exception-type") or "exception"), text
    if kind == "error":
        message = str(headers.get(":error-message") or "")
        return EXCEPTION + str(headers.get(":error-code") or "error"), json.dumps(
            {"message": message}
        )
    return str(headers.get(":event-type") or ""), text
