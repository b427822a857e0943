"""The ``polythink`` command line: ``demo``, ``resolve``, ``models``, ``simulate`` and ``bench``.

- ``polythink demo`` starts the simulator (or uses one already running, ``--base-url-root``)
  and runs the calls of :data:`DEMO_CALLS` through :class:`~polythink.Client`, one table row
  per call. Exit 0 when every call ended as its row expects, 1 otherwise.
- ``polythink resolve --provider P --model M --effort E`` prints the applied tier and the
  request-body fragment a client would send, without any network: the capability comes from
  the same store lookup the client makes
  (:meth:`polythink.capability_store.CapabilityStore.resolve`; ``--store PATH``), with what
  was observed at the endpoint ``--base-url URL`` (default: the provider's own).
  ``--budget USD/WINDOW`` (with ``--step-down-at``, ``--floor``, ``--tag``, ``--budget-name``
  and ``--spent USD``, or ``--limits redis://…`` to read what the budget spent in the shared
  limits) shows the tier a call would get now under that budget and why, as
  :meth:`polythink.Client.plan` does. Exit 1 when the tier cannot be satisfied.
- ``polythink models`` prints the capability registry with where each fact comes from
  (observed > documented > imported > inferred); ``--learned`` lists what was learned on the
  wire (with the endpoint each observation applies to) and imported, and suspected stale
  entries, with their evidence; ``--levels MODEL``
  prints the tiers a selector should offer for a model and the one to preselect;
  ``--retired`` lists deprecated and retired models with their dates and replacements;
  ``--stale`` lists the entries a maintainer should review (evidence older than
  ``--older-than`` days, past their shutdown date, or contradicted on the wire or by an
  import) and what the last catalogue refresh changed; ``--refresh`` refreshes the
  catalogues now (:mod:`polythink.refresh`) and says what changed; ``models forget
  MODEL`` drops what was learned about a model; ``models import
  openrouter FILE.json`` stores an OpenRouter ``/api/v1/models`` document as imported, and
  ``models import litellm [FILE.json]`` LiteLLM's model map (the installed ``litellm``
  package's copy when no file is given). ``--store PATH`` names the capability store file
  (default: the per-user one, see :mod:`polythink.capability_store`).
- ``polythink simulate`` serves the simulator in the foreground until Ctrl-C.
- ``polythink bench [--quick] …`` runs the benchmark suite, the ``benchmarks`` package of a
  source checkout (next to ``src/``, or in the current directory); every argument after
  ``bench`` goes to it (``polythink bench --help`` lists them). Exit 1 when there is no
  such package.

Bad arguments print one line to stderr and exit 2. This module, and ``rich`` with it, is
imported only by the console script, never by ``import polythink``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import importlib.util
import io
import itertools
import json
import logging
import math
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

import anyio
import httpx
from rich.console import Console
from rich.table import Table
from rich.text import Text

from polythink import __version__
from polythink.backends.local import LocalBudgets
from polythink.budgets import Budget, nanos
from polythink.capability_store import CapabilityStore, open_store, resolve_known
from polythink.client import Client
from polythink.config import Source
from polythink.errors import BudgetExceededError, PolythinkError
from polythink.providers import PROVIDERS, get_provider
from polythink.reasoning import POLICIES, Capability, all_capabilities, get_capability
from polythink.reasoning.lifecycle import served_lifecycle_note
from polythink.reasoning.lifecycle import status as lifecycle_status
from polythink.transports import transport_class
from polythink.types import EFFORT_ORDER, Effort, Message, Response, Tool

__all__ = ["DEMO_CALLS", "DemoCall", "DemoMode", "build_parser", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

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
_PIPE_WIDTH = 160
_STALE_DAYS = 90
"""``models --stale``: evidence last checked longer ago than this many days is listed."""


class _UsageError(Exception):
    """A bad command line; its message is the one line printed before exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: error: {message}")


def _effort(value: str) -> Effort:
    try:
        parsed = Effort.parse(value)
    except ValueError:
        parsed = None
    if parsed is None:
        accepted = ", ".join(e.value for e in (*EFFORT_ORDER, Effort.AUTO))
        raise argparse.ArgumentTypeError(
            f"unknown reasoning effort {value!r}; accepted: {accepted} "
            "(aliases: off, on, true, false)"
        )
    return parsed


