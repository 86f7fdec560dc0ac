from __future__ import annotations

from django.urls import path

from webapp.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.index, name="index"),
    path("panel/", views.panel, name="panel"),
    path("data.json", views.data_json, name="data"),
]
