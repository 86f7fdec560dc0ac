""" "My model": the signed-in user's policy lineage, what taught each version, and their say over
it (roll back, reset to the shared model, pause learning). Every lookup is scoped to the user's
own lineage; another user's version answers 404. With ``PARLEY_LEARNING_SCOPE=shared`` the page
shows the shared lineage read-only (only pausing stays: it is about the user's own feedback).

The actions are plain POST forms that redirect back with a message; htmx posts them and swaps
the page's section in place, and without JavaScript they work as ordinary forms.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp.learning.models import PolicyVersion
from webapp.learning.preferences import learning_pause_set, learning_paused
from webapp.learning.progress import learning_progress
from webapp.learning.selectors import policy_version_for, sample_counts
from webapp.learning.workflows.publishing import (
    PublishFailed,
    policy_lineage_reset,
    policy_version_publish,
)
from webapp.memory.models import Memory
from webapp.memory.page import memory_rows
from webapp.mymodel.selectors import (
    lineage_rows,
    samples_not_trained,
    version_get_for_user,
    version_ordinal,
    version_turns,
)


def _personal() -> bool:
    return settings.LEARNING_SCOPE == "user"


@login_required
@require_GET
def my_model(request: HttpRequest) -> HttpResponse:
    rows = lineage_rows(user=request.user)
    serving = policy_version_for(user=request.user)
    return render(
        request,
        "mymodel/my_model.html",
        {
            "personal": _personal(),
            "versions": [r for r in rows if r.version.status != PolicyVersion.Status.REJECTED],
            "refused": [r for r in rows if r.version.status == PolicyVersion.Status.REJECTED],
            "serving": serving,
            "serving_row": next((r for r in rows if r.version.pk == serving.pk), None),
            "paused": learning_paused(user_id=request.user.pk),
            "counts": sample_counts(owner_id=request.user.pk),
            "samples": samples_not_trained(user=request.user),
            "progress": learning_progress(user_id=request.user.pk),
            "memories": memory_rows(owner=request.user, states=(Memory.State.ACTIVE,)),
        },
    )


@login_required
@require_GET
def progress(request: HttpRequest) -> HttpResponse:
    """Where learning stands, as the fragment the chat page swaps in over its composer
    (``?on=chat``) or as on My model's first screen."""
    place = "chat" if request.GET.get("on") == "chat" else "page"
    return render(
        request,
        "mymodel/_progress.html",
        {"progress": learning_progress(user_id=request.user.pk), "place": place},
    )


@login_required
@require_GET
def version_detail(request: HttpRequest, pk: int) -> HttpResponse:
    version = version_get_for_user(user=request.user, pk=pk)
    return render(
        request,
        "mymodel/version.html",
        {
            "version": version,
            "ordinal": version_ordinal(version),
            "turns": version_turns(version=version, user=request.user),
            "personal": _personal(),
        },
    )


@login_required
@require_POST
def version_roll_back(request: HttpRequest, pk: int) -> HttpResponse:
    version = version_get_for_user(user=request.user, pk=pk)
    label = f"v{version_ordinal(version)} ({version.label})"
    if not _personal():
        messages.error(request, "Learning is shared: only an administrator can change it.")
    elif version.status not in (PolicyVersion.Status.RETIRED, PolicyVersion.Status.ROLLED_BACK):
        messages.error(request, f"{label} is {version.get_status_display().lower()}: nothing done.")
    else:
        try:
            policy_version_publish(version=version)
        except PublishFailed as exc:
            messages.error(request, f"Not rolled back: {exc}")
        else:
            messages.success(request, f"Rolled back: {label} answers you from now on.")
    return redirect("mymodel:index")


@login_required
@require_POST
def lineage_reset(request: HttpRequest) -> HttpResponse:
    if not _personal():
        messages.error(request, "Learning is shared: only an administrator can change it.")
        return redirect("mymodel:index")
    was = policy_lineage_reset(owner_id=request.user.pk)
    shared = policy_version_for(user=None)
    if was is None:
        messages.info(request, f"You were already on the shared model ({shared.label}).")
    else:
        messages.success(
            request,
            f"Reset: the shared model ({shared.label}) answers you again; your versions are "
            "kept and your next update starts from it.",
        )
    return redirect("mymodel:index")


@login_required
@require_POST
def learning_pause(request: HttpRequest) -> HttpResponse:
    paused = request.POST.get("paused") == "1"
    learning_pause_set(user=request.user, paused=paused)
    if paused:
        messages.success(
            request,
            "Learning paused: your feedback is still recorded, but nothing is trained on it "
            "until you resume.",
        )
    else:
        messages.success(request, "Learning resumed: your waiting feedback will be trained.")
    return redirect("mymodel:index")
