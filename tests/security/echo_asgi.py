"""A websocket echo application for tests that check what the server itself refuses."""

from __future__ import annotations

from typing import Any


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "websocket":
        return
    while True:
        event = await receive()
        if event["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif event["type"] == "websocket.receive":
            await send({"type": "websocket.send", "text": f"got {len(event.get('text') or '')}"})
        else:
            return
