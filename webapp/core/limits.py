"""Request rates and concurrent streams, counted in Redis so every web replica shares them.

- ``retry_after_if_limited``: a fixed one-minute window per scope (an API key, or a user over
  all of their keys and browser tabs).
- ``stream_slot_acquire``: a user's answers being written at once, websocket and /v1
  together. A slot is an entry in a sorted set scored by its expiry, so a process that dies
  mid-answer (and never releases) leaks it for ``STREAM_SLOT_TTL_S`` at most.
- ``judging_slot``: a user's LLM-judge work in flight and started a minute (judge workers);
  it starts once other users' answers are written, or after ``JUDGE_YIELD_S`` at most.

Both fail open: if Redis cannot be reached, requests are served, not refused (a limiter that
refuses everyone is worse than none for a one-person instance).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis
from django.conf import settings

log = logging.getLogger(__name__)
# Keyed by the loop itself, weakly: a new loop can reuse a dead loop's id(), and a client of a
# dead loop hangs instead of failing.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)
_UNAVAILABLE = (redis.RedisError, OSError, RuntimeError)
_sync_client: list[redis.Redis] = []

# Drop expired slots, then take one if fewer than the limit are held and, where a per-minute
# counter is given (KEYS[2], limit ARGV[6] > 0), it is under its limit; atomic in Redis.
# Only a slot taken counts toward the minute, so work that waits does not use up the minute.
# The same work asking again (a task redelivered after its worker died) takes back its slot.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
local per_minute = tonumber(ARGV[6])
if per_minute > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= per_minute then
  return -1
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
if per_minute > 0 then
  redis.call('INCR', KEYS[2])
  redis.call('EXPIRE', KEYS[2], 120)
end
return 1
"""


def _redis() -> aioredis.Redis:
    """One client per event loop: redis.asyncio connections belong to the loop they were made on."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
    return client


async def retry_after_if_limited(*, scope: str, limit: int) -> int | None:
    """Seconds until the window resets if this request is over ``limit`` a minute, else None.

    ``scope`` names what is counted: ``key:<id>`` or ``user:<id>``.
    """
    if limit <= 0 or not settings.REDIS_URL:
        return None
    window = int(time.time() // 60)
    name = f"parley:ratelimit:{scope}:{window}"
    try:
        pipe = _redis().pipeline()
        pipe.incr(name)
        pipe.expire(name, 120)
        count, _ = await pipe.execute()
    except _UNAVAILABLE:
        log.warning("rate limiter unavailable; serving without it", exc_info=True)
        return None
    if count > limit:
        return max(1, 60 - int(time.time() % 60))
    return None


@dataclass
class StreamSlot:
    """One answer being written for ``user_id``; ``release`` it when the answer ends."""

    user_id: int
    token: str = ""  # empty: nothing was taken (no limit, or Redis unavailable)

    async def release(self) -> None:
        if not self.token:
            return
        token, self.token = self.token, ""
        try:
            pipe = _redis().pipeline()
            pipe.zrem(_streams_name(self.user_id), token)
            # Still counted as being answered for a moment: a user asking again at once (the
            # next turn of a conversation) is not a pause in which the judge may start.
            grace = time.time() + settings.JUDGE_YIELD_GRACE_S
            pipe.zadd(_ALL_STREAMS, {f"{self.user_id}:{token}": grace})
            await pipe.execute()
        except _UNAVAILABLE:
            log.warning("could not release a stream slot; it expires on its own", exc_info=True)


def _streams_name(user_id: int) -> str:
    return f"parley:streams:{user_id}"


_ALL_STREAMS = "parley:streams:all"
"""Every user's stream slots, members ``<user id>:<token>`` scored by their expiry."""


def others_streaming(*, user_id: int) -> int:
    """Answers being written now for users other than ``user_id``, or finished less than
    ``JUDGE_YIELD_GRACE_S`` ago (0 if Redis is away)."""
    now = time.time()
    try:
        client = _sync_redis()
        client.zremrangebyscore(_ALL_STREAMS, "-inf", now)
        members = client.zrangebyscore(_ALL_STREAMS, now, "+inf")
    except _UNAVAILABLE:
        return 0
    return _count_others(members, user_id)


def _count_others(members: list[bytes], user_id: int) -> int:
    mine = f"{user_id}:".encode()
    return sum(not member.startswith(mine) for member in members)


def _yield_to_others(user_id: int) -> float:
    """Wait while other users' answers are being written, ``JUDGE_YIELD_S`` at most; the
    seconds waited. Their answers then get the shared vLLM to themselves, and one user's
    judge work cannot push back everyone else's (it still runs: the wait is bounded)."""
    limit = settings.JUDGE_YIELD_S
    started = time.monotonic()
    while limit > 0 and time.monotonic() - started < limit:
        if not others_streaming(user_id=user_id):
            break
        time.sleep(0.1)
    return time.monotonic() - started


