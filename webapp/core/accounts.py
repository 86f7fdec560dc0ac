"""Accounts: log in, and sign up where the deployment allows it (``PARLEY_SIGNUP_OPEN``).

Sign-up makes ordinary users only; the admin is the account ``make run`` creates.

Log-in is throttled: after ``LOGIN_MAX_FAILURES`` failed attempts for one username from one
address within ``LOGIN_FAILURE_WINDOW_S``, every attempt for that pair (even with the right
password, so guessing learns nothing) answers 429 until the window ends. Every door counts
together: the site's log-in page and the admin's (``throttled_login`` wraps both). The
username is counted as the log-in form reads it (stripped, NFKC-normalised, so "ａdmin" is
"admin"), and case-folded; the address is the client's as ``webapp.core.net`` tells it, which a
forged X-Forwarded-For cannot change. Counts live in the cache, which is Redis when there is
one, so every web replica shares them. If the cache cannot be reached, log-in works
unthrottled rather than not at all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm, UsernameField
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from webapp.core.net import client_address

log = logging.getLogger(__name__)

View = Callable[..., HttpResponse]


def login_username(raw: str) -> str:
    """The username as authentication reads it (UsernameField: strip, NFKC), case-folded."""
    return str(UsernameField().to_python(raw) or "").casefold()


def _throttle_key(request: HttpRequest) -> str:
    username = login_username(request.POST.get("username", ""))
    address = client_address(request)
    digest = hashlib.sha256(f"{username}\0{address}".encode()).hexdigest()
    return f"login-failures:{digest}"


def login_failures(request: HttpRequest) -> int:
    try:
        return int(cache.get(_throttle_key(request), 0))
    except Exception:  # a cache outage must not lock everyone out
        log.warning("login throttle unavailable; not counting", exc_info=True)
        return 0


def login_failure_record(request: HttpRequest) -> None:
    key = _throttle_key(request)
    try:
        # The window starts at the first failure (add is a no-op when the key exists).
        cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW_S)
        cache.incr(key)
    except Exception:
        log.warning("login throttle unavailable; not counting", exc_info=True)


def login_failures_clear(request: HttpRequest) -> None:
    try:
        cache.delete(_throttle_key(request))
    except Exception:
        log.warning("login throttle unavailable", exc_info=True)


def _locked_out(request: HttpRequest) -> HttpResponse:
    minutes = max(1, settings.LOGIN_FAILURE_WINDOW_S // 60)
    response = render(
        request,
        "registration/login.html",
        {
            "form": AuthenticationForm(request, initial={"username": request.POST.get("username")}),
            "throttled": (
                "Too many failed log-in attempts for this account from your address. "
                f"Please wait up to {minutes} minutes and try again."
            ),
            "signup_open": settings.SIGNUP_OPEN,
        },
        status=429,
    )
    response["Retry-After"] = str(settings.LOGIN_FAILURE_WINDOW_S)
    return response


def throttled_login(view: View) -> View:
    """Wrap a log-in view: a locked-out pair gets 429 (the password is not even checked); a
    POST that leaves the request anonymous counts as a failure, a log-in clears the count."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "POST":
            return view(request, *args, **kwargs)
        if login_failures(request) >= settings.LOGIN_MAX_FAILURES:
            return _locked_out(request)
        response = view(request, *args, **kwargs)
        if request.user.is_authenticated:
            login_failures_clear(request)
        else:
            login_failure_record(request)
        return response

    return wrapper


class ParleyLoginView(LoginView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "signup_open": settings.SIGNUP_OPEN}


def signup(request: HttpRequest) -> HttpResponse:
    if not settings.SIGNUP_OPEN:
        raise Http404("Sign-up is closed here: ask an admin for an account.")
    if request.user.is_authenticated:
        return redirect("chat:index")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat:index")
    return render(
        request,
        "registration/signup.html",
        {"form": form, "password_min_length": settings.PASSWORD_MIN_LENGTH},
    )
