"""The learner of the live personalization benchmark (``bench.personalize``): a simulated user
who asks Parley through its OpenAI API and gives feedback as a person would, then waits for
each new version and scores it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from bench.common import RunningSystem, sql
from bench.live_scoring import answer_token_ids, api_scores, evaluate, ppl_ratio
from bench.preferences import Preference
from bench.simulated_user import react


@dataclass
class VersionScore:
    version: int
    feedback_turns: int
    score: float
    ppl_ratio: float | None
    seconds: float
    own_via_api: float | None = None  # the learner asking model="parley" through /v1
    control_via_api: float | None = None  # the control user (no feedback), the same prompts
    broken: list[str] = field(default_factory=list)  # broken held-out answers (their start)
    # --feedback memory: ``score`` is as served (the memory in the prompt, through /v1), this
    # the version alone (asked without it)
    score_without_memory: float | None = None


@dataclass
class Run:
    preference: str
    algorithm: str
    feedback: str
    versions: list[VersionScore] = field(default_factory=list)
    turns: int = 0
    thumbs_up: int = 0
    rejected: list[int] = field(default_factory=list)


def _newest_version(system: RunningSystem) -> int:
    return sql(system.var_dir, "SELECT max(number) FROM learning_policyversion")[0][0]


def _settled_status(system: RunningSystem, number: int, *, deadline: float) -> str:
    """The version's status once the gate and the publish are done with it: a version is
    recorded as a candidate when its update finishes and goes live only after its home replica
    has loaded its adapter, so asking for it in between would get vLLM's 404."""
    while True:
        status = sql(
            system.var_dir, "SELECT status FROM learning_policyversion WHERE number = %s", (number,)
        )[0][0]
        if status != "candidate" or time.monotonic() > deadline:
            return status
        time.sleep(1)


def simulate(
    system: RunningSystem,
    preference: Preference,
    prompts: dict[str, list[str]],
    *,
    algorithm: str,
    feedback: str,
    turns: int,
    versions: int,
    seed: int,
    eval_tokens: int,
    batch_size: int,
    control_key: str | None = None,
) -> Run:
    from tqdm import tqdm

    run = Run(preference=preference.name, algorithm=algorithm, feedback=feedback)
    client = openai.OpenAI(
        base_url=system.web_url + "/v1", api_key=system.api_key, max_retries=2, timeout=300
    )
    headers = {"Authorization": f"Bearer {system.api_key}"}
    started = time.monotonic()

    def _via_api(_: int) -> tuple[float, float | None]:
        return api_scores(system, preference, prompts["held_out"], eval_tokens, control_key)

    def _scored(number: int, turns: int, ratio: float | None, seconds: float) -> VersionScore:
        score, broken = evaluate(system, preference, prompts["held_out"], number, eval_tokens)
        own, control = _via_api(number)
        if feedback != "memory":
            return VersionScore(number, turns, score, ratio, seconds, own, control, broken)
        return VersionScore(
            number, turns, own, ratio, seconds, own, control, broken, score_without_memory=score
        )

    if feedback == "memory":  # stated once, as a memory; then only new questions
        created = httpx.post(
            system.web_url + "/v1/memories",
            json={"text": preference.comment},
            headers=headers,
            timeout=60,
        )
        created.raise_for_status()
    run.versions.append(_scored(0, 0, 1.0, 0.0))
    seen = 0
    bar = tqdm(total=versions, desc=f"{preference.name} ({algorithm}, {feedback})", unit="version")
    turn = 0
    while seen < versions and turn < turns:
        # One batch of feedback, then the user waits for the next version, as a person who
        # keeps using the assistant would between updates.
        for _ in range(batch_size):
            prompt = prompts["train"][turn % len(prompts["train"])]
            completion = client.chat.completions.create(
                model="parley",
                messages=[{"role": "user", "content": prompt}],
                max_tokens=eval_tokens,
                temperature=0.8,
                seed=seed + turn,
                extra_headers={"X-Session-Id": f"bench-{seed}-{turn}", "X-Session-Done": "1"},
            )
            answer = completion.choices[0].message.content or ""
            run.turns += 1
            turn += 1
            if feedback == "memory":
                continue
            # the replay's simulated user: a loop is a miss, said so, never rewritten
            reaction = react(
                preference, answer, feedback, token_ids=answer_token_ids(system, answer)
            )
            good = reaction.truth > 0
            body: dict[str, Any] = {"completion_id": completion.id, "rating": 1 if good else -1}
            if not good and feedback in ("comments", "corrections"):
                body["comment"] = reaction.comment
            if reaction.correction:
                body["correction"] = reaction.correction
            httpx.post(system.web_url + "/v1/feedback", json=body, headers=headers, timeout=60)
            run.thumbs_up += int(good)
        deadline = time.monotonic() + 1800
        while _newest_version(system) <= seen and time.monotonic() < deadline:
            time.sleep(2)
        newest = _newest_version(system)
        if newest <= seen:
            bar.write("no new version within 30 minutes; stopping")
            break
        seen = newest
        status = _settled_status(system, newest, deadline=time.monotonic() + 300)
        if status == "rejected":
            # The probe gate refused it: the user keeps going on the live version.
            run.rejected.append(newest)
            bar.write(f"v{newest} failed the probe gate (not published); continuing")
            continue
        if status != "live":  # not published within the deadline: say so, keep the live one
            bar.write(f"v{newest} is {status} after 5 minutes, not live; continuing")
            continue
        live = newest
        seen = live
        run.versions.append(
            _scored(live, run.turns, ppl_ratio(system, live), time.monotonic() - started)
        )
        score = run.versions[-1].score
        bar.update(1)
        own, control = run.versions[-1].own_via_api, run.versions[-1].control_via_api
        shown = "—" if control is None else f"{control:.2f}"
        bar.write(
            f"v{live}: score {score:.2f} after {run.turns} turns "
            f"({run.thumbs_up} answers met the preference so far); through /v1: "
            f"the learner {own:.2f}, the control user {shown}"
        )
    bar.close()
    return run
