"""Settings pages under /settings/ beside the settings page itself (named ``settings`` in
webapp/urls.py): the password change, by Django's own views in Parley's templates. The names
are Django's own, so its views find each other."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

urlpatterns = [
    path(
        "password/",
        auth_views.PasswordChangeView.as_view(template_name="account/password_change.html"),
        name="password_change",
    ),
    path(
        "password/done/",
        auth_views.PasswordChangeDoneView.as_view(
            template_name="account/password_change_done.html"
        ),
        name="password_change_done",
    ),
]
