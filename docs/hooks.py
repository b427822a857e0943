"""Pages of the documentation site generated, at build time, from what they describe.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``). The pages that hand-written
text would let drift are rendered here from their source of truth on every build:

- ``reference/api/*.md``: one page per defining module of the names in ``polythink.__all__``
  and ``polythink.errors.__all__``, each name rendered from its docstring by mkdocstrings. A
  name added to ``__all__`` appears without editing the docs.
- ``reference/cli.md``: every command and option of ``polythink.cli.build_parser()`` (and the
  benchmark suite's own parser for ``polythink bench``).
- ``providers/index.md`` and ``providers/models.md``: the provider profiles and the model
  registry (tiers, default, whether reasoning switches off, lifecycle, evidence and its date),
  with the family rules for models the registry does not list.
- ``benchmarks/index.md`` and ``benchmarks/results.md``: ``benchmarks/README.md`` and the
  tables and charts of the latest full run in ``benchmarks/results/``.
- ``changelog.md``: ``CHANGELOG.md``.

Hand-written pages may hold a marker such as ``<!-- polythink:env-fields -->`` that is
replaced by a generated table (:data:`MARKERS`). Every page function is a pure function that
returns Markdown, so the tests check them without MkDocs (``tests/test_docs_pages.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

API_DIR = "reference/api"

# Title and order of each reference page, by the module that defines its names. A module not
# listed here gets a page of its own, titled by its name, so a new public name is never lost.
API_PAGES: dict[str, tuple[str, str]] = {
    "polythink.client": ("client", "Client"),
    "polythink.sync": ("client", "Client"),
    "polythink.config": ("sources", "Sources and timeouts"),
    "polythink.types": ("types", "Messages, requests and responses"),
    "polythink.structured": ("types", "Messages, requests and responses"),
    "polythink.conversation": ("conversations", "Conversations"),
    "polythink.budgets": ("budgets", "Budgets"),
    "polythink.batch": ("batch", "Batches"),
    "polythink.middleware.base": ("middleware", "Middleware"),
    "polythink.reasoning.capability": ("reasoning", "Reasoning and providers"),
    "polythink.reasoning.capabilities": ("reasoning", "Reasoning and providers"),
    "polythink.reasoning.resolve": ("reasoning", "Reasoning and providers"),
    "polythink.providers": ("reasoning", "Reasoning and providers"),
    "polythink.errors": ("errors", "Errors"),
    "polythink": ("package", "Version"),
}

SUPPORTING: dict[str, tuple[str, tuple[str, ...]]] = {
    "conversations": (
        "Conversations",
        (
            "polythink.conversation.save_conversation",
            "polythink.conversation.append_message",
            "polythink.conversation.load_conversation",
            "polythink.conversation.resume_interrupted",
            "polythink.conversation.Compaction",
            "polythink.conversation.EmptySummaryError",
        ),
    ),
    "stores": (
        "Caches and shared stores",
        (
            "polythink.backends.disk.DiskStore",
            "polythink.backends.redis.RedisCache",
            "polythink.backends.redis.RedisLimitStore",
            "polythink.backends.local.LocalBudgets",
            "polythink.capability_store.CapabilityStore",
        ),
    ),
    "observability": (
        "Metrics and the HTTP layer",
        (
            "polythink.dashboard.MetricsEndpoint",
            "polythink.http.default_ssl_context",
            "polythink.http.HEAD_BYTES",
            "polythink.http.HTTP_LOGGERS",
        ),
    ),
    "simulator": (
        "Simulator",
        (
            "polythink.simulator.Simulator",
            "polythink.simulator.Settings",
            "polythink.simulator.faults.Fault",
            "polythink.simulator.faults.FaultPlan",
        ),
    ),
}
"""Names of the package's public modules, outside ``polythink.__all__``, that the guides use:
rendered on the reference page of the same slug (after its ``__all__`` names)."""

WIRES = {
    "openai_chat": "OpenAI Chat Completions",
    "openai_responses": "OpenAI Responses",
    "anthropic": "Anthropic Messages",
    "gemini": "Gemini generateContent",
    "bedrock": "Bedrock InvokeModel (Anthropic Messages)",
    "bedrock_converse": "Bedrock Converse",
    "vertex": "Vertex AI generateContent (Gemini)",
    "vertex_anthropic": "Vertex AI rawPredict (Anthropic Messages)",
}
"""How the provider pages name each transport; a wire not listed shows its id."""

CLOUD_CREDENTIALS = {
    "aws": "SigV4 with the AWS credential chain",
    "google": "OAuth with Application Default Credentials",
    "azure": "Entra ID",
}
"""What signs a cloud provider's calls when no key is set (``ProviderProfile.cloud``)."""

