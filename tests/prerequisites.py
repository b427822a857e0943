"""What a test needs from outside the repository, and what happens without it.

Some tests need things a plain clone does not have: the recorded provider traffic next to the
repository (``../shared/fixtures/real/``, with ``../shared/wire/specs/``), Debian's
``redis-server`` and ``prometheus``. Without them those tests skip with the reason, except
when ``POLYTHINK_TESTS_NO_SKIP=1`` (``.ci/run`` sets it), where a missing prerequisite fails
the run, so a CI that should have everything cannot pass by skipping. The variable is the
project's own: a CI's generic ``CI=true`` does not turn skips into failures.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

NO_SKIP = "POLYTHINK_TESTS_NO_SKIP"
"""The environment variable that turns a missing prerequisite from a skip into a failure."""


def no_skip() -> bool:
    """Whether :data:`NO_SKIP` is set to ``1``, ``true`` or ``yes``."""
    return os.environ.get(NO_SKIP, "").strip().lower() in ("1", "true", "yes")


def missing(message: str) -> NoReturn:
    """Skip the current test for ``message`` (what is missing, and how to get it), or fail
    it when :func:`no_skip`."""
    if no_skip():
        pytest.fail(f"{message} ({NO_SKIP} is set, so this fails instead of skipping)")
    pytest.skip(message)
