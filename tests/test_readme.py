"""The examples of the README and of the documentation pages are valid and run as written.

The examples that name real providers run against the simulator: ``polythink.Source`` is
replaced, while a block runs, by one that points each source at the simulator (the block's
``from polythink import Source`` picks it up), so the code users copy is the code tested.
"""

from __future__ import annotations

import gc
import json
import logging
import re
import shlex
from collections.abc import AsyncGenerator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import polythink
from polythink import (
    Client,
    CompleteNext,
    Effort,
    Passthrough,
    Request,
    Response,
    Source,
    StreamEvent,
    StreamNext,
)
from polythink.config import sources_from_toml
from polythink.conversation import load_conversation
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan
from tests import doc_blocks


def test_the_readme_toml_example_loads(tmp_path: Path) -> None:
    block = doc_blocks.block_with("[thinking]              # default for sources", "toml")
    path = tmp_path / "polythink.toml"
    path.write_text(block, encoding="utf-8")
    first, second = sources_from_toml(path)
    assert (first.provider, first.model, first.reasoning_effort) == (
        "openai",
        "gpt-5.5",
        Effort.HIGH,
    )
    # The [thinking] default applies to the source without its own effort.
    assert (second.provider, second.model, second.reasoning_effort) == (
        "anthropic",
        "claude-sonnet-5-5",
        Effort.MEDIUM,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [False, True])
async def test_the_readme_conversation_example_runs(tmp_path: Path, cut: bool) -> None:
    example = doc_blocks.block_with("async def session")
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    session = namespace["session"]
    path = tmp_path / "session.jsonl"
    with Simulator(Settings(answer_words=6)) as sim:
        if cut:
            sim.settings.faults = FaultPlan([Fault.reset(after_chunks=4)])
        source = Source(
            "anthropic", "claude-haiku-4-5", base_url=sim.base_url("anthropic"), api_key="sim"
        )
        async with Client([source]) as client:
            await session(client, str(path))  # type: ignore[operator]
    saved = load_conversation(path)
    roles = ["system", "user", "assistant", "user"] if cut else ["system", "user", "assistant"]
    assert [m.role for m in saved] == roles
    assert saved[2].metadata is not None
    assert (saved[2].metadata.provider, saved[2].metadata.interrupted) == ("anthropic", cut)
    assert saved[2].text().startswith("Simulated")
    if cut:
        assert saved[3].content == "continue"


def readme_block(marker: str) -> str:
    """The one ``python`` block that contains ``marker``: the README's, else the docs'."""
    return doc_blocks.block_with(marker)


