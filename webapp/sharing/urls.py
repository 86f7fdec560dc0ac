"""The owner's side: export a conversation, make its share link, revoke a link."""

from __future__ import annotations

from django.urls import path

from webapp.sharing import views

app_name = "sharing"
urlpatterns = [
    path("conversations/<int:pk>/export.md", views.export_markdown, name="export_markdown"),
    path("conversations/<int:pk>/export.json", views.export_json, name="export_json"),
    path("conversations/<int:pk>/link/", views.share, name="share"),
    path("links/<int:pk>/revoke/", views.revoke, name="revoke"),
]
