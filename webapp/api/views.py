"""The OpenAI-compatible /v1 API: models, chat completions (streamed and not), feedback.

Every request is recorded (webapp.api.sessions), every answer is streamed straight from vLLM
as its chunks arrive, and every failure is an OpenAI-format error. A 503 only ever means the
model server cannot be reached: publishing new weights never makes a request fail or wait.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from webapp.api.admission import Admission, admission
from webapp.api.errors import ApiError, error_response, storage_unavailable
from webapp.api.keys import api_key_authenticate
from webapp.api.models import ApiKey
from webapp.api.ratelimit import retry_after_if_limited
from webapp.api.schemas import ChatRequest, bad, parse_chat_request, parse_json_body
from webapp.api.sessions import RecordedTurn, api_turn_record
from webapp.chat import services as chat_services
from webapp.chat.models import Conversation, Message
from webapp.chat.services import FeedbackInvalid
from webapp.inference import (
    CompletionAccumulator,
    ServingError,
    ServingUnavailable,
    stream_chat,
)
from webapp.learning.models import PolicyVersion
from webapp.learning.selectors import policy_version_live

log = logging.getLogger(__name__)


def _unavailable(detail: str) -> ApiError:
    return ApiError(
        503,
        f"The model server is not reachable right now ({detail}). Please retry shortly.",
        code="serving_unavailable",
        headers={"Retry-After": str(settings.API_SERVE_RETRY_AFTER_S)},
    )


async def _authenticate(request: HttpRequest) -> ApiKey:
    key = await sync_to_async(api_key_authenticate)(secret=_bearer(request))
    if key is None:
        raise ApiError(401, "Incorrect or revoked API key provided.", code="invalid_api_key")
    return key


def _read_json(request: HttpRequest) -> dict[str, Any]:
    length = request.META.get("CONTENT_LENGTH") or "0"
    limit = settings.API_MAX_BODY_BYTES
    if length.isdigit() and int(length) > limit:
        raise ApiError(
            413, f"The request body is larger than {limit} bytes.", code="body_too_large"
        )
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise ApiError(
            413, f"The request body is larger than {limit} bytes.", code="body_too_large"
        ) from exc
    if not raw:
        raise bad("The request body is empty; send a JSON object.")
    return parse_json_body(raw)


def _api_view(handler: Any) -> Any:
    """CSRF-exempt async view whose ApiErrors (and any surprise) become OpenAI-format JSON."""

    async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return await handler(request, *args, **kwargs)
        except ApiError as exc:
            return exc.response()
        except Exception:
            log.exception("unexpected error in %s", request.path)
            return error_response(500, "Internal error; it has been logged.", code="internal_error")

    view.__name__ = handler.__name__
    return csrf_exempt(view)


def _require(request: HttpRequest, method: str) -> None:
    if request.method != method:
        raise ApiError(405, f"Use {method} for {request.path}.", code="method_not_allowed")


# --- /v1/models ------------------------------------------------------------------------------


def _model_entries() -> list[dict[str, Any]]:
    live = policy_version_live()
    created = int(live.created_at.timestamp())
    return [
        {
            "id": settings.PARLEY_MODEL_ID,
            "object": "model",
            "created": created,
            "owned_by": "parley",
            "parley_version": live.label,
        },
        {
            "id": settings.BASE_MODEL_DIR.name,
            "object": "model",
            "created": created,
            "owned_by": "parley",
            "parley_version": "v0",
        },
    ]


@_api_view
async def models(request: HttpRequest) -> HttpResponse:
    await _authenticate(request)
    _require(request, "GET")
    return JsonResponse({"object": "list", "data": await sync_to_async(_model_entries)()})


# --- /v1/chat/completions --------------------------------------------------------------------


def _turn_type(request: HttpRequest) -> str:
    value = request.headers.get("X-Turn-Type", "main").strip().lower() or "main"
    if value not in (Message.TurnType.MAIN, Message.TurnType.SIDE):
        raise bad("X-Turn-Type must be 'main' or 'side'.", "X-Turn-Type")
    return value


def _start_answers(
    *,
    turn: RecordedTurn,
    version: PolicyVersion,
    served: str,
    chat: ChatRequest,
    turn_type: str,
    completion_id: str,
) -> list[Message]:
    answers = []
    for index in range(chat.n):
        answer = chat_services.assistant_message_start(
            conversation=turn.conversation,
            parent=turn.prompt_tail,
            policy_version=version,
            served_model=served,
            sampling_params=chat.params,
            turn_type=turn_type,
            selected=turn_type == Message.TurnType.MAIN and index == 0,
        )
        answer.completion_id = completion_id if index == 0 else f"{completion_id}:{index}"
        answer.save(update_fields=["completion_id"])
        answers.append(answer)
    return answers


def _record_turn(
    *,
    key: ApiKey,
    chat: ChatRequest,
    turn_type: str,
    session_id: str,
    version: PolicyVersion,
    served: str,
    completion_id: str,
) -> tuple[RecordedTurn, list[Message]]:
    """Record the request's new messages and the answers about to stream, in one go."""
    turn = api_turn_record(
        key=key,
        messages=chat.messages,
        turn_type=turn_type,
        session_id=session_id,
        user_field=str(chat.params.get("user") or ""),
    )
    answers = _start_answers(
        turn=turn,
        version=version,
        served=served,
        chat=chat,
        turn_type=turn_type,
        completion_id=completion_id,
    )
    return turn, answers


