"""Resolve a requested service tier into the tier a provider and model take, and its wire form.

:func:`resolve_tier` is a pure function, the service-tier twin of
:func:`polythink.reasoning.resolve.resolve`. The order of its phases is the semantics:

1. unset -> send nothing; the applied tier is unset.
2. the provider has no service tiers (its profile has no
   :class:`~polythink.providers.TierWire`) -> ``auto`` and ``standard`` send nothing (that is
   what the provider does anyway); ``flex`` and ``priority`` by policy: ``nearest`` and
   ``drop`` send nothing with a warning, ``error`` raises
   :class:`~polythink.errors.ServiceTierUnsupportedError`.
3. ``auto`` -> the provider's ``auto`` value where it has one, else nothing (its default).
4. a tier the provider and model take -> its value (a tier spelt ``""`` is sent as nothing:
   Vertex AI's standard is the absence of its header).
5. a tier they do not take -> by policy: ``nearest`` (default) the nearest taken tier by
   position on ``flex < standard < priority``, ties to the cheaper side, with a warning;
   ``error`` raises listing the tiers taken; ``drop`` sends nothing, with a warning.

What the provider and model take: the tiers the provider's row spells, narrowed by the
model's ``Capability.service_tiers`` when the registry knows them, and by what the provider
taught by refusing one (:func:`tiers_refused`, learned per endpoint).

The result also carries the tier to resend at once when the provider answers "no capacity"
(the source's ``capacity_fallback``, ``standard`` by default), when that is a different tier
the provider takes.

The "no capacity" answers and the refusals of a tier are recognised here from the provider's
row (:func:`capacity_error`, :func:`refuses_tier`), so the transports and the tier layer hold
no provider facts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Literal

from polythink.errors import (
    CapacityUnavailableError,
    InvalidInputError,
    PolythinkError,
    RequestRejectedError,
    ServiceTierUnsupportedError,
    recast,
)
from polythink.providers import ProviderProfile, TierWire, get_provider
from polythink.reasoning.capability import Capability
from polythink.types import SERVICE_TIER_ORDER, ServiceTier, TierResolution

__all__ = [
    "TIER_POLICIES",
    "TierPolicy",
    "capacity_error",
    "forget_refusals",
    "learn_refusal",
    "refuses_tier",
    "resolve_tier",
    "served_tier",
    "tiers_refused",
    "tiers_taken",
]

TierPolicy = Literal["nearest", "error", "drop"]
TIER_POLICIES: tuple[str, ...] = ("nearest", "error", "drop")


class _Refusals:
    """Tiers a provider refused for a model at an endpoint, learned in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[tuple[str, str, str], frozenset[ServiceTier]] = {}

    def get(self, endpoint: str, provider: str, model: str) -> frozenset[ServiceTier]:
        return self._refused.get((endpoint, provider, model), frozenset())

    def add(self, endpoint: str, provider: str, model: str, tier: ServiceTier) -> None:
        key = (endpoint, provider, model)
        with self._lock:
            self._refused[key] = self._refused.get(key, frozenset()) | {tier}

    def clear(self) -> None:
        with self._lock:
            self._refused.clear()


_refusals = _Refusals()


def tiers_refused(endpoint: str, provider: str, model: str) -> frozenset[ServiceTier]:
    """The tiers ``provider`` refused for ``model`` at ``endpoint`` (its base URL) in this
    process (see :func:`learn_refusal`)."""
    return _refusals.get(endpoint, provider, model)


def learn_refusal(endpoint: str, provider: str, model: str, tier: ServiceTier) -> None:
    """Record that ``provider`` refused ``tier`` for ``model`` at ``endpoint``: later
    resolutions for that endpoint and model map it as a tier the model does not take."""
    _refusals.add(endpoint, provider, model, tier)


def forget_refusals() -> None:
    """Forget every refusal learned in this process (for tests and long-lived workers)."""
    _refusals.clear()


def tiers_taken(
    wire: TierWire | None,
    capability: Capability | None = None,
    refused: Iterable[ServiceTier] = (),
) -> tuple[ServiceTier, ...]:
    """The tiers on the ordering (``flex``, ``standard``, ``priority``) the provider spells,
    narrowed by the model's known ``service_tiers`` and by ``refused``; cheapest first."""
    if wire is None:
        return ()
    known = capability.service_tiers if capability is not None else ()
    out = set(refused)
    return tuple(
        tier
        for tier in SERVICE_TIER_ORDER
        if tier.value in wire.values and (not known or tier.value in known) and tier not in out
    )


def _nearest(tier: ServiceTier, taken: tuple[ServiceTier, ...]) -> ServiceTier:
    rank = tier.rank or 0
    return min(taken, key=lambda t: (abs((t.rank or 0) - rank), t.rank or 0))


def _fragment(wire: TierWire, tier: ServiceTier) -> tuple[dict[str, str], dict[str, str]]:
    value = wire.values.get(tier.value, "")
    if not value:
        return {}, {}
    if wire.body_field is not None:
        return {wire.body_field: value}, {}
    if wire.header is not None:
        return {}, {wire.header: value}
    return {}, {}


