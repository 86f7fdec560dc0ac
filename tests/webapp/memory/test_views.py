"""The memory page, "What Parley knows about you": add, edit (the old text stays in the history),
pause and resume, delete, keep or dismiss a proposal, the limits said beside the form with the
typed text kept, and another person's memory a 404 for every action. Each action works as a
plain form (redirect back with a message) and through htmx (the page's section, or under an
answer the proposal's line)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import AnswerFactory
from tests.security.test_csp import INLINE
from webapp.learning.models import PolicyVersion
from webapp.learning.selectors import policy_version_live
from webapp.memory import services
from webapp.memory.models import Memory

pytestmark = [pytest.mark.django_db, pytest.mark.services]

PAGE = "/memory/"
HTMX = {"HTTP_HX_REQUEST": "true"}


def _change(pk: int, action: str) -> str:
    return reverse("memory:change", args=[pk, action])


def _page(client) -> str:
    response = client.get(PAGE)
    assert response.status_code == 200
    return response.content.decode()


def _text(html: str) -> str:
    """The page's words, without tags, on one line."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def _proposal(owner, text: str = "Call me Sam") -> Memory:
    answer = AnswerFactory(parent__conversation__owner=owner, parent__conversation__title="Names")
    memory = services.memory_propose(
        owner=owner,
        text=text,
        source=Memory.Source.COMMENT,
        source_message=answer,
        source_text=f"Please {text.lower()} from now on.",
    )
    assert memory is not None
    return memory


def test_the_page_needs_a_login_and_is_at_memory(client, alice) -> None:
    assert reverse("memory:index") == PAGE
    response = client.get(PAGE)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(alice)
    page = _text(_page(client))
    assert "What Parley knows about you" in page
    assert (
        "Parley gives these to your model with every message, so they count at once, and "
        "teaches them to your own model over time." in page
    )
    assert "0 of 50 memories" in page
    assert 'placeholder="Call me Sam"' in _page(client)


def test_a_typed_memory_is_listed_in_your_answers_now(client, alice) -> None:
    client.force_login(alice)
    response = client.post(reverse("memory:add"), {"text": "  Call me   Sam "})
    assert response.status_code == 302 and response["Location"] == PAGE
    memory = Memory.objects.get(owner=alice)
    assert (memory.text, memory.state, memory.source) == ("Call me Sam", "active", "typed")
    page = _text(_page(client))
    assert "Remembered: in your answers now." in page  # the message after the redirect
    assert "“Call me Sam” in your answers now · you typed it" in page
    assert "1 of 50 memories" in page


def test_editing_keeps_the_old_text_in_the_history(client, alice) -> None:
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Call me Sam")
    response = client.post(_change(memory.pk, "edit"), {"text": "Call me Samuel"})
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.text == "Call me Samuel"
    assert list(memory.revisions.values_list("text", flat=True)) == [
        "Call me Sam",
        "Call me Samuel",
    ]
    html = _page(client)
    history = html[html.index('<details class="memory-history">') :]
    assert "“Call me Sam” · in your answers" in _text(history[: history.index("</details>")])
    assert "“Call me Samuel”" in _text(html)


def test_pause_then_resume(client, alice) -> None:
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Use metric units")
    client.post(_change(memory.pk, "pause"))
    memory.refresh_from_db()
    assert memory.state == "paused"
    page = _text(_page(client))
    assert "“Use metric units” paused" in page and "Resume" in page
    client.post(_change(memory.pk, "resume"))
    memory.refresh_from_db()
    assert memory.state == "active"
    assert "“Use metric units” in your answers now" in _text(_page(client))


def test_delete_takes_it_off_the_page_and_keeps_its_row(client, alice) -> None:
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Use metric units")
    response = client.post(_change(memory.pk, "delete"))
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.state == "deleted"
    html = _page(client)
    assert "Deleted: Parley forgets it." in _text(html)
    assert f'id="memory-{memory.pk}"' not in html and "0 of 50 memories" in _text(html)


def test_htmx_gets_the_page_back_after_an_action(client, alice) -> None:
    client.force_login(alice)
    response = client.post(reverse("memory:add"), {"text": "Call me Sam"}, follow=True, **HTMX)
    assert response.status_code == 200
    assert 'id="memory"' in response.content.decode()


def test_the_page_lists_proposals_at_the_top_with_keep_edit_dismiss(client, alice) -> None:
    client.force_login(alice)
    services.memory_add(owner=alice, text="Use metric units")
    memory = _proposal(alice)
    html = _page(client)
    proposed = html[html.index('id="memory-proposals"') : html.index('id="memory-list"')]
    assert "Remember: “Call me Sam”?" in _text(proposed)
    for action in ("keep", "dismiss"):
        assert f'action="{_change(memory.pk, action)}"' in proposed
    assert "<summary>Edit</summary>" in proposed
    assert "from your comment on “Names”" in _text(proposed)
    answer = memory.source_message
    assert f'href="/chat/{answer.conversation_id}/#message-{answer.pk}"' in proposed
    assert "Use metric units" not in proposed
    assert "2 of 50 memories" in _text(html)


def test_keep_makes_a_proposal_active_in_the_persons_words(client, alice) -> None:
    client.force_login(alice)
    memory = _proposal(alice)
    response = client.post(_change(memory.pk, "keep"), {"text": "Call me Sammy"})
    assert response.status_code == 302 and response["Location"] == PAGE
    memory.refresh_from_db()
    assert (memory.state, memory.text) == ("active", "Call me Sammy")
    assert list(memory.revisions.values_list("text", "state")) == [
        ("Call me Sam", "proposed"),
        ("Call me Sammy", "active"),
    ]
    page = _text(_page(client))
    assert "“Call me Sammy” in your answers now · from your comment on “Names”" in page


