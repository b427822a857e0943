"""Helpers over a conversation (a list of messages): JSON-lines files, resuming, compaction.

- :func:`save_conversation` / :func:`load_conversation` / :func:`append_message` keep a
  conversation in a JSON-lines file, one :meth:`Message.to_dict` per line, so an application
  can stop and resume it on another day, or on another provider. Opaque reasoning items
  (Anthropic signatures, OpenAI encrypted reasoning, Gemini thought signatures) are kept
  byte for byte, so they still verify where they were made.
- :func:`resume_interrupted` turns a conversation that ends with an interrupted partial turn
  into one that asks the model to continue.
- :func:`compact` asks the model for a structured summary and returns the conversation that
  starts from it (optionally with the recent turns kept, their reasoning stripped);
  :func:`should_compact` says when the context is close to the model's window;
  :func:`strip_reasoning` leaves every turn's reasoning out (Anthropic's recovery from
  thinking bound to a different conversation).

None of this is on the call path: the client never serialises messages to JSON.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polythink.conversion import coerce_messages
from polythink.errors import InvalidInputError
from polythink.reasoning.capabilities import get_capability
from polythink.types import Effort, Message, Response, Tool
from polythink.wire_json import loads_json

_log = logging.getLogger("polythink.conversation")
_windowless_reported: set[str] = set()
"""Models :func:`should_compact` has already logged as having no known context window."""

if TYPE_CHECKING:
    from polythink.client import Client

__all__ = [
    "COMPACT_MARGIN_TOKENS",
    "COMPACT_PROMPT",
    "COMPACT_SUMMARY_TOKENS",
    "COMPACT_SYSTEM_SUFFIX",
    "CONTINUE_PROMPT",
    "Compaction",
    "EmptySummaryError",
    "append_message",
    "compact",
    "compact_threshold",
    "load_conversation",
    "resume_interrupted",
    "save_conversation",
    "should_compact",
    "strip_reasoning",
]


def _line(message: Message | Mapping[str, Any]) -> str:
    return json.dumps(
        Message.coerce(message).to_dict(),
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )


def save_conversation(
    path: str | os.PathLike[str], messages: Iterable[Message | Mapping[str, Any]]
) -> Path:
    """Write ``messages`` to ``path`` as JSON lines (UTF-8), replacing the file atomically.

    Each line is one :meth:`Message.to_dict`. The file is written next to its destination
    and renamed over it, so a crash never leaves half a conversation. Returns the path.

    Raises:
        ValueError: a message is malformed, or holds a value JSON cannot represent.
        OSError: the file cannot be written.
    """
    target = Path(path)
    lines = [_line(m) for m in messages]
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            for line in lines:
                out.write(line + "\n")
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def append_message(path: str | os.PathLike[str], message: Message | Mapping[str, Any]) -> None:
    """Append one message to a JSON-lines conversation file (created when missing).

    Raises:
        ValueError: the message is malformed.
        OSError: the file cannot be written.
    """
    line = _line(message)
    with open(path, "a", encoding="utf-8", newline="\n") as out:
        out.write(line + "\n")


def load_conversation(path: str | os.PathLike[str]) -> list[Message]:
    """Read a JSON-lines conversation written by :func:`save_conversation`.

    Blank lines are skipped. The messages come back equal to those saved, metadata and
    opaque reasoning items included.

    Raises:
        ValueError: a line is not UTF-8 text, not JSON or not a saved message; the message
            names the file and line number.
        OSError: the file cannot be read.
    """
    messages: list[Message] = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(
                    f"{os.fspath(path)}:{number}: not UTF-8 text ({exc.reason} at byte "
                    f"{exc.start + 1} of the line); a saved conversation is UTF-8 JSON lines"
                ) from None
            if not line.strip():
                continue
            try:
                messages.append(Message.from_dict(loads_json(line)))
            except ValueError as exc:
                raise InvalidInputError(
                    f"{os.fspath(path)}:{number}: not a saved message: {exc}"
                ) from None
    return messages


CONTINUE_PROMPT = "continue"
"""The user turn :func:`resume_interrupted` adds after an interrupted partial turn."""


def resume_interrupted(
    messages: Sequence[Message | Mapping[str, Any]], prompt: str = CONTINUE_PROMPT
) -> list[Message]:
    """Return the conversation to send so the model continues an interrupted answer.

    When the last assistant turn is an interrupted partial (``metadata.interrupted``, as on
    :attr:`~polythink.errors.StreamInterruptedError.partial`'s message), it is kept as text
    only: its reasoning items and tool calls are dropped, because a stream cut mid-way
    leaves unsigned reasoning and incomplete call arguments, which providers reject; the
    instructions sent before it (:attr:`Message.instructions`) stay. A user turn ``prompt``
    follows it. A conversation whose last turn is not interrupted comes back
    unchanged. The original list is not modified.

    Raises:
        ValueError: a message is malformed.
    """
    result = list(coerce_messages(messages)) if messages else []
    if not result:
        return result
    last = result[-1]
    if last.role != "assistant" or last.metadata is None or not last.metadata.interrupted:
        return result
    # The instructions it followed stay where they were: the prefix is unchanged.
    result[-1] = Message(
        role="assistant",
        content=last.text(),
        instructions=last.instructions,
        metadata=last.metadata,
    )
    result.append(Message(role="user", content=prompt))
    return result


# ---------------------------------------------------------------- compaction

COMPACT_PROMPT = """Write a compact summary of our conversation so far, in this format:

## Project context
- [A short description of the project]

## Current goal
- [What we are trying to do]

## Relevant files
- [The important files]

## Decisions and conclusions
- [The key points established]

## Next steps
- [What remains to be done]"""
"""The request :func:`compact` sends: the summary's five sections."""

COMPACT_SYSTEM_SUFFIX = (
    "For this request, call no tool: answer only with the summary that is asked for."
)
"""Appended to the system prompt (as ``system_suffix``) while compacting."""

COMPACT_SUMMARY_TOKENS = 4000
"""Output ceiling for the summary, in tokens."""

COMPACT_MARGIN_TOKENS = 500
"""Safety margin on the context-size estimate, in tokens."""

_SUMMARY_INTRO = "Summary of the conversation so far:\n\n"


class EmptySummaryError(ValueError):
    """The model answered a compaction request with an empty summary.

    Attributes:
        response: the model's answer.
    """

    def __init__(self, message: str, response: Response) -> None:
        super().__init__(message)
        self.response = response


@dataclass(frozen=True, slots=True)
class Compaction:
    """The result of :func:`compact`.

    Attributes:
        messages: the new conversation: the original system messages, one user turn
            carrying the summary, then the ``keep`` most recent turns as they were but for
            their reasoning. Continue it by appending the next user turn's content.
        summary: the summary text (stripped).
        truncated: the summary was cut by the output ceiling (``finish_reason == "length"``)
            and may be incomplete.
        response: the model's answer (usage, model, warnings).
        reasoning_dropped: the indexes, in the original messages, of the assistant turns
            whose reasoning (text, and signed or encrypted items) the new conversation no
            longer carries: the summarised turns', and the kept turns' (stripped: see
            :func:`compact`). Empty when no turn had any.
        kept: how many of the original messages follow the summary (0: simple compaction).
    """

    messages: list[Message]
    summary: str
    truncated: bool
    response: Response
    reasoning_dropped: tuple[int, ...] = ()
    kept: int = 0

    @property
    def note(self) -> str | None:
        """What reasoning the compaction gave up, in words (``None`` when none)."""
        if not self.reasoning_dropped:
            return None
        listed = ", ".join(map(str, self.reasoning_dropped[:8]))
        more = (
            f", ... ({len(self.reasoning_dropped)} in all)"
            if len(self.reasoning_dropped) > 8
            else ""
        )
        return (
            f"compaction gave up the reasoning of assistant turns {listed}{more}: the summary "
            "replaces the earlier turns, and the kept ones go without their thinking, which "
            "was bound to the conversation before it (a model would drop it, or refuse it)"
        )


def _has_reasoning(message: Message) -> bool:
    return message.role == "assistant" and bool(message.reasoning or message.reasoning_items)


def strip_reasoning(
    messages: Sequence[Message | Mapping[str, Any]],
) -> list[Message]:
    """Return the conversation with the reasoning of every assistant turn left out: its
    reasoning text and its provider items (thinking blocks, encrypted reasoning, thought
    signatures); the text and tool calls stay, and each transport rebuilds the turn from
    them.

    Anthropic's documented recovery from a conversation whose thinking no longer matches
    what came before it (400 "bound to a different conversation", CONTINUITY.md §1.4:
    "strip every thinking block from the history once and continue"; removing the one the
    error names is not enough). The reasoning is lost; the conversation continues. A turn
    that was only reasoning keeps an empty text (which the transports leave out, noted).
    ``messages`` is not changed.

    Raises:
        ValueError: a message is malformed.
    """
    return [_stripped(m) for m in coerce_messages(messages)] if messages else []


def _stripped(message: Message) -> Message:
    if not _has_reasoning(message):
        return message
    content = message.content
    if content is None and not (message.tool_calls or message.refusal):
        content = ""
    return dataclasses.replace(
        message, content=content, reasoning=None, reasoning_items=(), reasoning_format=None
    )


def _tail_start(messages: Sequence[Message], keep: int) -> int:
    """The index where the last ``keep`` turns start. A turn starts at a user message or
    at an assistant message (its tool calls' results belong to it), so a cut there never
    falls between a tool call and its result. ``len(messages)`` when ``keep`` is 0; the
    first turn when there are fewer."""
    if keep <= 0:
        return len(messages)
    starts = [i for i, m in enumerate(messages) if m.role in ("user", "assistant")]
    if not starts:
        return len(messages)
    return starts[-keep] if len(starts) >= keep else starts[0]


def _request_messages(messages: Sequence[Message], prompt: str) -> list[Message]:
    """The conversation plus the summary request, merged into a last user turn if any."""
    request = list(messages)
    last = request[-1] if request else None
    if last is not None and last.role == "user":
        parts: list[Any]
        if isinstance(last.content, list):
            parts = [*last.content, {"type": "text", "text": prompt}]
        else:
            parts = [{"type": "text", "text": last.content or ""}, {"type": "text", "text": prompt}]
        request[-1] = dataclasses.replace(last, content=parts)
    else:
        request.append(Message(role="user", content=prompt))
    return request


async def compact(
    client: Client,
    messages: Sequence[Message | Mapping[str, Any]],
    *,
    tools: Sequence[Tool | Mapping[str, Any]] | None = None,
    prompt: str = COMPACT_PROMPT,
    summary_tokens: int = COMPACT_SUMMARY_TOKENS,
    reasoning_effort: Effort | str | bool | None = None,
    stream: bool = False,
    system_suffix: str = COMPACT_SYSTEM_SUFFIX,
    keep: int = 0,
) -> Compaction:
    """Summarise a conversation with the model and return the conversation that starts there.

    The result is append-only from there on, on every wire: its later turns pass
    Anthropic's prefix check (CONTINUITY.md §2.4). By default it is the documented "simple
    compaction": the original system messages and one user turn holding the summary, nothing
    earlier replayed. ``keep=N`` keeps the last ``N`` turns after the summary ("keep-tail":
    a turn is a user message, or an assistant message with the results of its tool calls, so
    a tool call is never cut from its result), with their reasoning stripped
    (:func:`strip_reasoning`): their thinking was bound to the conversation before them,
    which the summary replaces, so a model would drop it or refuse it. The result's
    ``reasoning_dropped`` names every assistant turn whose reasoning was given up, and its
    ``note`` says so in words.

    The request is the conversation itself, with ``prompt`` (by default the five sections
    of :data:`COMPACT_PROMPT`: project context, current goal, relevant files, decisions,
    next steps) added to the last user turn when the conversation ends with one (so roles
    keep alternating), else as a new user turn. ``tools`` stay declared, since the history
    holds calls to them, but ``tool_choice="none"`` forbids calling them, and
    ``system_suffix`` says so to the model; the stable system prompt and tools keep the
    provider's cached prefix. The summary may use at most ``summary_tokens`` output tokens
    (default 4,000). ``stream=True`` streams the request (same result).

    ``messages`` is never modified. The new conversation keeps the original system
    messages and puts the summary in one user turn.

    Raises:
        ValueError: ``client`` is not a :class:`~polythink.Client`, ``prompt`` is not a
            non-empty ``str``, ``messages`` is empty or malformed, or ``summary_tokens`` is
            not a positive int.
        EmptySummaryError: the model's summary is empty (a ``ValueError``).
        PolythinkError: the call failed (the typed error of the last source tried).
    """
    if not callable(getattr(client, "complete", None)):
        raise InvalidInputError(
            "compact's client must be a polythink.Client (started, or used in async with); "
            f"got {type(client).__name__}"
        )
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidInputError(
            f"prompt must be the non-empty instruction to summarise; got {prompt!r}"
        )
    if type(summary_tokens) is not int or summary_tokens <= 0:
        raise InvalidInputError(f"summary_tokens must be a positive int; got {summary_tokens!r}")
    if type(keep) is not int or keep < 0:
        raise InvalidInputError(f"keep must be a number of turns (an int >= 0); got {keep!r}")
    original = coerce_messages(messages)
    request = _request_messages(original, prompt)
    options: dict[str, Any] = {
        "tools": tools,
        "tool_choice": "none" if tools else None,
        "max_tokens": summary_tokens,
        "reasoning_effort": reasoning_effort,
        "system_suffix": system_suffix or None,
    }
    if stream:
        response: Response | None = None
        async for event in client.stream(request, **options):
            if event.type == "done":
                response = event.response
        assert response is not None  # the stream's last event is always "done"
    else:
        response = await client.complete(request, **options)
    summary = response.text.strip()
    if not summary:
        raise EmptySummaryError(
            f"the model ({response.provider} {response.model}) returned an empty summary "
            f"(finish_reason {response.finish_reason!r}); the conversation is unchanged",
            response,
        )
    start = _tail_start(original, keep)
    system = [m for m in original[:start] if m.role in ("system", "developer")]
    tail = [_stripped(m) for m in original[start:]]
    dropped = tuple(i for i, m in enumerate(original) if _has_reasoning(m))
    return Compaction(
        messages=[*system, Message(role="user", content=_SUMMARY_INTRO + summary), *tail],
        summary=summary,
        truncated=response.finish_reason == "length",
        response=response,
        reasoning_dropped=dropped,
        kept=len(tail),
    )


def compact_threshold(
    context_window: int,
    *,
    summary_tokens: int = COMPACT_SUMMARY_TOKENS,
    margin: int = COMPACT_MARGIN_TOKENS,
) -> int:
    """The context size (tokens) above which to compact: window - (summary + margin)."""
    return context_window - (summary_tokens + margin)


def should_compact(
    context: int | Response,
    *,
    model: str | None = None,
    context_window: int | None = None,
    summary_tokens: int = COMPACT_SUMMARY_TOKENS,
    margin: int = COMPACT_MARGIN_TOKENS,
) -> bool:
    """Say whether a conversation is close enough to the model's window to compact it.

    Args:
        context: the context size in tokens, or the last :class:`Response` (its
            ``usage.total_tokens``: the prompt plus the answer that joins the conversation;
            its ``model`` is looked up when ``model`` is not given).
        model: the model whose registry ``context_window`` applies.
        context_window: the window in tokens, instead of the registry's.
        summary_tokens, margin: room kept for the summary and the estimate's error.

    True when the context exceeds :func:`compact_threshold`. False when no window is known,
    and when the threshold makes no sense (a window no larger than ``summary_tokens +
    margin``); also False for a response without usage.

    No known window means an unregistered model, or a registered one whose
    :class:`~polythink.reasoning.Capability` has ``context_window=None``: the registry
    records a window only where a provider document states it (``polythink models --json``
    shows which; ``gpt-5.5``, ``claude-sonnet-4-6`` and ``deepseek-v4-pro`` have none). For
    such a model this function can never say to compact, and context-window failover
    cannot pick a larger model either. Pass ``context_window=`` (tokens) or register the
    model's capability with one. The first such call for each model logs one WARNING on
    the ``polythink.conversation`` logger saying so; later calls for it log nothing.

    Raises:
        ValueError: ``context`` is a negative or non-integer token count.
    """
    if isinstance(context, Response):
        tokens = context.usage.total_tokens if context.usage is not None else None
        model = model or context.model
    else:
        tokens = context
    if tokens is None:
        return False
    if type(tokens) is not int or tokens < 0:
        raise InvalidInputError(f"context must be a token count (an int >= 0); got {tokens!r}")
    window = context_window
    if window is None and model is not None:
        cap = get_capability(model)
        window = cap.context_window if cap is not None else None
        if window is None and model not in _windowless_reported:
            _windowless_reported.add(model)
            what = "is not in the capability registry" if cap is None else "has no context_window"
            _log.warning(
                "should_compact: model %r %s, so it never says to compact this model's "
                "conversations (and context-window failover cannot act on it); pass "
                "context_window= in tokens, or register a Capability with one",
                model,
                what,
            )
    if window is None:
        return False
    threshold = compact_threshold(window, summary_tokens=summary_tokens, margin=margin)
    return threshold > 0 and tokens > threshold
