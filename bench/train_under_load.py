"""One training update while the serving engine streams to clients, against the same update on a
quiet machine: each stage's seconds, side by side in one run.

    python -m bench.train_under_load [--clients 4] [--threads 2 0] [--limit-s 420] [--shape routine]

The llama.cpp engine starts as `serve` starts it (its default threads). Eight real answers are
sampled from it (with their token ids and log-probs, a reward each, every other one hinted, one
corrected), plus the held-back answers the gate scores, so the update has the shape a train
worker runs: ``webapp.learning.workflows.training.train_and_gate`` → ``trainer.pipeline.
train_and_probe`` (load, refinement of hinted answers, teacher log-probs, optimizer steps, the
probe gate). Each run is a child process started the way the Procfile starts the train worker
(``nice -n 10``), at each torch thread count of ``--threads`` (the first is torch's default on
this host; ``0`` means Parley's default, ``PARLEY_TRAIN_THREADS``'s), first on a quiet machine,
then with ``--clients`` clients streaming answers from the engine the whole time. A run past
``--limit-s`` is stopped and shows the stages it finished.

Printed: each stage's seconds quiet and busy, busy/quiet speed per stage, the training tokens
per second of the optimizer steps, and the engine's tokens per second to its clients during
each busy run. Figures go to bench/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, record
from bench.engine_load import Clients, sampled_answers

MODEL_DIR = Path(os.environ.get("PARLEY_MODELS_DIR") or ROOT / "var" / "models") / (
    "SmolLM2-135M-Instruct"
)
STAGES = ("load_and_prepare", "refine", "steps", "gate", "total")
"""load_and_prepare: tokenizer, samples, the model, teacher and reference log-probs, the
optimizer; refine: hinted answers rewritten with their hint; steps: the optimizer steps; gate:
the probe gate's answers and scores; total: the child's whole run."""
BATCH = 8
SHAPES = {"routine": (8, 2, 8), "newcomer": (6, 2, 0)}
"""An update's (batch, fresh, held back) samples: a routine one, and a newcomer's first, whose
8 pieces of feedback are all they have (the claim leaves the 2 newest fresh)."""


def _child(args: argparse.Namespace) -> int:
    """One update as the train worker runs it; a JSON line per finished stage on stdout."""
    from transformers import AutoTokenizer

    from trainer.batch import trainer_sample
    from trainer.config import UpdateConfig
    from trainer.pipeline import train_and_probe
    from trainer.threads import torch_threads

    started = time.perf_counter()

    def report(stage: str, seconds: float, **more: Any) -> None:
        print(json.dumps({"stage": stage, "seconds": round(seconds, 2), **more}), flush=True)

    rows = json.loads(Path(args.samples).read_text())
    with torch_threads(args.threads[0]):
        import torch

        tokenizer = AutoTokenizer.from_pretrained(str(MODEL_DIR))
        samples = [trainer_sample(tokenizer, **row) for row in rows]
        size, fresh, holdout = SHAPES[args.shape]
        batch, held = samples[:size], samples[BATCH:]
        loaded_at = None
        cached = Path(args.base_probe) if args.base_probe else None
        for metrics in train_and_probe(
            UpdateConfig(),
            batch,
            base_model_dir=MODEL_DIR,
            init_adapter_dir=None,
            out_adapter_dir=Path(args.out),
            fresh=held[:fresh],
            holdout=held[fresh : fresh + holdout],
            base_probe=json.loads(cached.read_text()) if cached and cached.exists() else None,
        ):
            if metrics.get("done"):
                report("refine", metrics.get("refine_seconds", 0.0))
                report("gate", metrics["gate_seconds"])
                report("done", time.perf_counter() - started, threads=torch.get_num_threads())
                if cached and not cached.exists():
                    cached.write_text(json.dumps(metrics["base_probe"]))
                break
            if loaded_at is None:
                loaded_at = True
                report("setup", time.perf_counter() - started - metrics["seconds"])
            report("step", metrics["seconds"], tokens=metrics["tokens"])
    return 0


def _run_update(
    samples: Path, threads: int, limit_s: float, out: Path, base_probe: Path, shape: str
) -> tuple[dict[str, float | None], bool, bool]:
    """A child update at nice 10: its stage seconds (None: not reached), whether it finished,
    and whether it was stopped at ``limit_s``."""
    command = [
        *("nice", "-n", "10"),
        sys.executable,
        *("-m", "bench.train_under_load", "--child"),
        *("--samples", str(samples), "--threads", str(threads), "--out", str(out)),
        *("--base-probe", str(base_probe), "--shape", shape),
    ]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    stages: dict[str, float | None] = dict.fromkeys([*STAGES, "tokens_per_s"])
    lines: list[dict[str, Any]] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):
                lines.append(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stopped = False
    try:
        process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()
        stopped = True
    finished = process.returncode == 0
    reader.join(timeout=10)
    step_seconds, step_tokens = 0.0, 0.0
    setup = None
    for entry in lines:
        if entry["stage"] == "setup":
            setup = stages["load_and_prepare"] = entry["seconds"]
        elif entry["stage"] == "refine":
            stages["refine"] = entry["seconds"]
            if setup is not None:
                stages["load_and_prepare"] = setup - entry["seconds"]
        elif entry["stage"] == "step":
            step_seconds += entry["seconds"]
            step_tokens += entry["tokens"]
            stages["steps"] = step_seconds
        elif entry["stage"] == "gate":
            stages["gate"] = entry["seconds"]
        elif entry["stage"] == "done":
            stages["total"] = entry["seconds"]
    if step_seconds:
        stages["tokens_per_s"] = step_tokens / step_seconds
    return stages, finished, stopped


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _ratio(quiet: float | None, busy: float | None) -> str:
    """Busy speed as a fraction of quiet speed (quiet seconds / busy seconds)."""
    if quiet is None or busy is None or busy == 0:
        return "—"
    return f"{quiet / busy:.2f}×"


def _outer(args: argparse.Namespace) -> int:
    from bench.engine_servers import running_llamacpp
    from trainer.threads import train_threads
    from webapp.infra.llamacpp_server import default_threads

    # 0: what a train worker takes by default (PARLEY_TRAIN_THREADS unset, one train worker)
    counts = [
        train_threads(count, serving_threads=default_threads(), train_workers=1)
        for count in args.threads
    ]
    folder = Path(tempfile.mkdtemp(prefix="parley-train-under-load-"))
    gguf = ROOT / "var" / "cache" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    results: list[dict[str, Any]] = []
    print(f"bench | starting the llama.cpp engine ({default_threads()} thread)", flush=True)
    with running_llamacpp(MODEL_DIR, gguf) as server:
        print(f"bench | sampling {BATCH} answers and 10 held back from the engine", flush=True)
        samples = folder / "samples.json"
        samples.write_text(json.dumps(sampled_answers(server.url, server.headers, BATCH + 10)))
        # The base model's probe figures are measured once per deployment and kept (version 0):
        # a first, untimed update measures them, as the first update of a new Parley does.
        print("bench | a first update, untimed: the base model's probe figures", flush=True)
        base_probe = folder / "base_probe.json"
        first = folder / "adapter-first"
        _run_update(samples, counts[-1], args.limit_s, first, base_probe, args.shape)
        for threads in counts:
            for busy in (False, True):
                label = f"{threads} thread(s), {'busy' if busy else 'quiet'}"
                print(f"bench | update: {label}", flush=True)
                out = folder / f"adapter-{threads}-{int(busy)}"
                if busy:
                    with Clients(server.url, server.headers, args.clients) as clients:
                        stages, finished, stopped = _run_update(
                            samples, threads, args.limit_s, out, base_probe, args.shape
                        )
                    serving = clients.tokens_per_second
                else:
                    stages, finished, stopped = _run_update(
                        samples, threads, args.limit_s, out, base_probe, args.shape
                    )
                    serving = None
                results.append(
                    {
                        "threads": threads,
                        "busy": busy,
                        "finished": finished,
                        "stopped": stopped,
                        "clients": args.clients if busy else 0,
                        "serving_tokens_per_s": serving,
                        **stages,
                    }
                )
                print(f"bench |   {json.dumps(results[-1])}", flush=True)
    _print_table(results, limit_s=args.limit_s)
    record(
        "train_under_load",
        {
            "clients": args.clients,
            "limit_s": args.limit_s,
            "shape": args.shape,
            "cpus": os.cpu_count(),
            "runs": results,
        },
    )
    return 0


def _print_table(results: list[dict[str, Any]], *, limit_s: float) -> None:
    print()
    print("| torch threads | stage | quiet s | busy s | busy speed / quiet |")
    print("| --- | --- | --- | --- | --- |")
    by = {(r["threads"], r["busy"]): r for r in results}
    for threads in dict.fromkeys(r["threads"] for r in results):
        quiet, busy = by[(threads, False)], by[(threads, True)]
        for column in STAGES:
            busy_text = _fmt(busy.get(column))
            if column == "total" and not busy["finished"]:
                busy_text = f"> {limit_s:.0f} (stopped)" if busy["stopped"] else "failed"
            print(
                f"| {threads} | {column} | {_fmt(quiet.get(column))} | {busy_text} "
                f"| {_ratio(quiet.get(column), busy.get(column))} |"
            )
        print(
            f"| {threads} | training tokens/s | {_fmt(quiet.get('tokens_per_s'))} "
            f"| {_fmt(busy.get('tokens_per_s'))} | "
            f"{_ratio(busy.get('tokens_per_s'), quiet.get('tokens_per_s'))} |"
        )
        print(
            f"| {threads} | engine tok/s to {busy['clients']} clients | — "
            f"| {_fmt(busy.get('serving_tokens_per_s'))} | — |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[os.cpu_count() or 1, 0],
        help="torch threads of each run (0: Parley's default); default: torch's own, then 0",
    )
    parser.add_argument("--limit-s", type=float, default=420.0)
    parser.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        default="routine",
        help="routine: 8 trained, 2 fresh, 8 held back; newcomer: a first update, 6 and 2",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--samples", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--base-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return _child(args) if args.child else _outer(args)


if __name__ == "__main__":
    raise SystemExit(main())