def _finish_answers(
    *,
    answers: list[Message],
    accumulator: CompletionAccumulator,
    status: str,
    error: str,
    close: bool,
    conversation: Conversation,
) -> None:
    for index, answer in enumerate(answers):
        chat_services.assistant_message_finish(
            message=answer,
            result=accumulator.choice(index),
            prompt_token_ids=accumulator.prompt_token_ids,
            usage=accumulator.usage,
            status=status,
            error=error,
        )
    if close:
        chat_services.conversation_close(conversation=conversation)


def _client_chunk(
    chunk: dict[str, Any], *, completion_id: str, model: str, chat: ChatRequest
) -> dict[str, Any] | None:
    """vLLM's chunk as OpenAI sends it: our id and model name, no vLLM-only fields."""
    choices = []
    for raw in chunk.get("choices") or []:
        delta = dict(raw.get("delta") or {})
        reasoning = delta.pop("reasoning", None)
        if reasoning and not delta.get("reasoning_content"):
            delta["reasoning_content"] = reasoning
        choices.append(
            {
                "index": raw.get("index", 0),
                "delta": delta,
                "logprobs": raw.get("logprobs") if chat.want_logprobs else None,
                "finish_reason": raw.get("finish_reason"),
            }
        )
    out: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": chunk.get("created") or int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": choices,
    }
    if chunk.get("usage"):
        if not chat.include_usage:
            return out if choices else None
        out["usage"] = chunk["usage"]
    elif not choices:
        return None
    return out


def _bearer(request: HttpRequest) -> str:
    scheme, _, secret = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise ApiError(
            401,
            "Missing API key: send 'Authorization: Bearer pk-…' "
            "(create a key under Settings → API keys).",
            code="invalid_api_key",
        )
    return secret.strip()


async def _admit(request: HttpRequest) -> tuple[ChatRequest, str, Admission]:
    """Every check a chat request passes before the model sees it (or the error it gets)."""
    secret = _bearer(request)
    _require(request, "POST")
    chat = parse_chat_request(_read_json(request))
    turn_type = _turn_type(request)
    admitted = await admission(secret, chat.model)
    retry_after = await retry_after_if_limited(
        key_id=admitted.key.pk, limit=settings.API_RATE_LIMIT_PER_MINUTE
    )
    if retry_after is not None:
        raise ApiError(
            429,
            f"Rate limit of {settings.API_RATE_LIMIT_PER_MINUTE} requests a minute "
            "reached for this key.",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(retry_after)},
        )
    return chat, turn_type, admitted


