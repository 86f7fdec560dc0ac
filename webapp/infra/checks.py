"""Set-up checks that turn a confusing failure later into one clear line now."""

from __future__ import annotations

import errno
import socket

from webapp.config import database_from_url, redacted


class SetupError(RuntimeError):
    """Something outside Parley is in the way; str() says what to do about it."""


def port_free(host: str, port: int, setting: str) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SetupError(
                    f"port {port} on {host} is already in use; stop whatever listens there "
                    f"(`ss -ltnp 'sport = :{port}'` shows it) or set {setting} to a free port"
                ) from exc
            raise SetupError(
                f"cannot listen on {host}:{port} ({exc.strerror}); set {setting}"
            ) from exc


def database_reachable(url: str) -> None:
    import psycopg

    db = database_from_url(url)
    try:
        psycopg.connect(
            host=db["HOST"] or None,
            port=db["PORT"] or None,
            user=db["USER"] or None,
            password=db["PASSWORD"] or None,
            dbname=db["NAME"],
            connect_timeout=5,
        ).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SetupError(
            f"cannot reach the database at DATABASE_URL={redacted(url)} ({reason}); start that "
            "PostgreSQL or fix the URL, or unset DATABASE_URL to use the embedded one"
        ) from exc


def redis_reachable(url: str) -> None:
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except (redis.RedisError, ValueError) as exc:
        raise SetupError(
            f"cannot reach Redis at REDIS_URL={redacted(url)} ({exc}); start that Redis or fix "
            "the URL, or unset REDIS_URL to use the embedded one"
        ) from exc
