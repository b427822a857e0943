"""Model lifecycle: whether a model is current, deprecated or retired on a given day.

Providers retire models on published dates (``Capability.deprecated``, ``Capability.shutdown``,
``Capability.replacement`` in the registry, with their sources). A retired model is not always
refused: Gemini re-routes a shut-down model to its replacement and bills the replacement's
price (CURRENT.md §3.2: the response's ``modelVersion`` is the only tell), so polythink says
so before the call rather than waiting for a "model not found". Pure functions: the caller
passes the date.
"""

from __future__ import annotations

import datetime
from typing import Literal

from polythink.reasoning.capability import Capability

__all__ = ["Status", "lifecycle_note", "served_lifecycle_note", "status"]

Status = Literal["current", "deprecated", "retired"]


def _day(value: datetime.date | str) -> datetime.date:
    return value if isinstance(value, datetime.date) else datetime.date.fromisoformat(value)


def status(capability: Capability | None, today: datetime.date | str) -> Status:
    """``retired`` from the ``shutdown`` date on, ``deprecated`` from the ``deprecated`` date
    (or once a shutdown date is announced) until then, else ``current`` (also for ``None``).

    Raises:
        ValueError: ``today`` is a string that is not ``YYYY-MM-DD``.
    """
    if capability is None:
        return "current"
    day = _day(today)
    if capability.shutdown is not None:
        return "retired" if _day(capability.shutdown) <= day else "deprecated"
    if capability.deprecated is not None and _day(capability.deprecated) <= day:
        return "deprecated"
    return "current"


def lifecycle_note(
    model: str, capability: Capability | None, today: datetime.date | str
) -> str | None:
    """The warning for a call to ``model`` on ``today``: ``None`` unless it is retired.

    It names the shutdown date and the replacement when the registry knows one, and says
    that the provider may still answer through an alias or a re-route.
    """
    if capability is None or status(capability, today) != "retired":
        return None
    instead = (
        f"; use {capability.replacement!r} instead"
        if capability.replacement
        else "; the provider names no replacement in polythink's registry"
    )
    return (
        f"model {model!r} was shut down by its provider on {capability.shutdown}{instead} (a "
        "call may still be answered through an alias or a re-route to another model, or "
        "refused as model not found)"
    )


def served_lifecycle_note(
    model: str, capability: Capability | None, today: datetime.date | str, serves: str
) -> str | None:
    """The retirement warning for a call to ``model`` at a provider whose models are those of
    ``serves`` (:attr:`polythink.providers.ProviderProfile.serves`): :func:`lifecycle_note`
    when the registry entry is that provider's own (or names none), else ``None`` — a model
    its maker retired may still be served elsewhere (a vLLM server, a gateway, a cloud with
    its own schedule). The client's warning and ``polythink resolve`` both come from here.
    """
    if capability is None or capability.provider not in (None, serves):
        return None
    return lifecycle_note(model, capability, today)
