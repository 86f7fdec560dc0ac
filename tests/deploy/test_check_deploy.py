"""Production security defaults: `manage.py check --deploy` is clean with production settings,
while embedded mode (one person, http://127.0.0.1) keeps plain http working.

Each case runs Django in a subprocess with its own environment, because the settings are read
once from the environment at import.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# Variables this file sets or clears itself; everything else is inherited (PATH, PYTHONPATH...).
CONTROLLED = (
    "PARLEY_EMBEDDED",
    "DJANGO_DEBUG",
    "DJANGO_HTTPS",
    "DJANGO_SECURE_COOKIES",
    "DJANGO_SECURE_SSL_REDIRECT",
    "DJANGO_SECURE_HSTS_SECONDS",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "DJANGO_SECURE_HSTS_PRELOAD",
    "DJANGO_ALLOWED_HOSTS",
    "DJANGO_CSRF_TRUSTED_ORIGINS",
    "DJANGO_SECRET_KEY",
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "DJANGO_SETTINGS_MODULE",
)


def production_env(tmp_path, **overrides: str) -> dict[str, str]:
    """As docker/.env sets it: real-looking URLs (nothing listens there), a strong key."""
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    env.update(
        DJANGO_SETTINGS_MODULE="webapp.settings",
        # Port 1 on loopback refuses at once, so a stray query fails fast instead of hanging.
        DATABASE_URL="postgres://parley:not-a-real-password@127.0.0.1:1/parley",
        REDIS_URL="redis://:not-a-real-password@127.0.0.1:1/0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="parley.example.com",
        DJANGO_CSRF_TRUSTED_ORIGINS="https://parley.example.com",
        PARLEY_VAR_DIR=str(tmp_path / "var"),
    )
    env.update(overrides)
    return env


def django_eval(env: dict[str, str], code: str) -> dict:
    """Run code after django.setup(); it must print one JSON object as its last line."""
    script = f"import django, json\ndjango.setup()\nfrom django.conf import settings\n{code}"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


SECURITY = """
print(json.dumps({
    "debug": settings.DEBUG,
    "ssl_redirect": settings.SECURE_SSL_REDIRECT,
    "hsts": settings.SECURE_HSTS_SECONDS,
    "proxy_header": settings.SECURE_PROXY_SSL_HEADER,
    "secure_cookies": [settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE],
}))
"""


def test_check_deploy_passes_with_production_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_defaults_are_https_only_and_debug_off(tmp_path):
    figures = django_eval(production_env(tmp_path), SECURITY)
    assert figures["debug"] is False
    assert figures["ssl_redirect"] is True
    assert figures["hsts"] >= 31_536_000
    assert figures["proxy_header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert figures["secure_cookies"] == [True, True]


def test_production_redirects_http_but_not_the_health_check(tmp_path):
    figures = django_eval(
        production_env(tmp_path),
        """
from django.test import Client
client = Client(HTTP_HOST="parley.example.com")
home = client.get("/")
proxied = client.get("/", HTTP_X_FORWARDED_PROTO="https")
health = client.get("/healthz")
print(json.dumps({
    "home": [home.status_code, home.headers.get("Location", "")],
    "proxied": [proxied.status_code, proxied.headers.get("Strict-Transport-Security", "")],
    "health": health.status_code,
}))
""",
    )
    assert figures["home"] == [301, "https://parley.example.com/"]
    status, hsts = figures["proxied"]
    assert status == 200 and "max-age=31536000" in hsts
    # Not redirected: answered by the view itself (503: nothing listens at the dummy database).
    assert figures["health"] == 503


@pytest.mark.parametrize(
    "overrides",
    [{"PARLEY_EMBEDDED": "1"}, {"DJANGO_DEBUG": "1"}, {"DJANGO_HTTPS": "0"}],
    ids=["embedded", "debug", "https-off"],
)
def test_plain_http_keeps_working_outside_production(tmp_path, overrides):
    figures = django_eval(production_env(tmp_path, **overrides), SECURITY)
    assert figures["ssl_redirect"] is False
    assert figures["hsts"] == 0
    assert figures["proxy_header"] is None
    assert figures["secure_cookies"] == [False, False]
