"""Pages every deployment has: the front page and the health check."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("chat:index")
    return render(
        request,
        "core/home.html",
        {
            "model_id": settings.PARLEY_MODEL_ID,
            "base_model": settings.BASE_MODEL_DIR.name,
            "signup_open": settings.SIGNUP_OPEN,
        },
    )


def healthz(request: HttpRequest) -> JsonResponse:
    """200 when this web process can reach its database; load balancers poll it."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means "not healthy"
        return JsonResponse({"status": "error", "database": type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})
