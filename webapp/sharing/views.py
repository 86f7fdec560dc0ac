"""Export one conversation, share it read-only by a link, revoke the link; and the link's page.

The owner's endpoints look the conversation or link up through selectors scoped to the
signed-in user, so anyone else's ids answer 404. The public page needs no login: its token is
the whole permission, and it shows that one conversation and nothing else of its owner.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from webapp.chat.models import Conversation
from webapp.chat.selectors import conversation_get_for_user, transcript
from webapp.sharing import export
from webapp.sharing.selectors import (
    share_link_get_for_owner,
    share_link_live,
    share_links_for_owner,
)
from webapp.sharing.services import share_link_create, share_link_revoke

FORMATS = {
    "md": (export.as_markdown, "text/markdown; charset=utf-8"),
    "json": (export.as_json, "application/json; charset=utf-8"),
}


def _download(request: HttpRequest, pk: int, extension: str) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    write, content_type = FORMATS[extension]
    entries = transcript(conversation=conversation, viewer=request.user)
    response = HttpResponse(
        write(conversation=conversation, entries=entries), content_type=content_type
    )
    response["Content-Disposition"] = export.attachment(conversation, extension)
    return response


@login_required
@require_GET
def export_markdown(request: HttpRequest, pk: int) -> HttpResponse:
    return _download(request, pk, "md")


@login_required
@require_GET
def export_json(request: HttpRequest, pk: int) -> HttpResponse:
    return _download(request, pk, "json")


def _panel(request: HttpRequest, conversation: Conversation, **context: object) -> HttpResponse:
    """The share panel under the conversation's header, or (no htmx) a page around it."""
    template = "sharing/_share_panel.html" if request.htmx else "sharing/share.html"
    return render(request, template, {"current": conversation, **context})


@login_required
@require_POST
def share(request: HttpRequest, pk: int) -> HttpResponse:
    """ "Share…": the conversation's live link, made on the first click."""
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    return _panel(request, conversation, link=share_link_create(conversation=conversation))


@login_required
@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke a link from the share panel, or from the list in Settings (``where=settings``)."""
    link = share_link_revoke(link=share_link_get_for_owner(owner=request.user, pk=pk))
    if request.POST.get("where") == "settings":
        if request.htmx:
            return render(
                request,
                "sharing/_settings_links.html",
                {"share_links": share_links_for_owner(owner=request.user)},
            )
        back = request.POST.get("next", "")
        if url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
            return redirect(back)
    return _panel(request, link.conversation, link=None, revoked=link)


@never_cache
@require_GET
def shared_conversation(request: HttpRequest, token: str) -> HttpResponse:
    """The conversation behind a live link, read-only, as it is when the page is read."""
    link = share_link_live(token=token)
    response = render(
        request,
        "sharing/shared.html",
        {"conversation": link.conversation, "entries": transcript(conversation=link.conversation)},
    )
    # Not for search engines, and the token never leaves in a Referer header when a reader
    # follows a link inside an answer.
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Referrer-Policy"] = "no-referrer"
    return response
