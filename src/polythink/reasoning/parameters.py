"""Parameter rules: what a model fixes or refuses besides its reasoning tiers, known before sending.

Beyond reasoning tiers, endpoints pin or refuse other request parameters per model, and a caller
otherwise learns it from a 400: Kimi K2.5/K2.6 take one temperature while thinking and another
without; xAI's reasoning models refuse ``stop`` and the penalties; DashScope refuses JSON mode
while an open-weight Qwen3 model thinks, and answers its thinking calls only when streamed.
``parameters.toml`` next to this module holds one ``[[rule]]`` per documented constraint, with
its source and date (the file's header lists the fields). The transports apply them to the body
they built (:meth:`polythink.transports.base.HTTPTransport.refuse_or_drop`): refused before
any HTTP request, or dropped with a warning under ``drop_params``; the reasoning layer streams
a stream-only call under ``complete()``.

Pure: no I/O beyond reading the packaged rules once; lookups are memoised.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from polythink.errors import InvalidInputError
from polythink.reasoning.ids import lookup_keys

__all__ = ["ParameterRule", "parameter_conflicts", "parameter_rules", "stream_only_rule"]

When = Literal["always", "thinking", "not_thinking"]
_WHEN: tuple[When, ...] = ("always", "thinking", "not_thinking")


@dataclass(frozen=True, slots=True)
class ParameterRule:
    """One documented constraint of an endpoint on a model's request parameters.

    Attributes:
        name: how errors and warnings name the rule.
        providers: the provider ids whose endpoint enforces it.
        pattern: compiled from ``match``; searched in the model's lookup forms.
        when: ``always``, ``thinking`` (while the call reasons) or ``not_thinking``.
        fixed: parameter -> the only value the endpoint accepts.
        refused: parameters the endpoint refuses whatever their value.
        stream_only: the endpoint answers the model's reasoning calls only when streamed.
        default_thinking: whether the model reasons when no reasoning field is sent (``None``:
            the rule does not say; the registry entry does).
        source: where the rule comes from, and when it was read.
    """

    name: str
    providers: frozenset[str]
    pattern: re.Pattern[str]
    when: When = "always"
    fixed: Mapping[str, float] = field(default_factory=dict)
    refused: tuple[str, ...] = ()
    stream_only: bool = False
    default_thinking: bool | None = None
    source: str = ""

    def applies(self, thinking: bool) -> bool:
        """Whether the rule holds for a call that reasons (``thinking``) or not."""
        return self.when == "always" or (self.when == "thinking") is thinking


def _rule(row: Mapping[str, Any]) -> ParameterRule:
    when = row.get("when", "always")
    if when not in _WHEN:
        raise InvalidInputError(
            f"parameters.toml: rule {row.get('name')!r}: unknown when {when!r}; "
            f"accepted: {', '.join(_WHEN)}"
        )
    return ParameterRule(
        name=row["name"],
        providers=frozenset(row["providers"]),
        pattern=re.compile(row["match"]),
        when=when,
        fixed={str(k): float(v) for k, v in row.get("fixed", {}).items()},
        refused=tuple(row.get("refused", ())),
        stream_only=bool(row.get("stream_only", False)),
        default_thinking=row.get("default_thinking"),
        source=row["source"],
    )


@functools.cache
def _rules() -> tuple[ParameterRule, ...]:
    import tomllib  # with the rules, not with import polythink
    from importlib import resources

    text = resources.files("polythink.reasoning").joinpath("parameters.toml").read_text("utf-8")
    return tuple(_rule(row) for row in tomllib.loads(text).get("rule", []))


@functools.lru_cache(maxsize=1024)
def parameter_rules(provider: str, model: str) -> tuple[ParameterRule, ...]:
    """The rules that hold for ``model`` at ``provider``'s endpoint (every rule whose
    providers list ``provider`` and whose pattern matches one of the model's lookup forms,
    :func:`polythink.reasoning.ids.lookup_keys`), in file order."""
    keys = lookup_keys(provider, model)
    return tuple(
        rule
        for rule in _rules()
        if provider in rule.providers and any(rule.pattern.search(key) for key in keys)
    )


def stream_only_rule(provider: str, model: str) -> ParameterRule | None:
    """The rule that makes ``model``'s reasoning calls stream-only at ``provider``, if any."""
    return next((r for r in parameter_rules(provider, model) if r.stream_only), None)


def _differs(value: Any, fixed: float) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    return not math.isclose(float(value), fixed, rel_tol=0, abs_tol=1e-9)


def parameter_conflicts(
    rules: tuple[ParameterRule, ...], body: Mapping[str, Any], thinking: bool
) -> list[tuple[str, str]]:
    """``(parameter, reason)`` for each parameter of ``body`` a rule forbids on this call.

    Args:
        rules: the model's rules at its endpoint (:func:`parameter_rules`).
        body: the request body as built.
        thinking: whether the call reasons (the rules with ``when`` decide by it).

    Returns:
        One pair per offending parameter (the first rule that forbids it names it), in rule
        order; empty when the body keeps every rule.
    """
    found: dict[str, str] = {}
    state = "while thinking" if thinking else "without thinking"
    for rule in rules:
        if not rule.applies(thinking):
            continue
        context = "" if rule.when == "always" else f" {state}"
        for name, fixed in rule.fixed.items():
            value = body.get(name)
            if value is not None and name not in found and _differs(value, fixed):
                found[name] = f"{name}={value!r} (only {fixed:g} is accepted{context}: {rule.name})"
        for name in rule.refused:
            if body.get(name) is not None and name not in found:
                found[name] = f"{name} (refused{context}: {rule.name})"
    return list(found.items())
