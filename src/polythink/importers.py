"""Importers: maintained model catalogues read into the capability store as *imported* facts.

The shipped registry is reviewed before each release; between releases, catalogues that are
maintained every day fill the gaps. An imported entry ranks below the shipped registry and
above family inference (observed > documented > imported > inferred, see
:mod:`polythink.capability_store`), and records the file it came from and that file's date.

- OpenRouter's ``/api/v1/models`` document:
  :meth:`polythink.capability_store.CapabilityStore.import_openrouter`.
- LiteLLM's model map (``model_prices_and_context_window.json``, the JSON file LiteLLM keeps
  current upstream and bundles in its package as ``model_prices_and_context_window_backup.json``):
  :func:`import_litellm`, from a path or from the installed ``litellm`` package, which is
  located without being imported (importing it fetches the map over the network).

Nothing here runs at import time; ``polythink models import …`` and the functions below do.
The daily refresh (:mod:`polythink.refresh`) reads the same two catalogues through these
readers, from their upstream URLs, into the cache directory instead of the store file.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from polythink.capability_store import CapabilityStore
from polythink.errors import InvalidInputError
from polythink.reasoning.capabilities import normalise_model_name
from polythink.reasoning.capability import Capability
from polythink.reasoning.families import family_capability
from polythink.types import EFFORT_ORDER, Effort

__all__ = [
    "LITELLM_FILES",
    "LITELLM_PROVIDERS",
    "capabilities_from_litellm",
    "find_litellm_map",
    "import_litellm",
]

LITELLM_FILES = (
    "model_prices_and_context_window.json",
    "model_prices_and_context_window_backup.json",
)
"""The map's file name upstream, and the copy the ``litellm`` package bundles."""

LITELLM_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "xai": "xai",
    "deepseek": "deepseek",
    "dashscope": "qwen",
    "zai": "glm",
    "moonshot": "kimi",
    "minimax": "minimax",
    "mistral": "mistral",
    "groq": "groq",
    "openrouter": "openrouter",
    "hosted_vllm": "vllm",
    "ollama": "ollama",
}
"""LiteLLM's ``litellm_provider`` -> polythink's provider id. Entries of other providers (Azure,
Bedrock, Vertex AI, …) repeat models served here under other rules and are not imported; of
entries naming the same model, the first one of a provider listed earlier here wins."""

_OPT_OUT = (Effort.NONE, Effort.MINIMAL, Effort.LOW, Effort.MEDIUM, Effort.HIGH)
_OPT_IN = (Effort.XHIGH, Effort.MAX)
_CHAT_MODES = (None, "chat", "responses")


