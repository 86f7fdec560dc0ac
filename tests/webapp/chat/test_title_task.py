"""Model titles on real PostgreSQL: queued once after the first answer, written by the task,
never over a title the user gave, and a model that fails or writes junk changes nothing.

The model is stubbed at the module's boundary (``titles.ask_model``); the channel layer is a
recorder, so the pushed fragment can be read.
"""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from webapp.celery import app
from webapp.chat import services, titles
from webapp.chat.groups import conversation_group
from webapp.chat.models import Conversation, Message
from webapp.chat.tasks import suggest_conversation_title
from webapp.core.outbox import Task

pytestmark = [pytest.mark.django_db, pytest.mark.services]

TASK = str(Task.SUGGEST_CONVERSATION_TITLE)
QUESTION = "What are the health benefits of drinking green tea every day?"


class Model:
    """``titles.ask_model`` stand-in: one fixed reply (or error); records the prompts."""

    def __init__(self, reply: str = "Green Tea Benefits", error: Exception | None = None) -> None:
        self.reply, self.error, self.prompts = reply, error, []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.prompts.append(messages)
        if self.error is not None:
            raise self.error
        return self.reply


class Layer:
    """A channel layer that records what is sent to groups."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str]]] = []

    async def group_send(self, group: str, event: dict[str, str]) -> None:
        self.sent.append((group, event))


@pytest.fixture
def layer(monkeypatch) -> Layer:
    recorder = Layer()
    monkeypatch.setattr(titles, "get_channel_layer", lambda: recorder)
    return recorder


def _answered(owner, content: str = QUESTION) -> Conversation:
    conversation = services.conversation_create(owner=owner)
    question = services.user_message_send(conversation=conversation, content=content)
    AnswerFactory(parent=question, content="Green tea is rich in antioxidants.")
    conversation.refresh_from_db()
    return conversation


def _title(conversation: Conversation) -> str:
    conversation.refresh_from_db()
    return conversation.title


def test_the_task_gives_the_models_title_and_pushes_it_to_open_pages(
    alice, monkeypatch, layer, django_capture_on_commit_callbacks
) -> None:
    conversation = _answered(alice)
    model = Model(reply='"Green Tea Benefits."\nGreen tea is good for you.')
    monkeypatch.setattr(titles, "ask_model", model)
    with django_capture_on_commit_callbacks(execute=True):
        assert suggest_conversation_title(conversation.pk) == "Green Tea Benefits"
    assert _title(conversation) == "Green Tea Benefits"
    assert not conversation.title_from_user
    assert model.prompts[0][-1]["content"] == f"Message: {QUESTION}\nTitle:"
    [(group, event)] = layer.sent
    assert group == conversation_group(conversation.pk) and event["type"] == "chat.fragment"
    html = event["html"]
    assert f'<li id="conversation-item-{conversation.pk}" hx-swap-oob="true">' in html
    assert (
        '<h1 class="conversation-title" id="conversation-title-text" hx-swap-oob="true">'
        "Green Tea Benefits</h1>"
    ) in html
    assert html.count("Green Tea Benefits") == 2


def test_the_pushed_title_is_escaped(alice) -> None:
    conversation = ConversationFactory(owner=alice, title="<script>alert(1)</script> & tea")
    html = titles.title_fragments(conversation)
    assert "<script>" not in html and html.count("&lt;script&gt;") == 2


def test_a_title_the_user_gave_is_never_replaced(alice, monkeypatch, layer) -> None:
    conversation = _answered(alice)
    services.conversation_rename(conversation=conversation, title="Tea notes")
    model = Model()
    monkeypatch.setattr(titles, "ask_model", model)
    assert suggest_conversation_title(conversation.pk) is None
    assert _title(conversation) == "Tea notes" and conversation.title_from_user
    assert model.prompts == [] and layer.sent == []


def test_a_rename_while_the_model_writes_wins(alice, monkeypatch, layer) -> None:
    conversation = _answered(alice)

    def renamed_meanwhile(messages: list[dict[str, str]]) -> str:
        services.conversation_rename(
            conversation=Conversation.objects.get(pk=conversation.pk), title="Tea notes"
        )
        return "Green Tea Benefits"

    monkeypatch.setattr(titles, "ask_model", renamed_meanwhile)
    assert suggest_conversation_title(conversation.pk) is None
    assert _title(conversation) == "Tea notes"


def test_a_push_after_a_rename_is_not_sent(alice, layer) -> None:
    """The rename's own response redrew the header: a model title pushed late must not."""
    conversation = _answered(alice)
    titles._push(conversation.pk)
    services.conversation_rename(conversation=conversation, title="Tea notes")
    titles._push(conversation.pk)
    assert len(layer.sent) == 1


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "Sure! Here is a short title for this conversation about tea and its benefits",
        "Bathrooms",
        "Tea Tea Tea Tea",
    ],
)
def test_junk_from_the_model_keeps_the_first_message_title(
    alice, monkeypatch, layer, reply: str
) -> None:
    conversation = _answered(alice)
    before = _title(conversation)
    monkeypatch.setattr(titles, "ask_model", Model(reply=reply))
    assert suggest_conversation_title(conversation.pk) is None
    assert _title(conversation) == before == services.derived_title(QUESTION)
    assert layer.sent == []


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("timed out"),
        KeyError("choices"),
        ValueError("not JSON"),
    ],
)
def test_a_model_that_fails_keeps_the_title_and_is_logged(
    alice, monkeypatch, caplog, error: Exception
) -> None:
    conversation = _answered(alice)
    before = _title(conversation)
    monkeypatch.setattr(titles, "ask_model", Model(error=error))
    with caplog.at_level(logging.WARNING, logger="webapp.chat.titles"):
        assert suggest_conversation_title(conversation.pk) is None
    assert _title(conversation) == before
    assert f"no title for conversation {conversation.pk}" in caplog.text


