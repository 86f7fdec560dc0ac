"""A user's adapter files are reachable through no URL, by anybody (issue 16: "A's adapter
files are not reachable by B through any URL"). Adapters live under PARLEY_ADAPTERS_DIR, which
no route serves; B probing every page without arguments, and paths that would reach the
folder, never sees A's adapter bytes or its folder."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from webapp.learning.models import PolicyVersion

pytestmark = [pytest.mark.django_db]

SECRET = b"alice-adapter-weights-7f3a"


def _plain_routes(patterns, prefix: str = "") -> list[str]:
    """Every route of the URL conf that takes no argument."""
    routes = []
    for pattern in patterns:
        text = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes += _plain_routes(pattern.url_patterns, text)
        elif isinstance(pattern, URLPattern) and "<" not in text and "(?P" not in text:
            routes.append("/" + text.lstrip("^").rstrip("$"))
    return routes


def test_no_url_reaches_another_users_adapter_files(client, alice, bob, settings, tmp_path):
    settings.ADAPTERS_DIR = tmp_path / "adapters"
    folder = settings.ADAPTERS_DIR / "v7"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(SECRET)
    PolicyVersion.objects.create(
        number=7, owner=alice.user, adapter_path=str(folder), status=PolicyVersion.Status.LIVE
    )
    client.force_login(bob.user)
    probes = [
        "/adapters/v7/adapter_model.safetensors",
        "/var/adapters/v7/adapter_model.safetensors",
        "/static/../adapters/v7/adapter_model.safetensors",
        "/static/..%2Fadapters/v7/adapter_model.safetensors",
        "/media/adapters/v7/adapter_model.safetensors",
    ]
    for path in probes:
        assert client.get(path).status_code == 404, path
    routes = _plain_routes(get_resolver().url_patterns)
    assert len(routes) > 10  # the walk found the site's pages
    for route in routes:
        response = client.get(route)
        body = b"".join(response) if response.streaming else response.content
        assert SECRET not in body, route
        assert str(folder).encode() not in body, route
