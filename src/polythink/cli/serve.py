"""``polythink serve``: run the gateway, the OpenAI Chat and Responses and Anthropic Messages
front doors over the configured sources (:mod:`polythink.serve`); ``--new-key`` and
``--hash-key`` make and hash a tenant's key.

The gateway, and aiohttp.web with it, is imported when the command runs, never by
``import polythink.cli``.
"""

from __future__ import annotations

import argparse
import os
import sys

from polythink.cli import arguments
from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import EXIT_FAILED, EXIT_USAGE, error_message

__all__ = ["add_parser"]


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink serve`` to ``commands``."""
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
        type=arguments.positive_int,
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
        type=arguments.port,
        default=None,
        help="port to bind (default: [serve] port, else 4000; 0 = any free port)",
    )
    serve.set_defaults(handler=_cmd_serve)
    return serve


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
        print(f"polythink serve: error: {error_message(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        print(f"polythink serve: error: cannot listen: {reason}", file=sys.stderr)
        return EXIT_FAILED
