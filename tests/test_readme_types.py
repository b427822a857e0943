"""The Python examples of the README and of the documentation pages type-check under
``mypy --strict`` as written.

One mypy run covers every ``python`` block of the README that is a whole module (it begins
with an import; shorter blocks continue an example above and are not programs on their
own), every ``python`` block of ``docs/**/*.md`` (each a whole module, see
``tests/doc_blocks.py``), plus a file of known misuses whose errors prove the stream events
are typed per kind (not ``Any``) and ``Response.parsed`` is the ``response_format``'s model
class, with correct uses that must pass (``StreamInterruptedError.partial`` is a
``Response``; ``parsed`` of the ``done`` event is the model too; a dict format's ``parsed``
is ``Any``), and that the synchronous client and a middleware's ``call_next`` are typed as
strictly as the async client.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import doc_blocks

README = Path(__file__).resolve().parent.parent / "README.md"

MISUSE = """\
from polythink import Client


async def misuse(client: Client) -> None:
    async for event in client.stream([{"role": "user", "content": "hi"}]):
        if event.type == "text":
            event.response.usage
        elif event.type == "done":
            event.text.upper()


# Correct use, no error: a StreamInterruptedError's partial is a Response, never None.
from polythink import Response
from polythink.errors import StreamInterruptedError


def partial_of(error: StreamInterruptedError) -> Response:
    return error.partial


# The synchronous client has the async one's keywords and typed events; a layer's call_next
# takes a Request.
from polythink import CompleteNext, Passthrough, Request, SyncClient


def sync_misuse(client: SyncClient) -> None:
    client.complete([{"role": "user", "content": "hi"}], max_token=5)
    for event in client.stream([{"role": "user", "content": "hi"}]):
        if event.type == "text":
            event.response.usage


class Layer(Passthrough):
    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next({"messages": []})


# Response.parsed is the model class, not Any: a misspelt field is an error, the rest pass.
from pydantic import BaseModel


class Invoice(BaseModel):
    number: str


async def structured(client: Client) -> str:
    response = await client.complete([{"role": "user", "content": "hi"}], response_format=Invoice)
    response.parsed.numbr
    async for event in client.stream([], response_format=Invoice):
        if event.type == "done":
            return event.response.parsed.number
    decoded = await client.complete([], response_format={"type": "json_object"})
    return str(decoded.parsed["number"]) + response.parsed.number


def sync_structured(client: SyncClient) -> str:
    return client.complete([], response_format=Invoice).parsed.number
"""


def test_the_readme_python_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    found = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    blocks = [block for block in found if block.startswith(("import ", "from "))]
    # The README's quick start streams; the rest of the examples may live in the docs.
    assert any("async for event in client.stream(" in block for block in blocks)
    for i, block in enumerate(blocks):
        (tmp_path / f"readme_{i}.py").write_text(block, encoding="utf-8")
    pages = [b for b in doc_blocks.doc_blocks() if b.lang == "python"]
    assert len(pages) >= 20
    for page in pages:
        name = re.sub(r"\W", "_", page.id)
        first = page.code.lstrip().split(None, 1)[0]
        assert first in ("import", "from", "#", '"""'), f"{page.id} is not a whole module"
        (tmp_path / f"{name}.py").write_text(page.code, encoding="utf-8")
    (tmp_path / "misuse.py").write_text(MISUSE, encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    # Notes (the overloads of complete that a misspelt keyword matches none of) left out.
    errors = sorted(
        line.replace(str(tmp_path) + "/", "")
        for line in result.stdout.splitlines()
        if line and ": note: " not in line
    )
    assert errors == [
        'misuse.py:27: error: No overload variant matches argument types "list[dict[str, '
        'str]]", "int"  [call-overload]',
        'misuse.py:27: error: Unexpected keyword argument "max_token"; did you mean '
        '"max_tokens"?  [call-overload]',
        'misuse.py:30: error: "None" has no attribute "usage"  [attr-defined]',
        'misuse.py:35: error: Argument 1 has incompatible type "dict[str, list[Never]]"; '
        'expected "Request"  [arg-type]',
        'misuse.py:48: error: "Invoice" has no attribute "numbr"; maybe "number"?  [attr-defined]',
        'misuse.py:7: error: "None" has no attribute "usage"  [attr-defined]',
        'misuse.py:9: error: "None" has no attribute "upper"  [attr-defined]',
    ]
