"""An answer being written, apart from the page that asked for it.

A page is only one viewer of the answer it asked for. The answer is written by a task of its
own (``generation_start``): it paints the text so far into every open page of the conversation
through the channel layer (``chat.groups.conversation_group``) and stores the answer once, at
the end: complete, stopped or failed with the reason. A page that reloads or closes does not
stop it. The reloaded page shows the answer as being written, asks for the text so far
(``generation_attach``) and follows it to the end, with a Stop that works from any of the
conversation's pages in any web process (``generation_stop``). Both requests go through the
group of the conversation's generations, which pages never join.

While it runs, a generation holds a lease in Redis (``webapp.core.leases``), renewed every
``LEASE_RENEW_S``. An answer marked as being written that nobody holds died with its process (a
restart, a crash): ``answers_settle`` stores it as stopped, so the page says so at once instead
of waiting for an answer that will never come. Cancelling a generation (Stop) closes
``stream_chat``'s generator, which closes the HTTP stream, and the serving engine aborts the
request.

The tasks an answer runs beside its read (the repaints, the lease's renewals) are told to end as
well as cancelled, and end on either: on Python 3.11 a cancellation that lands just as a Redis
command finishes sending is lost (redis-py sends through ``asyncio.wait_for``). Repaints that
went on would keep the answer from ever being stored, and renewals would keep its lease alive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from webapp.chat.abandoned import assistant_messages_abandon
from webapp.chat.groups import conversation_group, fragment_event
from webapp.chat.limits import context_room_problem
from webapp.chat.models import Conversation, Message
from webapp.chat.services import assistant_message_finish
from webapp.core.leases import lease_drop, lease_renew, leases_held
from webapp.core.limits import StreamSlot
from webapp.frontdoor import fragments
from webapp.frontdoor.streaming import StreamPainter
from webapp.inference import CompletionAccumulator, ServingError, ServingUnavailable
from webapp.learning.selectors import lineage_key_for

log = logging.getLogger(__name__)

LEASE_TTL_S = 6.0
"""How long a lease outlives its last renewal: at most this long after its process died, a
generation is known to be gone."""
LEASE_RENEW_S = 2.0
START_GRACE = timedelta(seconds=2)
"""An answer started this recently may not hold its lease yet (the row is stored first)."""
SLOW_NOTICE_AFTER_S = 8.0
"""After this long without a first token the answer says the model is slow."""

StreamChat = Callable[..., AsyncIterator[dict[str, Any]]]


class ContextFull(Exception):
    """The prompt the engine read leaves no room for the answer asked for: the words say why."""


def writers_group(conversation_id: int) -> str:
    """The group of a conversation's generations: Stop and a page's attach reach them here."""
    return f"conversation-{conversation_id}-writers"


def _lease(message_id: int) -> str:
    return f"parley:writing:{message_id}"


class Generation:
    """One answer being written: read from the model, painted into the pages, stored."""

    def __init__(
        self,
        *,
        answer: Message,
        prompt: list[dict[str, Any]],
        user: Any,
        slot: StreamSlot,
        stream_chat: StreamChat,
    ) -> None:
        self.answer, self.prompt, self.user, self.slot = answer, prompt, user, slot
        self.stream_chat = stream_chat
        self.layer = get_channel_layer()
        self.accumulator = CompletionAccumulator()
        self.painter = StreamPainter(
            render=lambda text: fragments.stream_markdown(message_id=answer.pk, text=text),
            send=self._to_pages,
        )
        self.task: asyncio.Task[None] | None = None
        self._reading: asyncio.Task[tuple[str, str]] | None = None
        self._in_stream = False
        self._stop_asked = False
        self._ended = False

    async def _to_pages(self, html: str) -> None:
        await self.layer.group_send(
            conversation_group(self.answer.conversation_id), fragment_event(html)
        )

    def stop(self) -> None:
        """Stop reading the model; what was written is stored as stopped."""
        self._stop_asked = True
        # Only the read is cancelled, never the storing that follows it.
        if self._in_stream and self._reading is not None:
            self._reading.cancel()

    def snapshot(self) -> str:
        """What a page that comes to the answer late draws: the text so far, and Stop."""
        text = self.painter.text
        drawn = fragments.stream_markdown(message_id=self.answer.pk, text=text) if text else ""
        return drawn + fragments.composer_state(state="streaming")

    async def run(self) -> None:
        renewing = asyncio.create_task(self._renew())
        inbox = await self.layer.new_channel()
        listening = asyncio.create_task(self._listen(inbox))
        try:
            self._reading = asyncio.create_task(self._read())
            status, error = await self._reading
            await self._finish(status=status, error=error)
        finally:
            self._ended = True  # ends the renewals even where the cancellation is lost
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await asyncio.shield(self._end_listening(inbox, listening))
            await asyncio.shield(lease_drop(_lease(self.answer.pk)))
            if self.slot.token:  # not released yet: the answer failed before it was stored
                await asyncio.shield(self.slot.release())

    async def _renew(self) -> None:
        # Ended by a flag as well as cancelled: a cancellation that lands as the renewal is sent
        # is lost on Python 3.11 (see ``StreamPainter.close``), and the lease would live on.
        while not self._ended:
            await asyncio.sleep(LEASE_RENEW_S)
            await lease_renew(_lease(self.answer.pk), ttl_s=LEASE_TTL_S)

    async def _listen(self, inbox: str) -> None:
        """Stop and attach requests from the conversation's pages, in any process, until the
        generation says it ended."""
        group = writers_group(self.answer.conversation_id)
        await self.layer.group_add(group, inbox)
        try:
            while True:
                event = await self.layer.receive(inbox)
                kind = event.get("type")
                if kind == "generation.end":
                    return
                if event.get("message") not in (None, self.answer.pk):
                    continue
                if kind == "generation.stop":
                    self.stop()
                elif kind == "generation.attach" and event.get("reply_to"):
                    await self.layer.send(event["reply_to"], fragment_event(self.snapshot()))
        finally:
            await self.layer.group_discard(group, inbox)

    async def _end_listening(self, inbox: str, listening: asyncio.Task[None]) -> None:
        # Ended by a message, not cancelled: a receive of channels-redis cancelled at the
        # wrong moment can hang (seen with a page's consumer receiving beside it).
        try:
            await self.layer.send(inbox, {"type": "generation.end"})
        except Exception:
            log.warning("could not end the listener of answer %s", self.answer.pk, exc_info=True)
        done, _ = await asyncio.wait({listening}, timeout=LEASE_TTL_S)
        if not done:
            log.warning("the listener of answer %s did not end; left behind", self.answer.pk)
            listening.cancel()

    async def _read(self) -> tuple[str, str]:
        """Read the model's stream into the accumulator and the pages; (status, error)."""
        answer = self.answer
        version = answer.policy_version  # stored with the answer (cached: no query here)
        stream = self.stream_chat(
            self.prompt,
            model=answer.served_model,
            params=answer.sampling_params,
            adapter_path=version.adapter_path if version is not None else "",
            lineage=lineage_key_for(user=self.user.pk),
        )
        slow_notice = asyncio.create_task(self._notice_if_slow())
        status, error = Message.Status.COMPLETE, ""
        self._in_stream = True
        try:
            async for chunk in stream:
                if self._stop_asked:
                    raise asyncio.CancelledError
                checked = bool(self.accumulator.prompt_token_ids)
                self.accumulator.add(chunk)
                if not checked and self.accumulator.prompt_token_ids:
                    self._check_room(len(self.accumulator.prompt_token_ids))
                text = "".join(
                    (choice.get("delta") or {}).get("content") or ""
                    for choice in chunk.get("choices") or []
                )
                if text:
                    slow_notice.cancel()
                    self.painter.add(text)
        except asyncio.CancelledError:
            # Stop: keep what was written. The read ends here; the answer is stored next.
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            status = Message.Status.STOPPED
        except ContextFull as exc:
            status, error = Message.Status.FAILED, str(exc)
        except ServingUnavailable as exc:
            log.warning("chat answer %s failed: %s", answer.pk, exc)
            status = Message.Status.FAILED
            error = (
                "The model server is not answering right now, so no answer was written. "
                "Your message is saved: press Retry once it is back."
            )
        except ServingError as exc:
            log.warning("chat answer %s refused: %s", answer.pk, exc.message)
            status = Message.Status.FAILED
            error = f"The model server refused this request: {exc.message}"
        except Exception:
            log.exception("chat answer %s failed", answer.pk)
            status = Message.Status.FAILED
            error = "Something went wrong while writing this answer. Press Retry to try again."
        finally:
            self._in_stream = False
            slow_notice.cancel()
            await stream.aclose()
            await self.painter.close()
        return status, error

    def _check_room(self, prompt_tokens: int) -> None:
        """Stop at the first chunk when the prompt (memories included) leaves the answer less
        room than it asked for: the engine would cut it short as if it had ended."""
        problem = context_room_problem(
            prompt_tokens=prompt_tokens,
            asked=int((self.answer.sampling_params or {}).get("max_tokens") or 0),
            window=settings.VLLM_MAX_MODEL_LEN,
            memories=len(self.answer.memories or []),
        )
        if problem:
            raise ContextFull(problem)

    async def _finish(self, *, status: str, error: str) -> None:
        accumulator = self.accumulator
        finished = await database_sync_to_async(assistant_message_finish)(
            message=self.answer,
            result=accumulator.choice(0),
            prompt_token_ids=accumulator.prompt_token_ids,
            usage=accumulator.usage,
            completion_id=accumulator.id or None,
            status=status,
            error=error,
        )
        # Freed before the pages are told they may ask again, so the next question finds it free.
        await asyncio.shield(self.slot.release())
        html = await database_sync_to_async(fragments.render_message_by_id)(
            message=finished, viewer=self.user
        )
        try:
            await self.layer.group_send(
                conversation_group(self.answer.conversation_id),
                {
                    "type": "chat.answer_end",  # ChatConsumer.chat_answer_end
                    "message": self.answer.pk,
                    "html": html + fragments.composer_state(state="idle"),
                },
            )
        except Exception:  # no page to tell: the answer is stored, a page opened later shows it
            log.warning("could not show the end of answer %s", self.answer.pk, exc_info=True)

    async def _notice_if_slow(self) -> None:
        await asyncio.sleep(SLOW_NOTICE_AFTER_S)
        await self._to_pages(
            fragments.stream_notice(
                message_id=self.answer.pk,
                text="The model is slow to answer right now; still waiting. "
                "You can press Stop and retry later: your message is saved.",
            )
        )


