"""Entrypoint of the app image: one role per container.

    docker run IMAGE web | judge | train | beat | adapter-sync | healthcheck | CMD ...

- ``web``: waits for the database, migrates (under a PostgreSQL advisory lock, so several web
  replicas starting at once do not race), collects static files, creates the admin account only
  when ``DJANGO_SUPERUSER_PASSWORD`` is set (a generated password would land in the logs), then
  becomes daphne.
- ``judge`` / ``train`` / ``beat``: the Celery processes of the Procfile, each exec'd so that
  ``docker stop`` reaches Celery directly and its warm shutdown lets a running task finish.
  ``train`` first prints the update's GPU memory budget (``python -m trainer.gpu_memory``) and
  does not start when it cannot fit or when ``PARLEY_TRAIN_DEVICE=cuda`` finds no GPU.
- ``adapter-sync``: every ``PARLEY_ADAPTER_SYNC_S`` seconds this writes the live version's
  ``NAME=PATH`` to ``PARLEY_LIVE_ADAPTER_FILE`` on the adapters volume, which
  ``docker/vllm-start.sh`` turns into ``--lora-modules`` when a vLLM container (re)starts (the
  official vLLM image has no Django to ask), and loads the live adapter into any running replica
  that still lacks it.
- ``healthcheck``: exit 0 when ``/healthz`` answers 200 (used by the compose health check).
- anything else runs as given (``python manage.py createsuperuser``, ``bash``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence

MIGRATE_LOCK_KEY = 0x5041524D  # "PARM": one migration at a time across web replicas
DATABASE_WAIT_S = 120
# Variables whose values are secrets (or carry one): checked for the example's placeholders.
SECRET_VARIABLES = (
    "DJANGO_SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "POSTGRES_PASSWORD",
    "REDIS_PASSWORD",
    "CELERY_BROKER_URL",
    "JUDGE_API_KEY",
    "VLLM_API_KEY",
)


def say(message: str) -> None:
    print(f"entrypoint | {message}", flush=True)


def celery_command(role: str, env: Mapping[str, str]) -> list[str]:
    """The Celery command line of a worker or beat role (the Procfile's, with container paths)."""
    worker = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "--loglevel", "INFO"]
    if role == "judge":
        concurrency = env.get("PARLEY_JUDGE_CONCURRENCY", "2")
        return [*worker, "-Q", "judge", "-n", "judge@%h", "--concurrency", concurrency]
    if role == "train":
        # One update at a time per worker: the update holds the whole GPU (group) it was given.
        return [*worker, "-Q", "train", "-n", "train@%h", "--concurrency", "1"]
    if role == "beat":
        schedule = os.path.join(env.get("PARLEY_VAR_DIR", "/data/var"), "celerybeat-schedule")
        return [
            sys.executable,
            *("-m", "celery", "-A", "webapp", "beat", "--loglevel", "INFO"),
            *("--schedule", schedule),
        ]
    raise ValueError(f"not a Celery role: {role!r}")


def train_check_command(env: Mapping[str, str]) -> list[str]:
    """The start-up check of the train role: the memory budget, and the device setting."""
    model = env.get("PARLEY_BASE_MODEL", "/models/base")
    return [sys.executable, "-m", "trainer.gpu_memory", "--model", model]


def web_command(env: Mapping[str, str]) -> list[str]:
    port = env.get("PARLEY_PORT", "8000")
    # Websocket messages past this are refused by daphne as the frame arrives (close 1009),
    # before any of it is buffered for the app: 384 KiB fits the longest chat message escaped.
    ws_max = env.get("PARLEY_WS_MAX_MESSAGE_BYTES", "393216")
    return [
        sys.executable,
        *("-m", "daphne", "-b", "0.0.0.0", "-p", port),
        # No --proxy-headers: daphne would believe X-Forwarded-For from anyone. Parley reads
        # it itself, from PARLEY_TRUSTED_PROXIES only (webapp.core.net).
        *("--websocket-max-message-size", ws_max, "--websocket-max-frame-size", ws_max),
        "webapp.asgi:application",
    ]


def health_host(env: Mapping[str, str]) -> str:
    """A Host header Django accepts: the first of DJANGO_ALLOWED_HOSTS (".x.com" → "x.com")."""
    hosts = [h.strip() for h in env.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h.strip()]
    first = hosts[0] if hosts else "localhost"
    return "localhost" if first == "*" else first.lstrip(".")


def replicas_missing(
    live_name: str, models_by_replica: Mapping[str, Sequence[str] | None]
) -> list[str]:
    """Replicas that answered /v1/models without the live adapter (None: did not answer)."""
    return [
        replica
        for replica, models in models_by_replica.items()
        if models is not None and live_name not in models
    ]


LIVE_ADAPTER_FILE = "/data/adapters/live-adapter"


def write_live_adapter(path: str, name: str | None, adapter_path: str | None) -> bool:
    """Keep ``NAME=PATH`` of the live adapter in ``path`` (removed when the base is live).

    Written to a temporary file and renamed, so a starting vLLM never reads half a line.
    Returns whether the file changed.
    """
    line = f"{name}={adapter_path}\n" if name and adapter_path else ""
    try:
        with open(path) as current:
            if current.read() == line:
                return False
    except FileNotFoundError:
        if not line:
            return False
    if not line:
        os.remove(path)
        return True
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        out.write(line)
    os.replace(partial, path)
    return True


