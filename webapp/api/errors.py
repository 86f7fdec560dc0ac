"""OpenAI-format errors: every failure under /v1 is ``{"error": {message, type, param, code}}``."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
}


class ApiError(Exception):
    """Raised anywhere in a /v1 request; the view turns it into the OpenAI error response."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(
            self.status, self.message, param=self.param, code=self.code, headers=self.headers
        )


def _retry_later(message: str, code: str) -> ApiError:
    return ApiError(
        503, message, code=code, headers={"Retry-After": str(settings.API_SERVE_RETRY_AFTER_S)}
    )


def storage_unavailable(message: str) -> ApiError:
    """503 with ``Retry-After``: the database could not be reached or could not store."""
    return _retry_later(message, "storage_unavailable")


def serving_unavailable(detail: str) -> ApiError:
    """503 with ``Retry-After``: the model server could not be reached."""
    return _retry_later(
        f"The model server is not reachable right now ({detail}). Please retry shortly.",
        "serving_unavailable",
    )


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    body = {
        "error": {
            "message": message,
            "type": TYPES.get(status, "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }
    response = JsonResponse(body, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def context_overflow(
    *, window: int, prompt_tokens: int, asked: int | None = None, at_least: bool = False
) -> ApiError:
    """400 ``context_length_exceeded``, in OpenAI's words: agents (OpenClaw among them) read
    this code and message as "compact the history and try again"."""
    if asked is None:
        detail = f"your messages contain {'at least ' if at_least else ''}{prompt_tokens} tokens"
    else:
        detail = (
            f"you requested {prompt_tokens + asked} tokens ({prompt_tokens} in the messages, "
            f"{asked} in the completion)"
        )
    return ApiError(
        400,
        f"This model's maximum context length is {window} tokens. However, {detail}. "
        "Please reduce the length of the messages or completion.",
        param="messages",
        code="context_length_exceeded",
    )
