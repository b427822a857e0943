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

__all__ = ["SSEDecoder", "SSELimitError"]


class SSELimitError(ValueError):
    """A line or an event of the stream is longer than the decoder's limit.

    Attributes:
        limit: ``"max_line"`` or ``"max_event"`` (the names of
            :class:`~polythink.config.ReadLimits`).
        limit_value: the limit, in characters.
        size: the characters the line or event had reached when it was refused.
    """

    def __init__(self, limit: str, limit_value: int, size: int) -> None:
        what = "a line" if limit == "max_line" else "an event's data"
        super().__init__(f"{what} of the event stream is over {limit_value:,} characters")
        self.limit = limit
        self.limit_value = limit_value
        self.size = size


class SSEDecoder:
    """Incremental server-sent-events decoder following the WHATWG parsing rules.

    Feed raw bytes as they arrive; get ``(event_type, data)`` pairs for each dispatched
    event. Lines end at CRLF, LF or CR (a CR at a chunk's end is held until the next chunk
    shows whether an LF follows). UTF-8 split across chunks is decoded correctly; a leading
    BOM is dropped. Lines starting with ``:`` are comments; ``data:`` lines of one event are
    joined with ``\\n``; ``id`` and ``retry`` only update decoder state; an event whose data
    buffer is empty is not dispatched; the event type defaults to ``message``. At the end of
    the stream, :meth:`close` returns the event still pending (see the module docstring).

    Time is linear in what is fed: a line that spans many chunks is kept as its pieces and
    joined once, when its end arrives, so no chunk re-reads what came before it.

    Args:
        max_line: the most characters one line may have (its line break not counted).
        max_event: the most characters one event's data may have, its lines joined.

    Raises (from :meth:`feed` and :meth:`close`):
        SSELimitError: a line or an event's data over its limit; the decoder holds no more
            of it than the limit and is not to be fed again.
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_decoder",
        "_event",
        "_max_event",
        "_max_line",
        "_pending",
        "_pending_size",
        "_skip_lf",
        "_started",
        "closed",
        "last_event_id",
        "retry",
    )

    def __init__(self, max_line: int | None = None, max_event: int | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        self._pending_size = 0
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._max_line = max_line
        self._max_event = max_event
        self._skip_lf = False
        self._started = False
        self.last_event_id = ""
        self.retry: int | None = None
        self.closed = False

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Decode ``chunk`` and return the events it completes (possibly none).

        Raises:
            SSELimitError: see the class docstring.
        """
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
        if "\r" in text:
            if text[-1] == "\r":
                self._skip_lf = True
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._hold(text)
            return []
        lines = text.split("\n")
        tail = lines.pop()
        limit = self._max_line
        if limit is not None and len(text) > limit:
            longest = max(lines, key=len)
            if len(longest) > limit:
                raise SSELimitError("max_line", limit, len(longest))
        if self._pending:
            self._hold(lines[0])
            lines[0] = "".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
        if tail:
            self._hold(tail)
        return self._lines(lines)

    def _hold(self, piece: str) -> None:
        """Keep ``piece`` as part of the line not yet ended, within ``max_line``."""
        size = self._pending_size + len(piece)
        if self._max_line is not None and size > self._max_line:
            self._pending.clear()
            self._pending_size = 0
            raise SSELimitError("max_line", self._max_line, size)
        self._pending.append(piece)
        self._pending_size = size

    def close(self) -> list[tuple[str, str]]:
        """End the stream: return the event left pending when the connection closed.

        The last line counts even without its line break; the pending data is dispatched
        as if a blank line followed. The caller must treat it as possibly cut short.

        Raises:
            SSELimitError: see the class docstring.
        """
        self.closed = True
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self._hold(tail)
        lines = ["".join(self._pending)] if self._pending else []
        self._pending.clear()
        self._pending_size = 0
        return self._lines([*lines, ""])

    def _lines(self, lines: Iterable[str]) -> list[tuple[str, str]]:
        events: list[tuple[str, str]] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append((self._event or "message", "\n".join(data)))
                    data.clear()
                    self._data_size = 0
                self._event = ""
                continue
            if line[0] == ":":
                continue
            name, sep, value = line.partition(":")
            if sep and value[:1] == " ":
                value = value[1:]
            if name == "data":
                if self._max_event is not None:
                    size = self._data_size + len(value) + (1 if data else 0)
                    if size > self._max_event:
                        data.clear()
                        self._data_size = 0
                        raise SSELimitError("max_event", self._max_event, size)
                    self._data_size = size
                data.append(value)
            elif name == "event":
                self._event = value
            elif name == "id":
                if "\0" not in value:
                    self.last_event_id = value
            elif name == "retry" and value.isascii() and value.isdigit():
                self.retry = int(value)
        return events