def example_secrets(env: Mapping[str, str]) -> list[str]:
    """Names of variables still holding docker/.env.example's placeholder ("change-me")."""
    return sorted(name for name in SECRET_VARIABLES if "change-me" in env.get(name, ""))


def healthcheck(env: Mapping[str, str]) -> int:
    port = env.get("PARLEY_PORT", "8000")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Host": health_host(env)}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return 0 if response.status == 200 else 1
    except OSError as exc:
        print(f"healthcheck: {exc}", file=sys.stderr)
        return 1


def _django() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    django.setup()


def wait_for_database(timeout: float = DATABASE_WAIT_S) -> None:
    from django.db import OperationalError, connection

    deadline = time.monotonic() + timeout
    while True:
        try:
            connection.ensure_connection()
            return
        except OperationalError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"entrypoint | the database did not answer in {timeout:.0f} s: {exc}"
                ) from exc
            say("waiting for the database")
            time.sleep(2)


def migrate_locked() -> None:
    from django.core.management import call_command
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK_KEY])
    try:
        call_command("migrate", interactive=False, verbosity=1)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK_KEY])


def prepare_web() -> None:
    from django.core.management import call_command
    from django.db import connection

    _django()
    wait_for_database()
    migrate_locked()
    call_command("collectstatic", interactive=False, verbosity=0)
    if os.environ.get("DJANGO_SUPERUSER_PASSWORD"):
        call_command("ensure_admin")
    connection.close()


def adapter_sync_forever() -> None:
    import httpx
    from django.conf import settings
    from django.db import DatabaseError, close_old_connections

    from trainer.publish import PublishError, push
    from webapp.learning.models import PolicyVersion

    interval = float(os.environ.get("PARLEY_ADAPTER_SYNC_S", "15"))
    live_file = os.environ.get("PARLEY_LIVE_ADAPTER_FILE", LIVE_ADAPTER_FILE)
    say(f"adapter-sync: checking {', '.join(settings.VLLM_BASE_URLS)} every {interval:.0f} s")
    while True:
        close_old_connections()
        try:
            # The shared lineage's live version; users' own adapters are loaded on their first
            # request after a restart (webapp.inference.adapter_load).
            live = PolicyVersion.objects.filter(
                status=PolicyVersion.Status.LIVE, owner__isnull=True
            ).first()
        except DatabaseError as exc:
            say(f"adapter-sync: cannot read the live version: {exc}")
            live = None
        if live is not None:
            is_adapter = live.number > 0
            name = live.served_name(settings.PARLEY_MODEL_ID) if is_adapter else None
            try:
                if write_live_adapter(live_file, name, live.adapter_path if is_adapter else None):
                    say(f"adapter-sync: a restarting vLLM will load {name or 'the base only'}")
            except OSError as exc:
                say(f"adapter-sync: cannot write {live_file}: {exc}")
        if live is not None and live.number > 0:
            name = live.served_name(settings.PARLEY_MODEL_ID)
            models: dict[str, list[str] | None] = {}
            for replica in settings.VLLM_BASE_URLS:
                try:
                    answer = httpx.get(
                        replica.rstrip("/") + "/models",
                        headers={"Authorization": f"Bearer {settings.VLLM_API_KEY}"},
                        timeout=5,
                    )
                    answer.raise_for_status()
                    models[replica] = [entry["id"] for entry in answer.json()["data"]]
                except (httpx.HTTPError, ValueError, KeyError):
                    models[replica] = None  # down or starting: its health check says so
            for replica in replicas_missing(name, models):
                try:
                    push(
                        live.adapter_path,
                        lora_name=name,
                        serving_urls=[replica],
                        timeout=60,
                        api_key=settings.VLLM_API_KEY,
                    )
                    say(f"adapter-sync: loaded {name} into {replica}")
                except (PublishError, FileNotFoundError) as exc:
                    if "already" not in str(exc).lower():
                        say(f"adapter-sync: {name} into {replica} failed: {exc}")
        time.sleep(interval)


def main(argv: list[str]) -> int:
    role = argv[0] if argv else "web"
    env = dict(os.environ)
    if role == "healthcheck":
        return healthcheck(env)
    placeholders = example_secrets(env)
    if placeholders and env.get("PARLEY_ALLOW_EXAMPLE_SECRETS") != "1":
        print(
            f"entrypoint: error: {', '.join(placeholders)} still hold the example's "
            "'change-me' value; set real secrets in docker/.env",
            file=sys.stderr,
        )
        return 2
    if role == "web":
        prepare_web()
        command = web_command(env)
    elif role in ("judge", "train", "beat"):
        if role == "train":
            checked = subprocess.run(train_check_command(env), check=False).returncode
            if checked != 0:
                return checked
        command = celery_command(role, env)
    elif role == "adapter-sync":
        _django()
        adapter_sync_forever()
        return 0
    else:
        command = argv
    say(f"starting {role}")
    os.execvp(command[0], command)
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
