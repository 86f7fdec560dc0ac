from __future__ import annotations

from django.urls import path

from webapp.privacy import views

app_name = "privacy"
urlpatterns = [
    path("data/", views.my_data, name="my_data"),
    path("data/export.jsonl", views.export, name="export"),
    path("data/conversations/<int:pk>/delete/", views.conversation_delete, name="delete"),
]
