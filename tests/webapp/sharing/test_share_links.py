"""A share link: its owner makes and revokes it; its page shows that one conversation, read-only,
to anyone, and nothing else of the owner's; a revoked link, an unknown one and one whose
conversation was deleted are all "not found"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import QuestionFactory
from webapp.chat.services import conversation_delete
from webapp.sharing.models import ShareLink
from webapp.sharing.selectors import share_links_for_owner
from webapp.sharing.services import share_link_create, share_link_revoke

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HTMX = {"HTTP_HX_REQUEST": "true"}


def _share(client, conversation):
    return client.post(reverse("sharing:share", args=[conversation.pk]), **HTMX)


def test_share_makes_one_long_random_link_and_shows_the_same_one_again(client, alice, trip) -> None:
    client.force_login(alice)
    first = _share(client, trip.conversation)
    link = ShareLink.objects.get(conversation=trip.conversation)
    assert len(link.token) >= 40
    url = f"http://testserver/s/{link.token}/"
    assert f'value="{url}"' in first.content.decode()
    assert "Copy" in first.content.decode() and "Revoke" in first.content.decode()
    again = _share(client, trip.conversation)
    assert f'value="{url}"' in again.content.decode()
    assert ShareLink.objects.filter(conversation=trip.conversation).count() == 1


def test_each_conversation_gets_its_own_token(alice, trip) -> None:
    one = share_link_create(conversation=trip.conversation)
    other = share_link_create(conversation=trip.other)
    assert one.token != other.token


def test_the_shared_page_shows_the_conversation_as_its_owner_sees_it(client, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    response = client.get(f"/s/{link.token}/")  # nobody logged in
    page = response.content.decode()
    assert response.status_code == 200
    assert "Lunch in Lisbon" in page and "Shared from Parley" in page
    assert "Where should I eat in Lisbon?" in page and "<strong>Time Out Market</strong>" in page
    assert "And for dessert?" in page
    assert "Anywhere at all" not in page  # the regenerated answer the page does not show


def test_the_shared_page_says_it_is_not_for_search_engines_and_sends_no_referrer(
    client, trip
) -> None:
    link = share_link_create(conversation=trip.conversation)
    response = client.get(f"/s/{link.token}/")
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    assert '<meta name="robots" content="noindex">' in response.content.decode()
    assert "no-store" in response["Cache-Control"]  # a revoke is not outlived by a cache


def test_the_shared_page_gives_away_nothing_else_of_the_owner(client, alice, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    page = client.get(f"/s/{link.token}/").content.decode()
    assert "alice" not in page.lower()
    assert "My secret diary" not in page and "Dear diary" not in page
    assert f"/chat/{trip.other.pk}/" not in page and "/chat/" not in page and "/me/" not in page
    # No feedback, no composer, no sidebar, no forms of any kind.
    assert "Useful, thanks" not in page and "Cervejaria" not in page
    for control in ("<form", "<textarea", "thumb-up", "feedback", "composer", "sidebar"):
        assert control not in page, control
    # Not even for the owner herself: the page is the same for whoever reads it.
    client.force_login(alice)
    assert "alice" not in client.get(f"/s/{link.token}/").content.decode().lower()


def test_messages_written_after_sharing_show_on_the_page(client, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    QuestionFactory(conversation=trip.conversation, content="What about coffee?")
    assert "What about coffee?" in client.get(f"/s/{link.token}/").content.decode()


def test_a_revoked_link_is_not_found_and_share_then_makes_a_new_one(client, alice, trip) -> None:
    client.force_login(alice)
    _share(client, trip.conversation)
    link = ShareLink.objects.get(conversation=trip.conversation)
    response = client.post(reverse("sharing:revoke", args=[link.pk]), **HTMX)
    assert "Link revoked" in response.content.decode()
    client.logout()
    assert client.get(f"/s/{link.token}/").status_code == 404
    client.force_login(alice)
    _share(client, trip.conversation)
    fresh = ShareLink.objects.get(conversation=trip.conversation, revoked_at__isnull=True)
    assert fresh.token != link.token
    assert client.get(f"/s/{link.token}/").status_code == 404
    assert client.get(f"/s/{fresh.token}/").status_code == 200


def test_an_unknown_token_is_not_found(client, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    assert client.get(f"/s/{link.token[:-1]}/").status_code == 404
    assert client.get("/s/not-a-token/").status_code == 404


def test_deleting_the_conversation_makes_its_link_not_found(client, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    conversation_delete(conversation=trip.conversation)
    assert client.get(f"/s/{link.token}/").status_code == 404
    assert not ShareLink.objects.filter(pk=link.pk).exists()


def test_another_person_can_neither_share_nor_revoke_your_conversation(client, bob, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    client.force_login(bob)
    assert _share(client, trip.other).status_code == 404
    assert client.post(reverse("sharing:revoke", args=[link.pk])).status_code == 404
    assert client.post(reverse("sharing:revoke", args=[link.pk]), **HTMX).status_code == 404
    link.refresh_from_db()
    assert link.revoked_at is None
    assert not ShareLink.objects.filter(conversation=trip.other).exists()


def test_sharing_needs_a_login_and_a_post(client, alice, trip) -> None:
    response = client.post(reverse("sharing:share", args=[trip.conversation.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(alice)
    assert client.get(reverse("sharing:share", args=[trip.conversation.pk])).status_code == 405
    assert not ShareLink.objects.exists()


def test_share_without_htmx_is_a_page_of_its_own(client, alice, trip) -> None:
    client.force_login(alice)
    page = client.post(reverse("sharing:share", args=[trip.conversation.pk])).content.decode()
    link = ShareLink.objects.get(conversation=trip.conversation)
    assert f"/s/{link.token}/" in page and "Back to the conversation" in page


def test_the_owners_list_holds_her_live_links_only(alice, bob, trip) -> None:
    kept = share_link_create(conversation=trip.conversation)
    share_link_revoke(link=share_link_create(conversation=trip.other))
    bobs = QuestionFactory(conversation__owner=bob).conversation
    share_link_create(conversation=bobs)
    assert list(share_links_for_owner(owner=alice)) == [kept]


def test_revoking_twice_keeps_the_first_time(trip) -> None:
    link = share_link_revoke(link=share_link_create(conversation=trip.conversation))
    first = link.revoked_at
    assert share_link_revoke(link=link).revoked_at == first
