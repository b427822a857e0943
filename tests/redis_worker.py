"""A worker process for the shared-limits tests: ``python -m tests.redis_worker PLAN``.

``PLAN`` is JSON: ``redis`` (URL of the shared limits, or null), ``lease``,
``retry_interval`` (seconds) and ``workers`` for them,
``cache`` (URL or null), ``cache_lease`` (seconds a cache fill lease lasts), ``source``
(``base_url``, ``api_key``, ``rpm``, ``tpm``, ``max_concurrency``, ``headers``,
``max_retries``, ``latency``: seconds the simulator waits before answering this source,
set after the cache), ``start_at`` (epoch seconds to begin),
``wait_go`` (print ``{"event": "ready"}``, then begin once a line arrives on stdin),
``until`` (epoch seconds to stop starting calls; each call's timeout ends there too),
``seconds`` (the same, counted from the start) or ``calls`` (calls per task), ``tasks``
(concurrent tasks), ``stream`` (a flag, or one flag per call number, cycled),
``max_tokens``, ``prompt``, ``vary`` (append the call number to the prompt), ``log``
(polythink's INFO log lines on stderr) and ``stop_on_stdin`` (the run ends, as at
``until``, when a further line arrives on stdin: the test ends each phase when what it waits
for has happened, however long that took on a busy machine).

It prints one JSON line per call (``start``/``end`` epoch seconds, ``ok``, the error class
and ``error_type``, usage, ``cache_hit`` and the streamed events) and
``{"event": "streaming"}`` at the first event of its first stream.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from contextlib import aclosing
from typing import Any

import anyio

from polythink import Client, Source
from polythink.backends.redis import RedisCache, RedisLimitStore
from polythink.errors import PolythinkError
from tests.redis_support import SimLatency


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def run(plan: dict[str, Any]) -> None:
    if plan.get("log"):
        logging.basicConfig(level=logging.INFO, format="%(created).3f %(message)s")
    spec = plan["source"]
    source = Source(
        "openai",
        "gpt-5.5",
        api_key=spec["api_key"],
        base_url=spec["base_url"],
        rpm=spec.get("rpm"),
        tpm=spec.get("tpm"),
        max_concurrency=spec.get("max_concurrency"),
        headers=spec.get("headers"),
        max_retries=spec.get("max_retries"),
        middleware=[SimLatency(spec["latency"])] if spec.get("latency") else [],
    )
    limits = None
    if plan.get("redis"):
        # A loaded test machine may starve a worker past the default socket timeout; these
        # tests are about the shared path, so they give Redis longer before falling back.
        fleet = {"workers": plan["workers"]} if plan.get("workers") else {}
        limits = RedisLimitStore(
            plan["redis"],
            lease=plan.get("lease", 10.0),
            socket_timeout=2.0,
            retry_interval=plan.get("retry_interval", 1.0),
            **fleet,
        )
    announced = False
    cache = plan.get("cache")
    if cache and plan.get("cache_lease"):
        cache = RedisCache(cache, lease=plan["cache_lease"])
    async with Client([source], limits=limits, cache=cache) as client:
        start_at = plan.get("start_at")
        if start_at is not None:
            await anyio.sleep(max(0.0, start_at - time.time()))
        if plan.get("wait_go"):
            emit({"event": "ready"})
            await anyio.to_thread.run_sync(sys.stdin.readline)
        until = plan.get("until")
        if plan.get("seconds") is not None:
            until = time.time() + plan["seconds"]

        async def one(task: int, n: int) -> bool:
            nonlocal announced
            prompt = plan.get("prompt", "Name three primes")
            if plan.get("vary"):
                prompt = f"{prompt} #{task}-{n}"
            timeout = None if until is None else until - time.time()
            if timeout is not None and timeout <= 0:
                return False
            record: dict[str, Any] = {"event": "call", "task": task, "start": time.time()}
            messages = [{"role": "user", "content": prompt}]
            try:
                streamed = plan.get("stream")
                if isinstance(streamed, list):
                    streamed = streamed[n % len(streamed)]
                if streamed:
                    events = []
                    stream = client.stream(
                        messages, max_tokens=plan.get("max_tokens"), timeout=timeout or 30.0
                    )
                    async with aclosing(stream) as iterator:
                        async for event in iterator:
                            if not announced:
                                announced = True
                                emit({"event": "streaming", "at": time.time()})
                            events.append([event.type, event.text])
                            if event.response is not None:
                                answer = event.response
                    record["events"] = events
                else:
                    answer = await client.complete(
                        messages, max_tokens=plan.get("max_tokens"), timeout=timeout or 30.0
                    )
            except PolythinkError as exc:
                record.update(ok=False, error=type(exc).__name__, error_type=exc.error_type)
                record["end"] = time.time()
                emit(record)
                return False
            usage = answer.usage
            record.update(
                ok=True,
                end=time.time(),
                cache_hit=answer.cache_hit,
                text=answer.text,
                usage=None if usage is None else [usage.input_tokens, usage.output_tokens],
            )
            emit(record)
            return True

        async def task(i: int) -> None:
            n = 0
            while plan.get("calls") is None or n < plan["calls"]:
                if not await one(i, n) and until is not None:
                    return
                n += 1

        async def stop() -> None:
            nonlocal until
            await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            until = time.time()

        async with anyio.create_task_group() as group:
            if plan.get("stop_on_stdin"):
                group.start_soon(stop)
            async with anyio.create_task_group() as tg:
                for i in range(plan.get("tasks", 1)):
                    tg.start_soon(task, i)
            group.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(run, json.loads(sys.argv[1]))
