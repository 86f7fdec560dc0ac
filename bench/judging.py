"""The PRM judge: how often it is right on next states, and how fast it judges.

``--accuracy`` reads the labelled next states of bench/data/next_states.json (the user's next
message or a tool result after an answer; truth +1/-1/0) and reports, per judge, how often the
majority vote is right and how many votes parse, on the held-out split by default (the cue
judge's rules were written on the ``tune`` split only), with a table per language (where the
cases name one), per split and per kind. ``--cases FILE`` reads another labelled set of the same
shape, e.g. bench/data/next_states_multilingual.json (English, German, Chinese, French, Spanish;
written without looking at the cue rules), and implies ``--accuracy``. Judges:

- ``cues``: the default judge (trainer/judge_cues.py), no model.
- ``llm-choice``: the base model constrained to the three boxes, as the LLM judge runs on vLLM
  (structured outputs): each of the m votes is sampled at the judge temperature from the
  model's log-probs of the three replies.
- ``llm-free``: the base model sampling freely (PARLEY_JUDGE_CONSTRAINED=0).
- ``llm-free-v1``: the same with the prompt the judge had before (prm-v1, "think briefly").

The LLM judges load the base model with transformers (no server); the figures are recorded in
bench/results.jsonl before any plot is drawn (the plot needs matplotlib, a test requirement).

Without ``--accuracy``: throughput, turns judged per minute with m=3 votes on a running system,
and what batching the m votes into one request (n=m) gains over m separate requests.

    python -m bench.judging --accuracy [--judges cues,llm-choice] [--split heldout]
    python -m bench.judging --cases bench/data/next_states_multilingual.json --split all \\
        --judges cues
    python -m bench.judging [--turns 6] [--votes 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, median, record, running_system
from trainer.judge import (
    VOTE_CHOICES,
    build_hint_messages,
    build_prm_messages,
    majority,
    parse_vote,
    select_hint,
)
from trainer.judge_client import JudgeEndpoint, complete_n
from trainer.judge_cues import cue_vote

DATA = ROOT / "bench" / "data" / "next_states.json"
JUDGES = ("cues", "llm-choice", "llm-free", "llm-free-v1")

TURNS = [
    ("What is the capital of Italy?", "The capital of Italy is Paris.", "[user] No, that's wrong."),
    ("Give me a synonym for happy.", "Joyful.", "[user] Great, thanks!"),
    ("How many legs does a spider have?", "Spiders have eight legs.", "[user] And insects?"),
    ("Write a haiku about rain.", "Rain taps on the roof / ...", "[user] Too short, write more."),
    ("What is 12 times 12?", "144.", "[user] Perfect."),
    ("Translate 'hello' to French.", "Hola.", "[user] That's Spanish, not French."),
]


def judge_once(
    endpoint: JudgeEndpoint, turn: tuple[str, str, str], votes: int, batched: bool
) -> float:
    request, answer, next_state = turn
    started = time.perf_counter()
    texts = complete_n(
        endpoint,
        build_prm_messages(request=request, answer=answer, next_state=next_state),
        votes,
        batched=batched,
    )
    majority(parse_vote(t) for t in texts)
    hints = complete_n(
        endpoint,
        build_hint_messages(request=request, answer=answer, next_state=next_state),
        votes,
        batched=batched,
    )
    select_hint(hints, evidence=next_state)
    return time.perf_counter() - started


def load_cases(split: str, path: Path = DATA) -> list[dict[str, Any]]:
    cases = json.loads(Path(path).read_text())["cases"]
    return [c for c in cases if split == "all" or c["split"] == split]


def tally(cases: list[dict[str, Any]], right: list[bool], key: str) -> dict[str, dict[str, int]]:
    """Right and total per value of ``case[key]`` (cases without the key count as "-")."""
    groups: dict[str, dict[str, int]] = {}
    for case, ok in zip(cases, right, strict=True):
        group = groups.setdefault(str(case.get(key, "-")), {"right": 0, "cases": 0})
        group["cases"] += 1
        group["right"] += ok
    return dict(sorted(groups.items()))


def accuracy_table(cases: list[dict[str, Any]], right: list[bool], row_key: str) -> str:
    """Accuracy per ``row_key`` (rows) and per split (columns), with an "all" row and column."""
    splits = sorted({c["split"] for c in cases}, reverse=True)  # tune before heldout
    columns = [*splits, "all"] if len(splits) > 1 else splits
    rows = [*sorted({str(c.get(row_key, "-")) for c in cases}), "all"]

    def cell(row: str, column: str) -> str:
        picked = [
            ok
            for c, ok in zip(cases, right, strict=True)
            if row in ("all", str(c.get(row_key, "-"))) and column in ("all", c["split"])
        ]
        return f"{sum(picked)}/{len(picked)} {sum(picked) / len(picked):4.0%}" if picked else "-"

    width = max(len(r) for r in [*rows, row_key])
    lines = [f"  {row_key:<{width}}  " + "  ".join(f"{c:>12}" for c in columns)]
    for row in rows:
        lines.append(f"  {row:<{width}}  " + "  ".join(f"{cell(row, c):>12}" for c in columns))
    return "\n".join(lines)


def _prm_v1_messages(*, request: str, answer: str, next_state: str) -> list[dict[str, str]]:
    """The judge prompt before prm-v2 (free reasoning, then a box), for the "before" figure."""
    system = (
        "You are a strict evaluator of an AI assistant. You see the user's request, the "
        "assistant's answer, and what happened next (the user's next message or a tool result). "
        "Decide whether the answer served the user well, using the next state as evidence: a "
        "satisfied follow-up is good, a correction, complaint or repeated request is bad."
    )
    user = (
        f"## User request\n{request}\n\n## Assistant answer\n{answer}\n\n"
        f"## What happened next\n{next_state}\n\n"
        "Was the answer good? Think briefly, then end with exactly one of "
        "\\\\boxed{1} (good), \\\\boxed{-1} (bad) or \\\\boxed{0} (unclear)."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class LocalModel:
    """The base model through transformers, on a few CPU threads: free votes or choice votes."""

    def __init__(self, path: Path, *, seed: int) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(int(os.environ.get("PARLEY_BENCH_THREADS", "2")))
        torch.manual_seed(seed)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        self.rng = random.Random(seed)

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def free(
        self, messages: list[dict[str, str]], m: int, *, temperature: float, max_tokens: int
    ) -> list[str]:
        prompt = self.torch.tensor([self._prompt_ids(messages)])
        with self.torch.no_grad():
            out = self.model.generate(
                prompt,
                attention_mask=self.torch.ones_like(prompt),
                do_sample=True,
                temperature=temperature,
                max_new_tokens=max_tokens,
                num_return_sequences=m,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        return [
            self.tokenizer.decode(row[prompt.shape[1] :], skip_special_tokens=True) for row in out
        ]

    def choice(self, messages: list[dict[str, str]], m: int, *, temperature: float) -> list[str]:
        """m votes sampled among VOTE_CHOICES by the model's log-probability of each reply."""
        import copy

        prompt = self.torch.tensor([self._prompt_ids(messages)])
        scores = []
        with self.torch.no_grad():
            out = self.model(prompt, use_cache=True)  # the prompt once, its cache for each reply
            for text in VOTE_CHOICES:
                reply = self.tokenizer(text, add_special_tokens=False)["input_ids"]
                logprob = float(out.logits[0, -1].log_softmax(-1)[reply[0]])
                if len(reply) > 1:
                    rest = (
                        self.model(
                            self.torch.tensor([reply[:-1]]),
                            past_key_values=copy.deepcopy(out.past_key_values),
                            use_cache=True,
                        )
                        .logits[0]
                        .log_softmax(-1)
                    )
                    logprob += sum(float(rest[i, t]) for i, t in enumerate(reply[1:]))
                scores.append(logprob)
        top = max(scores)
        weights = [math.exp((s - top) / max(temperature, 1e-6)) for s in scores]
        return self.rng.choices(list(VOTE_CHOICES), weights=weights, k=m)


