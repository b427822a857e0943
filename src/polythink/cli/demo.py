"""``polythink demo``: start the simulator (or use one already running, ``--base-url-root``)
and run the calls of :data:`DEMO_CALLS` through :class:`~polythink.Client`, one table row per
call. Exit 0 when every call ended as its row expects, 1 otherwise.

``--metrics-port`` serves the calls' metrics for Prometheus, ``--chart`` writes a PNG of
reasoning tokens and cost per tier, and ``--serve`` keeps a slow stream of mixed calls going
until Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx
from rich.console import Console
from rich.table import Table
from rich.text import Text

from polythink.backends.local import LocalBudgets
from polythink.budgets import Budget
from polythink.cli import arguments
from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    WIDE,
    error_message,
    new_console,
    renders_whole,
)
from polythink.client import Client
from polythink.config import Source
from polythink.errors import BudgetExceededError, PolythinkError
from polythink.providers import get_provider
from polythink.transports import transport_class
from polythink.types import EFFORT_ORDER, Message, Response, Tool

__all__ = ["DEMO_CALLS", "DemoCall", "DemoMode", "add_parser"]


DemoMode = Literal["complete", "stream", "tools", "cached", "budget", "conversation"]


@dataclass(frozen=True, slots=True)
class DemoCall:
    """One row of ``polythink demo``: a call, and the outcome it should have.

    Attributes:
        provider: the provider id. The row runs only when this build has the provider's
            transport (and, with the demo's own simulator, a simulator module for its wire).
        model: the model id.
        effort: the requested tier, as a caller would write it.
        expect: the applied tier the response should report, or the name of the error class
            the call should raise.
        mode: ``complete`` (one call), ``stream`` (one streamed call), ``tools`` (a tool
            loop: the assistant turn is appended with its reasoning and the tool result sent
            back until the model answers in text) or ``cached`` (the same call twice through
            a client with a response cache: the second is a cache hit, which spends nothing
            and saves what the first cost) or ``budget`` (the same call again and again
            through a client with a small spend budget that steps tiers down from half
            spent, until it refuses: the row expects the refusal, and the tiers it sent
            to step down and never back up) or ``conversation`` (an agent loop of
            :data:`_CONVERSATION_TURNS` calls with a ``system_suffix`` that changes every
            call and ``prompt_cache``: the row says what share of the input the prompt
            cache served, every call after the first reading the one before).
    """

    provider: str
    model: str
    effort: str
    expect: str
    mode: DemoMode = "complete"


DEMO_CALLS: tuple[DemoCall, ...] = (
    DemoCall("openai", "gpt-6-luna", "high", "high"),
    DemoCall("openai", "gpt-5.5", "minimal", "low"),
    DemoCall("openai", "gpt-6.2-astra", "xhigh", "xhigh", "stream"),
    DemoCall("openai", "gpt-6.1-sol", "none", "low"),
    DemoCall("openai", "gpt-6-astra", "high", "high", "tools"),
    DemoCall("glm", "glm-5.3", "medium", "low"),
    DemoCall("deepseek", "deepseek-v4-pro", "high", "high", "stream"),
    DemoCall("deepseek", "deepseek-v4-pro", "low", "low", "tools"),
    DemoCall("openrouter", "anthropic/claude-opus-5.5", "high", "high", "stream"),
    DemoCall("qwen", "qwen3.8-max", "medium", "medium"),
    DemoCall("kimi", "kimi-k3", "max", "max"),
    DemoCall("anthropic", "claude-opus-5-5", "xhigh", "xhigh", "stream"),
    DemoCall("anthropic", "claude-sonnet-5-5", "none", "low"),
    DemoCall("anthropic", "claude-haiku-5-5", "medium", "medium", "tools"),
    DemoCall("anthropic", "claude-opus-5-5", "medium", "medium", "conversation"),
    DemoCall("openai-responses", "gpt-6.1-sol", "medium", "medium", "stream"),
    DemoCall("gemini", "gemini-4-argon", "minimal", "low"),
    DemoCall("gemini", "gemini-3.8-flash", "low", "low", "tools"),
    DemoCall("anthropic", "claude-fable-5-2", "low", "low", "cached"),
    DemoCall("anthropic", "claude-sonnet-4-6", "high", "BudgetExceededError", "budget"),
    DemoCall("bedrock", "anthropic.claude-opus-4-8", "high", "high", "stream"),
    DemoCall("bedrock", "openai.gpt-oss-120b-1:0", "max", "high"),
    DemoCall("vertex", "gemini-4-neon", "low", "low", "tools"),
    DemoCall("vertex", "claude-opus-4-8", "medium", "medium", "tools"),
    DemoCall("azure", "gpt-5.5", "max", "xhigh", "stream"),
)
"""The demo's calls, one per table row; add a row to show another provider, model or tier."""


_PROMPT = ({"role": "user", "content": "Why is the sky blue? Answer in one sentence."},)
_TOOL_PROMPT = ({"role": "user", "content": "What is the weather in Lisbon right now?"},)
_WEATHER = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
_MAX_TOOL_TURNS = 5
_CONVERSATION_TURNS = 6
_CONVERSATION_SYSTEM = "You are a careful planning assistant. " + " ".join(
    f"Rule {n}: check the forecast before you plan, and say which city you checked."
    for n in range(80)
)
"""A system prompt above the providers' 1,024-token minimum, so the prompt cache keeps it."""
_DEMO_BUDGET = Budget(0.05, "day", step_down_at=0.5, name="demo")
"""The budget row's cap: 5 US cents a day, stepping tiers down from half spent."""
_BUDGET_MAX_TOKENS = 400
_MAX_BUDGET_CALLS = 100


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink demo`` to ``commands``."""
    demo = commands.add_parser(
        "demo",
        help="run calls through the client against the simulator and print a table",
        description="Run calls across providers, models and tiers against the simulator. "
        "Exit 0 when every call ended as expected, 1 otherwise.",
    )
    demo.add_argument(
        "--base-url-root",
        type=arguments.url_root,
        metavar="URL",
        help="use a simulator already running at URL (e.g. http://127.0.0.1:8787) "
        "instead of starting one",
    )
    demo.add_argument(
        "--metrics-port",
        type=arguments.port,
        metavar="N",
        help="serve the calls' metrics for Prometheus at http://127.0.0.1:N/metrics",
    )
    demo.add_argument(
        "--serve",
        action="store_true",
        help="after the table, keep the simulator and a slow stream of mixed calls "
        "running until Ctrl-C (with --metrics-port, to watch on a dashboard)",
    )
    demo.add_argument(
        "--chart",
        metavar="PATH",
        help="write a PNG of reasoning tokens and cost per applied tier for each model",
    )
    demo.set_defaults(handler=_cmd_demo)
    return demo


def _cmd_demo(args: argparse.Namespace) -> int:
    from polythink.simulator import Simulator

    if args.chart:
        folder = os.path.dirname(os.path.abspath(args.chart))
        if not os.path.isdir(folder):
            print(f"--chart: the folder {folder} does not exist", file=sys.stderr)
            return EXIT_USAGE
    console = new_console()
    simulator: Simulator | None = None
    served: set[str] | None = None
    root: str = args.base_url_root or ""
    if not root:
        simulator = Simulator().start()
        served = {module.__name__.rsplit(".", 1)[-1] for module in simulator.server.wires}
        root = f"http://127.0.0.1:{simulator.port}"
    skipped: dict[str, str] = {}
    calls = []
    for call in DEMO_CALLS:
        reason = _skip_reason(call, served)
        if reason is None:
            calls.append(call)
        else:
            skipped.setdefault(call.provider, reason)
    endpoint = None
    if args.metrics_port is not None:
        from polythink.dashboard import MetricsEndpoint

        try:
            endpoint = MetricsEndpoint(args.metrics_port)
        except (ImportError, OSError) as exc:
            if simulator is not None:
                simulator.stop()
            print(f"polythink demo: cannot serve metrics: {exc}", file=sys.stderr)
            return EXIT_FAILED
        console.print(f"metrics at {endpoint.url}", markup=False)
    meter_provider = endpoint.meter_provider if endpoint is not None else None
    quiet = logging.NullHandler()
    logger = logging.getLogger("polythink")
    logger.addHandler(quiet)
    try:
        outcomes = anyio.run(_run_demo, calls, root, meter_provider)
        code = _demo_report(console, outcomes, root, simulator is not None, skipped)
        if args.chart:
            from polythink.dashboard import write_chart

            # Every call of every row: each turn of a tool loop, and the cached row's first
            # call (its hit spent nothing), so the chart sums to the table's tokens and cost.
            path = write_chart(args.chart, [r for o in outcomes for r in o.calls])
            console.print(f"chart written to {path}", markup=False)
        if args.serve:
            _serve(console, simulator, root, meter_provider)
    except KeyboardInterrupt:
        print("polythink demo: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        logger.removeHandler(quiet)
        if simulator is not None:
            simulator.stop()
        if endpoint is not None:
            endpoint.close()
    return code


def _serve(console: Console, simulator: Any, root: str, meter_provider: Any) -> None:
    """Run the slow stream of mixed calls until Ctrl-C (KeyboardInterrupt)."""
    import tempfile

    from polythink.dashboard import serve_calls
    from polythink.simulator.faults import Fault, FaultPlan

    if simulator is not None:
        # One call in ten fails: 503, 429 with a short wait, or a stream cut midway.
        simulator.settings.faults = FaultPlan(
            rate=0.1,
            mix=(Fault.http(503), Fault.http(429, retry_after=1), Fault.reset(after_chunks=3)),
            seed=1,
        )
    console.print("serving mixed calls until Ctrl-C", markup=False)
    with tempfile.TemporaryDirectory(prefix="polythink-demo-cache-") as cache:
        anyio.run(lambda: serve_calls(root, meter_provider=meter_provider, cache=cache))


def _demo_report(
    console: Console,
    outcomes: Sequence[_Outcome],
    root: str,
    started: bool,
    skipped: Mapping[str, str],
) -> int:
    where = "started for this demo" if started else "given by --base-url-root"
    console.print(f"simulator at {root} ({where})", markup=False)
    table, footnotes = _demo_table(outcomes, console.width)
    console.print(table)
    console.print(_demo_total(outcomes), markup=False)
    for number, text in enumerate(footnotes, 1):
        console.print(f"[{number}] {text}", markup=False)
    for provider, reason in skipped.items():
        console.print(f"skipped {provider}: {reason}", markup=False)
    failed = [o for o in outcomes if not o.as_expected]
    if failed:
        console.print(
            f"{len(failed)} of {len(outcomes)} calls did not end as expected", markup=False
        )
        return EXIT_FAILED
    console.print(f"{len(outcomes)} calls, each ended as expected", markup=False)
    return EXIT_OK


@dataclass
class _Outcome:
    call: DemoCall
    seconds: float
    response: Response | None = None
    error: BaseException | None = None
    reasoning_tokens: int | None = None
    detail: str = ""
    notes: list[str] = field(default_factory=list)
    spent: float | None = None
    """USD the row's calls cost (every turn of a tool loop); ``None`` when one is unpriced."""
    saved: float = 0.0
    """USD the row's cache hits would have cost."""
    hits: int = 0
    calls: list[Response] = field(default_factory=list)
    """Every response the row's calls produced, in order (each turn of a tool loop, the
    first call and the cache hit of the cached row, every call of the budget row)."""

    @property
    def result(self) -> str:
        if self.error is not None:
            return type(self.error).__name__
        applied = self.response.applied_effort if self.response else None
        return applied.value if applied else "unset"

    @property
    def as_expected(self) -> bool:
        if self.call.mode == "budget" and not _stepped_down(self.calls):
            return False
        return self.result == self.call.expect


def _stepped_down(responses: Sequence[Response]) -> bool:
    """Whether ``responses`` went to cheaper tiers and never back up, a budget saying so."""
    ranks = [EFFORT_ORDER.index(r.applied_effort) for r in responses if r.applied_effort]
    stepped = [r for r in responses if r.step_down is not None]
    return bool(stepped) and len(ranks) == len(responses) and ranks == sorted(ranks, reverse=True)


def _skip_reason(call: DemoCall, served_wires: set[str] | None) -> str | None:
    profile = get_provider(call.provider)
    wire = profile.wire
    try:
        transport_class(wire)
    except ValueError:
        return "no transport in this build"
    if profile.cloud == "aws" and importlib.util.find_spec("botocore") is None:
        return "botocore is not installed (pip install 'polythink[bedrock]')"
    if served_wires is not None and wire not in served_wires:
        return "no simulator module in this build"
    return None


async def _stream_call(client: Client, call: DemoCall) -> tuple[Response, str]:
    counts: Counter[str] = Counter()
    final: Response | None = None
    async for event in client.stream(_PROMPT, reasoning_effort=call.effort):
        counts[event.type] += 1
        if event.type == "done":
            final = event.response
    if final is None:
        raise RuntimeError("the stream ended without its done event")
    return final, f"streamed {counts['reasoning']} reasoning + {counts['text']} text deltas"


def _dollars(responses: Sequence[Response]) -> float | None:
    """What ``responses`` cost together (USD), ``None`` when one of them has no price."""
    costs = [r.cost.total if r.cost is not None else None for r in responses]
    return None if not costs or None in costs else sum(c for c in costs if c is not None)


async def _tool_loop(
    client: Client, call: DemoCall
) -> tuple[Response, str, int | None, list[Response]]:
    messages: list[Message | Mapping[str, Any]] = list(_TOOL_PROMPT)
    total: int | None = None
    results = 0
    turns: list[Response] = []
    for turn in range(1, _MAX_TOOL_TURNS + 1):
        response = await client.complete(messages, reasoning_effort=call.effort, tools=[_WEATHER])
        turns.append(response)
        spent = response.usage.reasoning_tokens if response.usage else None
        if spent is not None:
            total = (total or 0) + spent
        if not response.tool_calls:
            sent = f"{results} tool result{'s' if results != 1 else ''} sent back"
            return response, f"tool round trip: {turn} calls, {sent}", total, turns
        messages.append(response.message)
        for tool_call in response.tool_calls:
            results += 1
            weather = {"city": "Lisbon", "sky": "clear", "celsius": 21}
            messages.append(
                Message(role="tool", tool_call_id=tool_call.id, content=json.dumps(weather))
            )
    return response, f"still calling tools after {_MAX_TOOL_TURNS} calls", total, turns


async def _conversation(
    client: Client, call: DemoCall
) -> tuple[Response, str, int | None, list[Response]]:
    """An agent loop whose ``system_suffix`` changes every call: appended turns only, so
    each call reads the one before from the prompt cache and keeps its thinking."""
    messages: list[Message | Mapping[str, Any]] = [
        Message(role="system", content=_CONVERSATION_SYSTEM),
        *_TOOL_PROMPT,
    ]
    turns: list[Response] = []
    for turn in range(1, _CONVERSATION_TURNS + 1):
        response = await client.complete(
            messages,
            reasoning_effort=call.effort,
            tools=[_WEATHER],
            system_suffix=f"Step {turn} of {_CONVERSATION_TURNS}.",
            prompt_cache=True,
        )
        turns.append(response)
        messages.append(response.message)
        for tool_call in response.tool_calls:
            weather = {"city": "Lisbon", "sky": "clear", "celsius": 21}
            messages.append(
                Message(role="tool", tool_call_id=tool_call.id, content=json.dumps(weather))
            )
        if not response.tool_calls:
            messages.append(Message(role="user", content="And tomorrow?"))
    total = sum(r.usage.input_tokens or 0 for r in turns if r.usage is not None)
    read = sum(r.usage.cache_read_tokens or 0 for r in turns if r.usage is not None)
    share = read / total if total else 0.0
    spent = [r.usage.reasoning_tokens for r in turns if r.usage is not None]
    tokens = sum(t for t in spent if t is not None) if any(t is not None for t in spent) else None
    detail = (
        f"{len(turns)} calls, a system_suffix changing every call: {share:.0%} of the input "
        "read from the prompt cache"
    )
    return response, detail, tokens, turns


async def _budget_run(client: Client, call: DemoCall) -> tuple[list[Response], str, Exception]:
    """Call until the budget refuses; the responses, a summary of their tiers, the refusal."""
    responses: list[Response] = []
    for _ in range(_MAX_BUDGET_CALLS):
        try:
            response = await client.complete(
                _PROMPT, reasoning_effort=call.effort, max_tokens=_BUDGET_MAX_TOKENS
            )
        except BudgetExceededError as exc:
            runs: list[list[str]] = []
            for answered in responses:
                tier = answered.applied_effort.value if answered.applied_effort else "unset"
                if runs and runs[-1][0] == tier:
                    runs[-1].append(tier)
                else:
                    runs.append([tier])
            tiers = " → ".join(f"{run[0]} ×{len(run)}" for run in runs)
            detail = f"{len(responses)} calls: {tiers}, refused at {exc.spent / exc.limit:.0%}"
            return responses, detail, exc
        responses.append(response)
    raise RuntimeError(f"the budget never refused in {_MAX_BUDGET_CALLS} calls")


class _MemoryStore:
    """A response cache store in a dict (see ``CacheStore``), for the demo's cached row."""

    def __init__(self) -> None:
        self._entries: dict[str, bytes] = {}

    def get(self, key: str) -> bytes | None:
        return self._entries.get(key)

    def set(self, key: str, value: bytes, expire: float | None = None) -> None:
        self._entries[key] = value

    def delete(self, key: str) -> None:
        self._entries.pop(key, None)


def _demo_source(call: DemoCall, root: str) -> Source:
    """The source of a demo row, pointed at the simulator: a key for the providers reached
    with one; on the clouds, the simulator's own credentials (SigV4 keys for Bedrock, an
    OAuth token for Vertex, an api-key for an Azure deployment named after its model)."""
    from polythink.simulator import clouds

    cloud = get_provider(call.provider).cloud
    if cloud == "aws":
        from botocore.credentials import Credentials

        keys = Credentials(clouds.AWS_ACCESS_KEY_ID, clouds.AWS_SECRET_ACCESS_KEY)
        return Source(
            call.provider,
            call.model,
            base_url=f"{root}/{call.provider}/v1",
            region="us-east-1",
            credentials=keys,
        )
    if cloud == "google":
        token = clouds.GOOGLE_TOKEN_PREFIX + "demo"
        return Source(
            call.provider,
            call.model,
            base_url=f"{root}/{call.provider}/v1",
            project="polythink-demo",
            region="us-east5",
            credentials=lambda: token,
        )
    if cloud == "azure":
        return Source(
            call.provider,
            call.model,
            base_url=f"{root}/{call.provider}/openai/v1",
            api_key=clouds.AZURE_API_KEY,
            base_model=call.model,
        )
    return Source(call.provider, call.model, api_key="sim", base_url=f"{root}/{call.provider}/v1")


async def _run_call(
    call: DemoCall, root: str, http: httpx.AsyncClient, meter_provider: Any = None
) -> _Outcome:
    started = time.perf_counter()
    first: Response | None = None
    try:
        source = _demo_source(call, root)
        cache = _MemoryStore() if call.mode == "cached" else None
        budgets = [_DEMO_BUDGET] if call.mode == "budget" else []
        async with Client(
            [source],
            http_client=http,
            meter_provider=meter_provider,
            cache=cache,
            budgets=budgets,
            budget_store=LocalBudgets() if budgets else None,
        ) as client:
            tokens: int | None = None
            turns: list[Response] = []
            if call.mode == "budget":
                turns, detail, refusal = await _budget_run(client, call)
                return _Outcome(
                    call,
                    time.perf_counter() - started,
                    error=refusal,
                    detail=detail,
                    spent=_dollars(turns),
                    calls=turns,
                )
            if call.mode == "stream":
                response, detail = await _stream_call(client, call)
            elif call.mode == "tools":
                response, detail, tokens, turns = await _tool_loop(client, call)
            elif call.mode == "conversation":
                response, detail, tokens, turns = await _conversation(client, call)
            elif call.mode == "cached":
                first = await client.complete(_PROMPT, reasoning_effort=call.effort)
                response = await client.complete(_PROMPT, reasoning_effort=call.effort)
                hit = "a cache hit" if response.cache_hit else "NOT a cache hit"
                detail = f"asked twice: the second is {hit}"
            else:
                response = await client.complete(_PROMPT, reasoning_effort=call.effort)
                detail = ""
    except (PolythinkError, ValueError, RuntimeError) as exc:
        return _Outcome(call, time.perf_counter() - started, error=exc)
    if call.mode not in ("tools", "conversation"):
        tokens = response.usage.reasoning_tokens if response.usage is not None else None
        turns = [r for r in (first, response) if r is not None]
    hits = [r for r in turns if r.cache_hit]
    return _Outcome(
        call,
        time.perf_counter() - started,
        response=response,
        reasoning_tokens=tokens,
        detail=detail,
        notes=list(response.warnings),
        spent=_dollars([r for r in turns if not r.cache_hit]),
        saved=sum(r.cost.total for r in hits if r.cost is not None),
        hits=len(hits),
        calls=turns,
    )


async def _run_demo(
    calls: Sequence[DemoCall], root: str, meter_provider: Any = None
) -> list[_Outcome]:
    async with httpx.AsyncClient(timeout=30.0) as http:
        return [await _run_call(call, root, http, meter_provider) for call in calls]


def _wrapped(text: str, width: int, at: str) -> str:
    """``text`` broken after its last ``at`` that keeps the first line within ``width``,
    when longer than ``width`` (rich would cut a word anywhere)."""
    cut = text.rfind(at, 0, width) if len(text) > width else -1
    if cut <= 0:
        return text
    cut += len(at)
    return f"{text[:cut]}\n{text[cut:]}"


def _usd(dollars: float | None) -> str:
    """US dollars to five decimals (``$0.00123``); ``—`` when not known."""
    return "—" if dollars is None else f"${dollars:.5f}"


def _demo_total(outcomes: Sequence[_Outcome]) -> str:
    """The line under the table: dollars spent by the priced rows, and saved by cache hits."""
    priced = [o.spent for o in outcomes if o.spent is not None]
    line = f"total: {_usd(sum(priced))} spent by the {len(priced)} priced rows of {len(outcomes)}"
    hits = sum(o.hits for o in outcomes)
    if hits:
        saved = sum(o.saved for o in outcomes)
        line += f"; {_usd(saved)} saved by {hits} cache hit{'s' if hits != 1 else ''}"
    return line


def _demo_table(outcomes: Sequence[_Outcome], width: int = WIDE) -> tuple[Table, list[str]]:
    """The demo's table for a terminal ``width`` columns wide, and its footnotes.

    The wide layout (long headers, borders, each row's notes inline, the long texts as
    numbered footnotes) is used from :data:`WIDE` columns when it fits ``width`` with
    every word whole; otherwise the compact one: short headers, no borders, and one
    footnote per row that has anything to say, ids broken only after ``-`` or ``/``, so
    the table fits 80 columns. The cost column is what the row's calls spent in US dollars
    (``—`` when a call has no price).
    """
    if width >= WIDE:
        table, footnotes, cells = _demo_layout(outcomes, compact=False)
        if renders_whole(table, width, cells):
            return table, footnotes
    table, footnotes, _ = _demo_layout(outcomes, compact=True)
    return table, footnotes


def _demo_layout(
    outcomes: Sequence[_Outcome], *, compact: bool
) -> tuple[Table, list[str], list[tuple[str, ...]]]:
    """The demo's table in one layout, its footnotes and its cells' texts."""
    footnotes: list[str] = []
    rows: list[tuple[str, ...]] = []

    def refer(text: str) -> str:
        footnotes.append(text)
        return f"[{len(footnotes)}]"

    if compact:
        table = Table(
            title="polythink demo",
            title_justify="left",
            box=None,
            padding=(0, 1, 0, 0),
            pad_edge=False,
        )
        headers = ("model", "provider", "asked", "sent", "tokens", "cost", "seen", "ms", "note")
    else:
        table = Table(title="polythink demo", title_justify="left")
        headers = (
            "model",
            "provider",
            "requested",
            "applied",
            "reasoning tokens",
            "cost",
            "observation",
            "latency",
            "note",
        )
    for i, name in enumerate(headers):
        right = name in ("reasoning tokens", "latency", "tokens", "ms", "cost")
        # Short cells never wrap; narrow terminals fold the model, provider and note.
        short = (compact and i < len(headers) - 1) or name not in ("model", "provider", "note")
        # Compact: a long note folds. Wide: cells wrap between words only and a cut word
        # shows as "…", which renders_whole looks for.
        overflow: Literal["fold", "ellipsis"] = "fold" if compact else "ellipsis"
        table.add_column(
            name, justify="right" if right else "left", overflow=overflow, no_wrap=short
        )
    for outcome in outcomes:
        call, response = outcome.call, outcome.response
        labels: list[str] = []
        if outcome.error is not None:
            error = f"{type(outcome.error).__name__}"
            labels.append(
                f"{error}: {error_message(outcome.error)}"
                if compact
                else f"{error} {refer(error_message(outcome.error))}"
            )
        if outcome.detail:
            labels.append(outcome.detail)
        for note in outcome.notes:
            kind = "nearest tier" if "effort_fallback=" in note else "warning"
            labels.append(f"{kind}: {note}" if compact else f"{kind} {refer(note)}")
        if not outcome.as_expected:
            labels.append(f"UNEXPECTED: wanted {call.expect}")
        tokens = outcome.reasoning_tokens
        seconds = outcome.seconds * 1000
        cells = (
            _wrapped(call.model, 17, "/" if "/" in call.model else "-") if compact else call.model,
            _wrapped(call.provider, 10, "-") if compact else call.provider,
            call.effort,
            outcome.result if response is not None else "error",
            "-" if response is None else ("n/a" if tokens is None else str(tokens)),
            _usd(outcome.spent),
            response.thinking.value if response is not None else "-",
            f"{seconds:.0f}" if compact else f"{seconds:.0f} ms",
            (refer("; ".join(labels)) if labels else "") if compact else "; ".join(labels),
        )
        rows.append(cells)
        table.add_row(*(Text(cell) for cell in cells))
    return table, footnotes, rows
