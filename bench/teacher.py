"""Can the teacher do what the comment asks? The ceiling of learning from comments alone.

    python -m bench.teacher [--names NAME ...] [--splits train held_out held_out_other]
                            [--tokens 48] [--model-dir DIR]

Learning from a comment (on-policy distillation, and the refinement that turns the comment into
an answer to imitate, ``trainer.refine``) needs a teacher: the model itself with the comment
in its prompt as a hint (``trainer.batch.hinted_messages``). When the teacher does not follow
the hint, comments alone teach nothing, however many are given. For each preference of
``bench/data/preferences.json`` this answers the prompts greedily, as the refinement does, once
plainly and once with the preference's comment as the hint, and prints the share of answers
that meet the preference each way. It records its figures (``bench/results.jsonl``, "teacher")
before anything else; it runs on the CPU (9 minutes for every preference and split on 2 cores),
from the `make run` environment too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.answering import generate, load_serving_model
from bench.common import ROOT, record
from bench.preferences import Preference, load_preferences, load_prompts
from bench.replay_options import ANSWER_TOKENS, default_model_dir, torch_threads

SPLITS = ("train", "held_out", "held_out_other")


def hinted(prompt: str, hint: str) -> str:
    """The user's message as the teacher sees it (``trainer.batch.hinted_messages``)."""
    from trainer.batch import hinted_messages

    return hinted_messages([{"role": "user", "content": prompt}], hint)[0]["content"]


def compliance(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    preference: Preference,
    *,
    max_new_tokens: int,
) -> dict[str, Any]:
    """{"plain": share met, "hinted": share met, "examples": a few hinted answers}."""
    if not prompts:
        raise ValueError("no prompts to answer")
    plain = generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, temperature=0.0, seed=0
    )
    taught = generate(
        model,
        tokenizer,
        [hinted(p, preference.comment) for p in prompts],
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        seed=0,
    )
    return {
        "prompts": len(prompts),
        # a hinted loop ("Sure!\n\nSure!...") does not follow the hint: it is what refinement
        # would imitate
        "plain": sum(preference.meets(a.text, a.response_token_ids) for a in plain) / len(prompts),
        "hinted": sum(preference.meets(a.text, a.response_token_ids) for a in taught)
        / len(prompts),
        "examples": [a.text for a in taught[:2]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.teacher", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--names", nargs="*", default=[], help="preferences (default: all)")
    parser.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    parser.add_argument("--tokens", type=int, default=ANSWER_TOKENS, help="most tokens per answer")
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument("--prompts", type=Path, default=ROOT / "bench" / "data" / "prompts.json")
    args = parser.parse_args(argv)
    from tqdm import tqdm
    from transformers import AutoTokenizer

    preferences = load_preferences(args.preference)
    unknown = sorted(set(args.names) - {p.name for p in preferences})
    if unknown:
        parser.error(
            f"no preference {unknown}; the file has {', '.join(p.name for p in preferences)}"
        )
    chosen = [p for p in preferences if not args.names or p.name in args.names]
    prompts = load_prompts(args.prompts)
    model_dir = args.model_dir or default_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = load_serving_model(model_dir, None)
    results: dict[str, dict[str, Any]] = {}
    bar = tqdm(total=len(chosen) * len(args.splits), desc="teacher", unit="split")
    with bar, torch_threads(1):  # one thread: see bench.replay's --threads
        for preference in chosen:
            results[preference.name] = {}
            for split in args.splits:
                results[preference.name][split] = compliance(
                    model, tokenizer, prompts[split], preference, max_new_tokens=args.tokens
                )
                bar.update(1)
    record("teacher", {"model": str(model_dir.name), "tokens": args.tokens, "results": results})
    print(table(results, args.splits))
    return 0


def table(results: dict[str, dict[str, Any]], splits: list[str]) -> str:
    """Markdown: per preference and split, the share met without → with the hint."""
    head = ["preference", *(f"{split} (plain → hinted)" for split in splits)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, by_split in results.items():
        cells = [f"{by_split[s]['plain']:.2f} → {by_split[s]['hinted']:.2f}" for s in splits]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