async def stream_slot_acquire(*, user_id: int) -> StreamSlot | None:
    """A slot for one more answer, or None when ``USER_MAX_STREAMS`` are being written."""
    limit = settings.USER_MAX_STREAMS
    if limit <= 0 or not settings.REDIS_URL:
        return StreamSlot(user_id)
    now = time.time()
    ttl = max(1, settings.STREAM_SLOT_TTL_S)
    token = uuid.uuid4().hex
    try:
        taken = await _redis().eval(
            _ACQUIRE, 2, _streams_name(user_id), "-", now, now + ttl, limit, token, ttl + 1, 0
        )
    except _UNAVAILABLE:
        log.warning("stream limiter unavailable; serving without it", exc_info=True)
        return StreamSlot(user_id)
    if taken != 1:
        return None
    try:  # every user's slots in one set too, to see who else is being answered
        await _redis().zadd(_ALL_STREAMS, {f"{user_id}:{token}": now + ttl})
    except _UNAVAILABLE:
        log.warning("could not record a stream slot", exc_info=True)
    waited = await _extra_stream_turn(user_id)
    if waited >= 0.1:
        log.info("user %s's extra answer waited %.1f s for other users' answers", user_id, waited)
    return StreamSlot(user_id, token)


async def _extra_stream_turn(user_id: int) -> float:
    """A user's second (and later) answer at once starts only when nobody else is being
    answered, or after ``USER_EXTRA_STREAM_WAIT_S``: beyond one answer each, the model's
    capacity is for idle moments, so one user's parallel requests cannot crowd out everyone
    else's. The seconds waited."""
    limit = settings.USER_EXTRA_STREAM_WAIT_S
    started = time.monotonic()
    while limit > 0 and time.monotonic() - started < limit:
        try:
            now = time.time()
            pipe = _redis().pipeline()
            pipe.zcount(_streams_name(user_id), now, "+inf")
            pipe.zrangebyscore(_ALL_STREAMS, now, "+inf")
            own, members = await pipe.execute()
        except _UNAVAILABLE:
            break
        if own <= 1 or not _count_others(members, user_id):
            break
        await asyncio.sleep(0.05)
    return time.monotonic() - started


def streams_refused_message(limit: int) -> str:
    plural = "answer is" if limit == 1 else "answers are"
    return (
        f"{limit} {plural} already being written for your account, the most at once; "
        "wait for one to finish."
    )


def _sync_redis() -> redis.Redis:
    """The judge workers' client, made on first use (after Celery forks its processes)."""
    if not _sync_client:
        _sync_client.append(redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1))
    return _sync_client[0]


@contextmanager
def judging_slot(*, user_id: int | None, work: str) -> Iterator[bool]:
    """Whether judge ``work`` (e.g. ``message:42``) for ``user_id`` may run now; the slot is
    held for the block. A task redelivered after its worker died takes back its own slot.

    With the LLM judge every judged turn costs up to 2·m generations on the vLLM that serves
    chat: one user may have ``USER_MAX_JUDGING`` in flight and start ``USER_JUDGING_PER_MINUTE``
    a minute, so a flood of feedback waits its turn instead of pushing everyone else's back.
    The cue judge costs no model time and is not limited.
    """
    limit = settings.USER_MAX_JUDGING
    if settings.JUDGE_KIND != "llm" or user_id is None or limit <= 0 or not settings.REDIS_URL:
        yield True
        return
    now = time.time()
    ttl = max(1, settings.JUDGE_SLOT_TTL_S)
    token = work
    slots = f"parley:judging:{user_id}"
    minute = f"parley:ratelimit:judging:{user_id}:{int(now // 60)}"
    try:
        taken = _sync_redis().eval(
            _ACQUIRE,
            2,
            slots,
            minute,
            now,
            now + ttl,
            limit,
            token,
            ttl + 1,
            settings.USER_JUDGING_PER_MINUTE,
        )
    except _UNAVAILABLE:
        log.warning("judging limiter unavailable; judging without it", exc_info=True)
        yield True
        return
    if taken != 1:
        yield False
        return
    try:
        waited = _yield_to_others(user_id)
        if waited >= 0.1:
            log.info("judge work %s waited %.1f s for other users' answers", work, waited)
        yield True
    finally:
        try:
            _sync_redis().zrem(slots, token)
        except _UNAVAILABLE:
            log.warning("could not release a judging slot; it expires on its own", exc_info=True)
