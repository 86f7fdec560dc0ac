"""Accounts: log in, and sign up where the deployment allows it (``PARLEY_SIGNUP_OPEN``).

Sign-up makes ordinary users only; the admin is the account ``make run`` creates.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render


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
    return render(request, "registration/signup.html", {"form": form})
