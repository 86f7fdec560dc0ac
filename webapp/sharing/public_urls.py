"""The public side: a share link's read-only page, which needs no login."""

from __future__ import annotations

from django.urls import path

from webapp.sharing import views

app_name = "shared"
urlpatterns = [
    path("<str:token>/", views.shared_conversation, name="conversation"),
]
