"""Judge cost (issue 17): the LLM judge shares vLLM with chat, so its requests go behind chat's
(vLLM priority scheduling), and one user's judge work is capped so it cannot push everyone
else's judgements back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainer.judge_client import JudgeEndpoint, complete_n
from webapp.infra.serving import VllmOptions, vllm_server_command


def test_vllm_is_started_with_priority_scheduling() -> None:
    args, _ = vllm_server_command(VllmOptions(model_dir="/m", port=1, dtype="float32"))
    at = args.index("--scheduling-policy")
    assert args[at + 1] == "priority"


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[dict]]]:
    """A real HTTP server that answers like vLLM's chat endpoint and keeps each request body."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            reply = {
                "choices": [
                    {"index": i, "message": {"content": "+1"}} for i in range(body.get("n", 1))
                ]
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()


def test_judge_requests_carry_a_lower_priority_than_chat(recording_server, settings) -> None:
    from webapp.learning.workflows.judging import judge_from_settings

    url, bodies = recording_server
    settings.JUDGE_BASE_URL = url
    settings.JUDGE_PRIORITY = 10
    judge = judge_from_settings()
    assert judge.complete([{"role": "user", "content": "judge this"}], 3) == ["+1"] * 3
    complete_n(JudgeEndpoint(base_url=url, model="base"), [{"role": "user", "content": "x"}], 1)
    # vLLM: lower is earlier, and chat requests carry none (0).
    assert bodies[0]["priority"] == 10 > 0
    assert "priority" not in bodies[1]  # priority 0 is not sent: any judge server accepts it