def resolve_tier(
    requested: ServiceTier | str | None,
    *,
    provider: str | ProviderProfile,
    model: str,
    capability: Capability | None = None,
    policy: str = "nearest",
    fallback: ServiceTier | str | None = ServiceTier.STANDARD,
    refused: Iterable[ServiceTier] = (),
) -> TierResolution:
    """Resolve ``requested`` for ``model`` on ``provider``'s wire (see the module docstring).

    Args:
        requested: the tier asked (a :class:`~polythink.types.ServiceTier`, its string, or
            ``None`` = unset).
        provider: provider id or profile; its ``service_tiers`` row spells the tiers.
        model: the model id (named in warnings and errors).
        capability: the model's capability (its ``service_tiers`` narrow the provider's).
        policy: ``nearest`` | ``error`` | ``drop`` for a tier not taken.
        fallback: the tier to resend at once on "no capacity" (``None``: none).
        refused: tiers the provider refused for this model at this endpoint.

    Returns:
        a :class:`~polythink.types.TierResolution`: the applied tier, the body fragment or
        headers, the capacity fallback and warnings.

    Raises:
        ValueError: an unknown tier string or policy.
        ServiceTierUnsupportedError: phases 2 and 5 under ``error``.
    """
    tier = ServiceTier.parse(requested)
    spare = ServiceTier.parse(fallback)
    if policy not in TIER_POLICIES:
        raise InvalidInputError(
            f"unknown service_tier_fallback {policy!r}; accepted: {', '.join(TIER_POLICIES)}"
        )
    if tier is None:
        return TierResolution(None, None)
    profile = get_provider(provider)
    wire = profile.service_tiers
    if wire is None:
        if tier in (ServiceTier.AUTO, ServiceTier.STANDARD):
            return TierResolution(tier, None)
        if policy == "error":
            raise ServiceTierUnsupportedError(
                f"provider {profile.id!r} has no service tiers, so service_tier="
                f"{tier.value!r} for model {model!r} cannot be sent (service_tier_fallback="
                "'error'); leave it unset, or use a provider with tiers (openai, "
                "openai-responses, gemini, groq)",
                provider=profile.id,
                error_type="service_tier_unsupported",
            )
        return TierResolution(
            tier,
            None,
            warnings=(
                f"provider {profile.id!r} has no service tiers: service_tier={tier.value!r} "
                "was not sent (the provider serves the call at its only tier)",
            ),
        )
    taken = tiers_taken(wire, capability, refused)
    if tier is ServiceTier.AUTO:
        body, headers = _fragment(wire, tier)
        return TierResolution(tier, tier, body, headers, None)
    warnings: tuple[str, ...] = ()
    applied: ServiceTier = tier
    if tier not in taken:
        listing = ", ".join(t.value for t in taken) or "none"
        if policy == "error" or (policy == "nearest" and not taken):
            raise ServiceTierUnsupportedError(
                f"{profile.id} model {model!r} does not take service_tier={tier.value!r} "
                f"(it takes: {listing}); service_tier_fallback={policy!r}",
                provider=profile.id,
                error_type="service_tier_unsupported",
            )
        if policy == "drop":
            return TierResolution(
                tier,
                None,
                warnings=(
                    f"{profile.id} model {model!r} does not take service_tier={tier.value!r} "
                    f"(it takes: {listing}); sent without one by service_tier_fallback='drop'",
                ),
            )
        applied = _nearest(tier, taken)
        warnings = (
            f"{profile.id} model {model!r} does not take service_tier={tier.value!r} (it "
            f"takes: {listing}); applied {applied.value!r} by service_tier_fallback='nearest'",
        )
    body, headers = _fragment(wire, applied)
    spare_tier = spare if spare is not None and spare in taken and spare is not applied else None
    return TierResolution(tier, applied, body, headers, spare_tier, warnings)


def served_tier(wire: TierWire | None, raw: object) -> str | None:
    """The tier an answer reported (``raw``, as the provider spelt it) in polythink's
    vocabulary where the provider's row maps it, else as sent; ``None`` for no value."""
    if not isinstance(raw, str) or not raw:
        return None
    if wire is None:
        return raw
    return wire.served_values.get(raw, raw)


def capacity_error(error: PolythinkError, wire: TierWire | None) -> PolythinkError:
    """``error`` as a :class:`~polythink.errors.CapacityUnavailableError` when the provider's
    row says its status and code mean "no capacity at this tier" (OpenAI's 429
    ``resource_unavailable``, Groq's 498), else ``error`` itself."""
    if wire is None or not wire.no_capacity or error.status_code is None:
        return error
    code = (error.error_type or "").lower()
    for status, wanted in wire.no_capacity:
        if error.status_code == status and (not wanted or code == wanted):
            return recast(
                error,
                CapacityUnavailableError,
                f"{error.message} (no capacity at this service tier now; not charged)",
            )
    return error


def refuses_tier(error: PolythinkError, wire: TierWire | None, sent: TierResolution | None) -> bool:
    """Whether ``error`` is the provider refusing the tier ``sent`` carried for this model
    (a 400 naming the tier's field, on a provider whose row says it answers so: Azure's flex
    on a model without it); the tier layer then learns it for the endpoint."""
    if (
        wire is None
        or not wire.refuses_unsupported
        or sent is None
        or sent.applied is None
        or not (sent.body or sent.headers)
        or not isinstance(error, RequestRejectedError)
        or error.status_code != 400
    ):
        return False
    named = wire.body_field or wire.header or "service_tier"
    text = f"{error.message} {error.body or ''}".lower()
    return named.lower() in text or "service_tier" in text
