"""Settings → API keys: create (the secret is shown once), list by prefix, revoke, and whether
each key's requests are given the owner's memories (a switch htmx posts on change; a plain form
without JavaScript)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.api.keys import (
    ApiKeyLimitReached,
    api_key_create,
    api_key_get_for_user,
    api_key_list_for_user,
    api_key_revoke,
    api_key_set_serves_memory,
)


@login_required
def key_list(request: HttpRequest) -> HttpResponse:
    secret = error = None
    if request.method == "POST":
        name = request.POST.get("name", "").strip()[:100]
        try:
            _, secret = api_key_create(owner=request.user, name=name)
        except ApiKeyLimitReached as exc:
            error = str(exc)
    return render(
        request,
        "api/keys.html",
        {
            "keys": api_key_list_for_user(user=request.user),
            "new_secret": secret,
            "error": error,
            "base_url": request.build_absolute_uri("/v1"),
        },
    )


@login_required
@require_POST
def key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    api_key_revoke(key=api_key_get_for_user(user=request.user, pk=pk))
    return redirect("api_keys")


@login_required
@require_POST
def key_serves_memory(request: HttpRequest, pk: int) -> HttpResponse:
    key = api_key_get_for_user(user=request.user, pk=pk)
    # An unticked box is simply absent: off.
    key = api_key_set_serves_memory(key=key, serves=request.POST.get("serves_memory") == "on")
    if request.htmx:
        return render(request, "api/_key_memory.html", {"key": key})
    return redirect("api_keys")
