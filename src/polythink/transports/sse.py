"""Server-sent events: an incremental decoder that follows the WHATWG parsing rules.

The rules it applies, from https://html.spec.whatwg.org/multipage/server-sent-events.html
("Interpreting an event stream"): lines end at CRLF, LF or CR; a leading BOM is dropped;
``:`` starts a comment; ``data:`` lines of one event are joined with ``\\n``; a blank line
dispatches the event; an event with an empty data buffer is not dispatched.

End of stream, where polythink departs from the spec on purpose: the spec discards an event
that no blank line ended, but several OpenAI-compatible servers close the connection right
after their last ``data:`` line (with or without its line break), and that event is often
the one carrying the finish reason, the usage or ``[DONE]``. So :meth:`SSEDecoder.close`
dispatches what is pending, and the transport decides: a pending event whose data is
complete JSON (or ``[DONE]``) is delivered; one that does not parse was cut by the close and
is dropped, so the stream is still reported incomplete
(:meth:`polythink.transports.base.HTTPTransport.json_events`).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

__all__ = ["SSEDecoder"]


class SSEDecoder:
    """Incremental server-sent-events decoder following the WHATWG parsing rules.

    Feed raw bytes as they arrive; get ``(event_type, data)`` pairs for each dispatched
    event. Lines end at CRLF, LF or CR (a CR at a chunk's end is held until the next chunk
    shows whether an LF follows). UTF-8 split across chunks is decoded correctly; a leading
    BOM is dropped. Lines starting with ``:`` are comments; ``data:`` lines of one event are
    joined with ``\\n``; ``id`` and ``retry`` only update decoder state; an event whose data
    buffer is empty is not dispatched; the event type defaults to ``message``. At the end of
    the stream, :meth:`close` returns the event still pending (see the module docstring).
    """

    __slots__ = (
        "_buffer",
        "_data",
        "_decoder",
        "_event",
        "_skip_lf",
        "_started",
        "closed",
        "last_event_id",
        "retry",
    )

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._skip_lf = False
        self._started = False
        self.last_event_id = ""
        self.retry: int | None = None
        self.closed = False

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Decode ``chunk`` and return the events it completes (possibly none)."""
        text = self._decoder.decode(chunk)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        buffer = self._buffer + text
        if "\r" in buffer:
            if buffer[-1] == "\r":
                self._skip_lf = True
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        self._buffer = lines.pop()
        if not lines:
            return []
        return self._lines(lines)

    def close(self) -> list[tuple[str, str]]:
        """End the stream: return the event left pending when the connection closed.

        The last line counts even without its line break; the pending data is dispatched
        as if a blank line followed. The caller must treat it as possibly cut short.
        """
        self.closed = True
        tail = self._decoder.decode(b"", final=True)
        lines = [self._buffer + tail] if self._buffer or tail else []
        self._buffer = ""
        return self._lines([*lines, ""])

    def _lines(self, lines: Iterable[str]) -> list[tuple[str, str]]:
        events: list[tuple[str, str]] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append((self._event or "message", "\n".join(data)))
                    data.clear()
                self._event = ""
                continue
            if line[0] == ":":
                continue
            name, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value)
        return events
