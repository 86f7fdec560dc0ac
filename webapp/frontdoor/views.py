"""The chat pages and the small htmx endpoints behind their buttons.

Every endpoint looks its conversation or message up through the selectors, which are scoped
to the signed-in user: anyone else's ids answer 404. Each endpoint returns the fragment it
changed when htmx asks, and redirects back to the page otherwise, so the page also works
without JavaScript (except streaming, which needs the websocket).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from webapp.chat import services
from webapp.chat.feedback import feedback_rate, feedback_set, feedback_toggle_tag
from webapp.chat.feedback_spec import FIELDS, FeedbackInvalid
from webapp.chat.models import Conversation, Message
from webapp.chat.search import conversation_search
from webapp.chat.selectors import (
    conversation_get_for_user,
    conversation_list_for_user,
    message_get_for_user,
)
from webapp.frontdoor import fragments
from webapp.frontdoor.forms import (
    ConversationStartForm,
    FeedbackForm,
    RenameForm,
    TrainConsentForm,
)
from webapp.frontdoor.generations import answers_settle
from webapp.frontdoor.selectors import page_transcript
from webapp.learning.comparisons import ComparisonInvalid, alternatives_of, comparison_choose


def _page_context(request: HttpRequest, current: Conversation | None = None) -> dict[str, object]:
    return {
        "conversations": conversation_list_for_user(user=request.user),
        "current": current,
        "suggestions": fragments.FIRST_MESSAGES,
        **fragments.feedback_context(),
    }


def _back_to(message: Message) -> HttpResponse:
    url = reverse("chat:conversation", args=[message.conversation_id])
    return redirect(f"{url}#message-{message.pk}")


@login_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return render(request, "chat/index.html", _page_context(request))


@login_required
@require_POST
def conversation_new(request: HttpRequest) -> HttpResponse:
    form = ConversationStartForm(request.POST)
    if not form.is_valid():
        return render(
            request, "chat/index.html", {**_page_context(request), "form": form}, status=400
        )
    conversation = services.conversation_start(
        owner=request.user, content=form.cleaned_data["content"]
    )
    return redirect("chat:conversation", pk=conversation.pk)


@login_required
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """The sidebar's list: every conversation, or those the search box's words are found in."""
    query = request.GET.get("q", "").strip()
    current_id = request.GET.get("current", "")
    context: dict[str, object] = {
        "current_id": int(current_id) if current_id.isdigit() else None,
        "query": query,
    }
    if query:
        context["hits"] = conversation_search(user=request.user, query=query)
    else:
        context["conversations"] = conversation_list_for_user(user=request.user)
    return render(request, "chat/_conversation_list.html", context)


@login_required
@require_GET
def conversation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    # An answer still being written is shown as such (the page then follows it); one whose
    # writer died is stored as stopped first, so the page says so at once.
    writing = answers_settle(conversation_id=conversation.pk).writing
    entries = page_transcript(conversation=conversation, viewer=request.user)
    tail = entries[-1].message if entries else None
    return render(
        request,
        "chat/conversation.html",
        {
            **_page_context(request, conversation),
            "entries": entries,
            # The page opened on a message nobody has answered yet (a conversation started
            # from the front form, or a connection lost right after sending): answer it now.
            "unanswered": tail if tail is not None and tail.role == Message.Role.USER else None,
            "writing": bool(writing),
        },
    )


def _changed(request: HttpRequest, conversation: Conversation, template: str) -> HttpResponse:
    """The changed part of the page for htmx, else the conversation's page again."""
    if request.htmx:
        return render(request, template, {"current": conversation})
    return redirect("chat:conversation", pk=conversation.pk)


