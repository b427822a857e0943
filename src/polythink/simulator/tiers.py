"""Service tiers as the simulated providers play them, from each provider's own row.

A request's tier is read where the provider's :class:`~polythink.providers.TierWire` says it
is sent (a body field, or a header) and mapped back to polythink's vocabulary. The answer
reports the tier that served it the provider's way (the body's ``service_tier``, Anthropic's
``usage.service_tier``, Gemini's ``x-gemini-service-tier`` header) when the request asked for
one: the tier asked, or ``standard`` for ``auto`` and for a tier the model is not served at.

Two answers are played on purpose:

- "no capacity" for the tiers in ``Settings.no_capacity`` (header ``x-sim-no-capacity``,
  comma-separated, overrides it), in the provider's shape: OpenAI's 429 ``resource_unavailable``
  (not a rate limit: no ``retry-after``), Groq's 498 ``capacity_exceeded``; a provider whose row
  lists no such answer serves the call at ``standard``, as Gemini does for priority over
  capacity;
- a refusal of a tier the model is not served at (``Settings.service_tiers``: model -> the tiers
  it takes), where the provider's row says it refuses one (Azure's 400 on flex); elsewhere the
  call is served at ``standard``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from polythink.providers import PROVIDERS, TierWire
from polythink.simulator.server import Settings, SimRequest

__all__ = ["Played", "play"]

_NO_CAPACITY_BODIES: dict[int, tuple[str, str]] = {
    429: (
        "resource_unavailable",
        "Resource Unavailable: there is no capacity for flex processing right now. Retry "
        "later, or send the request with service_tier 'auto'.",
    ),
    498: (
        "capacity_exceeded",
        "Flex tier capacity exceeded. This is a temporary condition; retry with backoff.",
    ),
}


class Played:
    """What a request's tier comes to: an error answer, or the tier that serves it and the
    value its answer reports (``None``: the answer reports none), and where: a header's name
    (``header``) or a ``usageMetadata`` key (``usage_key``)."""

    __slots__ = ("error", "header", "reported", "served", "usage_key")

    def __init__(
        self,
        served: str | None,
        reported: str | None,
        error: tuple[int, dict[str, Any]] | None = None,
        where: tuple[str, str] | None = None,
    ) -> None:
        self.served = served
        self.reported = reported
        self.error = error
        place = where if reported is not None else None
        self.header = place[1] if place is not None and place[0] == "header" else None
        self.usage_key = place[1] if place is not None and place[0] == "usage" else None


def _wire(provider: str) -> TierWire | None:
    profile = PROVIDERS.get(provider)
    return profile.service_tiers if profile is not None else None


def _asked(wire: TierWire, body: Any, headers: Mapping[str, str]) -> str | None:
    """polythink's tier as the request spelt it (``None``: none sent)."""
    if wire.body_field is not None:
        raw = body.get(wire.body_field) if isinstance(body, Mapping) else None
    elif wire.header is not None:
        raw = headers.get(wire.header.lower())
    else:
        raw = None
    if not isinstance(raw, str) or not raw:
        return None
    for tier, value in wire.values.items():
        if value == raw:
            return tier
    return raw


def _spelt(wire: TierWire, tier: str) -> str:
    """How the provider reports ``tier`` (the first of its reported values that maps to it)."""
    for raw, mapped in wire.served_values.items():
        if mapped == tier:
            return raw
    return tier


def play(provider: str, model: str, body: Any, request: SimRequest, settings: Settings) -> Played:
    """How ``provider`` serves the tier ``body``/``request`` asks for ``model``."""
    wire = _wire(provider)
    if wire is None:
        return Played(None, None)
    asked = _asked(wire, body, request.headers)
    tier = asked if asked not in (None, "auto") else "standard"
    header = request.headers.get("x-sim-no-capacity")
    short = (
        {t.strip() for t in header.split(",") if t.strip()}
        if header is not None
        else set(settings.no_capacity)
    )
    taken = settings.service_tiers.get(model)
    if taken is not None and tier not in taken:
        if wire.refuses_unsupported and asked is not None:
            message = (
                f"The service_tier '{asked}' is not supported for the model '{model}'. "
                "Remove service_tier or use a supported value."
            )
            error = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": wire.body_field or wire.header,
                    "code": "invalid_value",
                }
            }
            return Played(None, None, (400, error))
        tier = "standard"
    if tier in short:
        for status, code in wire.no_capacity:
            kind, message = _NO_CAPACITY_BODIES.get(status, (code, "No capacity."))
            error = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
            return Played(None, None, (status, error))
        tier = "standard"
    if wire.served is None or asked is None:
        return Played(tier, None)
    return Played(tier, _spelt(wire, tier), where=wire.served)
