"""The chat websocket: the user's messages come in, the answer streams out token by token.

One consumer per open conversation page (``/ws/chat/<id>/``). Messages from the browser are
JSON (the htmx ws extension sends a form's fields): ``action`` is ``send`` (a new message,
``content``), ``answer`` (answer ``parent`` if it has no answer yet; the page sends it when
it opens on an unanswered message), ``generate`` (a new answer to ``parent``: Regenerate and
Retry), ``edit`` (``content`` as the new text of the user's ``message``: a new branch, then
answered) or ``stop``.

Generation runs in its own task so that Stop (or the page closing) can cancel it: cancelling
closes ``stream_chat``'s generator, which closes the HTTP stream, and vLLM aborts the request.
The user's message is stored before anything is asked of the model, and the answer is stored
once, at the end, whatever happened: complete, stopped or failed with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import Http404

from webapp.chat.edits import user_message_edit
from webapp.chat.groups import conversation_group
from webapp.chat.limits import message_text_problem
from webapp.chat.models import Conversation, Message
from webapp.chat.selectors import conversation_get_for_user, prompt_messages
from webapp.chat.services import (
    assistant_message_finish,
    assistant_message_start,
    user_message_send,
)
from webapp.core.limits import (
    StreamSlot,
    retry_after_if_limited,
    stream_slot_acquire,
    streams_refused_message,
)
from webapp.frontdoor import fragments
from webapp.frontdoor.streaming import StreamPainter
from webapp.inference import CompletionAccumulator, ServingError, ServingUnavailable, stream_chat
from webapp.learning.selectors import lineage_key_for, policy_version_for

logger = logging.getLogger(__name__)

# After this long without a first token the transcript says the model is slow.
SLOW_NOTICE_AFTER_S = 8.0
CLOSE_NOT_FOUND = 4404


class ChatConsumer(AsyncWebsocketConsumer):
    conversation: Conversation
    generation: asyncio.Task[None] | None = None

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

    async def disconnect(self, code: int) -> None:
        # A closed page stops its answer; what was written so far is kept as "stopped".
        await self._stop_generation()
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

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
        if action == "stop":
            await self._stop_generation()
        elif self.generation is not None and not self.generation.done():
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
        answer = assistant_message_start(
            conversation=self.conversation,
            parent=parent,
            policy_version=version,
            served_model=served_model,
            sampling_params={
                "max_tokens": settings.CHAT_MAX_TOKENS,
                "temperature": settings.CHAT_TEMPERATURE,
            },
        )
        viewer = self.scope["user"]
        if rerender:
            # A new sibling changes the path below its fork, so the whole transcript is redrawn.
            html = fragments.render_transcript(conversation=self.conversation, viewer=viewer)
        else:
            html = fragments.append_to_transcript(
                fragments.render_message_by_id(message=answer, viewer=viewer)
            )
        return answer, prompt_messages(message=parent), html

    async def _start(self, *, parent: Message, rerender: bool, slot: StreamSlot) -> None:
        try:
            answer, prompt, html = await database_sync_to_async(self._begin_answer)(
                parent, rerender=rerender
            )
            await self.send(text_data=html + fragments.composer_state(state="streaming"))
        except BaseException:
            await slot.release()
            raise
        self.generation = asyncio.create_task(self._generate(answer, prompt, slot))

    async def _stop_generation(self) -> None:
        task = self.generation
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _generate(
        self, answer: Message, prompt: list[dict[str, Any]], slot: StreamSlot
    ) -> None:
        """Write the answer, holding the user's stream slot until it is stored."""
        try:
            await self._write(answer, prompt, slot)
        finally:
            if slot.token:  # not released yet: the answer failed before it was stored
                await asyncio.shield(slot.release())

    async def _write(self, answer: Message, prompt: list[dict[str, Any]], slot: StreamSlot) -> None:
        accumulator = CompletionAccumulator()
        status, error = Message.Status.COMPLETE, ""
        # The version is the one _begin_answer stored with the answer (cached: no query here).
        version = answer.policy_version
        stream = stream_chat(
            prompt,
            model=answer.served_model,
            params=answer.sampling_params,
            adapter_path=version.adapter_path if version is not None else "",
            lineage=lineage_key_for(user=self.scope["user"].pk),
        )
        slow_notice = asyncio.create_task(self._notice_if_slow(answer.pk))
        painter = StreamPainter(
            render=lambda text: fragments.stream_markdown(message_id=answer.pk, text=text),
            send=lambda html: self.send(text_data=html),
        )
        try:
            async for chunk in stream:
                accumulator.add(chunk)
                text = "".join(
                    (choice.get("delta") or {}).get("content") or ""
                    for choice in chunk.get("choices") or []
                )
                if text:
                    if not slow_notice.done():
                        slow_notice.cancel()
                    painter.add(text)
        except asyncio.CancelledError:
            # Stop: keep what was written. The task carries on only to store and show it.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            status = Message.Status.STOPPED
        except ServingUnavailable as exc:
            logger.warning("chat answer %s failed: %s", answer.pk, exc)
            status = Message.Status.FAILED
            error = (
                "The model server is not answering right now, so no answer was written. "
                "Your message is saved: press Retry once it is back."
            )
        except ServingError as exc:
            logger.warning("chat answer %s refused: %s", answer.pk, exc.message)
            status = Message.Status.FAILED
            error = f"The model server refused this request: {exc.message}"
        finally:
            slow_notice.cancel()
            await stream.aclose()
            await painter.close()
        await self._finish(answer, accumulator, status=status, error=error, slot=slot)

    async def _finish(
        self,
        answer: Message,
        accumulator: CompletionAccumulator,
        *,
        status: str,
        error: str,
        slot: StreamSlot,
    ) -> None:
        finished = await database_sync_to_async(assistant_message_finish)(
            message=answer,
            result=accumulator.choice(0),
            prompt_token_ids=accumulator.prompt_token_ids,
            usage=accumulator.usage,
            completion_id=accumulator.id or None,
            status=status,
            error=error,
        )
        # Freed before the page is told it may ask again, so its next question finds it free.
        await asyncio.shield(slot.release())
        html = await database_sync_to_async(fragments.render_message_by_id)(
            message=finished, viewer=self.scope["user"]
        )
        with contextlib.suppress(Exception):  # the page may have gone: the answer is stored
            await self.send(text_data=html + fragments.composer_state(state="idle"))

    async def _notice_if_slow(self, message_id: int) -> None:
        await asyncio.sleep(SLOW_NOTICE_AFTER_S)
        await self.send(
            text_data=fragments.stream_notice(
                message_id=message_id,
                text="The model is slow to answer right now; still waiting. "
                "You can press Stop and retry later: your message is saved.",
            )
        )