def test_dismiss_leaves_it_off_the_page(client, alice) -> None:
    client.force_login(alice)
    memory = _proposal(alice)
    client.post(_change(memory.pk, "dismiss"))
    memory.refresh_from_db()
    assert memory.state == "dismissed"
    html = _page(client)
    assert "Dismissed: Parley will not propose it again." in _text(html)
    assert f'id="memory-proposal-{memory.pk}"' not in html


def test_under_an_answer_keep_answers_with_the_line_and_a_plain_form_goes_back(
    client, alice
) -> None:
    client.force_login(alice)
    memory = _proposal(alice)
    response = client.post(_change(memory.pk, "keep"), {"place": "chat"}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and f'id="memory-proposal-{memory.pk}"' in html
    assert "Remembered: in your answers now." in _text(html) and f'href="{PAGE}"' in html
    other = _proposal(alice, "Use metric units")
    response = client.post(_change(other.pk, "dismiss"), {"place": "chat"})
    back = other.source_message
    assert response["Location"] == f"/chat/{back.conversation_id}/#message-{back.pk}"
    assert Memory.objects.get(pk=other.pk).state == "dismissed"


def test_a_memory_too_long_is_refused_beside_the_form_with_the_text_kept(
    client, alice, settings
) -> None:
    settings.MEMORY_MAX_CHARS = 20
    client.force_login(alice)
    typed = "Always answer in the style of a pirate"
    response = client.post(reverse("memory:add"), {"text": typed})
    assert response.status_code == 400
    html = response.content.decode()
    assert re.search(r'<p class="error" role="alert"[^>]*>A memory is at most 20 characters', html)
    assert f'value="{typed}"' in html
    assert not Memory.objects.exists()
    # htmx swaps only a 2xx answer: the same page, as a 200.
    response = client.post(reverse("memory:add"), {"text": typed}, **HTMX)
    assert response.status_code == 200 and 'role="alert"' in response.content.decode()


def test_one_memory_too_many_is_refused_and_the_count_says_so(client, alice, settings) -> None:
    settings.MEMORY_MAX_KEPT = 2
    client.force_login(alice)
    for text in ("Call me Sam", "Use metric units"):
        services.memory_add(owner=alice, text=text)
    response = client.post(reverse("memory:add"), {"text": "Be brief"})
    page = _text(response.content.decode())
    assert response.status_code == 400
    assert "You have 2 memories, the most Parley keeps" in page
    assert "2 of 2 memories (the most Parley keeps" in page
    assert Memory.objects.filter(owner=alice).count() == 2


def test_an_edit_refused_is_said_beside_that_memory(client, alice, settings) -> None:
    settings.MEMORY_MAX_CHARS = 20
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Call me Sam")
    typed = "Call me Samuel Beckett, please"
    html = client.post(_change(memory.pk, "edit"), {"text": typed}).content.decode()
    item = html[html.index(f'id="memory-{memory.pk}"') :]
    assert '<details class="memory-edit" open>' in item
    assert f'value="{typed}"' in item and 'role="alert"' in item
    memory.refresh_from_db()
    assert memory.text == "Call me Sam"


def test_an_unknown_action_is_a_404(client, alice) -> None:
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Call me Sam")
    assert client.post(_change(memory.pk, "forget")).status_code == 404
    assert client.get(_change(memory.pk, "pause")).status_code == 405


def test_another_persons_memory_is_a_404_for_every_action(client, alice, bob) -> None:
    active = services.memory_add(owner=bob, text="Call me Bob")
    proposed = _proposal(bob, "Use imperial units")
    client.force_login(alice)
    for memory, action in [
        (active, "edit"),
        (active, "pause"),
        (active, "resume"),
        (active, "delete"),
        (proposed, "keep"),
        (proposed, "dismiss"),
    ]:
        for place in ("", "chat"):
            response = client.post(_change(memory.pk, action), {"text": "Mine", "place": place})
            assert response.status_code == 404, (action, place)
    assert "Bob" not in _page(client)
    assert {(m.text, m.state) for m in Memory.objects.filter(owner=bob)} == {
        ("Call me Bob", "active"),
        ("Use imperial units", "proposed"),
    }


def test_a_learnt_memory_says_which_version_and_links_my_model(client, alice) -> None:
    client.force_login(alice)
    memory = services.memory_add(owner=alice, text="Call me Sam")
    version = PolicyVersion.objects.create(
        number=7, owner=alice, adapter_path="/adapters/v7", parent=policy_version_live()
    )
    services.memories_mark_learnt(memory_ids=[memory.pk], version=version)
    html = _page(client)
    assert f'<a href="{reverse("mymodel:index")}">learnt in version 7</a>' in html
    assert "in your answers now · learnt in version 7" in _text(html)


def test_the_page_and_its_forms_keep_to_the_csp_and_csrf(alice) -> None:
    memory = services.memory_add(owner=alice, text="Call me Sam")
    services.memory_edit(memory=memory, text="Call me Samuel")
    _proposal(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    html = _page(client)
    assert not INLINE.findall(html)
    for url in (reverse("memory:add"), _change(memory.pk, "delete")):
        assert client.post(url, {"text": "Sneaky"}).status_code == 403
    assert Memory.objects.get(pk=memory.pk).state == "active"
