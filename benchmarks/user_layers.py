"""What one middleware layer of the caller's own costs per call, beside the built-in fold.

``python -m benchmarks.user_layers`` prints one JSON object; the layers scenario of
``python -m benchmarks`` runs it in a fresh process and reports it.

In-process, no HTTP: the chain ends in a handler that answers at once (a prebuilt
``Response``, or a stream of ``events`` prebuilt events ending with ``done``), so what is
timed is the fold alone. Five chains around that handler:

- ``none``: no layer (the floor);
- ``passthrough``: the built-in :class:`~polythink.Passthrough` folded as polythink folds its
  own layers (no checks);
- ``noop-unchecked``: :class:`NoOpLayer` (below) folded as a built-in layer is: what the
  layer's own code costs;
- ``user-noop``: the same :class:`NoOpLayer` as a layer of the caller's own, folded as
  ``Client(middleware=[...])`` folds it, with the contract checks around it (the difference
  from ``noop-unchecked`` is the price of the checks);
- ``user-inherited``: a ``Passthrough`` subclass that overrides nothing, given as a user
  layer (its methods are left out of the chain).

Each chain makes ``calls`` complete calls and ``streams`` streams per round; rounds rotate the
order of the chains, and the fastest of ``rounds`` rounds is reported (as ``timeit`` advises:
the others measure the machine's other work), in seconds per call and per event
(``time.perf_counter``; one process, one event loop, nothing else running in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from polythink import CompleteNext, Message, Passthrough, Request, Response, StreamEvent, StreamNext
from polythink.middleware.base import Chain, compose, user_layers

__all__ = ["NoOpLayer", "measure"]


class NoOpLayer(Passthrough):
    """The cheapest layer a user can write that overrides both methods: it forwards
    everything (``complete`` awaits ``call_next``; ``stream`` yields each event)."""

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(request)

    async def stream(
        self, request: Request, call_next: StreamNext
    ) -> AsyncGenerator[StreamEvent, None]:
        async for event in call_next(request):
            yield event


class _Answer:
    """The innermost handler: answers at once with prebuilt values."""

    def __init__(self, events: int) -> None:
        self.response = Response(
            text="ok",
            reasoning=None,
            tool_calls=[],
            finish_reason="stop",
            usage=None,
            model="m",
            provider="openai",
            source_index=0,
            message=Message(role="assistant", content="ok"),
        )
        self.events = [StreamEvent("text", text="x") for _ in range(events - 1)]
        self.events.append(StreamEvent("done", response=self.response))

    async def complete(self, request: Request) -> Response:
        return self.response

    async def stream(self, request: Request) -> AsyncGenerator[StreamEvent, None]:
        for event in self.events:
            yield event


def _chains(events: int) -> dict[str, Chain]:
    inner = _Answer(events)
    return {
        "none": compose([], inner),
        "passthrough": compose([Passthrough()], inner),
        "noop-unchecked": compose([NoOpLayer()], inner),
        "user-noop": compose(user_layers([NoOpLayer()], "Client"), inner),
        "user-inherited": compose(user_layers([Passthrough()], "Client"), inner),
    }


async def _time_complete(chain: Chain, request: Request, calls: int) -> float:
    complete = chain.complete
    clock = time.perf_counter
    start = clock()
    for _ in range(calls):
        await complete(request)
    return (clock() - start) / calls


async def _time_stream(chain: Chain, request: Request, streams: int, events: int) -> float:
    stream = chain.stream
    clock = time.perf_counter
    start = clock()
    for _ in range(streams):
        async for _event in stream(request):
            pass
    return (clock() - start) / (streams * events)


async def _measure(calls: int, streams: int, events: int, rounds: int) -> dict[str, Any]:
    chains = _chains(events)
    names = list(chains)
    request = Request(messages=(Message(role="user", content="hi"),))
    per_call: dict[str, list[float]] = {name: [] for name in names}
    per_event: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up
        await _time_complete(chains[name], request, calls // 10)
        await _time_stream(chains[name], request, max(1, streams // 10), events)
    for round_ in range(rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            per_call[name].append(await _time_complete(chains[name], request, calls))
            per_event[name].append(await _time_stream(chains[name], request, streams, events))

    def fastest(values: dict[str, list[float]]) -> dict[str, float]:
        return {name: min(v) for name, v in values.items()}

    call, event = fastest(per_call), fastest(per_event)

    def added(values: dict[str, float]) -> dict[str, float]:
        return {name: values[name] - values["none"] for name in names if name != "none"}

    return {
        "calls": calls,
        "streams": streams,
        "events": events,
        "rounds": rounds,
        "per_call": call,
        "per_event": event,
        "added_per_call": added(call),
        "added_per_event": added(event),
    }


def measure(
    calls: int = 20_000, streams: int = 200, events: int = 100, rounds: int = 7
) -> dict[str, Any]:
    """Time the five chains; seconds per call and per event, the fastest of ``rounds``."""
    return asyncio.run(_measure(calls, streams, events, rounds))


def main(argv: list[str] | None = None, emit: Callable[[str], Any] = print) -> None:
    """Parse ``argv`` and print the measurement as JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.user_layers")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    emit(json.dumps(measure(args.calls, args.streams, args.events, args.rounds)))


if __name__ == "__main__":
    main()
