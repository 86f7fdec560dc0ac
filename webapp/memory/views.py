""" "What Parley knows about you": a person's memories, the form to add one, and the actions on
each (edit, pause, resume, delete; keep, edit or dismiss a proposal). Every lookup is scoped to
the signed-in person; another person's memory answers 404.

The actions are plain POST forms that redirect back to the page with a message; htmx posts them
and swaps the page's section in place, and without JavaScript they work as ordinary forms. A
proposal under an answer in the chat posts ``place=chat``: htmx gets that proposal's line back,
a plain form the conversation again. A refused change (``MemoryRefused``) is shown next to its
form with the typed text kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from webapp.memory import services
from webapp.memory.models import Memory
from webapp.memory.page import memory_room, memory_rows
from webapp.memory.selectors import memory_get_for_owner

# Each action: the service it calls (with the typed text where it takes one) and what the page
# says once it is done.
ACTIONS: dict[str, tuple[Callable[[Memory, str], Memory], str]] = {
    "edit": (lambda m, text: services.memory_edit(memory=m, text=text), "Changed."),
    "pause": (lambda m, _: services.memory_pause(memory=m), "Paused: left out of your answers."),
    "resume": (lambda m, _: services.memory_resume(memory=m), "Resumed: in your answers now."),
    "delete": (lambda m, _: services.memory_delete(memory=m), "Deleted: Parley forgets it."),
    # a proposal kept, in the person's own words when they edited it
    "keep": (
        lambda m, text: services.memory_keep(memory=m, text=text),
        "Remembered: in your answers now.",
    ),
    "dismiss": (
        lambda m, _: services.memory_dismiss(memory=m),
        "Dismissed: Parley will not propose it again.",
    ),
}


def _page(request: HttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    rows = memory_rows(owner=request.user)
    return render(
        request,
        "memory/memory.html",
        {
            "proposals": [r for r in rows if r.memory.state == Memory.State.PROPOSED],
            "rows": [r for r in rows if r.memory.state != Memory.State.PROPOSED],
            "room": memory_room(rows),
            **extra,
        },
        status=status,
    )


@login_required
@require_GET
def memory_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@login_required
@require_POST
def memory_add(request: HttpRequest) -> HttpResponse:
    text = request.POST.get("text", "")
    try:
        services.memory_add(owner=request.user, text=text)
    except services.MemoryRefused as exc:
        # htmx swaps only a 2xx answer: it gets the page with the error as a 200.
        return _page(
            request,
            status=200 if request.htmx else 400,
            error=str(exc),
            error_for="add",
            typed=text,
        )
    messages.success(request, "Remembered: in your answers now.")
    return redirect("memory:index")


def _back_to_answer(memory: Memory) -> HttpResponse:
    message = memory.source_message
    if message is None:
        return redirect("memory:index")
    url = reverse("chat:conversation", args=[message.conversation_id])
    return redirect(f"{url}#message-{message.pk}")


@login_required
@require_POST
def memory_change(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404("No such action.")
    memory = memory_get_for_owner(owner=request.user, pk=pk)
    change, done = ACTIONS[action]
    text = request.POST.get("text", "")
    in_chat = request.POST.get("place") == "chat"
    try:
        memory = change(memory, text)
    except services.MemoryRefused as exc:
        if in_chat and request.htmx:
            return _proposal(request, memory, error=str(exc), error_for=memory.pk, typed=text)
        return _page(
            request,
            status=200 if request.htmx else 400,
            error=str(exc),
            error_for=memory.pk,
            typed=text,
        )
    if in_chat:
        return _proposal(request, memory) if request.htmx else _back_to_answer(memory)
    messages.success(request, done)
    return redirect("memory:index")


def _proposal(request: HttpRequest, memory: Memory, **extra: Any) -> HttpResponse:
    """The proposal's line under its answer, as it stands after the change."""
    return render(request, "memory/_proposal.html", {"memory": memory, "place": "chat", **extra})
