"""The cost layer: put the price of each call on its response (:attr:`Response.cost`).

Innermost per-call layer, between the cache and failover: it sees the response of the
source that answered, once per call, before the cache stores it, so a cache hit carries the
cost of the call that filled its entry (and telemetry counts that as saved, not spent).

A cost the transport already set (the provider billed the call itself: OpenRouter's
``usage.cost``) is kept. Otherwise the usage is priced from the table by
:func:`polythink.pricing.price`, under the model the server reported, else the source's
``base_model``, else its id (:func:`price_names`; Bedrock's id
first), at the service tier that served the call (:attr:`Response.service_tier`, else the tier
sent); when the table has no price of that tier's own, a warning says how it was priced
(:func:`polythink.pricing.tier_price_note`). Streams: the ``done`` response is priced; a
:class:`~polythink.errors.StreamInterruptedError` leaves with its ``partial`` response priced
when the provider reported usage before the break. Nothing here raises into the call: a
price that cannot be computed is ``None``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from polythink.config import Source
from polythink.errors import StreamInterruptedError
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.pricing import price, tier_price_note
from polythink.types import Request, Response, StreamEvent

__all__ = ["CostMiddleware", "price_names"]

_log = logging.getLogger("polythink.pricing")


def price_names(source: Source, reported: str, *, by_id: bool = False) -> list[str]:
    """The model names a call of ``source`` answered as ``reported`` is priced by, in order,
    each once: the model the server reported, then the source's ``base_model``, then its id;
    with ``by_id`` (Bedrock, whose price depends on the inference profile the id names), the
    id first."""
    names = (
        [source.model, reported, source.registry_model]
        if by_id
        else [
            reported,
            source.registry_model,
            source.model,
        ]
    )
    return list(dict.fromkeys(name for name in names if name))


class CostMiddleware:
    """Price every response that reaches the caller from a source.

    Args:
        sources: the client's sources, in order (a response's ``source_index`` names the
            one whose model prices it when the server reported none).
    """

    def __init__(self, sources: Sequence[Source]) -> None:
        self._sources = tuple(sources)
        self._by_id = tuple(source.profile.price_by_id for source in sources)

    def priced(self, response: Response) -> Response:
        """Return ``response`` with ``cost`` set when it can be priced (else unchanged), at
        the tier that served it, with a warning when the table has no price of that tier's
        own."""
        if response.cost is not None or response.usage is None:
            return response
        tier = response.service_tier
        if tier is None and response.applied_service_tier is not None:
            tier = response.applied_service_tier.value
        note = None
        try:
            cost = None
            model = response.model
            for model in self._names(response):
                cost = price(response.usage, response.provider, model, service_tier=tier)
                if cost is not None:
                    break
            if tier not in (None, "standard", "auto"):
                note = tier_price_note(response.provider, model, tier)
        except Exception:
            _log.warning("could not price a call; its cost is None", exc_info=True)
            return response
        if note is not None:
            return response.with_(cost=cost, warnings=[*response.warnings, note])
        return response if cost is None else response.with_(cost=cost)

    def _names(self, response: Response) -> list[str]:
        """The model names to price ``response`` by, in order (see :func:`price_names`)."""
        index = response.source_index
        if not 0 <= index < len(self._sources):
            return [response.model]
        return price_names(self._sources[index], response.model, by_id=self._by_id[index])

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Call on, price the response."""
        try:
            response = await call_next(request)
        except StreamInterruptedError as exc:
            self._price_partial(exc)
            raise
        return self.priced(response)

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Pass events through; price the ``done`` response or the interrupted partial."""
        try:
            async with aclosing(call_next(request)) as events:
                async for event in events:
                    if event.type == "done" and event.response is not None:
                        event = StreamEvent("done", response=self.priced(event.response))
                    yield event
        except StreamInterruptedError as exc:
            self._price_partial(exc)
            raise

    def _price_partial(self, exc: StreamInterruptedError) -> None:
        if exc.partial is not None:
            exc.partial = self.priced(exc.partial)
