"""Check what a model really did against the reasoning tier that was sent.

:func:`observe` reads a response's reasoning signals; :func:`reconcile` compares them with
the applied tier and returns a warning, or ``None``; :func:`bounded_usage` holds a reported
usage to what the call could have used. All three are pure. :class:`WarningThrottle`
is the small piece of state that keeps log lines to one per (model, tier, kind); the
warning itself is always returned, so it reaches the response and telemetry every time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from polythink.types import Effort, ThinkingObservation, Usage

__all__ = ["WarningThrottle", "bounded_usage", "observe", "reconcile"]

logger = logging.getLogger("polythink.reasoning")


def observe(reasoning_text: str | None, reasoning_tokens: int | None) -> ThinkingObservation:
    """Decide whether reasoning happened from the response's own signals.

    ``observed`` when the reasoning text is non-blank or ``reasoning_tokens > 0``;
    ``absent`` only when the provider explicitly reported 0 reasoning tokens (and no text);
    ``unknown`` otherwise, including negative or missing counts: not seeing reasoning is not
    evidence that it did not happen.
    """
    if reasoning_text and not reasoning_text.isspace():
        return ThinkingObservation.OBSERVED
    if reasoning_tokens is None or reasoning_tokens < 0:
        return ThinkingObservation.UNKNOWN
    return ThinkingObservation.OBSERVED if reasoning_tokens > 0 else ThinkingObservation.ABSENT


def bounded_usage(
    usage: Usage, *, output: int | None, output_why: str, window: int | None
) -> tuple[Usage, list[str]]:
    """Hold a reported ``usage`` to what the call could have used; say what was changed.

    ``output`` is the most output tokens the call allowed (``output_why`` says where that
    figure comes from, for the note), ``window`` the model's context window (the most prompt
    tokens it reads); ``None`` leaves that side as reported. A count above its bound, which
    no model could have produced for this call (a server's bug or a hostile one:
    ``completion_tokens: 10**15`` for ``max_tokens=100``), is counted as the bound, and its
    parts (reasoning, cache reads and writes) as at most the new whole, so cost, budgets
    and rate limits never take an impossible figure.

    Returns the usage (the same object when nothing was over) and one note per change.
    """
    changes: dict[str, int] = {}
    notes: list[str] = []
    if output is not None and usage.output_tokens is not None and usage.output_tokens > output:
        notes.append(
            f"the provider reported {usage.output_tokens} output tokens, more than this call "
            f"allowed ({output}: {output_why}); counted as {output}"
        )
        changes["output_tokens"] = output
        if usage.reasoning_tokens is not None and usage.reasoning_tokens > output:
            changes["reasoning_tokens"] = output
    if window is not None and usage.input_tokens is not None and usage.input_tokens > window:
        notes.append(
            f"the provider reported {usage.input_tokens} input tokens, more than the model's "
            f"context window ({window}); counted as {window}"
        )
        changes["input_tokens"] = window
        for part in ("cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens"):
            value = getattr(usage, part)
            if value is not None and value > window:
                changes[part] = window
    if not changes:
        return usage, notes
    return dataclasses.replace(usage, **changes), notes


def reconcile(
    applied: Effort | None,
    observation: ThinkingObservation,
    *,
    model: str,
) -> str | None:
    """Compare the applied tier with the observation; return a warning or ``None``.

    - unset (``applied is None``): nothing was asked, nothing to contradict.
    - ``none`` applied but reasoning observed: warning (the switch-off did not hold).
    - a tier that reasons applied but reasoning explicitly absent: warning.
    - a tier that reasons applied and nothing visible: a softer warning (unknown).

    ``applied`` is the tier actually sent (after nearest-mapping), so the text names a tier
    that went on the wire.
    """
    if applied is None:
        return None
    if applied is Effort.NONE:
        if observation is ThinkingObservation.OBSERVED:
            return (
                f"model {model!r} reasoned although reasoning_effort='none' was sent; the "
                "capability registry may be out of date for this model"
            )
        return None
    if observation is ThinkingObservation.ABSENT:
        return (
            f"model {model!r} reported 0 reasoning tokens although reasoning_effort="
            f"{applied.value!r} was sent"
        )
    if observation is ThinkingObservation.UNKNOWN:
        return (
            f"could not confirm that model {model!r} reasoned at reasoning_effort="
            f"{applied.value!r}: the response carried no reasoning text and no reasoning "
            "token count"
        )
    return None


class WarningThrottle:
    """Log each distinct (model, tier, kind) warning once per process.

    Thread-safe. ``seen`` is bounded (oldest keys are forgotten beyond ``limit``) so a
    stream of distinct model names cannot grow it without end.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._seen: dict[tuple[str, str, str], None] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def should_log(self, model: str, tier: str, kind: str) -> bool:
        """Return ``True`` the first time a key is seen, ``False`` afterwards."""
        key = (model, tier, kind)
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self._limit:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = None
            return True

    def warn(self, message: str, *, model: str, tier: str, kind: str) -> None:
        """Log ``message`` at INFO level unless this key was logged before.

        INFO, not WARNING: every such note is also in ``Response.warnings`` and telemetry,
        where the caller reads it; a library does not print on its own.
        """
        if self.should_log(model, tier, kind):
            logger.info(message)
