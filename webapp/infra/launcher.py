"""The one long-lived launcher behind `make run` and `make test`.

``python -m webapp.infra.launcher run``  prepares the model, starts the embedded PostgreSQL and
Redis (unless DATABASE_URL / REDIS_URL are set), migrates, creates the admin on first start,
runs the Procfile with honcho and prints the URL once web and serving answer. Ctrl-C stops it
all, embedded databases included.

``python -m webapp.infra.launcher exec -- CMD ...`` runs CMD with the same infrastructure up
(this is how the test suite gets its PostgreSQL and Redis).

Every failure the user can fix ends in one line on stderr that says what to do, and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from webapp.config import (
    INFRA_FILE,
    ConfigError,
    env_int,
    env_list,
    env_str,
    infra_urls,
    private_dir,
    redacted,
    vllm_api_key,
)
from webapp.infra import checks
from webapp.infra.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    remove_infra_file,
    write_infra_file,
)

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 900


def say(message: str) -> None:
    print(f"parley | {message}", flush=True)


class Stop(Exception):
    """SIGTERM arrived: leave the same way Ctrl-C does."""


def _raise_stop(signum: int, frame: object) -> None:
    raise Stop


def var_dir() -> Path:
    return Path(env_str("PARLEY_VAR_DIR", str(ROOT / "var"))).resolve()


@contextlib.contextmanager
def infrastructure(var: Path) -> Iterator[dict[str, str]]:
    """Environment for child processes, with PostgreSQL and Redis reachable through it."""
    # Secrets are written under var/ and var/run/: both must be this user's own.
    private_dir(var)
    private_dir(var / INFRA_FILE.parent)
    env = dict(os.environ)
    database_url = env.get("DATABASE_URL", "")
    redis_url = env.get("REDIS_URL", "")
    postgres = EmbeddedPostgres(var / "postgres") if not database_url else None
    redis = EmbeddedRedis(var / "redis") if not redis_url else None
    try:
        if postgres is not None:
            started = time.monotonic()
            database_url = postgres.start()
            say(
                f"embedded PostgreSQL up in {time.monotonic() - started:.1f} s ({var / 'postgres'})"
            )
        else:
            checks.database_reachable(database_url)
            say(f"using DATABASE_URL={redacted(database_url)}")
        if redis is not None:
            started = time.monotonic()
            redis_url = redis.start()
            say(f"embedded Redis up in {time.monotonic() - started:.1f} s ({redis.socket_path})")
        else:
            checks.redis_reachable(redis_url)
            say(f"using REDIS_URL={redacted(redis_url)}")
        write_infra_file(
            var,
            database_url=database_url,
            redis_url=redis_url,
            embedded=postgres is not None or redis is not None,
        )
        env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, PARLEY_VAR_DIR=str(var))
        if postgres is not None or redis is not None:
            env["PARLEY_EMBEDDED"] = "1"
        yield env
    finally:
        remove_infra_file(var)
        if redis is not None:
            redis.stop()
        if postgres is not None:
            postgres.stop()
            say("embedded PostgreSQL and Redis stopped")


def manage(env: dict[str, str], *args: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(result.returncode)


def run() -> int:
    host = env_str("PARLEY_HOST", "127.0.0.1")
    port = env_int("PARLEY_PORT", 8000)
    serve = env_str("PARLEY_SERVE", "1") != "0"
    checks.port_free(host, port, "PARLEY_PORT")
    if serve:
        checks.port_free(env_str("VLLM_HOST", "127.0.0.1"), env_int("VLLM_PORT", 8001), "VLLM_PORT")
    manage(dict(os.environ), "prepare_model")
    var = var_dir()
    with infrastructure(var) as env:
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "ensure_admin")
        manage(env, "collectstatic", "--noinput", "-v", "0")
        env.update(PYTHONUNBUFFERED="1", PARLEY_HOST=host, PARLEY_PORT=str(port))
        # vLLM is started with this key and every process sends it (VLLM_API_KEY, else the one
        # generated once into var/vllm_api_key).
        env["VLLM_API_KEY"] = vllm_api_key(var_dir=var)
        # The Procfile says `python`: make that this interpreter (the project's .venv).
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        procfile = ROOT / ("Procfile" if serve else "Procfile.noserve")
        honcho = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", str(procfile), "-d", str(ROOT)],
            env=env,
            cwd=ROOT,
        )
        try:
            _wait_until_ready(
                honcho, host=host, port=port, serve=serve, api_key=env["VLLM_API_KEY"]
            )
            return honcho.wait()
        except (KeyboardInterrupt, Stop):
            say("stopping (Ctrl-C)")
            # Its processes, listed now: killed honcho could not pass a signal on to them.
            tree = _descendants(honcho.pid)
            with contextlib.suppress(ProcessLookupError):
                honcho.send_signal(signal.SIGTERM)
            try:
                honcho.wait(timeout=30)
            except subprocess.TimeoutExpired:
                honcho.kill()
            # Whatever outlived honcho (a train worker finishing its update, vLLM's engine)
            # would go on without its database: it goes now.
            _kill_all(tree)
            return 0


def _descendants(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True)
    return []


def _kill_all(processes: list[psutil.Process]) -> None:
    """SIGKILL those still running; a process id reused since is not touched (psutil checks
    each process's start time)."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=10)


def _wait_until_ready(
    honcho: subprocess.Popen[bytes], *, host: str, port: int, serve: bool, api_key: str
) -> None:
    import httpx

    web_url = f"http://{host}:{port}/"
    targets = {"web": f"{web_url}healthz"}
    replicas: dict[str, str] = {}  # serving target name -> its OpenAI base URL
    if serve:
        for index, base in enumerate(
            env_list(
                "VLLM_BASE_URLS",
                [f"http://{env_str('VLLM_HOST', '127.0.0.1')}:{env_int('VLLM_PORT', 8001)}/v1"],
            )
        ):
            replicas[f"serve{index or ''}"] = base
            targets[f"serve{index or ''}"] = base.rsplit("/v1", 1)[0] + "/health"
    started = time.monotonic()
    last_report = started
    pending = dict(targets)
    while pending:
        if honcho.poll() is not None:
            raise SystemExit(honcho.returncode or 1)
        for name, url in list(pending.items()):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2).status_code == 200:
                    say(f"{name} ready after {time.monotonic() - started:.0f} s")
                    del pending[name]
                    if name in replicas:
                        _warm_up(replicas[name], api_key=api_key)
        now = time.monotonic()
        if pending and now - last_report >= 10:
            last_report = now
            waiting = ", ".join(pending)
            hint = (
                " (the model server loads and warms up the model: vLLM about 40 s on 2 CPU"
                " cores, llama.cpp a few seconds)"
                if any(n.startswith("serve") for n in pending)
                else ""
            )
            say(f"waiting for {waiting}: {now - started:.0f} s{hint}")
        if now - started > READY_TIMEOUT_S:
            say(f"still not ready after {READY_TIMEOUT_S} s: {', '.join(pending)}; see the log")
            return
        time.sleep(1)
    say("=" * 60)
    say(f"Parley is ready at {web_url}")
    say(f"admin: {web_url}admin/  (account printed above on first start; see var/admin.txt)")
    say("stop with Ctrl-C")
    say("=" * 60)


