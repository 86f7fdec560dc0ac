"""Publishing talks to replicas over real HTTP (a local stand-in for vLLM's endpoints): loading,
listing and unloading adapters."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainer.publish import (
    PublishError,
    ReplicaUnreachable,
    loaded_adapters,
    push,
    server_base,
    unload,
)

MODELS = {
    "object": "list",
    "data": [
        {"id": "base", "root": "/models/SmolLM2", "parent": None},
        {"id": "parley-v3", "root": "/adapters/update-3", "parent": "base"},
        {"id": "parley-v5", "root": "/adapters/update-5", "parent": "base"},
    ],
}


class _Replica:
    def __init__(self, status: int) -> None:
        self.status = status
        self.requests: list[tuple[str, dict]] = []
        replica = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                replica.requests.append((self.path, {"auth": self.headers["Authorization"]}))
                self.send_response(replica.status)
                self.end_headers()
                self.wfile.write(json.dumps(MODELS).encode() if replica.status == 200 else b"no")

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                replica.requests.append((self.path, json.loads(self.rfile.read(length))))
                self.send_response(replica.status)
                self.end_headers()
                self.wfile.write(b"Success" if replica.status == 200 else b"bad adapter")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def replicas() -> Iterator[list[_Replica]]:
    started = [_Replica(200), _Replica(200)]
    yield started
    for replica in started:
        replica.server.shutdown()
        replica.server.server_close()


@pytest.fixture
def adapter_dir(tmp_path: Path) -> Path:
    (tmp_path / "adapter_config.json").write_text("{}")
    return tmp_path


def test_push_loads_the_adapter_into_every_replica(replicas, adapter_dir: Path) -> None:
    urls = [replicas[0].url, replicas[1].url + "/"]
    results = push(adapter_dir, lora_name="parley-v3", serving_urls=urls, timeout=5)
    assert [r["replica"] for r in results] == urls
    for replica in replicas:
        assert replica.requests == [
            (
                "/v1/load_lora_adapter",
                {
                    "lora_name": "parley-v3",
                    "lora_path": str(adapter_dir.resolve()),
                    "load_inplace": False,
                },
            ),
        ]


def test_a_refusing_replica_raises_naming_it(replicas, adapter_dir: Path) -> None:
    replicas[1].status = 400
    with pytest.raises(PublishError) as raised:
        push(adapter_dir, lora_name="v", serving_urls=[r.url for r in replicas], timeout=5)
    assert raised.value.replica == replicas[1].url
    assert "400" in str(raised.value) and "bad adapter" in str(raised.value)


def test_an_unreachable_replica_raises_naming_it(replicas, adapter_dir: Path) -> None:
    dead = "http://127.0.0.1:9/v1"
    with pytest.raises(PublishError) as raised:
        push(adapter_dir, lora_name="v", serving_urls=[replicas[0].url, dead], timeout=2)
    assert raised.value.replica == dead and dead in str(raised.value)


def test_a_replica_that_does_not_answer_is_unreachable_and_one_that_refuses_is_not(
    replicas, adapter_dir: Path
) -> None:
    with pytest.raises(ReplicaUnreachable):
        push(adapter_dir, lora_name="v", serving_urls=["http://127.0.0.1:9/v1"], timeout=2)
    replicas[0].status = 400
    with pytest.raises(PublishError) as raised:
        push(adapter_dir, lora_name="v", serving_urls=[replicas[0].url], timeout=2)
    assert not isinstance(raised.value, ReplicaUnreachable)


def test_the_adapters_a_replica_holds_are_its_models_with_a_parent(replicas) -> None:
    assert loaded_adapters(replicas[0].url, api_key="k") == ["parley-v3", "parley-v5"]
    assert replicas[0].requests == [("/v1/models", {"auth": "Bearer k"})]
    with pytest.raises(ReplicaUnreachable):
        loaded_adapters("http://127.0.0.1:9/v1", timeout=2)
    replicas[1].status = 401
    with pytest.raises(PublishError, match="401"):
        loaded_adapters(replicas[1].url)


def test_unload_names_the_adapter_to_one_replica(replicas) -> None:
    result = unload("parley-v3", serving_url=replicas[1].url + "/", timeout=5)
    assert result["replica"] == replicas[1].url + "/"
    assert replicas[1].requests == [("/v1/unload_lora_adapter", {"lora_name": "parley-v3"})]
    assert replicas[0].requests == []
    replicas[0].status = 404
    with pytest.raises(PublishError, match="404"):
        unload("parley-v3", serving_url=replicas[0].url, timeout=5)


def test_a_folder_without_an_adapter_is_refused_before_any_request(replicas, tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        push(tmp_path, lora_name="v", serving_urls=[replicas[0].url], timeout=5)
    assert replicas[0].requests == []


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://h:8001/v1", "http://h:8001"),
        ("http://h:8001/v1/", "http://h:8001"),
        ("http://h:8001", "http://h:8001"),
    ],
)
def test_server_base_strips_the_v1_suffix(url: str, base: str) -> None:
    assert server_base(url) == base
