from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from webapp.account import views as account_views
from webapp.api import key_views
from webapp.core import views
from webapp.core.accounts import throttled_login
from webapp.sharing.selectors import share_links_for_owner

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("webapp.core.account_urls")),
    path("chat/", include("webapp.frontdoor.urls")),
    path("v1/", include("webapp.api.urls")),
    # Settings lists the person's share links; the chat below sharing reads account's settings,
    # so sharing's selector is handed to the page here rather than imported by it.
    path(
        "settings/",
        account_views.settings_page,
        {"share_links_for_owner": share_links_for_owner},
        name="settings",
    ),
    path("settings/", include("webapp.account.urls")),
    path("settings/api-keys/", key_views.key_list, name="api_keys"),
    path("settings/api-keys/<int:pk>/revoke", key_views.key_revoke, name="api_key_revoke"),
    path("settings/api-keys/<int:pk>/memory", key_views.key_serves_memory, name="api_key_memory"),
    path("dashboard/", include("webapp.dashboard.urls")),
    path("me/", include("webapp.privacy.urls")),
    path("me/model/", include("webapp.mymodel.urls")),
    path("memory/", include("webapp.memory.urls")),
    path("share/", include("webapp.sharing.urls")),
    path("s/", include("webapp.sharing.public_urls")),
    # The admin's log-in door is throttled like the site's (same counts).
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
]
