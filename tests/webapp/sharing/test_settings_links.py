"""The list of a person's share links that Settings includes: each live link with its
conversation's title, when it was made, its address and a Revoke that leaves the list without it."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory
from django.urls import reverse

from webapp.sharing.models import ShareLink
from webapp.sharing.selectors import share_links_for_owner
from webapp.sharing.services import share_link_create

pytestmark = [pytest.mark.django_db, pytest.mark.services]

HTMX = {"HTTP_HX_REQUEST": "true"}


def _render(owner) -> str:
    request = RequestFactory().get("/settings/")
    request.user = owner
    return render_to_string(
        "sharing/_settings_links.html",
        {"share_links": share_links_for_owner(owner=owner)},
        request=request,
    )


def test_the_list_shows_each_live_link_with_its_title_and_address(alice, trip) -> None:
    link = share_link_create(conversation=trip.conversation)
    html = _render(alice)
    assert "Lunch in Lisbon" in html
    assert f'value="http://testserver/s/{link.token}/"' in html
    assert reverse("sharing:revoke", args=[link.pk]) in html
    assert "My secret diary" not in html  # not shared


def test_with_no_link_the_list_says_so(alice, trip) -> None:
    assert "No conversation is shared." in _render(alice)


def test_revoke_from_settings_answers_with_the_list_without_that_link(client, alice, trip) -> None:
    gone = share_link_create(conversation=trip.conversation)
    kept = share_link_create(conversation=trip.other)
    client.force_login(alice)
    response = client.post(reverse("sharing:revoke", args=[gone.pk]), {"where": "settings"}, **HTMX)
    html = response.content.decode()
    assert 'id="share-links"' in html
    assert gone.token not in html and kept.token in html
    assert ShareLink.objects.get(pk=gone.pk).revoked_at is not None


def test_revoke_from_settings_without_htmx_goes_back_to_the_page_it_came_from(
    client, alice, trip
) -> None:
    link = share_link_create(conversation=trip.conversation)
    client.force_login(alice)
    url = reverse("sharing:revoke", args=[link.pk])
    back = client.post(url, {"where": "settings", "next": "/settings/"})
    assert back.status_code == 302 and back["Location"] == "/settings/"
    elsewhere = client.post(url, {"where": "settings", "next": "https://evil.example/"})
    assert elsewhere.status_code == 200  # not sent off-site: the share page instead
