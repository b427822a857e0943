"""The reasoning layer: resolve the requested tier for this source, then check the result.

Innermost middleware of a source. Before the call it picks the effective tier (per-call >
the source's own > unset), resolves it against the source's model
(:func:`polythink.reasoning.resolve`) and hands the transport a request carrying the
:class:`~polythink.types.Resolution`. After the call it observes whether reasoning happened,
reconciles that with the applied tier, and fills ``requested_effort``, ``applied_effort``,
``thinking`` and ``warnings`` on the response. A reported usage above what the call allowed
(the output ceiling sent, the model's context window) is counted as that bound, with a
warning (:func:`polythink.reasoning.observe.bounded_usage`), before any layer outside prices,
budgets or rate-limits it. Streams are passed through event by event;
only the final ``done`` response is completed.

Resolutions are pure, so they are memoised per (tier, max_tokens): a call costs a dict
lookup, not a resolution.

Learning from rejections: when the provider answers 400 / 422 with a recognised refusal of
the reasoning fields (:func:`polythink.reasoning.learn.parse_reasoning_rejection`), the layer
records what the model evidently accepts in the capability store as *observed* evidence,
scoped by the source's endpoint (its base URL: what the simulator or a gateway taught never
changes what is sent to another endpoint),
re-resolves the requested tier under the source's ``effort_fallback`` and sends the call once
more with the new fragment (``nearest``/``drop``), or raises
:class:`~polythink.errors.ThinkingUnsupportedError` naming the accepted tiers (``error``). A
model that takes no reasoning parameter at all is sent none, with a warning saying so. The
retry goes straight to the transport (the rate limiter outside counted one call). A refusal
of a non-streamed reasoning call (DashScope's "enable_thinking must be set to false for
non-streaming calls") is learned the same way, as a model that reasons only when streamed, and
the call is sent once more, streamed under ``complete()`` (``Resolution.stream_only``). An
unrecognised 400 is raised unchanged, never retried.

The first call of each requested tier is sent alone: calls for the same tier that arrive
while it is in flight wait for its outcome, so a rejection is paid once, not once per
concurrent caller. After that first outcome the gate costs one set lookup.

A model its provider has shut down (``Capability.shutdown`` on or before the store's today,
for an entry of this provider) is named in one WARNING on the ``polythink.lifecycle`` logger
per process, on its first call, with the replacement the registry knows
(:func:`polythink.reasoning.lifecycle.lifecycle_note`); the call still goes out, since the
provider may answer it through an alias or a re-route.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

import anyio

from polythink.capability_store import CapabilityStore, Known, endpoint_scope, resolve_known
from polythink.config import Source
from polythink.errors import (
    PolythinkError,
    RequestRejectedError,
    StreamInterruptedError,
    ThinkingUnsupportedError,
)
from polythink.middleware.base import CompleteNext, StreamNext
from polythink.providers import ProviderProfile
from polythink.reasoning.capability import Capability
from polythink.reasoning.learn import learned_capability, parse_reasoning_rejection
from polythink.reasoning.lifecycle import served_lifecycle_note
from polythink.reasoning.observe import WarningThrottle, bounded_usage, observe, reconcile
from polythink.reasoning.parameters import stream_only_rule
from polythink.reasoning.resolve import payload_ceiling
from polythink.reasoning.serving import serving
from polythink.types import Effort, Request, Resolution, Response, StreamEvent, ThinkingObservation
from polythink.wire_json import loads_json

__all__ = ["ReasoningMiddleware"]

_throttle = WarningThrottle()
_MEMO_LIMIT = 512
_lifecycle_log = logging.getLogger("polythink.lifecycle")
_retired_warned: set[tuple[str, str]] = set()
_retired_lock = threading.Lock()


def _warn_retired_once(provider: str, model: str, note: str) -> None:
    """Log ``note`` once per process for (provider, model)."""
    with _retired_lock:
        if (provider, model) in _retired_warned:
            return
        _retired_warned.add((provider, model))
    _lifecycle_log.warning("%s", note)


class ReasoningMiddleware:
    """Resolve and reconcile reasoning effort for one source.

    Args:
        source: the source (its model, default effort and fallback policy).
        index: the source's position in the client.
        profile: the source's provider profile.
        store: the capability store to read (observed > documented > imported > inferred)
            and to record what rejections teach; ``None`` = a private in-memory store.

    Raises:
        ThinkingUnsupportedError: at construction, when the source's own configured effort
            cannot be satisfied by its model (a configuration mistake is reported when the
            client is built, not on the first call).
    """

    def __init__(
        self,
        source: Source,
        index: int,
        profile: ProviderProfile,
        store: CapabilityStore | None = None,
    ) -> None:
        self.source = source
        self.index = index
        self.profile = profile
        # The same decision as polythink.resolve and `polythink resolve`: a base_model is a
        # model id read by its shape; an Azure id is a deployment name.
        served = serving(profile, source.model, source.base_model)
        self.model = served.model
        self.endpoint = source.endpoint
        self.store = store if store is not None else CapabilityStore(None)
        self._lookup_provider = served.lookup_provider
        known = self.store.lookup(self._lookup_provider, self.model, self.endpoint)
        self.capability: Capability | None = known.capability
        self.takes_parameter = known.takes_parameter
        self.origin = known.origin
        self._memo: dict[tuple[Effort | None, int | None], Resolution] = {}
        self._settled: set[Effort] = set()
        self._probes: dict[Effort, anyio.Event] = {}
        self._retired = served_lifecycle_note(
            self.model, known.capability, self.store.today(), profile.serves
        )
        # An Azure deployment's name need not be a model's: the model its answers report is
        # then adopted (once) when the registry knows it.
        self._adopt_served = (
            profile.cloud == "azure" and source.base_model is None and known.capability is None
        )
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
            found = resolve_known(
                effort,
                provider=self.profile,
                model=self.source.model,
                base_model=self.source.base_model,
                known=Known(self.capability, self.origin, self.takes_parameter),
                policy=self.source.effort_fallback,
                max_tokens=max_tokens,
            )
            if self._stream_only(found):
                found = dataclasses.replace(found, stream_only=True)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = found
            # An unregistered model is reported once per model, whatever the tier; a
            # mapping once per (model, tier). A model without a reasoning parameter is
            # reported in the response's warnings only.
            tier = "*" if self.capability is None else (effort.value if effort else "unset")
            for warning in found.warnings if self.takes_parameter else ():
                _throttle.warn(warning, model=self.model, tier=tier, kind="resolve")
        return found

    def resolution(self, effort: Effort | None, max_tokens: int | None) -> Resolution:
        """Return the resolution of ``effort`` with output ceiling ``max_tokens`` on this
        source's model, as a call would get it (memoised; with what was learned).

        Raises:
            ThinkingUnsupportedError: the tier cannot be satisfied here.
        """
        return self._resolve(effort, max_tokens)

    def _stream_only(self, resolution: Resolution) -> bool:
        """Whether the provider answers this resolution's call only when it is streamed.

        The model's capability says so (``stream_only_reasoning``), or a parameter rule of
        this endpoint (:func:`polythink.reasoning.parameters.stream_only_rule`), and the call
        reasons: its
        applied tier is not ``none``, or, unset, the model reasons by default or cannot
        switch off. A shipped entry speaks for DashScope, where it is documented ("The
        thinking mode only supports incremental output", Alibaba Cloud Model Studio,
        2025-06-13; QwQ and QVQ streaming-only, QWEN-FAQ); an observed one for the provider
        that refused a non-streamed call.
        """
        cap = self.capability
        applied = resolution.applied_effort
        rule = stream_only_rule(self.profile.id, self.model)
        if rule is not None and (cap is None or cap.default_effort is None):
            # Documented for this endpoint (polythink/reasoning/parameters.toml), so known
            # before the first refusal even for a model the registry does not list.
            return bool(rule.default_thinking) if applied is None else applied is not Effort.NONE
        if cap is None or not (cap.stream_only_reasoning or rule is not None):
            return False
        if self.origin != "observed" and self.profile.reasoning_wire != "qwen":
            return False
        if applied is None:
            return cap.default_reasons or not cap.can_disable
        return applied is not Effort.NONE

    def prepare(self, request: Request) -> Request:
        """Return ``request`` with this source's resolution attached.

        Raises:
            ThinkingUnsupportedError: the requested tier cannot be satisfied here (carries
                this source's index, so failover can move on).
        """
        if self._retired is not None:
            note, self._retired = self._retired, None
            _warn_retired_once(self.profile.id, self.model, note)
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
        return response.with_(
            requested_effort=resolution.requested_effort,
            applied_effort=applied,
            thinking=observation,
            warnings=[*response.warnings, *warnings],
        )

    def _requested(self, request: Request) -> Effort | None:
        effort = request.reasoning_effort
        return self.source.effort if effort is None else effort

    async def _admit(self, effort: Effort | None) -> anyio.Event | None:
        """Wait while the first call of this tier is in flight; return the gate to open when
        this call is that first one, else ``None``."""
        if effort is None or effort in self._settled:
            return None
        while True:
            probe = self._probes.get(effort)
            if probe is None:
                probe = self._probes[effort] = anyio.Event()
                return probe
            await probe.wait()
            if effort in self._settled:
                return None

    def _release(self, effort: Effort | None, probe: anyio.Event | None) -> None:
        if probe is None or effort is None:
            return
        self._settled.add(effort)
        self._probes.pop(effort, None)
        probe.set()

    def learn(self, error: PolythinkError, prepared: Request) -> Request | None:
        """Learn from a rejection of ``prepared``; return the request to send once more.

        Returns ``None`` when ``error`` is not a recognised reasoning rejection of a request
        that carried reasoning fields (the caller re-raises it), or when re-resolving gives the
        same request again. A refusal of a non-streamed reasoning call (``stream_only``) needs
        no reasoning field: the same call goes again, streamed under ``complete()``.

        Raises:
            ThinkingUnsupportedError: the requested tier cannot be satisfied under the
                source's policy with what was learned (``error`` policy, or ``none`` on a model
                that turned out unable to switch off); it names the accepted tiers.
        """
        resolution = prepared.resolution
        if resolution is None or error.body is None:
            return None
        try:
            body: Any = loads_json(error.body)
        except ValueError:
            body = error.body
        rejection = parse_reasoning_rejection(error.status_code, body)
        if rejection is None:
            return None
        stream_only = rejection.kind == "stream_only"
        if resolution.stream_only if stream_only else not resolution.payload:
            return None
        call = "a non-streamed call with " if stream_only else ""
        evidence = (
            f"observed {self.store.today()} on {self.profile.id} at "
            f"{endpoint_scope(self.endpoint)}: HTTP {error.status_code} to "
            f"{call}{json.dumps(dict(resolution.payload), sort_keys=True)}: {rejection.gist}"
        )
        try:
            capability = learned_capability(
                self.capability,
                rejection,
                model=self.model,
                provider=self.profile.id,
                wire=self.profile.reasoning_wire,
                sent=resolution.applied_effort,
                evidence=evidence,
            )
        except ValueError:
            return None
        if capability is None and not self.takes_parameter:
            return None
        self.store.observe(self.profile.id, self.model, capability, evidence, self.endpoint)
        self.capability = capability
        self.takes_parameter = capability is not None
        self.origin = "observed"
        self._memo.clear()
        try:
            retried = self._resolve(self._requested(prepared), prepared.max_tokens)
        except ThinkingUnsupportedError as exc:
            exc.message = f"{exc.message}; learned from {evidence}"
            exc.args = (exc.message,)
            exc.source_index = self.index
            raise exc from error
        if stream_only:
            if not retried.stream_only:
                return None
            note = (
                f"{self.profile.id} answers reasoning calls to {self.model!r} only when "
                f"streamed ({rejection.gist}); learned that and sent the call again as a stream"
            )
        else:
            if dict(retried.payload) == dict(resolution.payload):
                return None
            what = (
                "no reasoning parameter"
                if capability is None
                else f"accepted: {', '.join(e.value for e in capability.supported_efforts)}"
            )
            note = (
                f"{self.profile.id} rejected the reasoning fields for model {self.model!r} "
                f"({rejection.gist}); learned {what} and sent the call again"
            )
        _throttle.warn(note, model=self.model, tier="learned", kind="learn")
        learned = dataclasses.replace(retried, warnings=(note, *retried.warnings))
        return prepared.with_(resolution=learned)

    def _suspect(self, response: Response) -> str | None:
        """Count a reasoning observation that contradicts the registry; a note once suspect."""
        cap = self.capability
        applied = response.applied_effort
        if cap is None or applied is None or self.origin == "observed":
            return None
        if applied is Effort.NONE and response.thinking is ThinkingObservation.OBSERVED:
            kind: Any = "reasoned_when_off"
        elif (
            applied is not Effort.AUTO
            and applied is not Effort.NONE
            and response.thinking is ThinkingObservation.ABSENT
        ):
            kind = "silent_when_on"
        else:
            return None
        hint = self.store.contradict(
            self.profile.id, self.model, applied, kind, cap.evidence, self.endpoint
        )
        if not hint.suspected:
            return None
        return (
            f"the capability entry of model {self.model!r} looks stale: {hint.count} answers "
            f"at reasoning_effort={applied.value!r} contradicted it ({kind.replace('_', ' ')}); "
            "nothing was changed (see polythink models --learned)"
        )

    def output_bound(self, request: Request) -> tuple[int | None, str]:
        """The most output tokens ``request`` allows on this source, and where the figure
        comes from; ``(None, "")`` when nothing bounds it.

        The ceiling sent is the one the transport writes last: the call's ``extra_body``,
        the source's, the resolution's (a budget wire raises it), ``max_tokens``, the wire's
        default. Where it bounds reasoning too
        (:attr:`~polythink.providers.ProviderProfile.ceiling_covers_reasoning`) it is the
        bound; elsewhere reasoning may come on top of it, and only the model's maximum
        output (from the registry) bounds the whole.
        """
        profile = self.profile
        resolution = request.resolution
        sent = payload_ceiling(resolution.payload, profile) if resolution is not None else None
        if sent is None:
            sent = request.max_tokens
        if sent is None:
            sent = profile.default_max_tokens
        for extra in (self.source.extra_body, request.extra_body):
            if extra:
                sent = payload_ceiling(extra, profile) or sent
        largest = self.capability.max_output_tokens if self.capability is not None else None
        if sent is not None and profile.ceiling_covers_reasoning:
            return sent, "the output ceiling sent"
        if largest is not None:
            return max(largest, sent or 0), f"the maximum output of model {self.model!r}"
        return None, ""

    def bounded(self, response: Response, request: Request) -> Response:
        """``response`` with its usage held to what ``request`` allowed (see
        :func:`~polythink.reasoning.observe.bounded_usage`); a provider-reported cost is
        dropped with a usage that was changed, so it is priced from the bounded one."""
        usage = response.usage
        if usage is None:
            return response
        output, why = self.output_bound(request)
        window = self.capability.context_window if self.capability is not None else None
        bounded, notes = bounded_usage(usage, output=output, output_why=why, window=window)
        if not notes:
            return response
        for note in notes:
            _throttle.warn(
                f"{self.profile.id} model {self.model!r}: {note}",
                model=self.model,
                tier="usage",
                kind="bounded",
            )
        return response.with_(
            usage=bounded,
            cost=None,
            warnings=[*response.warnings, *notes],
        )

    def adopt(self, served: str) -> str | None:
        """Take ``served``, the model an answer reported, as the model of a source whose id
        the registry does not know (an Azure deployment's name): when the registry knows it,
        its reasoning rules apply from the next call on. Returns the note for the response
        that taught it, else ``None``. Done once per source."""
        self._adopt_served = False
        if not served or served == self.model:
            return None
        known = self.store.lookup(None, served, self.endpoint)
        if known.capability is None:
            return None
        deployment = self.model
        self.model = served
        self.capability = known.capability
        self.takes_parameter = known.takes_parameter
        self.origin = known.origin
        self._memo.clear()
        note = (
            f"{self.profile.id} deployment {deployment!r} serves model {served!r} (from its "
            "answer): its reasoning rules apply from the next call; set base_model= on the "
            "source to apply them from the first"
        )
        _lifecycle_log.info("source %d: %s", self.index, note)
        return note

    def _done(self, response: Response, resolution: Resolution, prepared: Request) -> Response:
        if self._adopt_served:
            taught = self.adopt(response.model)
            if taught is not None:
                response = response.with_(warnings=[*response.warnings, taught])
        response = self.bounded(response, prepared)
        finished = self.finish(response, resolution, self.overridden(prepared))
        note = self._suspect(finished)
        if note is None:
            return finished
        return finished.with_(warnings=[*finished.warnings, note])

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        """Resolve, call the transport (once more after a recognised rejection), reconcile."""
        effort = self._requested(request)
        probe = None if effort is None or effort in self._settled else await self._admit(effort)
        try:
            prepared = self.prepare(request)
            try:
                response = await call_next(prepared)
            except RequestRejectedError as exc:
                retry = self.learn(exc, prepared)
                if retry is None:
                    raise
                prepared = retry
                response = await call_next(prepared)
        except StreamInterruptedError as exc:
            exc.partial = self.bounded(exc.partial, prepared)
            raise
        finally:
            self._release(effort, probe)
        assert prepared.resolution is not None
        return self._done(response, prepared.resolution, prepared)

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        """Resolve, pass events through, reconcile the final ``done`` response.

        A rejection arrives before the first event, so learning and sending once more happen
        before anything reaches the caller.
        """
        effort = self._requested(request)
        probe = None if effort is None or effort in self._settled else await self._admit(effort)
        try:
            prepared = self.prepare(request)
            events = call_next(prepared)
            try:
                first = await anext(events, None)
            except RequestRejectedError as exc:
                await events.aclose()
                retry = self.learn(exc, prepared)
                if retry is None:
                    raise
                prepared = retry
                events = call_next(prepared)
                first = await anext(events, None)
        except BaseException:
            self._release(effort, probe)
            raise
        self._release(effort, probe)
        assert prepared.resolution is not None
        resolution = prepared.resolution
        async with aclosing(events):
            event = first
            try:
                while event is not None:
                    if event.type == "done" and event.response is not None:
                        event = StreamEvent(
                            "done", response=self._done(event.response, resolution, prepared)
                        )
                    yield event
                    event = await anext(events, None)
            except StreamInterruptedError as exc:
                exc.partial = self.bounded(exc.partial, prepared)
                raise


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
