"""Shared fixtures: the anyio backend and access to the recorded provider traffic.

Recorded traffic lives outside the repository at ``../shared/fixtures/real/`` (relative to
the repository root). When it is absent the tests that need it skip with the reason, except
under ``CI=true``, where a missing recording fails the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import respx.mocks

from tests.cassettes import Cassette

# respx patches httpcore by default, which only intercepts httpx's own pool; patching the
# client instead intercepts whatever carries its requests (aiohttp's pool by default).
respx.mocks.DEFAULT_MOCKER = "httpx"

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "fixtures" / "real"
SPECS = ROOT.parent / "shared" / "wire" / "specs"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shared_file(path: Path) -> Path:
    """Return ``path`` if it exists; otherwise skip (or fail under CI=true)."""
    if path.exists():
        return path
    message = f"shared fixture {path} is not available (expected next to the repository)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def cassette(name: str) -> Cassette:
    """Load the recording ``name`` from ../shared/fixtures/real (skip or fail if absent)."""
    return Cassette.load(shared_file(REAL / name))
