"""The OpenAI-compatible /v1 API: models, chat completions (streamed and not), feedback, memories.

Every request is recorded (webapp.api.sessions), every answer is streamed straight from vLLM
as its chunks arrive, and every failure is an OpenAI-format error. A 503 only ever means the
model server cannot be reached: publishing new weights never makes a request fail or wait.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from webapp.api.admission import Admission, admission
from webapp.api.completions import Completion
from webapp.api.errors import ApiError, error_response
from webapp.api.feedback import api_feedback_record
from webapp.api.housekeeping import housekeeping_kind
from webapp.api.keys import api_key_authenticate
from webapp.api.memories import (
    api_memories_list,
    api_memory_create,
    api_memory_delete,
    api_memory_get,
    api_memory_update,
)
from webapp.api.models import ApiKey
from webapp.api.schemas import ChatRequest, bad, parse_chat_request, parse_json_body
from webapp.chat.models import Message
from webapp.core.limits import (
    StreamSlot,
    retry_after_if_limited,
    stream_slot_acquire,
    streams_refused_message,
)
from webapp.learning.selectors import policy_version_for

log = logging.getLogger(__name__)


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


def _model_entries(*, owner_id: int) -> list[dict[str, Any]]:
    live = policy_version_for(user=owner_id)  # what "parley" is for this key's owner
    created = int(live.created_at.timestamp())
    # The window in vLLM's field name, and the two numbers an agent's provider config asks
    # for (OpenClaw's contextWindow and maxTokens).
    limits = {
        "max_model_len": settings.VLLM_MAX_MODEL_LEN,
        "context_window": settings.VLLM_MAX_MODEL_LEN,
        "max_output_tokens": min(settings.API_MAX_TOKENS, settings.VLLM_MAX_MODEL_LEN),
    }
    return [
        {
            "id": settings.PARLEY_MODEL_ID,
            "object": "model",
            "created": created,
            "owned_by": "parley",
            "parley_version": live.label,
            **limits,
        },
        {
            "id": settings.BASE_MODEL_DIR.name,
            "object": "model",
            "created": created,
            "owned_by": "parley",
            "parley_version": "v0",
            **limits,
        },
    ]


@_api_view
async def models(request: HttpRequest) -> HttpResponse:
    key = await _authenticate(request)
    _require(request, "GET")
    entries = await sync_to_async(_model_entries)(owner_id=key.owner_id)
    return JsonResponse({"object": "list", "data": entries})


# --- /v1/chat/completions --------------------------------------------------------------------


def _turn_type(request: HttpRequest, messages: list[dict[str, Any]]) -> str:
    """``X-Turn-Type`` where the client sends it; else side for an agent's housekeeping call
    (OpenClaw marks none: ``webapp.api.housekeeping``), main for anything else."""
    value = request.headers.get("X-Turn-Type", "").strip().lower()
    if not value:
        return Message.TurnType.SIDE if housekeeping_kind(messages) else Message.TurnType.MAIN
    if value not in (Message.TurnType.MAIN, Message.TurnType.SIDE):
        raise bad("X-Turn-Type must be 'main' or 'side'.", "X-Turn-Type")
    return value


def _serves_memory(request: HttpRequest) -> bool:
    """``X-Parley-Memory: off`` leaves the owner's memories out of this request."""
    value = request.headers.get("X-Parley-Memory", "on").strip().lower() or "on"
    if value not in ("on", "off"):
        raise bad("X-Parley-Memory must be 'on' or 'off'.", "X-Parley-Memory")
    return value == "on"


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
    turn_type = _turn_type(request, chat.messages)
    admitted = await admission(secret, chat.model)
    # Per key, then per user over all of their keys and the websocket.
    for scope, limit, whom in (
        (f"key:{admitted.key.pk}", settings.API_RATE_LIMIT_PER_MINUTE, "this key"),
        (f"user:{admitted.key.owner_id}", settings.USER_RATE_LIMIT_PER_MINUTE, "your account"),
    ):
        retry_after = await retry_after_if_limited(scope=scope, limit=limit)
        if retry_after is not None:
            raise ApiError(
                429,
                f"Rate limit of {limit} requests a minute reached for {whom}.",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(retry_after)},
            )
    return chat, turn_type, admitted


async def _stream_slot(admitted: Admission) -> StreamSlot:
    slot = await stream_slot_acquire(user_id=admitted.key.owner_id)
    if slot is None:
        raise ApiError(
            429,
            streams_refused_message(settings.USER_MAX_STREAMS),
            code="too_many_streams",
            headers={"Retry-After": "1"},
        )
    return slot


@_api_view
async def chat_completions(request: HttpRequest) -> HttpResponse:
    """Parse and admit the request, then answer it whole or as a stream (see completions).

    The answer holds one of the user's stream slots until its last chunk: a stream's slot is
    released by the stream itself, anything else's here.
    """
    chat, turn_type, admitted = await _admit(request)
    slot = await _stream_slot(admitted)
    streaming = False
    try:
        completion = Completion(
            chat=chat,
            turn_type=turn_type,
            admitted=admitted,
            session_id=request.headers.get("X-Session-Id", "").strip(),
            close=request.headers.get("X-Session-Done", "").strip().lower() in {"1", "true", "yes"},
            slot=slot,
            # An agent's housekeeping (a summary of its history) is not the person's turn:
            # their memories would only eat its budget.
            serve_memory=_serves_memory(request) and turn_type != Message.TurnType.SIDE,
        )
        await completion.begin(admitted.recheck)
        if chat.stream:
            response = completion.streaming_response()
            streaming = True
            return response
        return await completion.json_response()
    finally:
        if not streaming:
            await slot.release()


# --- /v1/feedback ----------------------------------------------------------------------------


@_api_view
async def feedback(request: HttpRequest) -> HttpResponse:
    key = await _authenticate(request)
    _require(request, "POST")
    body = _read_json(request)
    return JsonResponse(await sync_to_async(api_feedback_record)(key=key, body=body))


# --- /v1/memories ----------------------------------------------------------------------------


@_api_view
async def memories(request: HttpRequest) -> HttpResponse:
    """GET: the key owner's memories (``?state=``); POST ``{"text"}``: a new active one."""
    key = await _authenticate(request)
    if request.method == "POST":
        body = _read_json(request)
        created = await sync_to_async(api_memory_create)(key=key, body=body)
        return JsonResponse(created, status=201)
    _require(request, "GET")
    state = request.GET.get("state", "")
    return JsonResponse(await sync_to_async(api_memories_list)(key=key, state=state))


@_api_view
async def memory(request: HttpRequest, memory_id: str) -> HttpResponse:
    """GET one memory with its history; PATCH ``{"text", "state"}``; DELETE."""
    key = await _authenticate(request)
    if request.method == "PATCH":
        body = _read_json(request)
        return JsonResponse(
            await sync_to_async(api_memory_update)(key=key, memory_id=memory_id, body=body)
        )
    if request.method == "DELETE":
        return JsonResponse(await sync_to_async(api_memory_delete)(key=key, memory_id=memory_id))
    _require(request, "GET")
    return JsonResponse(await sync_to_async(api_memory_get)(key=key, memory_id=memory_id))


@_api_view
async def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    raise ApiError(404, f"Unknown endpoint {request.method} {request.path}.", code="unknown_url")
