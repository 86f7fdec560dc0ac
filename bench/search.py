"""Search in what was said, timed: one person's conversations among other people's.

    python -m bench.search [--messages 10000] [--others 9] [--other-messages 10000]
                           [--queries 300] [--seed 0] [--no-record]

Starts a scratch PostgreSQL (and Redis, which it does not use) in a temporary folder, migrates
it, writes ``--messages`` messages for the person who searches (questions and longer answers in
conversations of 20, mostly English made-up words with some German, Russian and Chinese
sentences) and ``--other-messages`` for ``--others`` other people, then times ``--queries``
searches through ``webapp.chat.search.conversation_search``, as the sidebar runs them: the
query, the ranking and the passages, each search's results read in full.

The queries are of six kinds, drawn in turn: a word of middling frequency, one of the ten
commonest words (it matches most messages: the ranking's worst case), two words, the first
four letters of a word (typing in progress), a Chinese phrase (the substring search), and a
word nobody wrote (the word search finds nothing, so the substring search runs too).

Prints p50 and p95 in milliseconds, overall and per kind, and appends them to
bench/results.jsonl ("search"). About a minute on 2 cores, most of it writing the messages.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, record

CONVERSATION_LENGTH = 20
KINDS = ("word", "common", "two words", "prefix", "chinese", "absent")
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ei", "au")]
GERMAN = [
    "Stell die Milch in den Kühlschrank, dort hält sie sich länger.",
    "Die Straßenbahn fährt über die Brücke zum Bahnhof.",
    "Gemüse schmeckt frisch vom Wochenmarkt am besten.",
]
RUSSIAN = [
    "Холодильник сломался, вызовите мастера завтра утром.",
    "Поезд отправляется с вокзала в девять часов.",
    "Борщ лучше всего готовить накануне.",
]
CHINESE = ["我们明天去北京看长城，然后吃烤鸭。", "京都的抹茶很好喝。", "请把牛奶放进冰箱里。"]
CHINESE_QUERIES = ["北京看长城", "抹茶", "牛奶", "冰箱", "烤鸭"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    """``size`` distinct made-up words of two to four syllables."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Writer:
    """Sentences with Zipf-distributed words (rank r drawn with weight 1/r), as text is."""

    def __init__(self, rng: random.Random, words: list[str]) -> None:
        self.rng, self.words = rng, words
        self.weights = [1 / rank for rank in range(1, len(words) + 1)]

    def text(self, count: int) -> str:
        if self.rng.random() < 0.08:
            return self.rng.choice(GERMAN + RUSSIAN + CHINESE)
        drawn = self.rng.choices(self.words, weights=self.weights, k=count)
        return " ".join(drawn).capitalize() + "."


