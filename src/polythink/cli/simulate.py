"""``polythink simulate``: serve the provider simulator (:mod:`polythink.simulator`) in the
foreground until Ctrl-C; ``--play MODEL=TIERS`` answers a model as if it took only those
tiers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import sys

from polythink.cli import arguments
from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from polythink.reasoning import Capability, get_capability

__all__ = ["add_parser"]


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink simulate`` to ``commands``."""
    sim = commands.add_parser(
        "simulate",
        help="serve the provider simulator in the foreground until Ctrl-C",
        description="Serve the simulator; a provider's base URL is http://HOST:PORT/{provider}/v1.",
    )
    sim.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sim.add_argument(
        "--port",
        type=arguments.port,
        default=8787,
        help="port to bind (default 8787; 0 = any free port)",
    )
    sim.add_argument(
        "--latency",
        type=arguments.seconds,
        default=0.0,
        metavar="S",
        help="seconds before each answer",
    )
    sim.add_argument(
        "--chunk-delay",
        type=arguments.seconds,
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
    return sim


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
    efforts = tuple(arguments.effort(name) for name in names)
    base = get_capability(model)
    try:
        if base is None:
            return model, Capability(model, efforts)
        return model, dataclasses.replace(base, supported_efforts=efforts, default_effort=None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
