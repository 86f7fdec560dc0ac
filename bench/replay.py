"""Offline replay: the personalization benchmark without the serving loop, Django or a database.

A simulated user asks the train prompts of ``bench/data/prompts.json``; the current policy (the
base model plus the live adapter, through transformers) answers at the chat temperature, and
the tokens it sampled and their log-probabilities are kept exactly as serving keeps them (vLLM's
default: the raw model's log-probs, before the temperature; ``bench.answering``). The user
reacts per the preference with thumbs, comments, corrections or only their next message
(``bench.simulated_user``), and the default judge's votes are scored against the truth.

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
import contextlib
import dataclasses
import json
import os
import random
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.answering import evaluate_splits, generate, load_serving_model
from bench.common import ROOT, record
from bench.preferences import Preference, load_preferences, load_prompts
from bench.simulated_user import FEEDBACK_KINDS, judged_sample, react
from bench.witness import witness_perplexity
from trainer.claim import Candidate, ClaimRules, claim, holdout_choice, is_signed
from trainer.gate import GateThresholds
from trainer.refusals import MAX_REFUSALS, REFUSAL_LR_FACTOR, backed_off_lr, is_excluded

MODE = "replay"
SCORING = "meets-v2"
"""How answers were scored: "meets-v2" counts a broken answer (``answer_flaws``) as a miss and
the simulated user dislikes it; runs without the field counted every answer that satisfied the
rule, loops included."""
# The webapp's defaults (its PARLEY_TRAIN_* / PARLEY_GATE_* settings start from the same
# dataclasses); the replay reads no Django settings.
GATE_MAX_KL = GateThresholds.max_kl
GATE_MAX_PPL_RATIO = GateThresholds.max_ppl_ratio
GATE_MAX_FEEDBACK_DROP = GateThresholds.max_feedback_drop
GATE_MAX_DEGENERATE_EXTRA = GateThresholds.max_degenerate_extra
GATE_HOLDOUT_SAMPLES = ClaimRules.holdout
"""Recent judged samples with a sign, outside the update, that the gate scores each candidate
on (its feedback score and its answers' loops). Runs recorded without the field held none."""
GATE_FRESH_SAMPLES = ClaimRules.fresh
"""The newest judged samples with a sign that each update leaves for the next one, so the gate
scores the candidate on feedback no version has trained on. Runs recorded without it left none."""
BATCH_SIZE = ClaimRules.batch_size
ANSWER_TOKENS = 48
"""Most tokens of a simulated answer and of a scored held-out answer, unless set."""
PROBE_TOKENS = 24  # the webapp's probe answers (train_and_probe's max_new_tokens)
CHAT_TEMPERATURE = 0.7


def default_model_dir(env: Mapping[str, str] | None = None) -> Path:
    """The base model folder a system with this environment serves (default: this process's)."""
    env = os.environ if env is None else env
    base = env.get("PARLEY_BASE_MODEL")
    if base:
        return Path(base).expanduser()
    models = Path(env.get("PARLEY_MODELS_DIR", ROOT / "var" / "models"))
    return models / "SmolLM2-135M-Instruct"


@dataclass(frozen=True)
class ReplayOptions:
    model_dir: Path
    preference: Preference
    feedback: str = "corrections"
    algorithm: str = "combined"
    versions: int = 8
    batch_size: int = BATCH_SIZE
    seed: int = 0
    temperature: float = CHAT_TEMPERATURE
    gen_tokens: int = ANSWER_TOKENS
    eval_tokens: int = ANSWER_TOKENS
    eval_splits: tuple[str, ...] = ("held_out", "held_out_other")
    eval_limit: int = 0  # 0: every prompt of each split
    overrides: dict[str, Any] = field(default_factory=dict)  # UpdateConfig fields to change
    gate_max_kl: float = GATE_MAX_KL
    gate_max_ppl_ratio: float = GATE_MAX_PPL_RATIO
    second_preference: Preference | None = None  # the user changes their mind ...
    switch_after: int = 0  # ... after this many versions
    probe_tokens: int = PROBE_TOKENS
    max_degenerate_extra: int = GATE_MAX_DEGENERATE_EXTRA
    max_repeating_extra: int | None = None  # None: max_degenerate_extra, as in the webapp
    holdout: int = GATE_HOLDOUT_SAMPLES  # 0: the gate sees no held-back feedback
    fresh: int = GATE_FRESH_SAMPLES  # 0: every waiting sample is trained at once
    device: str = "cpu"  # "cuda": the same fp32 arithmetic on a GPU (labelled in the figures)


def update_config(options: ReplayOptions) -> Any:
    """UpdateConfig's defaults, with the algorithm, the seed and any explicit override. On a
    GPU the base stays fp32 without gradient checkpointing, so the arithmetic is the CPU's."""
    from trainer.config import UpdateConfig

    same_as_cpu = (
        {"base_dtype": "float32", "gradient_checkpointing": False}
        if options.device != "cpu"
        else {}
    )
    return UpdateConfig(
        **{
            "algorithm": options.algorithm,
            "seed": options.seed,
            **same_as_cpu,
            **options.overrides,
        }
    )


def gate(probe: dict[str, float], base_probe: dict[str, float], options: ReplayOptions) -> Any:
    """The trainer's own gate decision, with the replay's thresholds."""
    thresholds = GateThresholds(
        max_kl=options.gate_max_kl,
        max_ppl_ratio=options.gate_max_ppl_ratio,
        max_degenerate_extra=options.max_degenerate_extra,
        max_repeating_extra=options.max_repeating_extra,
    )
    return thresholds.decide(probe, base_probe)


def candidate(sample: Any) -> Candidate:
    """A trainer ``Sample`` as the claim rules see it (keyed by identity: samples are kept in
    memory, never stored)."""
    signed = is_signed(reward=sample.reward, correction=sample.correction_token_ids)
    return Candidate(key=id(sample), signed=signed, signal=signed or bool(sample.hint))


def held_back(on_record: list[Any], limit: int, *, live_batch: Sequence[Any] = ()) -> list[Any]:
    """``trainer.claim.holdout_choice`` over the samples on record: here the batch is every
    sample still waiting, so those are the most recent the earlier versions trained on (or that
    wait for an algorithm that uses them: ``opd`` leaves a 👍 alone ready), newest first.

    >>> from trainer.batch import Sample
    >>> signed = [Sample([1], [n], [-1.0], reward=1.0) for n in range(3)]
    >>> [s.response_token_ids for s in held_back([*signed, Sample([1], [9], [-1.0])], 2)]
    [[2], [1]]
    """
    by_key = {id(s): s for s in on_record}
    exclude = {id(s) for s in live_batch}
    keys = holdout_choice([candidate(s) for s in on_record], exclude=exclude, limit=limit)
    return [by_key[key] for key in keys]


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
    splits = {name: prompts[name][: options.eval_limit or None] for name in options.eval_splits}
    order = list(prompts["train"])
    random.Random(options.seed).shuffle(order)
    tokenizer = AutoTokenizer.from_pretrained(str(options.model_dir))
    config = update_config(options)
    own_dir = work_dir is None
    work = work_dir or Path(tempfile.mkdtemp(prefix="parley-replay-"))
    live: Path | None = None
    model = load_serving_model(options.model_dir, None, options.device)
    started = time.perf_counter()
    evaluation = evaluate_splits(
        model, tokenizer, splits, preferences, max_new_tokens=options.eval_tokens
    )
    base_witness_ppl = witness_perplexity(model, tokenizer)
    versions: list[dict[str, Any]] = [
        {
            "version": 0,
            "published": True,
            "turns": 0,
            **asdict(evaluation),
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
    judge = {"votes": 0, "parsed": 0, "right": 0, "samples": 0, "hints": 0}
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
            )
            samples = []
            for answer in answers:
                reaction = react(
                    wanted, answer.text, options.feedback, token_ids=answer.response_token_ids
                )
                met += reaction.truth > 0
                sample, verdict = judged_sample(answer, reaction, tokenizer)
                for vote in verdict.votes:
                    judge["votes"] += 1
                    judge["parsed"] += vote["score"] is not None
                    judge["right"] += vote["score"] == reaction.truth
                if sample is not None:
                    samples.append(sample)
                    judge["hints"] += sample.hint is not None
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
                ):
                    if metrics.get("done"):
                        summary = metrics
                probe, base_probe = summary["probe"], summary["base_probe"]
                passed, reasons = gate(probe, base_probe, options)
                entry.update(
                    published=bool(passed),
                    reasons=list(reasons),
                    probe_kl=probe.get("probe_kl"),
                    probe_kl_base=probe.get("probe_kl_base"),
                    ppl_ratio=probe["probe_ppl"] / base_probe["probe_ppl"],
                    train_seconds=summary.get("seconds"),
                    gate_seconds=summary.get("gate_seconds"),
                    loss=summary.get("loss"),
                    held_back={
                        key: probe[key]
                        for key in sorted(probe)
                        if key.startswith(("held_back", "feedback_", "fresh_feedback_"))
                    }
                    | {
                        key.replace("held_back_", "held_back_base_"): value
                        for key, value in base_probe.items()
                        if key.startswith("held_back_")
                    },
                )
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
                    evaluation = evaluate_splits(
                        model, tokenizer, splits, preferences, max_new_tokens=options.eval_tokens
                    )
                    entry.update(asdict(evaluation))
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


def figures_of(
    options: ReplayOptions,
    config: Any,
    splits: dict[str, list[str]],
    turns: int,
    met: int,
    judge: dict[str, int],
    versions: list[dict[str, Any]],
    started: float,
) -> dict[str, Any]:
    """A run's figures (what ``bench/results/replay-*.json`` holds)."""
    done = len(versions) - 1
    return {
        "mode": MODE,
        "preference": options.preference.name,
        "second_preference": options.second_preference.name if options.second_preference else None,
        "switch_after": options.switch_after if options.second_preference else None,
        "feedback": options.feedback,
        "algorithm": options.algorithm,
        "seed": options.seed,
        "batch_size": options.batch_size,
        "temperature": options.temperature,
        "gen_tokens": options.gen_tokens,
        "eval_tokens": options.eval_tokens,
        "eval_prompts": {name: len(items) for name, items in splits.items()},
        "device": options.device,
        "overrides": dict(options.overrides),
        "config": dataclasses.asdict(config),
        "gate": {
            "max_kl": options.gate_max_kl,
            "max_ppl_ratio": options.gate_max_ppl_ratio,
            "max_degenerate_extra": options.max_degenerate_extra,
            "max_repeating_extra": options.max_repeating_extra,
            "holdout": options.holdout,
            "fresh": options.fresh,
        },
        "probe_tokens": options.probe_tokens,
        "refusal_policy": {"lr_factor": REFUSAL_LR_FACTOR, "max_refusals": MAX_REFUSALS},
        "scoring": SCORING,
        "turns": turns,
        "answers_meeting_preference": met,
        "judge": judge,
        "versions": versions,
        "summary": summarise(versions, options.preference.name),
        "seconds": time.perf_counter() - started,
        "seconds_per_version": (time.perf_counter() - started) / max(done, 1),
    }


SERVED_FIGURES = ("scores", "flawed", "broken_examples", "missed_examples", "witness_ppl_ratio")


def still_served(previous: dict[str, Any]) -> dict[str, Any]:
    """A version that published nothing: the live version's evaluation stays what users get
    (its scores, broken and missed answers, witness perplexity), carried to this entry."""
    return {key: previous[key] for key in SERVED_FIGURES if key in previous}


def unused_by(algorithm: Any, sample: Any) -> bool:
    """Whether the webapp's claim leaves this sample ready under the algorithm: its kind as
    ``webapp.learning.services`` stores it (a hint or correction without a reward is "opd"),
    asked of ``Algorithm.unused_reason``."""
    has_hint, has_correction = bool(sample.hint), bool(sample.correction_token_ids)
    kind = "opd" if not sample.reward and (has_hint or has_correction) else "rl"
    return bool(
        algorithm.unused_reason(kind=kind, has_hint=has_hint, has_correction=has_correction)
    )


def summarise(versions: list[dict[str, Any]], preference: str) -> dict[str, Any]:
    """Per split: the score at v0, at v8 and v16 (when reached), the best and when it came."""
    result: dict[str, Any] = {
        # of the versions served (a refused candidate's perplexity is why it was refused)
        "worst_ppl_ratio": max(
            v["ppl_ratio"] for v in versions if v["ppl_ratio"] is not None and v["published"]
        ),
        "refused": [v["version"] for v in versions if not v["published"]],
        # every sample with a signal is trained (by a published version), waiting, or excluded
        "trained": sum(v.get("samples", 0) for v in versions[1:] if v["published"]),
        "waiting": versions[-1].get("waiting", 0),
        "excluded": sum(v.get("excluded", 0) for v in versions),
        # the share of broken (looping, empty) held-out answers of the versions served
        "worst_flawed": max(
            (max(v["flawed"].values()) for v in versions if v.get("flawed") and v["published"]),
            default=None,
        ),
        # the served versions' perplexity on text neither the gate nor the anchor sees
        # (bench.witness); None for runs recorded before it was measured
        "worst_witness_ppl_ratio": max(
            (v["witness_ppl_ratio"] for v in versions if v.get("witness_ppl_ratio") is not None),
            default=None,
        ),
        # how far the served lineage went from the base, KL per probe answer token: the gate
        # limits each step (KL to the live version), never this distance
        "farthest_from_base_kl": max(
            (
                v["probe_kl_base"]
                for v in versions
                if v.get("probe_kl_base") is not None and v["published"]
            ),
            default=None,
        ),
    }
    for split in versions[0]["scores"][preference]:
        series = [v["scores"][preference][split] for v in versions]
        best = max(series)
        result[split] = {
            "v0": series[0],
            "last": series[-1],
            "best": best,
            "best_at": series.index(best),
            **{f"v{n}": series[n] for n in (8, 16, 32) if n < len(series)},
        }
    return result


_STEM_TAGS = {"max_degenerate_extra": "degenerate", "probe_tokens": "probe"}
_STEM_TAGS |= {"max_repeating_extra": "repeating"}
_STEM_TAGS |= {"gate_max_ppl_ratio": "gateppl"}
_STEM_TAGS |= {"gen_tokens": "gen", "eval_tokens": "eval", "holdout": "holdout"}
_STEM_TAGS |= {"fresh": "fresh"}


def replay_settings(figures: dict[str, Any]) -> dict[str, Any]:
    """The replay's own settings (not UpdateConfig fields) a run changed from the defaults, in
    a fixed order: they name its file (``write_figures``) and its table row (``bench.sweep``)."""
    defaults = {
        "batch_size": BATCH_SIZE,
        "max_degenerate_extra": GATE_MAX_DEGENERATE_EXTRA,
        "max_repeating_extra": None,
        "gate_max_ppl_ratio": GATE_MAX_PPL_RATIO,
        "probe_tokens": PROBE_TOKENS,
        "gen_tokens": ANSWER_TOKENS,
        "eval_tokens": ANSWER_TOKENS,
        "holdout": GATE_HOLDOUT_SAMPLES,
        "fresh": GATE_FRESH_SAMPLES,
    }
    used = {key: figures.get(key, default) for key, default in defaults.items()}
    gate = figures.get("gate") or {}
    used["max_degenerate_extra"] = gate.get("max_degenerate_extra", GATE_MAX_DEGENERATE_EXTRA)
    used["max_repeating_extra"] = gate.get("max_repeating_extra")
    used["gate_max_ppl_ratio"] = gate.get("max_ppl_ratio", GATE_MAX_PPL_RATIO)
    used["holdout"] = gate.get("holdout", 0)  # older runs held nothing back
    # a run recorded without the field left no fresh samples (named where it held any back)
    used["fresh"] = gate.get("fresh", 0 if gate.get("holdout") else GATE_FRESH_SAMPLES)
    return {key: value for key, value in used.items() if value != defaults[key]}


def write_figures(figures: dict[str, Any], out_dir: Path, *, record_line: bool = True) -> Path:
    """The JSON file and the bench/results.jsonl line: always before any plot."""
    out_dir.mkdir(parents=True, exist_ok=True)
    second = f"-then-{figures['second_preference']}" if figures["second_preference"] else ""
    stem = (
        f"replay-{figures['preference']}{second}-{figures['feedback']}-{figures['algorithm']}"
        f"-s{figures['seed']}"
    )
    changed = replay_settings(figures)
    if "batch_size" in changed:
        stem += f"-batch{changed.pop('batch_size')}"
    if figures["overrides"]:
        stem += "-" + "-".join(f"{k}{v}" for k, v in sorted(figures["overrides"].items()))
    stem += "".join(f"-{_STEM_TAGS[key]}{value}" for key, value in changed.items())
    if figures.get("device", "cpu") != "cpu":
        stem += f"-{figures['device']}"
    path = out_dir / f"{stem}.json"
    path.write_text(json.dumps(figures, indent=2) + "\n")
    if record_line:
        record("replay", figures)
    return path


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6, 4))
    xs = [v["version"] for v in figures["versions"]]
    for name, by_split in figures["versions"][0]["scores"].items():
        for split in by_split:
            ys = [v["scores"][name][split] for v in figures["versions"]]
            axis.plot(xs, ys, marker="o", label=f"{name} / {split}")
    axis.set(
        xlabel="version",
        ylabel="held-out score",
        ylim=(-0.05, 1.05),
        title=f"[{figures['mode']}] {figures['feedback']}, {figures['algorithm']}",
    )
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_if_possible(draw: Callable[[], None]) -> bool:
    """Draw when matplotlib is installed (the test environment); say so when it is not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("bench | matplotlib is not installed: no plot drawn (the figures are recorded)")
        return False
    draw()
    return True


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["lr=1e-3", "steps_per_batch=4"]`` → UpdateConfig overrides (JSON values, else text)."""
    from trainer.config import UpdateConfig

    known = {f.name for f in dataclasses.fields(UpdateConfig)}
    overrides: dict[str, Any] = {}
    for item in items:
        key, _, text = item.partition("=")
        if key not in known or not text:
            raise ValueError(f"{item!r}: use FIELD=VALUE with a field of UpdateConfig")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to ``count`` (0: unchanged) for the block, then restored."""
    import torch

    previous = torch.get_num_threads()
    if count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preference", type=Path, default=ROOT / "bench" / "data" / "preferences.json"
    )
    parser.add_argument("--prompts", type=Path, default=ROOT / "bench" / "data" / "prompts.json")
    parser.add_argument("--model-dir", type=Path, default=None, help="base model folder")
    parser.add_argument("--versions", type=int, default=8, help="updates per run")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="answers per update")
    parser.add_argument("--temperature", type=float, default=CHAT_TEMPERATURE)
    parser.add_argument(
        "--gen-tokens", type=int, default=ANSWER_TOKENS, help="most tokens per answer"
    )
    parser.add_argument("--eval-tokens", type=int, default=ANSWER_TOKENS)
    parser.add_argument("--eval-splits", default="held_out,held_out_other")
    parser.add_argument("--eval-limit", type=int, default=0, help="prompts per split (0: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (0: torch's own). 1 by default: on a 2-core machine shared with other "
        "work, two threads generated 5x slower than one (measured)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--holdout",
        type=int,
        default=GATE_HOLDOUT_SAMPLES,
        help="held-back samples the gate checks each candidate on, as PARLEY_GATE_HOLDOUT_SAMPLES "
        "(0: none)",
    )
    parser.add_argument(
        "--fresh",
        type=int,
        default=GATE_FRESH_SAMPLES,
        help="newest samples each update leaves for the next, to score the candidate on feedback "
        "no version trained on, as PARLEY_GATE_FRESH_SAMPLES (0: none)",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu, or cuda: the same fp32 arithmetic on a GPU"
    )


def base_options(args: argparse.Namespace, preferences: dict[str, Preference]) -> dict[str, Any]:
    return {
        "model_dir": args.model_dir or default_model_dir(),
        "versions": args.versions,
        "batch_size": args.batch_size,
        "temperature": args.temperature,
        "gen_tokens": args.gen_tokens,
        "eval_tokens": args.eval_tokens,
        "eval_splits": tuple(s for s in args.eval_splits.split(",") if s),
        "eval_limit": args.eval_limit,
        "device": args.device,
        "holdout": args.holdout,
        "fresh": args.fresh,
    }


def command_line() -> str:
    return "python -m " + " ".join(
        shlex.quote(a) for a in [__spec__.name if __spec__ else "bench.replay", *sys.argv[1:]]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay", description=__doc__.split("\n\n")[0]
    )
    add_common_arguments(parser)
    parser.add_argument("--name", default="starts-with-sure", help="the preference")
    parser.add_argument("--feedback", choices=FEEDBACK_KINDS, default="corrections")
    parser.add_argument("--algorithm", default="combined", help="rl, opd or combined")
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
    command = command_line() if argv is None else "python -m bench.replay " + shlex.join(argv)
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


def format_run(figures: dict[str, Any]) -> str:
    lines = [
        f"[{figures['mode']}] {figures['preference']} · {figures['feedback']} · "
        f"{figures['algorithm']} · seed {figures['seed']}"
    ]
    splits = list(figures["versions"][0]["scores"][figures["preference"]])
    lines.append(
        f"{'version':>8}{'turns':>7}"
        + "".join(f"{s:>16}" for s in splits)
        + f"{'ppl/base':>10}  gate"
    )
    for v in figures["versions"]:
        name = v.get("preference", figures["preference"])
        cells = "".join(f"{v['scores'][name][s]:>16.2f}" for s in splits)
        gate_text = "base" if v["version"] == 0 else ("published" if v["published"] else "refused")
        label = f"v{v['version']}"
        lines.append(f"{label:>8}{v['turns']:>7}{cells}{v['ppl_ratio']:>10.3f}  {gate_text}")
    lines.append(f"{figures['seconds_per_version']:.0f} s per version")
    return "\n".join(lines)


def spread(values: Sequence[float]) -> str:
    """mean ± half the range (the spread over seeds), or the one value."""
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {(max(values) - min(values)) / 2:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
