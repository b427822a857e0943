"""One simulator for a test module, put back to plain answers before each test.

A module that uses them names both (``sim, clean = sim_support.sim, sim_support.clean``):
``sim`` serves the module, ``clean`` (autouse) clears faults, counters and the settings a
test may have changed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import FaultPlan

ANSWER_WORDS = 10
"""Words in every answer unless a test asks for more: enough for the prompt to show."""


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=ANSWER_WORDS)) as simulator:
        yield simulator


@pytest.fixture(autouse=True)
def clean(sim: Simulator) -> Iterator[None]:
    sim.settings.faults = FaultPlan()
    sim.stats.reset()
    yield
    sim.settings.faults = None
    sim.settings.latency = 0.0
    sim.settings.chunk_delay = 0.0
    sim.settings.answer_words = ANSWER_WORDS
