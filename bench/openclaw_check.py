"""The OpenClaw check: the real OpenClaw client talking to a running Parley.

It installs OpenClaw (``bench.openclaw_client``) if needed, writes the provider config that
docs/openclaw.md gives (with the context window and largest answer that ``/v1/models``
states), puts a logging proxy between the two (``bench.openclaw_proxy``), and drives
OpenClaw's non-interactive agent through one session: a plain question, a follow-up in the
user's own words, and a turn that asks for a tool (the proxy names the tool in
``tool_choice`` for that one request, since a 135M model seldom calls one by itself).

Then it reads Parley's own database: the session must be one conversation, the follow-up
the first answer's next state, and that answer judged. It prints what OpenClaw sent and got
(sizes, fields, statuses), appends to bench/results.jsonl and writes the transcript to
bench/results/openclaw/.

    make run                      # in one terminal
    make openclaw-check           # in another (python -m bench.openclaw_check)
    python -m bench.openclaw_check --start    # or on a Parley of its own, on free ports
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import record, sql
from bench.launching import ROOT
from bench.openclaw_client import Agent, Profile, TurnResult, install, installed, provider_config
from bench.openclaw_proxy import Exchange, LoggingProxy

OUT = ROOT / "bench" / "results" / "openclaw"  # the transcripts (tracked)
RUNS = ROOT / "var" / "openclaw" / "runs"  # OpenClaw's state and the whole requests (not tracked)
SECRET = "The secret word is PAPAYA."
TURNS = (
    "What is the capital of France?",
    "No, that is far too long. Answer in one short sentence, please.",
    "Use the read tool to read hello.txt and tell me the secret word.",
)
# More turns (--turns N) continue the session with questions of other kinds and languages.
MORE_TURNS = (
    "Thanks! What is 7 times 8?",
    "Name one river in Africa.",
    "Und wie heißt die Hauptstadt von Österreich?",
    "Give me one tip for sleeping better.",
    "谢谢！现在用一句话解释什么是光合作用。",
    "What did I ask you first in this conversation?",
)
TOOL_TURN = 2  # the turn whose first request names the read tool
KEY_OWNER = ("--user", "openclaw-check", "--name", "openclaw-check", "--create-user")


@dataclass
class CheckReport:
    session_id: str
    profile: dict[str, Any]
    turns: list[dict[str, Any]]
    exchanges: list[dict[str, Any]]
    conversations: list[dict[str, Any]] = field(default_factory=list)
    judgements: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    tool_round_trip: str = ""
    memory: str = ""  # a memory of the key's owner, served in every request (empty: none)
    answers_given_memory: int = 0
    reworked_answers: list[str] = field(default_factory=list)  # answers sent back changed
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def served_limits(base_url: str, api_key: str) -> tuple[int, int]:
    """(context window, largest answer) of ``parley`` as /v1/models states them."""
    response = httpx.get(
        base_url.rstrip("/") + "/v1/models",
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )
    response.raise_for_status()
    entry = next(m for m in response.json()["data"] if m["id"] == "parley")
    return int(entry["context_window"]), int(entry["max_output_tokens"])


def run_check(
    *,
    base_url: str,
    api_key: str,
    var_dir: Path,
    out_dir: Path = RUNS,
    profile_name: str = "slim",
    max_tokens: int = 256,
    turns: tuple[str, ...] = TURNS,
    judge_wait_s: float = 180,
    memory: str = "",
) -> CheckReport:
    """Drive OpenClaw through ``turns`` in one session against Parley at ``base_url``; with
    ``memory``, the key's owner has it as a memory first (Parley adds it to every request)."""
    if memory:
        httpx.post(
            base_url.rstrip("/") + "/v1/memories",
            json={"text": memory},
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=30,
        ).raise_for_status()
    window, largest = served_limits(base_url, api_key)
    profile = Profile(profile_name, context_window=window, max_tokens=min(max_tokens, largest))
    session_id = f"parley-check-{int(time.time())}"
    state = out_dir / session_id
    workspace = state / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "hello.txt").write_text(SECRET + "\n")
    started_at = time.time()
    with LoggingProxy(base_url) as proxy:
        agent = Agent(
            state,
            provider_config(
                base_url=proxy.url, api_key=api_key, profile=profile, workspace=workspace
            ),
        )
        results: list[TurnResult] = []
        for index, message in enumerate(turns):
            if index == TOOL_TURN:
                proxy.force_tool = "read"
            result = agent.turn(message, session_id=session_id)
            results.append(result)
            print(
                f"openclaw | turn {index + 1}: exit {result.exit_code} in {result.seconds} s: "
                f"{result.reply[:100]!r}",
                flush=True,
            )
        exchanges = list(proxy.exchanges)
    with (state / "requests.jsonl").open("w") as requests:
        for exchange in exchanges:  # what OpenClaw sent, whole (the key is in no body)
            requests.write(json.dumps(exchange.body) + "\n")
    report = CheckReport(
        session_id=session_id,
        profile=asdict(profile),
        turns=[asdict(r) | {"log": r.log[-2000:]} for r in results],
        exchanges=[e.summary() for e in exchanges],
        reworked_answers=_reworked_answers(exchanges),
        memory=memory,
    )
    _check_client_side(report, results, exchanges)
    _check_recorded(
        report, var_dir=var_dir, key=api_key, since=started_at, judge_wait_s=judge_wait_s
    )
    return report


