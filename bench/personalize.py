"""Personalization benchmark: does Parley learn what one user keeps asking for?

A simulated user talks to Parley through its OpenAI API (the `openai` package), one session per
topic, and gives feedback as a person would: 👍 when an answer meets their preference, 👎 (and,
with --feedback comments|corrections, the preference's comment and a corrected answer) when it
misses. The live loop judges, trains and publishes on its own. After each published version the
held-out prompts are answered at temperature 0 and scored by the preference's checker; the
quality guard is each version's probe perplexity relative to the base (from the probe gate).

    python manage.py bench_personalize --preference bench/data/preferences.json \
        --name starts-with-sure --algorithm combined --feedback comments --versions 8

A second user, the control, has their own key and gives no feedback. After each published
version both users ask the held-out prompts through ``/v1`` with ``model="parley"``: the
learner's answers come from their own lineage (``PARLEY_LEARNING_SCOPE=user``, the default),
the control's from the shared one, which the learner's feedback must not move (issue 16: one
user teaches, the other still gets the model as it was).

Outputs a terminal table and a line in bench/results.jsonl, then bench/results/personalize-*.json
and, where matplotlib is installed, a PNG plot next to it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai

from bench.answering import BROKEN_EXAMPLES
from bench.common import ROOT, RunningSystem, record, running_system, sql
from bench.preferences import Preference, answer_flaws, load_preferences, load_prompts
from bench.replay import SCORING, default_model_dir, plot_if_possible
from bench.simulated_user import react
from trainer.algorithms import ALGORITHMS
from trainer.config import UpdateConfig


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
    recorded as a candidate when its update finishes and goes live only after every replica
    has loaded its adapter, so asking for it in between would get vLLM's 404."""
    while True:
        status = sql(
            system.var_dir, "SELECT status FROM learning_policyversion WHERE number = %s", (number,)
        )[0][0]
        if status != "candidate" or time.monotonic() > deadline:
            return status
        time.sleep(1)


def _ppl_ratio(system: RunningSystem, number: int) -> float | None:
    rows = sql(
        system.var_dir,
        "SELECT number, probe_metrics FROM learning_policyversion WHERE number IN (0, %s)",
        (number,),
    )
    metrics = {n: m for n, m in rows}
    base, this = metrics.get(0, {}).get("probe_ppl"), metrics.get(number, {}).get("probe_ppl")
    if number == 0:
        return 1.0
    return this / base if base and this else None


def evaluate(
    system: RunningSystem, preference: Preference, prompts: list[str], number: int, max_tokens: int
) -> tuple[float, list[str]]:
    """(share of held-out prompts whose greedy answer meets the preference, the start of each
    broken answer: looping or empty ones, which meet no preference)."""
    model = "base" if number == 0 else f"parley-v{number}"
    bodies = [
        {
            "model": model,
            "stream": True,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": p}],
        }
        for p in prompts
    ]
    answers = asyncio.run(
        _answers(system.vllm_url + "/chat/completions", bodies, system.vllm_headers)
    )
    ids = [_ids(system, a) for a in answers]
    broken = [a[:100] for a, i in zip(answers, ids, strict=True) if answer_flaws(a, i)]
    met = sum(preference.meets(a, i) for a, i in zip(answers, ids, strict=True))
    return met / len(answers), broken[:BROKEN_EXAMPLES]


@functools.lru_cache(maxsize=4)
def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def _ids(system: RunningSystem, answer: str) -> list[int]:
    """The answer's tokens under the served base model's tokenizer (the text re-encoded: the
    loop check needs the n-grams, not the exact ids vLLM sampled)."""
    tokenizer = _tokenizer(default_model_dir(system.env))
    return tokenizer.encode(answer, add_special_tokens=False)