def test_with_vllm_down_the_real_call_gives_up_at_once(alice, settings) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.JUDGE_BASE_URL = f"http://127.0.0.1:{port}/v1"
    conversation = _answered(alice)
    before = _title(conversation)
    assert suggest_conversation_title(conversation.pk) is None
    assert _title(conversation) == before


def test_the_model_is_asked_greedily_behind_chat_and_a_cut_off_line_is_dropped(
    monkeypatch, settings
) -> None:
    settings.JUDGE_BASE_URL, settings.JUDGE_MODEL = "http://vllm.test/v1", "base"
    settings.JUDGE_API_KEY, settings.JUDGE_PRIORITY = "k", 10
    calls: list[tuple[str, dict[str, object], dict[str, str]]] = []

    def post(url: str, *, json: dict[str, object], headers: dict[str, str], **_: object):
        calls.append((url, json, headers))
        choice = {"message": {"content": "Green Tea Benefits\nGreen tea is"}}
        return httpx.Response(
            200,
            json={"choices": [{**choice, "finish_reason": "length"}]},
            request=httpx.Request("POST", url),
        )

    monkeypatch.setattr(httpx, "post", post)
    assert titles.ask_model([{"role": "user", "content": "hi"}]) == "Green Tea Benefits"
    [(url, body, headers)] = calls
    assert url == "http://vllm.test/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["model"] == "base" and body["temperature"] == 0.0 and body["priority"] == 10
    assert body["max_tokens"] == titles.TITLE_MAX_TOKENS


def test_a_conversation_gone_or_without_words_is_left_alone(alice, monkeypatch) -> None:
    model = Model()
    monkeypatch.setattr(titles, "ask_model", model)
    assert suggest_conversation_title(10**9) is None
    silent = services.conversation_create(owner=alice, source=Conversation.Source.API)
    question = services.message_append(
        conversation=silent,
        role=Message.Role.USER,
        content="<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nx\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>",
    )
    AnswerFactory(parent=question)
    assert suggest_conversation_title(silent.pk) is None
    assert model.prompts == []


# --- Queued once, after the first answer ----------------------------------------------------


def _queued(recorded_tasks: list[tuple[str, object]]) -> list[object]:
    return [args[0] for name, *args in recorded_tasks if name == TASK]


def test_it_is_queued_once_after_the_first_answer_completes(
    alice, recorded_tasks, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        conversation = services.conversation_create(owner=alice)
        question = services.user_message_send(conversation=conversation, content=QUESTION)
    assert _queued(recorded_tasks) == []
    with django_capture_on_commit_callbacks(execute=True):
        first = AnswerFactory(parent=question)
    assert _queued(recorded_tasks) == [conversation.pk]
    with django_capture_on_commit_callbacks(execute=True):
        AnswerFactory(parent=question, content="Regenerated.")  # a sibling of the first
        follow_up = services.user_message_send(conversation=conversation, content="And coffee?")
        AnswerFactory(parent=follow_up)
    assert _queued(recorded_tasks) == [conversation.pk]
    assert first.status == Message.Status.COMPLETE


def test_a_failed_or_stopped_first_answer_waits_for_a_complete_one(
    alice, recorded_tasks, django_capture_on_commit_callbacks
) -> None:
    question = QuestionFactory(conversation=ConversationFactory(owner=alice), content=QUESTION)
    with django_capture_on_commit_callbacks(execute=True):
        AnswerFactory(parent=question, content="", status=Message.Status.FAILED)
        AnswerFactory(parent=question, content="Green", status=Message.Status.STOPPED)
        AnswerFactory(parent=question, turn_type=Message.TurnType.SIDE)
    assert _queued(recorded_tasks) == []
    with django_capture_on_commit_callbacks(execute=True):
        AnswerFactory(parent=question)
    assert _queued(recorded_tasks) == [question.conversation_id]


def test_nothing_is_queued_for_a_named_conversation_or_with_the_setting_off(
    alice, settings, recorded_tasks, django_capture_on_commit_callbacks
) -> None:
    named = QuestionFactory(conversation=ConversationFactory(owner=alice), content=QUESTION)
    services.conversation_rename(conversation=named.conversation, title="Tea notes")
    with django_capture_on_commit_callbacks(execute=True):
        AnswerFactory(parent=named)
    settings.MODEL_TITLES = False
    with django_capture_on_commit_callbacks(execute=True):
        AnswerFactory(parent=QuestionFactory(conversation=ConversationFactory(owner=alice)))
    assert _queued(recorded_tasks) == []


def test_only_a_rename_marks_a_title_as_the_users(alice) -> None:
    conversation = _answered(alice)
    assert conversation.title == services.derived_title(QUESTION)
    assert not conversation.title_from_user
    services.conversation_rename(conversation=conversation, title="  Tea notes ")
    conversation.refresh_from_db()
    assert (conversation.title, conversation.title_from_user) == ("Tea notes", True)


def test_the_task_runs_on_the_judge_queue() -> None:
    app.loader.import_default_modules()
    assert TASK in app.tasks
    assert app.amqp.router.route({}, TASK)["queue"].name == "judge"