REASONING_FIELDS = {
    "effort": "`reasoning_effort`",
    "openrouter": "`reasoning: {effort, enabled}`",
    "thinking_type": "`thinking.type` + `reasoning_effort`",
    "qwen": "`enable_thinking` + `thinking_budget`",
    "vllm": "`chat_template_kwargs.enable_thinking` + `reasoning_effort`",
    "responses": "`reasoning.effort`",
    "anthropic": "`thinking` / `output_config.effort`",
    "gemini": "`generationConfig.thinkingConfig` (`thinkingBudget` or `thinkingLevel`)",
    "converse": "`additionalModelRequestFields` (each vendor's own field)",
}
"""The request fields each reasoning dialect (``ProviderProfile.reasoning_wire``) sends."""

THINKING_STYLES = {
    "manual": "`thinking.budget_tokens`",
    "adaptive": "adaptive + `output_config.effort`",
    "budget": "budget in tokens",
    "level": "`thinkingLevel`",
    "effort": "`enable_thinking` + `reasoning_effort`",
}


# ---------------------------------------------------------------------------- reference


def _defining_module(package: Any, name: str) -> str:
    """The module whose ``__all__`` defines ``name`` as exported by ``package``."""
    value = getattr(package, name)
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.startswith("polythink") and not name.startswith("__"):
        return module
    for candidate in sorted(sys.modules):
        if not candidate.startswith("polythink.") or candidate == package.__name__:
            continue
        found = sys.modules[candidate]
        if name in getattr(found, "__all__", ()) and getattr(found, name, None) is value:
            return candidate
    return package.__name__


def public_names() -> dict[str, list[str]]:
    """Every documented identifier (``polythink.Client``, ``polythink.errors.AuthError``) by
    reference page slug, in ``__all__`` order. Errors are documented where they are defined,
    in ``polythink.errors``, whichever module re-exports them."""
    import polythink
    import polythink.errors

    pages: dict[str, list[str]] = {}
    for name in polythink.errors.__all__:
        pages.setdefault("errors", []).append(f"polythink.errors.{name}")
    for name in polythink.__all__:
        if name in polythink.errors.__all__:
            continue
        module = _defining_module(polythink, name)
        slug = API_PAGES.get(module, (module.removeprefix("polythink.").replace(".", "-"), ""))[0]
        pages.setdefault(slug, []).append(f"polythink.{name}")
    for slug, (_, identifiers) in SUPPORTING.items():
        pages.setdefault(slug, []).extend(identifiers)
    return pages


def api_title(slug: str) -> str:
    for page, title in (*API_PAGES.values(), *((s, t) for s, (t, _) in SUPPORTING.items())):
        if page == slug:
            return title
    return f"`polythink.{slug.replace('-', '.')}`"


def api_page(slug: str, identifiers: Sequence[str]) -> str:
    """The Markdown of one reference page: a heading, then each identifier's docstring."""
    lines = [f"# {api_title(slug)}", ""]
    if slug == "errors":
        lines += [
            "Every error polythink raises on purpose. When each is raised, and what retry "
            "and failover do with it: [Errors and what raises them](../errors.md).",
            "",
        ]
    for identifier in identifiers:
        lines += [f"::: {identifier}", ""]
    return "\n".join(lines)


def api_nav(pages: dict[str, list[str]]) -> list[dict[str, str]]:
    order = list(dict.fromkeys([*(slug for slug, _ in API_PAGES.values()), *SUPPORTING]))
    slugs = sorted(pages, key=lambda s: (order.index(s) if s in order else len(order), s))
    return [{api_title(slug).strip("`"): f"{API_DIR}/{slug}.md"} for slug in slugs]


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`]+)`")


_LITERAL = re.compile(r"(\S)( ?)::\n(?=\n)")