def _check_client_side(report: CheckReport, results: list[TurnResult], exchanges: list) -> None:
    chats = [e for e in exchanges if e.path.endswith("/chat/completions")]
    cut_call = next((e for e in chats if e.forced_tool and e.finish_reason == "length"), None)
    for index, result in enumerate(results):
        if index == TOOL_TURN and cut_call is not None:
            # The model's call ran out of maxTokens: Parley said so (finish_reason: length)
            # and OpenClaw, as it does with any cut answer, did not run half a call (it says
            # "incomplete turn", or shows what was written as the reply).
            report.tool_round_trip = (
                "the model's call was cut at maxTokens (finish_reason: length); OpenClaw "
                "did not run the incomplete call"
            )
            if result.exit_code == 0 or "incomplete turn" in result.log:
                continue
        if result.exit_code != 0 or not result.reply:
            report.failures.append(
                f"turn {index + 1}: OpenClaw exited {result.exit_code} with "
                f"{result.reply[:200]!r}; its log ends {result.log[-600:]!r}"
            )
    if not chats:
        report.failures.append("OpenClaw sent no chat request")
    for number, exchange in enumerate(chats, 1):
        if exchange.status != 200:
            report.failures.append(
                f"request {number}: {exchange.status} {exchange.error_code}: "
                f"{exchange.error_message}"
            )
        elif exchange.error_code:
            report.failures.append(f"request {number}: error in the stream: {exchange.error_code}")
    forced = [e for e in chats if e.forced_tool]
    if forced and not report.tool_round_trip:
        answer = forced[0]
        after = chats[chats.index(answer) + 1] if answer is not chats[-1] else None
        if not answer.tool_calls:
            report.failures.append("the tool turn's answer carried no tool call")
        elif after is not None and "tool" in after.roles:
            report.tool_round_trip = f"the tool ran, its result came back ({answer.tool_arguments})"
        elif after is not None and after.roles == answer.roles:
            # The call reached OpenClaw whole; the model's arguments did not fit the tool's
            # schema (a 135M model, and vLLM's named tool choice does not hold it to the
            # schema on this build), so OpenClaw asked again, as it does.
            report.tool_round_trip = (
                f"OpenClaw refused the model's arguments {answer.tool_arguments} and asked again"
            )
        else:
            report.failures.append("OpenClaw did not send the tool's result back")


def _assistant_messages(body: dict[str, Any] | None) -> list[dict[str, Any]]:
    sent = (body or {}).get("messages") or []
    return [m for m in sent if isinstance(m, dict) and m.get("role") == "assistant"]


def _reworked_answers(exchanges: list[Exchange]) -> list[str]:
    """Each answer that the next request carried back other than Parley wrote it."""
    chats = [e for e in exchanges if e.path.endswith("/chat/completions") and e.body]
    changed = []
    for number, (answer, after) in enumerate(itertools.pairwise(chats), 1):
        before, copies = (_assistant_messages(e.body) for e in (answer, after))
        carried = len(copies) > len(before)  # not a retry of the same request
        copy = (copies[-1].get("content") or "") if carried else ""
        if answer.text and carried and copy != answer.text:
            changed.append(f"answer {number} {answer.text[:160]!r} came back as {copy[:160]!r}")
    return changed


def _check_recorded(
    report: CheckReport, *, var_dir: Path, key: str, since: float, judge_wait_s: float
) -> None:
    """One conversation for the session, the follow-up linked as a next state, and judged."""
    rows = sql(
        var_dir,
        "SELECT c.id, count(m.id), count(m.next_state_id), "
        "count(*) FILTER (WHERE m.role = 'tool') "
        "FROM chat_conversation c JOIN chat_message m ON m.conversation_id = c.id "
        "JOIN api_apikey k ON k.id = c.api_key_id "
        "WHERE k.prefix = %s AND c.created_at >= to_timestamp(%s) GROUP BY c.id ORDER BY c.id",
        (key[:11], since),
    )
    report.conversations = [
        {"id": r[0], "messages": r[1], "with_next_state": r[2], "tool_results": r[3]} for r in rows
    ]
    if len(rows) != 1:
        changed = "; ".join(report.reworked_answers)
        report.failures.append(
            f"the session became {len(rows)} conversations, not 1"
            + (f" (answers OpenClaw sent back changed: {changed})" if changed else "")
        )
        return
    conversation = rows[0][0]
    report.answers_given_memory = sql(
        var_dir,
        "SELECT count(*) FROM chat_message WHERE conversation_id = %s AND role = 'assistant' "
        "AND memories <> '[]'::jsonb",
        (conversation,),
    )[0][0]
    if report.memory and not report.answers_given_memory:
        report.failures.append("no answer was given the owner's memory")
    first_answer = sql(
        var_dir,
        "SELECT id, next_state_id FROM chat_message WHERE conversation_id = %s "
        "AND role = 'assistant' ORDER BY id LIMIT 1",
        (conversation,),
    )
    if not first_answer or first_answer[0][1] is None:
        report.failures.append("the follow-up was not recorded as the first answer's next state")
        return
    deadline = time.monotonic() + judge_wait_s
    while True:
        judged = sql(
            var_dir,
            "SELECT score, hint, source FROM learning_judgement WHERE message_id = %s",
            (first_answer[0][0],),
        )
        if judged or time.monotonic() > deadline:
            break
        time.sleep(2)
    report.judgements = [{"score": r[0], "hint": r[1], "source": r[2]} for r in judged]
    if not judged:
        report.failures.append(f"the first answer was not judged within {judge_wait_s:.0f} s")
        return
    samples = sql(
        var_dir,
        "SELECT kind, reward, hint, status FROM learning_sample WHERE message_id = %s "
        "AND kind <> 'memory'",
        (first_answer[0][0],),
    )
    report.samples = [{"kind": r[0], "reward": r[1], "hint": r[2], "status": r[3]} for r in samples]
    if judged[0][0] != 0 and not samples:
        report.failures.append("the judged follow-up made no training sample")


