"""The benchmark simulator's control API counts provider calls only."""

from __future__ import annotations

import anyio
import httpx
import pytest

from benchmarks.simproc import SimProcess

pytestmark = pytest.mark.anyio

BODY = {"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]}


async def test_the_most_in_flight_read_mid_run_leaves_the_control_request_out() -> None:
    """Three calls held 0.5 s by the simulator; the statistics are read while they run."""
    with SimProcess() as sim:
        async with httpx.AsyncClient(base_url=sim.root, timeout=10) as http:
            await http.post("/_bench/settings", json={"latency": 0.5})
            await http.post("/_bench/reset")
            statuses: list[int] = []

            async def call() -> None:
                answer = await http.post(
                    "/openai/v1/chat/completions",
                    json=BODY,
                    headers={"authorization": "Bearer sk-sim"},
                )
                statuses.append(answer.status_code)

            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(call)
                await anyio.sleep(0.25)
                during = (await http.get("/_bench/stats")).json()
            after = (await http.get("/_bench/stats")).json()
            await http.post("/_bench/reset")
            reset = (await http.get("/_bench/stats")).json()
    assert statuses == [200, 200, 200]
    assert (during["requests"], during["max_in_flight"]) == (3, 3)
    assert (after["requests"], after["max_in_flight"]) == (3, 3)
    assert (reset["requests"], reset["max_in_flight"]) == (0, 0)