_running: dict[int, Generation] = {}
"""This process's generations by answer id (the reference that keeps each task alive)."""


async def generation_start(
    *,
    answer: Message,
    prompt: list[dict[str, Any]],
    user: Any,
    slot: StreamSlot,
    stream_chat: StreamChat,
) -> Generation:
    """Write ``answer`` in a task of its own, holding the user's stream ``slot`` until it is
    stored. Its lease is taken before this returns, so a page opened now finds it alive."""
    generation = Generation(
        answer=answer, prompt=prompt, user=user, slot=slot, stream_chat=stream_chat
    )
    _running[answer.pk] = generation
    await lease_renew(_lease(answer.pk), ttl_s=LEASE_TTL_S)
    generation.task = asyncio.create_task(generation.run())
    generation.task.add_done_callback(lambda _: _running.pop(answer.pk, None))
    return generation


def running() -> list[asyncio.Task[None]]:
    """The tasks of this process's generations (tests wait for them)."""
    return [g.task for g in _running.values() if g.task is not None]


async def generation_stop(*, conversation_id: int) -> None:
    """Stop the conversation's answer being written, in this process or another."""
    for generation in list(_running.values()):
        if generation.answer.conversation_id == conversation_id:
            generation.stop()
    await get_channel_layer().group_send(
        writers_group(conversation_id), {"type": "generation.stop"}
    )