def _tier(value: Any) -> Effort | None:
    try:
        return Effort.parse(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _tiers(entry: Mapping[str, Any]) -> list[Effort]:
    """The tiers an entry says the model takes, cheapest first.

    ``reasoning_effort_levels`` (a list, or a comma-separated string) when present; else every
    tier from ``none`` to ``high`` unless its ``supports_<tier>_reasoning_effort`` is false,
    plus ``xhigh`` and ``max`` only where theirs is true (LiteLLM treats the first five as
    available unless ruled out and the last two as opt-in). ``thinking_always_on`` removes
    ``none``.
    """
    levels = entry.get("reasoning_effort_levels")
    if isinstance(levels, str):
        levels = [part.strip() for part in levels.split(",")]
    if isinstance(levels, list):
        found = {t for t in (_tier(v) for v in levels) if t is not None}
    else:
        flags = {t: entry.get(f"supports_{t.value}_reasoning_effort") for t in EFFORT_ORDER}
        found = {t for t in _OPT_OUT if flags[t] is not False}
        found |= {t for t in _OPT_IN if flags[t] is True}
    found.discard(Effort.AUTO)
    if entry.get("thinking_always_on") is True:
        found.discard(Effort.NONE)
    return [t for t in EFFORT_ORDER if t in found]


def _count(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def _date(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value.strip()[:10]).isoformat()
    except ValueError:
        return None


def capabilities_from_litellm(
    document: Mapping[str, Any], *, evidence: str
) -> tuple[list[Capability], list[str]]:
    """Build capabilities from LiteLLM's model map.

    Reads, per model (the document maps a model name, optionally provider-prefixed, to its
    fields; the ``sample_spec`` entry documents them and is skipped): ``litellm_provider``
    (see :data:`LITELLM_PROVIDERS`), ``mode`` (only ``chat`` and ``responses`` models),
    ``supports_reasoning``, the tiers (see :func:`_tiers`), ``default_reasoning_effort``,
    ``thinking_always_on``, ``thinking_on_by_default`` (a model that reasons when asked
    nothing: default ``auto`` unless a default tier is given), ``deprecation_date`` (LiteLLM's
    date the provider stops serving the model: ``shutdown``), ``max_input_tokens``
    (``context_window``) and ``max_output_tokens`` (else ``max_tokens``). The request style
    (Anthropic adaptive or manual thinking, Gemini budgets or levels) comes from the model's
    family where it has one (:mod:`polythink.reasoning.families`), and Anthropic's
    ``supports_adaptive_thinking`` where it is set.

    Returns:
        ``(capabilities, without_reasoning)``: the models with ``supports_reasoning: true``,
        and the names of those with ``supports_reasoning: false`` (they take no reasoning
        parameter). Models without ``supports_reasoning`` say nothing and are left out.

    Raises:
        ValueError: when the document is not a JSON object of model entries.
    """
    if not isinstance(document, Mapping):
        raise InvalidInputError("a LiteLLM model map is a JSON object of model name -> fields")
    rank = {provider: i for i, provider in enumerate(LITELLM_PROVIDERS)}
    chosen: dict[str, tuple[int, str, Mapping[str, Any]]] = {}
    for name, entry in document.items():
        if name == "sample_spec" or not isinstance(entry, Mapping):
            continue
        provider = entry.get("litellm_provider")
        if provider not in LITELLM_PROVIDERS or entry.get("mode") not in _CHAT_MODES:
            continue
        key = normalise_model_name(name)
        order = rank[provider]
        if key not in chosen or order < chosen[key][0]:
            chosen[key] = (order, name, entry)
    capabilities: list[Capability] = []
    without: list[str] = []
    for _, name, entry in chosen.values():
        model = name.rsplit("/", 1)[-1]
        if entry.get("supports_reasoning") is False:
            without.append(model)
            continue
        if entry.get("supports_reasoning") is not True:
            continue
        tiers = _tiers(entry) or [Effort.AUTO]
        default = _tier(entry.get("default_reasoning_effort"))
        if default is None and (
            entry.get("thinking_always_on") is True or entry.get("thinking_on_by_default") is True
        ):
            default = Effort.AUTO
        family = family_capability(model)
        thinking = family.thinking if family is not None else None
        if entry.get("supports_adaptive_thinking") is True:
            thinking = "adaptive"
        capabilities.append(
            Capability(
                model=model,
                supported_efforts=tuple(tiers),
                default_effort=default if default is None or default in tiers else None,
                provider=LITELLM_PROVIDERS[str(entry.get("litellm_provider"))],
                thinking=thinking,
                budget_min=family.budget_min if family is not None else None,
                budget_max=family.budget_max if family is not None else None,
                max_output_tokens=_count(entry.get("max_output_tokens"))
                or _count(entry.get("max_tokens")),
                context_window=_count(entry.get("max_input_tokens")),
                shutdown=_date(entry.get("deprecation_date")),
                evidence=evidence,
            )
        )
    return capabilities, without


def find_litellm_map(path: str | Path | None = None) -> tuple[Path, str]:
    """Locate LiteLLM's model map: ``path`` itself, else the copy in the installed ``litellm``
    package (found with :func:`importlib.util.find_spec`, not imported).

    Returns:
        ``(file, origin)``: the file and how the evidence names it (``"litellm 1.80.0
        package"`` or ``"file"``).

    Raises:
        ValueError: no path was given and no ``litellm`` package with a map is installed.
    """
    if path is not None:
        return Path(path).expanduser(), "file"
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        for name in LITELLM_FILES:
            candidate = Path(folder) / name
            if candidate.is_file():
                try:
                    version = importlib.metadata.version("litellm")
                except importlib.metadata.PackageNotFoundError:
                    version = "unknown version"
                return candidate, f"litellm {version} package"
    raise InvalidInputError(
        "no LiteLLM model map given and no litellm package with one is installed: pass the "
        "path of model_prices_and_context_window.json (https://github.com/BerriAI/litellm, "
        "repository root), or pip install litellm"
    )


def import_litellm(store: CapabilityStore, path: str | Path | None = None) -> int:
    """Read LiteLLM's model map into ``store`` as *imported* entries.

    The evidence of each entry names the file, where it came from and its modification date
    (see :func:`find_litellm_map`, :func:`capabilities_from_litellm`).

    Returns:
        how many models were stored (with and without reasoning).

    Raises:
        ValueError: no map can be found, or the file cannot be read or is not a model map.
    """
    source, origin = find_litellm_map(path)
    try:
        document = json.loads(source.read_text(encoding="utf-8"))
        stamp = datetime.datetime.fromtimestamp(source.stat().st_mtime, datetime.UTC)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read LiteLLM model map {source}: {exc}") from exc
    where = source.name if origin == "file" else f"{source.name} of the {origin}"
    evidence = f"imported: LiteLLM model map {where} (file dated {stamp.date().isoformat()})"
    capabilities, without = capabilities_from_litellm(document, evidence=evidence)
    count = store.add_imported(capabilities, evidence)
    return count + store.add_imported_without_reasoning(without, evidence)
