"""The chat websocket: the user's messages come in, the answer streams out token by token.

One consumer per open conversation page (``/ws/chat/<id>/``). Messages from the browser are
JSON (the htmx ws extension sends a form's fields): ``action`` is ``send`` (a new message,
``content``), ``answer`` (answer ``parent`` if it has no answer yet; the page sends it when
it opens on an unanswered message), ``generate`` (a new answer to ``parent``: Regenerate and
Retry), ``edit`` (``content`` as the new text of the user's ``message``: a new branch, then
answered), ``stop``, or ``attach`` (the ids of the ``answers`` the page shows as being written,
sent when its socket opens: those that ended meanwhile are sent as they ended).

The answer is written apart from the page (``webapp.frontdoor.generations``): it streams into
every open page of the conversation, a page that reloads or closes does not stop it, and a page
that opens while it is written follows it, Stop included. The user's message is stored before
anything is asked of the model, and the answer is stored once, at the end, whatever happened:
complete, stopped or failed with the reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import Http404

from trainer.memory_prompt import served_messages
from webapp.account.selectors import answer_settings_for
from webapp.chat.edits import user_message_edit
from webapp.chat.groups import conversation_group
from webapp.chat.limits import message_text_problem
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import conversation_get_for_user, prompt_messages
from webapp.chat.services import assistant_message_start, user_message_send
from webapp.core.limits import (
    StreamSlot,
    retry_after_if_limited,
    stream_slot_acquire,
    streams_refused_message,
)
from webapp.frontdoor import fragments
from webapp.frontdoor.generations import (
    LEASE_TTL_S,
    answers_settle,
    generation_attach,
    generation_start,
    generation_stop,
)
from webapp.inference import stream_chat
from webapp.learning.selectors import policy_version_for
from webapp.memory.selectors import memories_served

logger = logging.getLogger(__name__)

CLOSE_NOT_FOUND = 4404


class ChatConsumer(AsyncWebsocketConsumer):
    conversation: Conversation
    watching: asyncio.Task[None] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ends_shown: set[int] = set()  # answers whose end this page was sent

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        try:
            self.conversation = await database_sync_to_async(conversation_get_for_user)(
                user=user, pk=int(self.scope["url_route"]["kwargs"]["conversation_id"])
            )
        except Http404:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = conversation_group(self.conversation.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        # A page opened (or reconnected) while an answer is written follows it from here on.
        if await self._settle():
            await self.send(text_data=fragments.composer_state(state="streaming"))
            await generation_attach(
                conversation_id=self.conversation.pk, reply_to=self.channel_name
            )
            self._follow()

    async def disconnect(self, code: int) -> None:
        # The answer goes on without this page: it is stored, and shown to the next one.
        if self.watching is not None:
            self.watching.cancel()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _settle(self) -> bool:
        """Whether an answer of this conversation is being written; an answer whose writing
        died with its process is stored as stopped, and the page shows it so at once."""
        return bool(await self._writing())

    async def _writing(self) -> set[int]:
        settled = await database_sync_to_async(answers_settle)(conversation_id=self.conversation.pk)
        if settled.stopped:
            await self._show(settled.stopped, idle=not settled.writing)
        return set(settled.writing)

    async def _show(self, message_ids: Any, *, idle: bool) -> None:
        """Send these answers of the conversation as they are stored (and Send, if ``idle``)."""
        for message in await database_sync_to_async(self._answers)(message_ids):
            html = await database_sync_to_async(fragments.render_message_by_id)(
                message=message, viewer=self.scope["user"]
            )
            await self.send(text_data=html)
        if idle:
            await self.send(text_data=fragments.composer_state(state="idle"))

    def _answers(self, message_ids: Any) -> list[Message]:
        return list(
            Message.objects.filter(
                pk__in=message_ids, conversation=self.conversation, role=Message.Role.ASSISTANT
            ).order_by("pk")
        )

    async def _catch_up(self, answers: Any) -> None:
        """The page shows ``answers`` as being written: send the end of each that has ended
        (while the page loaded, or while its connection was down)."""
        ids = (
            {int(pk) for pk in answers[:50] if str(pk).isdigit()}
            if isinstance(answers, list)
            else set()
        )
        writing = await self._writing()
        if ids - writing:
            await self._show(ids - writing, idle=not writing)

    def _follow(self) -> None:
        if self.watching is None or self.watching.done():
            self.watching = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        """While answers of this conversation are written, check every few seconds that their
        writer lives (its process may die, and then nobody would tell this page), and when one
        ends, that this page was sent its end: a message on the channel layer can be lost
        (channels-redis drops one now and then when another page's socket closes mid-receive)."""
        following = await self._writing()
        while following:
            await asyncio.sleep(LEASE_TTL_S / 2)
            writing = await self._writing()
            missed = following - writing - self.ends_shown
            if missed:
                await self._show(missed, idle=not writing)
            following = writing

    async def chat_answer_end(self, event: dict[str, Any]) -> None:
        """The end of an answer (``webapp.frontdoor.generations``): pass it to the page."""
        self.ends_shown.add(event["message"])
        await self.send(text_data=event["html"])

    async def chat_fragment(self, event: dict[str, Any]) -> None:
        """``group_send(conversation_group(id), fragment_event(html))``: pass it to the page."""
        await self.send(text_data=event["html"])

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "")
            action = str(data.get("action", ""))
        except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, too deep
            await self._refuse("That request was not understood.")
            return
        if action == "attach":
            await self._catch_up(data.get("answers"))
        elif action == "stop":
            if await self._settle():  # its generation shows the answer stopped, then Send
                await generation_stop(conversation_id=self.conversation.pk)
            else:  # nothing (left) to stop
                await self.send(text_data=fragments.composer_state(state="idle"))
        elif await self._settle():
            await self._refuse("An answer is still being written: stop it first.", busy=True)
        elif action == "send":
            content = data.get("content")
            await self._send(content if isinstance(content, str) else "")
        elif action in ("answer", "generate"):
            await self._answer(data.get("parent"), only_if_unanswered=action == "answer")
        elif action == "edit":
            content = data.get("content")
            await self._edit(data.get("message"), content if isinstance(content, str) else "")
        else:
            await self._refuse("That request was not understood.")

    async def _refuse(self, error: str, *, busy: bool = False) -> None:
        state = "streaming" if busy else "idle"
        await self.send(text_data=fragments.composer_state(state=state, error=error))

    async def _send(self, content: str) -> None:
        if not content.strip():
            await self._refuse("Type a message first.")
            return
        problem = message_text_problem(content)
        if problem:
            await self._refuse(problem)
            return
        title = self.conversation.title
        message = await database_sync_to_async(user_message_send)(
            conversation=self.conversation, content=content
        )
        html = await database_sync_to_async(fragments.render_message_by_id)(
            message=message, viewer=self.scope["user"]
        )
        html = fragments.append_to_transcript(html)
        if self.conversation.title != title:  # the first message names the conversation
            html += fragments.conversation_item(conversation=self.conversation)
        slot, refusal = await self._take_slot()
        if slot is None:
            # The message is stored (and shown) all the same; opening the page again answers it.
            await self.send(
                text_data=html
                + fragments.composer_state(
                    state="idle",
                    saved=True,
                    error=f"{refusal} Your message is saved: reload the page to have it answered.",
                )
            )
            return
        await self.send(text_data=html + fragments.composer_state(state="streaming", saved=True))
        await self._start(parent=message, rerender=False, slot=slot)

    async def _edit(self, message_id: Any, content: str) -> None:
        """Record the new text of one of the user's messages as a new branch, and answer it."""
        problem = message_text_problem(content) if content.strip() else "Type a message first."
        if problem:
            await self._refuse(problem)
            return
        edited = await database_sync_to_async(self._prompt_message)(message_id)
        if edited is None:
            await self._refuse("That message is not in this conversation.")
            return
        edited.conversation = self.conversation  # so a new title shows on this page's copy
        title = self.conversation.title
        message = await database_sync_to_async(user_message_edit)(message=edited, content=content)
        if self.conversation.title != title:  # a new first message retitles the conversation
            await self.send(text_data=fragments.conversation_item(conversation=self.conversation))
        slot, refusal = await self._take_slot()
        if slot is None:
            # The edit is stored (and shown) all the same; opening the page again answers it.
            html = await database_sync_to_async(fragments.render_transcript)(
                conversation=self.conversation, viewer=self.scope["user"]
            )
            error = f"{refusal} Your edit is saved: reload the page to have it answered."
            await self.send(text_data=html + fragments.composer_state(state="idle", error=error))
            return
        await self._start(parent=message, rerender=True, slot=slot)

    async def _answer(self, parent_id: Any, *, only_if_unanswered: bool) -> None:
        parent = await database_sync_to_async(self._prompt_message)(parent_id)
        if parent is None:
            await self._refuse("That message is not in this conversation.")
            return
        if only_if_unanswered and await database_sync_to_async(parent.children.exists)():
            return
        slot, refusal = await self._take_slot()
        if slot is None:
            await self._refuse(refusal)
            return
        await self._start(parent=parent, rerender=True, slot=slot)

    async def _take_slot(self) -> tuple[StreamSlot | None, str]:
        """One of the user's stream slots (shared with /v1), or why there is none.

        Each answer asked for counts toward the user's requests a minute, as a /v1 request does.
        """
        user_id = self.scope["user"].pk
        limit = settings.USER_RATE_LIMIT_PER_MINUTE
        if await retry_after_if_limited(scope=f"user:{user_id}", limit=limit) is not None:
            return None, (
                f"Your account has reached its limit of {limit} requests a minute; wait a minute."
            )
        slot = await stream_slot_acquire(user_id=user_id)
        if slot is None:
            return None, streams_refused_message(settings.USER_MAX_STREAMS)
        return slot, ""

    def _prompt_message(self, parent_id: Any) -> Message | None:
        try:
            pk = int(parent_id)
        except (TypeError, ValueError):
            return None
        return Message.objects.filter(
            pk=pk, conversation=self.conversation, role=Message.Role.USER
        ).first()

    def _begin_answer(
        self, parent: Message, *, rerender: bool
    ) -> tuple[Message, list[dict[str, Any]], str]:
        """Store the placeholder answer and render what the page should show now."""
        version = policy_version_for(user=self.scope["user"])  # the user's own, in user scope
        served_model = version.served_name(settings.PARLEY_MODEL_ID)
        memories = memories_served(owner_id=self.scope["user"].pk)
        answer = assistant_message_start(
            conversation=self.conversation,
            parent=parent,
            policy_version=version,
            served_model=served_model,
            sampling_params=answer_settings_for(user=self.scope["user"]).as_params(),
            memories=[memory.as_record() for memory in memories],
        )
        viewer = self.scope["user"]
        if rerender:
            # A new sibling changes the path below its fork, so the whole transcript is redrawn.
            html = fragments.render_transcript(conversation=self.conversation, viewer=viewer)
        else:
            html = fragments.append_to_transcript(
                fragments.render_message_by_id(message=answer, viewer=viewer)
            )
        prompt = served_messages(
            prompt_messages(message=parent),
            [memory.text for memory in memories],
            form=settings.MEMORY_FORM,
        )
        return answer, prompt, html

    async def _start(self, *, parent: Message, rerender: bool, slot: StreamSlot) -> None:
        try:
            answer, prompt, html = await database_sync_to_async(self._begin_answer)(
                parent, rerender=rerender
            )
            await self.send(text_data=html + fragments.composer_state(state="streaming"))
            await generation_start(
                answer=answer,
                prompt=prompt,
                user=self.scope["user"],
                slot=slot,
                stream_chat=stream_chat,  # looked up here, so a test can stand in for the model
            )
            self._follow()
        except BaseException:
            await slot.release()
            raise