def evaluate_api(
    system: RunningSystem, key: str, preference: Preference, prompts: list[str], max_tokens: int
) -> float:
    """The same score, asked through Parley's /v1 as the key's owner (model="parley")."""
    bodies = [
        {
            "model": "parley",
            "temperature": 0,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": p}],
        }
        for p in prompts
    ]
    headers = {"Authorization": f"Bearer {key}", "X-Turn-Type": "side"}
    answers = asyncio.run(_answers(system.web_url + "/v1/chat/completions", bodies, headers))
    return sum(preference.meets(a, _ids(system, a)) for a in answers) / len(answers)


async def _answers(url: str, bodies: list[dict[str, Any]], headers: dict[str, str]) -> list[str]:
    async with httpx.AsyncClient(timeout=600, headers=headers) as client:

        async def one(body: dict[str, Any]) -> str:
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            response = await client.post(url, json=body)
            if response.is_error:  # the body says why (the OpenAI error format on /v1)
                raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:500]}")
            return response.json()["choices"][0]["message"]["content"] or ""

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def _api_scores(
    system: RunningSystem,
    preference: Preference,
    prompts: list[str],
    eval_tokens: int,
    control_key: str | None,
) -> tuple[float, float | None]:
    own = evaluate_api(system, system.api_key, preference, prompts, eval_tokens)
    control = (
        evaluate_api(system, control_key, preference, prompts, eval_tokens) if control_key else None
    )
    return own, control


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
        return _api_scores(system, preference, prompts["held_out"], eval_tokens, control_key)

    score, broken = evaluate(system, preference, prompts["held_out"], 0, eval_tokens)
    run.versions.append(VersionScore(0, 0, score, 1.0, 0.0, *_via_api(0), broken=broken))
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
            # the replay's simulated user: a loop is a miss, said so, never rewritten
            reaction = react(preference, answer, feedback, token_ids=_ids(system, answer))
            good = reaction.truth > 0
            body: dict[str, Any] = {"completion_id": completion.id, "rating": 1 if good else -1}
            if not good and feedback in ("comments", "corrections"):
                body["comment"] = reaction.comment
            if reaction.correction:
                body["correction"] = reaction.correction
            httpx.post(system.web_url + "/v1/feedback", json=body, headers=headers, timeout=60)
            run.turns += 1
            run.thumbs_up += int(good)
            turn += 1
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
        score, broken = evaluate(system, preference, prompts["held_out"], live, eval_tokens)
        run.versions.append(
            VersionScore(
                live,
                run.turns,
                score,
                _ppl_ratio(system, live),
                time.monotonic() - started,
                *_via_api(live),
                broken=broken,
            )
        )
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


