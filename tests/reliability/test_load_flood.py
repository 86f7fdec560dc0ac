"""The flood benchmark's reading of the system's log (bench/load_flood.py): before an "alone"
phase it waits for the judge tasks a flood caused, so their cost never lands on the baseline."""

from __future__ import annotations

import asyncio

from bench.load_flood import judge_tasks_pending, judging_drained

TASK = "webapp.learning.tasks.judge_message"
# What a Celery worker logs for a task (the lines bench.common.running_system collects).
RECEIVED = "judge.1 | [INFO/MainProcess] Task " + TASK + "[{id}] received"
SUCCEEDED = "judge.1 | [INFO/ForkPoolWorker-1] Task " + TASK + "[{id}] succeeded in 2.1s: 7"
RAISED = "judge.1 | [ERROR/ForkPoolWorker-1] Task " + TASK + "[{id}] raised unexpected: KeyError"
RETRY = "judge.1 | [INFO/ForkPoolWorker-1] Task " + TASK + "[{id}] retry: Retry in 30s"


def test_pending_counts_received_tasks_not_finished() -> None:
    a, b, c, d = (f"{n}0000000-0000-4000-8000-000000000000" for n in "abcd")
    log = [
        RECEIVED.format(id=a),
        RECEIVED.format(id=b),
        RECEIVED.format(id=c),
        RECEIVED.format(id=d),
        'web.1 | 127.0.0.1:5555 - - [30/Nov/2026:21:00:00] "POST /v1/feedback" 200 17',
        "train.1 | Task webapp.learning.tasks.train_update[" + a + "] received",
        SUCCEEDED.format(id=a),
        RAISED.format(id=b),
        RETRY.format(id=c),
    ]
    assert judge_tasks_pending(log) == 1  # d is still running
    assert judge_tasks_pending([]) == 0
    assert judge_tasks_pending([*log, SUCCEEDED.format(id=d)]) == 0
    # a retried task is received again under its id: pending until it finishes
    assert judge_tasks_pending([*log, RECEIVED.format(id=c)]) == 2


def test_drained_waits_for_the_last_task_then_a_quiet_moment() -> None:
    task = "e0000000-0000-4000-8000-000000000000"
    log = [RECEIVED.format(id=task)]

    async def scenario() -> float:
        async def finish_later() -> None:
            await asyncio.sleep(1.0)
            log.append(SUCCEEDED.format(id=task))

        finisher = asyncio.ensure_future(finish_later())
        waited = await judging_drained(log, timeout=30)
        await finisher
        return waited

    waited = asyncio.run(scenario())
    # polled every 0.5 s: last seen pending at 0.5-1.0 s, then 3 s with nothing new
    assert 3.4 <= waited < 10


def test_drained_gives_up_at_its_timeout() -> None:
    log = [RECEIVED.format(id="f0000000-0000-4000-8000-000000000000")]
    assert 1.0 <= asyncio.run(judging_drained(log, timeout=1.0)) < 3
