"""Offline replay: the personalization benchmark without the serving loop, Django or a database.

A simulated user asks the train prompts of ``bench/data/prompts.json``; the current policy (the
base model plus the live adapter, through transformers) answers at the chat temperature, and
the tokens it sampled and their log-probabilities are kept exactly as serving keeps them (vLLM's
default: the raw model's log-probs, before the temperature; ``bench.answering``). The user
reacts per the preference with thumbs, comments, corrections or only their next message
(``bench.simulated_user``), and the default judge's votes are scored against the truth; or
states it once as a memory, served in every prompt and distilled (``bench.replay_memory``:
each version scored with the memory in the prompt and without it).

Each batch becomes ``trainer.batch.Sample``s as the webapp builds them
(``bench.simulated_user.judged_sample``), is claimed by the webapp's rules (``trainer.claim``:
the newest signed samples left fresh for the next update's gate, held-back ones scored too),
trained with ``trainer.pipeline.train_and_probe`` under ``UpdateConfig``'s defaults and gated
by ``trainer.gate`` with the webapp's default thresholds (``GateThresholds``). A published
candidate is the next update's starting adapter; a refused one gives its samples back to the
next batch, under the webapp's refusal policy (``trainer.refusals``: a smaller step per
refusal, excluded after ``MAX_REFUSALS``). One difference is chosen: the replay trains every
waiting sample at once, where the webapp trains at most a batch of the oldest. After each
update the held-out splits are answered greedily and scored by the preference's checker, a
broken answer (looping, empty) counting as a miss; the probe perplexity ratio to the base
comes from the gate.

    python -m bench.replay --name starts-with-sure --feedback corrections --versions 8 --seeds 0 1

Every figure is labelled ``"mode": "replay"`` (``bench.personalize`` is the live mode). The
figures go to ``bench/results/replay-*.json`` and a line in ``bench/results.jsonl`` before any
plot is drawn; the plot is optional (matplotlib is a test-only package).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.answering import generate, load_serving_model
from bench.preferences import Preference, load_preferences, load_prompts, prompts_for
from bench.replay_claim import candidate, held_back, unused_by
from bench.replay_figures import (
    candidate_figures,
    figures_of,
    format_run,
    plot,
    plot_if_possible,
    still_served,
    write_figures,
)
from bench.replay_memory import memories_of, served_evaluation
from bench.replay_options import (
    ReplayOptions,
    add_common_arguments,
    base_options,
    parse_overrides,
    update_config,
)
from bench.replay_turns import turn_samples
from bench.simulated_user import FEEDBACK_KINDS
from bench.witness import witness_perplexity
from trainer.algorithms import ALGORITHMS
from trainer.claim import ClaimRules, claim
from trainer.gate import GateThresholds
from trainer.refusals import MAX_REFUSALS, REFUSAL_LR_FACTOR, backed_off_lr, is_excluded
from trainer.threads import torch_threads


def gate(probe: dict[str, float], base_probe: dict[str, float], options: ReplayOptions) -> Any:
    """The trainer's own gate decision, with the replay's thresholds."""
    thresholds = GateThresholds(
        max_kl=options.gate_max_kl,
        max_ppl_ratio=options.gate_max_ppl_ratio,
        max_degenerate_extra=options.max_degenerate_extra,
        max_repeating_extra=options.max_repeating_extra,
    )
    return thresholds.decide(probe, base_probe)


def run_replay(
    options: ReplayOptions,
    prompts: dict[str, list[str]],
    *,
    work_dir: Path | None = None,
    progress: bool = True,
    partial: Path | None = None,
) -> dict[str, Any]:
    """Run ``options.versions`` updates; return the figures (one entry per version, v0 first).
    ``partial``: a JSON file rewritten after every version with the figures so far (marked
    ``"partial": true``), so a run stopped at a deadline still leaves its curve."""
    from tqdm import tqdm
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from trainer.algorithms import algorithm_get
    from trainer.pipeline import train_and_probe

    hf_logging.disable_progress_bar()  # one bar: the versions'
    preferences = [options.preference]
    if options.second_preference is not None:
        preferences.append(options.second_preference)
    # A content preference brings its own prompts, where it matters (bench.preferences)
    prompts = prompts_for(options.preference, prompts)
    wanted_splits = [name for name in options.eval_splits if name in prompts] or ["held_out"]
    splits = {name: prompts[name][: options.eval_limit or None] for name in wanted_splits}
    order = list(prompts["train"])
    random.Random(options.seed).shuffle(order)
    tokenizer = AutoTokenizer.from_pretrained(str(options.model_dir))
    config = update_config(options)
    own_dir = work_dir is None
    work = work_dir or Path(tempfile.mkdtemp(prefix="parley-replay-"))
    live: Path | None = None
    model = load_serving_model(options.model_dir, None, options.device)
    started = time.perf_counter()
    evaluation = served_evaluation(
        model,
        tokenizer,
        splits,
        preferences,
        max_new_tokens=options.eval_tokens,
        memories=memories_of(options.feedback, options.preference),
    )
    base_witness_ppl = witness_perplexity(model, tokenizer)
    versions: list[dict[str, Any]] = [
        {
            "version": 0,
            "published": True,
            "turns": 0,
            **evaluation,
            "ppl_ratio": 1.0,
            "witness_ppl_ratio": 1.0,
        }
    ]
    given_back: list[tuple[Any, int]] = []  # (sample, times refused)
    carried: list[Any] = []  # the newest samples the last update left for this one (fresh)
    # the samples published versions were trained on, and those left ready, oldest first
    on_record: list[Any] = []
    live_batch: list[Any] = []  # the samples that trained the live version
    # the webapp's claim leaves ready the samples of a shape the algorithm never trains: a
    # reward alone under opd, a hint alone under rl (trainer.algorithms.Algorithm.unused_reason)
    algorithm = algorithm_get(options.algorithm)
    claim_rules = ClaimRules(batch_size=options.batch_size, fresh=options.fresh)
    idle = 0  # such samples: ready, never claimed
    judge = {
        "votes": 0,
        "parsed": 0,
        "right": 0,
        "samples": 0,
        "hints": 0,
        "neutral": 0,
        "compared": 0,  # bare 👎s whose alternatives were offered (pairs)
        "chosen": 0,  # of those, where the user chose one as better
    }
    turns = met = 0
    label = f"{options.preference.name} {options.feedback} {options.algorithm} s{options.seed}"
    bar = tqdm(total=options.versions, desc=label, unit="version", disable=not progress)
    try:
        for number in range(1, options.versions + 1):
            version_started = time.perf_counter()
            switched = options.second_preference is not None and number > options.switch_after
            wanted = options.second_preference if switched else options.preference
            assert wanted is not None
            batch_prompts = [order[(turns + i) % len(order)] for i in range(options.batch_size)]
            generated = time.perf_counter()
            answers = generate(
                model,
                tokenizer,
                batch_prompts,
                max_new_tokens=options.gen_tokens,
                temperature=options.temperature,
                seed=options.seed * 100_003 + number,
                memories=memories_of(options.feedback, wanted),  # served with them, if any
            )
            samples, hits = turn_samples(
                answers,
                wanted,
                options,
                model=model,
                tokenizer=tokenizer,
                judge=judge,
                turns=turns,
                number=number,
            )
            met += hits
            turns += len(answers)
            judge["samples"] += len(samples)
            unused = [unused_by(algorithm, s) for s in samples]
            unclaimed = [s for s, left in zip(samples, unused, strict=True) if left]
            samples = [s for s, left in zip(samples, unused, strict=True) if not left]
            idle += len(unclaimed)
            on_record.extend(unclaimed)  # not trained: held back as ready ones are
            waiting = [*given_back, *((s, 0) for s in [*carried, *samples])]  # oldest first
            by_key = {id(sample): (sample, count) for sample, count in waiting}
            # The webapp's claim (trainer.claim), but training every waiting sample at once
            # rather than a batch of the oldest: nothing waits a version but the fresh ones.
            chosen = claim(
                [candidate(sample) for sample, _ in waiting],
                rules=claim_rules,
                left_before={id(sample) for sample in carried},
                size=None,
            )
            fresh = [by_key[key][0] for key in chosen.fresh]
            carried = fresh  # left for the next update, as the webapp leaves them ready
            batch = [by_key[key][0] for key in chosen.batch]
            refusals = [by_key[key][1] for key in chosen.batch]
            # The webapp's refusal policy (trainer.refusals): a smaller step for samples refused
            # before.
            lr = backed_off_lr(config.lr, refusals=refusals, factor=REFUSAL_LR_FACTOR)
            entry: dict[str, Any] = {
                "version": number,
                "preference": wanted.name,
                "turns": turns,
                "met_in_batch": sum(wanted.meets(a.text, a.response_token_ids) for a in answers),
                "samples": len(batch),
                "lr": lr,
                "generate_seconds": time.perf_counter() - generated,
            }
            if not batch:
                entry.update(
                    published=False, reasons=["no sample with a signal this algorithm trains on"]
                )
                entry.update(still_served(versions[-1]), ppl_ratio=versions[-1]["ppl_ratio"])
            else:
                out_dir = work / f"v{number}"
                holdout = held_back(on_record, options.holdout, live_batch=live_batch)
                summary: dict[str, Any] = {}
                for metrics in train_and_probe(
                    dataclasses.replace(config, lr=lr),
                    batch,
                    base_model_dir=options.model_dir,
                    init_adapter_dir=live,
                    out_adapter_dir=out_dir,
                    device=options.device,
                    max_new_tokens=options.probe_tokens,
                    holdout=holdout,
                    fresh=fresh,
                    memories=memories_of(options.feedback, wanted),  # the gate's gap per memory
                ):
                    if metrics.get("done"):
                        summary = metrics
                probe, base_probe = summary["probe"], summary["base_probe"]
                passed, reasons = gate(probe, base_probe, options)
                entry.update(candidate_figures(summary, passed=passed, reasons=reasons))
                if passed:
                    on_record.extend(batch)
                    live_batch = list(batch)
                    live, given_back = out_dir, []
                else:
                    refused = [(s, n + 1) for s, n in zip(batch, refusals, strict=True)]
                    given_back = [
                        (s, n) for s, n in refused if not is_excluded(n, max_refusals=MAX_REFUSALS)
                    ]
                    entry["excluded"] = len(refused) - len(given_back)
                    shutil.rmtree(out_dir, ignore_errors=True)
                if passed:
                    evaluated = time.perf_counter()
                    model = load_serving_model(options.model_dir, live, options.device)
                    entry.update(
                        served_evaluation(
                            model,
                            tokenizer,
                            splits,
                            preferences,
                            max_new_tokens=options.eval_tokens,
                            memories=memories_of(options.feedback, wanted),
                            scored=wanted.name,
                        )
                    )
                    entry["witness_ppl_ratio"] = (
                        witness_perplexity(model, tokenizer) / base_witness_ppl
                    )
                    entry["eval_seconds"] = time.perf_counter() - evaluated
                else:
                    entry.update(still_served(versions[-1]))
            entry["waiting"] = len(given_back) + idle + len(carried)
            entry["seconds"] = time.perf_counter() - version_started
            versions.append(entry)
            bar.update(1)
            shown = " ".join(
                f"{split} {value:.2f}" for split, value in entry["scores"][wanted.name].items()
            )
            outcome = (
                "published" if entry["published"] else "refused: " + "; ".join(entry["reasons"])
            )
            if "score_without_memory" in entry:
                shown += f" | without memory {entry['score_without_memory']:.2f}"
            witness = entry.get("witness_ppl_ratio")
            witness_text = f" witness×{witness:.3f}" if witness is not None else ""
            bar.write(
                f"v{number}: {shown} | ppl×{entry['ppl_ratio']:.3f}{witness_text} | {outcome}"
                f" | {entry['seconds']:.0f}s"
            )
            if partial is not None:
                so_far = figures_of(options, config, splits, turns, met, judge, versions, started)
                partial.parent.mkdir(parents=True, exist_ok=True)
                # whole or not at all: a deadline may stop the process at any moment
                scratch = partial.with_suffix(".json.tmp")
                scratch.write_text(json.dumps({**so_far, "partial": True}) + "\n")
                scratch.replace(partial)
    finally:
        bar.close()
        del model
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)
    figures = figures_of(options, config, splits, turns, met, judge, versions, started)
    if not own_dir:  # the caller keeps the adapters: say which one is live at the end
        figures["live_adapter"] = str(live) if live is not None else None
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay", description=__doc__.split("\n\n")[0]
    )
    add_common_arguments(parser)
    parser.add_argument("--name", default="starts-with-sure", help="the preference")
    parser.add_argument(
        "--feedback",
        choices=FEEDBACK_KINDS,
        default="corrections",
        help="how the simulated user gives the preference (bench.simulated_user); memory: said "
        "once, served in every prompt and distilled, scored with and without it",
    )
    parser.add_argument("--algorithm", choices=list(ALGORITHMS), default="combined")
    parser.add_argument(
        "--then", default="", help="long run: a second preference the user switches to"
    )
    parser.add_argument("--switch-after", type=int, default=0, help="versions before --then")
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=VALUE", help="UpdateConfig override"
    )
    args = parser.parse_args(argv)
    preferences = {p.name: p for p in load_preferences(args.preference)}
    for name in filter(None, (args.name, args.then)):
        if name not in preferences:
            parser.error(f"no preference {name!r}; the file has {', '.join(preferences)}")
    prompts = load_prompts(args.prompts)
    try:
        overrides = parse_overrides(args.set)
    except ValueError as error:
        parser.error(str(error))
    command = "python -m bench.replay " + shlex.join(sys.argv[1:] if argv is None else argv)
    with torch_threads(args.threads):
        return _replay_seeds(args, preferences, prompts, overrides, command)


def _replay_seeds(
    args: argparse.Namespace,
    preferences: dict[str, Preference],
    prompts: dict[str, list[str]],
    overrides: dict[str, Any],
    command: str,
) -> int:
    for seed in args.seeds:
        options = ReplayOptions(
            preference=preferences[args.name],
            feedback=args.feedback,
            algorithm=args.algorithm,
            seed=seed,
            overrides=overrides,
            second_preference=preferences[args.then] if args.then else None,
            switch_after=args.switch_after,
            **base_options(args, preferences),
        )
        then = f"-then-{args.then}" if args.then else ""
        partial = (
            args.out_dir
            / "partial"
            / (  # the curve so far, while it runs
                f"{args.name}{then}-{args.feedback}-{args.algorithm}-s{seed}-{os.getpid()}.json"
            )
        )
        figures = run_replay(options, prompts, progress=not args.quiet, partial=partial)
        figures["command"] = command
        path = write_figures(figures, args.out_dir)
        partial.unlink(missing_ok=True)
        print(format_run(figures))
        print(f"bench | wrote {path}")
        if not args.no_plot:
            plot_if_possible(lambda f=figures, p=path: plot(f, p.with_suffix(".png")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
