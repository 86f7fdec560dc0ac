"""/v1 goes through its own handler: the site's views and URLs, no thread hops for middleware."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import SyncToAsync

from webapp.api.asgi import is_api_path
from webapp.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    """The name of every function run in a worker thread through ``sync_to_async``."""
    names: list[str] = []
    real = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        names.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return names


async def _get(path: str, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        return await client.get(path, headers=headers)


def test_only_paths_under_v1_are_the_apis() -> None:
    assert is_api_path("/v1/chat/completions") and is_api_path("/v1")
    assert not is_api_path("/v1x/models") and not is_api_path("/chat/v1/")


async def test_an_api_request_runs_no_middleware_in_threads(hops) -> None:
    response = await _get("/v1/openapi.json")
    assert response.status_code == 200 and response.json()["openapi"].startswith("3.")
    # Besides the (sync) view itself, only Django's own request start and end (database
    # connection upkeep) run in a thread.
    assert hops == ["Signal.asend.<locals>.sync_send", "openapi_json", "HttpResponseBase.close"]


async def test_api_errors_keep_the_security_headers_and_set_no_cookies() -> None:
    response = await _get("/v1/models")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "set-cookie" not in response.headers


async def test_the_site_keeps_its_whole_middleware_chain(hops) -> None:
    response = await _get("/")
    assert response.status_code == 200 and "text/html" in response.headers["Content-Type"]
    assert response.headers["X-Frame-Options"] == "DENY"
    assert len(hops) > 5, hops