async def generation_attach(*, conversation_id: int, reply_to: str) -> None:
    """Ask the conversation's generations to send the text so far to the page ``reply_to``;
    the page follows the rest with everyone else (it is in the conversation's group)."""
    await get_channel_layer().group_send(
        writers_group(conversation_id), {"type": "generation.attach", "reply_to": reply_to}
    )


@dataclass(frozen=True)
class Settled:
    """A conversation's answers marked as being written, sorted out."""

    writing: list[int]
    """Being written now: their generation holds its lease (or runs in this process)."""
    stopped: list[int]
    """Found dead and stored as stopped just now."""


def answers_settle(*, conversation_id: int) -> Settled:
    """Which of a web conversation's answers are being written; those nobody writes any more
    are stored as stopped (``assistant_messages_abandon``). Answers of ``/v1`` are left alone:
    their request writes them and no page can take them over."""
    rows = list(
        Message.objects.filter(
            conversation_id=conversation_id,
            conversation__source=Conversation.Source.WEB,
            role=Message.Role.ASSISTANT,
            status=Message.Status.STREAMING,
        ).values_list("pk", "created_at")
    )
    if not rows:
        return Settled([], [])
    recent = timezone.now() - START_GRACE
    unsure = [pk for pk, created in rows if pk not in _running and created < recent]
    if not settings.REDIS_URL:
        held: set[str] = set()  # one web process: what it does not run, nobody runs
    else:
        found = leases_held([_lease(pk) for pk in unsure])
        # Redis out of reach: nothing is known, so nothing is declared dead.
        held = found if found is not None else {_lease(pk) for pk in unsure}
    dead = [pk for pk in unsure if _lease(pk) not in held]
    if dead:
        assistant_messages_abandon(message_ids=dead)
        log.info("answers %s were no longer being written: stored as stopped", dead)
    return Settled([pk for pk, _ in rows if pk not in dead], dead)
