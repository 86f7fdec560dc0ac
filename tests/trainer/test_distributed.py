"""Several processes compute the same update as one: gloo ranks on the CPU, NCCL with GPUs."""

from __future__ import annotations

import math
import socket
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.trainer.test_update_smoke import _samples
from trainer.config import UpdateConfig
from trainer.distributed import (
    METRICS_PREFIX,
    Launcher,
    _launched_metrics,
    launch_command,
    main,
    metrics_line,
    parse_metrics_line,
    read_request,
    run_update_launched,
    write_request,
)
from trainer.ranks import World
from trainer.update import run_update

COMPARED = (
    "loss",
    "pg_loss",
    "sft_loss",
    "anchor_kl",
    "kl",
    "mean_advantage",
    "clip_fraction",
    "grad_norm",
    "tokens",
    "logprob_gap_mean",
    "logprob_gap_max",
)


def test_accelerate_command_starts_one_process_per_gpu_on_one_machine() -> None:
    command = launch_command("/data/adapters/update-7/request.json", 2)
    assert command[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    launch = " ".join(command[3:])
    assert launch == (
        "--multi_gpu --num_machines 1 --num_processes 2 --mixed_precision no "
        "--dynamo_backend no -m trainer.distributed --request /data/adapters/update-7/request.json"
    )
    assert "--main_process_port 29611" in " ".join(launch_command("r.json", 4, port=29611))
    assert "--multi_gpu" not in launch_command("r.json", 1)  # accelerate refuses it with one


def test_torchrun_command_picks_a_free_port_unless_given_one() -> None:
    standalone = launch_command("r.json", 2, launcher="torchrun")
    assert standalone[1:] == [
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "trainer.distributed",
        "--request",
        "r.json",
    ]
    fixed = " ".join(launch_command("r.json", 2, launcher="torchrun", port=29612))
    assert "--master_addr 127.0.0.1 --master_port 29612" in fixed
    with pytest.raises(ValueError):
        launch_command("r.json", 0)


def test_request_round_trips_config_and_samples_exactly(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(algorithm="opd", lr=1e-2, target_modules=("q_proj", "v_proj"))
    path = write_request(
        tmp_path / "request.json",
        config=config,
        samples=samples,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "out",
    )
    request = read_request(path)
    assert request.config == config
    assert request.samples == samples  # sampler log-probs included, bit for bit
    assert request.base_model_dir == str(tiny_model_dir)
    assert request.init_adapter_dir is None
    assert request.out_adapter_dir == str(tmp_path / "out")


def test_metrics_lines_round_trip_and_other_output_is_ignored() -> None:
    metrics = {"step": 0, "loss": 0.25, "kl": None, "logprob_gap_mean": math.nan}
    line = metrics_line(metrics)
    assert line.startswith(METRICS_PREFIX) and "\n" not in line
    parsed = parse_metrics_line(line + "\n")
    assert parsed is not None
    assert parsed["loss"] == 0.25 and parsed["kl"] is None
    assert math.isnan(parsed["logprob_gap_mean"])
    assert parse_metrics_line("[rank0]: Warning: something\n") is None


def test_a_failed_launch_raises_with_the_tail_of_its_output() -> None:
    script = (
        f"print({metrics_line({'step': 0, 'loss': 1.5})!r}); "
        "print('Traceback: CUDA out of memory'); raise SystemExit(3)"
    )
    launched = _launched_metrics([sys.executable, "-c", script])
    assert next(launched) == {"step": 0, "loss": 1.5}
    with pytest.raises(RuntimeError, match=r"exited with 3:\nTraceback: CUDA out of memory"):
        next(launched)


def test_without_a_process_group_the_world_is_one_process() -> None:
    assert World.current() == World(rank=0, world_size=1)


def test_without_a_launcher_the_entry_point_prints_one_process_update(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2)
    path = write_request(
        tmp_path / "request.json",
        config=config,
        samples=samples,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=tmp_path / "out",
    )
    main(["--request", str(path)])
    printed = [parse_metrics_line(line) for line in capsys.readouterr().out.splitlines()]
    steps = [m for m in printed if m is not None]
    assert [m.get("step") for m in steps] == [0, 1, None] and steps[-1]["processes"] == 1
    assert (tmp_path / "out" / "adapter_model.safetensors").is_file()


def _assert_same_update(
    one: list[dict], many: list[dict], one_dir: Path, many_dir: Path, processes: int
) -> None:
    assert len(one) == len(many)
    for single, launched in zip(one[:-1], many[:-1], strict=True):
        for key in COMPARED:
            if single[key] is None:
                assert launched[key] is None, key
            else:
                assert launched[key] == pytest.approx(single[key], abs=1e-5), key
    assert many[-1]["done"] is True and many[-1]["processes"] == processes
    assert many[-1]["loss"] == pytest.approx(one[-1]["loss"], abs=1e-5)
    assert not (many_dir / "request.json").exists()  # the conversations' tokens do not linger
    a = load_file(str(one_dir / "adapter_model.safetensors"))
    b = load_file(str(many_dir / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5
    assert any(float(a[k].abs().sum()) > 0 for k in a if "lora_B" in k)  # it did train


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("launcher", "processes", "micro_batch_size"),
    [
        # accelerate launch --multi_gpu, the production command, falls back to gloo on the CPU.
        # Micro-batches of 3, 3 and 2 rows: rank 0 gets two and the one correction, rank 1 one.
        ("accelerate", 2, 3),
        # One process: accelerate refuses --multi_gpu with one (found on an H200), so the
        # command leaves it out and the rank runs without a process group.
        ("accelerate", 1, 4),
        # Micro-batches of 4 and 4 and one correction: rank 2 has nothing and adds zeros.
        ("torchrun", 3, 4),
    ],
)
def test_several_gloo_processes_give_the_same_adapter_and_metrics_as_one(
    launcher: Launcher,
    processes: int,
    micro_batch_size: int,
    tiny_model_dir: Path,
    tmp_path: Path,
) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2, micro_batch_size=micro_batch_size, kl_coef=0.1, seed=5)
    dirs = {"base_model_dir": tiny_model_dir, "init_adapter_dir": None}
    one = list(run_update(config, samples, out_adapter_dir=tmp_path / "one", **dirs))
    many = list(
        run_update_launched(
            config,
            samples,
            out_adapter_dir=tmp_path / "many",
            processes=processes,
            launcher=launcher,
            port=_free_port(),
            **dirs,
        )
    )
    _assert_same_update(one, many, tmp_path / "one", tmp_path / "many", processes=processes)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_under_accelerate_give_the_same_adapter_as_one(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    config = UpdateConfig(lr=1e-2, micro_batch_size=2, seed=5)
    dirs = {"base_model_dir": tiny_model_dir, "init_adapter_dir": None}
    one = list(run_update(config, samples, out_adapter_dir=tmp_path / "one", **dirs))
    many = list(
        run_update_launched(
            config,
            samples,
            out_adapter_dir=tmp_path / "two",
            processes=2,
            port=_free_port(),
            **dirs,
        )
    )
    _assert_same_update(one, many, tmp_path / "one", tmp_path / "two", processes=2)
