"""The ``polythink`` command line: ``demo``, ``resolve``, ``models``, ``simulate``, ``serve`` and
``bench``, one module each.

- ``polythink demo`` (:mod:`polythink.cli.demo`) runs calls across providers, models and
  tiers through :class:`~polythink.Client` against the simulator, one table row per call.
- ``polythink resolve`` (:mod:`polythink.cli.resolve`) prints the applied tier and the
  request-body fragment a client would send, without any network, and under ``--budget``
  the tier a call would get now and why.
- ``polythink models`` (:mod:`polythink.cli.models`) prints the capability registry with where
  each fact comes from, what was learned on the wire, retired and stale entries; ``models
  forget`` and ``models import`` edit the capability store.
- ``polythink simulate`` (:mod:`polythink.cli.simulate`) serves the simulator in the
  foreground until Ctrl-C.
- ``polythink serve`` (:mod:`polythink.cli.serve`) runs the gateway.
- ``polythink bench`` (:mod:`polythink.cli.bench`) runs the benchmark suite of a source
  checkout.

Each command's module adds its parser (``add_parser``) and handles its arguments; they print
through :mod:`polythink.cli.output` and read arguments with :mod:`polythink.cli.arguments`.
Bad arguments print one line to stderr and exit 2. This package, and ``rich`` with it, is
imported only by the console script, never by ``import polythink``; the gateway only by
``polythink serve``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Sequence

from polythink import __version__
from polythink.cli import bench, demo, models, resolve, serve, simulate
from polythink.cli.arguments import BUDGET_SPEC, Parser, UsageError
from polythink.cli.demo import DEMO_CALLS, DemoCall, DemoMode
from polythink.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["DEMO_CALLS", "DemoCall", "DemoMode", "build_parser", "main"]


def _parser() -> tuple[Parser, dict[str, Parser]]:
    parser = Parser(
        prog="polythink",
        description="One reasoning-effort vocabulary across LLM providers.",
    )
    parser.add_argument("--version", action="version", version=f"polythink {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command", parser_class=Parser)
    # In the order ``polythink --help`` lists them.
    return parser, {
        "demo": demo.add_parser(commands),
        "resolve": resolve.add_parser(commands),
        "models": models.add_parser(commands),
        "simulate": simulate.add_parser(commands),
        "serve": serve.add_parser(commands),
        "bench": bench.add_parser(commands),
    }


def build_parser() -> argparse.ArgumentParser:
    """The ``polythink`` argument parser, every command and option with its help.

    The documentation's command-line reference is rendered from it at build time, so the
    page cannot drift from what the command accepts. ``bench`` hands its arguments to the
    benchmark suite's own parser (``benchmarks/run.py``) and has none of its own here.
    """
    return _parser()[0]


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
        return bench.run(arguments[1:])
    parser, commands = _parser()
    try:
        for flag, value in itertools.pairwise(arguments):
            if flag == "--budget" and value[:1] == "-" and value[1:2] in "0123456789.":
                # argparse takes "-5/day" for an option and says "expected one argument".
                commands["resolve"].error(
                    f"argument --budget: expected {BUDGET_SPEC}, got {value!r}"
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
    except UsageError as exc:
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
