"""Which served form of a memory does the base model follow? Held-out prompts, per form.

    python -m bench.memory_forms [--names call-me-sam ...] [--prompts 8] [--samples 2]
                                 [--seeds 0 1 2] [--model-dir DIR] [--short]

For each preference, its comment is the person's memory; the base model (the replay's, fp32,
``bench.answering``) answers the preference's held-out prompts with that memory served in each
form of ``trainer.memory_prompt`` (``appended`` to the user's message, in a ``system`` message,
``both``) and without it (``none``): ``--samples`` answers a prompt per seed at the chat
temperature, and one greedy answer. A cell is the share of answers that meet the preference
(``Preference.meets``: a broken answer is a miss), sampled (mean over seeds, ± half their
range) and greedy in brackets. Answers are cut at ``--tokens`` as the replay's are, so a
preference judged at the answer's end (``ends-with-question``) reads low in every form. The
figures are recorded (``bench/results.jsonl``, "memory_forms") before the table is printed;
``--short`` is the test's form (two prompts, one sample, one seed, eight tokens).
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import ROOT, record
from bench.preferences import Preference, load_preferences, load_prompts, prompts_for
from bench.replay_figures import spread
from bench.replay_options import ANSWER_TOKENS, CHAT_TEMPERATURE, default_model_dir
from trainer.memory_prompt import FORMS as SERVED_FORMS
from trainer.threads import torch_threads

FORMS = ("none", *SERVED_FORMS)
"""``none``: the prompt without the memory; the others as ``trainer.memory_prompt`` serves it."""
NAMES = ("call-me-sam", "bullet-points", "number-in-every-answer", "ends-with-question")
NAMES += ("starts-with-sure", "all-lowercase")
SPLIT = "held_out"


@dataclass(frozen=True)
class Sampling:
    """How each cell's answers are drawn."""

    prompts: int = 8
    """Held-out prompts per preference (the first ones of its split)."""
    samples: int = 2
    """Answers per prompt and seed at ``temperature`` (besides the greedy one)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    temperature: float = CHAT_TEMPERATURE
    max_new_tokens: int = ANSWER_TOKENS


SHORT = Sampling(prompts=2, samples=1, seeds=(0,), max_new_tokens=8)


def share_met(preference: Preference, answers: Sequence[Any]) -> float:
    """The share of answers that meet the preference (0 for none)."""
    met = [preference.meets(a.text, a.response_token_ids) for a in answers]
    return sum(met) / len(met) if met else 0.0


def cell(
    model: Any, tokenizer: Any, preference: Preference, prompts: list[str], form: str, how: Sampling
) -> dict[str, Any]:
    """One preference in one form: the share met per seed (sampled), and greedy."""
    from bench.answering import generate

    common: dict[str, Any] = {"max_new_tokens": how.max_new_tokens}
    if form != "none":
        common |= {"memories": [preference.comment], "form": form}
    greedy = generate(model, tokenizer, prompts, temperature=0.0, seed=0, **common)
    by_seed = []
    for seed in how.seeds:
        asked = [prompt for prompt in prompts for _ in range(how.samples)]
        sampled = generate(
            model, tokenizer, asked, temperature=how.temperature, seed=seed, **common
        )
        by_seed.append(share_met(preference, sampled))
    return {
        "sampled": statistics.fmean(by_seed) if by_seed else float("nan"),
        "sampled_by_seed": by_seed,
        "greedy": share_met(preference, greedy),
        "example": greedy[0].text[:100] if greedy else "",
    }


def measure(
    model: Any,
    tokenizer: Any,
    preferences: Sequence[Preference],
    splits: dict[str, list[str]],
    how: Sampling,
    *,
    progress: bool = True,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{preference: {form: cell}} over every preference and form."""
    from tqdm import tqdm

    table: dict[str, dict[str, dict[str, Any]]] = {}
    bar = tqdm(total=len(preferences) * len(FORMS), unit="cell", disable=not progress)
    try:
        for preference in preferences:
            prompts = prompts_for(preference, splits)[SPLIT][: how.prompts]
            table[preference.name] = {}
            for form in FORMS:
                bar.set_description(f"{preference.name} / {form}")
                table[preference.name][form] = cell(
                    model, tokenizer, preference, prompts, form, how
                )
                bar.update(1)
    finally:
        bar.close()
    return table


def format_table(table: dict[str, dict[str, dict[str, Any]]]) -> str:
    """A Markdown table: a row per preference, a column per form, sampled ± (greedy)."""
    lines = ["| preference | " + " | ".join(FORMS) + " |", "|---" * (len(FORMS) + 1) + "|"]
    for name, forms in table.items():
        cells = [
            f"{spread(forms[form]['sampled_by_seed'])} ({forms[form]['greedy']:.2f})"
            for form in FORMS
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.memory_forms", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--names", nargs="+", default=list(NAMES), help="the preferences")
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument(
        "--prompts-file", type=Path, default=ROOT / "bench" / "data" / "prompts.json"
    )
    parser.add_argument("--model-dir", type=Path, default=None, help="base model folder")
    parser.add_argument("--prompts", type=int, default=Sampling.prompts, help="per preference")
    parser.add_argument("--samples", type=int, default=Sampling.samples, help="per prompt, seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(Sampling.seeds))
    parser.add_argument("--temperature", type=float, default=Sampling.temperature)
    parser.add_argument("--tokens", type=int, default=Sampling.max_new_tokens)
    parser.add_argument("--short", action="store_true", help="the test's form: " + repr(SHORT))
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's own)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    by_name = {p.name: p for p in load_preferences(args.preference)}
    unknown = [name for name in args.names if name not in by_name]
    if unknown:
        parser.error(f"no preference {unknown}; the file has {', '.join(by_name)}")
    how = (
        SHORT
        if args.short
        else Sampling(args.prompts, args.samples, tuple(args.seeds), args.temperature, args.tokens)
    )
    model_dir = args.model_dir or default_model_dir()
    with torch_threads(args.threads):
        table = _measure(model_dir, [by_name[n] for n in args.names], args, how)
    command = "python -m bench.memory_forms " + shlex.join(sys.argv[1:] if argv is None else argv)
    figures = {"model": model_dir.name, "split": SPLIT, **asdict(how), "forms": list(FORMS)}
    record("memory_forms", {**figures, "table": table, "command": command})
    print(format_table(table))
    return 0


def _measure(
    model_dir: Path, preferences: list[Preference], args: argparse.Namespace, how: Sampling
) -> dict[str, dict[str, dict[str, Any]]]:
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from bench.answering import load_serving_model

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = load_serving_model(model_dir, None)
    splits = load_prompts(args.prompts_file)
    return measure(model, tokenizer, preferences, splits, how, progress=not args.quiet)


if __name__ == "__main__":
    raise SystemExit(main())