def markdown_roles(text: str, documented: set[str]) -> str:
    """``text`` with each Sphinx role of a docstring (``:class:`~polythink.Client```) as an
    inline code span of the name it shows (the last dotted part after ``~``, else the whole
    target), linked to its reference when the target is ``documented``; and a paragraph
    ending in reStructuredText's ``::`` (an indented literal block follows, which Markdown
    shows as code too) ending in ``:``."""

    def replace(match: re.Match[str]) -> str:
        short, target = match[1] == "~", match[2].strip()
        shown = target.rsplit(".", 1)[-1] if short else target
        return f"[`{shown}`][{target}]" if target in documented else f"`{shown}`"

    text = _LITERAL.sub(lambda m: f"{m[1]}{'' if m[2] else ':'}\n", text)
    return _ROLE.sub(replace, text)


# ---------------------------------------------------------------------------- CLI


def _cli_parser() -> argparse.ArgumentParser:
    cli = importlib.import_module("polythink.cli")
    parser: argparse.ArgumentParser = cli.build_parser()
    return parser


def _checkout_module(name: str) -> Any:
    """A module of the checkout's ``benchmarks`` package (MkDocs restores ``sys.path`` after
    loading a hook, so the checkout is put on it when a page needs it)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(name)


def _bench_parser() -> argparse.ArgumentParser | None:
    try:
        run = _checkout_module("benchmarks.run")
    except ImportError:
        return None
    parser: argparse.ArgumentParser = run._parser()
    return parser


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=96)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(parser.prog, width=96)
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        name = formatter._format_action_invocation(action)
        help_text = action.help or ""
        choices = [str(c) for c in action.choices or ()]
        if choices and action.metavar and not all(c in help_text for c in choices):
            help_text += " (one of " + ", ".join(f"`{c}`" for c in choices) + ")"
        default = action.default
        if isinstance(default, Path) and default.is_relative_to(ROOT):
            default = default.relative_to(ROOT)
        shown = (
            f"`{default}`"
            if default is not None and default is not argparse.SUPPRESS and action.nargs != 0
            else ""
        )
        if action.required:
            shown = "required"
        rows.append(f"| `{_cell(name)}` | {shown} | {_cell(help_text)} |")
    return rows


def _command_section(parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{parser.prog}`", ""]
    if parser.description:
        lines += [parser.description, ""]
    lines += ["```text", _usage(parser), "```", ""]
    rows = _option_rows(parser)
    if rows:
        lines += ["| option | default | what it does |", "|---|---|---|", *rows, ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name != "bench":
                    lines += _command_section(sub, level + 1)
    return lines


def cli_page() -> str:
    """The command-line reference: every command, its usage and each option's help."""
    parser = _cli_parser()
    lines = [
        "# Command line",
        "",
        "Generated from the `polythink` argument parser when this site was built, so it "
        "lists exactly what the installed command accepts. Bad arguments print one line to "
        "stderr and exit 2; `polythink COMMAND --help` prints the same text in a terminal. "
        "What each command is for, with examples: [The command line](../guides/cli.md).",
        "",
    ]
    lines += _command_section(parser, 1)[2:]
    bench = _bench_parser()
    if bench is not None:
        lines += [
            "## `polythink bench`",
            "",
            "Runs the benchmark suite of a source checkout (`benchmarks/`); its arguments go "
            "to the suite's own parser. See [Benchmarks](../benchmarks/index.md).",
            "",
        ]
        lines += _command_section(bench, 2)[2:]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- providers


