"""One /v1 chat completion in flight: the model's stream, the turn's recording, how it ends.

The model starts on the prompt at once and the turn is recorded alongside: recording never
delays the first token. The answer is stored before the stream says [DONE], and a client that
goes away still has what was generated until then recorded.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

from trainer.memory_prompt import served_messages
from webapp.api.admission import Admission, Lookup
from webapp.api.errors import (
    ApiError,
    context_overflow,
    serving_unavailable,
    storage_unavailable,
)
from webapp.api.formatting import (
    carries_output,
    client_chunk,
    completion_body,
    sse_data,
    sse_error,
)
from webapp.api.schemas import ChatRequest
from webapp.api.sessions import (
    CompletionTurn,
    RecordedTurn,
    api_completion_finish,
    api_completion_record,
)
from webapp.chat.models import Message
from webapp.core.limits import StreamSlot
from webapp.inference import (
    CompletionAccumulator,
    ServingError,
    ServingUnavailable,
    fits_for_certain,
    prompt_tokens,
    stream_chat,
)
from webapp.learning.selectors import lineage_key_for

log = logging.getLogger(__name__)

Recording = asyncio.Future[tuple[RecordedTurn, list[Message]]]


# vLLM's wordings of a context overflow: its renderer's and its request checks' name the
# prompt's length in tokens; any other that names the window is an overflow too.
_VLLM_OVERFLOW = re.compile(
    r"maximum context length is \d+ tokens\. However, your prompt contains (?P<at_least>at least )?"
    r"(?P<tokens>\d+) input tokens|Input length \((?P<length>\d+)\) exceeds model's maximum"
    r"|maximum context length is \d+ tokens"
)


def _refusal(exc: ServingUnavailable | ServingError) -> ApiError:
    if isinstance(exc, ServingUnavailable):
        return serving_unavailable(str(exc))
    overflow = _VLLM_OVERFLOW.search(exc.message) if exc.status < 500 else None
    if overflow is not None:
        tokens = overflow.group("tokens") or overflow.group("length")
        if tokens is None:  # another of vLLM's wordings: its own words, OpenAI's code
            return ApiError(400, exc.message, param="messages", code="context_length_exceeded")
        return context_overflow(
            window=settings.VLLM_MAX_MODEL_LEN,
            prompt_tokens=int(tokens),
            at_least=bool(overflow.group("at_least")),
        )
    return ApiError(
        400 if exc.status < 500 else 502,
        exc.message,
        param=exc.param or "messages",
        code="serving_rejected",
    )


class Completion:
    """The state one request carries from admission to its last chunk."""

    def __init__(
        self,
        *,
        chat: ChatRequest,
        turn_type: str,
        admitted: Admission,
        session_id: str,
        close: bool,
        slot: StreamSlot | None = None,
        serve_memory: bool = True,
    ) -> None:
        self.chat = chat
        self.serve_memory = serve_memory
        self.memories = admitted.memories if serve_memory else ()
        self.slot = slot
        self.turn_type = turn_type
        self.key = admitted.key
        self.version = admitted.version
        self.session_id = session_id
        self.close = close
        self.completion_id = "chatcmpl-" + uuid.uuid4().hex
        self._recording: Recording | None = None
        self._first: dict[str, Any] | None = None
        self._start()

    @property
    def served(self) -> str:
        return self.version.served_name(settings.PARLEY_MODEL_ID)

    @property
    def prompt(self) -> list[dict[str, Any]]:
        """The request's messages as the model is given them: with the owner's memories."""
        return served_messages(
            self.chat.messages,
            [memory.text for memory in self.memories],
            form=settings.MEMORY_FORM,
        )

    def _start(self) -> None:
        self._stream: AsyncGenerator[dict[str, Any]] = stream_chat(
            self.prompt,
            model=self.served,
            params=self.chat.params,
            adapter_path=self.version.adapter_path,
            lineage=lineage_key_for(user=self.key.owner_id),
        )
        self._first_chunk: asyncio.Task[Any] = asyncio.ensure_future(anext(self._stream))

    async def _abandon(self) -> None:
        """Drop an answer that will not be given out; closing its stream makes vLLM abort it."""
        self._first_chunk.cancel()
        await asyncio.wait([self._first_chunk])
        if not self._first_chunk.cancelled():
            self._first_chunk.exception()
        await self._stream.aclose()

    async def begin(self, recheck: Lookup | None) -> None:
        """Wait for the database's word on a remembered key, then for the first chunk.

        A remembered key: the model already reads the prompt while the database confirms the
        key and the live version. Nothing goes out before that answer is in.
        """
        if recheck is not None:
            try:
                self.key, checked, memories = await asyncio.shield(recheck)
            except BaseException:
                await self._abandon()
                raise
            memories = memories if self.serve_memory else ()
            # A version published or a memory changed meanwhile: the answer starts again on it.
            if checked.pk != self.version.pk or memories != self.memories:
                await self._abandon()
                self.version, self.memories = checked, memories
                self._start()
        await self._refuse_before_prefill_unless_it_fits()
        try:
            self._first = await self._first_chunk
        except StopAsyncIteration:
            self._first = None
        except (ServingUnavailable, ServingError) as exc:
            await self._settle(CompletionAccumulator(), "failed", str(exc))
            raise _refusal(exc) from exc
        await self._refuse_unless_it_fits()

    async def _refuse_before_prefill_unless_it_fits(self) -> None:
        """Refuse a prompt near the window before the model has read it all.

        Counting costs a tokenization (milliseconds) where waiting for the first chunk costs the
        whole prefill: on a CPU, half a minute for 8,000 tokens. A short prompt is not counted.
        """
        asked = self.chat.params.get("max_tokens")
        window = settings.VLLM_MAX_MODEL_LEN
        if not asked or fits_for_certain(self.prompt, self.chat.params, window):
            return
        counted = await prompt_tokens(
            self.prompt,
            params=self.chat.params,
            lineage=lineage_key_for(user=self.key.owner_id),
        )
        if counted is not None and counted + asked > window:
            await self._refuse_overflow(prompt_tokens=counted, asked=asked)

    async def _refuse_unless_it_fits(self) -> None:
        """Refuse an answer that would be cut short by the context window.

        vLLM silently lowers ``max_tokens`` to what is left of the context after the prompt:
        the answer would stop early with ``finish_reason: length`` as if that had been asked.
        The first chunk carries the prompt's token ids, so the check costs no round trip; the
        refusal is OpenAI's, which agents answer by compacting their history.
        """
        asked = self.chat.params.get("max_tokens")
        prompt_ids = (self._first or {}).get("prompt_token_ids")
        window = settings.VLLM_MAX_MODEL_LEN
        if asked and prompt_ids and len(prompt_ids) + asked > window:
            await self._refuse_overflow(prompt_tokens=len(prompt_ids), asked=asked)

    async def _refuse_overflow(self, *, prompt_tokens: int, asked: int) -> None:
        """Abort the answer (closing the stream makes vLLM abort it), record the turn as failed
        and raise OpenAI's ``context_length_exceeded``."""
        await self._abandon()
        refusal = context_overflow(
            window=settings.VLLM_MAX_MODEL_LEN, prompt_tokens=prompt_tokens, asked=asked
        )
        await self._settle(CompletionAccumulator(), "failed", refusal.message)
        raise refusal

    def _record(self) -> Recording:
        """Start recording the turn (once). A streamed answer starts it once its first token
        is on the way, so the database work never competes with a first token."""
        if self._recording is None:
            turn = CompletionTurn(
                key=self.key,
                chat=self.chat,
                turn_type=self.turn_type,
                session_id=self.session_id,
                version=self.version,
                served=self.served,
                completion_id=self.completion_id,
                memories=[memory.as_record() for memory in self.memories],
            )
            self._recording = asyncio.ensure_future(sync_to_async(api_completion_record)(turn=turn))
        return self._recording

    async def _recorded(self) -> tuple[RecordedTurn, list[Message]]:
        try:
            return await asyncio.shield(self._record())
        except Exception as exc:
            log.exception("could not record completion %s", self.completion_id)
            raise storage_unavailable(
                "The conversation could not be stored right now; please retry."
            ) from exc

    async def _settle(self, accumulator: CompletionAccumulator, status: str, error: str) -> None:
        turn, answers = await self._recorded()
        await asyncio.shield(
            sync_to_async(api_completion_finish)(
                answers=answers,
                accumulator=accumulator,
                status=status,
                error=error,
                close=self.close,
                conversation=turn.conversation,
            )
        )

    async def _chunks(self) -> AsyncIterator[dict[str, Any]]:
        if self._first is not None:
            yield self._first
        async for chunk in self._stream:
            yield chunk

    def _headers(self, response: HttpResponse) -> HttpResponse:
        response["X-Parley-Version"] = self.version.label
        return response

    async def json_response(self) -> HttpResponse:
        """The whole answer at once, once it is stored."""
        self._record()
        accumulator = CompletionAccumulator()
        try:
            async for chunk in self._chunks():
                accumulator.add(chunk)
        except (ServingUnavailable, ServingError) as exc:
            await self._settle(accumulator, "failed", str(exc))
            raise serving_unavailable(str(exc)) from exc
        await self._settle(accumulator, "complete", "")
        turn, _ = await self._recorded()
        body = completion_body(accumulator, completion_id=self.completion_id, chat=self.chat)
        response = self._headers(JsonResponse(body))
        response["X-Parley-Conversation"] = str(turn.conversation.pk)
        return response

    def streaming_response(self) -> HttpResponse:
        response = StreamingHttpResponse(self._events(), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return self._headers(response)

    async def _events(self) -> AsyncIterator[str]:
        accumulator = CompletionAccumulator()
        status, error = "stopped", "the client went away"
        try:
            async with aclosing(self._relay(accumulator)) as lines:
                async for line in lines:
                    yield line
            status, error = "complete", ""
        except (ServingUnavailable, ServingError) as exc:
            status, error = "failed", str(exc)
            yield sse_error(f"The model server failed mid-answer: {exc}", "serving_unavailable")
        finally:
            await self._stream.aclose()
            # A client that disconnects cancels this generator; what was generated until then
            # is still recorded (the settling is shielded from the cancellation).
            try:
                await self._settle(accumulator, status, error)
            except ApiError as exc:
                if status != "stopped":
                    yield sse_error(exc.message, "storage_unavailable")
            finally:
                if self.slot is not None:
                    await asyncio.shield(self.slot.release())
        yield "data: [DONE]\n\n"

    async def _relay(self, accumulator: CompletionAccumulator) -> AsyncGenerator[str]:
        """Each chunk as an SSE line. The turn is recorded from the chunk after the first
        token: by then every stream in the same batch of the engine has had its first token
        too, so no stream's database work delays another's first token."""
        token_sent = False
        async for chunk in self._chunks():
            accumulator.add(chunk)
            out = client_chunk(
                chunk, completion_id=self.completion_id, model=self.chat.model, chat=self.chat
            )
            if out is not None:
                yield sse_data(out)
                if token_sent:
                    self._record()
                token_sent = token_sent or carries_output(out)
