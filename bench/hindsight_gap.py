"""Can the model itself read a follow-up's sign? The hindsight gap on labelled next states.

    python -m bench.hindsight_gap [--cases FILE ...] [--model-dir DIR]

The hindsight judge (``trainer.hindsight``) takes the user's follow-up as the teacher's hint,
so each token's advantage is the hinted teacher's log-prob minus the policy's. Averaged over
the answer, that gap would be a reader of the follow-up needing no rules at all if it were
negative after a complaint ("in km please") and about zero after thanks or a new question. For
every labelled case of the next-state sets (request, answer, the user's follow-up, label −1 / 0
/ +1) this scores the answer's mean per-token log-prob with and without the framed follow-up
and prints, per label, how the gap falls: a usable reader needs the labels apart. Cases whose
next state has no words of the user (a tool result) are left out. It records its figures
(``bench/results.jsonl``, "hindsight_gap") before printing; about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.common import ROOT, record
from bench.replay_options import default_model_dir
from trainer.threads import torch_threads

CASES = [
    ROOT / "bench" / "data" / name
    for name in (
        "next_states.json",
        "next_states_multilingual.json",
        "next_states_fresh.json",
        "next_states_blind.json",
    )
]
MAX_ANSWER_TOKENS = 96


def mean_logprob(model: Any, tokenizer: Any, messages: list[dict[str, str]], answer: str) -> float:
    """The answer's mean per-token log-prob after the chat-templated ``messages``."""
    import torch

    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    answer_ids = tokenizer(answer, add_special_tokens=False).input_ids[:MAX_ANSWER_TOKENS]
    ids = torch.tensor([prompt_ids + answer_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    per_token = logp.gather(-1, ids[0, 1:, None])[:, 0][len(prompt_ids) - 1 :]
    return float(per_token.mean())


def gaps(model: Any, tokenizer: Any, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case with words of the user: its label, language and hindsight gap."""
    from trainer.batch import hinted_messages
    from trainer.hindsight import hindsight_hint

    out = []
    for case in cases:
        hint = hindsight_hint(case["next_state"]) if case.get("answer") else None
        if hint is None:
            continue
        plain = [{"role": "user", "content": case["request"]}]
        gap = mean_logprob(model, tokenizer, hinted_messages(plain, hint), case["answer"])
        gap -= mean_logprob(model, tokenizer, plain, case["answer"])
        out.append({"label": case["label"], "language": case.get("language", "en"), "gap": gap})
    return out


def by_label(rows: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """Count, mean, median and range of the gap for each label.

    >>> rows = [{"label": -1, "gap": -0.5}, {"label": -1, "gap": 0.1}, {"label": 1, "gap": 0.0}]
    >>> by_label(rows)[-1]
    {'cases': 2, 'mean': -0.2, 'median': -0.2, 'min': -0.5, 'max': 0.1}
    """
    figures = {}
    for label in sorted({row["label"] for row in rows}):
        values = [row["gap"] for row in rows if row["label"] == label]
        figures[label] = {
            "cases": len(values),
            "mean": round(statistics.fmean(values), 3),
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
        }
    return figures


def separation(rows: list[dict[str, Any]]) -> float:
    """How often a complaint's gap is below another follow-up's (ties count half): 1.0 would
    read every complaint, 0.5 is a coin.

    >>> rows = [{"label": -1, "gap": -1.0}, {"label": 0, "gap": 0.0}, {"label": 1, "gap": -1.0}]
    >>> separation(rows)
    0.75
    """
    complaints = [row["gap"] for row in rows if row["label"] == -1]
    others = [row["gap"] for row in rows if row["label"] != -1]
    pairs = [(c < o) + 0.5 * (c == o) for c in complaints for o in others]
    return round(statistics.fmean(pairs), 3) if pairs else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.hindsight_gap", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--cases", nargs="+", type=Path, default=CASES)
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = args.model_dir or default_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    cases = [case for path in args.cases for case in json.loads(path.read_text())["cases"]]
    with torch_threads(1):
        rows = gaps(model, tokenizer, cases)
    figures = by_label(rows)
    apart = separation(rows)
    files = [p.name for p in args.cases]
    record(
        "hindsight_gap",
        {"model": model_dir.name, "files": files, "by_label": figures, "separation": apart},
    )
    print("| label | cases | mean gap | median | range |\n|---|---|---|---|---|")
    for label, f in figures.items():
        print(
            f"| {label:+d} | {f['cases']} | {f['mean']} | {f['median']} | {f['min']} – {f['max']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
