"""The front page, the health check and the first admin account, on real PostgreSQL."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_healthz_reports_the_database(client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_front_page_offers_login_to_visitors(client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert b"Log in" in response.content


def test_ensure_admin_creates_one_admin_once_and_prints_the_password(
    settings, tmp_path, monkeypatch
) -> None:
    settings.VAR_DIR = tmp_path
    for name in (
        "DJANGO_SUPERUSER_USERNAME",
        "DJANGO_SUPERUSER_PASSWORD",
        "DJANGO_SUPERUSER_EMAIL",
    ):
        monkeypatch.delenv(name, raising=False)
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    assert "username 'admin', password '" in out.getvalue()
    password = out.getvalue().split("password '")[1].split("'")[0]
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    assert password in (tmp_path / "admin.txt").read_text()

    again = StringIO()
    call_command("ensure_admin", stdout=again)
    assert again.getvalue() == ""
    assert get_user_model().objects.filter(is_superuser=True).count() == 1


def test_ensure_admin_takes_the_account_from_the_environment(
    settings, tmp_path, monkeypatch
) -> None:
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "boss")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "correct horse battery")
    call_command("ensure_admin", stdout=StringIO())
    assert get_user_model().objects.get(username="boss").check_password("correct horse battery")


@pytest.mark.parametrize("client_kind", ["sync", "async"])
async def test_static_files_are_served_with_headers_and_other_paths_pass_through(
    client_kind,
) -> None:
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient, Client

    async def get(path: str):
        if client_kind == "async":
            return await AsyncClient().get(path)
        return await sync_to_async(Client().get)(path)

    response = await get("/static/parley.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    body = b"".join(response.streaming_content)
    assert b"{" in body and "max-age" in response["Cache-Control"]
    assert (await get("/static/no-such-file.css")).status_code == 404
    assert (await get("/healthz")).status_code == 200