def providers_page() -> str:
    """Every provider id: its wire, reasoning fields, default endpoint and key variables."""
    from polythink.providers import PROVIDERS

    lines = [
        "# Providers",
        "",
        "Generated from `polythink.PROVIDERS` when this site was built. The provider id is "
        "the first argument of [`Source`][polythink.Source]; the wire is the transport that "
        "speaks for it; the reasoning fields are what a tier becomes on that wire (which "
        "fields a given model takes is in [Models](models.md)). A key is read from the first "
        "variable of the list that is set, unless `api_key=` is given.",
        "",
        "| id | wire | reasoning fields | default base URL | key from |",
        "|---|---|---|---|---|",
    ]
    listed = _catalogues_with_models()
    for profile in PROVIDERS.values():
        wire = WIRES.get(profile.wire, f"`{profile.wire}`")
        fields = (
            REASONING_FIELDS.get(profile.reasoning_wire, f"`{profile.reasoning_wire}`")
            if profile.reasoning_wire
            else "none known"
        )
        keys = ", ".join(f"`{k}`" for k in profile.api_key_env) or "none"
        if profile.cloud in CLOUD_CREDENTIALS:
            credentials = f"[{CLOUD_CREDENTIALS[profile.cloud]}](clouds.md)"
            keys = f"{keys}, else {credentials}" if profile.api_key_env else credentials
        elif not profile.key_required:
            keys += " (optional)"
        models = (
            f"[`{profile.id}`](models.md#{_anchor(profile.serves)})"
            if profile.serves in listed
            else f"`{profile.id}`"
        )
        lines.append(f"| {models} | {wire} | {fields} | `{profile.base_url}` | {keys} |")
    lines += [
        "",
        "`openai-responses` serves the `openai` models on the Responses API with the same key, "
        "and `openrouter-responses` OpenRouter's; an `openai` source sends a call that a model "
        "takes only on the Responses API there by itself. `register_provider` adds a profile "
        "of your own (an OpenAI-compatible gateway, for example) at run time. What each "
        "provider does differently on the wire: [Provider specifics](specifics.md); the "
        "clouds' regions, projects and credentials: [Clouds](clouds.md).",
        "",
    ]
    return "\n".join(lines)


def _catalogues_with_models() -> set[str]:
    from polythink.reasoning.capabilities import all_capabilities
    from polythink.reasoning.families import all_families

    found = {c.provider for c in all_capabilities() if c.provider}
    return found | {f.fields["provider"] for f in all_families() if "provider" in f.fields}


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _tiers(efforts: Iterable[Any]) -> str:
    return " ".join(e.value for e in efforts)


def _lifecycle(cap: Any, today: datetime.date) -> str:
    from polythink.reasoning.lifecycle import status

    state = status(cap, today)
    if state == "current":
        return "current"
    if state == "retired":
        text = f"retired {cap.shutdown}"
    elif cap.shutdown:
        text = f"deprecated, shuts down {cap.shutdown}"
    else:
        text = f"deprecated {cap.deprecated}"
    return text + (f" → `{cap.replacement}`" if cap.replacement else "")


def _switch_off(cap: Any) -> str:
    if not cap.reasons:
        return "does not reason"
    return "yes" if cap.can_disable else "no"


def _tokens(value: int | None) -> str:
    """``400,000`` as ``400K``, ``1,050,000`` as ``1.05M``: compact, and exact."""
    if not value:
        return ""
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if value >= size and (value * 100) % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value:,}"


