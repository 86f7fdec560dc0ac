"""Websocket frames get a size limit at the server (daphne), before anything is parsed or
reaches a consumer (issue 17, "Unbuffered size checks")."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time

import pytest

from bench.launching import free_port
from tests.helpers import ROOT
from webapp.chat.limits import MAX_MESSAGE_CHARS


def _procfile_web_line() -> str:
    line = next(
        line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:")
    )
    return line.removeprefix("web:").strip()


def test_the_servers_frame_limit_is_set_and_fits_the_longest_chat_message() -> None:
    sys.path.insert(0, str(ROOT / "docker"))
    try:
        import entrypoint
    finally:
        sys.path.pop(0)
    web = entrypoint.web_command({"PARLEY_PORT": "8000"})
    for option in ("--websocket-max-message-size", "--websocket-max-frame-size"):
        limit = int(web[web.index(option) + 1])
        # The longest message the chat accepts, JSON-escaped at worst (\\uXXXX, 6 bytes a char).
        assert 6 * MAX_MESSAGE_CHARS < limit <= 1024 * 1024, option
        assert option in _procfile_web_line()


@pytest.fixture
def daphne_as_in_the_procfile():
    """The Procfile's web command on a free port, serving an echo app instead of Parley."""
    port = free_port()
    command = _procfile_web_line().replace(
        "webapp.asgi:application", "tests.security.echo_asgi:application"
    )
    env = {**os.environ, "PARLEY_HOST": "127.0.0.1", "PARLEY_PORT": str(port)}
    env["PATH"] = f"{os.path.dirname(sys.executable)}:{env['PATH']}"
    process = subprocess.Popen(
        ["sh", "-c", "exec " + command], cwd=ROOT, env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        import socket

        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            raise RuntimeError("daphne did not start")
        yield f"ws://127.0.0.1:{port}/"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_an_oversized_frame_closes_the_socket_at_the_server(daphne_as_in_the_procfile) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    line = _procfile_web_line()
    limit = int(re.search(r"--websocket-max-message-size\s+\$\{\w+:-(\d+)\}", line)[1])

    async def talk() -> tuple[str, str]:
        async with connect(daphne_as_in_the_procfile, max_size=None) as ws:
            await ws.send("x" * limit)  # at the limit: the app gets it
            at_limit = str(await ws.recv())
            await ws.send("x" * (limit + 1))
            try:
                return at_limit, str(await asyncio.wait_for(ws.recv(), 10))
            except ConnectionClosed:
                # Autobahn drops the connection as the frame's header announces the size
                # (failByDrop), before the payload is buffered or the app sees any of it.
                return at_limit, "closed"

    at_limit, over_limit = asyncio.run(talk())
    assert at_limit == f"got {limit}"
    assert over_limit == "closed"
