"""The reasoning layer: resolve the requested tier for this source, then check the result.

Innermost middleware of a source. Before the call it picks the effective tier (per-call >
the source's own > unset), resolves it against the source's model
(:func:`polythink.reasoning.resolve`) and hands the transport a request carrying the
:class:`~polythink.types.Resolution`. After the call it observes whether reasoning happened,
reconciles that with the applied tier, and fills ``requested_effort``, ``applied_effort``,
``thinking`` and ``warnings`` on the response. Streams are passed through event by event;
only the final ``done`` response is completed.

Resolutions are pure, so they are memoised per (tier, max_tokens): a call costs a dict
lookup, not a resolution.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

from polythink.config import Source
from polythink.errors import ThinkingUnsupportedError
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.providers import ProviderProfile
from polythink.reasoning.capabilities import Capability, get_capability
from polythink.reasoning.observe import WarningThrottle, observe, reconcile
from polythink.reasoning.resolve import resolve
from polythink.types import (
    Effort,
    Request,
    Resolution,
    Response,
    StreamEvent,
    ThinkingObservation,
)

__all__ = ["ReasoningMiddleware"]

_throttle = WarningThrottle()
_MEMO_LIMIT = 512


class ReasoningMiddleware:
    """Resolve and reconcile reasoning effort for one source.

    Args:
        source: the source (its model, default effort and fallback policy).
        index: the source's position in the client.
        profile: the source's provider profile.

    Raises:
        ThinkingUnsupportedError: at construction, when the source's own configured effort
            cannot be satisfied by its model (a configuration mistake is reported when the
            client is built, not on the first call).
    """

    def __init__(self, source: Source, index: int, profile: ProviderProfile) -> None:
        self.source = source
        self.index = index
        self.profile = profile
        self.model = source.model
        self.capability: Capability | None = get_capability(source.model)
        self._memo: dict[tuple[Effort | None, int | None], Resolution] = {}
        if source.effort is not None:
            try:
                self._resolve(source.effort, None)
            except ThinkingUnsupportedError as exc:
                exc.source_index = index
                raise

    def _resolve(self, effort: Effort | None, max_tokens: int | None) -> Resolution:
        key = (effort, max_tokens)
        found = self._memo.get(key)
        if found is None:
            found = resolve(
                effort,
                provider=self.profile,
                model=self.model,
                policy=self.source.effort_fallback,
                max_tokens=max_tokens,
                capability=self.capability,
            )
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = found
            # An unregistered model is reported once per model, whatever the tier; a
            # mapping once per (model, tier).
            tier = "*" if self.capability is None else (effort.value if effort else "unset")
            for warning in found.warnings:
                _throttle.warn(warning, model=self.model, tier=tier, kind="resolve")
        return found

    def prepare(self, request: Request) -> Request:
        """Return ``request`` with this source's resolution attached.

        Raises:
            ThinkingUnsupportedError: the requested tier cannot be satisfied here (carries
                this source's index, so failover can move on).
        """
        effort = request.reasoning_effort
        if effort is None:
            effort = self.source.effort
        try:
            resolution = self._resolve(effort, request.max_tokens)
        except ThinkingUnsupportedError as exc:
            exc.source_index = self.index
            raise
        return request.with_(resolution=resolution)

    def overridden(self, request: Request) -> list[str]:
        """The reasoning fields of this request's fragment that an ``extra_body`` replaces
        (dotted paths), in which case ``applied_effort`` cannot describe what was sent."""
        resolution = request.resolution
        if resolution is None or not resolution.payload:
            return []
        paths: list[str] = []
        for extra in (self.source.extra_body, request.extra_body):
            if extra:
                paths.extend(p for p in _overlap(resolution.payload, extra) if p not in paths)
        return paths

    def finish(
        self, response: Response, resolution: Resolution, overridden: list[str] | None = None
    ) -> Response:
        """Fill the reasoning fields of ``response`` (a new value; the input is unchanged).

        When ``overridden`` names fields an ``extra_body`` replaced, the applied tier is
        unknown (``None``) and a warning says which fields.
        """
        usage = response.usage
        observation = observe(
            response.reasoning, usage.reasoning_tokens if usage is not None else None
        )
        if response.thinking is ThinkingObservation.OBSERVED:
            # The transport saw opaque evidence (redacted or signed-but-omitted thinking,
            # encrypted reasoning items) that no text or count shows.
            observation = ThinkingObservation.OBSERVED
        warnings = list(resolution.warnings)
        # A transport may have had to send less than resolved (Anthropic switches thinking
        # off to continue a tool turn made without a signed thinking block); it says so.
        applied = response.applied_effort or resolution.applied_effort
        if overridden:
            warnings.append(
                f"extra_body replaces {', '.join(overridden)} of the reasoning fields resolved "
                f"for model {self.model!r}; applied_effort is unknown"
            )
            applied = None
        note = reconcile(applied, observation, model=self.model)
        if note is not None:
            warnings.append(note)
            tier = applied.value if applied else "unset"
            _throttle.warn(note, model=self.model, tier=tier, kind=observation.value)
        return dataclasses.replace(
            response,
            requested_effort=resolution.requested_effort,
            applied_effort=applied,
            thinking=observation,
            warnings=[*response.warnings, *warnings],
        )

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Resolve, call the transport, reconcile."""
        prepared = self.prepare(request)
        response = await call_next(prepared)
        assert prepared.resolution is not None
        return self.finish(response, prepared.resolution, self.overridden(prepared))

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Resolve, pass events through, reconcile the final ``done`` response."""
        prepared = self.prepare(request)
        assert prepared.resolution is not None
        async with aclosing(call_next(prepared)) as events:
            async for event in events:
                if event.type == "done" and event.response is not None:
                    done = self.finish(
                        event.response, prepared.resolution, self.overridden(prepared)
                    )
                    event = StreamEvent("done", response=done)
                yield event


def _overlap(payload: Mapping[str, Any], extra: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of ``payload`` leaves that ``extra`` sets too."""
    paths = []
    for key, value in payload.items():
        if key not in extra:
            continue
        path = f"{prefix}{key}"
        other = extra[key]
        if isinstance(value, Mapping) and isinstance(other, Mapping):
            paths.extend(_overlap(value, other, f"{path}."))
        else:
            paths.append(path)
    return paths
