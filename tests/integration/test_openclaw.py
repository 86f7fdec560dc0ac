"""The real OpenClaw client (installed from the npm registry by `make openclaw-client`)
against the running system, real vLLM and the real model: bench.openclaw_check's session,
and a prompt too large for the model answered the way OpenClaw understands."""

from __future__ import annotations

import pytest

from bench.openclaw_check import run_check, table
from bench.openclaw_client import OPENCLAW_VERSION, Agent, Profile, installed, provider_config

pytestmark = [
    pytest.mark.stack,
    pytest.mark.skipif(
        not installed(),
        reason=f"OpenClaw {OPENCLAW_VERSION} is not installed: make openclaw-client",
    ),
]


@pytest.mark.parametrize("memory", ["", "Call me Sam"], ids=["memory off", "memory on"])
def test_openclaw_holds_a_session_with_parley_and_its_follow_up_is_judged(
    stack, tmp_path, memory
) -> None:
    # A user of their own for each run (a memory stays with its owner). Shorter answers than
    # the documented 256 keep the session quick on a CPU; the contract is the same.
    user = "openclaw-" + ("memory" if memory else "plain")
    key = stack.manage("create_api_key", "--user", user, "--name", "t", "--create-user").strip()
    report = run_check(
        base_url=stack.web_url,
        api_key=key,
        var_dir=stack.var_dir,
        out_dir=tmp_path,
        max_tokens=128,
        memory=memory,
    )
    # Its samples are checked below, not trained: the stack's one train worker stays free for
    # the tests that train.
    stack.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model as users\n"
        "from django.db import transaction\n"
        "from webapp.learning.preferences import learning_pause_set\n"
        "with transaction.atomic():\n"
        f"    learning_pause_set(user=users().objects.get(username='{user}'), paused=True)",
    )
    print(table(report))
    assert report.passed, (report.failures, report.conversations, f"requests: {tmp_path}")
    chats = [e for e in report.exchanges if e["path"] == "/v1/chat/completions"]
    first = chats[0]
    # What OpenClaw really sends, every field of it accepted.
    assert first["fields"]["stream"] is True and first["fields"]["tool_choice"] == "auto"
    assert first["fields"]["stream_options"] == {"include_usage": True}
    assert first["fields"]["max_completion_tokens"] == report.profile["max_tokens"] == 128
    assert set(first["tools"]) == {"read", "exec"}
    assert all(e["status"] == 200 and e["usage"] for e in chats)
    # Told the served window, the slim profile leaves room for a long conversation.
    assert first["usage"]["prompt_tokens"] < report.profile["context_window"] // 3
    # One conversation, however the tool turn went: the follow-up and the next question each
    # the next state of an answer, and the tool's result too when the tool ran.
    (conversation,) = report.conversations
    ran = report.tool_round_trip.startswith("the tool ran")
    assert conversation["tool_results"] == int(ran)
    assert conversation["with_next_state"] >= 2 + int(ran)
    # The answers given the owner's memory when there is one, none otherwise.
    assert (report.answers_given_memory > 0) == bool(memory)
    assert report.judgements and report.judgements[0]["score"] == -1
    # ... and the user's words are what it learns from.
    (sample,) = report.samples
    assert sample["reward"] == -1 and "short sentence" in sample["hint"]


def test_a_prompt_larger_than_the_window_is_openclaws_context_overflow(
    stack, stack_api_key, tmp_path
) -> None:
    """OpenClaw's full agent (12 tools, its workspace prompt: about 15k tokens) told the real
    window: Parley refuses in OpenAI's words and OpenClaw says what its user must change,
    instead of failing on an unexplained error."""
    from bench.openclaw_proxy import LoggingProxy

    with LoggingProxy(stack.web_url) as proxy:
        config = provider_config(
            base_url=proxy.url,
            api_key=stack_api_key,
            profile=Profile("full", context_window=8192, max_tokens=256),
            workspace=tmp_path / "workspace",
        )
        result = Agent(tmp_path / "state", config).turn("Hi!", session_id="too-large")
    assert result.exit_code != 0
    assert "Context overflow" in result.reply + result.log
    refused = [e for e in proxy.exchanges if e.status == 400]
    assert refused and all(e.error_code == "context_length_exceeded" for e in refused)
    assert all(e.status in (200, 400) for e in proxy.exchanges)
