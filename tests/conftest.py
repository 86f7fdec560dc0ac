from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.launching import Launcher, clean_env, free_port

pytest_plugins = ["tests.fixtures"]


@dataclass
class Stack:
    launcher: Launcher
    web_url: str
    vllm_url: str
    admin_line: str
    var_dir: Path | None = None

    @property
    def vllm_api_key(self) -> str:
        """The stack's vLLM API key (generated into its var/)."""
        assert self.var_dir is not None
        return (self.var_dir / "vllm_api_key").read_text().strip()

    @property
    def vllm_headers(self) -> dict[str, str]:
        """The stack's vLLM API key as vLLM wants it."""
        return {"Authorization": f"Bearer {self.vllm_api_key}"}

    def manage(self, *args: str) -> str:
        """Run a manage.py command against the stack's own database; returns its stdout."""
        import subprocess
        import sys

        from tests.helpers import ROOT

        env = dict(self.launcher.env)
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def sql(self, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Rows from the stack's own PostgreSQL (the test database is a different one)."""
        import json

        import psycopg

        from webapp.config import database_from_url

        assert self.var_dir is not None
        url = json.loads((self.var_dir / "run" / "infra.json").read_text())["database_url"]
        db = database_from_url(url)
        with psycopg.connect(host=db["HOST"], user=db["USER"], dbname=db["NAME"]) as conn:
            return conn.execute(query, params).fetchall()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that use the running system go last, in their own order.

    The system keeps working between its tests: its train worker trains every user's waiting
    samples (the API, chat and browser tests leave feedback), several updates in a row on both
    cores. Started in the middle of the session, it ran beside every later test, the trainer's
    torch tests among them, and slowed them several times over (measured: updates still
    training 25 minutes after the system started). Last, it only runs beside its own tests,
    and stops with the session. ``trylast``: after pytest-django's reordering.
    """
    uses_stack = [item for item in items if "stack" in getattr(item, "fixturenames", ())]
    if uses_stack:
        chosen = {id(item) for item in uses_stack}
        items[:] = [item for item in items if id(item) not in chosen] + uses_stack


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Stack]:
    """The whole system started the way `make run` starts it, on free ports, once per session."""
    web_port, vllm_port = free_port(), free_port()
    var_dir = tmp_path_factory.mktemp("stack-var")
    env = clean_env(
        PARLEY_VAR_DIR=str(var_dir),
        PARLEY_PORT=str(web_port),
        VLLM_PORT=str(vllm_port),
        # Short web-chat answers keep the browser and consumer tests quick on 2 cores.
        PARLEY_CHAT_MAX_TOKENS="96",
        # Samples left over by earlier tests train within a minute (the beat's check) instead
        # of after the default 10 minutes, so tests that wait for an update stay short.
        PARLEY_TRAIN_MAX_WAIT_S="20",
        # The swap and load tests drive up to 20 concurrent streams through one user's key to
        # show that publishing fails none of them; the per-user limits have their own tests.
        PARLEY_USER_MAX_STREAMS="32",
        PARLEY_USER_RATE_LIMIT_PER_MINUTE="0",
    )
    for name in ("DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_PASSWORD"):
        env.pop(name, None)
    launcher = Launcher(env)
    try:
        launcher.wait_for(
            "Parley is ready at", timeout=float(os.environ.get("PARLEY_STACK_TIMEOUT", 900))
        )
        admin_line = launcher.wait_for("created the admin account", timeout=5)
        yield Stack(
            launcher=launcher,
            web_url=f"http://127.0.0.1:{web_port}",
            vllm_url=f"http://127.0.0.1:{vllm_port}/v1",
            admin_line=admin_line,
            var_dir=var_dir,
        )
    finally:
        try:
            launcher.interrupt()
        finally:
            launcher.kill()
            _report_stack_log(request, launcher, var_dir)


def _report_stack_log(request: pytest.FixtureRequest, launcher: Launcher, var_dir: Path) -> None:
    """Keep the whole system's log, and show its errors when a test failed (CI shows no files)."""
    (var_dir / "launcher.log").write_text(launcher.output)
    if not request.session.testsfailed:
        return
    lines = [
        line for line in launcher.lines if "ERROR" in line or "Traceback" in line or "Error" in line
    ]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(
            f"\n--- stack log: {len(lines)} error lines (full log: {var_dir / 'launcher.log'}) ---"
        )
        print("\n".join(lines[-80:]))


@pytest.fixture(scope="session")
def stack_api_key(stack: Stack) -> str:
    """A user ``alice`` on the running stack, and an API key of hers."""
    return stack.manage(
        "create_api_key", "--user", "alice", "--name", "tests", "--create-user"
    ).strip()


@pytest.fixture(scope="session")
def prepared_model() -> Path:
    """The real base-model folder, prepared by the project's own command (a no-op when done)."""
    import subprocess
    import sys

    from bench.launching import clean_env
    from tests.helpers import ROOT

    env = clean_env()
    subprocess.run([sys.executable, "manage.py", "prepare_model"], cwd=ROOT, env=env, check=True)
    return ROOT / "var" / "models" / "SmolLM2-135M-Instruct"


@pytest.fixture
async def answers_end_with_the_test():
    """Answers are written apart from the page that asked: each test gets a channel layer of its
    own event loop (channels-redis keeps locks bound to the loop that first waited on them) and
    waits for its answers to be stored, and for the layer's tidying after each receive, so none
    outlives the test's loop."""
    import asyncio

    from channels.layers import channel_layers, get_channel_layer

    from webapp.frontdoor import generations

    channel_layers.backends.pop("default", None)
    yield
    await asyncio.wait_for(
        asyncio.gather(*generations.running(), return_exceptions=True), timeout=10
    )
    cleaners = list(getattr(get_channel_layer(), "receive_cleaners", []))
    await asyncio.wait_for(asyncio.gather(*cleaners, return_exceptions=True), timeout=5)
