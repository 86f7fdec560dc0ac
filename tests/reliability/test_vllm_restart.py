"""The model server restarted: chats get a clear error while it is gone and work again as soon
as it is back; the serve command of a restarted server names the live adapter (vLLM loads
``--lora-modules`` before its port answers; a real restart costs minutes here and is not run).

A real vLLM restart costs minutes here, so the server is an OpenAI-compatible stand-in on a
real port: first nothing listens there (refused, as during a restart), then it answers, or
it dies mid-answer (the connection reset, as when the process is killed).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from bench.launching import free_port
from tests.sockets import connected_socket
from webapp import replicas
from webapp.chat.models import Message
from webapp.infra.serving import vllm_command
from webapp.learning.models import PolicyVersion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

CHAT = {"model": "parley", "messages": [{"role": "user", "content": "Say hi"}]}


def _chunk(**delta) -> bytes:
    body = {"id": "chatcmpl-fake", "created": 1, "choices": [{"index": 0, "delta": delta}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class FakeVllm(BaseHTTPRequestHandler):
    """Streams "Hi there" in two chunks; with ``die_mid_answer`` resets after the first."""

    die_mid_answer = False
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_chunk(role="assistant", content="Hi"))
        self.wfile.flush()
        if FakeVllm.die_mid_answer:
            # SO_LINGER 0: close with a reset, as the kernel does for a killed process's socket.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        self.wfile.write(_chunk(content=" there"))
        self.wfile.write(
            b'data: {"id": "chatcmpl-fake", "choices": [{"index": 0, "delta": {}, '
            b'"finish_reason": "stop"}]}\n\n'
        )
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        return


class Restartable:
    """A port where the model server is down until ``start()``."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), FakeVllm)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def serving(settings, monkeypatch) -> Iterator[Restartable]:
    server = Restartable()
    settings.VLLM_BASE_URLS = [server.url]
    # The only replica: remembered as down while it restarts, and still the one tried.
    monkeypatch.setattr(replicas, "down", replicas.DownReplicas(for_s=replicas.DOWN_FOR_S))
    FakeVllm.die_mid_answer = False
    yield server
    server.stop()


@pytest.fixture
def secret(db) -> str:
    from django.contrib.auth import get_user_model

    from webapp.api.keys import api_key_create

    return api_key_create(owner=get_user_model().objects.create_user("alice"))[1]


