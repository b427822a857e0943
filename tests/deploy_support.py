"""What ``deploy/`` holds, read as the tests need it: the image's command and the stack's
module (``deploy/stack.py`` is a script, not a package module)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def stack_module() -> ModuleType:
    """``deploy/stack.py``, imported."""
    spec = importlib.util.spec_from_file_location("polythink_deploy_stack", DEPLOY / "stack.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``deploy/Dockerfile``'s instructions, ``(KEYWORD, arguments)``, continuation lines
    joined and comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def image_command() -> list[str]:
    """The image's ``CMD`` (exec form)."""
    (command,) = [
        json.loads(rest) for keyword, rest in dockerfile_instructions() if keyword == "CMD"
    ]
    assert isinstance(command, list)
    return [str(word) for word in command]
