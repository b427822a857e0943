"""The README's configuration example is valid as written."""

from __future__ import annotations

import re
from pathlib import Path

from polythink import Effort
from polythink.config import sources_from_toml

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
