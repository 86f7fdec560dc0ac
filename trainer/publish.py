"""Load adapters into vLLM serving replicas and unload them, behind one narrow interface.

vLLM (``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``) loads a peft adapter folder at runtime with
``POST /v1/load_lora_adapter``; requests naming ``lora_name`` use it from then on, and requests
already running finish on whatever they started with. Each version is pushed under a new name
(``load_inplace`` false), so a name never changes weights under a running request.
``GET /v1/models`` lists the adapters a replica holds and ``POST /v1/unload_lora_adapter``
drops one: a request naming it afterwards gets a 404 (and Parley's client loads it again).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx


class PublishError(RuntimeError):
    """A replica refused or did not answer; ``replica`` is its URL."""

    def __init__(self, replica: str, message: str) -> None:
        super().__init__(f"{replica}: {message}")
        self.replica = replica


class ReplicaUnreachable(PublishError):
    """The replica did not answer at all (refused, timed out, dropped): down or restarting."""


def server_base(url: str) -> str:
    """The server root of an OpenAI base URL: "http://h:8001/v1/" → "http://h:8001"."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _post(client: httpx.Client, replica: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = client.post(f"{server_base(replica)}{path}", json=body)
    except httpx.TransportError as error:
        raise ReplicaUnreachable(replica, f"{path} failed: {error!r}") from error
    except httpx.HTTPError as error:
        raise PublishError(replica, f"{path} failed: {error!r}") from error
    if response.status_code != 200:
        raise PublishError(
            replica, f"{path} answered {response.status_code}: {response.text[:300]}"
        )
    seconds = time.perf_counter() - started
    return {"replica": replica, "status": 200, "body": response.text, "seconds": seconds}


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def push(
    adapter_dir: str | Path,
    *,
    lora_name: str,
    serving_urls: Sequence[str],
    timeout: float = 30.0,
    api_key: str = "",
) -> list[dict[str, Any]]:
    """Load the adapter into each replica in turn; one result per replica, or PublishError
    (ReplicaUnreachable for a replica that did not answer).

    ``api_key``: the key vLLM was started with (its adapter endpoints refuse calls without it).
    """
    folder = Path(adapter_dir).resolve()
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{folder} has no adapter_config.json")
    body = {"lora_name": lora_name, "lora_path": str(folder), "load_inplace": False}
    with httpx.Client(timeout=timeout, headers=_headers(api_key)) as client:
        return [_post(client, url, "/v1/load_lora_adapter", body) for url in serving_urls]


def loaded_adapters(serving_url: str, *, timeout: float = 10.0, api_key: str = "") -> list[str]:
    """The names of the LoRA adapters a replica holds: the entries of its ``/v1/models`` that
    have a parent (the base model has none). PublishError when it cannot say."""
    try:
        response = httpx.get(
            f"{server_base(serving_url)}/v1/models", headers=_headers(api_key), timeout=timeout
        )
    except httpx.TransportError as error:
        raise ReplicaUnreachable(serving_url, f"/v1/models failed: {error!r}") from error
    if response.status_code != 200:
        raise PublishError(
            serving_url, f"/v1/models answered {response.status_code}: {response.text[:300]}"
        )
    try:
        return [entry["id"] for entry in response.json()["data"] if entry.get("parent")]
    except (ValueError, KeyError, TypeError) as error:
        raise PublishError(serving_url, f"/v1/models answered {response.text[:300]}") from error


def unload(
    lora_name: str, *, serving_url: str, timeout: float = 30.0, api_key: str = ""
) -> dict[str, Any]:
    """Unload the adapter named ``lora_name`` from one replica; its result, or PublishError.

    vLLM takes the name off at once; requests already running on it finish, and its weights
    leave the engine's adapter cache (``--max-cpu-loras``) as the least recently used.
    """
    with httpx.Client(timeout=timeout, headers=_headers(api_key)) as client:
        return _post(client, serving_url, "/v1/unload_lora_adapter", {"lora_name": lora_name})
