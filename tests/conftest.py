"""Shared fixtures: the anyio backend and access to the recorded provider traffic.

Recorded traffic lives outside the repository at ``../shared/fixtures/real/`` (relative to
the repository root). When it is absent the tests that need it skip with the reason, or fail
under ``POLYTHINK_TESTS_NO_SKIP=1`` (:mod:`tests.prerequisites`; ``.ci/run`` sets it).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import anyio
import anyio.lowlevel
import pytest
import respx.mocks

from polythink.middleware.retry import RetryMiddleware
from polythink.reasoning import capabilities as registry
from tests.cassettes import Cassette
from tests.prerequisites import NO_SKIP, missing, no_skip

# respx patches httpcore by default, which only intercepts httpx's own pool; patching the
# client instead intercepts whatever carries its requests (aiohttp's pool by default).
respx.mocks.DEFAULT_MOCKER = "httpx"

# pytest-xdist's workers run with COLUMNS=80 and LINES=24 set; a plain run has neither. The
# CLI's output follows COLUMNS, and the tests that depend on it set it themselves.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

# No test, fixture of any scope or subprocess fetches the model catalogues from the network
# (tests/test_refresh.py serves them on loopback and turns the refresh on itself).
os.environ["POLYTHINK_REFRESH"] = "off"

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "fixtures" / "real"
SPECS = ROOT.parent / "shared" / "wire" / "specs"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shared_file(path: Path) -> Path:
    """Return ``path`` if it exists; otherwise skip (or fail, see :func:`missing`)."""
    if not path.exists():
        missing(f"shared fixture {path} is not available (expected next to the repository)")
    return path


def sdk_module(name: str) -> ModuleType:
    """Import an official SDK's module (``openai``, ``anthropic``, ``google-genai``: the dev
    extra); without it the calling module skips (or fails, see :func:`missing`)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"{name} is not installed ({exc}); pip install -e '.[dev]'"
        if no_skip():
            pytest.fail(f"{message} ({NO_SKIP} is set, so this fails instead of skipping)")
        pytest.skip(message, allow_module_level=True)


def cassette(name: str) -> Cassette:
    """Load the recording ``name`` from ../shared/fixtures/real (skip or fail if absent)."""
    return Cassette.load(shared_file(REAL / name))


async def _no_wait(seconds: float) -> None:
    await anyio.lowlevel.checkpoint()


@pytest.fixture(autouse=True)
def instant_retry_backoff(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the retry layer's backoff waits instant in clients built by tests.

    Tests that assert exact waits inject their own ``sleep`` into ``RetryMiddleware``;
    everywhere else a real 0.5-8 s backoff would only slow the suite. A test that needs the
    real wait is marked ``@pytest.mark.real_backoff``. A retried 429 with a ``retry-after``
    still waits that long in real time: it pauses the source, and the rate-limit layer holds
    the retry until the pause ends.
    """
    if request.node.get_closest_marker("real_backoff"):
        return
    defaults = dict(RetryMiddleware.__init__.__kwdefaults__ or {})
    defaults["sleep"] = _no_wait
    monkeypatch.setattr(RetryMiddleware.__init__, "__kwdefaults__", defaults)


@pytest.fixture(autouse=True)
def private_capability_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the per-user capability store at a file of this test's own temporary directory,
    so no test reads or writes the real user cache directory."""
    path = tmp_path / "capabilities.json"
    monkeypatch.setenv("POLYTHINK_CAPABILITIES", str(path))
    return path


@pytest.fixture
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test register capabilities without leaking them into other tests."""
    entries = registry._load()
    monkeypatch.setattr(registry, "_entries", dict(entries))
    monkeypatch.setattr(registry, "_index", dict(registry._index))
