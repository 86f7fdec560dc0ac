"""Per-key request rate limit: a fixed one-minute window counted in Redis (shared by every
web replica). Fails open: if Redis cannot be reached, requests are served, not refused."""

from __future__ import annotations

import asyncio
import logging
import time

import redis.asyncio as aioredis
from django.conf import settings

log = logging.getLogger(__name__)
_clients: dict[int, aioredis.Redis] = {}


def _redis() -> aioredis.Redis:
    """One client per event loop: redis.asyncio connections belong to the loop they were made on."""
    loop_id = id(asyncio.get_running_loop())
    if loop_id not in _clients:
        _clients[loop_id] = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
    return _clients[loop_id]


async def retry_after_if_limited(*, key_id: int, limit: int) -> int | None:
    """Seconds until the window resets if this request is over ``limit`` a minute, else None."""
    if limit <= 0 or not settings.REDIS_URL:
        return None
    window = int(time.time() // 60)
    name = f"parley:ratelimit:{key_id}:{window}"
    try:
        pipe = _redis().pipeline()
        pipe.incr(name)
        pipe.expire(name, 120)
        count, _ = await pipe.execute()
    except (aioredis.RedisError, OSError, RuntimeError):
        log.warning("rate limiter unavailable; serving without it", exc_info=True)
        return None
    if count > limit:
        return max(1, 60 - int(time.time() % 60))
    return None
