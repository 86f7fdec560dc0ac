"""Swap under load: concurrent streamed chats while the live version is published 5 times,
against the same load without publishes, in one run. Target: 0 failures.

    python -m bench.swap_under_load [--streams 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time

from bench.common import ROOT, concurrent_streams, percentile, record, running_system


def _make_adapter(base_dir: str, out_dir: str) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    peft = get_peft_model(
        model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    peft.save_pretrained(out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with running_system() as system:
        adapter = system.var_dir / "adapters" / "bench-swap"
        _make_adapter(str(ROOT / "var" / "models" / "SmolLM2-135M-Instruct"), str(adapter))
        system.manage(
            "shell",
            "-c",
            "from webapp.learning.models import PolicyVersion as P; "
            f"P.objects.create(number=1, adapter_path='{adapter}', status='candidate')",
        )
        url = system.web_url + "/v1/chat/completions"
        headers = {"Authorization": f"Bearer {system.api_key}"}
        bodies = [
            {
                "model": "parley",
                "stream": True,
                "max_tokens": 48,
                "temperature": 0.7,
                "messages": [{"role": "user", "content": f"Tell me fact number {i} about space."}],
            }
            for i in range(args.streams)
        ]

        def phase(swaps: int) -> tuple[list[float], int]:
            latencies: list[float] = []
            failures = 0
            stop = threading.Event()

            def publisher() -> None:
                for n in range(swaps):
                    system.manage("publish_version", str(1 if n % 2 == 0 else 0))
                    time.sleep(0.5)
                stop.set()

            thread = threading.Thread(target=publisher) if swaps else None
            if thread:
                thread.start()
            rounds = 0
            while rounds < args.rounds or (thread and not stop.is_set()):
                try:
                    timings, _ = asyncio.run(concurrent_streams(url, bodies, headers))
                    latencies += [t.total_s for t in timings]
                except Exception:  # noqa: BLE001 - any failed request counts as a failure
                    failures += 1
                rounds += 1
            if thread:
                thread.join()
            return latencies, failures

        calm, calm_failures = phase(0)
        swapping, swap_failures = phase(5)
    figures = {
        "without_swaps": {
            "p50_s": percentile(calm, 0.5),
            "p99_s": percentile(calm, 0.99),
            "requests": len(calm),
            "failures": calm_failures,
        },
        "with_5_publishes": {
            "p50_s": percentile(swapping, 0.5),
            "p99_s": percentile(swapping, 0.99),
            "requests": len(swapping),
            "failures": swap_failures,
        },
    }
    print(f"\n{'':<18}{'requests':>9}{'failures':>9}{'p50 s':>8}{'p99 s':>8}")
    for name, f in figures.items():
        print(f"{name:<18}{f['requests']:>9}{f['failures']:>9}{f['p50_s']:>8.2f}{f['p99_s']:>8.2f}")
    record("swap_under_load", figures)


if __name__ == "__main__":
    main()
