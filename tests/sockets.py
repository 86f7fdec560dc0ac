"""The chat page's websocket, opened in-process as a signed-in browser opens it."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from webapp.asgi import application


async def open_socket(user: Any, conversation_id: int) -> tuple[WebsocketCommunicator, bool, Any]:
    """(socket, connected, close code); ``user=None`` opens it without a session."""
    headers = [(b"host", b"testserver"), (b"origin", b"http://testserver")]
    if user is not None:
        client = Client()
        await database_sync_to_async(client.force_login)(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    socket = WebsocketCommunicator(application, f"/ws/chat/{conversation_id}/", headers=headers)
    connected, code = await socket.connect()
    return socket, connected, code


async def connected_socket(user: Any, conversation_id: int) -> WebsocketCommunicator:
    socket, connected, code = await open_socket(user, conversation_id)
    assert connected, code
    return socket
