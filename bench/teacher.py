"""Can the teacher do what the comment asks? The ceiling of learning from comments alone.

    python -m bench.teacher [--names NAME ...] [--splits train held_out held_out_other]
                            [--tokens 48] [--model-dir DIR]
                            [--hint comment|followups] [--language en|de|zh]

Learning from a comment (on-policy distillation, and the refinement that turns the comment into
an answer to imitate, ``trainer.refine``) needs a teacher: the model itself with the comment
in its prompt as a hint (``trainer.batch.hinted_messages``). When the teacher does not follow
the hint, comments alone teach nothing, however many are given. For each preference of
``bench/data/preferences.json`` this answers the prompts greedily, as the refinement does, once
plainly and once with the preference's comment as the hint, and prints the share of answers
that meet the preference each way; a preference with prompts of its own (the content ones) is
asked those, and a split it lacks is left blank. ``--hint followups``: the hint is what the
default judge takes from the user's own follow-up instead (``trainer.judge_cues.cue_hint``;
the preference's follow-ups in ``--language``, taken in turn over the prompts; a follow-up it
takes no hint from leaves the plain answer): the ceiling of learning from follow-ups.
It records its figures (``bench/results.jsonl``, "teacher") before anything else; it runs on
the CPU (9 minutes for every preference and split on 2 cores), from the `make run` environment too.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.answering import generate, load_serving_model
from bench.common import ROOT, record
from bench.preferences import Preference, load_preferences, load_prompts, prompts_for
from bench.replay_options import ANSWER_TOKENS, default_model_dir
from trainer.threads import torch_threads

SPLITS = ("train", "held_out", "held_out_other")
HINTS = ("comment", "followups")
LANGUAGES = ("en", "de", "zh")


def hinted(prompt: str, hint: str) -> str:
    """The user's message as the teacher sees it (``trainer.batch.hinted_messages``)."""
    from trainer.batch import hinted_messages

    return hinted_messages([{"role": "user", "content": prompt}], hint)[0]["content"]


def hints_for(
    preference: Preference, count: int, *, source: str = "comment", language: str = "en"
) -> list[str | None]:
    """The teacher's hint for each of ``count`` prompts: the comment, or what the default judge
    takes from the preference's follow-ups in ``language`` (in turn; None where it takes none).

    >>> sam = Preference("sam", "Call me Sam.", {"regex_must": ["Sam"]},
    ...     followups={"en": ["Please call me Sam.", "lol no"]})
    >>> hints_for(sam, 3, source="followups")
    ['Please call me Sam.', None, 'Please call me Sam.']
    """
    from trainer.judge_cues import cue_hint

    if source == "comment":
        return [preference.comment] * count
    said = preference.followups.get(language) or preference.followups.get("en") or []
    if not said:
        raise ValueError(f"{preference.name} has no follow-ups to take a hint from")
    return [cue_hint(f"[user] {said[i % len(said)]}") for i in range(count)]


def compliance(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    preference: Preference,
    *,
    max_new_tokens: int,
    hints: list[str | None] | None = None,
) -> dict[str, Any]:
    """{"plain": share met, "hinted": share met, "examples": a few hinted answers}.

    ``hints``: one per prompt (the comment on each by default); a prompt whose hint is None is
    answered plainly in the hinted column too."""
    if not prompts:
        raise ValueError("no prompts to answer")
    hints = hints if hints is not None else [preference.comment] * len(prompts)
    plain = generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, temperature=0.0, seed=0
    )
    taught = generate(
        model,
        tokenizer,
        [hinted(p, h) if h else p for p, h in zip(prompts, hints, strict=True)],
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
    parser.add_argument(
        "--hint", choices=HINTS, default="comment", help="the comment, or the follow-ups' hints"
    )
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="of the follow-ups")
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
            own = prompts_for(preference, prompts)
            for split in args.splits:
                bar.update(1)
                if not own.get(split):
                    continue
                hints = hints_for(
                    preference, len(own[split]), source=args.hint, language=args.language
                )
                results[preference.name][split] = compliance(
                    model,
                    tokenizer,
                    own[split],
                    preference,
                    max_new_tokens=args.tokens,
                    hints=hints,
                )
    figures = {"model": str(model_dir.name), "tokens": args.tokens, "results": results}
    record("teacher", {**figures, "hint": args.hint, "language": args.language})
    print(table(results, args.splits))
    return 0


def table(results: dict[str, dict[str, Any]], splits: list[str]) -> str:
    """Markdown: per preference and split, the share met without → with the hint."""
    head = ["preference", *(f"{split} (plain → hinted)" for split in splits)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, by_split in results.items():
        cells = [
            f"{by_split[s]['plain']:.2f} → {by_split[s]['hinted']:.2f}" if s in by_split else ""
            for s in splits
        ]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
