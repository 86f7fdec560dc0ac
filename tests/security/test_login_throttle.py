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