def populate(*, person: Any, others: list[Any], args: argparse.Namespace) -> None:
    """Conversations of 20 messages (a question, then an answer, in turn) for each person."""
    from tqdm import tqdm

    from webapp.chat.models import Conversation, Message

    rng = random.Random(args.seed)
    writer = Writer(rng, vocabulary(rng))
    owners = [(person, args.messages)] + [
        (other, args.other_messages // max(1, len(others))) for other in others
    ]
    with tqdm(total=sum(count for _, count in owners), desc="writing", unit="msg") as bar:
        for owner, count in owners:
            for start in range(0, count, 1000):
                size = min(1000, count - start)
                conversations = Conversation.objects.bulk_create(
                    Conversation(owner=owner, title=writer.text(rng.randint(2, 5))[:200])
                    for _ in range(-(-size // CONVERSATION_LENGTH))
                )
                Message.objects.bulk_create(
                    Message(
                        conversation=conversations[i // CONVERSATION_LENGTH],
                        role="assistant" if i % 2 else "user",
                        content=writer.text(rng.randint(40, 160) if i % 2 else rng.randint(5, 25)),
                        turn_index=i % CONVERSATION_LENGTH,
                    )
                    for i in range(size)
                )
                bar.update(size)
    from django.db import connection

    # What autovacuum does to a running system's tables: statistics, and the rows that wait in
    # the GIN indexes' pending lists moved into the indexes proper.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def queries(rng: random.Random, words: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` (kind, query) pairs, the kinds in turn."""
    middling = words[100:2000]

    def query(kind: str) -> str:
        if kind == "word":
            return rng.choice(middling)
        if kind == "common":
            return rng.choice(words[:10])
        if kind == "two words":
            return " ".join(rng.sample(words[:500], 2))
        if kind == "prefix":
            return rng.choice(middling)[:4]
        if kind == "chinese":
            return rng.choice(CHINESE_QUERIES)
        return "qx" + rng.choice(middling)  # no made-up word starts with "qx"

    return [(KINDS[i % len(KINDS)], query(KINDS[i % len(KINDS)])) for i in range(count)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def time_searches(person: Any, drawn: list[tuple[str, str]]) -> dict[str, list[float]]:
    """Milliseconds per search, by kind (after a few searches that warm the caches up)."""
    from tqdm import tqdm

    from webapp.chat.search import conversation_search

    for _, query in drawn[: len(KINDS)]:
        conversation_search(user=person, query=query)
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for kind, query in tqdm(drawn, desc="searching", unit="query"):
        started = time.perf_counter()
        conversation_search(user=person, query=query)  # titles and passages built, as shown
        times[kind].append((time.perf_counter() - started) * 1000)
    return times


def _inner(args: argparse.Namespace) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", "--noinput", verbosity=0)
    users = get_user_model()
    person = users.objects.create(username="searcher")
    others = [users.objects.create(username=f"other{n}") for n in range(args.others)]
    populate(person=person, others=others, args=args)
    rng = random.Random(args.seed + 1)
    times = time_searches(person, queries(rng, vocabulary(random.Random(args.seed)), args.queries))
    every = [ms for kind in KINDS for ms in times[kind]]
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
    figures = {
        "messages": args.messages,
        "others": args.others,
        "other_messages": args.other_messages,
        "queries": len(every),
        "p50_ms": round(statistics.median(every), 2),
        "p95_ms": round(percentile(every, 0.95), 2),
        "by_kind": {
            kind: {
                "p50_ms": round(statistics.median(times[kind]), 2),
                "p95_ms": round(percentile(times[kind], 0.95), 2),
            }
            for kind in KINDS
            if times[kind]
        },
        "postgres": server,
        "command": " ".join(
            ["python -m bench.search", *(a for a in sys.argv[1:] if a != "--inner")]
        ),
    }
    _report(figures)
    if args.record:
        record("search", figures)
    return 0


def _report(figures: dict[str, Any]) -> None:
    print(
        f"\nsearch | {figures['queries']} searches over {figures['messages']:,} messages of one "
        f"person ({figures['other_messages']:,} more of {figures['others']} others), "
        f"PostgreSQL {figures['postgres']}"
    )
    print(f"search | all        p50 {figures['p50_ms']:7.1f} ms   p95 {figures['p95_ms']:7.1f} ms")
    for kind, row in figures["by_kind"].items():
        print(f"search | {kind:<10} p50 {row['p50_ms']:7.1f} ms   p95 {row['p95_ms']:7.1f} ms")


def in_scratch_database() -> int:
    """This command again (``--inner``) with a PostgreSQL of its own in a temporary folder."""
    from bench.launching import clean_env

    var = Path(tempfile.mkdtemp(prefix="parley-search-"))
    env = clean_env(PARLEY_VAR_DIR=str(var))
    env.pop("PARLEY_EMBEDDED", None)
    command = [sys.executable, "-m", "bench.search", "--inner", *sys.argv[1:]]
    launcher = [sys.executable, "-m", "webapp.infra.launcher", "exec", "--", *command]
    try:
        return subprocess.run(launcher, cwd=ROOT, env=env, check=False).returncode
    finally:
        shutil.rmtree(var, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.search",
        description="Time the sidebar's search over one person's messages among others'.",
    )
    parser.add_argument("--messages", type=int, default=10_000, help="the searcher's messages")
    parser.add_argument("--others", type=int, default=9, help="other people")
    parser.add_argument(
        "--other-messages", type=int, default=10_000, help="their messages, all together"
    )
    parser.add_argument("--queries", type=int, default=300, help="searches timed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-record", dest="record", action="store_false", help="not to bench/results.jsonl"
    )
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return _inner(args) if args.inner else in_scratch_database()


if __name__ == "__main__":
    sys.exit(main())
