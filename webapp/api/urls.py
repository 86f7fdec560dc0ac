from __future__ import annotations

from django.urls import URLPattern

app_name = "api"
urlpatterns: list[URLPattern] = []
