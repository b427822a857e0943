"""The disk cache's batch writer: entries found at once, committed together, flushed on close."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from polythink import Client, Source
from polythink.backends.disk import BatchWriter as _BatchWriter
from polythink.backends.disk import DiskCache
from polythink.middleware.base import compose
from polythink.middleware.cache import CacheMiddleware, DiskStore, cache_key
from polythink.simulator import Simulator
from polythink.types import Message, Request, Response, Usage
from tests.limits_cache_support import FakeHandler, response

pytestmark = pytest.mark.anyio

SOURCE = Source("openai", "gpt-4o", api_key="sk-unused-0000000000")


def ask(text: str) -> Request:
    return Request(messages=(Message(role="user", content=text),))


def answering(*texts: str) -> FakeHandler:
    answers = list(texts)

    async def answer(request: Request) -> Response:
        return response(answers.pop(0), usage=Usage(input_tokens=4, output_tokens=2))

    return FakeHandler(answer)


class _RecordingCache:
    """A diskcache stand-in that records each transaction's keys (and can hold a commit)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.transactions: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self._open: list[str] | None = None

    def transact(self) -> Any:
        cache = self

        class _Transaction:
            def __enter__(self) -> None:
                cache.hold.wait(5)
                cache._open = []

            def __exit__(self, *exc: object) -> None:
                assert cache._open is not None
                cache.transactions.append(cache._open)
                cache._open = None

        return _Transaction()

    def set(self, key: str, value: bytes, expire: float | None = None) -> None:
        assert self._open is not None, "written outside a transaction"
        self._open.append(key)
        self.data[key] = value


async def test_an_answer_is_found_at_once_and_committed_with_others_in_one_transaction(
    tmp_path: Path,
) -> None:
    store = DiskStore(tmp_path / "cache")
    layer = CacheMiddleware(store, [SOURCE])
    recording = _RecordingCache()
    writer = _BatchWriter(recording, None, layer._degraded, delay=0.05, linger=0.01)  # type: ignore[arg-type]
    assert isinstance(layer.backend, DiskCache)
    layer.backend.writer = writer
    chain = compose([layer], answering("A", "B", "C"))
    recording.hold.clear()
    first = await chain.complete(ask("one"))
    second = await chain.complete(ask("two"))
    # Not committed yet, and served from memory.
    assert (await chain.complete(ask("one"))).cache_hit is True
    assert (first.text, second.text) == ("A", "B")
    thread = writer._thread
    assert thread is not None
    recording.hold.set()
    # The writer commits, finds nothing more to do and ends.
    await anyio.to_thread.run_sync(thread.join, 5.0)
    assert not thread.is_alive()
    keys = [cache_key(ask(text), [SOURCE]) for text in ("one", "two")]
    assert recording.transactions == [keys]
    assert writer.pending == {}
    third = await chain.complete(ask("three"))
    assert third.text == "C"
    await layer.aclose()
    assert recording.transactions[-1] == [cache_key(ask("three"), [SOURCE])]


async def test_closing_the_client_commits_what_is_pending(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    prompt = [{"role": "user", "content": "remember me"}]
    with Simulator() as simulator:
        source = Source(
            "openai", "gpt-5.5", api_key="sk-sim", base_url=simulator.base_url("openai")
        )
        async with Client([source], cache=str(directory)) as client:
            answer = await client.complete(prompt)
            assert client._cache is not None
            key = client._cache.key(client.request(prompt))
            assert key is not None
    assert answer.cache_hit is False
    # Another store on the same directory (another process would see the same) has it.
    other = DiskStore(directory)
    assert other.get(key) is not None
    other.close()


async def test_a_failed_answer_is_never_handed_to_the_writer(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "cache")
    layer = CacheMiddleware(store, [SOURCE])

    async def failing(request: Request) -> Response:
        failed = response("partial", usage=Usage(input_tokens=1, output_tokens=1))
        return failed.__class__(**{**_fields(failed), "finish_reason": "error"})

    chain = compose([layer], FakeHandler(failing))
    await chain.complete(ask("x"))
    assert isinstance(layer.backend, DiskCache)
    assert layer.backend.writer.pending == {}
    await layer.aclose()
    assert store.get(cache_key(ask("x"), [SOURCE])) is None


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__slots__}


async def test_the_writer_keeps_the_disk_store_within_its_size_limit(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "small", size_limit=256 * 1024)
    backend = DiskCache(store)
    keys = [f"{i:064x}" for i in range(200)]
    for batch in range(4):
        for key in keys[batch * 50 : (batch + 1) * 50]:
            await backend.save(key, os.urandom(4000).hex().encode(), None)
        await backend.flush()
    assert backend.writer.pending == {}
    assert store.volume() <= 256 * 1024
    assert store.get(keys[-1]) is not None
    assert store.get(keys[0]) is None
    kept = sum(1 for key in keys if store.get(key) is not None)
    assert 0 < kept < 200
    store.close()


async def test_an_expired_entry_is_removed_by_the_next_batch(tmp_path: Path) -> None:
    store = DiskStore(tmp_path / "cache")
    backend = DiskCache(store, ttl=0.01)
    await backend.save("a" * 64, b"old", 0.01)
    await backend.flush()
    await anyio.sleep(0.02)
    assert store._open().get("a" * 64, read=False) is None  # a miss, still on disk
    assert len(store._open()) == 1
    # The new entry lives a minute: a batch that a busy machine takes 10 ms to write must not
    # find it expired too.
    await backend.save("b" * 64, b"new", 60.0)
    await backend.flush()
    assert len(store._open()) == 1
    assert store.get("b" * 64) == b"new"
    store.close()
