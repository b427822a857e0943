"""A worker process for the shared-budget tests: ``python -m tests.budget_worker PLAN``.

``PLAN`` is JSON: ``redis`` (URL of the shared limits), ``retry_interval`` (seconds, for
them), ``base_url`` (the simulator's OpenAI route), ``usd`` and ``name`` (one daily budget),
``tasks`` (concurrent tasks), ``calls`` (the most each task makes), ``max_tokens``,
``effort``, ``wait_go`` (print ``{"event": "ready"}``, then begin once a line arrives on
stdin), ``log`` (polythink's INFO log lines on stderr), ``seconds`` and ``stop_on_stdin``
(the run ends, as if ``seconds`` were over, when a further line arrives on stdin: the test
ends each phase when what it waits for has happened, however long that took).

Each task calls until the budget refuses it; with ``seconds``, it goes on until that many
seconds after it began, a refused call waiting 0.05 s before the next. The worker prints one
JSON line per call: ``ok``, when it ended (``at``, Unix seconds), the response's usage and
model, or the error class, and the refusal's fields.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import anyio

from polythink import Budget, BudgetExceededError, Client, Source
from polythink.backends.redis import RedisLimitStore


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def run(plan: dict[str, Any]) -> None:
    if plan.get("log"):
        logging.basicConfig(level=logging.INFO, format="%(created).3f %(message)s")
    source = Source("openai", "gpt-5.5", api_key="sk-budget-fleet", base_url=plan["base_url"])
    # A loaded test machine may starve a worker past the default socket timeout; this test is
    # about the shared path, so it gives Redis longer before falling back.
    limits = RedisLimitStore(
        plan["redis"], socket_timeout=2.0, retry_interval=plan.get("retry_interval", 1.0)
    )
    budget = Budget(plan["usd"], "day", name=plan["name"])
    async with Client([source], limits=limits, budgets=[budget]) as client:
        if plan.get("wait_go"):
            emit({"event": "ready"})
            await anyio.to_thread.run_sync(sys.stdin.readline)

        until = time.time() + plan.get("seconds", 0.0)

        async def stop() -> None:
            nonlocal until
            await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            until = time.time()

        async def task(number: int) -> None:
            for _ in range(plan["calls"]):
                try:
                    response = await client.complete(
                        [{"role": "user", "content": f"Name three primes #{number}"}],
                        reasoning_effort=plan["effort"],
                        max_tokens=plan["max_tokens"],
                    )
                except BudgetExceededError as exc:
                    emit(
                        {
                            "event": "call",
                            "ok": False,
                            "at": time.time(),
                            "error": type(exc).__name__,
                            "error_type": exc.error_type,
                            "spent": exc.spent,
                            "needed": exc.needed,
                            "message": exc.message,
                        }
                    )
                    if time.time() >= until:
                        return
                    await anyio.sleep(0.05)
                    continue
                usage = response.usage
                assert usage is not None
                emit(
                    {
                        "event": "call",
                        "ok": True,
                        "at": time.time(),
                        "model": response.model,
                        "input_tokens": usage.input_tokens,
                        "output_tokens": usage.output_tokens,
                        "cache_read_tokens": usage.cache_read_tokens,
                    }
                )

        async with anyio.create_task_group() as group:
            if plan.get("stop_on_stdin"):
                group.start_soon(stop)
            async with anyio.create_task_group() as tasks:
                for number in range(plan["tasks"]):
                    tasks.start_soon(task, number)
            group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(run, json.loads(sys.argv[1]))