def plot(run: Run, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [v.version for v in run.versions]
    left.plot(xs, [v.score for v in run.versions], marker="o", label="the learner (their adapter)")
    controls = [
        (v.version, v.control_via_api) for v in run.versions if v.control_via_api is not None
    ]
    if controls:
        left.plot(
            [x for x, _ in controls],
            [y for _, y in controls],
            marker="s",
            linestyle="--",
            label="the control user (no feedback), same prompts",
        )
        left.legend(fontsize=7)
    left.set(
        xlabel="published version",
        ylabel="held-out score",
        ylim=(0, 1.05),
        title=f"{run.preference}: score per version",
    )
    right.plot(
        [v.feedback_turns for v in run.versions], [v.score for v in run.versions], marker="o"
    )
    right.set(
        xlabel="feedback turns",
        ylabel="held-out score",
        ylim=(0, 1.05),
        title=f"{run.algorithm}, feedback: {run.feedback}",
    )
    from matplotlib.ticker import MaxNLocator

    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="manage.py bench_personalize", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument("--name", default="starts-with-sure", help="which preference of the file")
    parser.add_argument("--prompts", type=Path, default=ROOT / "bench" / "data" / "prompts.json")
    parser.add_argument("--algorithm", choices=list(ALGORITHMS), default="combined")
    parser.add_argument(
        "--feedback", choices=["thumbs", "comments", "corrections"], default="corrections"
    )
    parser.add_argument("--turns", type=int, default=128, help="most feedback turns")
    parser.add_argument("--versions", type=int, default=16, help="stop after this many versions")
    parser.add_argument("--batch-size", type=int, default=8, help="samples per update")
    parser.add_argument("--eval-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.0, help="override the update's learning rate")
    parser.add_argument("--steps", type=int, default=0, help="override optimizer steps per update")
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="leave out the second user (no feedback) whose answers must not change",
    )
    parser.add_argument(
        "--tag", default="", help="a word in the output files' names, so a run keeps its own"
    )
    args = parser.parse_args(argv)
    preferences = {p.name: p for p in load_preferences(args.preference)}
    if args.name not in preferences:
        parser.error(f"no preference {args.name!r}; the file has {', '.join(preferences)}")
    preference = preferences[args.name]
    prompts = load_prompts(args.prompts)
    env = {
        "PARLEY_TRAIN_ALGORITHM": args.algorithm,
        "PARLEY_TRAIN_BATCH_SIZE": str(args.batch_size),
        "PARLEY_TRAIN_MAX_WAIT_S": "100000",
        "PARLEY_SESSION_IDLE_MINUTES": "100000",
        "PARLEY_TRAIN_LR": str(args.lr or ""),
        "PARLEY_TRAIN_STEPS": str(args.steps or ""),
    }
    with running_system(env) as system:
        control_key = (
            system.manage("create_api_key", "--user", "control", "--create-user").strip()
            if args.control
            else None
        )
        run = simulate(
            system,
            preference,
            prompts,
            algorithm=args.algorithm,
            feedback=args.feedback,
            turns=args.turns,
            versions=args.versions,
            seed=args.seed,
            eval_tokens=args.eval_tokens,
            batch_size=args.batch_size,
            control_key=control_key,
        )
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"personalize-{run.preference}-{run.algorithm}-{run.feedback}"
    stem += f"-{args.tag}" if args.tag else ""
    stem += f"-s{args.seed}" if args.seed else ""
    print(
        f"\n{'version':>8}{'turns':>8}{'score':>8}{'ppl/base':>10}{'minutes':>9}"
        f"{'own /v1':>10}{'control':>10}"
    )
    for v in run.versions:
        ratio = f"{v.ppl_ratio:.3f}" if v.ppl_ratio else "—"
        label = f"v{v.version}"
        minutes = v.seconds / 60
        api = "".join(
            f"{x:>10.2f}" if x is not None else f"{'—':>10}"
            for x in (v.own_via_api, v.control_via_api)
        )
        print(f"{label:>8}{v.feedback_turns:>8}{v.score:>8.2f}{ratio:>10}{minutes:>9.1f}{api}")
    first, best = run.versions[0].score, max(v.score for v in run.versions)
    worst_ppl = max((v.ppl_ratio or 1.0) for v in run.versions)
    target = best >= 0.8 or best - first >= 0.5
    print(
        f"score {first:.2f} → best {best:.2f} within {len(run.versions) - 1} versions "
        f"(target ≥ 0.8 or +0.5: {'met' if target else 'not met'}); "
        f"worst perplexity {worst_ppl:.3f}× base (target ≤ 1.10)"
    )
    result = {
        "preference": run.preference,
        "algorithm": run.algorithm,
        "feedback": run.feedback,
        "turns": run.turns,
        "thumbs_up": run.thumbs_up,
        "versions": [vars(v) for v in run.versions],
        "target_met": target,
        "worst_ppl_ratio": worst_ppl,
        "rejected_by_gate": run.rejected,
        "lr": args.lr or f"default ({UpdateConfig().lr:g})",
        "steps_per_update": args.steps or "default (2)",
        "batch_size": args.batch_size,
        "scoring": SCORING,
    }
    record("personalize", result)  # the figures first: the plot needs a test-only package
    (out_dir / f"{stem}.json").write_text(json.dumps(result, indent=2))
    print(f"bench | wrote bench/results/{stem}.json")
    if plot_if_possible(lambda: plot(run, out_dir / f"{stem}.png")):
        print(f"bench | plot: bench/results/{stem}.png")
    return 0
