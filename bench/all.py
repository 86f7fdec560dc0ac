"""`make bench`: every benchmark, one after the other, each appending to bench/results.jsonl."""

from __future__ import annotations

import subprocess
import sys
import time

RUNS = [
    ["-m", "bench.serving", "--rounds", "2"],
    ["bench/chat_ttft.py"],
    ["-m", "bench.stream_render"],
    ["-m", "bench.search"],
    ["-m", "bench.judging", "--turns", "4"],
    ["-m", "bench.swap_under_load", "--rounds", "2"],
    ["-m", "bench.load", "--users", "20", "--rounds", "2"],
    ["-m", "bench.feedback_to_live"],
    ["bench/trainer_throughput.py"],
    ["-m", "bench.cpu_engines"],
    ["-m", "bench.replay", "--versions", "4", "--batch-size", "4", "--eval-limit", "6"],
    [
        "manage.py",
        "bench_personalize",
        "--versions",
        "4",
        "--turns",
        "40",
        "--batch-size",
        "8",
        "--lr",
        "1e-3",
    ],
]


def main() -> int:
    started = time.monotonic()
    failed = []
    for args in RUNS:
        print(f"\n=== {' '.join(args)} ===", flush=True)
        if subprocess.run([sys.executable, *args]).returncode != 0:
            failed.append(" ".join(args))
    print(
        f"\nall benchmarks done in {(time.monotonic() - started) / 60:.1f} min"
        + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
