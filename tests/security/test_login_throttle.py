"""Log-in is rate-limited per username and address: guessing stops after 10 failures."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.urls import reverse

pytestmark = [pytest.mark.django_db, pytest.mark.services]


ADDRESSES = ("10.0.0.1", "10.0.0.2")


def _clear_counts() -> None:
    from django.test import RequestFactory

    from webapp.core.accounts import login_failures_clear

    # Only this test's counters: the cache may be the Redis that also carries the task queues.
    for username in ("alice", "bob"):
        for address in ADDRESSES:
            request = RequestFactory().post("/", {"username": username}, REMOTE_ADDR=address)
            login_failures_clear(request)


@pytest.fixture(autouse=True)
def fresh_counts(settings):
    """The real cache (Redis under the launcher), with this test's counters cleared."""
    settings.LOGIN_MAX_FAILURES = 10
    settings.LOGIN_FAILURE_WINDOW_S = 15 * 60
    _clear_counts()
    yield
    _clear_counts()


def _login(client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def test_after_ten_failures_even_the_right_password_is_429_with_a_clear_message(
    client, alice
) -> None:
    for _ in range(10):
        response = _login(client, "alice", "not-her-password")
        assert response.status_code == 200
        assert "didn't match" in response.content.decode()
    response = _login(client, "alice", "wonderland-42")
    assert response.status_code == 429
    assert int(response["Retry-After"]) == 15 * 60
    page = response.content.decode()
    assert "Too many failed log-in attempts" in page and "15 minutes" in page
    assert "_auth_user_id" not in client.session
    # Usernames are counted case-insensitively: "ALICE" is the same account.
    assert _login(client, "ALICE", "wonderland-42").status_code == 429


def test_the_lock_is_per_username_and_address(client, alice, bob) -> None:
    for _ in range(10):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "wonderland-42").status_code == 429
    # Bob from the same address, and Alice from another one, are not locked out.
    assert _login(client, "bob", "builder-4242").status_code == 302
    client.logout()
    assert _login(client, "alice", "wonderland-42", address="10.0.0.2").status_code == 302


def test_a_successful_log_in_clears_the_count(client, alice) -> None:
    for _ in range(9):
        _login(client, "alice", "wrong")
    assert _login(client, "alice", "wonderland-42").status_code == 302
    client.logout()
    for _ in range(9):
        assert _login(client, "alice", "wrong").status_code == 200
    assert _login(client, "alice", "wonderland-42").status_code == 302


def test_the_window_expires(client, alice, settings) -> None:
    from django.test import RequestFactory

    from webapp.core.accounts import login_failure_record

    settings.LOGIN_FAILURE_WINDOW_S = 3
    # Recorded directly: ten real failed log-ins (each hashes a password) outlast 3 s here.
    failed = RequestFactory().post("/", {"username": "alice"}, REMOTE_ADDR="10.0.0.1")
    for _ in range(10):
        login_failure_record(failed)
    assert _login(client, "alice", "wonderland-42").status_code == 429
    time.sleep(3.5)
    assert _login(client, "alice", "wonderland-42").status_code == 302


@pytest.mark.redis
def test_counts_are_shared_through_redis_under_the_launcher(settings) -> None:
    if not settings.REDIS_URL:
        pytest.skip("no Redis: each process counts for itself")
    assert settings.CACHES["default"]["BACKEND"].endswith("RedisCache")
    cache.set("probe", 1)
    import redis

    assert any(b"probe" in k for k in redis.Redis.from_url(settings.REDIS_URL).keys("parley*"))


def test_an_unreachable_cache_does_not_lock_anyone_out(client, alice, settings, tmp_path) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{tmp_path}/nothing-listens.sock",
        }
    }
    assert _login(client, "alice", "wrong").status_code == 200
    assert _login(client, "alice", "wonderland-42").status_code == 302


# --- Walk-arounds: a forged address, a look-alike username, the admin's door ---------------


def test_a_forged_forwarded_for_does_not_change_the_address(client, alice, settings) -> None:
    """No proxy configured (embedded mode): X-Forwarded-For is the client's word, not an address."""
    settings.TRUSTED_PROXIES = []
    for n in range(12):
        response = client.post(
            reverse("login"),
            {"username": "alice", "password": "wrong"},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}",
        )
    assert response.status_code == 429


def test_behind_a_configured_proxy_the_address_it_saw_is_used(client, alice, bob, settings) -> None:
    from django.test import RequestFactory

    from webapp.core.net import client_address

    settings.TRUSTED_PROXIES = ["10.0.0.0/30"]

    def seen(remote: str, forwarded: str) -> str:
        request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
        return client_address(request)

    # The proxy appends the address it saw; anything before it is the client's own claim.
    assert seen("10.0.0.1", "203.0.113.5") == "203.0.113.5"
    assert seen("10.0.0.1", "1.2.3.4, 203.0.113.5") == "203.0.113.5"
    assert seen("10.0.0.1", "203.0.113.5, 10.0.0.2") == "203.0.113.5"  # two proxies
    assert seen("10.0.0.1", "not an address") == "10.0.0.1"
    assert seen("10.0.0.1", "") == "10.0.0.1"
    # A peer that is not a configured proxy cannot choose its address.
    assert seen("192.0.2.9", "203.0.113.5") == "192.0.2.9"
    # Twelve failures through the proxy, each claiming another address: still one client.
    for n in range(12):
        response = client.post(
            reverse("login"),
            {"username": "bob", "password": "wrong"},
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{n}, 203.0.113.5",
        )
    assert response.status_code == 429
    _forget(("bob",), ("203.0.113.5",), proxy="10.0.0.1", settings=settings)


def _forget(usernames, addresses, *, proxy: str, settings) -> None:
    from django.test import RequestFactory

    from webapp.core.accounts import login_failures_clear

    for username in usernames:
        for address in addresses:
            login_failures_clear(
                RequestFactory().post(
                    "/", {"username": username}, REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR=address
                )
            )


def test_daphne_is_never_told_to_trust_forwarded_headers() -> None:
    """Daphne's --proxy-headers trusts X-Forwarded-For from anyone; Parley decides instead."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for procfile in ("Procfile", "Procfile.noserve"):
        assert "--proxy-headers" not in (root / procfile).read_text(), procfile
    spec = importlib.util.spec_from_file_location("entrypoint", root / "docker" / "entrypoint.py")
    assert spec is not None and spec.loader is not None
    entrypoint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entrypoint)
    assert "--proxy-headers" not in entrypoint.web_command({"PARLEY_PORT": "8000"})


def test_the_throttle_counts_the_username_as_log_in_normalises_it(client, alice) -> None:
    for _ in range(10):
        _login(client, "alice", "wrong")
    # Fullwidth "ａ" is "a" after NFKC, as the log-in form reads it; the spaces are stripped.
    assert _login(client, "\uff41lice", "wonderland-42").status_code == 429
    assert _login(client, "  alice ", "wonderland-42").status_code == 429


def test_the_admin_log_in_is_throttled_the_same_way(client, alice) -> None:
    for _ in range(10):
        response = client.post(
            "/admin/login/", {"username": "alice", "password": "wrong"}, REMOTE_ADDR="10.0.0.1"
        )
        assert response.status_code == 200
    response = client.post(
        "/admin/login/", {"username": "alice", "password": "wonderland-42"}, REMOTE_ADDR="10.0.0.1"
    )
    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()
    # One count for both doors: the main log-in is locked too.
    assert _login(client, "alice", "wonderland-42").status_code == 429
