"""The service-tier layer: resolve the requested tier for this source, resend on "no capacity".

One instance per source, between its budget layer and its reasoning layer (the order is
listed in :mod:`polythink.client`). Before the call it picks the tier (per call > the
source's own > unset), resolves it against the source's provider and model
(:func:`polythink.reasoning.tiers.resolve_tier`, memoised per tier) and hands the transport a
request carrying the :class:`~polythink.types.TierResolution`; the transport merges its body
fragment or headers. A request a budget already moved to flex arrives resolved, and is sent
as it is. After the call it fills ``requested_service_tier``, ``applied_service_tier`` and the
resolution's warnings on the response; the transport has read ``service_tier`` (the tier
that served it) from the answer.

Two answers are handled here, each sending the call once more, straight to the layers
inside (the rate limiter outside counted one call, as for a learned reasoning tier):

- "no capacity at this tier now" (:class:`~polythink.errors.CapacityUnavailableError`:
  OpenAI's 429 ``resource_unavailable``, Groq's 498): sent again at the resolution's
  ``fallback`` (the source's ``capacity_fallback``, ``standard`` by default), with a warning.
  Without a fallback (a budget's move to flex has none: it would cost what the budget could
  not afford), the error goes on to the retry layer, which retries it with backoff; it never
  pauses the source's rate limiter nor counts against its circuit breaker.
- a refusal of the tier for this model, on a provider whose row says it answers so (Azure's
  400 on flex): learned for this endpoint and model in this process
  (:func:`polythink.reasoning.tiers.learn_refusal`), resolved again under the source's
  ``service_tier_fallback`` and sent again (``nearest``/``drop``), or raised as
  :class:`~polythink.errors.ServiceTierUnsupportedError` (``error``).

A call without a tier passes straight through: no resolution, no copy of the request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator
from contextlib import aclosing

from polythink.config import Source
from polythink.errors import (
    CapacityUnavailableError,
    PolythinkError,
    RequestRejectedError,
    ServiceTierUnsupportedError,
)
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.providers import ProviderProfile
from polythink.reasoning.capability import Capability
from polythink.reasoning.tiers import (
    learn_refusal,
    refuses_tier,
    resolve_tier,
    tiers_refused,
    tiers_taken,
)
from polythink.types import Request, Response, ServiceTier, StreamEvent, TierResolution

__all__ = ["ServiceTierMiddleware"]

_MEMO_LIMIT = 64


class ServiceTierMiddleware:
    """Resolve, send and report the service tier of one source's calls.

    Args:
        source: the source (its tier, fallback policy and capacity fallback).
        index: the source's position in the client.
        profile: the source's provider profile (its ``service_tiers`` row).
        capability: the model's capability (its ``service_tiers``), or ``None``.

    Raises:
        ServiceTierUnsupportedError: at construction, when the source's own tier cannot be
            served under ``service_tier_fallback="error"`` (reported when the client is
            built, not on the first call).
    """

    def __init__(
        self,
        source: Source,
        index: int,
        profile: ProviderProfile,
        capability: Capability | None = None,
    ) -> None:
        self.source = source
        self.index = index
        self.profile = profile
        self.capability = capability
        self._memo: dict[tuple[ServiceTier, bool], TierResolution] = {}
        if source.tier is not None:
            try:
                self.resolution(source.tier)
            except ServiceTierUnsupportedError as exc:
                exc.source_index = index
                raise

    def _refused(self) -> frozenset[ServiceTier]:
        return tiers_refused(self.source.endpoint, self.profile.id, self.source.model)

    def tiers(self) -> tuple[ServiceTier, ...]:
        """The tiers on the ordering this source's provider and model take now (what the
        registry knows, less what the provider refused at this endpoint), cheapest first."""
        return tiers_taken(self.profile.service_tiers, self.capability, self._refused())

    def resolution(self, tier: ServiceTier, *, fallback: bool = True) -> TierResolution:
        """The resolution of ``tier`` for this source (memoised); with ``fallback=False``
        one that does not resend on "no capacity" (a budget's move to flex).

        Raises:
            ServiceTierUnsupportedError: the tier cannot be served here under ``error``.
        """
        key = (tier, fallback)
        found = self._memo.get(key)
        if found is None:
            try:
                found = resolve_tier(
                    tier,
                    provider=self.profile,
                    model=self.source.model,
                    capability=self.capability,
                    policy=self.source.service_tier_fallback,
                    fallback=self.source.spare_tier if fallback else None,
                    refused=self._refused(),
                )
            except ServiceTierUnsupportedError as exc:
                exc.source_index = self.index
                raise
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = found
        return found

    def prepare(self, request: Request) -> Request:
        """Return ``request`` with this source's tier resolution attached (unchanged when it
        has one already, or asks for no tier).

        Raises:
            ServiceTierUnsupportedError: the tier cannot be served here under ``error``.
        """
        if request.tier_resolution is not None:
            return request
        tier = request.service_tier or self.source.tier
        if tier is None:
            return request
        return request.with_(tier_resolution=self.resolution(tier))

    def finish(self, response: Response, resolution: TierResolution, notes: list[str]) -> Response:
        """``response`` with the requested and applied tiers and the notes of the
        resolution and of a resend."""
        warnings = [*response.warnings, *resolution.warnings, *notes]
        return response.with_(
            requested_service_tier=resolution.requested,
            applied_service_tier=resolution.applied,
            warnings=warnings,
        )

    def again(self, error: PolythinkError, prepared: Request, notes: list[str]) -> Request | None:
        """The request to send once more after ``error``, noting why in ``notes``; ``None``
        when ``error`` is to be raised as it is.

        Raises:
            ServiceTierUnsupportedError: the provider refused the tier and the source's
                policy is ``error`` (or it takes no tier left).
        """
        sent = prepared.tier_resolution
        if sent is None or sent.applied is None:
            return None
        if isinstance(error, CapacityUnavailableError):
            if error.service_tier is None:
                error.service_tier = sent.applied.value
            if sent.fallback is None:
                return None
            resent = self.resolution(sent.fallback, fallback=False)
            notes.append(
                f"{self.profile.id} had no capacity at service_tier={sent.applied.value!r} "
                f"(HTTP {error.status_code}, not charged): sent the call again at "
                f"{sent.fallback.value!r} (the source's capacity_fallback)"
            )
            return prepared.with_(
                tier_resolution=dataclasses.replace(resent, requested=sent.requested)
            )
        if not refuses_tier(error, self.profile.service_tiers, sent):
            return None
        learn_refusal(self.source.endpoint, self.profile.id, self.source.model, sent.applied)
        self._memo.clear()
        gist = error.message
        try:
            resent = self.resolution(sent.applied)
        except ServiceTierUnsupportedError as exc:
            exc.message = f"{exc.message}; learned from {gist}"
            exc.args = (exc.message,)
            raise exc from error
        notes.append(
            f"{self.profile.id} refused service_tier={sent.applied.value!r} for model "
            f"{self.source.model!r} at this endpoint ({gist}); learned it and sent the call "
            "again" + (f" at {resent.applied.value!r}" if resent.applied is not None else "")
        )
        return prepared.with_(tier_resolution=dataclasses.replace(resent, requested=sent.requested))

    def _untiered(self, request: Request) -> bool:
        """Whether ``request`` asks for no tier (nor does the source): it passes through."""
        return (
            request.tier_resolution is None
            and request.service_tier is None
            and self.source.service_tier is None
        )

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Resolve, call on (once more after "no capacity" or a refused tier), report."""
        if self._untiered(request):
            return await call_next(request)
        prepared = self.prepare(request)
        notes: list[str] = []
        try:
            response = await call_next(prepared)
        except (CapacityUnavailableError, RequestRejectedError) as exc:
            retry = self.again(exc, prepared, notes)
            if retry is None:
                raise
            prepared = retry
            response = await call_next(prepared)
        resolution = prepared.tier_resolution
        return response if resolution is None else self.finish(response, resolution, notes)

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        """Resolve, pass the events through (resending before the first one after "no
        capacity" or a refused tier), report on the ``done`` response."""
        if self._untiered(request):
            return call_next(request)
        return self._stream(request, call_next)

    async def _stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        prepared = self.prepare(request)
        notes: list[str] = []
        events = call_next(prepared)
        try:
            first = await anext(events, None)
        except (CapacityUnavailableError, RequestRejectedError) as exc:
            await events.aclose()
            retry = self.again(exc, prepared, notes)
            if retry is None:
                raise
            prepared = retry
            events = call_next(prepared)
            first = await anext(events, None)
        resolution = prepared.tier_resolution
        async with aclosing(events):
            event = first
            while event is not None:
                if event.type == "done" and event.response is not None and resolution is not None:
                    event = StreamEvent(
                        "done", response=self.finish(event.response, resolution, notes)
                    )
                yield event
                event = await anext(events, None)
