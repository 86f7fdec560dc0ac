"""Schemathesis over the served /v1 OpenAPI schema, against the running stack: whatever it
sends, the API never answers 5xx.

The schema is fetched from the server itself; only the generation budget is narrowed before
the run: answers are capped at 4 tokens and n at 2 (a 2-core CPU writes ~9 tokens/s), which
changes cost, not which requests are valid.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.stack, pytest.mark.timeout(900)]


def test_no_request_the_schema_allows_gets_a_server_error(stack, stack_api_key, tmp_path) -> None:
    schema = httpx.get(stack.web_url + "/v1/openapi.json", timeout=30).json()
    chat = schema["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]
    properties = chat["application/json"]["schema"]["properties"]
    for name in ("max_tokens", "max_completion_tokens"):
        properties[name]["maximum"] = 4
    properties["n"]["maximum"] = 2
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(schema))
    cli = Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [
            str(cli),
            "run",
            str(path),
            "--url",
            stack.web_url,
            "--header",
            f"Authorization: Bearer {stack_api_key}",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "20",
            "--seed",
            "20240610",
            "--request-timeout",
            "120",
            "--workers",
            "2",
            "--no-shrink",
        ],
        capture_output=True,
        text=True,
        timeout=800,
    )
    print(result.stdout[-6000:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    # It really ran: every operation, and hundreds of requests in all.
    assert re.search(r"Tested: 8\b", result.stdout), result.stdout[-3000:]
    generated = re.search(r"(\d+) generated", result.stdout)
    assert generated and int(generated[1]) >= 100, result.stdout[-3000:]