class Attempts(Passthrough):
    """Added innermost to every source while a README block runs: what each attempt sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, list[str]]] = []

    def note(self, request: Request) -> None:
        assert request.resolution is not None
        self.sent.append(
            (
                request.resolution.applied_effort.value
                if request.resolution.applied_effort
                else "unset",
                dict(request.extra_headers or {}),
                [m.text() for m in request.messages],
            )
        )

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        self.note(request)
        return await call_next(request)

    def stream(self, request: Request, call_next: StreamNext) -> AsyncGenerator[StreamEvent, None]:
        self.note(request)
        return call_next(request)


PRICED_AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
"""The moment the documented outputs are priced at: some prices depend on the hour
(DeepSeek's off-peak discount, 16:30 to 00:30 UTC, in genai-prices), and the pages show
what a call costs at noon UTC."""


class _Noon(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return PRICED_AT if tz is not None else PRICED_AT.replace(tzinfo=None)


@pytest.fixture
def simulated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Attempts]:
    """Point every ``Source`` a README block builds at the simulator, as a reader does:
    ``POLYTHINK_BASE_URL_ROOT`` names it (no key needed then); prices at :data:`PRICED_AT`."""
    import polythink.pricing

    attempts = Attempts()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(polythink.pricing, "datetime", _Noon)
    for name in (
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "GROQ_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    with Simulator(Settings(answer_words=12)) as sim:
        monkeypatch.setenv("POLYTHINK_BASE_URL_ROOT", f"http://127.0.0.1:{sim.port}")

        def pointed(provider: str, model: str, **options: Any) -> Source:
            options["middleware"] = [*options.get("middleware", ()), attempts]
            return Source(provider, model, **options)

        monkeypatch.setattr(polythink, "Source", pointed)
        yield attempts


def run_block(block: str) -> None:
    exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


def test_the_readme_sync_quick_start_prints_what_the_async_one_does(
    simulated: Attempts, capsys: pytest.CaptureFixture[str]
) -> None:
    run_block(readme_block("async with Client(sources=sources) as client:"))
    printed = capsys.readouterr().out
    run_block(readme_block("with SyncClient(sources=sources) as client:"))
    assert capsys.readouterr().out == printed
    lines = printed.splitlines()
    assert lines[0].startswith("Simulated gpt-5.5 answer ")
    assert lines[1] == "high high observed"
    # Each run: the question, the stream at low, the tool turn and the answer after it.
    assert [tier for tier, _, _ in simulated.sent] == ["high", "low", "high", "high"] * 2


def test_the_readme_middleware_examples_run(
    simulated: Attempts, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="audit")
    run_block(readme_block("class AuditLog(Passthrough):"))
    printed = capsys.readouterr().out.splitlines()
    assert " to: Card [card] was declined. Why? " in printed[0]
    assert printed[1] == "guardrail"
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "audit"]
    first = {
        "customer": "c-42",
        "requested": "max",
        "source": "openrouter/openai/gpt-5.5",
        "applied": "xhigh",  # gpt-5.5 goes up to xhigh (registry: OAI-DOC-deploy)
        "cache_hit": False,
        "output_tokens": lines[0]["output_tokens"],
    }
    assert isinstance(first["output_tokens"], int)
    assert lines == [
        first,
        {**first, "cache_hit": True},
        {"customer": "c-42", "requested": None, "error": "RequestRejectedError"},
    ]
    # One attempt left the process: to the gateway, with the header, the card masked.
    assert simulated.sent == [
        ("xhigh", {"x-customer-id": "c-42"}, ["Card [card] was declined. Why?"])
    ]


@pytest.mark.anyio
async def test_the_readme_budget_example_runs() -> None:
    from polythink import Budget, BudgetExceededError
    from polythink.backends.local import LocalBudgets

    example = doc_blocks.block_with("BUDGETS = [")
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    ask = namespace["ask"]
    budgets = namespace["BUDGETS"]
    assert isinstance(budgets, list)
    assert [b.name for b in budgets] == ["day:account=openai", "month:model=gpt-5.5", "day:tag=*"]
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", base_url=sim.base_url("openai"), api_key="sim")
        store = LocalBudgets()
        async with Client([source], budgets=budgets, budget_store=store) as client:
            answer = await ask(client, "Why is the sky blue?", "acme")  # type: ignore[operator]
            assert answer.startswith("Simulated")
            # The customer's $2 runs low: at 80 % spent (past 0.5 + 0.5/2) two steps, to low.
            tag = next(b for b in budgets if isinstance(b, Budget) and b.tag == "*")
            (tally,) = await store.peek([tag.line("acme")])
            await store.reserve([tag.line("acme")], int(1.6e9) - tally.spent)
            (plan,) = await client.plan(reasoning_effort="high", max_tokens=4000, tag="acme")
            assert plan.applied is not None
            assert plan.applied.value == "low"
            assert await ask(client, "Why is the sky blue?", "acme") != ""  # type: ignore[operator]
            # Spent: the next call is refused before it is sent, and says until when.
            await store.reserve([tag.line("acme")], int(0.35e9))
            refused = await ask(client, "Why is the sky blue?", "acme")  # type: ignore[operator]
            assert isinstance(refused, str)
            assert refused.startswith("day:tag=* has $0.")
            # Another customer is not affected.
            assert (await ask(client, "Why?", "beta")).startswith("Simulated")  # type: ignore[operator]
    assert BudgetExceededError.__name__ in example


def test_the_readme_simulator_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    run_block(readme_block("Simulator(Settings(latency=0.05))"))
    applied, usage = capsys.readouterr().out.strip().split(" ", 1)
    assert applied == "high"
    assert usage.startswith("Usage(input_tokens=")


def _cloud_options(provider: str) -> dict[str, Any]:
    """The simulator's credentials for a README cloud source (the cloud library is imported
    by the test that needs it)."""
    from botocore.credentials import Credentials

    from polythink.simulator import clouds

    token = clouds.GOOGLE_TOKEN_PREFIX + "readme"
    return {
        "bedrock": {
            "credentials": Credentials(clouds.AWS_ACCESS_KEY_ID, clouds.AWS_SECRET_ACCESS_KEY)
        },
        "vertex": {"credentials": lambda: token},
        "azure": {"api_key": clouds.AZURE_API_KEY},
    }[provider]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name",
    [
        "claude_on_bedrock",
        "gpt_oss_on_bedrock",
        "gemini_on_vertex",
        "claude_on_vertex",
        "gpt_on_azure",
    ],
)
def test_the_quick_start_runs_unchanged_on_each_cloud(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("botocore")
    clouds_block = readme_block("claude_on_bedrock = Source(")
    namespace: dict[str, Any] = {}
    exec(compile(clouds_block, "README.md", "exec"), namespace)
    wanted: Source = namespace[name]
    quick_start = readme_block("async with Client(sources=sources) as client:")
    # The quick start with this one source in place of its list.
    program = re.sub(
        r"    sources = \[\n.*?\n    \]\n",
        f"    sources = [{name}]\n",
        quick_start,
        count=1,
        flags=re.S,
    )
    assert program != quick_start
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with Simulator(Settings(answer_words=6, deployments={"prod-chat": "gpt-5.5"})) as sim:
        import dataclasses

        pointed = dataclasses.replace(
            wanted,
            base_url=sim.base_url(wanted.provider),
            **_cloud_options(wanted.provider),
        )
        exec(compile(program, "README.md", "exec"), {"__name__": "readme", name: pointed})
        asked = dict(sim.stats.by_provider)
    lines = capsys.readouterr().out.splitlines()
    model = wanted.base_model or wanted.model
    assert lines[0].startswith(f"Simulated {model} answer ")
    assert lines[1].startswith("high high ")
    assert lines[-1].startswith(f"Simulated {model} answer ")
    # The first call, the stream, the tool call and the answer after it, all to the cloud.
    assert asked == {wanted.provider: 4}


@pytest.mark.anyio
async def test_the_readme_append_only_example_runs_without_a_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = readme_block("async def agent(steps: int) -> list[Message]:")
    namespace: dict[str, object] = {}
    with Simulator(Settings(tool_rounds=100, answer_words=4)) as sim:

        def pointed(provider: str, model: str, **options: Any) -> Source:
            return Source(
                provider, model, base_url=sim.base_url(provider), api_key="sim", **options
            )

        monkeypatch.setattr(polythink, "Source", pointed)
        exec(compile(example, "README.md", "exec"), namespace)
        messages = await namespace["agent"](4)  # type: ignore[operator]
    # A warning would be printed for a block dropped or a refusal retried: none was.
    assert capsys.readouterr().out.splitlines() == [
        "compaction gave up the reasoning of assistant turns 2, 4, 6, 8: the summary replaces "
        "the earlier turns, and the kept ones go without their thinking, which was bound to "
        "the conversation before it (a model would drop it, or refuse it)"
    ]
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert all(not m.reasoning_items for m in messages)


@pytest.mark.anyio
async def test_the_readme_service_tier_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    exec(compile(readme_block("async def summarise"), "README.md", "exec"), namespace)
    summarise = namespace["summarise"]
    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", base_url=sim.base_url("openai"), api_key="sim")
        async with Client([source]) as client:
            text = await summarise(client, "The sky is blue.")  # type: ignore[operator]
        assert text.startswith("Simulated gpt-5.5 answer")
        assert capsys.readouterr().out == "flex flex flex\n"
        sim.settings.no_capacity = ("flex",)
        bare = Source(
            "openai",
            "gpt-5.5",
            base_url=sim.base_url("openai"),
            api_key="sim",
            capacity_fallback=None,
            max_retries=0,
        )
        async with Client([bare]) as client:
            text = await summarise(client, "The sky is blue.")  # type: ignore[operator]
        assert text == "no flex capacity now (429); try later"


@pytest.mark.anyio
async def test_the_readme_batch_example_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace: dict[str, object] = {}
    exec(compile(readme_block("async def overnight"), "README.md", "exec"), namespace)
    overnight, morning = namespace["overnight"], namespace["morning"]
    moment = [1_790_000_000.0]
    path = str(tmp_path / "job.json")
    with Simulator(Settings(batch_clock=lambda: moment[0])) as sim:
        source = Source("openai", "gpt-5.5", base_url=sim.base_url("openai"), api_key="sim")
        async with Client([source]) as client:
            await overnight(client, ["Why is the sky blue?", "Why is grass green?"], path)  # type: ignore[operator]
        moment[0] += 86_400.0
        async with Client([source]) as client:
            await morning(client, path)  # type: ignore[operator]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:3] for line in lines] == [["q0", "batch", "low"], ["q1", "batch", "low"]]
    assert all(float(line.split()[3]) > 0 for line in lines)


def test_the_readme_price_figures_are_the_tables() -> None:
    """The figures of the service-tier and batch guide (moved there from the README)."""
    from polythink.pricing import price
    from polythink.types import Usage

    guide = doc_blocks.DOCS / "guides" / "cost-levers.md"
    text = " ".join(guide.read_text(encoding="utf-8").split())
    usage = Usage(input_tokens=100_000, output_tokens=10_000)
    figures = {
        tier: price(usage, "openai", "gpt-5.5", service_tier=tier)
        for tier in ("standard", "flex", "priority")
    }
    shown = {tier: f"${cost.total:.2f}" for tier, cost in figures.items() if cost is not None}
    assert (
        f"costs {shown['standard']} at standard, {shown['flex']} at flex and "
        f"{shown['priority']} at priority"
    ) in text
    batch = price(usage, "openai", "gpt-5.5", batch=True)
    assert batch is not None
    assert f"costs ${batch.total:.2f} in a batch." in text


# The documentation site's pages (docs/**/*.md) follow the rules of tests/doc_blocks.py: every
# program runs here against the simulator, printing what its output block shows.

PROGRAMS = doc_blocks.programs()


@pytest.fixture
def redis_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A redis-server of the test's own, named in ``REDIS_URL`` as the docs' examples read it."""
    from tests.redis_support import RedisServer

    server = RedisServer(tmp_path).start()
    try:
        monkeypatch.setenv("REDIS_URL", server.url)
        yield server.url
    finally:
        server.stop()


