"""The documentation's generated pages say what the code and data they come from say.

``docs/hooks.py`` renders them when MkDocs builds the site; its page functions are pure, so
these tests call them directly, without MkDocs (the build itself, ``make docs``, runs in
``.ci/run``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

import polythink
import polythink.errors
from polythink.cli import build_parser
from polythink.providers import PROVIDERS
from polythink.reasoning import all_capabilities
from tests import doc_blocks

ROOT = doc_blocks.ROOT


def _load_hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load_hooks()


def _rows(page: str, first_cell: str, *, prefix: bool = False) -> list[list[str]]:
    """The cells of the table rows of ``page`` whose first cell is ``first_cell`` (with
    ``prefix``: starts with it and a space, as a model with its aliases)."""
    rows = []
    for line in page.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and (cells[0] == first_cell or (prefix and cells[0].startswith(first_cell + " "))):
            rows.append(cells)
    return rows


def test_every_public_name_has_one_reference_entry() -> None:
    pages = hooks.public_names()
    rendered = [
        line.removeprefix("::: ")
        for slug, names in pages.items()
        for line in hooks.api_page(slug, names).splitlines()
        if line.startswith("::: ")
    ]
    errors = {f"polythink.errors.{n}" for n in polythink.errors.__all__}
    others = {f"polythink.{n}" for n in polythink.__all__ if n not in polythink.errors.__all__}
    supporting = {n for _, names in hooks.SUPPORTING.values() for n in names}
    assert sorted(rendered) == sorted(errors | others | supporting)
    assert "polythink.errors.RateLimitedError" in pages["errors"]
    assert pages["client"][:2] == ["polythink.Client", "polythink.SyncClient"]
    assert "polythink.conversation.save_conversation" in pages["conversations"]
    # A module without a title of its own still gets a page (polythink.batch has one).
    assert pages["batch"] == ["polythink.BatchJob", "polythink.BatchStatus"]
    assert hooks.api_title("batch") == "Batches"
    # The nav lists one entry per page, by title.
    nav = hooks.api_nav(pages)
    assert {"Errors": "reference/api/errors.md"} in nav
    assert len(nav) == len(pages)


def test_a_name_of_a_module_without_a_page_gets_a_page_of_its_own() -> None:
    assert hooks.api_title("serve-routes") == "`polythink.serve.routes`"
    assert hooks.api_page("serve-routes", ["polythink.Gateway"]).splitlines() == [
        "# `polythink.serve.routes`",
        "",
        "::: polythink.Gateway",
    ]


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name != "bench":
                    found += _parsers(sub)
    return found


def test_the_cli_page_has_every_command_and_option_of_the_parser() -> None:
    page = hooks.cli_page()
    parsers = _parsers(build_parser())
    progs = [p.prog for p in parsers]
    # Every command of today's parser (a command added later is checked the same way).
    assert {
        "polythink demo",
        "polythink resolve",
        "polythink models",
        "polythink models forget",
        "polythink models import",
        "polythink simulate",
    } <= set(progs)
    for parser in parsers[1:]:
        assert f"## `{parser.prog}`" in page or f"### `{parser.prog}`" in page
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in page, (parser.prog, option)
    assert "## `polythink bench`" in page
    (row,) = _rows(page, "`--policy {nearest,error,drop}`")
    assert row[1:] == ["`nearest`", "for a tier the model does not accept (default: nearest)"]
    row, *_ = _rows(page, "`--provider P`")  # resolve's, the first
    assert row[1] == "required"
    assert row[2].startswith("openai, openai-responses")
    (row,) = _rows(page, "`--out OUT`")
    assert row[1] == "`benchmarks/results`"


def test_the_providers_page_has_a_row_per_profile() -> None:
    page = hooks.providers_page()
    for profile in PROVIDERS.values():
        rows = _rows(page, f"[`{profile.id}`](models.md#{profile.serves})") or _rows(
            page, f"`{profile.id}`"
        )
        assert len(rows) == 1, profile.id
    (anthropic,) = _rows(page, "[`anthropic`](models.md#anthropic)")
    assert anthropic[1:] == [
        "Anthropic Messages",
        "`thinking` / `output_config.effort`",
        "`https://api.anthropic.com/v1`",
        "`ANTHROPIC_API_KEY`",
    ]
    (vllm,) = _rows(page, "`vllm`")
    assert vllm[-1] == "`VLLM_API_KEY` (optional)"
    # Every wire is named, and a cloud says what signs its calls without a key.
    wires = {p.wire for p in PROVIDERS.values()}
    assert wires <= set(hooks.WIRES), wires - set(hooks.WIRES)
    (bedrock,) = _rows(page, "`bedrock`")
    assert bedrock[1] == "Bedrock InvokeModel (Anthropic Messages)"
    assert bedrock[-1] == (
        "`AWS_BEARER_TOKEN_BEDROCK`, else [SigV4 with the AWS credential chain](clouds.md)"
    )
    (vertex_claude,) = _rows(page, "`vertex-anthropic`")
    assert vertex_claude[-1] == "[OAuth with Application Default Credentials](clouds.md)"


def test_the_models_page_has_each_models_tiers_lifecycle_and_evidence() -> None:
    page = hooks.models_page(today=datetime.date(2026, 12, 4))
    for cap in all_capabilities():
        assert len(_rows(page, f"`{cap.model}`", prefix=True)) == 1, cap.model
        assert f"    - `{cap.model}`: " in page, cap.model
    (gpt5,) = _rows(page, "`gpt-5`")
    assert gpt5[1:] == [
        "minimal low medium high",
        "medium",
        "no",
        "400K",
        "128K",
        "deprecated, shuts down 2026-12-11 → `gpt-6.1-sol`",
        "2026-12-01",
    ]
    # Anthropic's table has a style column (manual budgets or adaptive thinking).
    (sonnet,) = _rows(page, "`claude-sonnet-5-5`")
    assert sonnet[1:5] == [
        "low medium high xhigh max",
        "high",
        "no",
        "adaptive + `output_config.effort`",
    ]
    assert sonnet[7] == "current"
    later = hooks.models_page(today=datetime.date(2026, 12, 11))
    assert _rows(later, "`gpt-5`")[0][6] == "retired 2026-12-11 → `gpt-6.1-sol`"
    assert "| GPT-6.2 | `^gpt-6-2-` | low medium high xhigh max | medium |" in page
    assert "## openai\n\nServed by `openai` (OpenAI Chat Completions), `openai-responses`" in page


def test_the_benchmark_pages_come_from_the_committed_results() -> None:
    report = hooks._checkout_module("benchmarks.report")
    data = json.loads((ROOT / "benchmarks" / "results" / "full.json").read_text())
    page = hooks.benchmark_results_page()
    assert report.markdown(data) in page
    charts = hooks.benchmark_charts()
    assert [c.name for c in charts] == [Path(p).name for p in data["charts"]]
    for chart in charts:
        assert f"![{chart.stem}]({chart.name})" in page
    narrative = hooks.benchmarks_page()
    assert narrative.startswith("# Benchmarks\n")
    assert "<!-- results:start -->" not in narrative
    assert "[Latest results](results.md)" in narrative


def test_markers_expand_and_an_unknown_one_fails_the_build() -> None:
    text = "a\n<!-- polythink:provider-keys -->\nb"
    expanded = hooks.expand_markers(text, "x.md")
    assert "| `openai` | `OPENAI_API_KEY` | yes |" in expanded
    assert "| `gemini` | `GEMINI_API_KEY`, `GOOGLE_API_KEY` | yes |" in expanded
    with pytest.raises(ValueError, match=r"x.md: unknown marker <!-- polythink:nope -->"):
        hooks.expand_markers("<!-- polythink:nope -->", "x.md")
    used = {
        name
        for page in doc_blocks.doc_pages()
        for name in re.findall(r"<!-- polythink:([a-z-]+) -->", page.read_text())
    }
    assert used == set(hooks.MARKERS)


def test_every_error_class_has_a_row_on_the_errors_page() -> None:
    page = (ROOT / "docs" / "reference" / "errors.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`")
        for line in page.splitlines()
        if line.startswith("| `") and line.count("|") >= 3
    }
    classes = {
        name
        for name in polythink.errors.__all__
        if isinstance(getattr(polythink.errors, name), type)
    }
    assert classes - rows == set()
    assert rows - classes == set()


def test_the_generated_tables_follow_the_code() -> None:
    fields = hooks.env_fields_table()
    assert "| `MODEL` | `model` |" in fields
    assert "| `REASONING_EFFORT` | `reasoning_effort` |" in fields
    sources = hooks.source_fields_table()
    assert "| `provider` | required (positional) |" in sources
    assert "| `effort_fallback` | `'nearest'` |" in sources
    assert "| `middleware` | `()` |" in sources
    tree = hooks.error_tree().splitlines()
    assert tree[0] == "- [`PolythinkError`][polythink.errors.PolythinkError]"
    assert (
        "        - [`ThinkingUnsupportedError`][polythink.errors.ThinkingUnsupportedError] "
        "(also a `ValueError`)"
    ) in tree
    assert len(tree) == len(
        [n for n in polythink.errors.__all__ if isinstance(getattr(polythink.errors, n), type)]
    )


def test_docstring_roles_become_code_and_links() -> None:
    documented = {"polythink.Client", "polythink.errors.AuthError"}
    text = (
        "Use :class:`~polythink.Client` or :meth:`Message.coerce`; raises "
        ":class:`polythink.errors.AuthError` (see :mod:`polythink.backends.share`)."
    )
    assert hooks.markdown_roles(text, documented) == (
        "Use [`Client`][polythink.Client] or `Message.coerce`; raises "
        "[`polythink.errors.AuthError`][polythink.errors.AuthError] (see "
        "`polythink.backends.share`)."
    )
    literal = "Shape::\n\n    [thinking]\n\nthen ::\n\n    x = 1\n"
    assert hooks.markdown_roles(literal, documented) == (
        "Shape:\n\n    [thinking]\n\nthen\n\n    x = 1\n"
    )


def test_every_nav_page_exists_or_is_generated() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r"([\w/-]+\.md)", config.split("\nnav:", 1)[1]))
    generated = set(hooks.generated_pages())
    written = {p.relative_to(ROOT / "docs").as_posix() for p in doc_blocks.doc_pages()}
    assert listed <= generated | written
    assert written <= listed
    assert not generated & written


def test_the_changelog_leads_with_unreleased_then_this_version() -> None:
    import tomllib

    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert versions[:2] == ["Unreleased", polythink.__version__]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == polythink.__version__
    assert hooks.changelog_page() == text