def models_page(today: datetime.date | None = None) -> str:
    """The model registry by provider: tiers, default, switch-off, lifecycle and evidence."""
    from polythink.providers import PROVIDERS
    from polythink.reasoning.capabilities import all_capabilities
    from polythink.reasoning.families import all_families

    day = today or datetime.datetime.now(datetime.UTC).date()
    caps = all_capabilities()
    families = all_families()
    catalogues = list(dict.fromkeys([p.serves for p in PROVIDERS.values()]))
    catalogues += sorted({c.provider or "other" for c in caps} - set(catalogues))
    lines = [
        "# Models",
        "",
        f"Generated from the registry shipped with polythink {_version()} when this site was "
        f"built; lifecycle as of {day.isoformat()}. `polythink models --evidence` prints the "
        "same, merged with what your capability store learned or imported.",
        "",
        "- **tiers**: the reasoning tiers the model accepts, cheapest first; `auto` means it "
        "reasons at a strength it picks, with no tiers to choose. A tier it lacks is mapped "
        "by the source's `effort_fallback` ([how](../guides/reasoning.md)).",
        "- **default**: what the model does when no reasoning field is sent.",
        '- **off**: whether `reasoning_effort="none"` can switch reasoning off.',
        "- **context**, **output**: the context window and the most output tokens, where "
        "documented (`K` = 1,000 tokens).",
        "- **checked**: the day the entry was last compared with its sources; the evidence "
        "under each table says where each fact comes from, with its date.",
        "",
    ]
    for catalogue in catalogues:
        members = [c for c in caps if (c.provider or "other") == catalogue]
        rules = [f for f in families if f.fields.get("provider") == catalogue]
        if not members and not rules:
            continue
        served = [p.id for p in PROVIDERS.values() if p.serves == catalogue]
        lines += [f"## {catalogue}", ""]
        if served:
            wires = ", ".join(
                f"`{pid}` ({WIRES.get(PROVIDERS[pid].wire, PROVIDERS[pid].wire)})" for pid in served
            )
            lines += [f"Served by {wires}.", ""]
        if members:
            styled = any(c.thinking for c in members)
            lines += [
                "| model | tiers | default | off |"
                + (" style |" if styled else "")
                + " context | output | lifecycle | checked |",
                "|---|---|---|---|" + ("---|" if styled else "") + "--:|--:|---|---|",
            ]
            for cap in members:
                name = f"`{cap.model}`"
                if cap.aliases:
                    name += " (" + ", ".join(f"`{a}`" for a in cap.aliases) + ")"
                default = cap.default_effort.value if cap.default_effort else ""
                style = f" {THINKING_STYLES.get(cap.thinking or '', '')} |" if styled else ""
                lines.append(
                    f"| {name} | {_tiers(cap.supported_efforts)} | {default} | "
                    f"{_switch_off(cap)} |{style} {_tokens(cap.context_window)} | "
                    f"{_tokens(cap.max_output_tokens)} | {_lifecycle(cap, day)} | "
                    f"{cap.checked or ''} |"
                )
            lines += ["", '??? note "Evidence"', ""]
            for cap in members:
                lines.append(f"    - `{cap.model}`: {_cell(cap.evidence) or 'none recorded'}")
            lines.append("")
        if rules:
            lines += [
                f"Models of {catalogue} the registry does not list yet get their family's "
                'rules (evidence "inferred from family …"), matched in order on the '
                "normalised id:",
                "",
                "| family | matches | tiers | default | evidence |",
                "|---|---|---|---|---|",
            ]
            for family in rules:
                cap = family.capability(family.name)
                default = cap.default_effort.value if cap.default_effort else ""
                lines.append(
                    f"| {family.name} | `{_cell(family.pattern.pattern)}` | "
                    f"{_tiers(cap.supported_efforts)} | {default} | {_cell(family.evidence)} |"
                )
            lines.append("")
    return "\n".join(lines)


def _version() -> str:
    import polythink

    return polythink.__version__


# ---------------------------------------------------------------------------- markers


def env_fields_table() -> str:
    """The fields a source takes from ``{SCOPE}__{PROVIDER}__{N}__{FIELD}`` variables."""
    from polythink import config

    fields: dict[str, str] = config._FIELDS
    lines = ["| `FIELD` | `Source` keyword / TOML key |", "|---|---|"]
    for env_name, name in fields.items():
        lines.append(f"| `{env_name}` | `{name}` |")
    return "\n".join(lines)


def provider_keys_table() -> str:
    """Each provider's key variables, in the order they are tried."""
    from polythink.providers import PROVIDERS

    lines = ["| provider | key variables, tried in order | required |", "|---|---|---|"]
    for profile in PROVIDERS.values():
        keys = ", ".join(f"`{k}`" for k in profile.api_key_env) or "none"
        required = "yes" if profile.key_required else "no (a server of your own)"
        lines.append(f"| `{profile.id}` | {keys} | {required} |")
    return "\n".join(lines)


def source_fields_table() -> str:
    """Every ``Source`` field with its default."""
    from polythink import Source

    lines = ["| keyword | default |", "|---|---|"]
    for field in dataclasses.fields(Source):
        if field.name == "_":
            continue
        if field.default is not dataclasses.MISSING:
            default = f"`{field.default!r}`"
        elif field.default_factory is not dataclasses.MISSING:
            default = f"`{field.default_factory()!r}`"
        else:
            default = "required (positional)"
        lines.append(f"| `{field.name}` | {default} |")
    return "\n".join(lines)


def error_tree() -> str:
    """The error classes as a tree, each under the classes it derives from."""
    import polythink.errors as errors

    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    lines: list[str] = []

    def walk(cls: type, depth: int) -> None:
        others = [b.__name__ for b in cls.__bases__ if b.__name__ not in names and b is not object]
        extra = f" (also a `{'`, `'.join(others)}`)" if others and depth else ""
        lines.append(
            f"{'    ' * depth}- [`{cls.__name__}`][polythink.errors.{cls.__name__}]{extra}"
        )
        for sub in classes:
            if cls in sub.__bases__ and _primary(sub, names) is cls:
                walk(sub, depth + 1)

    names = {c.__name__ for c in classes}
    walk(errors.PolythinkError, 0)
    return "\n".join(lines)