def table(report: CheckReport) -> str:
    lines = [
        "| # | status | request KB | messages | tools | system chars | max_completion_tokens "
        "| prompt + answer tokens | finish | tool calls | s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for number, e in enumerate(report.exchanges, 1):
        if not e["path"].endswith("/chat/completions"):
            continue
        usage = e.get("usage") or {}
        tokens = f"{usage.get('prompt_tokens', '?')} + {usage.get('completion_tokens', '?')}"
        status = f"{e['status']}" + (f" {e['error_code']}" if e["error_code"] else "")
        calls = ", ".join(e["tool_calls"]) + (" (named)" if e["forced_tool"] else "")
        lines.append(
            f"| {number} | {status} | {e['request_bytes'] / 1024:.1f} | {e['messages']} "
            f"| {len(e['tools'])} | {e['system_chars']} "
            f"| {e['fields'].get('max_completion_tokens', '-')} | {tokens} "
            f"| {e['finish_reason']} | {calls or '-'} | {e['seconds']} |"
        )
    return "\n".join(lines)


def _key_for_running_system(var_dir: Path) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", "create_api_key", *KEY_OWNER],
        cwd=ROOT,
        env={**os.environ, "PARLEY_VAR_DIR": str(var_dir)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@contextlib.contextmanager
def _parley(args: argparse.Namespace) -> Iterator[tuple[str, str, Path]]:
    """(URL, API key, var/) of the Parley to check: one of its own (--start), else the
    running one (a new key of user openclaw-check unless --key)."""
    if args.start:
        from bench.common import running_system

        with running_system() as system:
            yield system.web_url, system.api_key, system.var_dir
    else:
        yield args.url, args.key or _key_for_running_system(args.var), args.var


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="a running Parley")
    parser.add_argument("--key", help="its API key (default: a new key of user openclaw-check)")
    parser.add_argument("--var", type=Path, default=ROOT / "var", help="that Parley's var/")
    parser.add_argument("--start", action="store_true", help="start a Parley of its own")
    parser.add_argument("--profile", choices=("slim", "full"), default="slim")
    parser.add_argument("--max-tokens", type=int, default=256, help="OpenClaw's maxTokens")
    parser.add_argument("--turns", type=int, default=len(TURNS), help="turns in the session")
    parser.add_argument("--memory", default="", help="a memory the key's owner has first")
    args = parser.parse_args(argv)
    more = MORE_TURNS * (1 + max(0, args.turns - len(TURNS)) // len(MORE_TURNS))
    turns = (TURNS + more)[: args.turns]
    if not installed():
        install()
    with _parley(args) as (base_url, api_key, var_dir):
        report = run_check(
            base_url=base_url,
            api_key=api_key,
            var_dir=var_dir,
            profile_name=args.profile,
            max_tokens=args.max_tokens,
            turns=turns,
            memory=args.memory,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"check-{args.profile}-{len(turns)}-turns.json"
    path.write_text(json.dumps(asdict(report), indent=2, default=str) + "\n")
    print(table(report))
    print(f"openclaw | conversations: {report.conversations}")
    print(f"openclaw | judgements of the first answer: {report.judgements}")
    print(f"openclaw | its training samples: {report.samples}")
    print(f"openclaw | tool round trip: {report.tool_round_trip or 'no tool turn'}")
    record(
        "openclaw_check",
        {
            "profile": report.profile,
            "passed": report.passed,
            "failures": report.failures,
            "requests": [
                {k: e[k] for k in ("status", "request_bytes", "messages", "system_chars")}
                for e in report.exchanges
            ],
        },
    )
    print(f"openclaw | transcript: {path}")
    for failure in report.failures:
        print(f"openclaw | FAILED: {failure}")
    print("openclaw | passed" if report.passed else "openclaw | failed")
    return 0 if report.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
