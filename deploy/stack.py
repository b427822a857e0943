"""The gateway's stack on this machine: the provider simulator, redis-server, N gateway
workers and Prometheus, all on loopback (``make stack``).

What ``deploy/compose.yaml`` runs in containers, without a container runtime: the same
command (the image's, ``polythink serve --workers 4``, the configuration named by
``POLYTHINK_SERVE_CONFIG``), the same tenants and routes (``deploy/gateway.toml``, or the
file given with ``--config``), with three differences a laptop needs: the sources answer from
``polythink simulate`` (their keys are dummies), ``limits`` and ``cache`` name the local
redis-server, and the gateway listens on 127.0.0.1. Prometheus scrapes ``/metrics`` every
second with ``dashboards/prometheus.yml``'s settings; the panels of
``dashboards/polythink.json`` are its queries.

A tenant whose key is in an environment variable (``key_env``) gets a new random key unless
the variable is set; the keys go to ``<dir>/keys.env`` (readable by you only) and to the
terminal. ``<dir>/stack.json`` says where everything listens. Ctrl-C (or SIGTERM) stops the
gateway first (its streams drain), then the rest.

    python deploy/stack.py [--config FILE] [--workers 4] [--port 4000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GATEWAY_COMMAND = ("polythink", "serve", "--workers", "4")
"""The image's command (``deploy/Dockerfile``'s ``CMD``), which the stack runs; the
``--workers`` value is replaced by ``--workers``."""
CONFIG_VARIABLE = "POLYTHINK_SERVE_CONFIG"
PORTS = {"gateway": 4000, "redis": 6379, "prometheus": 9090, "simulator": 8787}
"""The ports the stack (and ``deploy/compose.yaml``) listens on by default."""


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return repr(value)


def write_toml(data: dict[str, Any]) -> str:
    """The TOML text of ``data``: top-level values, tables, arrays of tables (one level of
    nested arrays of tables, such as ``[[tenant.budget]]``): the shapes a gateway file has."""
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    lines += [
        f"{k} = {_value(v)}"
        for k, v in data.items()
        if isinstance(v, list) and not (v and isinstance(v[0], dict))
    ]
    for name, value in data.items():
        if isinstance(value, dict):
            lines.append(f"\n[{name}]")
            lines += [f"{k} = {_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for table in value:
                lines.append(f"\n[[{name}]]")
                nested = {
                    k: v
                    for k, v in table.items()
                    if isinstance(v, list) and v and isinstance(v[0], dict)
                }
                lines += [f"{k} = {_value(v)}" for k, v in table.items() if k not in nested]
                for inner, tables in nested.items():
                    for sub in tables:
                        lines.append(f"[[{name}.{inner}]]")
                        lines += [f"{k} = {_value(v)}" for k, v in sub.items()]
    return "\n".join(lines) + "\n"


def local_config(
    template: dict[str, Any], *, port: int, redis: str, simulator: int
) -> dict[str, Any]:
    """``template`` (a gateway file) for this machine: sources on the simulator, ``limits``
    and ``cache`` on the local Redis, listening on 127.0.0.1:``port``."""
    data = dict(template)
    workers = None
    if isinstance(data.get("limits"), str) and "workers=" in data["limits"]:
        workers = data["limits"].split("workers=", 1)[1].split("&", 1)[0]
    data["limits"] = redis + (f"?workers={workers}" if workers else "")
    data["cache"] = redis
    data["source"] = [
        {**source, "base_url": f"http://127.0.0.1:{simulator}/{source['provider']}/v1"}
        for source in data.get("source", [])
    ]
    data["serve"] = {**data.get("serve", {}), "host": "127.0.0.1", "port": port}
    return data


def _free_port(wanted: int) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", wanted))
        except OSError:
            sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(url: str, what: str, process: subprocess.Popen[bytes], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} was not ready at {url} within {seconds:g} s")


def _listening(port: int, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within 60 s")


def _redis_ready(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("redis-server did not answer PING within 30 s")


def _binary(name: str) -> str:
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None
    )
    if found is None:
        raise RuntimeError(f"{name} is not installed (Debian package {name})")
    return found


def _polythink() -> str:
    beside = Path(sys.executable).parent / "polythink"
    return str(beside) if beside.exists() else (shutil.which("polythink") or "polythink")


class Stack:
    """The stack's processes (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.directory = (
            Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="polythink-stack-"))
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.ports = {
            "gateway": _free_port(args.port),
            "redis": _free_port(args.redis_port),
            "prometheus": _free_port(args.prometheus_port),
            "simulator": _free_port(args.simulator_port),
        }
        self.keys: dict[str, str] = {}

    def _start(self, name: str, command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the child
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        self.processes.append((name, process))
        return process

    def start(self) -> dict[str, Any]:
        ports = self.ports
        simulator = self._start(
            "simulator", [_polythink(), "simulate", "--port", str(ports["simulator"])]
        )
        _listening(ports["simulator"], "the simulator", simulator)
        redis = self._start(
            "redis",
            [
                _binary("redis-server"),
                "--port",
                str(ports["redis"]),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
        )
        _redis_ready(ports["redis"], redis)
        template = tomllib.loads(Path(self.args.config).read_text())
        config = local_config(
            template,
            port=ports["gateway"],
            redis=f"redis://127.0.0.1:{ports['redis']}/0",
            simulator=ports["simulator"],
        )
        path = self.directory / "gateway.toml"
        path.write_text(write_toml(config))
        env = {**os.environ, CONFIG_VARIABLE: str(path)}
        for tenant in config.get("tenant", []):
            variable = tenant.get("key_env")
            if variable:
                env[variable] = self.keys[variable] = os.environ.get(variable) or (
                    "pt-" + secrets.token_urlsafe(32)
                )
        for provider in {s["provider"] for s in config["source"]}:
            variable = provider.upper().replace("-", "_") + "_API_KEY"
            env.setdefault(variable, f"sk-simulated-{provider}")
        keys = self.directory / "keys.env"
        keys.touch(mode=0o600)
        keys.write_text("".join(f"{k}={v}\n" for k, v in self.keys.items()))
        command = [_polythink(), *GATEWAY_COMMAND[1:]]
        command[command.index("--workers") + 1] = str(self.args.workers)
        gateway = self._start("gateway", command, env=env)
        _wait(f"http://127.0.0.1:{ports['gateway']}/health/ready", "the gateway", gateway)
        scrape = prometheus_config(ports["gateway"])
        (self.directory / "prometheus.yml").write_text(scrape)
        prometheus = self._start(
            "prometheus",
            [
                _binary("prometheus"),
                f"--config.file={self.directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.directory / 'prometheus-data'}",
                f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
            ],
        )
        _wait(f"http://127.0.0.1:{ports['prometheus']}/-/ready", "Prometheus", prometheus)
        described = {
            "ports": ports,
            "gateway": f"http://127.0.0.1:{ports['gateway']}",
            "prometheus": f"http://127.0.0.1:{ports['prometheus']}",
            "config": str(path),
            "keys": str(keys),
            "pids": {name: process.pid for name, process in self.processes},
        }
        (self.directory / "stack.json").write_text(json.dumps(described, indent=2))
        return described

    def stop(self) -> None:
        # The gateway first: its streams drain while the sources still answer.
        for name, process in sorted(self.processes, key=lambda p: p[0] != "gateway"):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60 if name == "gateway" else 15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def prometheus_config(gateway_port: int) -> str:
    """Prometheus's configuration for the stack: ``dashboards/prometheus.yml``'s settings
    (job ``polythink``, a 1 s scrape), its target the gateway."""
    shipped = (ROOT / "dashboards" / "prometheus.yml").read_text()
    return shipped.replace('["127.0.0.1:9464"]', f'["127.0.0.1:{gateway_port}"]')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stack.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(HERE / "gateway.toml"), help="the gateway file")
    parser.add_argument("--workers", type=int, default=4, help="gateway workers (default 4)")
    parser.add_argument("--port", type=int, default=PORTS["gateway"], help="the gateway's port")
    parser.add_argument("--redis-port", type=int, default=PORTS["redis"])
    parser.add_argument("--prometheus-port", type=int, default=PORTS["prometheus"])
    parser.add_argument("--simulator-port", type=int, default=PORTS["simulator"])
    parser.add_argument("--dir", help="where configs, logs and data go (default: a new temp dir)")
    args = parser.parse_args(argv)
    stack = Stack(args)
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        described = stack.start()
        print(f"gateway     {described['gateway']}  (OpenAI base URL …/v1, Anthropic base URL …)")
        print(f"prometheus  {described['prometheus']}")
        for variable, key in stack.keys.items():
            print(f"key         {variable}={key}")
        print(f"files       {stack.directory}  (Ctrl-C stops)", flush=True)
        while not stopping and all(p.poll() is None for _, p in stack.processes):
            time.sleep(0.2)
        dead = [name for name, p in stack.processes if p.poll() is not None]
        if dead and not stopping:
            print(f"stack: {', '.join(dead)} exited; see {stack.directory}", file=sys.stderr)
            return 1
        return 0
    except RuntimeError as exc:
        print(f"stack: {exc}; logs in {stack.directory}", file=sys.stderr)
        return 1
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