def _open_http_clients() -> list[Any]:
    """The async httpx clients (ours, and the official SDKs' httpx2 ones) not yet closed.

    Async ones only: a sync client's ``__del__`` closes it where it is, and a thread another
    test left behind may be making one while a program runs."""
    import httpx

    kinds: tuple[type, ...] = (httpx.AsyncClient,)
    try:
        import httpx2

        kinds += (httpx2.AsyncClient,)
    except ImportError:
        pass
    return [o for o in gc.get_objects() if isinstance(o, kinds) and not o.is_closed]


@pytest.mark.parametrize(("block", "output"), PROGRAMS, ids=[b.id for b, _ in PROGRAMS])
def test_the_docs_programs_run_against_the_simulator(
    block: doc_blocks.Block,
    output: doc_blocks.Block | None,
    simulated: Attempts,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    if "REDIS_URL" in block.code:
        request.getfixturevalue("redis_url")
    # Compiled as its own module: this file's `from __future__ import annotations` would
    # otherwise turn the block's annotations into strings pydantic cannot resolve.
    # Every client a program opens it also closes: an SDK's async client left open is closed
    # by its __del__ in whatever event loop runs when the collector finds it, on connections
    # of a loop long closed. With the collector off, one left open is still there to find.
    gc.collect()
    before = {id(c) for c in _open_http_clients()}
    gc.disable()
    try:
        exec(compile(block.code, block.id, "exec", dont_inherit=True), {"__name__": "docs"})
        left = [repr(c) for c in _open_http_clients() if id(c) not in before]
    finally:
        gc.enable()
    assert not left, f"{block.id} left HTTP clients open: {left}"
    printed = capsys.readouterr().out
    # A program shows what it printed, or it reached the simulator at least.
    assert output is not None or simulated.sent, f"{block.id} made no call"
    if output is not None:
        assert printed == output.code, f"{block.id} printed other than {output.id} shows"


def test_every_guide_answers_with_a_program() -> None:
    with_program = {block.page for block, _ in PROGRAMS}
    pages = [
        p.relative_to(doc_blocks.ROOT).as_posix()
        for p in doc_blocks.doc_pages()
        if p.parent.name in ("guides", "getting-started") and p.name != "cli.md"
    ]
    assert len(pages) >= 15
    assert [p for p in pages if p not in with_program] == ["docs/getting-started/install.md"]


def test_the_docs_console_sessions_print_what_they_show(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from polythink.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "100")
    sessions = [b for b in doc_blocks.doc_blocks() if b.lang == "console"]
    assert sessions
    for block in sessions:
        commands = re.split(r"^\$ ", block.code, flags=re.M)[1:]
        assert commands, f"{block.id}: a console block holds '$ polythink ...' commands"
        for command in commands:
            line, _, shown = command.partition("\n")
            words = shlex.split(line)
            assert words[0] == "polythink", f"{block.id}: {line}"
            code = main(words[1:])
            assert (code, capsys.readouterr().out) == (0, shown), f"{block.id}: {line}"


def _make_targets() -> set[str]:
    makefile = (doc_blocks.ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([\w.-]+):", makefile, re.M))


def test_the_docs_shell_commands_are_ones_that_exist() -> None:
    import tomllib

    from benchmarks.run import _parser as bench_parser
    from polythink.cli import build_parser

    pyproject = tomllib.loads((doc_blocks.ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    targets = _make_targets()
    checked = 0
    for block in doc_blocks.doc_blocks():
        if block.lang != "sh":
            continue
        for line in block.code.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            program = words[0].rsplit("/", 1)[-1]
            if program == "polythink":
                parser = bench_parser() if words[1:2] == ["bench"] else build_parser()
                try:
                    parser.parse_args(words[2:] if words[1:2] == ["bench"] else words[1:])
                except (Exception, SystemExit) as exc:
                    raise AssertionError(f"{block.id}: {line}: {exc}") from None
                checked += 1
            elif program == "make":
                assert set(words[1:]) <= targets, f"{block.id}: {line}"
                checked += 1
            elif "install" in words and any("polythink[" in w for w in words):
                for word in words:
                    for named in re.findall(r"polythink\[([\w,-]+)\]", word):
                        assert set(named.split(",")) <= extras, f"{block.id}: {line}"
                checked += 1
    assert checked >= 10


def test_the_docs_toml_files_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    from polythink.config import options_from_toml, sources_from_toml
    from polythink.serve import load_config

    files = [b for b in doc_blocks.doc_blocks() if b.lang == "toml"]
    kinds = {"client": 0, "gateway": 0, "other": 0}
    for block in files:
        path = tmp_path / "polythink.toml"
        path.write_text(block.code, encoding="utf-8")
        if "title=" in block.info:  # another program's file (Codex's)
            tomllib.loads(block.code)
            kinds["other"] += 1
        elif re.search(r"^\[+(route|tenant|serve)\]+", block.code, re.M):
            for name in re.findall(r'key_env = "(\w+)"', block.code):
                monkeypatch.setenv(name, "pt-docs-0123456789abcdef")
            config = load_config(path)
            assert config.sources or config.tenants, block.id
            kinds["gateway"] += 1
        else:
            assert sources_from_toml(path), block.id
            options_from_toml(path)
            kinds["client"] += 1
    assert kinds["client"] >= 3, kinds
    assert kinds["gateway"] >= 2, kinds
    assert kinds["other"] >= 1, kinds
