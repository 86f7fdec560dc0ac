"""Websockets from the site's own origin only: the same scheme, host and port as the page.

Channels' ``AllowedHostsOriginValidator`` compares only the host name with ``ALLOWED_HOSTS``, so a
page on any port of 127.0.0.1 (another local app, a dev server) could open the chat socket with
the user's cookies. Here the ``Origin`` must equal the origin the request itself was made to:
``http(s)://`` + its ``Host`` (which must be one of ``ALLOWED_HOSTS``), https when the socket is
``wss`` or the TLS proxy says so (``SECURE_PROXY_SSL_HEADER``), as Django's CSRF check decides for
forms. ``CSRF_TRUSTED_ORIGINS`` are accepted too, as they are for forms.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

Scope = dict[str, Any]
Asgi = Callable[[Scope, Any, Any], Awaitable[None]]
DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, default ports filled in; None if it is not one."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin1")
    return None


def _secure(scope: Scope) -> bool:
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        name = meta_name.removeprefix("HTTP_").lower().replace("_", "-").encode()
        forwarded = _header(scope, name)
        if forwarded is not None:
            return forwarded.split(",")[0].strip() == secure_value
    return scope.get("scheme") == "wss"


def site_origin(scope: Scope) -> tuple[str, str, int] | None:
    """The origin a websocket request was made to, or None if its Host is not served here."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _ = split_domain_port(host.lower())
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return _origin(f"{'https' if _secure(scope) else 'http'}://{host}")


def _trusted(origin: tuple[str, str, int], patterns: Iterable[str]) -> bool:
    for pattern in patterns:
        wildcard = "://*." in pattern
        allowed = _origin(pattern.replace("://*.", "://", 1))
        if allowed is None or allowed[0] != origin[0] or allowed[2] != origin[2]:
            continue
        if origin[1] == allowed[1] or (wildcard and is_same_domain(origin[1], "." + allowed[1])):
            return True
    return False


def origin_allowed(scope: Scope) -> bool:
    raw = _header(scope, b"origin")
    origin = _origin(raw) if raw else None
    if origin is None:
        return False
    return origin == site_origin(scope) or _trusted(origin, settings.CSRF_TRUSTED_ORIGINS)


class SameOriginValidator:
    """ASGI middleware for websockets: refuse (close before accept) any other origin."""

    def __init__(self, application: Asgi) -> None:
        self.application = application

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            await WebsocketDenier()(scope, receive, send)
            return
        await self.application(scope, receive, send)
