"""One update on several processes: the request file, the launch command, the entry point.

A Celery worker cannot become several torch.distributed ranks itself, so for a multi-GPU update
the task writes the update's inputs to a JSON request, starts a launcher on

    python -m trainer.distributed --request PATH

(``accelerate launch --multi_gpu``, one process per GPU; ``torchrun`` on the CPU in the tests)
and reads rank 0's metrics back from its stdout, one ``PARLEY_METRICS {json}`` line per step;
other output is logged. Each process joins the group from the launcher's environment (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) — NCCL on GPUs, gloo on the CPU — and runs
``run_update`` with its ``World``. ``run_update_launched`` wraps all of this behind
``run_update``'s own signature and yields the same dicts. No Django here.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

from trainer.batch import Sample
from trainer.config import UpdateConfig, config_from_dict
from trainer.ranks import World
from trainer.update import run_update

log = logging.getLogger(__name__)

METRICS_PREFIX = "PARLEY_METRICS "
REQUEST_NAME = "request.json"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
Launcher = Literal["accelerate", "torchrun"]


@dataclass(frozen=True)
class UpdateRequest:
    """``run_update``'s arguments, as every rank reads them from the request file."""

    config: UpdateConfig
    samples: list[Sample]
    base_model_dir: str
    init_adapter_dir: str | None
    out_adapter_dir: str


def write_request(
    path: str | Path,
    *,
    config: UpdateConfig,
    samples: list[Sample],
    base_model_dir: str | Path,
    init_adapter_dir: str | Path | None,
    out_adapter_dir: str | Path,
) -> Path:
    """Write the update's inputs as JSON (floats round-trip exactly) and return the path."""
    request = {
        "config": dataclasses.asdict(config),
        "samples": [dataclasses.asdict(sample) for sample in samples],
        "base_model_dir": str(base_model_dir),
        "init_adapter_dir": str(init_adapter_dir) if init_adapter_dir is not None else None,
        "out_adapter_dir": str(out_adapter_dir),
    }
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(request))
    return out


def read_request(path: str | Path) -> UpdateRequest:
    values = json.loads(Path(path).read_text())
    return UpdateRequest(
        config=config_from_dict(values["config"]),
        samples=[Sample(**sample) for sample in values["samples"]],
        base_model_dir=values["base_model_dir"],
        init_adapter_dir=values["init_adapter_dir"],
        out_adapter_dir=values["out_adapter_dir"],
    )


def launch_command(
    request_path: str | Path,
    processes: int,
    *,
    launcher: Launcher = "accelerate",
    port: int | None = None,
) -> list[str]:
    """The command line that starts ``processes`` ranks of ``trainer.distributed`` on this host.

    Launchers run as ``python -m`` of this interpreter, so the ranks use the same environment
    whether or not its scripts are on PATH. "accelerate" is ``accelerate launch --multi_gpu``
    (one process per visible GPU, no mixed precision or compilation: the update runs in fp32 as
    in one process); "torchrun" starts the same ranks without GPUs (gloo). Without a port,
    accelerate uses its default (29500) and torchrun picks a free one (--standalone).
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    entry = ["-m", "trainer.distributed", "--request", str(request_path)]
    if launcher == "accelerate":
        ports = ["--main_process_port", str(port)] if port is not None else []
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            # accelerate refuses --multi_gpu with one process (seen on an H200).
            *(["--multi_gpu"] if processes > 1 else []),
            "--num_machines",
            "1",
            "--num_processes",
            str(processes),
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            *ports,
            *entry,
        ]
    if launcher == "torchrun":
        rendezvous = (
            ["--master_addr", "127.0.0.1", "--master_port", str(port)]
            if port is not None
            else ["--standalone"]
        )
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            *rendezvous,
            "--nproc_per_node",
            str(processes),
            *entry,
        ]
    raise ValueError(f"unknown launcher {launcher!r}")


def metrics_line(metrics: dict[str, Any]) -> str:
    return METRICS_PREFIX + json.dumps(metrics)


def parse_metrics_line(line: str) -> dict[str, Any] | None:
    """The metrics dict on a ``PARLEY_METRICS`` line, None on any other output line."""
    if not line.startswith(METRICS_PREFIX):
        return None
    return json.loads(line[len(METRICS_PREFIX) :])


def run_update_launched(
    config: UpdateConfig,
    samples: list[Sample],
    *,
    base_model_dir: str | Path,
    init_adapter_dir: str | Path | None,
    out_adapter_dir: str | Path,
    processes: int,
    launcher: Launcher = "accelerate",
    port: int | None = None,
) -> Iterator[dict[str, Any]]:
    """``run_update`` on ``processes`` launched processes: the same metrics dicts, yielded as
    rank 0 prints them. The request is written to ``out_adapter_dir/request.json`` and removed
    afterwards: it holds the conversations' tokens, and the adapters folder is shared."""
    request = write_request(
        Path(out_adapter_dir) / REQUEST_NAME,
        config=config,
        samples=samples,
        base_model_dir=base_model_dir,
        init_adapter_dir=init_adapter_dir,
        out_adapter_dir=out_adapter_dir,
    )
    try:
        yield from _launched_metrics(
            launch_command(request, processes, launcher=launcher, port=port)
        )
    finally:
        request.unlink(missing_ok=True)


def _launched_metrics(command: list[str]) -> Iterator[dict[str, Any]]:
    """Run the launcher, yield each metrics line, log the rest; raise if it fails."""
    log.info("launching %s", " ".join(command))
    tail: collections.deque[str] = collections.deque(maxlen=40)
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            metrics = parse_metrics_line(line)
            if metrics is not None:
                yield metrics
            else:
                tail.append(line.rstrip("\n"))
                log.info("%s", tail[-1])
        returncode = process.wait()
    finally:
        # The caller stopped early or failed while recording a step: do not leave ranks behind.
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    if returncode != 0:
        output = "\n".join(tail)
        raise RuntimeError(f"the launched update exited with {returncode}:\n{output}")


def _join_process_group() -> World:
    """Join the group the launcher describes in the environment: NCCL on GPUs, else gloo.

    Started without a launcher (no WORLD_SIZE), this is the only process: no group at all.
    """
    if "WORLD_SIZE" not in os.environ:
        return World()
    if torch.cuda.is_available():
        # Before the group: NCCL binds each rank to the current device.
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")
    return World(dist.get_rank(), dist.get_world_size())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--request", required=True, type=Path, help="JSON from write_request")
    args = parser.parse_args(argv)
    request = read_request(args.request)
    world = _join_process_group()
    try:
        for metrics in run_update(
            request.config,
            request.samples,
            base_model_dir=request.base_model_dir,
            init_adapter_dir=request.init_adapter_dir,
            out_adapter_dir=request.out_adapter_dir,
            world=world,
        ):
            print(metrics_line(metrics), flush=True)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
