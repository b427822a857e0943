"""``polythink demo --metrics-port N --serve --chart PATH`` as a subprocess, and the chart.

The demo's table calls are known (``polythink.cli.DEMO_CALLS``); the ``--serve`` loop only
calls the models of ``polythink.dashboard.SERVE_MODELS``, so the series of the table-only
models must show exactly what the table's calls did, while the serve loop's series grow.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from polythink import Effort, Message, Response, Usage
from polythink.cli import DEMO_CALLS
from polythink.dashboard import SERVE_MODELS, write_chart
from polythink.pricing import price

CONSOLE_SCRIPT = Path(sys.executable).parent / "polythink"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _value(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match.group(2))
    return total


def _scrape(url: str, deadline: float, ready: str) -> str:
    while time.monotonic() < deadline:
        try:
            text = httpx.get(url, timeout=2).text
            if ready in text:
                return text
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never showed {ready}")


def test_demo_metrics_port_serves_what_it_recorded_and_serve_keeps_calling(
    tmp_path: Path,
) -> None:
    if not CONSOLE_SCRIPT.exists():
        pytest.fail(f"console script {CONSOLE_SCRIPT} is missing (pip install -e .)")
    port = _free_port()
    chart = tmp_path / "tiers.png"
    env = {**os.environ, "COLUMNS": "250", "PYTHONIOENCODING": "utf-8"}
    process = subprocess.Popen(
        [
            str(CONSOLE_SCRIPT),
            "demo",
            "--metrics-port",
            str(port),
            "--serve",
            "--chart",
            str(chart),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        deadline = time.monotonic() + 60
        # The chart is written once the table's calls are done, before the serve loop.
        while not chart.exists():
            assert time.monotonic() < deadline, "the chart was not written"
            assert process.poll() is None, process.communicate()
            time.sleep(0.1)
        first = _scrape(url, deadline, "polythink_client_calls_total")
        served = [m for _, m in SERVE_MODELS]

        def serve_calls(text: str) -> float:
            return sum(
                _value(text, "polythink_client_calls_total", gen_ai_request_model=m) for m in served
            )

        before = serve_calls(first)
        while True:
            later = httpx.get(url, timeout=2).text
            if serve_calls(later) > before + 1:
                break
            assert time.monotonic() < deadline, "the --serve loop made no calls"
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 130, (out, err)
    assert f"{len(DEMO_CALLS)} calls, each ended as expected" in out
    assert f"metrics at {url}" in out
    assert "serving mixed calls until Ctrl-C" in out
    # Models only the table calls: kimi-k3 at max (1024 reasoning tokens), gpt-6.2-astra at
    # xhigh (a stream, 640), glm-5.3 at low (asked medium, which it does not take).
    for model, tier, tokens in (("kimi-k3", "max", 1024), ("gpt-6.2-astra", "xhigh", 640)):
        labels = {"gen_ai_request_model": model, "polythink_reasoning_applied_effort": tier}
        assert _value(later, "polythink_reasoning_tokens_sum", **labels) == tokens
        assert _value(later, "polythink_client_calls_total", **labels) == 1
    # gpt-6.2-astra has no price in the table yet; kimi-k3 has one.
    assert _value(later, "polythink_client_cost_USD_total", gen_ai_request_model="kimi-k3") > 0
    glm = {"gen_ai_request_model": "glm-5.3", "polythink_reasoning_applied_effort": "low"}
    assert _value(later, "polythink_reasoning_tokens_sum", **glm) == 40
    assert _value(later, "polythink_client_calls_total", gen_ai_request_model="glm-5.3") == 1
    assert chart.read_bytes().startswith(PNG_MAGIC)
    assert chart.stat().st_size > 20_000


def _response(model: str, tier: Effort, reasoning: int, *, hit: bool = False) -> Response:
    usage = Usage(input_tokens=20, output_tokens=reasoning + 12, reasoning_tokens=reasoning)
    return Response(
        text="ok",
        reasoning=None,
        tool_calls=[],
        finish_reason="stop",
        usage=usage,
        model=model,
        provider="openai",
        source_index=0,
        message=Message(role="assistant", content="ok"),
        applied_effort=tier,
        cache_hit=hit,
        cost=price(usage, "openai", model),
    )


def test_chart_is_a_png_of_plausible_size(tmp_path: Path) -> None:
    responses = [
        _response("gpt-5.5", Effort.HIGH, 320),
        _response("gpt-5.5", Effort.LOW, 40),
        _response("gpt-5.1", Effort.LOW, 40),
        _response("gpt-5.1", Effort.LOW, 40, hit=True),
    ]
    path = write_chart(tmp_path / "chart.png", responses)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    # A 1000 x 700 image with two panels of bars: tens of kilobytes, not an empty canvas.
    assert 20_000 < len(data) < 500_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 700)
