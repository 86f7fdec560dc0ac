"""Static files through WhiteNoise, without putting every other request through a thread.

WhiteNoise's middleware is synchronous, so under ASGI Django would run it in a worker thread
and hop back to the event loop for the rest of the chain on *every* request — the streamed
``/v1`` answers and the chat included. This subclass is asynchronous: a path under
``STATIC_URL`` is served by WhiteNoise (its file lookup and headers, unchanged), anything else
goes straight on to the next middleware on the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]) -> None:
        super().__init__(get_response)
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:  # type: ignore[override]
        if request.path_info.startswith(self.static_prefix):
            if self.autorefresh:  # development: the file system is checked on each request
                static_file = await sync_to_async(self.find_file)(request.path_info)
            else:
                static_file = self.files.get(request.path_info)
            if static_file is not None:
                return self.serve(static_file, request)
        return await self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """Adds ``CONTENT_SECURITY_POLICY`` to every response that has none: scripts, styles and
    connections from the site itself only, so an injected ``<script>`` or ``on...=`` does not
    run. The templates carry no inline script or style (``tests/security/test_csp.py``)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]) -> None:
        from django.conf import settings

        self.get_response = get_response
        self.policy = settings.CONTENT_SECURITY_POLICY
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = await self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response
