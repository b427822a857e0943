"""Send a caller's own body as written, on its own wire (``Request.native``).

``polythink serve`` receives a request in one provider's format and hands the onion both a
typed :class:`~polythink.types.Request` and the body itself
(:class:`~polythink.types.NativeBody`). A transport of the body's wire sends the body; every
other transport builds its own from the typed request. What polythink changes in the body is
what it owns, and only when it must (:func:`native_body`):

- ``model``: the source's model id (a route's alias names something else);
- ``stream``: as the call is made; Chat streams ask for usage
  (``stream_options.include_usage``) where the profile does, so cost and budgets see it;
- the output ceiling, when a layer changed the call's (a spend budget's step-down), in the
  profile's own field;
- the reasoning fields, when the source's model does not take the caller's as written
  (:func:`keeps_reasoning`): they are removed and the reasoning layer's fragment is merged
  in, and the response says so in its warnings. A body without reasoning fields gets the
  fragment of the source's (or the configuration's) default tier;
- the source's own ``extra_body`` (the operator's), merged last.

Everything else (unknown fields, ``system`` arrays, thinking blocks and their signatures,
``cache_control``, Anthropic ``thinking.block_binding``) goes through untouched, as
Anthropic asks of gateways (CONTINUITY.md §1.9). The caller's request headers of the wire
go with it (:meth:`~polythink.transports.base.HTTPTransport.native_headers`):
``anthropic-beta`` values as an open list, joined with the source's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from polythink.providers import ProviderProfile
from polythink.reasoning.capability import Capability
from polythink.transports.base import deep_merge
from polythink.types import NativeBody, Request

if TYPE_CHECKING:
    from polythink.transports.base import HTTPTransport

__all__ = ["keeps_reasoning", "native_body", "native_for", "written_body"]


def native_for(request: Request, wire: str) -> NativeBody | None:
    """The call's own body when it is written for ``wire``, else ``None``."""
    native = request.native
    if native is None or native.wire != wire:
        return None
    return native


def keeps_reasoning(
    native: NativeBody,
    request: Request,
    profile: ProviderProfile,
    capability: Capability | None,
) -> bool:
    """Whether the caller's own reasoning fields go to the source as written.

    They do when the caller sent some, in the source's own dialect (``reasoning_effort`` to
    an ``effort`` wire, ``thinking`` / ``output_config.effort`` to Anthropic …), for the tier
    the reasoning layer applies (the model takes it: no nearest-mapping, no budget
    step-down), in the thinking style the model takes (``enabled`` with a budget on a
    ``manual`` model; ``adaptive`` or ``output_config.effort`` on an ``adaptive`` one:
    :attr:`NativeBody.style`). Otherwise polythink's fragment replaces them. Without a
    resolution (no reasoning layer ran) they are kept.
    """
    if native.effort is None:
        return False
    resolution = request.resolution
    if resolution is None or resolution.applied_effort is None:
        return True
    if native.dialect != profile.reasoning_wire:
        return False
    if resolution.applied_effort is not native.effort:
        return False
    style = capability.thinking if capability is not None else None
    return not (native.style is not None and style is not None and style != native.style)


def _holds(body: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether ``body`` has a value at ``path``."""
    value: Any = body
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return False
        value = value[key]
    return True


def _without(body: dict[str, Any], path: tuple[str, ...]) -> None:
    """Remove the value at ``path`` from ``body``, copying the objects on the way (the
    caller's body is shared); an object left empty by it goes too."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if not rest:
        body.pop(head, None)
        return
    inner = body.get(head)
    if not isinstance(inner, Mapping):
        return
    copy = dict(inner)
    _without(copy, rest)
    if copy:
        body[head] = copy
    else:
        del body[head]


def native_body(
    native: NativeBody,
    request: Request,
    *,
    model: str,
    profile: ProviderProfile,
    capability: Capability | None,
    extra_body: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The body a transport of ``native.wire`` sends for ``request``, and the notes for the
    response's warnings (see the module docstring for what changes).

    The caller's body is never modified: the result is a copy, sharing the values it does
    not change.
    """
    body = dict(native.body)
    notes: list[str] = []
    body["model"] = model
    if bool(body.get("stream")) is not request.stream:
        body["stream"] = request.stream
    if request.stream and profile.wire == "openai_chat" and profile.stream_usage:
        options = body.get("stream_options")
        options = dict(options) if isinstance(options, Mapping) else {}
        if options.get("include_usage") is not True:
            options["include_usage"] = True
            body["stream_options"] = options
    given = body.get(native.max_tokens_key) if native.max_tokens_key else None
    if request.max_tokens is not None and (
        request.max_tokens != given or native.max_tokens_key != profile.max_tokens_field
    ):
        if native.max_tokens_key:
            body.pop(native.max_tokens_key, None)
        body[profile.max_tokens_field] = request.max_tokens
    resolution = request.resolution
    if resolution is not None:
        if native.effort is None:
            deep_merge(body, resolution.payload)
        elif not keeps_reasoning(native, request, profile, capability):
            given = ", ".join(
                ".".join(path) for path in native.reasoning_paths if _holds(body, path)
            )
            for path in native.reasoning_paths:
                _without(body, path)
            deep_merge(body, resolution.payload)
            applied = resolution.applied_effort
            notes.append(
                f"reasoning fields rewritten for {profile.id} model {model!r}: the request "
                f"asked {native.effort.value!r} in the {native.dialect} dialect ({given}), sent "
                f"{applied.value if applied is not None else 'unset'!r} as the model takes it"
            )
            thinking = body.get("thinking")
            if (
                profile.reasoning_wire == "anthropic"
                and isinstance(thinking, Mapping)
                and "type" not in thinking
            ):
                # Its other fields (display, block_binding) belong to a thinking that is on.
                del body["thinking"]
    if extra_body:
        deep_merge(body, extra_body)
    return body, notes


def written_body(
    transport: HTTPTransport, request: Request
) -> tuple[dict[str, Any], list[str]] | None:
    """:func:`native_body` for ``transport``'s source when the call carries a body of its
    wire, else ``None`` (the transport builds its own)."""
    native = native_for(request, transport.profile.wire)
    if native is None:
        return None
    return native_body(
        native,
        request,
        model=transport.source.model,
        profile=transport.profile,
        capability=transport.capability,
        extra_body=transport.source.extra_body,
    )
