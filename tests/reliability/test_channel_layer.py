"""The chat socket's channel layer survives a slow Redis reply.

channels-redis waits for messages with a 5 s blocking BZPOPMIN; redis-py 8 gives every read a
5 s socket timeout by default. On a busy host the empty reply arrives a little after 5 s, the
read times out, and the consumer (the open chat page) dies with 1011; the load test saw it.
Here a 6 s blocking receive stands in for the late reply.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.exceptions
from channels_redis.core import RedisChannelLayer

pytestmark = [pytest.mark.services, pytest.mark.redis]


def _layer(settings, hosts=None) -> RedisChannelLayer:
    if not settings.REDIS_URL:
        pytest.skip("no Redis: the in-memory channel layer has no socket")
    layer = RedisChannelLayer(hosts=hosts or settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"])
    layer.brpop_timeout = 6  # the reply comes after 6 s: later than redis-py's 5 s default
    return layer


async def test_a_receive_outlasts_a_reply_slower_than_five_seconds(settings) -> None:
    layer = _layer(settings)
    channel = await layer.new_channel()
    with pytest.raises(TimeoutError):  # ours, from wait_for: the layer itself kept waiting
        await asyncio.wait_for(layer.receive(channel), timeout=7.5)
    await layer.send(channel, {"type": "chat.fragment", "html": "<p>still here</p>"})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["html"] == "<p>still here</p>"
    await layer.flush()


async def test_with_redis_py_defaults_the_same_receive_fails(settings) -> None:
    """The control: the plain URL (the old setting) breaks exactly this way."""
    layer = _layer(settings, hosts=[settings.REDIS_URL])
    channel = await layer.new_channel()
    with pytest.raises(redis.exceptions.TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=7.5)
    await layer.flush()
