"""Short claims in Redis that a piece of work is alive: renewed while it runs, gone within
their time to live once the process holding them dies.

An answer being written holds one (``webapp.frontdoor.generations``): a page opened on an answer
still marked as being written asks whether anyone holds it, and one nobody holds died with the
process that wrote it. Without Redis (one process, the in-memory channel layer) there is nothing
to ask: ``leases_held`` answers None, and the caller knows only its own process's work.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

import redis
import redis.asyncio as aioredis
from django.conf import settings

log = logging.getLogger(__name__)
_UNAVAILABLE = (redis.RedisError, OSError, RuntimeError)
# One async client per event loop (a connection belongs to its loop), weakly keyed so a dead
# loop's client goes with it; one sync client per process for the views.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)
_sync_client: list[redis.Redis] = []


def _redis() -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
    return client


def _sync_redis() -> redis.Redis:
    if not _sync_client:
        _sync_client.append(redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1))
    return _sync_client[0]


async def lease_renew(name: str, *, ttl_s: float) -> bool:
    """Hold ``name`` for ``ttl_s`` more seconds; False when Redis could not be reached."""
    if not settings.REDIS_URL:
        return False
    try:
        await _redis().set(name, "1", px=max(1, int(ttl_s * 1000)))
    except _UNAVAILABLE:
        log.warning("could not renew lease %s", name, exc_info=True)
        return False
    return True


async def lease_drop(name: str) -> None:
    """Give ``name`` up now (the work ended); left to expire when Redis cannot be reached."""
    if not settings.REDIS_URL:
        return
    try:
        await _redis().delete(name)
    except _UNAVAILABLE:
        log.warning("could not drop lease %s; it expires on its own", name, exc_info=True)


def leases_held(names: list[str]) -> set[str] | None:
    """Which of ``names`` someone holds now; None when that cannot be known (no Redis, or it
    could not be reached)."""
    if not settings.REDIS_URL:
        return None
    if not names:
        return set()
    try:
        pipe = _sync_redis().pipeline()
        for name in names:
            pipe.exists(name)
        return {name for name, held in zip(names, pipe.execute(), strict=True) if held}
    except _UNAVAILABLE:
        log.warning("could not read leases", exc_info=True)
        return None