def _model_path() -> Path:
    if os.environ.get("PARLEY_BASE_MODEL"):
        return Path(os.environ["PARLEY_BASE_MODEL"])
    models = Path(os.environ.get("PARLEY_MODELS_DIR", ROOT / "var" / "models"))
    return models / "SmolLM2-135M-Instruct"


def judge_votes(
    judge: str, case: dict[str, Any], model: LocalModel | None, args: argparse.Namespace
) -> list[str]:
    if judge == "cues":
        return [cue_vote(case["next_state"], request=case["request"])[1]]
    assert model is not None
    fields = {k: case[k] for k in ("request", "answer", "next_state")}
    if judge == "llm-choice":
        return model.choice(build_prm_messages(**fields), args.votes, temperature=args.temperature)
    build = _prm_v1_messages if judge == "llm-free-v1" else build_prm_messages
    return model.free(
        build(**fields), args.votes, temperature=args.temperature, max_tokens=args.max_tokens
    )


def accuracy(args: argparse.Namespace) -> None:
    data = Path(args.cases)
    cases = load_cases(args.split, data)
    if args.limit and args.limit < len(cases):
        cases = cases[:: math.ceil(len(cases) / args.limit)]
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    unknown = set(judges) - set(JUDGES)
    if unknown:
        raise SystemExit(f"unknown judges {sorted(unknown)}; choose from {', '.join(JUDGES)}")
    model = None
    if any(j != "cues" for j in judges):
        model = LocalModel(_model_path(), seed=args.seed)
    figures: dict[str, Any] = {}
    for judge in judges:
        started = time.perf_counter()
        votes_total, parsed, wrong = 0, 0, Counter()
        rights: list[bool] = []
        for case in cases:
            texts = judge_votes(judge, case, model, args)
            scores = [parse_vote(t) for t in texts]
            votes_total += len(scores)
            parsed += sum(s is not None for s in scores)
            rights.append(majority(scores) == case["label"])
            if not rights[-1]:
                wrong[case["kind"]] += 1
            if judge != "cues":
                print(f"  {case['id']} truth {case['label']:+d} votes {scores}", flush=True)
        seconds = time.perf_counter() - started
        right = sum(rights)
        figures[judge] = {
            "right": right,
            "cases": len(cases),
            "accuracy": right / len(cases),
            "votes": votes_total,
            "parsed": parsed,
            "parse_rate": parsed / votes_total if votes_total else 0.0,
            "wrong_by_kind": dict(wrong),
            "by_language": tally(cases, rights, "language"),
            "by_split": tally(cases, rights, "split"),
            "by_kind": tally(cases, rights, "kind"),
            "seconds_per_case": seconds / len(cases),
        }
        print(
            f"{judge:<12} {args.split}: right {right}/{len(cases)} ({right / len(cases):.0%}), "
            f"votes parsed {parsed}/{votes_total}, {seconds / len(cases):.2f} s/case, "
            f"wrong by kind {dict(wrong)}"
        )
        if any("language" in c for c in cases):
            print(accuracy_table(cases, rights, "language"))
        print(accuracy_table(cases, rights, "kind"))
    record(
        "judging_accuracy",
        {
            "split": args.split,
            "limit": args.limit or None,
            "votes": args.votes,
            "temperature": args.temperature,
            "seed": args.seed,
            "max_tokens": args.max_tokens,
            "data": str(data.resolve().relative_to(ROOT))
            if data.resolve().is_relative_to(ROOT)
            else str(data),
            "judges": figures,
        },
    )
    print(f"recorded in {RESULTS.relative_to(ROOT)}")
    stem = "" if data.resolve() == DATA else f"{data.stem}-"
    name = f"judging-accuracy-{stem}{args.split}-{'+'.join(judges)}.png"
    plot_accuracy(figures, args.split, RESULTS.parent / "results" / name)


