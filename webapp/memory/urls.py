from __future__ import annotations

from django.urls import path

from webapp.memory import views

app_name = "memory"
urlpatterns = [
    path("", views.memory_page, name="index"),
    path("add/", views.memory_add, name="add"),
    # edit, pause, resume, delete; keep or dismiss a proposal (views.ACTIONS)
    path("<int:pk>/<slug:action>/", views.memory_change, name="change"),
]