def _post(secret: str, body: dict):
    return AsyncClient().post(
        "/v1/chat/completions",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


async def test_api_answers_503_with_retry_after_while_down_then_recovers(
    serving, secret, settings
) -> None:
    down = await _post(secret, CHAT)
    assert down.status_code == 503
    assert down["Retry-After"] == str(settings.API_SERVE_RETRY_AFTER_S)
    error = json.loads(down.content)["error"]
    assert error["code"] == "serving_unavailable" and "retry" in error["message"].lower()
    failed = await Message.objects.aget(role="assistant")
    assert failed.status == "failed"  # the turn is on record, marked as not answered

    serving.start()
    up = await _post(secret, CHAT)
    assert up.status_code == 200, up.content
    assert json.loads(up.content)["choices"][0]["message"]["content"] == "Hi there"
    streamed = await _post(secret, {**CHAT, "stream": True})
    text = b"".join([part async for part in streamed.streaming_content]).decode()
    assert '"Hi"' in text and '" there"' in text and text.endswith("data: [DONE]\n\n")
    assert await Message.objects.filter(role="assistant", status="complete").acount() == 2


async def test_a_server_killed_mid_answer_ends_the_stream_with_an_error_and_keeps_the_start(
    serving, secret
) -> None:
    FakeVllm.die_mid_answer = True
    serving.start()
    response = await _post(secret, {**CHAT, "stream": True})
    assert response.status_code == 200
    text = b"".join([part async for part in response.streaming_content]).decode()
    assert '"code": "serving_unavailable"' in text and text.endswith("data: [DONE]\n\n")
    answer = await Message.objects.aget(role="assistant")
    assert (answer.status, answer.content) == ("failed", "Hi")

    plain = await _post(secret, CHAT)
    assert plain.status_code == 503 and plain["Retry-After"]


async def _until_idle(socket_: WebsocketCommunicator) -> str:
    frames = []
    while True:
        frames.append(await socket_.receive_from(timeout=15))
        if 'data-state="idle"' in frames[-1]:
            return "".join(frames)


@pytest.mark.usefixtures("answers_end_with_the_test")
async def test_the_chat_page_shows_the_error_and_retry_works_once_it_is_back(serving) -> None:
    from django.contrib.auth import get_user_model

    from webapp.chat import services

    user = await get_user_model().objects.acreate_user("carol")
    conversation = await database_sync_to_async(services.conversation_create)(owner=user)
    socket_ = await connected_socket(user, conversation.pk)
    await socket_.send_to(text_data=json.dumps({"action": "send", "content": "Say hi"}))
    shown = await _until_idle(socket_)
    assert "The model server is not answering right now" in shown
    assert "Your message is saved" in shown
    question = await Message.objects.aget(role="user")

    serving.start()
    await socket_.send_to(text_data=json.dumps({"action": "generate", "parent": question.pk}))
    shown = await _until_idle(socket_)
    assert "Hi there" in shown
    await socket_.disconnect()
    statuses = [m.status async for m in Message.objects.filter(role="assistant").order_by("pk")]
    assert statuses == ["failed", "complete"]


@pytest.mark.usefixtures("answers_end_with_the_test")
async def test_the_chat_page_shows_an_error_when_the_server_dies_mid_answer(serving) -> None:
    from django.contrib.auth import get_user_model

    from webapp.chat import services

    FakeVllm.die_mid_answer = True
    serving.start()
    user = await get_user_model().objects.acreate_user("dave")
    conversation = await database_sync_to_async(services.conversation_create)(owner=user)
    socket_ = await connected_socket(user, conversation.pk)
    await socket_.send_to(text_data=json.dumps({"action": "send", "content": "Say hi"}))
    shown = await _until_idle(socket_)
    assert "The model server is not answering right now" in shown
    await socket_.disconnect()
    answer = await Message.objects.aget(role="assistant")
    assert (answer.status, answer.content) == ("failed", "Hi")


def test_the_serve_command_names_the_live_adapter_in_lora_modules(tmp_path) -> None:
    args, env = vllm_command()
    assert "--lora-modules" not in args  # v0 is live: the base model alone
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"

    adapter = tmp_path / "parley-v3"
    adapter.mkdir()
    PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE).update(
        status=PolicyVersion.Status.RETIRED
    )
    PolicyVersion.objects.create(
        number=3, adapter_path=str(adapter), status=PolicyVersion.Status.LIVE
    )
    args, _ = vllm_command()
    # vLLM loads --lora-modules while starting, before its port answers: the first request
    # after a restart can already be served by the live version under its usual name.
    assert args[args.index("--lora-modules") + 1] == f"parley-v3={adapter}"
    assert "--enable-lora" in args

    adapter.rmdir()  # the folder is gone (a moved var/): start on the base model, not crash
    args, _ = vllm_command()
    assert "--lora-modules" not in args


def test_the_serve_command_sizes_adapter_memory_and_loads_every_lineages_live_adapter(
    tmp_path, settings, alice
) -> None:
    settings.MAX_LORAS, settings.MAX_CPU_LORAS = 3, 2
    folders = {name: tmp_path / name for name in ("shared", "alice", "old")}
    for folder in folders.values():
        folder.mkdir()
    PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE).update(
        status=PolicyVersion.Status.RETIRED
    )
    PolicyVersion.objects.create(number=4, adapter_path=str(folders["shared"]), status="live")
    PolicyVersion.objects.create(
        number=5, owner=alice, adapter_path=str(folders["alice"]), status="live"
    )
    PolicyVersion.objects.create(number=6, adapter_path=str(folders["old"]), status="retired")
    args, _ = vllm_command()
    assert args[args.index("--max-loras") + 1] == "3"
    assert args[args.index("--max-cpu-loras") + 1] == "2"
    modules = [args[i + 1] for i, arg in enumerate(args) if arg == "--lora-modules"]
    assert modules == [f"parley-v4={folders['shared']}", f"parley-v5={folders['alice']}"]