def _primary(cls: type, names: set[str]) -> type | None:
    return next((b for b in cls.__bases__ if b.__name__ in names), None)


MARKERS: dict[str, Callable[[], str]] = {
    "env-fields": env_fields_table,
    "provider-keys": provider_keys_table,
    "source-fields": source_fields_table,
    "error-tree": error_tree,
}
"""``<!-- polythink:NAME -->`` in a page is replaced by ``MARKERS[NAME]()``."""

_MARKER = re.compile(r"<!-- polythink:([a-z-]+) -->")


def expand_markers(markdown: str, where: str) -> str:
    """Replace each marker of ``markdown``; an unknown one fails the build, naming ``where``."""

    def expand(match: re.Match[str]) -> str:
        render = MARKERS.get(match[1])
        if render is None:
            raise ValueError(f"{where}: unknown marker {match[0]}; known: {', '.join(MARKERS)}")
        return render()

    return _MARKER.sub(expand, markdown)


# ---------------------------------------------------------------------------- benchmarks

RESULTS = ROOT / "benchmarks" / "results"


def benchmarks_page() -> str:
    """``benchmarks/README.md``: how the suite measures and what it found, with the latest
    tables on their own page."""
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    start = text.find("<!-- results:start -->")
    end = text.find("<!-- results:end -->")
    if start != -1 and end != -1:
        text = (
            text[:start]
            + "The tables and charts of the latest full run: [Latest results](results.md).\n"
            + text[end + len("<!-- results:end -->") :]
        )
    return text.replace("# polythink benchmarks", "# Benchmarks", 1)


def benchmark_charts() -> list[Path]:
    """The charts of the latest full run, as its JSON lists them, that are in the checkout."""
    data = json.loads((RESULTS / "full.json").read_text(encoding="utf-8"))
    charts = [RESULTS / Path(p).name for p in data.get("charts", [])]
    return [p for p in charts if p.is_file()]


def benchmark_results_page() -> str:
    """The tables of ``benchmarks/results/full.json`` and its charts."""
    report = _checkout_module("benchmarks.report")
    data = json.loads((RESULTS / "full.json").read_text(encoding="utf-8"))
    lines = [
        "# Latest results",
        "",
        "Rendered from `benchmarks/results/full.json` (the last full `polythink bench` run "
        "committed) when this site was built; ratios are within that one run. How to read "
        "them: [Benchmarks](index.md).",
        "",
        report.markdown(data),
        "## Charts",
        "",
    ]
    for chart in benchmark_charts():
        lines += [f"![{chart.stem}]({chart.name})", ""]
    return "\n".join(lines)


def changelog_page() -> str:
    return (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def generated_pages() -> dict[str, str]:
    """Every generated page by its path under ``docs/``."""
    pages = {
        f"{API_DIR}/{slug}.md": api_page(slug, names) for slug, names in public_names().items()
    }
    pages["reference/cli.md"] = cli_page()
    pages["providers/index.md"] = providers_page()
    pages["providers/models.md"] = models_page()
    pages["benchmarks/index.md"] = benchmarks_page()
    pages["benchmarks/results.md"] = benchmark_results_page()
    pages["changelog.md"] = changelog_page()
    return pages


# ---------------------------------------------------------------------------- MkDocs events


def on_config(config: Any) -> Any:
    """Put the reference pages, one per defining module, under Reference > API in the nav."""
    for section in config["nav"]:
        if isinstance(section, dict) and "Reference" in section:
            for entry in section["Reference"]:
                if isinstance(entry, dict) and "API" in entry:
                    entry["API"] = api_nav(public_names())
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages and the benchmark charts to the site's files."""
    from mkdocs.structure.files import File

    for path, content in generated_pages().items():
        files.append(File.generated(config, path, content=content))
    for chart in benchmark_charts():
        files.append(File.generated(config, f"benchmarks/{chart.name}", abs_src_path=str(chart)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand the markers of a hand-written page."""
    return expand_markers(markdown, page.file.src_uri)
