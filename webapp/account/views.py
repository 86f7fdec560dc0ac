"""Settings: the person's account (their password, through Django's own views), the training
default of their new conversations, how their chat answers are sampled, and the links they
shared. Everything shown and saved is the signed-in person's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from webapp.account.forms import AccountSettingsForm
from webapp.account.selectors import account_settings_for, answer_settings_of
from webapp.account.services import account_settings_update

SAVED = "Settings saved. New conversations and answers follow them."


@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest, share_links_for_owner: Callable[..., Any]) -> HttpResponse:
    """``share_links_for_owner``: the sharing app's selector, handed over by webapp/urls.py,
    since the chat below sharing reads this app's settings."""
    row = account_settings_for(user=request.user)
    form = AccountSettingsForm(
        request.POST if request.method == "POST" else None,
        train_consent_default=row.train_consent_default,
        answers=answer_settings_of(temperature=row.temperature, max_tokens=row.max_tokens),
    )
    if form.is_bound and form.is_valid():
        account_settings_update(user=request.user, **form.cleaned_data)
        messages.success(request, SAVED)
        return redirect("settings")
    return render(
        request,
        "account/settings.html",
        {"form": form, "share_links": share_links_for_owner(owner=request.user)},
        status=400 if form.is_bound else 200,
    )
