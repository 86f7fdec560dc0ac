"""The chat websocket accepts only the site's own origin: same scheme, host and port."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from webapp.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


async def _connects(owned, *, host: bytes | None, origin: bytes, extra=()) -> bool:
    client = Client()
    await database_sync_to_async(client.force_login)(owned.user)
    headers = [(b"origin", origin), *extra]
    if host is not None:
        headers.append((b"host", host))
    headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    socket = WebsocketCommunicator(
        application, f"/ws/chat/{owned.conversation.pk}/", headers=headers
    )
    connected, _ = await socket.connect()
    await socket.disconnect()
    return connected


@pytest.mark.parametrize(
    ("host", "origin", "accepted"),
    [
        (b"127.0.0.1:8000", b"http://127.0.0.1:8000", True),
        (b"localhost:8000", b"http://localhost:8000", True),
        (b"testserver", b"http://testserver", True),
        # Another port on the same host is another site (any local web page could be there).
        (b"127.0.0.1:8000", b"http://127.0.0.1:9999", False),
        (b"127.0.0.1:8000", b"http://127.0.0.1", False),
        (b"localhost:8000", b"http://localhost:3000", False),
        (b"testserver", b"http://testserver:8080", False),
        # Another host name for the same machine, or another scheme, is another origin too.
        (b"127.0.0.1:8000", b"http://localhost:8000", False),
        (b"127.0.0.1:8000", b"https://127.0.0.1:8000", False),
        # No Host, or a Host the site does not serve: nothing to compare with.
        (None, b"http://testserver", False),
        (b"evil.example", b"http://evil.example", False),
        (b"127.0.0.1:8000", b"null", False),
    ],
)
async def test_only_the_sites_own_origin_may_open_the_socket(alice, host, origin, accepted) -> None:
    assert await _connects(alice, host=host, origin=origin) is accepted


async def test_behind_a_tls_proxy_the_origin_is_https(alice, settings) -> None:
    settings.ALLOWED_HOSTS = ["parley.example.com"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proto = [(b"x-forwarded-proto", b"https")]
    host = b"parley.example.com"
    assert await _connects(alice, host=host, origin=b"https://parley.example.com", extra=proto)
    assert not await _connects(alice, host=host, origin=b"http://parley.example.com", extra=proto)
    assert not await _connects(
        alice, host=host, origin=b"https://parley.example.com:8443", extra=proto
    )


async def test_a_configured_trusted_origin_is_accepted(alice, settings) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://chat.example.org"]
    assert await _connects(alice, host=b"127.0.0.1:8000", origin=b"https://chat.example.org")
