"""Every front door takes every field of the feedback spec (``feedback_spec.FIELDS``): the page's
form and its fragment, ``/v1/feedback`` and its OpenAPI schema, and the admin. The tests are
parametrized over the spec, so a new kind of feedback is checked here without a new test."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import AnswerFactory
from webapp.api.keys import api_key_create
from webapp.chat.feedback_spec import FIELDS, STATE, FeedbackField, feedback_state
from webapp.chat.models import Feedback, Message

pytestmark = [pytest.mark.django_db, pytest.mark.services]

BY_FIELD = pytest.mark.parametrize("field", FIELDS, ids=[f.name for f in FIELDS])


def given(field: FeedbackField) -> int | str:
    """A value of the field that is not its empty one."""
    if field.choices:
        return next(value for value in field.values if value != field.empty)
    return f"my {field.name}"


def not_allowed(field: FeedbackField) -> int | str:
    return max(field.values) + 7 if field.choices else 7


@pytest.fixture
def reply(alice) -> Message:
    return AnswerFactory(parent__conversation__owner=alice, completion_id="chatcmpl-spec")


def _v1_feedback(alice, body: dict):
    secret = api_key_create(owner=alice)[1]
    return Client().post(
        "/v1/feedback",
        data=json.dumps({"completion_id": "chatcmpl-spec", **body}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


@BY_FIELD
def test_the_page_stores_every_field_and_its_fragment_offers_it(client, alice, reply, field):
    client.force_login(alice)
    url = reverse("chat:feedback", args=[reply.pk])
    response = client.post(url, {field.name: str(given(field))}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content
    assert getattr(Feedback.objects.get(message=reply, author=alice), field.name) == given(field)
    assert f'name="{field.name}"' in response.content.decode()


@BY_FIELD
def test_v1_feedback_stores_every_field_and_echoes_it(alice, reply, field) -> None:
    response = _v1_feedback(alice, {field.name: given(field)})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body[field.name] == given(field)
    assert {f.name for f in FIELDS} <= body.keys()
    assert getattr(Feedback.objects.get(message=reply), field.name) == given(field)


@BY_FIELD
def test_v1_feedback_refuses_a_value_the_field_does_not_take(alice, reply, field) -> None:
    response = _v1_feedback(alice, {field.name: not_allowed(field)})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == field.name
    assert not Feedback.objects.exists()


def test_v1_feedback_without_any_field_names_them_all(alice, reply) -> None:
    response = _v1_feedback(alice, {})
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert all(f"'{f.name}'" in message for f in FIELDS)


def test_the_openapi_schema_documents_every_field() -> None:
    schema = Client().get("/v1/openapi.json").json()
    body = schema["paths"]["/v1/feedback"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["properties"] == {
        "completion_id": {"type": "string"},
        **{f.name: f.openapi() for f in FIELDS},
    }


def test_the_admin_shows_every_field_of_a_feedback(client, alice, reply) -> None:
    feedback = Feedback.objects.create(
        message=reply, author=alice, **{f.name: given(f) for f in FIELDS}
    )
    staff = type(alice).objects.create_superuser("root", password="root-pass-4242")
    client.force_login(staff)
    page = client.get(reverse("admin:chat_feedback_change", args=[feedback.pk])).content.decode()
    for name in STATE:
        assert f"field-{name}" in page, name


def test_the_state_holds_every_field_and_is_empty_without_feedback() -> None:
    assert [f.name for f in FIELDS] == list(STATE[: len(FIELDS)])
    assert not any(feedback_state(None).values())
