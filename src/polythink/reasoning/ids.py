"""Model ids as people type them, read back to the model they name.

The same model travels under many ids: ``claude-sonnet-4-5-20250929`` on Anthropic's API is
``anthropic.claude-sonnet-4-5-20250929-v1:0`` on Amazon Bedrock, ``us.anthropic.claude-…`` in a
cross-Region inference profile, an ARN in a Bedrock console, ``claude-sonnet-4-5@20250929`` on
Vertex AI and ``anthropic/claude-sonnet-4.5`` on OpenRouter; a fine-tune of ``gpt-4o-mini`` is
``ft:gpt-4o-mini-2024-07-18:org::id``; an Ollama model is ``qwen3:32b``. The registry's rules
are written for the model, so every lookup first reads the id back to it.

:func:`parse_model_id` does that, with the rules in ``ids.toml`` next to this module (each with
the provider page it comes from and the date read):

1. wrappers come off: an ARN (``foundation-model/…`` and ``inference-profile/…`` name their
   model; other resource types do not), a fine-tune wrapper, a resource path
   (``publishers/google/models/…``, a gateway's ``vendor/`` prefix), a Vertex ``@version``
   (``@20250929`` becomes the native ``-20250929``; ``@default`` is dropped), a Bedrock
   geography prefix, vendor prefix and ``-v1:0`` version, an OpenRouter ``:variant``, an
   Ollama ``:tag`` (size and variant kept, quantisation and hosting dropped). What remains is
   the *native* id, as the model's own provider names it (:attr:`ModelId.model`);
2. a snapshot suffix (a date in any of the providers' spellings, ``-latest``) is taken off;
3. variant suffixes that share the model's rules (``-highspeed``, a Claude ``-fast`` slug,
   Vertex ``-maas``, Gemini ``-preview`` and ``-customtools``) are taken off, giving
   :attr:`ModelId.base`.

:attr:`ModelId.keys` lists the lookup forms from the most specific (the native id) to the most
general (the base, then for an Ollama tag the model name without its size), so an entry the
registry keeps for a dated snapshot or a variant wins over the base model's. Some ids do not
name their model at all: an Azure deployment name (``provider="azure"``), a Bedrock
application inference profile or provisioned model, a Vertex endpoint or a Gemini tuned
model. They come back with ``inferable=False`` and no keys: the deployment's model has to be
configured.

Pure functions, no I/O beyond reading the packaged rules once; results are memoised.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelId", "base_model_id", "lookup_keys", "model_key", "parse_model_id"]


@dataclass(frozen=True, slots=True)
class ModelId:
    """One model id read back to the model it names.

    Attributes:
        raw: the id as given.
        provider: the provider id it was read for (``None``: read by its shape alone).
        model: the native id, as the model's own provider names it: wrappers off, snapshot
            kept (``claude-sonnet-4-5-20250929``, ``gpt-oss-120b``, ``qwen3-32b``). For an id
            that names no model, the id itself.
        base: the base model id: ``model`` without its snapshot and shared-rule variant
            suffixes (``claude-sonnet-4-5``).
        inferable: ``False`` when the id does not say which model it runs (Azure deployment
            names, Bedrock application inference profiles and provisioned models, Vertex
            endpoints, Gemini tuned models): nothing is looked up for it.
        vendor: the model's maker as the id spells it (Bedrock ``anthropic.``, a gateway's
            ``openai/``, a Vertex ``publishers/google``), where the id carries one.
        geography: the Bedrock cross-Region inference profile prefix (``us``, ``eu``,
            ``apac``, ``global`` …).
        region: the AWS region of an ARN.
        resource: the ARN resource type (``foundation-model``, ``inference-profile``,
            ``application-inference-profile`` …).
        version: a cloud version taken off: Bedrock ``v1:0``, Vertex ``20250929`` or
            ``default``.
        snapshot: the snapshot suffix taken off ``model`` (``2025-08-07``, ``0309``,
            ``latest``).
        variants: the shared-rule variant suffixes taken off, outermost first
            (``("customtools", "preview")``).
        catalog_variant: an OpenRouter catalog variant (``thinking``, ``free`` …): an entry of
            its own in OpenRouter's catalogue, looked up before the base model.
        tag: an Ollama tag (``30b-a3b-instruct-2507-q4_K_M``).
        fine_tune: what followed the base model in a fine-tuned id (``org:suffix:id``).
        key: the identity of the model for stores and listings: ``model`` in lookup form
            without a full date (a dated snapshot of the same model shares it), with its
            catalog variant (``claude-3-7-sonnet:thinking``).
        keys: lookup forms, most specific first (empty when not ``inferable``).
    """

    raw: str
    provider: str | None
    model: str
    base: str
    inferable: bool = True
    vendor: str | None = None
    geography: str | None = None
    region: str | None = None
    resource: str | None = None
    version: str | None = None
    snapshot: str | None = None
    variants: tuple[str, ...] = ()
    catalog_variant: str | None = None
    tag: str | None = None
    fine_tune: str | None = None
    key: str = ""
    keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Suffix:
    name: str
    pattern: re.Pattern[str]
    models: re.Pattern[str] | None
    providers: frozenset[str]
    same_model: bool

    def applies(self, provider: str | None, model: str) -> bool:
        if self.providers and provider not in self.providers:
            return False
        return self.models is None or self.models.search(model) is not None


@dataclass(frozen=True, slots=True)
class _Rules:
    geographies: frozenset[str]
    vendors: frozenset[str]
    bedrock_version: re.Pattern[str]
    named_resources: frozenset[str]
    vendor_prefix: dict[str, str]
    unnamed_paths: frozenset[str]
    catalog_variants: frozenset[str]
    routing_variants: frozenset[str]
    size: re.Pattern[str]
    quantisation: re.Pattern[str]
    hosting: frozenset[str]
    fine_tune: str
    opaque_providers: frozenset[str]
    snapshots: tuple[_Suffix, ...]
    variants: tuple[_Suffix, ...]


def _suffixes(rows: list[dict[str, Any]]) -> tuple[_Suffix, ...]:
    return tuple(
        _Suffix(
            name=row["name"],
            pattern=re.compile(row["pattern"], re.IGNORECASE),
            models=re.compile(row["models"], re.IGNORECASE) if "models" in row else None,
            providers=frozenset(row.get("providers", ())),
            same_model=bool(row.get("same_model", False)),
        )
        for row in rows
    )


@functools.cache
def _rules() -> _Rules:
    import tomllib  # with the rules, not with import polythink
    from importlib import resources

    text = resources.files("polythink.reasoning").joinpath("ids.toml").read_text("utf-8")
    data = tomllib.loads(text)
    bedrock, ollama = data["bedrock"], data["ollama"]
    return _Rules(
        geographies=frozenset(bedrock["geographies"]),
        vendors=frozenset(bedrock["vendors"]),
        bedrock_version=re.compile(bedrock["version"], re.IGNORECASE),
        named_resources=frozenset(bedrock["named_resources"]),
        vendor_prefix=dict(bedrock["vendor_prefix"]),
        unnamed_paths=frozenset(data["vertex"]["unnamed_paths"]),
        catalog_variants=frozenset(data["openrouter"]["catalog_variants"]),
        routing_variants=frozenset(data["openrouter"]["routing_variants"]),
        size=re.compile(ollama["size"], re.IGNORECASE),
        quantisation=re.compile(ollama["quantisation"], re.IGNORECASE),
        hosting=frozenset(ollama["hosting"]),
        fine_tune=data["fine_tune"]["prefix"],
        opaque_providers=frozenset(data["azure"]["providers"]),
        snapshots=_suffixes(data["snapshot"]),
        variants=_suffixes(data["variant"]),
    )


def model_key(name: str) -> str:
    """Return the form model names are compared in: lower case, ``.`` read as ``-``, spaces
    around removed (``GPT-5.5`` and ``gpt-5-5`` compare equal). Takes nothing else off; see
    :func:`lookup_keys` for the forms a lookup tries."""
    return name.strip().lower().replace(".", "-")


def _family(provider: str | None) -> str | None:
    # "openai-responses" and "openrouter-responses" read ids as their provider does.
    return None if provider is None else provider.split("-", 1)[0].lower()


_ARN = re.compile(r"^arn:[^:]*:(?P<service>[^:]*):(?P<region>[^:]*):[^:]*:(?P<resource>.+)$")
_COMPACT_DATE = re.compile(r"^20\d{6}$")


def _opaque(raw: str, provider: str | None, **fields: Any) -> ModelId:
    text = raw.strip()
    return ModelId(
        raw, provider, text, text, inferable=False, key=model_key(text), keys=(), **fields
    )


def _bedrock_shaped(text: str, rules: _Rules) -> bool:
    parts = text.split(".", 2)
    if len(parts) >= 3 and parts[0].lower() in rules.geographies:
        return parts[1].lower() in rules.vendors
    return len(parts) >= 2 and parts[0].lower() in rules.vendors and parts[1][:1].isalpha()


def _ollama(name: str, tag: str, rules: _Rules) -> tuple[str, str]:
    """The native id of an Ollama ``name:tag`` and the name to fall back on without a size
    (the name with the tag's variant words, which change the rules: ``qwen3-instruct``)."""
    kept: list[str] = []
    words: list[str] = []
    for token in tag.split("-"):
        low = token.lower()
        if not low or low in rules.hosting or rules.quantisation.match(low):
            continue
        kept.append(low)
        if not rules.size.match(low) and not low.isdigit():
            words.append(low)
    return "-".join([name, *kept]), "-".join([name, *words])


@functools.lru_cache(maxsize=4096)
def parse_model_id(provider: str | None, model: str) -> ModelId:
    """Read ``model`` back to the model it names (see the module docstring for the steps).

    Args:
        provider: the provider id the id is sent to (``bedrock``, ``vertex``, ``azure``,
            ``ollama``, ``openrouter`` … change how it is read); ``None`` reads it by its
            shape alone (a Bedrock id, an ARN, a fine-tune wrapper and a Vertex ``@version``
            are recognised anywhere).
        model: the id as configured.

    Returns:
        The parsed id; never raises for an odd id (an empty one gives an empty model and no
        keys).

    >>> parse_model_id("bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0").base
    'claude-sonnet-4-5'
    >>> parse_model_id(None, "ft:gpt-4o-mini-2024-07-18:acme::9xYz").model
    'gpt-4o-mini-2024-07-18'
    """
    rules = _rules()
    family = _family(provider)
    raw = model
    text = model.strip()
    if family in rules.opaque_providers:
        return _opaque(raw, provider)
    fields: dict[str, Any] = {}
    bedrock = family == "bedrock"

    arn = _ARN.match(text)
    if arn is not None:
        kind, _, rest = arn["resource"].partition("/")
        fields.update(region=arn["region"] or None, resource=kind)
        if arn["service"] != "bedrock" or kind not in rules.named_resources or not rest:
            return _opaque(raw, provider, **fields)
        text, bedrock = rest, True

    if text.lower().startswith(rules.fine_tune):
        parts = text.split(":")
        text = parts[1] if len(parts) > 1 else ""
        fields["fine_tune"] = ":".join(parts[2:]) or None

    if "/" in text:
        segments = [s for s in text.split("/") if s]
        if any(s in rules.unnamed_paths for s in segments):
            return _opaque(raw, provider, **fields)
        if len(segments) >= 3 and segments[-2] == "models" and "publishers" in segments:
            fields["vendor"] = segments[segments.index("publishers") + 1]
        elif len(segments) >= 2 and segments[-2] != "models":
            fields["vendor"] = segments[-2]
        text = segments[-1] if segments else ""
    text = text.lstrip("~")

    if "@" in text:
        text, _, version = text.partition("@")
        fields["version"] = version or None
        if _COMPACT_DATE.match(version):
            text = f"{text}-{version}"

    fallback: str | None = None
    if bedrock or _bedrock_shaped(text, rules):
        parts = text.split(".", 2)
        if len(parts) == 3 and parts[0].lower() in rules.geographies:
            fields["geography"] = parts[0].lower()
            text = f"{parts[1]}.{parts[2]}"
        head, dot, rest = text.partition(".")
        if dot and head.lower() in rules.vendors and rest[:1].isalpha():
            fields["vendor"] = head.lower()
            text = rest
            found = rules.bedrock_version.search(text)
            if found is not None:
                fields["version"] = found.group(0).lstrip("-")
                text = text[: found.start()]
            prefix = rules.vendor_prefix.get(head.lower())
            if prefix and not text.lower().startswith(prefix):
                text = prefix + text
    elif ":" in text:
        name, _, tag = text.partition(":")
        low = tag.lower()
        if low in rules.catalog_variants:
            fields["catalog_variant"] = low
            text = name
        elif low in rules.routing_variants or family == "openrouter":
            text = name
        else:
            fields["tag"] = tag
            text, fallback = _ollama(name, tag, rules)

    native = text
    undated, same_model = native, False
    for rule in rules.snapshots:
        if not rule.applies(provider, native):
            continue
        found = rule.pattern.search(native)
        if found is not None:
            fields["snapshot"] = found.group(0).lstrip("-")
            undated = native[: found.start()] + native[found.end() :]
            same_model = rule.same_model
            break
    steps = [undated]
    variants: list[str] = []
    changed = True
    while changed:
        changed = False
        for rule in rules.variants:
            if not rule.applies(provider, steps[-1]):
                continue
            found = rule.pattern.search(steps[-1])
            if found is not None:
                variants.append(found.group(0).lstrip("-").lower())
                steps.append(steps[-1][: found.start()])
                changed = True
                break
    base = steps[-1]
    catalog = fields.get("catalog_variant")
    keys: list[str] = []
    if catalog:
        keys.append(f"{model_key(native)}:{catalog}")
    keys.extend(model_key(step) for step in (native, *steps))
    if fallback is not None and fallback != native:
        keys.append(model_key(fallback))
    identity = model_key(undated if same_model else native)
    return ModelId(
        raw,
        provider,
        native,
        base,
        variants=tuple(variants),
        key=f"{identity}:{catalog}" if catalog else identity,
        keys=tuple(dict.fromkeys(k for k in keys if k)),
        **fields,
    )


def base_model_id(provider: str | None, model: str) -> str:
    """Return the base model ``model`` names on ``provider``: wrappers, snapshot and
    shared-rule variant suffixes off (:attr:`ModelId.base`); the id itself when it does not
    name its model (an Azure deployment name).

    >>> base_model_id("vertex", "claude-sonnet-4-5@20250929")
    'claude-sonnet-4-5'
    >>> base_model_id("ollama", "gpt-oss:120b")
    'gpt-oss-120b'
    """
    return parse_model_id(provider, model).base


def lookup_keys(provider: str | None, model: str) -> tuple[str, ...]:
    """Return the forms a registry lookup of ``model`` tries, most specific first
    (:attr:`ModelId.keys`); empty for an id that does not name its model."""
    return parse_model_id(provider, model).keys
