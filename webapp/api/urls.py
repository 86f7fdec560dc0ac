from __future__ import annotations

from django.urls import path, re_path

from webapp.api import openapi, views

app_name = "api"
urlpatterns = [
    path("models", views.models, name="models"),
    path("chat/completions", views.chat_completions, name="chat_completions"),
    path("feedback", views.feedback, name="feedback"),
    path("memories", views.memories, name="memories"),
    path("memories/<str:memory_id>", views.memory, name="memory"),
    path("openapi.json", openapi.openapi_json, name="openapi"),
    re_path(r"^(?P<path>.*)$", views.not_found),
]
