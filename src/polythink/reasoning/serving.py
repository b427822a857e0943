"""Which profile serves a source's model, and under which id the registry reads it.

A cloud serves several vendors' models, each over the wire its vendor's models take there
(``ProviderProfile.vendor_routes``): a ``bedrock`` source of Claude goes through InvokeModel
(the ``bedrock`` profile), of any other vendor through Converse (``bedrock-converse``); a
``vertex`` source of Claude through ``rawPredict`` (``vertex-anthropic``), of Gemini through
``generateContent`` (CLOUDS.md §1.3, §2.3, read 2026-12-04). :func:`serving` is that decision,
made once for the client (:attr:`polythink.Source.profile`, the reasoning layer) and for what
says what a call would send (:func:`polythink.resolve`, ``polythink resolve``,
``polythink models --levels``), so the two cannot disagree.

Pure functions; the registry is read for a model whose id names no vendor.
"""

from __future__ import annotations

from dataclasses import dataclass

from polythink.providers import ProviderProfile, get_provider, routed_profile
from polythink.reasoning.capabilities import get_capability
from polythink.reasoning.ids import parse_model_id

__all__ = ["Serving", "model_vendor", "serving", "serving_profile", "vendor_of"]


@dataclass(frozen=True, slots=True)
class Serving:
    """Where a source's calls go and how its model is looked up.

    Attributes:
        profile: the profile whose wire carries the calls (:func:`serving_profile`).
        model: the id the registry and the price table read: ``base_model``, else ``model``.
        lookup_provider: the provider the registry reads :attr:`model` for: ``None`` for a
            ``base_model`` (a model id, read by its shape), else :attr:`profile`'s id (an
            Azure id is a deployment name, which names no model).
    """

    profile: ProviderProfile
    model: str
    lookup_provider: str | None


def model_vendor(model: str) -> str | None:
    """The vendor a cloud model id names, or ``None`` when it names none: the model id
    normaliser's reading (:func:`polythink.reasoning.ids.parse_model_id`): a Bedrock id's
    vendor part after an inference profile's geography (``anthropic.claude-opus-4-8``,
    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0``, the same behind an ARN), a Vertex
    publisher (``anthropic/claude-opus-4-8``, ``publishers/anthropic/models/…``). A bare name
    (``claude-opus-4-8``, an Azure deployment's name) gives ``None``: its registry entry's
    provider says more (:func:`vendor_of`)."""
    return parse_model_id(None, model).vendor


def vendor_of(model: str, base_model: str | None = None) -> str | None:
    """The vendor of a source's model: named by its id (:func:`model_vendor`:
    ``us.anthropic.…`` -> ``anthropic``), else by ``base_model``, else the provider the
    capability registry lists the model under; ``None`` when nothing says."""
    for name in (model, base_model):
        if name:
            found = model_vendor(name)
            if found is not None:
                return found
    capability = get_capability(base_model or model, None)
    return capability.provider if capability is not None else None


def serving_profile(
    provider: str | ProviderProfile, model: str, base_model: str | None = None
) -> ProviderProfile:
    """The profile that serves ``model`` for a source of ``provider``: the provider's own,
    or the one its ``vendor_routes`` give for the model's vendor (:func:`vendor_of`): a
    ``bedrock`` source of an OpenAI model is served by ``bedrock-converse``, a ``vertex``
    source of a Claude model by ``vertex-anthropic``. A profile a route leads to serves its
    models itself, so routing a served profile again returns it.

    Raises:
        ValueError: an unknown provider id.
    """
    profile = get_provider(provider)
    if not profile.vendor_routes:
        return profile
    return routed_profile(profile, vendor_of(model, base_model))


def serving(provider: str | ProviderProfile, model: str, base_model: str | None = None) -> Serving:
    """Where the calls of a source of ``provider`` with ``model`` (and ``base_model``, the
    model a deployment or an application inference profile runs) go, and how the registry
    reads its model (:class:`Serving`).

    Raises:
        ValueError: an unknown provider id.
    """
    profile = serving_profile(provider, model, base_model)
    if base_model:
        return Serving(profile, base_model, None)
    return Serving(profile, model, profile.id)
