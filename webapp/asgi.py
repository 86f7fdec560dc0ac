"""ASGI entry point: HTTP through Django (the /v1 API through its own lean handler),
websockets through Channels."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - needs Django set up

from webapp.api.asgi import ApiHandler, is_api_path  # noqa: E402
from webapp.core.origin import SameOriginValidator  # noqa: E402
from webapp.routing import websocket_urlpatterns  # noqa: E402

api_asgi_app = ApiHandler()


async def http_application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    app = api_asgi_app if is_api_path(scope["path"]) else django_asgi_app
    await app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_application,
        # Only the site's own origin (scheme, host and port) may open a socket.
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
