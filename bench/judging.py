"""Judging throughput: turns judged per minute with m=3 votes, and what batching the m votes
into one request (n=m) gains over m separate requests. Both modes run on the same turns in
alternating order within one run.

    python -m bench.judging [--turns 6] [--votes 3]
"""

from __future__ import annotations

import argparse
import time

from bench.common import median, record, running_system
from trainer.judge import (
    build_hint_messages,
    build_prm_messages,
    extract_hint,
    majority,
    parse_vote,
    select_hint,
)
from trainer.judge_client import JudgeEndpoint, complete_n

TURNS = [
    ("What is the capital of Italy?", "The capital of Italy is Paris.", "[user] No, that's wrong."),
    ("Give me a synonym for happy.", "Joyful.", "[user] Great, thanks!"),
    ("How many legs does a spider have?", "Spiders have eight legs.", "[user] And insects?"),
    ("Write a haiku about rain.", "Rain taps on the roof / ...", "[user] Too short, write more."),
    ("What is 12 times 12?", "144.", "[user] Perfect."),
    ("Translate 'hello' to French.", "Hola.", "[user] That's Spanish, not French."),
]


def judge_once(
    endpoint: JudgeEndpoint, turn: tuple[str, str, str], votes: int, batched: bool
) -> float:
    request, answer, next_state = turn
    started = time.perf_counter()
    texts = complete_n(
        endpoint,
        build_prm_messages(request=request, answer=answer, next_state=next_state),
        votes,
        batched=batched,
    )
    majority(parse_vote(t) for t in texts)
    hints = complete_n(
        endpoint,
        build_hint_messages(request=request, answer=answer, next_state=next_state),
        votes,
        batched=batched,
    )
    select_hint(extract_hint(t) for t in hints)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=len(TURNS))
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    with running_system() as system:
        endpoint = JudgeEndpoint(
            base_url=system.vllm_url,
            model="base",
            max_tokens=args.max_tokens,
            api_key=system.env["VLLM_API_KEY"],
        )
        judge_once(endpoint, TURNS[0], args.votes, True)  # warm-up
        seconds: dict[str, list[float]] = {"batched": [], "separate": []}
        for index in range(args.turns):
            turn = TURNS[index % len(TURNS)]
            order = ("batched", "separate") if index % 2 == 0 else ("separate", "batched")
            for mode in order:
                seconds[mode].append(judge_once(endpoint, turn, args.votes, mode == "batched"))
    per_minute = {mode: 60 / median(values) for mode, values in seconds.items()}
    gain = per_minute["batched"] / per_minute["separate"]
    print(f"\nm={args.votes} votes (+ m hint attempts), judge max_tokens {args.max_tokens}")
    for mode, values in seconds.items():
        print(
            f"  {mode:<9} median {median(values):6.2f} s/turn  →  {per_minute[mode]:5.1f} turns/min"
        )
    print(f"  batching the m votes into one request (n=m): {gain:.2f}× the turns per minute")
    record(
        "judging",
        {
            "votes": args.votes,
            "max_tokens": args.max_tokens,
            "turns_per_minute": per_minute,
            "batched_gain": gain,
            "seconds_per_turn": {k: median(v) for k, v in seconds.items()},
        },
    )


if __name__ == "__main__":
    main()