def plot_accuracy(figures: dict[str, Any], split: str, path: Path) -> None:
    """A bar per judge (right and parsed); skipped without matplotlib (the runtime venv)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (a test requirement): no plot drawn")
        return
    names = list(figures)
    xs = range(len(names))
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([x - 0.2 for x in xs], [figures[n]["accuracy"] for n in names], 0.4, label="right")
    ax.bar([x + 0.2 for x in xs], [figures[n]["parse_rate"] for n in names], 0.4, label="parsed")
    ax.set_xticks(list(xs), names)
    ax.set(ylim=(0, 1), ylabel="fraction", title=f"PRM judge on next states ({split} split)")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot: {path.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy", action="store_true", help="right and parsed, per judge")
    parser.add_argument("--judges", default="cues,llm-choice", help=f"of {','.join(JUDGES)}")
    parser.add_argument("--split", default="heldout", choices=["heldout", "tune", "all"])
    parser.add_argument(
        "--cases", default=None, help=f"a labelled set (implies --accuracy); default {DATA.name}"
    )
    parser.add_argument("--limit", type=int, default=0, help="every k-th case, about this many")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--turns", type=int, default=len(TURNS))
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    if args.cases is not None:
        args.accuracy = True
    args.cases = args.cases or DATA
    if args.accuracy:
        accuracy(args)
        return
    with running_system() as system:
        endpoint = JudgeEndpoint(
            base_url=system.vllm_url,
            model="base",
            max_tokens=args.max_tokens,
            api_key=system.env["VLLM_API_KEY"],
        )
        judge_once(endpoint, TURNS[0], args.votes, True)  # warm-up
        seconds: dict[str, list[float]] = {"batched": [], "separate": []}
        for index in range(args.turns):
            turn = TURNS[index % len(TURNS)]
            order = ("batched", "separate") if index % 2 == 0 else ("separate", "batched")
            for mode in order:
                seconds[mode].append(judge_once(endpoint, turn, args.votes, mode == "batched"))
    per_minute = {mode: 60 / median(values) for mode, values in seconds.items()}
    gain = per_minute["batched"] / per_minute["separate"]
    print(f"\nm={args.votes} votes (+ m hint attempts), judge max_tokens {args.max_tokens}")
    for mode, values in seconds.items():
        print(
            f"  {mode:<9} median {median(values):6.2f} s/turn  →  {per_minute[mode]:5.1f} turns/min"
        )
    print(f"  batching the m votes into one request (n=m): {gain:.2f}× the turns per minute")
    record(
        "judging",
        {
            "votes": args.votes,
            "max_tokens": args.max_tokens,
            "turns_per_minute": per_minute,
            "batched_gain": gain,
            "seconds_per_turn": {k: median(v) for k, v in seconds.items()},
        },
    )


if __name__ == "__main__":
    main()
