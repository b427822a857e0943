"""``deploy/``: the Dockerfile, the compose file and the Kubernetes example say what the tests
run. No container runtime here, so each is held to what runs for real: the image's command
is the one ``deploy/stack.py`` starts (``tests/test_serve_fleet.py`` runs it), and the three
name the same configuration, ports and variables as ``deploy/gateway.toml``."""

from __future__ import annotations

import tomllib
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from polythink.providers import get_provider
from polythink.serve import load_config
from tests.deploy_support import DEPLOY, ROOT, dockerfile_instructions, image_command, stack_module

GATEWAY = tomllib.loads((DEPLOY / "gateway.toml").read_text())
CONFIG_PATH = "/etc/polythink/gateway.toml"


def _variables() -> set[str]:
    """The environment variables the gateway file needs: its tenants' keys, its sources'
    provider keys, and the variable naming the file."""
    tenants = {t["key_env"] for t in GATEWAY["tenant"] if "key_env" in t}
    providers = {get_provider(s["provider"]).api_key_env[0] for s in GATEWAY["source"]}
    return tenants | providers | {"POLYTHINK_SERVE_CONFIG"}


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def _kubernetes() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))


def test_the_image_runs_the_command_the_stack_starts() -> None:
    stack = stack_module()
    assert (
        image_command() == list(stack.GATEWAY_COMMAND) == ["polythink", "serve", "--workers", "4"]
    )
    instructions = dict(dockerfile_instructions())
    assert instructions["ENV"] == f"POLYTHINK_SERVE_CONFIG={CONFIG_PATH}"
    assert stack.CONFIG_VARIABLE == "POLYTHINK_SERVE_CONFIG"
    port = GATEWAY["serve"]["port"]
    assert int(instructions["EXPOSE"]) == port == stack.PORTS["gateway"]
    assert "'.[serve,cost]'" in instructions["RUN"]  # gunicorn, the exporter, redis, prices
    assert f"http://127.0.0.1:{port}/health" in instructions["HEALTHCHECK"]


def test_the_gateway_file_loads_with_its_variables_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _variables() - {"POLYTHINK_SERVE_CONFIG"}:
        monkeypatch.setenv(name, f"pt-{name.lower()}-0123456789abcdef")
    config = load_config(DEPLOY / "gateway.toml")
    assert [t.name for t in config.tenants] == ["team-a", "team-b"]
    assert all(b.tag == t.name for t in config.tenants for b in t.budgets)
    assert config.settings.host == "0.0.0.0"
    # The loopback copy the stack writes loads as well, with the same tenants and routes.
    stack = stack_module()
    local = stack.local_config(GATEWAY, port=4000, redis="redis://127.0.0.1:6379/0", simulator=8787)
    assert tomllib.loads(stack.write_toml(local)) == local
    assert local["tenant"] == GATEWAY["tenant"]
    assert local["route"] == GATEWAY["route"]


def test_compose_runs_the_image_with_the_same_file_ports_and_variables() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"gateway", "redis", "prometheus", "grafana"}
    gateway = services["gateway"]
    assert "command" not in gateway  # the image's CMD
    assert gateway["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    port = GATEWAY["serve"]["port"]
    assert gateway["ports"] == [f"{port}:{port}"]
    assert set(gateway["environment"]) == _variables()
    assert gateway["environment"]["POLYTHINK_SERVE_CONFIG"] == CONFIG_PATH
    assert f"./gateway.toml:{CONFIG_PATH}:ro" in gateway["volumes"]
    assert gateway["stop_grace_period"] == f"{GATEWAY['serve']['drain_timeout'] + 10}s"
    assert f"http://127.0.0.1:{port}/health/ready" in " ".join(gateway["healthcheck"]["test"])
    # The Redis the file names is the compose service, on its port.
    for option in ("limits", "cache"):
        url = urlsplit(GATEWAY[option])
        assert (url.hostname, url.port) == ("redis", 6379)
    assert "6379" in services["redis"]["command"]
    assert services["redis"]["expose"] == ["6379"]
    # Prometheus scrapes the gateway's /metrics.
    assert services["prometheus"]["ports"] == ["9090:9090"]
    assert stack_module().PORTS["prometheus"] == 9090
    scrape = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    (job,) = scrape["scrape_configs"]
    assert job["job_name"] == "polythink"
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": [f"gateway:{port}"]}]
    # Grafana gets the data source and the dashboard of dashboards/.
    volumes = services["grafana"]["volumes"]
    assert "../dashboards/polythink.json:/var/lib/grafana/dashboards/polythink.json:ro" in volumes
    for volume in volumes:
        local = volume.split(":", 1)[0]
        assert (DEPLOY / local).resolve().exists(), local
    sources = yaml.safe_load((DEPLOY / "grafana" / "datasources.yaml").read_text())
    (source,) = sources["datasources"]
    assert (source["type"], source["url"], source["isDefault"]) == (
        "prometheus",
        "http://prometheus:9090",
        True,
    )
    providers = yaml.safe_load((DEPLOY / "grafana" / "dashboards.yaml").read_text())
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_the_kubernetes_example_runs_the_image_with_probes_and_redis() -> None:
    documents = _kubernetes()
    kinds = {(d["kind"], d["metadata"]["name"]) for d in documents}
    assert kinds == {
        ("ConfigMap", "polythink-gateway"),
        ("Deployment", "polythink-gateway"),
        ("Service", "polythink-gateway"),
        ("Deployment", "redis"),
        ("Service", "redis"),
    }
    config = next(d for d in documents if d["kind"] == "ConfigMap")
    assert config["data"]["gateway.toml"] == (DEPLOY / "gateway.toml").read_text()
    deployment = next(
        d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] != "redis"
    )
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "command" not in container
    assert "args" not in container  # the image's CMD
    port = GATEWAY["serve"]["port"]
    assert container["ports"] == [{"name": "http", "containerPort": port}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": port}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": port}
    assert {e["name"] for e in container["env"]} == _variables()
    assert {"name": "POLYTHINK_SERVE_CONFIG", "value": CONFIG_PATH} in container["env"]
    assert container["volumeMounts"][0]["mountPath"] == CONFIG_PATH.rsplit("/", 1)[0]
    assert pod["terminationGracePeriodSeconds"] >= GATEWAY["serve"]["drain_timeout"] + 10
    redis = next(
        d for d in documents if d["kind"] == "Service" and d["metadata"]["name"] == "redis"
    )
    assert redis["spec"]["ports"] == [{"port": 6379, "targetPort": 6379}]


def test_the_makefile_runs_the_stack() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "stack: $(STAMP)" in makefile
    assert "$(VENV)/bin/python deploy/stack.py" in makefile
