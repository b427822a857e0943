"""A worker process for the crowd test: ``python -m tests.crowd_worker PLAN``.

``PLAN`` is JSON: ``redis`` (the URL of shared limits, cache and budgets, as a user would
give it), ``tasks`` (calls made at once, one each) and ``socket_timeout`` (of the stores). The
provider is an in-process ``httpx.MockTransport`` answering at once, so the process spends
its time on polythink and Redis, not on HTTP. It prints ``{"event": "ready"}``, waits for a
line on stdin, makes every call at once and prints one JSON summary: calls answered, errors
by class and ``error_type``, the warnings polythink logged, and the seconds it took.
"""

from __future__ import annotations

import collections
import json
import logging
import sys
import time
from typing import Any

import anyio
import httpx

from polythink import Budget, Client, PolythinkError, Source
from polythink.backends.redis import RedisCache, RedisLimitStore

ANSWER = {
    "id": "chatcmpl-crowd",
    "object": "chat.completion",
    "model": "gpt-5.5",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "2, 3, 5"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 8},
}


def answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json=ANSWER)


class Kept(logging.Handler):
    """Keeps the messages of the records at WARNING and above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def run(plan: dict[str, Any]) -> None:
    kept = Kept()
    logging.getLogger("polythink").addHandler(kept)
    source = Source(
        "openai",
        "gpt-5.5",
        api_key="sk-crowd-0001",
        base_url="http://127.0.0.1:9/v1",
        rpm=1_000_000,
        tpm=1_000_000_000,
        max_concurrency=100_000,
    )
    timeout = plan["socket_timeout"]
    client = Client(
        [source],
        limits=RedisLimitStore(plan["redis"], socket_timeout=timeout),
        cache=RedisCache(plan["redis"], socket_timeout=timeout),
        budgets=[Budget(1000.0, "day")],
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
    )
    outcomes: collections.Counter[str] = collections.Counter()
    async with client:
        print(json.dumps({"event": "ready"}), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        began, cpu = time.monotonic(), time.process_time()

        async def one(number: int) -> None:
            try:
                await client.complete(
                    [{"role": "user", "content": f"Name three primes #{number}"}],
                    max_tokens=50,
                    timeout=120,
                )
            except PolythinkError as exc:
                outcomes[f"{type(exc).__name__}/{exc.error_type}"] += 1
            else:
                outcomes["ok"] += 1

        async with anyio.create_task_group() as group:
            for number in range(plan["tasks"]):
                group.start_soon(one, number)
        took, used = time.monotonic() - began, time.process_time() - cpu
    summary = {"outcomes": outcomes, "warnings": kept.messages, "seconds": took, "cpu": used}
    print(json.dumps(summary))


if __name__ == "__main__":
    anyio.run(run, json.loads(sys.argv[1]))
