"""The README's configuration example is valid as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polythink import Client, Effort, Source
from polythink.config import sources_from_toml
from polythink.conversation import load_conversation
from polythink.simulator import Settings, Simulator
from polythink.simulator.faults import Fault, FaultPlan

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_toml_example_loads(tmp_path: Path) -> None:
    (block,) = re.findall(r"```toml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    path = tmp_path / "polythink.toml"
    path.write_text(block, encoding="utf-8")
    first, second = sources_from_toml(path)
    assert (first.provider, first.model, first.reasoning_effort) == (
        "openai",
        "gpt-5.5",
        Effort.HIGH,
    )
    # The [thinking] default applies to the source without its own effort.
    assert (second.provider, second.model, second.reasoning_effort) == (
        "anthropic",
        "claude-sonnet-4-5",
        Effort.MEDIUM,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [False, True])
async def test_the_readme_conversation_example_runs(tmp_path: Path, cut: bool) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (example,) = [b for b in blocks if "async def session" in b]
    namespace: dict[str, object] = {}
    exec(compile(example, "README.md", "exec"), namespace)
    session = namespace["session"]
    path = tmp_path / "session.jsonl"
    with Simulator(Settings(answer_words=6)) as sim:
        if cut:
            sim.settings.faults = FaultPlan([Fault.reset(after_chunks=4)])
        source = Source(
            "anthropic", "claude-sonnet-4-5", base_url=sim.base_url("anthropic"), api_key="sim"
        )
        async with Client([source]) as client:
            await session(client, str(path))  # type: ignore[operator]
    saved = load_conversation(path)
    roles = ["system", "user", "assistant", "user"] if cut else ["system", "user", "assistant"]
    assert [m.role for m in saved] == roles
    assert saved[2].metadata is not None
    assert (saved[2].metadata.provider, saved[2].metadata.interrupted) == ("anthropic", cut)
    assert saved[2].text().startswith("Simulated")
    if cut:
        assert saved[3].content == "continue"
