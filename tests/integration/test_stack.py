"""The whole system as `make run` starts it: the page, the admin account, vLLM and LoRA."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.stack


def _printed_account(admin_line: str) -> tuple[str, str]:
    match = re.search(r"username '([^']+)', password '([^']+)'", admin_line)
    assert match, admin_line
    return match.group(1), match.group(2)


def test_the_printed_url_serves_a_page(stack) -> None:
    page = httpx.get(stack.web_url + "/", timeout=10)
    assert page.status_code == 200
    assert "Parley" in page.text and "SmolLM2-135M-Instruct" in page.text
    assert httpx.get(stack.web_url + "/healthz", timeout=10).json() == {
        "status": "ok",
        "database": "ok",
    }


def test_serving_answered_once_before_ready_was_printed(stack) -> None:
    """The warm-up answer comes before "ready", so no user waits for vLLM's first request."""
    output = stack.launcher.output
    warmed = output.index("serve warmed up (first answer) in")
    assert warmed < output.index("Parley is ready at")


def test_admin_logs_in_with_the_printed_account(stack) -> None:
    username, password = _printed_account(stack.admin_line)
    with httpx.Client(base_url=stack.web_url, follow_redirects=True, timeout=10) as client:
        login = client.get("/admin/login/")
        token = client.cookies["csrftoken"]
        assert 'name="csrfmiddlewaretoken"' in login.text
        answer = client.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": stack.web_url + "/admin/login/"},
        )
        assert answer.status_code == 200
        assert "Site administration" in answer.text
        wrong = client.post(
            "/admin/logout/",
            headers={
                "X-CSRFToken": client.cookies["csrftoken"],
                "Referer": stack.web_url + "/admin/",
            },
        )
        assert wrong.status_code == 200


def test_each_process_logs_with_its_prefix(stack) -> None:
    output = stack.launcher.output
    for process in ("web", "serve", "judge", "train"):
        assert re.search(rf"^\S* ?{process}\.1\s+\|", output, re.MULTILINE), process


def test_vllm_streams_a_chat_completion_from_the_real_model(stack) -> None:
    request = {
        "model": "base",
        "messages": [
            {"role": "user", "content": "What is the capital of France? Answer in one sentence."}
        ],
        "max_tokens": 24,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
    }
    deltas: list[str] = []
    usage = None
    with httpx.stream(
        "POST",
        stack.vllm_url + "/chat/completions",
        json=request,
        headers=stack.vllm_headers,
        timeout=120,
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            usage = chunk.get("usage") or usage
            for choice in chunk["choices"]:
                if choice["delta"].get("content"):
                    deltas.append(choice["delta"]["content"])
                    assert choice["logprobs"]["content"][0]["logprob"] <= 0
    assert len(deltas) > 3, deltas
    assert "paris" in "".join(deltas).lower()
    assert (usage and usage["completion_tokens"] == len(deltas)) or usage["completion_tokens"] > 3


def _first_token_logprobs(stack, model: str) -> list[float]:
    response = httpx.post(
        stack.vllm_url + "/chat/completions",
        headers=stack.vllm_headers,
        timeout=120,
        json={
            "model": model,
            "messages": [{"role": "user", "content": "Name a colour."}],
            "max_tokens": 4,
            "temperature": 0,
            "logprobs": True,
        },
    )
    assert response.status_code == 200, response.text
    return [item["logprob"] for item in response.json()["choices"][0]["logprobs"]["content"]]


def test_a_peft_adapter_hot_loads_and_is_listed(
    stack, prepared_model: Path, tmp_path: Path
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(prepared_model), dtype=torch.float32)
    # init_lora_weights=False: both LoRA matrices random, so the adapter visibly changes outputs.
    peft_model = get_peft_model(
        model,
        LoraConfig(
            r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        ),
    )
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(str(adapter_dir))

    server = stack.vllm_url.rsplit("/v1", 1)[0]
    body = {"lora_name": "test-adapter", "lora_path": str(adapter_dir)}
    # Without Parley's key vLLM refuses to load (or unload) anything: only Parley publishes.
    for path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter"):
        refused = httpx.post(server + path, timeout=60, json=body)
        assert refused.status_code == 401, refused.text
        wrong = {"Authorization": "Bearer not-the-key"}
        assert httpx.post(server + path, timeout=60, json=body, headers=wrong).status_code == 401
    assert httpx.get(stack.vllm_url + "/models", timeout=10).status_code == 401
    loaded = httpx.post(
        server + "/v1/load_lora_adapter", timeout=60, json=body, headers=stack.vllm_headers
    )
    assert loaded.status_code == 200, loaded.text
    listed = httpx.get(stack.vllm_url + "/models", headers=stack.vllm_headers, timeout=10).json()
    assert "test-adapter" in [entry["id"] for entry in listed["data"]]

    base = _first_token_logprobs(stack, "base")
    adapted = _first_token_logprobs(stack, "test-adapter")
    assert base != adapted


def test_a_forged_forwarded_for_does_not_walk_around_the_login_throttle(stack) -> None:
    """Against the running web server: twelve failures, each claiming another X-Forwarded-For,
    are one client (daphne is not told to believe the header, and no proxy is configured)."""
    for path, username in (("/accounts/login/", "nobody-xff"), ("/admin/login/", "nobody-admin")):
        with httpx.Client(base_url=stack.web_url, timeout=30) as client:
            client.get(path)
            token = client.cookies["csrftoken"]
            statuses = [
                client.post(
                    path,
                    data={"username": username, "password": "wrong", "csrfmiddlewaretoken": token},
                    headers={"X-Forwarded-For": f"198.51.100.{n}"},
                ).status_code
                for n in range(12)
            ]
        assert statuses == [200] * 10 + [429, 429], (path, statuses)
