"""Which model reads the reasoning another model made: continuity across model switches.

Providers bind reasoning to the model that made it. Anthropic checks every replayed thinking
block against the model it is sent to and drops, without an error, the blocks that model
cannot read (the "model check"; the history is never edited, so the blocks become readable
again when the conversation returns to a model that can read them); Gemini validates a thought
signature only on the model that made it. Which pairs read each other is data, with its
sources, in ``continuity.toml`` next to this module (``../shared/wire/CONTINUITY.md`` §1.7,
§3.2, read 2026-12-04): one rule per fact, the first that matches wins, a model always reads
its own reasoning.

The transports ask :func:`thinking_reading` before sending a conversation whose reasoning
another model made, and say on the response (and once in the log) when it will be lost.
Pure: no I/O beyond reading the packaged data once.
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass

from polythink.errors import InvalidInputError
from polythink.reasoning.capabilities import normalise_model_name

__all__ = ["Reading", "all_rules", "same_model", "thinking_reading"]


@dataclass(frozen=True, slots=True)
class Reading:
    """What a model does with reasoning another model made.

    Attributes:
        reads: ``True`` (it reads it), ``False`` (the provider drops it before the model reads
            it, or refuses it: the reasoning is lost for that call), ``None`` (not documented).
        source: where the fact comes from (``"PT-SEP: ..."``), or why it holds.
    """

    reads: bool | None
    source: str


@dataclass(frozen=True, slots=True)
class _Rule:
    producer: re.Pattern[str]
    reader: re.Pattern[str]
    reading: Reading
    providers: frozenset[str] | None


_lock = threading.Lock()
_rules: tuple[_Rule, ...] | None = None
_SAME = Reading(True, "a model reads its own reasoning")


def _load() -> tuple[_Rule, ...]:
    global _rules
    if _rules is not None:
        return _rules
    with _lock:
        if _rules is None:
            import tomllib  # with the rules, not with import polythink
            from importlib import resources

            data = resources.files("polythink.reasoning").joinpath("continuity.toml")
            parsed = tomllib.loads(data.read_text(encoding="utf-8"))
            loaded = []
            for row in parsed.get("rule", []):
                reads = row["reads"]
                if reads not in (True, False, "unknown"):
                    raise InvalidInputError(
                        f"continuity.toml: reads must be true, false or 'unknown'; got {reads!r}"
                    )
                providers = row.get("providers")
                loaded.append(
                    _Rule(
                        producer=re.compile(row["producer"]),
                        reader=re.compile(row["reader"]),
                        reading=Reading(None if reads == "unknown" else reads, row["source"]),
                        providers=frozenset(providers) if providers is not None else None,
                    )
                )
            _rules = tuple(loaded)
    return _rules


def all_rules() -> tuple[tuple[str, str, bool | None, str], ...]:
    """Every rule as ``(producer pattern, reader pattern, reads, source)``, in order."""
    return tuple(
        (r.producer.pattern, r.reader.pattern, r.reading.reads, r.reading.source) for r in _load()
    )


def same_model(a: str, b: str) -> bool:
    """Whether two model names name one model (equal once normalised: provider prefix and
    date suffix removed, lower case, ``.`` read as ``-``)."""
    return a == b or normalise_model_name(a) == normalise_model_name(b)


@functools.lru_cache(maxsize=1024)
def thinking_reading(producer: str, reader: str, *, provider: str | None = None) -> Reading | None:
    """What ``reader`` does with reasoning ``producer`` made, on ``provider``'s API.

    The same model (:func:`same_model`) always reads its own. Otherwise the first rule of
    ``continuity.toml`` whose patterns match both normalised names (and whose ``providers``
    hold ``provider``, when the rule names some) decides; ``None`` when no rule matches (the
    provider documents no binding between models, as OpenAI does not for encrypted
    reasoning, CONTINUITY.md §3.1).
    """
    if same_model(producer, reader):
        return _SAME
    made, read = normalise_model_name(producer), normalise_model_name(reader)
    for rule in _load():
        if rule.providers is not None and provider not in rule.providers:
            continue
        if rule.producer.search(made) and rule.reader.search(read):
            return rule.reading
    return None
