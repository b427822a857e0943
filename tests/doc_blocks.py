"""The fenced code blocks of the README and of the documentation pages (``docs/**/*.md``).

The tests of ``tests/test_readme.py`` and ``tests/test_readme_types.py`` read them here. The
documentation follows these rules, which those tests hold it to:

- Every ``python`` block of a page is a whole module: it begins with its imports (or a
  docstring or comment before them), so it type-checks under ``mypy --strict`` as written.
- A block that does something at its top level (``anyio.run(main)``, a ``with SyncClient``
  block, a ``print``) is a *program*: the tests run it with every ``Source`` pointed at the
  simulator. A block that only defines functions and classes is type-checked. A program that
  calls a gateway already running at :data:`GATEWAY` (``polythink serve``'s address) is run by
  ``tests/test_readme_gateway.py``, against a gateway it serves from the guide's own file.
- A ``text`` block whose title starts with ``Output`` right after a program is what that
  program prints against the simulator, exactly.
- A ``console`` block holds ``$ polythink ...`` commands, each followed by what it prints;
  the tests run the command in-process and compare. In ``sh`` blocks, every ``polythink``
  command parses with the real parser, every ``make`` target exists, and every
  ``pip install 'polythink[extra]'`` names an extra of ``pyproject.toml``.
- A ``toml`` block is a configuration file that ``Client.from_toml`` reads, or, with a
  ``[[route]]``, ``[[tenant]]`` or ``[serve]`` table, one that ``polythink serve`` reads. One
  whose title names another program's file (``title="~/.codex/config.toml"``) is valid TOML.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

GATEWAY = "http://127.0.0.1:4000"
"""Where the gateway guide's clients find ``polythink serve`` (its default address)."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)(?P<info>[^\n`]*)$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its language, the rest of its info string, its text."""

    page: str
    line: int
    lang: str
    info: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def is_program(self) -> bool:
        """Whether the block does something at its top level (see the module docstring)."""
        if self.lang != "python":
            return False
        tree = ast.parse(self.code)
        defining = (
            ast.Import,
            ast.ImportFrom,
            ast.FunctionDef,
            ast.AsyncFunctionDef,
            ast.ClassDef,
            ast.Assign,
            ast.AnnAssign,
        )
        body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
        return any(not isinstance(node, defining) for node in body)

    @property
    def is_output(self) -> bool:
        title = re.search(r'title="([^"]*)"', self.info)
        return self.lang == "text" and title is not None and title[1].startswith("Output")


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of the Markdown file at ``path``, in order, dedented."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent = match["indent"]
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        found.append(
            Block(page, i + 1, match["lang"], match["info"].strip(), "\n".join(body) + "\n")
        )
        i = end + 1
    return found


@cache
def doc_pages() -> tuple[Path, ...]:
    """Every hand-written page of the documentation site."""
    return tuple(sorted(DOCS.rglob("*.md")))


@cache
def doc_blocks() -> tuple[Block, ...]:
    """Every fenced block of every documentation page."""
    return tuple(block for page in doc_pages() for block in blocks(page))


def block_with(marker: str, lang: str = "python") -> str:
    """The one ``lang`` block holding ``marker``: the README's if it has one, else the
    documentation's, so a README example keeps its test when it moves into the docs.

    Raises:
        AssertionError: no block, or more than one in the README or in the docs, holds it.
    """
    for found in (blocks(README), doc_blocks()):
        matching = [b for b in found if b.lang == lang and marker in b.code]
        if matching:
            assert len(matching) == 1, f"{marker!r} is in {[b.id for b in matching]}"
            return matching[0].code
    raise AssertionError(f"no {lang} block of the README or the docs holds {marker!r}")


def _all_programs() -> list[tuple[Block, Block | None]]:
    found = []
    for page in doc_pages():
        page_blocks = blocks(page)
        for i, block in enumerate(page_blocks):
            if block.is_program:
                after = page_blocks[i + 1] if i + 1 < len(page_blocks) else None
                found.append((block, after if after is not None and after.is_output else None))
    return found


def programs() -> list[tuple[Block, Block | None]]:
    """Each program of the documentation with the output block that follows it, if any,
    except those that call a running gateway (:func:`gateway_programs`)."""
    return [(b, out) for b, out in _all_programs() if GATEWAY not in b.code]


def gateway_programs() -> list[tuple[Block, Block | None]]:
    """The programs that call a gateway already running at :data:`GATEWAY`."""
    return [(b, out) for b, out in _all_programs() if GATEWAY in b.code]
