from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from webapp.api import key_views
from webapp.core import views
from webapp.core.accounts import throttled_login

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("webapp.core.account_urls")),
    path("chat/", include("webapp.frontdoor.urls")),
    path("v1/", include("webapp.api.urls")),
    path("settings/api-keys/", key_views.key_list, name="api_keys"),
    path("settings/api-keys/<int:pk>/revoke", key_views.key_revoke, name="api_key_revoke"),
    path("settings/api-keys/<int:pk>/memory", key_views.key_serves_memory, name="api_key_memory"),
    path("dashboard/", include("webapp.dashboard.urls")),
    path("me/", include("webapp.privacy.urls")),
    path("me/model/", include("webapp.mymodel.urls")),
    path("memory/", include("webapp.memory.urls")),
    # The admin's log-in door is throttled like the site's (same counts).
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
]
