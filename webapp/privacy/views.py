""" "My data": the user's conversations with what each left in the learning loop, a JSONL
export of everything of theirs, and deleting one conversation. Every lookup is scoped to the
signed-in user; anyone else's conversation answers 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from webapp.chat.selectors import conversation_get_for_user
from webapp.core.admin_helpers import jsonl_response
from webapp.learning.export import export_all
from webapp.privacy.selectors import conversation_footprint, conversations_with_footprint
from webapp.privacy.services import deletion_summary, my_conversation_delete


@login_required
@require_GET
def my_data(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "privacy/my_data.html",
        {"rows": conversations_with_footprint(user=request.user)},
    )


@login_required
@require_GET
def export(request: HttpRequest) -> StreamingHttpResponse:
    stamp = timezone.now().strftime("%Y%m%d")
    return jsonl_response(
        export_all(owner=request.user), f"parley-{request.user.get_username()}-{stamp}"
    )


@login_required
@require_http_methods(["GET", "POST"])
def conversation_delete(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    if request.method == "GET":
        return render(
            request,
            "privacy/confirm_delete.html",
            {
                "conversation": conversation,
                "footprint": conversation_footprint(conversation=conversation),
            },
        )
    title = str(conversation)
    footprint = my_conversation_delete(conversation=conversation, actor=request.user, via="My data")
    messages.success(request, f"Deleted “{title}”: {deletion_summary(footprint)}")
    return redirect("privacy:my_data")
