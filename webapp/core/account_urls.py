from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.core import accounts

urlpatterns = [
    path("login/", accounts.throttled_login(accounts.ParleyLoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("signup/", accounts.signup, name="signup"),
]
