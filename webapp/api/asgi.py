"""The /v1 API's own Django handler: the site's URLs and views, none of its sync middleware.

Under ASGI, Django runs each hook of a sync-capable middleware (sessions, CSRF, messages,
common, clickjacking…) in a worker thread and hops back to the event loop afterwards: five hops
on the way in and six on the way out, each a handover to the request's thread and back. With eight
streams arriving together, those hops held the first request back from vLLM by 10–20 ms, and
every other stream's first token waits on the first one's engine step. The API uses none of
what they provide (it authenticates with Bearer keys, is CSRF-exempt and sends no HTML), so
its chain is the security middleware alone, run on the event loop: it does no I/O.

Django also gives every request a thread of its own for its synchronous work, started on the
event loop when the request begins; a burst of eight then starts eight threads before the first
one reaches the model. API requests share one long-lived thread instead (asgiref's thread for
thread-sensitive code): their synchronous work is short database writes, never a view.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponseBase
from django.middleware.security import SecurityMiddleware

API_PREFIX = "/v1"


def is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


class ApiHandler(ASGIHandler):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"The API serves HTTP only, not {scope['type']}.")
        await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        get_response = convert_exception_to_response(self._get_response_async)
        security = SecurityMiddleware(get_response)

        async def chain(request: HttpRequest) -> HttpResponseBase:
            response = security.process_request(request) or await get_response(request)
            return security.process_response(request, response)

        self._middleware_chain = chain
