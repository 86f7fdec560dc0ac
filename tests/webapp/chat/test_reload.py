"""A page that reloads or closes while its answer is written: the answer goes on and is stored,
the page opened next follows it to the end with a working Stop, and an answer whose writer died
shows as stopped at once. Through the real ASGI application, the channel layer on the real
Redis and real PostgreSQL; the model scripted as in test_consumers."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import redis
from channels.db import database_sync_to_async
from django.conf import settings
from django.test import AsyncClient
from django.utils import timezone

from tests.factories import AnswerFactory, ConversationFactory, QuestionFactory
from tests.sockets import connected_socket
from tests.webapp.chat.test_consumers import (
    ScriptedStream,
    completion,
    deltas,
    messages_of,
    new_conversation,
    receive_until_idle,
    send,
)
from webapp.chat.models import Message
from webapp.frontdoor import consumers, generations

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.services,
    pytest.mark.usefixtures("answers_end_with_the_test"),
]


class GatedStream(ScriptedStream):
    """A fake ``stream_chat`` that yields ``before``, waits for ``gate``, then yields ``after``."""

    def __init__(self, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
        super().__init__(before)
        self.after, self.gate = after, asyncio.Event()

    async def __call__(
        self, messages, *, model, params=None, base_url=None, adapter_path="", lineage=None
    ):
        call = {"messages": messages, "model": model, "params": params, "closed": False}
        self.calls.append(call)
        try:
            for item in self.chunks:
                await asyncio.sleep(0.01)
                yield item
            await self.gate.wait()
            for item in self.after:
                yield item
        finally:
            call["closed"] = True


@pytest.fixture
def gated(monkeypatch):
    """An answer that streams "Once upon" and waits (``.gate``) before " a time."."""
    chunks = completion("Once", " upon", " a time.")
    stream = GatedStream(chunks[:3], chunks[3:])
    monkeypatch.setattr(consumers, "stream_chat", stream)
    return stream


async def _start_and_leave(user) -> tuple[Any, list[str]]:
    """Send a message, read the answer until its first words are on the page, close the page."""
    conversation = await new_conversation(user)
    page = await connected_socket(user, conversation.pk)
    await send(page, action="send", content="Tell me a story")
    frames: list[str] = []
    while not any("upon" in frame for frame in deltas(frames)):
        frames.append(await page.receive_from(timeout=5))
    await page.disconnect()
    return conversation, frames


async def _open_page(user, conversation) -> str:
    client = AsyncClient()
    await database_sync_to_async(client.force_login)(user)
    response = await client.get(f"/chat/{conversation.pk}/")
    assert response.status_code == 200
    return response.content.decode()


async def _receive_until(socket, text: str) -> list[str]:
    frames: list[str] = []
    while not frames or text not in frames[-1]:
        frames.append(await socket.receive_from(timeout=5))
    return frames


async def test_when_the_page_closes_mid_answer_then_the_answer_is_still_finished_and_stored(
    alice, gated
):
    conversation, _ = await _start_and_leave(alice)
    gated.gate.set()
    await asyncio.wait_for(asyncio.gather(*generations.running()), timeout=5)
    _, reply = await messages_of(conversation)
    assert (reply.status, reply.content) == ("complete", "Once upon a time.")
    assert reply.token_ids == [100, 101, 102] and gated.calls[0]["closed"]


async def test_when_the_page_reloads_mid_answer_then_the_new_page_follows_it_to_the_end(
    alice, gated
):
    conversation, _ = await _start_and_leave(alice)
    _, reply = await messages_of(conversation)
    assert reply.status == "streaming"  # the old page went, the answer did not stop

    page = await _open_page(alice, conversation)
    assert f'id="message-{reply.pk}-stream"' in page and "Writing…" in page
    assert 'data-state="streaming"' in page  # Stop in place of Send
    assert 'id="stop-button"' in page and 'class="stop" aria-label' in page
    stop_tag = page[page.index('id="stop-button"') :].split(">", 1)[0]
    assert " hidden" not in stop_tag

    socket = await connected_socket(alice, conversation.pk)
    caught_up = await _receive_until(socket, "Once upon")  # the text so far, at once
    assert f'id="message-{reply.pk}-stream"' in caught_up[-1]
    assert any('data-state="streaming"' in frame for frame in caught_up)
    gated.gate.set()
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    assert "Once upon a time." in frames[-1] and f'id="thumb-up-{reply.pk}"' in frames[-1]
    _, reply = await messages_of(conversation)
    assert (reply.status, reply.content) == ("complete", "Once upon a time.")
    assert len(gated.calls) == 1  # the same answer, followed: not asked again


async def test_when_the_page_reloads_mid_answer_then_stop_on_the_new_page_stops_it(alice, gated):
    conversation, _ = await _start_and_leave(alice)
    socket = await connected_socket(alice, conversation.pk)
    await _receive_until(socket, "Once upon")
    await send(socket, action="stop")
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    assert "Stopped before the end." in frames[-1]
    _, reply = await messages_of(conversation)
    assert (reply.status, reply.content, reply.token_ids) == ("stopped", "Once upon", [100, 101])
    assert gated.calls[0]["closed"], "the model's stream was not closed"


async def test_a_new_message_waits_for_the_answer_another_page_is_following(alice, gated):
    conversation, _ = await _start_and_leave(alice)
    socket = await connected_socket(alice, conversation.pk)
    await _receive_until(socket, "Once upon")
    await send(socket, action="send", content="And then?")
    refusal = await _receive_until(socket, "stop it first")
    assert 'data-state="streaming"' in refusal[-1]
    gated.gate.set()
    await receive_until_idle(socket)
    await socket.disconnect()
    assert [m.content for m in await messages_of(conversation) if m.role == "user"] == [
        "Tell me a story"
    ]


@database_sync_to_async
def _orphan(user, *, conversation=None, age_s: float = 30) -> Message:
    """An answer marked as being written whose writer is gone (its process died)."""
    conversation = conversation or ConversationFactory(owner=user)
    question = QuestionFactory(conversation=conversation, content="Still there?")
    answer = AnswerFactory(parent=question, content="", status="streaming")
    Message.objects.filter(pk=answer.pk).update(
        created_at=timezone.now() - timedelta(seconds=age_s)
    )
    return answer


async def test_when_the_writer_of_an_answer_died_then_the_page_shows_it_stopped_at_once(alice):
    dead = await _orphan(alice)
    page = await _open_page(alice, dead.conversation)
    assert "Stopped before the end." in page and 'data-state="idle"' in page
    assert "Writing…" not in page
    (_, stored) = await messages_of(dead.conversation)
    assert stored.status == "stopped"

    # A page already open (its socket reconnecting) is told at once too.
    other = await _orphan(alice, conversation=dead.conversation)
    socket = await connected_socket(alice, dead.conversation.pk)
    frames = await receive_until_idle(socket, timeout=2)
    await socket.disconnect()
    assert f'id="message-{other.pk}"' in frames[0] and "Stopped before the end." in frames[0]


async def test_an_answer_written_in_another_process_is_followed_until_its_lease_lapses(alice):
    """Another web process writes the answer: its lease in Redis says it is alive; once the
    lease lapses (that process died) the open page shows the answer stopped."""
    writing = await _orphan(alice, age_s=10)
    lease = redis.Redis.from_url(settings.REDIS_URL)
    lease.set(f"parley:writing:{writing.pk}", "1", px=1500)
    page = await _open_page(alice, writing.conversation)
    assert 'data-state="streaming"' in page and "Writing…" in page
    socket = await connected_socket(alice, writing.conversation.pk)
    assert 'data-state="streaming"' in await socket.receive_from(timeout=2)
    await _receive_until(socket, "Stopped before the end.")
    assert 'data-state="idle"' in await socket.receive_from(timeout=2)
    await socket.disconnect()
    (_, stored) = await messages_of(writing.conversation)
    assert stored.status == "stopped"


async def test_when_the_answer_ends_while_the_page_loads_then_the_page_is_sent_its_end(
    alice, gated
):
    conversation, _ = await _start_and_leave(alice)
    page = await _open_page(alice, conversation)  # drawn while the answer is written...
    (_, reply) = await messages_of(conversation)
    assert f'id="message-{reply.pk}-stream"' in page
    gated.gate.set()  # ...which ends before the page's socket opens
    await asyncio.wait_for(asyncio.gather(*generations.running()), timeout=5)
    socket = await connected_socket(alice, conversation.pk)
    await send(socket, action="attach", answers=[str(reply.pk), "x"])
    frames = await receive_until_idle(socket)
    await socket.disconnect()
    assert f'id="message-{reply.pk}"' in frames[0] and "Once upon a time." in frames[0]
    assert "status-complete" in frames[0]


async def test_when_the_end_of_an_answer_is_lost_on_the_way_then_the_page_still_gets_it(
    alice, gated, monkeypatch
):
    """channels-redis can drop a message when another page's socket closes mid-receive: the
    page that follows an answer checks on it, and is sent the end it missed."""

    async def lost(self, event):
        return None

    monkeypatch.setattr(consumers.ChatConsumer, "chat_answer_end", lost)
    conversation = await new_conversation(alice)
    socket = await connected_socket(alice, conversation.pk)
    await send(socket, action="send", content="Tell me a story")
    await _receive_until(socket, "upon")
    gated.gate.set()
    frames = await receive_until_idle(socket, timeout=generations.LEASE_TTL_S)
    await socket.disconnect()
    (_, reply) = await messages_of(conversation)
    assert f'id="message-{reply.pk}"' in frames[-2] and "status-complete" in frames[-2]
    assert "Once upon a time." in frames[-2]


async def test_an_answer_ends_even_when_the_cancellation_of_its_lease_renewal_is_lost(
    alice, gated, monkeypatch
):
    """On Python 3.11 a cancellation that lands as a Redis command finishes sending is lost
    (``asyncio.wait_for`` returns the command's result): the renewals end all the same, and the
    answer's task with them, its lease dropped."""
    renewals = [0]
    real_renew = generations.lease_renew

    async def renew_losing_cancellation(name: str, *, ttl_s: float) -> bool:
        renewals[0] += 1
        if renewals[0] != 2:  # the lease taken at the start, and any renewal after the lost one
            return await real_renew(name, ttl_s=ttl_s)
        try:
            await asyncio.Event().wait()  # sending, until the generation ends it
        except asyncio.CancelledError:
            pass  # lost, as asyncio.wait_for loses it
        return True

    monkeypatch.setattr(generations, "lease_renew", renew_losing_cancellation)
    monkeypatch.setattr(generations, "LEASE_RENEW_S", 0.01)
    conversation = await new_conversation(alice)
    socket = await connected_socket(alice, conversation.pk)
    await send(socket, action="send", content="Tell me a story")
    await _receive_until(socket, "upon")
    gated.gate.set()
    await receive_until_idle(socket)
    await socket.disconnect()
    tasks = generations.running()  # none left if it has ended already
    _, still_running = await asyncio.wait(tasks, timeout=5) if tasks else (set(), set())
    assert not still_running
    (_, reply) = await messages_of(conversation)
    assert (reply.status, reply.content) == ("complete", "Once upon a time.")
    assert not redis.Redis.from_url(settings.REDIS_URL).exists(f"parley:writing:{reply.pk}")
