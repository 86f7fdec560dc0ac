"""How many tasks wait in the Celery queues, read straight from the Redis broker.

Celery's Redis transport keeps each queue as a Redis list named after the queue (plus one list
per priority step, ``judge\\x06\\x163`` …, when task priorities are used), so a queue's depth is
the sum of those lists' lengths. Tasks a worker has taken but not yet acknowledged are not
counted: they are running, not waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit

log = logging.getLogger(__name__)

PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)  # kombu's default steps above 0 (0 is the plain queue name)


def redis_url_from_broker(broker_url: str) -> str | None:
    """A redis-py URL for a Celery broker URL; None when the broker is not Redis.

    >>> redis_url_from_broker("redis+socket:///var/redis.sock?virtual_host=2")
    'unix:///var/redis.sock?db=2'
    >>> redis_url_from_broker("redis://localhost:6379/0")
    'redis://localhost:6379/0'
    >>> redis_url_from_broker("amqp://guest@localhost//") is None
    True
    """
    scheme = urlsplit(broker_url).scheme
    if scheme in ("redis", "rediss", "unix"):
        return broker_url
    if scheme == "redis+socket":
        parts = urlsplit(broker_url)
        query = dict(parse_qsl(parts.query))
        db = query.pop("virtual_host", None)
        if db is not None and "db" not in query:
            query["db"] = db
        suffix = f"?{urlencode(query)}" if query else ""
        return f"unix://{parts.path}{suffix}"
    return None


def queue_depths(*, broker_url: str, names: Iterable[str]) -> dict[str, int | None]:
    """Waiting tasks per queue; None for every queue when the broker cannot be read."""
    names = list(names)
    url = redis_url_from_broker(broker_url) if broker_url else None
    if url is None:
        return dict.fromkeys(names)
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        with client.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.llen(name)
                for step in PRIORITY_STEPS:
                    pipe.llen(f"{name}{PRIORITY_SEPARATOR}{step}")
            lengths = pipe.execute()
        client.close()
    except (redis.RedisError, OSError):
        log.warning("could not read queue depths from the broker", exc_info=True)
        return dict.fromkeys(names)
    per_queue = 1 + len(PRIORITY_STEPS)
    return {name: sum(lengths[i * per_queue : (i + 1) * per_queue]) for i, name in enumerate(names)}
