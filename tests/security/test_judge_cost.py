"""Judge cost (issue 17): the LLM judge shares vLLM with chat, so its requests go behind chat's
(vLLM priority scheduling), and one user's judge work is capped so it cannot push everyone
else's judgements back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.helpers import send_json
from trainer.judge_client import JudgeEndpoint, complete_n
from webapp.infra.serving import VllmOptions, vllm_server_command


def test_vllm_is_started_with_priority_scheduling() -> None:
    args, _ = vllm_server_command(VllmOptions(model_dir="/m", port=1, dtype="float32"))
    at = args.index("--scheduling-policy")
    assert args[at + 1] == "priority"


@pytest.fixture
def recording_server() -> Iterator[tuple[str, list[dict]]]:
    """A real HTTP server that answers like vLLM's chat endpoint and keeps each request body."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            reply = {
                "choices": [
                    {"index": i, "message": {"content": "+1"}} for i in range(body.get("n", 1))
                ]
            }
            send_json(self, reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()


def test_judge_requests_carry_a_lower_priority_than_chat(recording_server, settings) -> None:
    from webapp.learning.workflows.judging import judge_from_settings

    url, bodies = recording_server
    settings.JUDGE_BASE_URL = url
    settings.JUDGE_PRIORITY = 10
    judge = judge_from_settings()
    assert judge.complete([{"role": "user", "content": "judge this"}], 3) == ["+1"] * 3
    complete_n(JudgeEndpoint(base_url=url, model="base"), [{"role": "user", "content": "x"}], 1)
    # vLLM: lower is earlier, and chat requests carry none (0).
    assert bodies[0]["priority"] == 10 > 0
    assert "priority" not in bodies[1]  # priority 0 is not sent: any judge server accepts it


# --- One user's judge work is capped ---------------------------------------------------------


@pytest.fixture
def judging_clean(settings):
    import redis

    broker = redis.Redis.from_url(settings.REDIS_URL)
    for pattern in ("parley:judging:*", "parley:ratelimit:judging:*", "parley:streams:*"):
        for name in broker.scan_iter(pattern):
            broker.delete(name)
    settings.JUDGE_KIND = "llm"
    settings.USER_MAX_JUDGING = 1
    settings.USER_JUDGING_PER_MINUTE = 100


@pytest.mark.redis
def test_judge_work_is_capped_per_user_in_flight_and_per_minute(settings, judging_clean) -> None:
    from webapp.core.limits import judging_slot

    settings.USER_JUDGING_PER_MINUTE = 2
    with judging_slot(user_id=1, work="message:1") as first:
        assert first
        with (
            judging_slot(user_id=1, work="message:2") as second,
            judging_slot(user_id=2, work="message:3") as other,
        ):
            assert not second  # one in flight per user...
            assert other  # ...and another user's judgement is not held back by it
    with judging_slot(user_id=1, work="message:2") as again:
        assert again  # the slot was freed; the second judgement of this minute
    with judging_slot(user_id=1, work="message:4") as third:
        assert not third  # over two a minute


@pytest.mark.redis
def test_judge_work_waits_while_other_users_are_answered_but_not_for_its_own(
    settings, judging_clean
) -> None:
    import asyncio
    import time

    from webapp.core.limits import judging_slot, others_streaming, stream_slot_acquire

    settings.USER_MAX_STREAMS = 2
    settings.JUDGE_YIELD_S = 5
    settings.JUDGE_YIELD_GRACE_S = 0.5
    other = asyncio.run(stream_slot_acquire(user_id=2))
    own = asyncio.run(stream_slot_acquire(user_id=1))
    assert other is not None and own is not None
    assert others_streaming(user_id=1) == 1 and others_streaming(user_id=2) == 1
    threading.Timer(0.6, lambda: asyncio.run(other.release())).start()
    started = time.monotonic()
    with judging_slot(user_id=1, work="message:1") as admitted:
        waited = time.monotonic() - started
    assert admitted
    # until user 2's answer was written and the grace after it passed, not the whole 5 s
    assert 1.0 <= waited < 3, waited
    assert others_streaming(user_id=1) == 0
    started = time.monotonic()
    with judging_slot(user_id=1, work="message:2") as admitted:  # only its own answer is live
        assert admitted and time.monotonic() - started < 0.5
    asyncio.run(own.release())


@pytest.mark.redis
def test_a_user_asking_again_at_once_is_not_a_pause_for_the_judge(settings, judging_clean) -> None:
    import asyncio
    import time

    from webapp.core.limits import others_streaming, stream_slot_acquire

    settings.USER_MAX_STREAMS = 2
    settings.JUDGE_YIELD_GRACE_S = 0.6
    first = asyncio.run(stream_slot_acquire(user_id=2))
    asyncio.run(first.release())  # the answer ended; the next turn is a few ms away
    assert others_streaming(user_id=1) == 1
    time.sleep(0.7)
    assert others_streaming(user_id=1) == 0  # a real pause: the judge may start


@pytest.mark.redis
def test_judge_work_waits_for_others_at_most_judge_yield_s(settings, judging_clean) -> None:
    import asyncio
    import time

    from webapp.core.limits import judging_slot, stream_slot_acquire

    settings.USER_MAX_STREAMS = 2
    settings.JUDGE_YIELD_S = 0.5
    busy = asyncio.run(stream_slot_acquire(user_id=2))  # never ends while we wait
    started = time.monotonic()
    with judging_slot(user_id=1, work="message:1") as admitted:
        assert admitted and 0.4 <= time.monotonic() - started < 2
    asyncio.run(busy.release())


@pytest.mark.redis
def test_a_redelivered_task_takes_back_the_slot_its_killed_worker_held(
    settings, judging_clean
) -> None:
    from webapp.core.limits import judging_slot

    with judging_slot(user_id=1, work="message:5") as killed:  # never released: the worker died
        assert killed
        with judging_slot(user_id=1, work="message:6") as another:
            assert not another
        with judging_slot(user_id=1, work="message:5") as redelivered:
            assert redelivered  # the same turn's task again: not kept waiting for the expiry


@pytest.mark.redis
def test_judge_work_is_not_capped_with_the_cue_judge(settings, judging_clean) -> None:
    from webapp.core.limits import judging_slot

    settings.JUDGE_KIND = "cues"  # no model: nothing to protect
    with (
        judging_slot(user_id=1, work="message:1") as first,
        judging_slot(user_id=1, work="message:2") as second,
    ):
        assert first and second


@pytest.mark.redis
@pytest.mark.django_db
def test_a_flooders_excess_judgement_is_retried_later_not_run_or_lost(
    settings, judging_clean, recording_server, recorded_tasks
) -> None:
    from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory, UserFactory
    from trainer.judge_client import JudgeUnavailable
    from webapp.chat import services
    from webapp.core.limits import judging_slot
    from webapp.learning.models import Judgement
    from webapp.learning.tasks import judge_message

    url, bodies = recording_server
    settings.JUDGE_BASE_URL = url

    def judged_turn(username: str):
        user = UserFactory(username=username)
        conversation = ConversationFactory(owner=user)
        answer = AnswerFactory(parent=QuestionFactory(conversation=conversation))
        # The user's reply is the answer's next state: the LLM judge is asked about it.
        services.user_message_send(conversation=conversation, content="No, that is wrong.")
        return user, answer

    flooder, flooded = judged_turn("flooder")
    _, calm = judged_turn("calm")
    with judging_slot(
        user_id=flooder.pk, work="message:0"
    ) as busy:  # the flooder's judgement in flight
        assert busy
        with pytest.raises(JudgeUnavailable, match="judge work"):
            judge_message.run(flooded.pk)  # the worker retries it later (autoretry)
        assert bodies == [] and not Judgement.objects.filter(message=flooded).exists()
        judge_message.run(calm.pk)  # someone else's goes ahead meanwhile
        assert len(bodies) >= 1
    judge_message.run(flooded.pk)  # a later try, with the slot free, judges it
    assert Judgement.objects.filter(message=flooded).exists()
