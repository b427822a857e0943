"""A loopback server that speaks the providers' wire formats, for the demo, tests and bench.

Run it in a background thread::

    with Simulator() as sim:
        source = Source("openai", "gpt-5.5", base_url=sim.base_url("openai"), api_key="sim")

or in the foreground with ``polythink simulate --port 8787``. It binds 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType

from polythink.simulator.server import Settings, SimulatorServer, Stats

__all__ = ["Settings", "Simulator", "Stats", "serve"]


class Simulator:
    """Run the simulator on its own event loop in a background thread.

    Args:
        settings: behaviour (latency, chunk delay, answer length, faults).
        port: the port to bind on 127.0.0.1 (0 = an ephemeral port).
    """

    def __init__(self, settings: Settings | None = None, *, port: int = 0) -> None:
        self.server = SimulatorServer(settings)
        self._requested_port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def settings(self) -> Settings:
        """The live settings (changes apply to the next request)."""
        return self.server.settings

    @property
    def stats(self) -> Stats:
        """What the simulator has seen."""
        return self.server.stats

    @property
    def port(self) -> int:
        """The bound port."""
        return self.server.port

    def base_url(self, provider: str) -> str:
        """The base URL that serves ``provider``'s dialect (pass it as ``Source.base_url``).

        The clouds' stand for their hosts: ``bedrock``'s for the regional runtime host,
        ``vertex``'s for ``https://{host}/v1`` (polythink appends the project and location),
        ``azure``'s for the resource's ``/openai/v1`` (a dated ``api_version`` moves to the
        deployments API under ``/openai``)."""
        from polythink.providers import PROVIDERS, local_base_url

        root = f"http://127.0.0.1:{self.port}"
        if provider not in PROVIDERS:
            return f"{root}/{provider}/v1"
        return local_base_url(root, provider)

    def start(self) -> Simulator:
        """Start the server thread and wait until it listens.

        Raises:
            RuntimeError: when the server could not bind.
        """
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="polythink-simulator", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"simulator failed to start: {self._error}") from self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self.server.start(port=self._requested_port))
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self.server.close())
            loop.close()

    def stop(self) -> None:
        """Stop the server and join its thread."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def serve(
    host: str = "127.0.0.1", port: int = 8787, settings: Settings | None = None
) -> None:
    """Run the simulator in the current event loop until cancelled."""
    server = SimulatorServer(settings)
    await server.start(host, port)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
