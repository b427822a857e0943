"""The gateway guide (``docs/guides/gateway.md``, once the README's Gateway section) runs as
written: its configuration file serves, its SDK example and its curl commands get their
answers, with the sources pointed at the simulator and the gateway's address in place of
``127.0.0.1:4000`` (:data:`tests.doc_blocks.GATEWAY`)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from polythink.serve import load_config
from polythink.simulator import Settings, Simulator
from tests import doc_blocks
from tests.conftest import sdk_module
from tests.gateway_support import GatewayServer
from tests.prerequisites import missing

sdk_module("openai")
sdk_module("anthropic")

ADDRESS = doc_blocks.GATEWAY


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    config_text = doc_blocks.block_with("[[route]]", "toml")
    path = tmp_path_factory.mktemp("gateway") / "gateway.toml"
    path.write_text(config_text, encoding="utf-8")
    config = load_config(path)
    assert [r.name for r in config.routes] == ["claude-opus-4-7"]
    with Simulator(Settings(answer_words=4)) as sim:
        pointed = tuple(
            dataclasses.replace(
                s, base_url=sim.base_url(s.provider), api_key=f"sk-sim-{s.provider}-0123456789"
            )
            for s in config.sources
        )
        with GatewayServer(dataclasses.replace(config, sources=pointed)) as gateway:
            yield gateway


def test_the_readme_sdk_example_runs(
    served: GatewayServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = [p.code for p, _ in doc_blocks.gateway_programs()]
    assert "import openai" in example
    exec(compile(example.replace(ADDRESS, served.root), "gateway.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Simulated claude-sonnet-4-6 answer")
    assert printed[1].startswith("Simulated deepseek-v4-pro answer")
    assert printed[1].endswith(" end_turn")


def test_the_readme_curl_commands_run(served: GatewayServer) -> None:
    if shutil.which("curl") is None:
        missing("curl is not installed (apt-get install curl)")
    block = doc_blocks.block_with(f"curl -s {ADDRESS}/v1/chat/completions", "sh")
    commands = block.replace("\\\n", " ").strip().splitlines()
    outputs = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command.replace(ADDRESS, served.root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        outputs.append(done.stdout)
    chat, stream, responses, models = outputs
    assert json.loads(chat)["choices"][0]["message"]["content"].startswith("Simulated")
    events = re.findall(r"^event: (\S+)$", stream, re.M)
    assert events[0] == "message_start"
    assert events[-1] == "message_stop"
    assert stream.rstrip().splitlines()[-1].startswith(": polythink {")
    output = json.loads(responses)["output"]
    assert [item["type"] for item in output] == ["reasoning", "message"]
    listed = [m["id"] for m in json.loads(models)["data"]]
    assert listed == ["claude-opus-4-7", "smart", "claude-sonnet-4-6", "deepseek-v4-pro"]
