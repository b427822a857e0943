"""The dashboard commands of the telemetry guide (once the README's "Cost and dashboards"),
run as written against a real Prometheus.

The commands are read from the guide itself: the demo with ``--serve --metrics-port``,
Prometheus on ``dashboards/prometheus.yml``, and the ``curl`` query of its HTTP API. Only
what would collide on a shared machine is changed: the metrics port (in the command and in a
copy of the scrape config), Prometheus's listen address and its data directory, all checked
first to be what the guide and the shipped config say.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml

from polythink.cli import DEMO_CALLS
from tests import doc_blocks
from tests.conftest import ROOT
from tests.test_dashboard_prometheus import (
    BUSY_SECONDS,
    PROMETHEUS,
    _free_port,
    require_prometheus,
    start_prometheus,
)

CONSOLE_SCRIPT = Path(sys.executable).parent / "polythink"


def readme_commands() -> dict[str, list[str]]:
    """The sh block of the dashboard section: its commands by program, comments dropped."""
    block = doc_blocks.block_with("--config.file=dashboards/prometheus.yml", "sh")
    commands = {}
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            commands[Path(words[0]).name] = words
    return commands


def option(words: list[str], name: str) -> str:
    (value,) = [w.split("=", 1)[1] for w in words if w.startswith(f"{name}=")] or [
        words[words.index(name) + 1]
    ]
    return value


def test_the_readme_dashboard_commands_work_as_written(tmp_path: Path) -> None:
    binary = require_prometheus(PROMETHEUS)
    if not CONSOLE_SCRIPT.exists():
        pytest.fail(f"console script {CONSOLE_SCRIPT} is missing (pip install -e .)")
    commands = readme_commands()
    assert set(commands) == {"polythink", "prometheus", "curl"}
    demo, prometheus, curl = commands["polythink"], commands["prometheus"], commands["curl"]
    # The demo as `make demo` installs it, serving the port the shipped config scrapes.
    assert demo[:4] == [".venv/bin/polythink", "demo", "--serve", "--metrics-port"]
    config = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
    (scrape,) = config["scrape_configs"]
    assert scrape["static_configs"] == [{"targets": [f"127.0.0.1:{demo[4]}"]}]
    assert config["global"]["scrape_interval"] == "1s"
    # curl asks the Prometheus the README starts.
    assert option(prometheus, "--config.file") == "dashboards/prometheus.yml"
    listen = option(prometheus, "--web.listen-address")
    (url,) = [w for w in curl[1:] if w.startswith("http")]
    parts = urlsplit(url)
    assert parts.netloc == listen
    assert parts.path == "/api/v1/query"
    (query,) = parse_qs(parts.query)["query"]

    metrics_port = _free_port()
    scrape["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    scrape_config = tmp_path / "prometheus.yml"
    scrape_config.write_text(yaml.safe_dump(config))
    demo_argv = [str(CONSOLE_SCRIPT), *demo[1:4], str(metrics_port)]
    prometheus_argv = []
    for word in prometheus[1:]:
        name = word.split("=", 1)[0]
        value = {
            "--config.file": str(scrape_config),
            "--storage.tsdb.path": tempfile.mkdtemp(dir=tmp_path),
            "--web.listen-address": None,  # a free port of start_prometheus's choice
        }[name]
        if value is not None:
            prometheus_argv.append(f"{name}={value}")
    env = {**os.environ, "COLUMNS": "100", "PYTHONIOENCODING": "utf-8"}
    process = subprocess.Popen(
        demo_argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    server, base = start_prometheus(binary, prometheus_argv)
    calls = 0.0
    try:
        # Generous: a shared CI runner may take minutes to start both and run the table.
        deadline = time.monotonic() + BUSY_SECONDS
        api = f"{base}{parts.path}"
        # The table's calls are all counted before the serve loop adds more.
        while calls < len(DEMO_CALLS):
            assert time.monotonic() < deadline, f"{query} stayed at {calls}"
            assert process.poll() is None, process.communicate()
            assert server.poll() is None, "prometheus exited"
            try:
                reply = httpx.get(api, params={"query": query}, timeout=2)
            except httpx.HTTPError:
                reply = None
            # A Prometheus still starting answers 503 "Service Unavailable": ask again.
            answer = reply.json() if reply is not None and reply.status_code == 200 else {}
            result = answer.get("data", {}).get("result", [])
            if result:
                ((_, value),) = [item["value"] for item in result]
                calls = float(value)
            time.sleep(0.3)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=BUSY_SECONDS)
        server.terminate()
        server.wait(timeout=BUSY_SECONDS)
    assert answer["status"] == "success"
    assert process.returncode == 130, (out, err)
    assert f"metrics at http://127.0.0.1:{metrics_port}/metrics" in out
    assert f"{len(DEMO_CALLS)} calls, each ended as expected" in out
    assert "serving mixed calls until Ctrl-C" in out
