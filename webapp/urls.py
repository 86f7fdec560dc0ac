from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from webapp.core import views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("webapp.core.account_urls")),
    path("chat/", include("webapp.chat.urls")),
    path("v1/", include("webapp.api.urls")),
    path("admin/", admin.site.urls),
]
