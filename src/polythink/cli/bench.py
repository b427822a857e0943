"""``polythink bench [--quick] …``: run the benchmark suite, the ``benchmarks`` package of a
source checkout (next to ``src/``, or in the current directory); every argument after
``bench`` goes to it (``polythink bench --help`` lists them). Exit 1 when there is no such
package.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from polythink.cli.arguments import Commands, Parser
from polythink.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

__all__ = ["add_parser", "run"]


def add_parser(commands: Commands) -> Parser:
    """Add ``polythink bench`` to ``commands``."""
    return commands.add_parser(
        "bench",
        help="benchmark polythink against raw httpx and the peer SDKs (from a source checkout)",
        description="Run the benchmark suite of a source checkout; see benchmarks/README.md.",
        add_help=False,
    )


def _benchmarks_root() -> Path | None:
    """The directory holding the ``benchmarks`` package: the checkout's, else the cwd's."""
    checkout = Path(__file__).resolve().parents[3]
    for root in (checkout, Path.cwd()):
        if (root / "benchmarks" / "run.py").is_file():
            return root
    return None


def run(argv: Sequence[str]) -> int:
    """Run ``polythink bench`` with the arguments after ``bench`` (the suite parses them)."""
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
