"""What ``import polythink`` loads: the public names, and none of the libraries a first call
or an optional layer needs (they load when a client is opened or the layer is built)."""

from __future__ import annotations

import json
import subprocess
import sys

import polythink

LAZY = (
    # the HTTP layers: loaded when a client opens its HTTP client
    "httpcore",
    "h11",
    "h2",
    "aiohttp",
    "httpx_aiohttp",
    # the optional layers' libraries: loaded when a client builds the layer
    "diskcache",
    "sqlite3",
    "opentelemetry",
    "genai_prices",
    "redis",
    "pydantic",
    # the clouds' libraries: loaded when a source of that cloud is built without a key
    "botocore",
    "google.auth",
    "azure.identity",
    "azure.core",
    "polythink.auth.aws",
    "polythink.auth.google",
    "polythink.auth.azure",
    "polythink.transports.bedrock",
    "polythink.transports.eventstream",
    "polythink.transports.vertex",
    # what a configuration file, the registry or a near-name suggestion needs, when used
    "tomllib",
    "difflib",
    "importlib.resources",
    # modules of polythink a first call does not need
    "polythink.sync",
    "polythink.simulator",
    "polythink.pricing",
    "polythink.middleware.cache",
    "polythink.middleware.telemetry",
    "polythink.middleware.retry",
    "polythink.middleware.cost",
    "polythink.middleware.budget",
    "polythink.cli",
    "polythink.serve",
)


def _loaded_by(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout))


def test_import_polythink_leaves_the_layers_libraries_unloaded() -> None:
    loaded = _loaded_by("import polythink")
    assert "polythink" in loaded
    assert sorted(name for name in LAZY if name in loaded) == []


def test_the_command_line_loads_the_gateway_only_to_serve() -> None:
    loaded = _loaded_by("import polythink.cli")
    assert sorted(n for n in loaded if n.startswith(("polythink.serve", "aiohttp.web"))) == []


def test_every_public_name_is_importable() -> None:
    names = ", ".join(polythink.__all__)
    loaded = _loaded_by(f"from polythink import {names}")
    assert "polythink.sync" in loaded  # SyncClient, asked for by name
