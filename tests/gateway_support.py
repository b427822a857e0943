"""``polythink serve`` in front of the simulator, for tests: both in this process, each on
its own event loop thread and a free loopback port.

:class:`GatewayServer` runs the gateway's application; :class:`Recorder` is a fault plan
that injects nothing and keeps every request the simulator received (path, headers, body)
and the bytes it answered, so a test reads what reached the provider.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pytest
from aiohttp import web

from polythink import Source
from polythink.serve import GatewayConfig, RouteConfig, ServeSettings, create_app
from polythink.serve.app import runner_for
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import FaultPlan
from polythink.simulator.server import SimRequest, SimResponse

SOURCES = {
    "anthropic": ("anthropic", "claude-sonnet-4-6"),
    "chat": ("deepseek", "deepseek-v4-pro"),
    "responses": ("openai-responses", "gpt-5.5"),
    "gemini": ("gemini", "gemini-3.5-flash"),
}
"""One source per upstream wire: route ``to-<wire>`` names it."""
EXTRA = (("openai", "gpt-5.5"),)
"""Sources configured besides: they route by ``provider/model-id`` only."""


@dataclass
class Exchange:
    """One request the simulator received, and what it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    answer: bytearray = field(default_factory=bytearray)


class Recorder(FaultPlan):
    """A fault plan that keeps every exchange (and injects the faults it is given)."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[Exchange] = []

    def wrap(self, request: SimRequest, handle: Any) -> Any:
        inner = super().wrap(request, handle)
        kept = Exchange(request.path, dict(request.headers), request.body)
        self.exchanges.append(kept)

        async def recorded(request: SimRequest, response: SimResponse) -> None:
            send, write = response.send, response.write

            async def sending(status: int, body: bytes, **kwargs: Any) -> None:
                kept.answer += body
                await send(status, body, **kwargs)

            async def writing(data: bytes) -> None:
                kept.answer += data
                await write(data)

            response.send = sending  # type: ignore[method-assign]
            response.write = writing  # type: ignore[method-assign]
            await inner(request, response)

        return recorded

    def last(self, path_end: str = "") -> Exchange:
        """The last exchange whose path ends with ``path_end``."""
        return [e for e in self.exchanges if e.path.endswith(path_end)][-1]


class GatewayServer:
    """The gateway's application on its own event loop thread (a context manager)."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``: Anthropic's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        """``…/v1``: OpenAI's base URL."""
        return self.root + "/v1"

    async def _start(self) -> int:
        self._runner = runner_for(create_app(self.config), self.config.settings)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(self._runner.addresses[0][1])

    def __enter__(self) -> GatewayServer:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


def simulated_sources(sim: Simulator, **fields: Any) -> tuple[Source, ...]:
    """A source per entry of :data:`SOURCES` on the simulator (``fields`` for each; no
    retries unless they say)."""
    fields.setdefault("max_retries", 0)
    return tuple(
        Source(
            provider,
            model,
            base_url=sim.base_url(provider),
            api_key=f"sk-sim-{provider}-0123456789",
            **fields,
        )
        for provider, model in (*SOURCES.values(), *EXTRA)
    )


def gateway_config(
    sim: Simulator,
    *,
    keepalive: float = 30.0,
    routes: tuple[RouteConfig, ...] = (),
    **fields: Any,
) -> GatewayConfig:
    """Routes ``to-<wire>`` for each entry of :data:`SOURCES`, and ``routes``; ``fields``
    for every source."""
    own = tuple(
        RouteConfig(name=f"to-{wire}", sources=(f"{provider}/{model}",))
        for wire, (provider, model) in SOURCES.items()
    )
    return GatewayConfig(
        sources=simulated_sources(sim, **fields),
        routes=own + routes,
        settings=ServeSettings(keepalive=keepalive),
    )


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def sim(recorder: Recorder) -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=6, tool_rounds=2, faults=recorder)) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def gateway(sim: Simulator) -> Iterator[GatewayServer]:
    with GatewayServer(gateway_config(sim)) as server:
        yield server