@login_required
@require_POST
def conversation_rename(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    form = RenameForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("A title is at most 200 characters.")
    services.conversation_rename(conversation=conversation, title=form.cleaned_data["title"])
    return _changed(request, conversation, "chat/_conversation_header.html")


@login_required
@require_POST
def conversation_delete(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    services.conversation_delete(conversation=conversation)
    if request.htmx:
        return HttpResponseClientRedirect(reverse("chat:index"))
    return redirect("chat:index")


@login_required
@require_POST
def conversation_consent(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = conversation_get_for_user(user=request.user, pk=pk)
    form = TrainConsentForm(request.POST)
    form.is_valid()  # an unticked box is simply absent: consent off
    services.conversation_set_train_consent(
        conversation=conversation, consent=form.cleaned_data.get("train_consent", False)
    )
    return _changed(request, conversation, "chat/_consent.html")


@login_required
@require_POST
def message_feedback(request: HttpRequest, pk: int) -> HttpResponse:
    message = message_get_for_user(user=request.user, pk=pk)
    form = FeedbackForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest(" ".join(m for e in form.errors.values() for m in e))
    data = form.cleaned_data
    try:
        if data["rating"] is not None and "rating" in request.POST:
            feedback_rate(message=message, author=request.user, rating=data["rating"])
        elif data["tag"]:
            feedback_toggle_tag(message=message, author=request.user, tag=data["tag"])
        elif changes := {
            f.name: data[f.name]
            for f in FIELDS
            if f.name in request.POST and data[f.name] is not None
        }:
            feedback_set(message=message, author=request.user, **changes)
        else:
            return HttpResponseBadRequest("Nothing to change.")
    except FeedbackInvalid as exc:
        return HttpResponseBadRequest(str(exc))
    if not request.htmx:
        return _back_to(message)
    # A 👎 asks what was wrong at once; what is written in the panel keeps it open.
    in_panel = request.POST.get("panel") == "open"
    disliked = "rating" in request.POST and data["rating"] == -1
    return HttpResponse(
        fragments.render_feedback(
            message=message, viewer=request.user, panel_open=in_panel or disliked, saved=in_panel
        )
    )


@login_required
@require_GET
def message_learning_status(request: HttpRequest, pk: int) -> HttpResponse:
    """An answer's learning status again: asked every 2 s while its feedback is saved and not
    yet judged (``?poll``: the times so far), so the page never keeps an older status; once
    judged, with the memories proposed from that feedback."""
    message = message_get_for_user(user=request.user, pk=pk)
    try:
        poll = max(0, min(int(request.GET.get("poll", "0")), fragments.STATUS_POLLS))
    except ValueError:
        poll = 0
    return HttpResponse(
        fragments.render_learning_status(message=message, poll=poll, viewer=request.user)
    )


@login_required
@require_POST
def message_select(request: HttpRequest, pk: int) -> HttpResponse:
    message = message_get_for_user(user=request.user, pk=pk)
    services.message_select(message=message)
    if not request.htmx:
        return _back_to(message)
    return HttpResponse(
        fragments.render_transcript(conversation=message.conversation, viewer=request.user)
    )


@login_required
@require_http_methods(["GET", "POST"])
def message_compare(request: HttpRequest, pk: int) -> HttpResponse:
    """Below a 👎'd answer, "Is one of them better?": GET shows where it stands, POST takes the
    choice (``chosen``: an offered answer's id, or ``none``)."""
    message = message_get_for_user(user=request.user, pk=pk)
    error = ""
    if request.method == "POST":
        said = request.POST.get("chosen", "")
        offered = {str(m.pk): m for m in alternatives_of(message)}
        if said != "none" and said not in offered:
            error = "That answer was not one of those offered."
        else:
            try:
                comparison_choose(disliked=message, chosen=offered.get(said))
            except ComparisonInvalid as exc:
                error = str(exc)
        if not request.htmx and not error:
            return _back_to(message)
    html = fragments.render_compare(message=message, error=error)
    if request.method == "POST" and not error:  # a choice can propose a memory under the answer
        html += fragments.render_proposals(message=message, viewer=request.user)
    return HttpResponse(html, status=400 if error and not request.htmx else 200)
