"""Every call Parley makes to vLLM carries its API key; vLLM is started with that key.

vLLM's ``--api-key`` (here given through its ``VLLM_API_KEY`` environment variable, so the key
is not on the command line for ``ps`` to show) refuses any ``/v1/...`` request without it,
``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter`` included. The refusal by a real vLLM
is checked by ``tests/integration/test_stack.py``; here each client is checked against a
stand-in that records the Authorization header it got.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

KEY = "test-vllm-key-0123456789abcdef"


class Recorder:
    """An HTTP server that answers vLLM-shaped replies and records each request's headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def _reply(self, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                recorder.seen.append((self.path, self.headers.get("Authorization")))
                self._reply(b'{"data": []}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                recorder.seen.append((self.path, self.headers.get("Authorization")))
                if self.path.endswith("lora_adapter"):
                    self._reply(b"Success", "text/plain")
                elif body.get("stream"):
                    chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
                    self._reply(
                        f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode(),
                        "text/event-stream",
                    )
                else:
                    choices = [
                        {"index": i, "message": {"content": "ok"}} for i in range(body.get("n", 1))
                    ]
                    self._reply(json.dumps({"choices": choices}).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def vllm() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.server.shutdown()
    recorder.server.server_close()


async def test_chat_streaming_sends_the_key(vllm, settings) -> None:
    from webapp.inference import stream_chat

    settings.VLLM_API_KEY = KEY
    messages = [{"role": "user", "content": "hi"}]
    chunks = [c async for c in stream_chat(messages, model="base", base_url=vllm.url)]
    assert chunks and vllm.seen == [("/v1/chat/completions", f"Bearer {KEY}")]


def test_the_judge_sends_the_key_by_default(vllm, settings) -> None:
    from trainer.judge_client import JudgeEndpoint, complete_n
    from webapp.config import judge_api_key

    # The judge is the same vLLM unless JUDGE_BASE_URL points elsewhere: then its own key.
    assert judge_api_key(judge_base_url="", judge_key="", vllm_key=KEY) == KEY
    assert judge_api_key(judge_base_url="https://j.example/v1", judge_key="", vllm_key=KEY) == ""
    assert judge_api_key(judge_base_url="https://j.example/v1", judge_key="j", vllm_key=KEY) == "j"
    endpoint = JudgeEndpoint(base_url=vllm.url, model="base", api_key=KEY)
    assert complete_n(endpoint, [{"role": "user", "content": "?"}], 2) == ["ok", "ok"]
    assert vllm.seen == [("/v1/chat/completions", f"Bearer {KEY}")]


def test_publish_sends_the_key(vllm, tmp_path: Path) -> None:
    from trainer.publish import push

    (tmp_path / "adapter_config.json").write_text("{}")
    push(tmp_path, lora_name="parley-v1", serving_urls=[vllm.url], api_key=KEY)
    assert vllm.seen == [("/v1/load_lora_adapter", f"Bearer {KEY}")]


def test_the_launchers_warm_up_sends_the_key(vllm) -> None:
    from webapp.infra.launcher import _warm_up

    _warm_up(vllm.url, api_key=KEY)
    assert vllm.seen == [("/v1/chat/completions", f"Bearer {KEY}")]


@pytest.mark.django_db
def test_vllm_is_started_with_the_key_in_its_environment_not_its_command_line(settings) -> None:
    from webapp.infra.serving import vllm_command

    settings.VLLM_API_KEY = KEY
    args, env = vllm_command()
    assert env["VLLM_API_KEY"] == KEY
    assert KEY not in " ".join(args)


def test_the_embedded_key_is_kept_in_var_and_settings_use_it(settings) -> None:
    if not settings.EMBEDDED:
        pytest.skip("external services: the key comes from VLLM_API_KEY")
    kept = (settings.VAR_DIR / "vllm_api_key").read_text().strip()
    assert settings.VLLM_API_KEY == kept and len(kept) >= 32
    assert settings.JUDGE_API_KEY == kept
