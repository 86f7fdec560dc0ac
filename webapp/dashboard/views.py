"""The staff dashboard page, the partial it polls every few seconds, and its JSON data.

Only staff see any of it: anonymous visitors are sent to log in, other users get a 404 (the
same answer as for a page that does not exist, so the dashboard's existence leaks nothing).
``?user=NAME`` narrows every view to that user's lineage (an unknown name is a 404).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from webapp.dashboard.charts import Series, bar_chart, line_chart
from webapp.dashboard.selectors import dashboard_data, dashboard_users

POLL_SECONDS = 5
View = Callable[..., HttpResponse]


def staff_only(view: View) -> View:
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (request.user.is_active and request.user.is_staff):
            raise Http404("No such page")
        return view(request, *args, **kwargs)

    return wrapped


def charts(data: dict[str, Any]) -> dict[str, SafeString]:
    """The dashboard's SVG charts, drawn from exactly the data ``data.json`` returns."""
    reward = data["reward"]["points"]
    feedback = data["feedback_per_day"]
    updates = data["updates"]
    versions = data["versions"]
    update_labels = [f"#{u['update_id']}" for u in updates]
    version_labels = [v["label"] for v in versions]
    return {
        "reward": line_chart(
            f"Reward (judge score, moving average of {data['reward']['window']})",
            [
                Series("score", [p["score"] for p in reward], "#c9d3f2"),
                Series("moving average", [p["moving_average"] for p in reward], "#3558d4"),
            ],
            [p["at"][:10] for p in reward],
        ),
        "feedback": bar_chart(
            "Feedback per day",
            [
                Series("👍", [d["up"] for d in feedback], "#2e8b57"),
                Series("👎", [d["down"] for d in feedback], "#b3261e"),
                Series("comments", [d["comments"] for d in feedback], "#8a6d3b"),
            ],
            [d["day"] for d in feedback],
        ),
        "loss": line_chart(
            "Loss per update (mean over steps)",
            [Series("loss", [u["loss"] for u in updates], "#3558d4")],
            update_labels,
        ),
        "kl": line_chart(
            "KL per update (mean over steps)",
            [Series("KL", [u["kl"] for u in updates], "#7b3fbf")],
            update_labels,
        ),
        "clip_fraction": line_chart(
            "Clip fraction per update (mean over steps)",
            [Series("clip fraction", [u["clip_fraction"] for u in updates], "#d47a35")],
            update_labels,
        ),
        "probe_kl": line_chart(
            "Probe KL per version: its step (gated) and its distance from the base",
            [
                Series("step (KL to its parent)", [v["probe_kl"] for v in versions], "#7b3fbf"),
                Series("from the base", [v["probe_kl_base"] for v in versions], "#d47a35"),
            ],
            version_labels,
        ),
        "probe_ppl": line_chart(
            "Probe perplexity per version",
            [Series("probe ppl", [v["probe_ppl"] for v in versions], "#2e8b57")],
            version_labels,
        ),
    }


def owner_from(request: HttpRequest) -> Any:
    """The user named by ``?user=``, or None (everyone) when it is absent or empty."""
    name = request.GET.get("user", "").strip()
    if not name:
        return None
    return get_object_or_404(get_user_model(), **{get_user_model().USERNAME_FIELD: name})


def _context(request: HttpRequest) -> dict[str, Any]:
    data = dashboard_data(owner=owner_from(request))
    return {"data": data, "charts": charts(data), "poll_seconds": POLL_SECONDS}


@require_GET
@staff_only
def index(request: HttpRequest) -> HttpResponse:
    return render(
        request, "dashboard/index.html", {**_context(request), "users": dashboard_users()}
    )


@require_GET
@staff_only
def panel(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard/_panel.html", _context(request))


@require_GET
@staff_only
def data_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        dashboard_data(owner=owner_from(request)), json_dumps_params={"ensure_ascii": False}
    )