@_api_view
async def chat_completions(request: HttpRequest) -> HttpResponse:
    chat, turn_type, admitted = await _admit(request)
    key, version = admitted.key, admitted.version
    close = request.headers.get("X-Session-Done", "").strip().lower() in {"1", "true", "yes"}
    completion_id = "chatcmpl-" + uuid.uuid4().hex
    finish = sync_to_async(_finish_answers)

    # The model starts on the prompt at once and the turn is recorded alongside: recording
    # never delays the first token. The answer is stored before the stream says [DONE].
    def start(version: PolicyVersion) -> tuple[AsyncGenerator[dict[str, Any]], asyncio.Task[Any]]:
        stream = stream_chat(
            chat.messages, model=version.served_name(settings.PARLEY_MODEL_ID), params=chat.params
        )
        return stream, asyncio.ensure_future(anext(stream))

    stream, first_chunk = start(version)
    if admitted.recheck is not None:
        # A remembered key: the model already reads the prompt while the database confirms
        # the key and the live version. Nothing goes out before that answer is in.
        try:
            key, checked = await asyncio.shield(admitted.recheck)
        except BaseException:
            await _abandon(stream, first_chunk)
            raise
        if checked.pk != version.pk:  # a version was published meanwhile: it answers
            await _abandon(stream, first_chunk)
            version = checked
            stream, first_chunk = start(version)
    served = version.served_name(settings.PARLEY_MODEL_ID)
    recording: asyncio.Future[tuple[RecordedTurn, list[Message]]] | None = None

    def record() -> asyncio.Future[tuple[RecordedTurn, list[Message]]]:
        """Start recording the turn (once). A streamed answer starts it once its first token
        is on the way, so the database work never competes with a first token."""
        nonlocal recording
        if recording is None:
            recording = asyncio.ensure_future(
                sync_to_async(_record_turn)(
                    key=key,
                    chat=chat,
                    turn_type=turn_type,
                    session_id=request.headers.get("X-Session-Id", "").strip(),
                    version=version,
                    served=served,
                    completion_id=completion_id,
                )
            )
        return recording

    async def recorded() -> tuple[RecordedTurn, list[Message]]:
        try:
            return await asyncio.shield(record())
        except Exception as exc:
            log.exception("could not record completion %s", completion_id)
            raise storage_unavailable(
                "The conversation could not be stored right now; please retry."
            ) from exc

    async def settle(accumulator: CompletionAccumulator, status: str, error: str) -> None:
        turn, answers = await recorded()
        await asyncio.shield(
            finish(
                answers=answers,
                accumulator=accumulator,
                status=status,
                error=error,
                close=close,
                conversation=turn.conversation,
            )
        )

    try:
        first = await first_chunk
    except StopAsyncIteration:
        first = None
    except (ServingUnavailable, ServingError) as exc:
        await settle(CompletionAccumulator(), "failed", str(exc))
        if isinstance(exc, ServingUnavailable):
            raise _unavailable(str(exc)) from exc
        raise ApiError(
            400 if exc.status < 500 else 502,
            exc.message,
            param=exc.param or "messages",
            code="serving_rejected",
        ) from exc

    async def chunks() -> AsyncIterator[dict[str, Any]]:
        if first is not None:
            yield first
        async for chunk in stream:
            yield chunk

    if not chat.stream:
        record()
        accumulator = CompletionAccumulator()
        try:
            async for chunk in chunks():
                accumulator.add(chunk)
        except (ServingUnavailable, ServingError) as exc:
            await settle(accumulator, "failed", str(exc))
            raise _unavailable(str(exc)) from exc
        await settle(accumulator, "complete", "")
        turn, _ = await recorded()
        response = JsonResponse(
            _completion_body(accumulator, completion_id=completion_id, chat=chat)
        )
        response["X-Parley-Version"] = version.label
        response["X-Parley-Conversation"] = str(turn.conversation.pk)
        return response

    async def events() -> AsyncIterator[str]:
        accumulator = CompletionAccumulator()
        status, error = "stopped", "the client went away"
        # The turn is recorded from the chunk after the first token: by then every stream in
        # the same batch of the engine has had its first token too, so no stream's database
        # work delays another's first token.
        token_sent = False
        try:
            async for chunk in chunks():
                accumulator.add(chunk)
                out = _client_chunk(chunk, completion_id=completion_id, model=chat.model, chat=chat)
                if out is not None:
                    yield f"data: {json.dumps(out, ensure_ascii=False)}\n\n"
                    if token_sent:
                        record()
                    token_sent = token_sent or _carries_output(out)
            status, error = "complete", ""
        except (ServingUnavailable, ServingError) as exc:
            status, error = "failed", str(exc)
            yield _sse_error(f"The model server failed mid-answer: {exc}", "serving_unavailable")
        finally:
            await stream.aclose()
            # A client that disconnects cancels this generator; what was generated until then
            # is still recorded (the settling is shielded from the cancellation).
            try:
                await settle(accumulator, status, error)
            except ApiError as exc:
                if status != "stopped":
                    yield _sse_error(exc.message, "storage_unavailable")
        yield "data: [DONE]\n\n"

    response = StreamingHttpResponse(events(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Parley-Version"] = version.label
    return response


async def _abandon(stream: AsyncGenerator[dict[str, Any]], first_chunk: asyncio.Task[Any]) -> None:
    """Drop an answer that will not be given out; closing its stream makes vLLM abort it."""
    first_chunk.cancel()
    await asyncio.wait([first_chunk])
    if not first_chunk.cancelled():
        first_chunk.exception()
    await stream.aclose()


def _carries_output(chunk: dict[str, Any]) -> bool:
    """Whether a chunk gives the client part of the answer (not just the opening role)."""
    return any(
        choice["delta"].get("content")
        or choice["delta"].get("reasoning_content")
        or choice["delta"].get("tool_calls")
        or choice.get("finish_reason")
        for choice in chunk["choices"]
    )


def _sse_error(message: str, code: str) -> str:
    body = {
        "error": {"message": message, "type": "service_unavailable", "param": None, "code": code}
    }
    return f"data: {json.dumps(body)}\n\n"


def _completion_body(
    accumulator: CompletionAccumulator, *, completion_id: str, chat: ChatRequest
) -> dict[str, Any]:
    choices = []
    for index in range(chat.n):
        result = accumulator.choice(index)
        choices.append(
            {
                "index": index,
                "message": result.message(),
                "logprobs": {"content": result.logprob_content} if chat.want_logprobs else None,
                "finish_reason": result.finish_reason or "stop",
            }
        )
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": accumulator.created or int(time.time()),
        "model": chat.model,
        "system_fingerprint": None,
        "choices": choices,
        "usage": accumulator.usage,
    }


# --- /v1/feedback ----------------------------------------------------------------------------


def _record_feedback(*, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    completion_id = body.get("completion_id")
    if not isinstance(completion_id, str) or not completion_id:
        raise bad("'completion_id' is required: the 'id' of a chat completion.", "completion_id")
    rating = body.get("rating")
    if rating is not None and (isinstance(rating, bool) or rating not in (1, -1, 0)):
        raise bad("'rating' must be 1 (👍), -1 (👎) or 0 (withdraw).", "rating")
    for name in ("comment", "correction"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise bad(f"'{name}' must be a string.", name)
    if rating is None and body.get("comment") is None and body.get("correction") is None:
        raise bad("Send at least one of 'rating', 'comment' or 'correction'.")
    message = (
        Message.objects.filter(completion_id=completion_id, conversation__owner=key.owner)
        .select_related("conversation")
        .first()
    )
    if message is None:
        raise ApiError(
            404,
            f"No completion '{completion_id}' for this key's user.",
            param="completion_id",
            code="completion_not_found",
        )
    try:
        feedback = chat_services.feedback_set(
            message=message,
            author=key.owner,
            rating=rating,
            comment=body.get("comment"),
            correction=body.get("correction"),
        )
    except FeedbackInvalid as exc:
        raise bad(str(exc)) from exc
    return {
        "object": "feedback",
        "completion_id": completion_id,
        "rating": feedback.rating,
        "comment": feedback.comment,
        "correction": feedback.correction,
    }


@_api_view
async def feedback(request: HttpRequest) -> HttpResponse:
    key = await _authenticate(request)
    _require(request, "POST")
    body = _read_json(request)
    return JsonResponse(await sync_to_async(_record_feedback)(key=key, body=body))


@_api_view
async def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    raise ApiError(404, f"Unknown endpoint {request.method} {request.path}.", code="unknown_url")