def _warm_up(base_url: str, *, api_key: str) -> None:
    """One short answer before anyone chats: vLLM's first request prepares its kernels (12 s
    here on 2 cores; llama.cpp's, well under a second), which would otherwise be the first
    user's wait for a first token."""
    import httpx

    from webapp.infra.serving import BASE_SERVED_NAME

    started = time.monotonic()
    body = {
        "model": BASE_SERVED_NAME,
        "messages": [{"role": "user", "content": "Hello!"}],
        "max_tokens": 4,
        "logprobs": True,  # the same path Parley's requests take (it records log-probs)
    }
    try:
        httpx.post(
            base_url.rstrip("/") + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
            timeout=300,
        ).raise_for_status()
    except httpx.HTTPError as exc:
        say(f"warm-up request to {base_url} failed ({exc}); the first chat will be slower")
        return
    say(f"serve warmed up (first answer) in {time.monotonic() - started:.1f} s")


def running_infrastructure(var: Path) -> dict[str, str] | None:
    """The environment of a `make run` already up on ``var``, or None when none answers.

    A second embedded Redis on the same files would be the running one, and stopping it at
    the end would take the running system's broker away (its sockets are shared): a command
    run beside `make run` borrows its services and leaves them as they were.
    """
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return None  # nothing embedded to start or stop
    try:
        infra = json.loads((var / INFRA_FILE).read_text())
        database_url, redis_url = infra_urls(var_dir=var)
        checks.database_reachable(database_url)
        checks.redis_reachable(redis_url)
    except (OSError, ConfigError, checks.SetupError, ValueError, KeyError, AttributeError):
        return None
    env = dict(os.environ)
    env.update(DATABASE_URL=database_url, REDIS_URL=redis_url, PARLEY_VAR_DIR=str(var))
    if infra.get("embedded", True):
        env["PARLEY_EMBEDDED"] = "1"
    return env


def exec_with_infra(command: list[str]) -> int:
    if not command:
        raise ConfigError("exec needs a command: python -m webapp.infra.launcher exec -- CMD")
    var = var_dir()
    borrowed = running_infrastructure(var)
    if borrowed is not None:
        say(f"using the PostgreSQL and Redis of the Parley running on {var}")
        return _run_child(command, borrowed)
    with infrastructure(var) as env:
        return _run_child(command, env)


def _run_child(command: list[str], env: dict[str, str]) -> int:
    child = subprocess.Popen(command, env=env, cwd=ROOT)
    try:
        return child.wait()
    except (KeyboardInterrupt, Stop):
        child.send_signal(signal.SIGINT)
        return child.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webapp.infra.launcher")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("run", help="run the whole system (make run)")
    exec_parser = sub.add_parser("exec", help="run a command with PostgreSQL and Redis up")
    exec_parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stop)
    # A launcher started from a script or CI may inherit SIGINT as ignored (background jobs of a
    # non-interactive shell); Ctrl-C must still stop everything cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if args.action == "run":
            return run()
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return exec_with_infra(command)
    except (ConfigError, checks.SetupError) as exc:
        print(f"parley: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