def _played(value: str) -> tuple[str, Capability | None]:
    model, sep, tiers = value.partition("=")
    model = model.strip()
    if not sep or not model:
        raise argparse.ArgumentTypeError(
            f"expected MODEL=TIERS such as gpt-5.5=low,medium,high (or my-chat-model= for a model "
            f"with no reasoning parameter), got {value!r}"
        )
    names = [t for t in (part.strip() for part in tiers.split(",")) if t]
    if not names:
        return model, None
    efforts = tuple(_effort(name) for name in names)
    base = get_capability(model)
    try:
        if base is None:
            return model, Capability(model, efforts)
        return model, dataclasses.replace(base, supported_efforts=efforts, default_effort=None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_BUDGET_SPEC = (
    "a positive amount of US dollars per window such as 10/day (windows: minute, hour, day, "
    "month, UTC)"
)


def _budget_spec(value: str) -> tuple[float, str]:
    usd, _, per = value.partition("/")
    try:
        amount = float(usd)
        Budget(amount, per)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {_BUDGET_SPEC}, got {value!r}") from None
    return amount, per


def _fraction(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < 1:
        raise argparse.ArgumentTypeError(
            f"expected a fraction from 0 to below 1 such as 0.8 (= 80 % spent), got {value!r}"
        )
    return number


def _positive_days(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of days >= 0, got {value!r}")
    return number


def _model_id(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expected a model id such as gpt-5.5, got {value!r}")
    return value


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number of tokens, got {value!r}"
        )
    return number


def _at_least_zero(unit: str) -> Callable[[str], float]:
    """An argument type for a finite number >= 0 of ``unit`` (seconds, US dollars)."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not math.isfinite(number) or number < 0:
            raise argparse.ArgumentTypeError(f"expected {unit} as a number >= 0, got {value!r}")
        return number

    return parse


_seconds = _at_least_zero("seconds")
_dollars_arg = _at_least_zero("US dollars")


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(
            f"expected a port from 0 to 65535 (0 = any free port), got {value!r}"
        )
    return number


def _url_root(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"expected an http:// or https:// URL such as http://127.0.0.1:8787, got {value!r}"
        )
    return value.rstrip("/")


def _parser() -> tuple[_Parser, dict[str, _Parser]]:
    parser = _Parser(
        prog="polythink",
        description="One reasoning-effort vocabulary across LLM providers.",
    )
    parser.add_argument("--version", action="version", version=f"polythink {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)
    providers = list(PROVIDERS)
    listing = ", ".join(providers)

    demo = commands.add_parser(
        "demo",
        help="run calls through the client against the simulator and print a table",
        description="Run calls across providers, models and tiers against the simulator. "
        "Exit 0 when every call ended as expected, 1 otherwise.",
    )
    demo.add_argument(
        "--base-url-root",
        type=_url_root,
        metavar="URL",
        help="use a simulator already running at URL (e.g. http://127.0.0.1:8787) "
        "instead of starting one",
    )
    demo.add_argument(
        "--metrics-port",
        type=_port,
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

    res = commands.add_parser(
        "resolve",
        help="print the applied tier and the request fragment for a model (no network)",
        description="Resolve a requested tier for a model: print the applied tier and the "
        "exact JSON fragment that would be sent, with what the capability store learned or "
        "imported (as the client reads it). Exit 1 when it cannot be satisfied.",
    )
    res.add_argument("--provider", required=True, choices=providers, metavar="P", help=listing)
    res.add_argument("--model", required=True, type=_model_id, metavar="M", help="model id")
    res.add_argument(
        "--effort",
        required=True,
        type=_effort,
        metavar="E",
        help="none, minimal, low, medium, high, xhigh, max or auto (aliases: off, on, true, false)",
    )
    res.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="the caller's output ceiling in tokens (budget wires raise it)",
    )
    res.add_argument(
        "--policy",
        choices=POLICIES,
        default="nearest",
        help="for a tier the model does not accept (default: nearest)",
    )
    res.add_argument(
        "--base-url",
        type=_url_root,
        metavar="URL",
        help="the source's base URL: what was observed at this endpoint applies (default: "
        "the provider's own)",
    )
    res.add_argument("--json", action="store_true", help="print one JSON object")
    spend = res.add_argument_group(
        "spend budget",
        "what tier a call would get now under a budget (Budget(...) of polythink), and why",
    )
    spend.add_argument(
        "--budget",
        type=_budget_spec,
        metavar="USD/WINDOW",
        help="a budget such as 10/day (windows: minute, hour, day, month, UTC)",
    )
    spend.add_argument(
        "--step-down-at",
        type=_fraction,
        metavar="F",
        help="the fraction spent from which the budget steps tiers down (e.g. 0.8)",
    )
    spend.add_argument(
        "--flex-at",
        type=_fraction,
        metavar="F",
        help="the fraction spent from which the budget moves calls to the flex service tier "
        "(e.g. 0.9, above --step-down-at)",
    )
    spend.add_argument("--floor", type=_effort, metavar="E", help="the cheapest tier to step to")
    spend.add_argument(
        "--tag",
        metavar="T",
        help="the call's tag: the budget counts each tag apart (Budget(tag='*'))",
    )
    spend.add_argument(
        "--budget-name", metavar="NAME", help="the budget's name (default: the window and scope)"
    )
    spent = spend.add_mutually_exclusive_group()
    spent.add_argument(
        "--spent",
        type=_dollars_arg,
        metavar="USD",
        help="what the budget has spent in its current window (default 0)",
    )
    spent.add_argument(
        "--limits",
        metavar="URL",
        help="read what the budget has spent from the shared limits at a redis:// URL",
    )
    res.add_argument(
        "--store",
        metavar="PATH",
        help="the capability store file, read as the client reads it (default: "
        "$POLYTHINK_CAPABILITIES, else capabilities.json in the user cache directory)",
    )
    res.set_defaults(handler=_cmd_resolve)

    models = commands.add_parser(
        "models",
        help="print the capability registry, what was learned, and a model's tiers",
        description="Print every known model, one line each: provider, model, accepted tiers, "
        "default tier. --evidence adds budgets, output limits, where each entry comes from "
        "(observed > documented > imported > inferred) and its evidence.",
    )
    models.add_argument("--provider", choices=providers, metavar="P", help=listing)
    models.add_argument(
        "--evidence", action="store_true", help="a table with budgets, limits and sources"
    )
    models.add_argument("--json", action="store_true", help="print JSON")
    models.add_argument(
        "--base-url",
        type=_url_root,
        metavar="URL",
        help="read what was observed at this endpoint (default: each provider's own)",
    )
    models.add_argument(
        "--store",
        metavar="PATH",
        help="the capability store file (default: $POLYTHINK_CAPABILITIES, else "
        "capabilities.json in the user cache directory)",
    )
    shown = models.add_mutually_exclusive_group()
    shown.add_argument(
        "--learned",
        action="store_true",
        help="list learned and imported entries and suspected stale ones, with evidence",
    )
    shown.add_argument(
        "--levels",
        type=_model_id,
        metavar="MODEL",
        help="print the tiers a selector should offer for MODEL, cheapest first, and its default",
    )
    shown.add_argument(
        "--retired",
        action="store_true",
        help="list deprecated and retired models with their dates and replacements",
    )
    shown.add_argument(
        "--refresh",
        action="store_true",
        help="fetch LiteLLM's model map and OpenRouter's /models now (the client does it at "
        "most once a day) and say what changed",
    )
    shown.add_argument(
        "--stale",
        action="store_true",
        help="list entries to review: evidence older than --older-than days, past their "
        "shutdown date, or contradicted on the wire or by an import, and what the last "
        "catalogue refresh changed",
    )
    models.add_argument(
        "--older-than",
        type=_positive_days,
        metavar="DAYS",
        help=f"with --stale: evidence checked longer ago than DAYS (default {_STALE_DAYS})",
    )
    models.set_defaults(handler=_cmd_models)
    actions = models.add_subparsers(dest="action", metavar="action", parser_class=_Parser)
    forget = actions.add_parser(
        "forget",
        help="drop what was learned or imported about a model",
        description=(
            "Drop the learned and imported entries and suspicions of MODEL from the store."
        ),
    )
    forget.add_argument("model", type=_model_id, metavar="MODEL")
    forget.add_argument(
        "--provider",
        choices=providers,
        metavar="P",
        dest="forget_provider",
        help="only what was observed on this provider",
    )
    forget.set_defaults(handler=_cmd_models_forget)
    imports = actions.add_parser(
        "import",
        help="store a catalogue as imported capabilities",
        description="Read a catalogue into the capability store (below the shipped registry).",
    )
    imports.add_argument("catalogue", choices=("openrouter", "litellm"), help="openrouter, litellm")
    imports.add_argument(
        "file",
        metavar="FILE.json",
        nargs="?",
        help="an OpenRouter /api/v1/models document, or LiteLLM's "
        "model_prices_and_context_window.json (default for litellm: the installed litellm "
        "package's copy)",
    )
    imports.set_defaults(handler=_cmd_models_import)

    sim = commands.add_parser(
        "simulate",
        help="serve the provider simulator in the foreground until Ctrl-C",
        description="Serve the simulator; a provider's base URL is http://HOST:PORT/{provider}/v1.",
    )
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sim.add_argument(
        "--port", type=_port, default=8787, help="port to bind (default 8787; 0 = any free port)"
    )
    sim.add_argument(
        "--latency", type=_seconds, default=0.0, metavar="S", help="seconds before each answer"
    )
    sim.add_argument(
        "--chunk-delay",
        type=_seconds,
        default=0.0,
        metavar="S",
        help="seconds between streamed chunks",
    )
    sim.add_argument(
        "--play",
        action="append",
        type=_played,
        metavar="MODEL=TIERS",
        help="answer MODEL as if it accepted only TIERS (comma-separated, e.g. "
        "gpt-5.5=low,medium,high; empty = no reasoning parameter), rejecting other tiers the "
        "way its provider does (qwen: switching off only); a deepseek, glm or kimi model is "
        "refused, their APIs reject no tier; repeatable",
    )
    sim.set_defaults(handler=_cmd_simulate)

    serve = commands.add_parser(
        "serve",
        help="run the gateway: OpenAI Chat and Responses, Anthropic Messages front doors over "
        "the configured sources",
        description="Serve POST /v1/chat/completions, /v1/responses, /v1/messages (and "
        "count_tokens) and GET /v1/models; a request's model names a [[route]], a configured "
        "source's model, or provider/model-id. See the README's Gateway section.",
    )
    serve.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get("POLYTHINK_SERVE_CONFIG") or None,
        help="the TOML file: [[source]], [thinking], limits, cache, [[budget]], [[route]], "
        "[[tenant]], [serve] (default: $POLYTHINK_SERVE_CONFIG, else none: provider/model-id "
        "names route with the standard key variables)",
    )
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        help="processes serving the port, under gunicorn (default: [serve] workers, else 1)",
    )
    serve.add_argument(
        "--hash-key",
        action="store_true",
        help="read a key on standard input, print its key_sha256 for a [[tenant]], and exit",
    )
    serve.add_argument(
        "--new-key",
        action="store_true",
        help="print a new random key and its key_sha256, and exit",
    )
    serve.add_argument(
        "--host", default=None, help="address to bind (default: [serve] host, else 127.0.0.1)"
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port to bind (default: [serve] port, else 4000; 0 = any free port)",
    )
    serve.set_defaults(handler=_cmd_serve)

    bench = commands.add_parser(
        "bench",
        help="benchmark polythink against raw httpx and the peer SDKs (from a source checkout)",
        description="Run the benchmark suite of a source checkout; see benchmarks/README.md.",
        add_help=False,
    )
    return parser, {
        "demo": demo,
        "resolve": res,
        "models": models,
        "simulate": sim,
        "serve": serve,
        "bench": bench,
    }


def build_parser() -> argparse.ArgumentParser:
    """The ``polythink`` argument parser, every command and option with its help.

    The documentation's command-line reference is rendered from it at build time, so the
    page cannot drift from what the command accepts. ``bench`` hands its arguments to the
    benchmark suite's own parser (``benchmarks/run.py``) and has none of its own here.
    """
    return _parser()[0]


def _benchmarks_root() -> Path | None:
    """The directory holding the ``benchmarks`` package: the checkout's, else the cwd's."""
    checkout = Path(__file__).resolve().parents[3]
    for root in (checkout, Path.cwd()):
        if (root / "benchmarks" / "run.py").is_file():
            return root
    return None


def _cmd_bench(argv: Sequence[str]) -> int:
    root = _benchmarks_root()
    if root is None:
        print(
            "polythink bench: no benchmarks package found next to the polythink source tree "
            f"({Path(__file__).resolve().parents[3]}) or in the current directory "
            f"({Path.cwd()}); run it from a source checkout "
            "(git clone, then pip install -e '.[bench]')",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from benchmarks.run import main as bench_main

    try:
        return bench_main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``polythink`` command line and return its exit code.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        0 on success; 1 when the command failed (a tier that cannot be satisfied, a demo
        call that did not end as expected, a port that cannot be bound); 2 for bad
        arguments, after one line on stderr naming what was wrong and what is accepted;
        130 when the demo is interrupted.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["bench"]:
        return _cmd_bench(arguments[1:])
    parser, commands = _parser()
    try:
        for flag, value in itertools.pairwise(arguments):
            if flag == "--budget" and value[:1] == "-" and value[1:2] in "0123456789.":
                # argparse takes "-5/day" for an option and says "expected one argument".
                commands["resolve"].error(
                    f"argument --budget: expected {_BUDGET_SPEC}, got {value!r}"
                )
        args, extra = parser.parse_known_args(arguments)
        if args.command is None:
            parser.error(f"a command is required; accepted: {', '.join(commands)}")
        if args.command == "models" and args.older_than is not None and not args.stale:
            commands["models"].error(
                "--older-than DAYS goes with --stale: polythink models --stale --older-than DAYS"
            )
        if extra:
            command = commands[args.command]
            options = [
                s for action in command._actions for s in action.option_strings if s[:2] == "--"
            ]
            command.error(
                f"unrecognized arguments: {' '.join(extra)}; accepted options: "
                + ", ".join(options)
            )
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # The reader went away (`polythink models | head -1`): no traceback, and no second
        # error when the interpreter flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


def _message(exc: BaseException) -> str:
    return exc.message if isinstance(exc, PolythinkError) else str(exc)


def _cmd_resolve(args: argparse.Namespace) -> int:
    if args.budget is not None:
        return _resolve_under_budget(args)
    if any(
        getattr(args, name) is not None
        for name in ("step_down_at", "flex_at", "floor", "tag", "budget_name", "spent", "limits")
    ):
        print(
            "polythink resolve: error: --step-down-at, --flex-at, --floor, --tag, --budget-name, "
            "--spent and --limits describe a budget: give it with --budget USD/WINDOW",
            file=sys.stderr,
        )
        return EXIT_USAGE
    retired: str | None = None
    try:
        # The lookup a Client makes: observed > documented > imported > inferred.
        store = open_store(args.store)
        profile = get_provider(args.provider)
        known = store.lookup(profile.id, args.model, args.base_url)
        # A retired model is named as the client names it on its first call, whatever form
        # of its id was given (a Bedrock, Vertex or dated id finds the same entry).
        retired = served_lifecycle_note(args.model, known.capability, store.today(), profile.serves)
        resolution = resolve_known(
            args.effort,
            provider=profile,
            model=args.model,
            known=known,
            policy=args.policy,
            max_tokens=args.max_tokens,
        )
    except ValueError as exc:
        if args.json:
            error = {"type": type(exc).__name__, "message": _message(exc)}
            out: dict[str, Any] = {"error": error}
            if retired is not None:
                out["warnings"] = [retired]
            print(json.dumps(out, ensure_ascii=False))
        else:
            if retired is not None:
                print(f"warning    {retired}", file=sys.stderr)
            print(f"polythink resolve: {type(exc).__name__}: {_message(exc)}", file=sys.stderr)
        return EXIT_FAILED
    requested = resolution.requested_effort
    applied = resolution.applied_effort
    warnings = [*([retired] if retired is not None else []), *resolution.warnings]
    if args.json:
        result = {
            "requested_effort": requested.value if requested else None,
            "applied_effort": applied.value if applied else None,
            "payload": resolution.payload,
            "warnings": warnings,
        }
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    print(f"requested  {requested.value if requested else 'unset'}")
    print(f"applied    {applied.value if applied else 'unset'}")
    print(f"payload    {json.dumps(resolution.payload, ensure_ascii=False)}")
    if resolution.budget_tokens is not None:
        print(f"budget     {resolution.budget_tokens} tokens")
    for warning in warnings:
        print(f"warning    {warning}")
    return EXIT_OK


def _resolve_under_budget(args: argparse.Namespace) -> int:
    """``resolve --budget``: the client's own plan for one source under one budget."""
    usd, per = args.budget
    try:
        budget = Budget(
            usd,
            per,
            tag="*" if args.tag is not None else None,
            step_down_at=args.step_down_at,
            flex_at=args.flex_at,
            floor=args.floor,
            name=args.budget_name,
        )
        source = Source(
            args.provider,
            args.model,
            api_key="resolve",
            base_url=args.base_url,
            effort_fallback=args.policy,
        )
        store = None if args.limits else LocalBudgets()
        client = Client(
            [source],
            budgets=[budget],
            limits=args.limits,
            budget_store=store,
            capabilities_store=open_store(args.store),
        )
    except ValueError as exc:
        print(f"polythink resolve: ValueError: {_message(exc)}", file=sys.stderr)
        return EXIT_USAGE

    async def plan() -> Any:
        try:
            if store is not None and args.spent:
                line = budget.line(args.tag if args.tag is not None else "all")
                await store.reserve([line], nanos(args.spent))
            (found,) = await client.plan(
                reasoning_effort=args.effort, max_tokens=args.max_tokens, tag=args.tag
            )
            return found
        finally:
            await client.aclose()

    found = asyncio.run(plan())
    if args.json:
        print(json.dumps(_plan_json(found), ensure_ascii=False))
        return EXIT_OK if found.applied is not None else EXIT_FAILED
    requested, applied = found.requested, found.applied
    print(f"requested  {requested.value if requested else 'unset'}")
    print(f"applied    {applied.value if applied else '-'}")
    print(f"payload    {json.dumps(found.payload, ensure_ascii=False)}")
    if found.step_down is not None and found.step_down.max_tokens is not None:
        print(f"max_tokens {found.max_tokens} (the output ceiling shrinks with the tier)")
    if found.service_tier is not None:
        print(f"service    {found.service_tier.value}")
    for state in found.budgets:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state.resets_at))
        steps = (
            f", steps down from {state.step_down_at:.0%}" if state.step_down_at is not None else ""
        )
        if state.flex_at is not None:
            steps += f", moves calls to flex from {state.flex_at:.0%}"
        print(
            f"budget     {state.budget!r} ({state.scope}): ${state.spent:.6f} of "
            f"${state.limit:g} a {state.window} spent ({state.fraction:.1%}){steps}; "
            f"resets {reset}"
        )
    worst = "unpriced" if found.worst_case is None else f"${found.worst_case:.6f}"
    print(f"worst case {worst} ({'fits' if found.fits else 'does not fit'})")
    for reason in found.reasons:
        print(f"why        {reason}")
    return EXIT_OK if found.applied is not None else EXIT_FAILED


def _plan_json(found: Any) -> dict[str, Any]:
    step = found.step_down
    return {
        "requested_effort": found.requested.value if found.requested else None,
        "applied_effort": found.applied.value if found.applied else None,
        "payload": found.payload,
        "max_tokens": found.max_tokens,
        "service_tier": found.service_tier.value if found.service_tier else None,
        "step_down": None
        if step is None
        else {
            "requested": step.requested.value if step.requested else None,
            "applied": step.applied.value if step.applied else None,
            "budget": step.budget,
            "spent": step.spent,
            "step_down_at": step.step_down_at,
            "max_tokens": step.max_tokens,
            "service_tier": step.service_tier.value if step.service_tier else None,
            "flex_at": step.flex_at,
        },
        "budgets": [
            {
                "budget": state.budget,
                "scope": state.scope,
                "window": state.window,
                "limit": state.limit,
                "spent": round(state.spent, 9),
                "remaining": round(state.remaining, 9),
                "resets_at": state.resets_at,
            }
            for state in found.budgets
        ],
        "worst_case": found.worst_case,
        "fits": found.fits,
        "reasons": list(found.reasons),
    }


def _capability_json(cap: Capability) -> dict[str, Any]:
    return {
        "model": cap.model,
        "provider": cap.provider,
        "supported_efforts": [e.value for e in cap.supported_efforts],
        "default_effort": cap.default_effort.value if cap.default_effort else None,
        "budget_min": cap.budget_min,
        "budget_max": cap.budget_max,
        "max_output_tokens": cap.max_output_tokens,
        "context_window": cap.context_window,
        "evidence": cap.evidence,
        "aliases": list(cap.aliases),
    }


def _budget_range(cap: Capability) -> str:
    if cap.budget_min is None and cap.budget_max is None:
        return "-"
    low = "" if cap.budget_min is None else str(cap.budget_min)
    high = "" if cap.budget_max is None else str(cap.budget_max)
    return f"{low}-{high}"


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        # Piped output has no width to fit; one line per row reads better in logs.
        console.width = _PIPE_WIDTH
    return console


def _store(args: argparse.Namespace) -> CapabilityStore | None:
    try:
        return open_store(args.store)
    except ValueError as exc:
        print(f"polythink models: {exc}", file=sys.stderr)
        return None


def _tiers(efforts: Sequence[Effort]) -> str:
    return " ".join(e.value for e in efforts) or "-"


def _cmd_models_forget(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    dropped = store.forget(args.model, args.forget_provider)
    if not dropped:
        print(f"nothing learned or imported about {args.model!r} in {store.path or 'memory'}")
        return EXIT_FAILED
    print(f"forgot {dropped} entr{'y' if dropped == 1 else 'ies'} about {args.model!r}")
    return EXIT_OK


def _cmd_models_import(args: argparse.Namespace) -> int:
    from polythink.importers import find_litellm_map, import_litellm

    if args.catalogue == "openrouter" and args.file is None:
        print(
            "polythink models import: error: openrouter needs FILE.json, an OpenRouter "
            "/api/v1/models document",
            file=sys.stderr,
        )
        return EXIT_USAGE
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    try:
        if args.catalogue == "openrouter":
            count, source = store.import_openrouter(args.file), str(args.file)
        else:
            source = str(find_litellm_map(args.file)[0])
            count = import_litellm(store, args.file)
    except ValueError as exc:
        print(f"polythink models import: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"imported {count} models from {source} into {store.path or 'memory'}")
    return EXIT_OK


def _cmd_levels(args: argparse.Namespace, store: CapabilityStore) -> int:
    provider = get_provider(args.provider).serves if args.provider else None
    found = store.levels(args.levels, provider, args.base_url)
    if args.json:
        result = {
            "model": args.levels,
            "levels": [e.value for e in found.levels],
            "default": found.default.value if found.default else None,
            "origin": found.origin,
        }
        print(json.dumps(result, ensure_ascii=False))
        return EXIT_OK
    if not found.levels:
        print(f"{args.levels}: no reasoning control ({found.origin})")
        return EXIT_OK
    default = found.default.value if found.default else "-"
    print(f"{args.levels}: {_tiers(found.levels)} (default {default}; {found.origin})")
    return EXIT_OK


_UNSCOPED = "unknown (recorded before scoping; applies to no call)"
"""What ``models --learned`` shows as the endpoint of an observation from a format-1 file."""


def _endpoint_shown(origin: str, endpoint: str | None) -> str:
    """The endpoint an entry applies to, as ``models --learned`` shows it."""
    if endpoint is not None:
        return endpoint
    return "any" if origin == "imported" else _UNSCOPED


def _learned_rows(store: CapabilityStore) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for entry in store.entries():
        shipped = get_capability(entry.model)
        cap = entry.capability
        rows.append(
            {
                "kind": entry.origin,
                "model": entry.model,
                "provider": entry.provider,
                "endpoint": _endpoint_shown(entry.origin, entry.endpoint),
                "tiers": [e.value for e in cap.supported_efforts] if cap else None,
                "registry": [e.value for e in shipped.supported_efforts] if shipped else None,
                "evidence": entry.evidence,
                "date": entry.date,
            }
        )
    for hint in store.suspicions():
        if hint.kind == "reasoned_when_off":
            seen = "reasoned although asked none"
        else:
            seen = "reported 0 reasoning tokens"
        rows.append(
            {
                "kind": "suspected",
                "model": hint.model,
                "provider": hint.provider,
                "endpoint": _endpoint_shown("observed", hint.endpoint),
                "tier": hint.tier,
                "contradiction": hint.kind,
                "count": hint.count,
                "evidence": (
                    f"{hint.count} answers at reasoning_effort={hint.tier!r} "
                    f"{seen}"
                    f" ({hint.first_seen} to {hint.last_seen}); the registry entry says: "
                    f"{hint.registry}"
                ),
                "date": hint.last_seen,
            }
        )
    return rows


def _cmd_learned(args: argparse.Namespace, store: CapabilityStore) -> int:
    rows = _learned_rows(store)
    if args.provider is not None:
        rows = [r for r in rows if r["provider"] in (None, args.provider)]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(f"nothing learned, imported or suspected in {store.path or 'memory'}")
        return EXIT_OK
    table = Table(title=f"learned capabilities ({store.path or 'memory'})", title_justify="left")
    for name in ("kind", "model", "provider", "endpoint", "now", "registry", "evidence"):
        table.add_column(name, overflow="fold")
    for row in rows:
        if row["kind"] == "suspected":
            now, registry = f"suspect at {row['tier']}", "-"
        else:
            tiers = row["tiers"]
            now = "no reasoning parameter" if tiers is None else " ".join(tiers)
            registry = " ".join(row["registry"]) if row["registry"] else "-"
        cells = (
            row["kind"],
            row["model"],
            row["provider"] or "any",
            row["endpoint"],
            now,
            registry,
            row["evidence"],
        )
        table.add_row(*(Text(cell) for cell in cells))
    _console().print(table)
    return EXIT_OK


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]], empty: str) -> int:
    """Print ``rows`` as JSON (``--json``) or one aligned line each (their values in order)."""
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print(empty)
        return EXIT_OK
    cells = [[str(v) if v is not None else "-" for v in row.values()] for row in rows]
    cells.insert(0, list(rows[0]))
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]) - 1)]
    for line in cells:
        print("  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[-1]]))
    return EXIT_OK


def _retired_rows(store: CapabilityStore, provider: str | None) -> list[dict[str, Any]]:
    today = store.today()
    rows = []
    for cap in all_capabilities(provider):
        state = lifecycle_status(cap, today)
        if state == "current":
            continue
        rows.append(
            {
                "provider": cap.provider,
                "model": cap.model,
                "status": state,
                "deprecated": cap.deprecated,
                "shutdown": cap.shutdown,
                "replacement": cap.replacement,
            }
        )
    return sorted(rows, key=lambda r: (r["status"] != "retired", r["shutdown"] or "", r["model"]))


def _cmd_retired(args: argparse.Namespace, store: CapabilityStore) -> int:
    provider = get_provider(args.provider).serves if args.provider else None
    rows = _retired_rows(store, provider)
    return _print_rows(args, rows, f"no deprecated or retired model as of {store.today()}")


def _stale_rows(
    store: CapabilityStore, provider: str | None, older_than: int
) -> list[dict[str, Any]]:
    """The registry entries to review, each with every reason it is listed."""
    today = datetime.date.fromisoformat(store.today())
    reasons: dict[str, list[str]] = {}
    caps = {cap.model: cap for cap in all_capabilities(provider)}
    for cap in caps.values():
        found = reasons.setdefault(cap.model, [])
        checked = cap.checked
        if checked is None:
            found.append("no checked date")
        elif (today - datetime.date.fromisoformat(checked)).days > older_than:
            found.append(
                f"checked {checked}, {(today - datetime.date.fromisoformat(checked)).days} days ago"
            )
        if lifecycle_status(cap, today) == "retired":
            instead = f", replacement {cap.replacement}" if cap.replacement else ""
            found.append(f"shut down {cap.shutdown}{instead}")
    for entry in store.entries():
        shipped = get_capability(entry.model)
        if shipped is None or shipped.model not in caps:
            continue
        now = entry.capability.supported_efforts if entry.capability is not None else ()
        if entry.capability is None or now != shipped.supported_efforts:
            tiers = " ".join(t.value for t in now) if now else "no reasoning parameter"
            where = f"on {entry.provider}" if entry.origin == "observed" else "by an import"
            reasons[shipped.model].append(
                f"contradicted {where} {entry.date}: {tiers} ({entry.evidence})"
            )
    for refreshed in store.catalogue.entries() if store.catalogue is not None else ():
        shipped = get_capability(refreshed.model)
        if shipped is None or shipped.model not in caps:
            continue
        if shipped.evidence.lower().startswith("inferred"):
            continue
        now = refreshed.capability.supported_efforts if refreshed.capability is not None else ()
        if now != shipped.supported_efforts:
            tiers = " ".join(t.value for t in now) if now else "no reasoning parameter"
            reasons[shipped.model].append(
                f"contradicted by the refreshed {refreshed.source} catalogue: {tiers} "
                f"({refreshed.evidence})"
            )
    for hint in store.suspicions():
        shipped = get_capability(hint.model)
        if shipped is not None and shipped.model in caps:
            reasons[shipped.model].append(
                f"suspected on {hint.provider}: {hint.count} answers at {hint.tier} contradicted it"
            )
    return [
        {"provider": caps[model].provider, "model": model, "reasons": "; ".join(why)}
        for model, why in reasons.items()
        if why
    ]


def _cmd_stale(args: argparse.Namespace, store: CapabilityStore) -> int:
    provider = get_provider(args.provider).serves if args.provider else None
    days = _STALE_DAYS if args.older_than is None else args.older_than
    rows = _stale_rows(store, provider, days)
    report = _last_refresh(store)
    if report is not None:
        rows += _refresh_rows(report, provider)
        if not args.json:
            for source in report.sources:
                print(f"refresh {report.at}  {source.source}: {source.status}: {source.message}")
    return _print_rows(args, rows, f"nothing to review as of {store.today()}")


def _last_refresh(store: CapabilityStore) -> Any:
    from polythink.refresh import last_report

    return None if store.catalogue is None else last_report(store.catalogue.directory)


def _refresh_rows(report: Any, provider: str | None) -> list[dict[str, Any]]:
    """The models whose tiers the last catalogue refresh changed (added and removed models
    are counted in its message, not listed)."""
    rows = []
    for source in report.sources:
        for change in source.changes:
            if change.before is None or change.after is None:
                continue
            shipped = get_capability(change.model)
            owner = shipped.provider if shipped is not None else None
            if provider is not None and owner not in (None, provider):
                continue
            rows.append(
                {
                    "provider": owner,
                    "model": change.model,
                    "reasons": f"changed by the {source.source} refresh of {report.at[:10]}: "
                    f"{change.describe().split(': ', 1)[1]}",
                }
            )
    return rows


def _cmd_refresh(args: argparse.Namespace, store: CapabilityStore) -> int:
    from polythink.refresh import refresh

    if store.catalogue is None:
        print(
            "polythink models: the capability store is in memory only "
            "(POLYTHINK_CAPABILITIES=off): there is no cache directory to refresh into",
            file=sys.stderr,
        )
        return EXIT_FAILED
    report = refresh(store.catalogue.directory)
    if args.json:
        from polythink.refresh import report_json

        print(json.dumps(report_json(report), ensure_ascii=False))
        return EXIT_OK if report.ok else EXIT_FAILED
    for source in report.sources:
        print(f"{source.source}: {source.status}: {source.message}")
        added = [c for c in source.changes if c.before is None]
        removed = [c for c in source.changes if c.after is None]
        changed = [c for c in source.changes if c.before is not None and c.after is not None]
        if added or removed:
            print(f"  {len(added)} added, {len(removed)} removed")
        for change in changed:
            print(f"  {change.describe()}")
    return EXIT_OK if report.ok else EXIT_FAILED


def _cmd_models(args: argparse.Namespace) -> int:
    store = _store(args)
    if store is None:
        return EXIT_FAILED
    if args.levels is not None:
        return _cmd_levels(args, store)
    if args.learned:
        return _cmd_learned(args, store)
    if args.retired:
        return _cmd_retired(args, store)
    if args.stale:
        return _cmd_stale(args, store)
    if args.refresh:
        return _cmd_refresh(args, store)
    provider = get_provider(args.provider).serves if args.provider else None
    caps = all_capabilities(provider)
    known = [store.lookup(c.provider, c.model, args.base_url) for c in caps]
    listed = {(c.provider, c.model) for c in caps}
    for entry in store.entries():
        if entry.origin == "imported" and provider not in (None, "openrouter"):
            continue
        if entry.provider is not None and provider not in (None, entry.provider):
            continue
        if get_capability(entry.model) is None and (entry.provider, entry.model) not in listed:
            listed.add((entry.provider, entry.model))
            found = store.lookup(entry.provider, entry.model, args.base_url)
            fallback = Capability(entry.model, (Effort.NONE,), provider=entry.provider)
            caps.append(found.capability or fallback)
            known.append(found)
    if args.json:
        rows = []
        for cap, fact in zip(caps, known, strict=True):
            row = _capability_json(fact.capability or cap)
            row["origin"] = fact.origin
            row["takes_parameter"] = fact.takes_parameter
            rows.append(row)
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not caps:
        print(
            f"no models registered for provider {args.provider!r}; a model of another "
            "provider resolves by its name (polythink resolve --model M)"
        )
        return EXIT_OK
    console = _console()
    table = _models_evidence(caps, known) if args.evidence else None
    cells = _evidence_cells(caps, known)
    if table is not None and console.width >= _WIDE and _renders_whole(table, console.width, cells):
        console.print(table)
    elif args.evidence:
        for line in _models_evidence_blocks(caps, known, console.width):
            print(line)
    else:
        for line in _models_lines(caps, known, console.width):
            print(line)
    return EXIT_OK


def _models_lines(
    caps: Sequence[Capability], known: Sequence[Any], width: int = _PIPE_WIDTH
) -> list[str]:
    """One line per model (provider, model, accepted tiers, default), columns aligned;
    ``?`` for a default that is not known. ``known`` is the store's fact for each entry.

    When the lines would be wider than ``width`` columns, a long tier list wraps onto
    indented continuation lines under the tiers column (the default stays on the model's
    first line), so the listing fits; wide enough, nothing wraps."""
    rows = []
    for shipped, fact in zip(caps, known, strict=True):
        cap = fact.capability or shipped
        rows.append(
            (
                cap.provider or "-",
                cap.model,
                _tiers(cap.supported_efforts) if fact.takes_parameter else "no reasoning parameter",
                cap.default_effort.value if cap.default_effort else "?",
            )
        )
    rows.insert(0, ("provider", "model", "tiers", "default"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lead = widths[0] + 2 + widths[1] + 2
    room = width - lead - 2 - widths[3]
    if widths[2] > room:
        widths[2] = max(room, len("minimal"))
    lines: list[str] = []
    for provider, model, tiers, default in rows:
        parts = _wrap_words(tiers, widths[2])
        head = f"{provider.ljust(widths[0])}  {model.ljust(widths[1])}  "
        lines.append(f"{head}{parts[0].ljust(widths[2])}  {default}")
        lines.extend(" " * lead + part for part in parts[1:])
    return lines


def _wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken between words (a word longer
    than ``width``, such as a URL, is cut into pieces of ``width``)."""
    lines = [""]
    for whole in text.split(" "):
        pieces = [whole[i : i + width] for i in range(0, len(whole), width)] or [""]
        for word in pieces:
            if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
                lines.append(word)
            else:
                lines[-1] = f"{lines[-1]} {word}" if lines[-1] else word
    return lines


def _models_evidence(caps: Sequence[Capability], known: Sequence[Any]) -> Table:
    """The registry as a table with budgets, output limits and the evidence of each entry.

    Its columns wrap between words and cut a longer word with ``…`` (see
    :func:`_renders_whole`, which tells whether anything would be cut)."""
    table = Table(title="polythink capability registry", title_justify="left")
    table.add_column("model")
    table.add_column("provider")
    table.add_column("supported tiers")
    table.add_column("default")
    table.add_column("budget")
    table.add_column("max output", justify="right")
    table.add_column("origin")
    table.add_column("evidence")
    for cells in _evidence_cells(caps, known):
        table.add_row(*(Text(cell) for cell in cells))
    return table


_EVIDENCE_FIELDS = ("tiers", "default", "budget", "max output", "origin", "evidence")


def _evidence_cells(caps: Sequence[Capability], known: Sequence[Any]) -> list[tuple[str, ...]]:
    """(model, provider, tiers, default, budget, max output, origin, evidence) per entry."""
    rows: list[tuple[str, ...]] = []
    for shipped, fact in zip(caps, known, strict=True):
        cap = fact.capability or shipped
        tiers = _tiers(cap.supported_efforts) if fact.takes_parameter else "no reasoning parameter"
        rows.append(
            (
                cap.model,
                cap.provider or "-",
                tiers,
                cap.default_effort.value if cap.default_effort else "?",
                _budget_range(cap),
                str(cap.max_output_tokens) if cap.max_output_tokens is not None else "-",
                fact.origin,
                fact.evidence or cap.evidence,
            )
        )
    return rows


def _models_evidence_blocks(
    caps: Sequence[Capability], known: Sequence[Any], width: int
) -> list[str]:
    """The ``--evidence`` listing for narrow terminals: one block per model, a
    ``model (provider)`` line then one indented ``field  value`` line per field, the
    evidence wrapped between words to ``width`` columns; a blank line between blocks."""
    label = max(len(name) for name in _EVIDENCE_FIELDS)
    indent = 2 + label + 2
    lines: list[str] = []
    for model, provider, *values in _evidence_cells(caps, known):
        if lines:
            lines.append("")
        lines.append(f"{model} ({provider})")
        for name, value in zip(_EVIDENCE_FIELDS, values, strict=True):
            parts = _wrap_words(value, max(width - indent, 20))
            lines.append(f"  {name.ljust(label)}  {parts[0]}")
            lines.extend(" " * indent + part for part in parts[1:])
    return lines


def _cmd_serve(args: argparse.Namespace) -> int:
    # The gateway (aiohttp.web and its front doors) loads with this command only.
    import logging

    from polythink.serve import run
    from polythink.serve.tenancy import hash_key

    if args.new_key or args.hash_key:
        if args.new_key:
            import secrets

            key = "pt-" + secrets.token_urlsafe(32)
            print(f"key:        {key}\nkey_sha256: {hash_key(key)}")
            return 0
        key = sys.stdin.readline().strip()
        if not key:
            print("polythink serve: error: no key on standard input", file=sys.stderr)
            return EXIT_USAGE
        print(hash_key(key))
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("polythink.serve").setLevel(logging.INFO)
    try:
        return run(args.config, host=args.host, port=args.port, workers=args.workers)
    except ImportError as exc:
        print(f"polythink serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, FileNotFoundError) as exc:
        print(f"polythink serve: error: {_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(f"polythink serve: error: cannot listen: {reason}", file=sys.stderr)
        return EXIT_FAILED


def _cmd_simulate(args: argparse.Namespace) -> int:
    from polythink.simulator import Settings
    from polythink.simulator.openai_chat import NOT_PLAYABLE
    from polythink.simulator.server import SimulatorServer

    played = dict(args.play or ())
    for model in played:
        known = get_capability(model)
        if known is not None and known.provider in NOT_PLAYABLE:
            print(
                f"polythink simulate: error: --play {model}: {known.provider}'s API refuses no "
                "reasoning tier (it maps or ignores them), so there is no rejection to play; "
                "--play works for openai, openai-responses, anthropic, gemini, xai, groq, "
                "mistral, minimax and qwen (switching off only)",
                file=sys.stderr,
            )
            return 2
    settings = Settings(latency=args.latency, chunk_delay=args.chunk_delay, capabilities=played)
    server = SimulatorServer(settings)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(signum, stop.set)
        port = await server.start(args.host, args.port)
        root = f"http://{args.host}:{port}"
        print(
            f"polythink simulator listening on {root}; a provider's base URL is "
            f"{root}/{{provider}}/v1 (Ctrl-C stops)",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await server.close()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        return EXIT_OK
    except socket.gaierror as exc:
        # getaddrinfo's own errors (EAI_*): their numbers are not errno values.
        print(
            f"polythink simulate: error: argument --host: cannot resolve {args.host!r} to an "
            f"address ({exc.strerror}); give an IP address such as 127.0.0.1 or a host name",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(
            f"polythink simulate: cannot listen on {args.host}:{args.port}: {reason}",
            file=sys.stderr,
        )
        return EXIT_FAILED
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


_WIDE = 120
"""Terminal columns from which the demo prints its wide table (notes inline, long headers)."""


def _renders_whole(table: Table, width: int, cells: Sequence[Sequence[str]]) -> bool:
    """Whether ``table`` printed in ``width`` columns keeps every word of its ``cells`` whole.

    The table's columns must wrap between words only (``overflow="ellipsis"``, rich's
    default): a word wider than its column is then cut with ``…``, so the table renders
    whole exactly when it holds no more ``…`` than its cells and headers do."""
    buffer = io.StringIO()
    Console(width=width, file=buffer, color_system=None, highlight=False).print(table)
    out = buffer.getvalue()
    own = sum(cell.count("…") for row in cells for cell in row)
    own += sum(str(column.header).count("…") for column in table.columns)
    return out.count("…") <= own


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


def _demo_table(outcomes: Sequence[_Outcome], width: int = _WIDE) -> tuple[Table, list[str]]:
    """The demo's table for a terminal ``width`` columns wide, and its footnotes.

    The wide layout (long headers, borders, each row's notes inline, the long texts as
    numbered footnotes) is used from :data:`_WIDE` columns when it fits ``width`` with
    every word whole; otherwise the compact one: short headers, no borders, and one
    footnote per row that has anything to say, ids broken only after ``-`` or ``/``, so
    the table fits 80 columns. The cost column is what the row's calls spent in US dollars
    (``—`` when a call has no price).
    """
    if width >= _WIDE:
        table, footnotes, cells = _demo_layout(outcomes, compact=False)
        if _renders_whole(table, width, cells):
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
        # shows as "…", which _renders_whole looks for.
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
                f"{error}: {_message(outcome.error)}"
                if compact
                else f"{error} {refer(_message(outcome.error))}"
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


def _cmd_demo(args: argparse.Namespace) -> int:
    from polythink.simulator import Simulator

    if args.chart:
        folder = os.path.dirname(os.path.abspath(args.chart))
        if not os.path.isdir(folder):
            print(f"--chart: the folder {folder} does not exist", file=sys.stderr)
            return EXIT_USAGE
    console = _console()
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
