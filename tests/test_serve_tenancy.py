"""``polythink serve``'s keys and edges, in process: virtual keys read from the environment, a
file or a hash (never the file's text), each front door's 401 and 403, a tenant's limits as
429 with ``retry-after``, its cache namespace, CORS only when configured, health and
readiness, ``/metrics``, slow clients, streams on shutdown, and no key in a log line.

The fleet of workers on Redis is ``tests/test_serve_fleet.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from polythink import Budget, Message, Request
from polythink.cache_key import canonical_request
from polythink.serve import GatewayConfig, RouteConfig, ServeSettings
from polythink.serve.app import Redacting, bind_host
from polythink.serve.exchange import Output
from polythink.serve.metrics import merge_expositions
from polythink.serve.tenancy import KeyRing, Tenant, hash_key, presented_key, tenants_from_toml
from polythink.simulator import Settings, Simulator
from tests.conftest import sdk_module
from tests.gateway_support import GatewayServer, simulated_sources

openai = sdk_module("openai")
anthropic = sdk_module("anthropic")

ACME_KEY = "pt-acme-key-0123456789abcdefghij"
GLOBEX_KEY = "pt-globex-key-0123456789abcdefgh"
HI = [{"role": "user", "content": "hi"}]


def _tenant(name: str, key: str, **fields: Any) -> Tenant:
    return Tenant(name=name, digests=(hashlib.sha256(key.encode()).digest(),), **fields)


def _config(sim: Simulator, tmp: Path, *tenants: Tenant, **settings: Any) -> GatewayConfig:
    return GatewayConfig(
        sources=simulated_sources(sim),
        routes=(
            RouteConfig(name="fast", sources=("openai/gpt-5.5",)),
            RouteConfig(name="claude", sources=("anthropic/claude-sonnet-4-6",)),
        ),
        client_options={"cache": str(tmp / "cache")},
        settings=ServeSettings(**settings),
        tenants=tenants,
    )


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(Settings(answer_words=6)) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def gateway(sim: Simulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    tenants = (
        _tenant("acme", ACME_KEY, rpm=2, budgets=(Budget(5.0, tag="acme"),)),
        _tenant("globex", GLOBEX_KEY, routes=frozenset({"fast"})),
    )
    config = _config(sim, tmp_path_factory.mktemp("tenancy"), *tenants)
    with GatewayServer(config) as server:
        yield server


# -- the file ------------------------------------------------------------------------------


def test_a_key_comes_from_a_variable_a_file_or_a_hash_and_never_from_the_file_text(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "key"
    secret.write_text("pt-from-a-file-0123456789abcdef\n")
    tables = [
        {"name": "env", "key_env": "ACME_KEY", "rpm": 60},
        {"name": "file", "key_file": str(secret)},
        {"name": "hash", "key_sha256": hash_key("pt-hashed-0123456789abcdefghij")},
        {"name": "rotating", "key_sha256": [hash_key("pt-old-key-0123456789abcdefgh"), "a" * 64]},
    ]
    budget = {"usd": 2.0, "per": "hour", "step_down_at": 0.8}
    tables[0]["budget"] = [budget]
    tenants = tenants_from_toml(tables, "gw.toml", {"ACME_KEY": "pt-from-the-env-0123456789"})
    ring = KeyRing(tenants)
    assert ring.find("pt-from-the-env-0123456789") is tenants[0]
    assert ring.find("pt-from-a-file-0123456789abcdef") is tenants[1]
    assert ring.find("pt-hashed-0123456789abcdefghij") is tenants[2]
    assert ring.find("pt-old-key-0123456789abcdefgh") is tenants[3]
    assert ring.find("pt-from-the-env-012345678") is None
    (acme_budget,) = tenants[0].budgets
    assert acme_budget == Budget(2.0, per="hour", tag="env", step_down_at=0.8)
    assert acme_budget.name == "hour:tag=env"
    assert tenants[0].rpm == 60
    assert tenants[0].routes is None
    # No key in the text, in any spelling.
    for written in ({"key": "pt-x" * 8}, {"api_key": "pt-x" * 8}):
        with pytest.raises(ValueError, match="a key is never written in the file"):
            tenants_from_toml([{"name": "t", **written}], "gw.toml", {})
    cases = [
        ({"name": "t"}, "a tenant needs a key"),
        ({"name": "t", "key_env": "UNSET"}, "the environment variable UNSET is not set"),
        ({"name": "t", "key_env": "SHORT"}, "shorter than 20 characters"),
        ({"name": "t", "key_file": str(tmp_path / "none")}, "cannot read key_file"),
        ({"name": "t", "key_sha256": "sha256:abc"}, "64 hex digits"),
        ({"name": "t", "key_env": "ACME_KEY", "rpm": 0}, "rpm must be a positive number"),
        ({"name": "t", "key_env": "ACME_KEY", "routes": "fast"}, "routes must be a list"),
        ({"name": "t", "key_env": "ACME_KEY", "colour": 1}, "unknown keys \\['colour'\\]"),
        (
            {"name": "t", "key_env": "ACME_KEY", "budget": [{"usd": 1, "model": "x"}]},
            "unknown keys \\['model'\\]",
        ),
    ]
    for table, message in cases:
        with pytest.raises(ValueError, match=message):
            tenants_from_toml([table], "gw.toml", {"ACME_KEY": "pt-" + "k" * 20, "SHORT": "abc"})
    with pytest.raises(ValueError, match="its key is also tenant 'a'"):
        tenants_from_toml(
            [
                {"name": "a", "key_env": "K"},
                {"name": "b", "key_sha256": hash_key("pt-" + "k" * 20)},
            ],
            "gw.toml",
            {"K": "pt-" + "k" * 20},
        )


def test_a_presented_key_is_compared_with_every_digest_in_constant_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = [f"pt-tenant-{i}-0123456789abcdef" for i in range(5)]
    ring = KeyRing([_tenant(f"t{i}", key) for i, key in enumerate(keys)])
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for key in (keys[0], keys[4], "pt-nobody-0123456789abcdefgh"):
        compared.clear()
        ring.find(key)
        # Every digest, whether the first matched, the last, or none.
        assert len(compared) == 5
        assert {a for a, _ in compared} == {hashlib.sha256(key.encode()).digest()}
    assert presented_key({"authorization": "Bearer  pt-abc "}) == "pt-abc"
    assert presented_key({"authorization": "Basic abc"}) is None
    assert presented_key({"x-api-key": "pt-def"}) == "pt-def"
    assert presented_key({"api-key": "pt-ghi"}) == "pt-ghi"
    assert presented_key({}) is None


def test_without_keys_the_gateway_binds_loopback_only_and_says_so(
    sim: Simulator, tmp_path: Path
) -> None:
    bare = _config(sim, tmp_path)
    host, notice = bind_host(bare, "0.0.0.0")
    assert host == "127.0.0.1"
    assert notice is not None
    assert "listens on 127.0.0.1 only, not 0.0.0.0" in notice
    assert bind_host(bare, "::1")[0] == "::1"
    keyed = _config(sim, tmp_path, _tenant("acme", ACME_KEY))
    assert bind_host(keyed, "0.0.0.0") == ("0.0.0.0", None)


# -- the doors -----------------------------------------------------------------------------


def test_a_missing_or_unknown_key_is_each_front_doors_own_401(gateway: GatewayServer) -> None:
    chat = openai.OpenAI(
        base_url=gateway.v1, api_key="pt-not-a-key-of-this-gateway-00", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as refused:
        chat.chat.completions.create(model="fast", messages=HI)
    assert refused.value.code == "invalid_api_key"
    assert refused.value.status_code == 401
    with pytest.raises(openai.AuthenticationError):
        chat.responses.create(model="fast", input="hi")
    with pytest.raises(openai.AuthenticationError):
        chat.models.list()
    bare = httpx.post(f"{gateway.v1}/chat/completions", json={"model": "fast", "messages": HI})
    assert bare.status_code == 401
    assert bare.json() == {
        "error": {
            "message": "no API key: send this gateway's key as Authorization: Bearer <key> or "
            "x-api-key",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    messages = anthropic.Anthropic(
        base_url=gateway.root, api_key="pt-not-a-key-of-this-gateway-00", max_retries=0
    )
    with pytest.raises(anthropic.AuthenticationError) as refused_messages:
        messages.messages.create(model="claude", max_tokens=50, messages=HI)
    assert refused_messages.value.body["error"]["type"] == "authentication_error"
    assert "not one of this gateway's" in refused_messages.value.body["error"]["message"]
    # Open without a key: the probes, the metrics, Claude Code's warm-up.
    assert httpx.get(f"{gateway.root}/health").json() == {"status": "ok"}
    assert httpx.get(f"{gateway.root}/health/ready").status_code == 200
    assert httpx.get(f"{gateway.root}/metrics").status_code == 200
    assert httpx.head(f"{gateway.root}/api/hello").status_code == 200


def test_a_key_calls_its_routes_only_and_lists_only_them(gateway: GatewayServer) -> None:
    globex = openai.OpenAI(base_url=gateway.v1, api_key=GLOBEX_KEY, max_retries=0)
    answer = globex.chat.completions.create(model="fast", messages=HI)
    assert answer.choices[0].message.content
    with pytest.raises(openai.PermissionDeniedError) as refused:
        globex.chat.completions.create(model="claude", messages=HI)
    assert refused.value.param == "model"
    assert [m.id for m in globex.models.list()] == ["fast"]
    claude = anthropic.Anthropic(base_url=gateway.root, api_key=GLOBEX_KEY, max_retries=0)
    with pytest.raises(anthropic.PermissionDeniedError):
        claude.messages.create(model="claude", max_tokens=50, messages=HI)
    acme = openai.OpenAI(base_url=gateway.v1, api_key=ACME_KEY, max_retries=0)
    listed = [m.id for m in acme.models.list()]
    assert listed[:2] == ["fast", "claude"]
    assert "gpt-5.5" in listed[2:]


def test_a_tenant_over_its_requests_per_minute_gets_429_with_retry_after(
    gateway: GatewayServer,
) -> None:
    # acme: 2 a minute. Other tests' acme calls are in this module too: spend what is left.
    acme = openai.OpenAI(base_url=gateway.v1, api_key=ACME_KEY, max_retries=0)
    answers = []
    for i in range(3):
        try:
            answers.append(acme.chat.completions.create(model="fast", messages=HI, user=str(i)))
        except openai.RateLimitError as exc:
            refused = exc
            break
    else:
        pytest.fail("acme was never refused")
    assert len(answers) <= 2
    assert refused.status_code == 429
    assert refused.code == "rate_limit_exceeded"
    assert "'acme' is over its requests per minute (2)" in refused.message
    wait = int(refused.response.headers["retry-after"])
    assert 1 <= wait <= 30  # one request back every 30 s
    assert int(refused.response.headers["retry-after-ms"]) <= wait * 1000
    # globex has no limit of its own: acme's do not touch it.
    globex = openai.OpenAI(base_url=gateway.v1, api_key=GLOBEX_KEY, max_retries=0)
    assert globex.chat.completions.create(model="fast", messages=HI).choices


def test_a_tenants_calls_read_and_fill_its_own_cache_entries_only(
    sim: Simulator, tmp_path: Path
) -> None:
    config = _config(sim, tmp_path, _tenant("acme", ACME_KEY), _tenant("globex", GLOBEX_KEY))
    with GatewayServer(config) as server:

        def ask(key: str) -> httpx.Response:
            return httpx.post(
                f"{server.v1}/chat/completions",
                headers={"authorization": f"Bearer {key}"},
                json={"model": "fast", "messages": HI},
                timeout=30,
            )

        first = ask(ACME_KEY)
        other = ask(GLOBEX_KEY)
        again = ask(ACME_KEY)
    assert [r.headers["x-polythink-cache"] for r in (first, other, again)] == [
        "miss",
        "miss",
        "hit",
    ]
    # The key: the namespace is in it when set, and a request without one keys as before.
    request = Request(messages=(Message(role="user", content="hi"),))
    assert "cache_namespace" not in canonical_request(request)
    assert '"cache_namespace":"acme"' in canonical_request(request.with_(cache_namespace="acme"))


# -- edges ---------------------------------------------------------------------------------


def test_no_cors_header_unless_origins_are_configured(sim: Simulator, tmp_path: Path) -> None:
    origin = {"origin": "https://app.example", "access-control-request-method": "POST"}
    with GatewayServer(_config(sim, tmp_path)) as plain:
        preflight = httpx.options(f"{plain.v1}/chat/completions", headers=origin)
        answer = httpx.post(
            f"{plain.v1}/chat/completions",
            headers={"origin": "https://app.example"},
            json={"model": "fast", "messages": HI},
            timeout=30,
        )
    assert preflight.status_code == 405
    assert not any(h.startswith("access-control-") for h in preflight.headers)
    assert answer.status_code == 200
    assert not any(h.startswith("access-control-") for h in answer.headers)
    config = _config(sim, tmp_path, cors_origins=("https://app.example",))
    with GatewayServer(config) as cors:
        preflight = httpx.options(f"{cors.v1}/chat/completions", headers=origin)
        stranger = httpx.options(
            f"{cors.v1}/chat/completions", headers={**origin, "origin": "https://evil.example"}
        )
        answer = httpx.post(
            f"{cors.v1}/chat/completions",
            headers={"origin": "https://app.example"},
            json={"model": "fast", "messages": HI},
            timeout=30,
        )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert stranger.status_code == 403
    assert "access-control-allow-origin" not in stranger.headers
    assert answer.headers["access-control-allow-origin"] == "https://app.example"
    assert "x-polythink-cost-usd" in answer.headers["access-control-expose-headers"]


def test_readiness_names_the_upstream_or_redis_that_does_not_answer(
    sim: Simulator, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    config = _config(sim, tmp_path)
    config = GatewayConfig(
        sources=(*config.sources, *simulated_sources(sim)[:0]),
        routes=config.routes,
        client_options={"limits": f"redis://127.0.0.1:{dead}/0"},
        settings=config.settings,
    )
    with GatewayServer(config) as server:
        answer = httpx.get(f"{server.root}/health/ready", timeout=30)
        alive = httpx.get(f"{server.root}/health", timeout=30)
    assert alive.status_code == 200
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "unavailable"
    redis_check = body["checks"][f"redis redis://127.0.0.1:{dead}/0"]
    assert redis_check["ok"] is False
    assert "Connect" in redis_check["error"] or "refused" in redis_check["error"]
    upstream = f"upstream 127.0.0.1:{sim.port}"
    assert body["checks"][upstream] == {"ok": True}


def test_metrics_count_requests_and_added_time_by_route_and_tenant(gateway: GatewayServer) -> None:
    httpx.post(
        f"{gateway.v1}/chat/completions",
        headers={"authorization": f"Bearer {GLOBEX_KEY}"},
        json={"model": "fast", "messages": HI},
        timeout=30,
    )
    text = httpx.get(f"{gateway.root}/metrics").text
    count = [
        line
        for line in text.splitlines()
        if line.startswith("http_server_request_duration_seconds_count{")
        and 'polythink_tenant="globex"' in line
        and 'http_route="/v1/chat/completions"' in line
        and 'http_response_status_code="200"' in line
    ]
    assert len(count) == 1
    assert 'polythink_route="fast"' in count[0]
    assert float(count[0].rsplit(" ", 1)[1]) >= 1
    assert 'polythink_gateway_duration_seconds_count{http_route="/v1/chat/completions"' in text
    assert "gen_ai_client_operation_duration_seconds_count" in text  # the calls' own
    # Probes are not counted.
    assert 'http_route="/health"' not in text


def test_worker_expositions_merge_into_one_with_a_worker_label() -> None:
    one = (
        b'# HELP calls_total Calls\n# TYPE calls_total counter\ncalls_total{route="a"} 2.0\n'
        b"# HELP took_seconds Took\n# TYPE took_seconds histogram\n"
        b'took_seconds_bucket{le="1.0"} 1.0\ntook_seconds_bucket{le="+Inf"} 1.0\n'
        b"took_seconds_count 1.0\ntook_seconds_sum 0.5\n"
    )
    two = b'# HELP calls_total Calls\n# TYPE calls_total counter\ncalls_total{route="a"} 5.0\n'
    merged = merge_expositions({"0": one, "1": two}).decode()
    assert merged.count("# TYPE calls_total counter") == 1
    assert 'calls_total{route="a",worker="0"} 2.0' in merged
    assert 'calls_total{route="a",worker="1"} 5.0' in merged
    assert 'took_seconds_bucket{le="+Inf",worker="0"} 1.0' in merged
    assert 'took_seconds_sum{worker="0"} 0.5' in merged


def test_no_key_reaches_a_log_line(
    gateway: GatewayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for key in (GLOBEX_KEY, "pt-wrong-key-0123456789abcdefgh"):
        httpx.post(
            f"{gateway.v1}/chat/completions",
            headers={"authorization": f"Bearer {key}", "x-api-key": key},
            json={"model": "fast", "messages": HI, "user": key},
            timeout=30,
        )
    # The access line is written after the answer: one more request, and it was.
    httpx.get(f"{gateway.root}/health", timeout=30)
    lines = [record.getMessage() for record in caplog.records]
    assert any(
        "POST /v1/chat/completions 200" in line and "tenant=globex" in line for line in lines
    )
    for line in lines:
        assert GLOBEX_KEY not in line
        assert "pt-wrong-key" not in line
    # Whatever a line would say, the filter polythink serve puts on every handler redacts it.
    record = logging.LogRecord(
        "x",
        logging.INFO,
        __file__,
        1,
        "sent %s with %s",
        ("Bearer pt-abc-secret-value", "sk-up"),
        None,
    )
    assert Redacting(["sk-up"]).filter(record)
    assert record.getMessage() == "sent [REDACTED] with [REDACTED]"


def test_a_client_that_sends_nothing_or_half_a_body_is_not_waited_on(
    sim: Simulator, tmp_path: Path
) -> None:
    config = _config(sim, tmp_path, idle_timeout=0.5, body_timeout=0.5)
    with GatewayServer(config) as server:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as idle:
            idle.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # never ends
            assert idle.recv(1024) == b""  # closed by the gateway
        assert 0.4 <= time.monotonic() - started < 15
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as slow:
            slow.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json"
                b'\r\ncontent-length: 100\r\n\r\n{"model": '
            )
            head = slow.recv(4096)
    assert head.startswith(b"HTTP/1.1 408")
    assert b"did not arrive within 0.5 s" in head


def test_a_client_that_reads_nothing_is_dropped_after_write_timeout() -> None:
    class Stuck:
        async def write(self, data: bytes) -> None:
            await asyncio.sleep(3600)

    class Transport:
        aborted = False

        def abort(self) -> None:
            self.aborted = True

    class Request:
        transport = Transport()

    async def send() -> Output:
        output = Output(Request(), write_timeout=0.05)  # type: ignore[arg-type]
        output.response = Stuck()  # type: ignore[assignment]
        await output.send(b"data: {}\n\n")
        return output

    output = asyncio.run(send())
    assert output.gone
    assert Request.transport.aborted


def _stream_in_thread(server: GatewayServer, events: list[str], done: threading.Event) -> None:
    def run() -> None:
        chat = openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0)
        try:
            for chunk in chat.chat.completions.create(
                model="fast", messages=HI, stream=True, reasoning_effort="none"
            ):
                if chunk.choices and chunk.choices[0].delta.content:
                    events.append("text")
            events.append("end")
        except openai.APIError as exc:
            events.append(f"error: {exc.message}")
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize(("drain", "last"), [(20.0, "end"), (0.3, "error")])
def test_on_shutdown_streams_drain_and_those_still_open_end_with_an_error_event(
    tmp_path: Path, drain: float, last: str
) -> None:
    with Simulator(Settings(answer_words=12, chunk_delay=0.15)) as slow:
        config = _config(slow, tmp_path, drain_timeout=drain)
        events: list[str] = []
        done = threading.Event()
        server = GatewayServer(config).__enter__()
        try:
            _stream_in_thread(server, events, done)
            deadline = time.monotonic() + 30
            while "text" not in events:
                assert time.monotonic() < deadline, "the stream never started"
                time.sleep(0.02)
        finally:
            server.__exit__(None, None, None)  # SIGTERM's path: the runner's cleanup
        assert done.wait(30)
    if last == "end":
        assert events[-1] == "end"
        assert events.count("text") >= 10
    else:
        assert (
            events[-1]
            == "error: the gateway stopped before this stream ended; send the request again"
        )


def test_the_docs_tenant_table_reads_as_written() -> None:
    import tomllib

    from tests import doc_blocks

    block = doc_blocks.block_with('key_env = "TEAM_A_GATEWAY_KEY"', "toml")
    (table,) = tomllib.loads(block)["tenant"]
    (tenant,) = tenants_from_toml(
        [table], "gateway-production.md", {"TEAM_A_GATEWAY_KEY": "pt-team-a-0123456789abcdef"}
    )
    assert tenant.name == "team-a"
    assert tenant.routes == frozenset({"claude-opus-4-7"})
    assert (tenant.rpm, tenant.tpm, tenant.max_concurrency) == (600, 2000000, 16)
    assert tenant.budgets == (Budget(50.0, per="day", tag="team-a", step_down_at=0.8),)
    assert KeyRing([tenant]).find("pt-team-a-0123456789abcdef") is tenant
