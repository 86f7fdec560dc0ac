from __future__ import annotations

from django.urls import path

from webapp.mymodel import views

app_name = "mymodel"
urlpatterns = [
    path("", views.my_model, name="index"),
    path("progress/", views.progress, name="progress"),
    path("versions/<int:pk>/", views.version_detail, name="version"),
    path("versions/<int:pk>/roll-back/", views.version_roll_back, name="roll_back"),
    path("reset/", views.lineage_reset, name="reset"),
    path("pause/", views.learning_pause, name="pause"),
]
