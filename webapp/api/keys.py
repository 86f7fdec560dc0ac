"""API keys: create (the secret is shown once), authenticate, revoke, and whether a key's requests
are given its owner's memories. The only writer of ``ApiKey``."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from webapp.api.models import ApiKey

PREFIX = "pk-"


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class ApiKeyLimitReached(Exception):
    """The owner already has ``USER_MAX_API_KEYS`` active keys; the message says what to do."""


@transaction.atomic
def api_key_create(*, owner: Any, name: str = "") -> tuple[ApiKey, str]:
    """A new key for ``owner``; returns the row and the secret, which is never stored.

    Raises ``ApiKeyLimitReached`` past ``USER_MAX_API_KEYS`` active keys: every key has its
    own rate limit, so unlimited keys would mean an unlimited rate.
    """
    limit = settings.USER_MAX_API_KEYS
    # The owner's row is locked so two concurrent creations cannot both pass the count.
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    active = ApiKey.objects.filter(owner=owner, revoked_at__isnull=True).count()
    if active >= limit:
        plural = "" if limit == 1 else "s"
        raise ApiKeyLimitReached(
            f"You already have {limit} active API key{plural}, the most allowed; "
            "revoke one you no longer use first."
        )
    secret = PREFIX + secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        owner=owner, name=name.strip()[:100], prefix=secret[:11], secret_hash=_hash(secret)
    )
    return key, secret


def api_key_authenticate(*, secret: str) -> ApiKey | None:
    """The active key with this secret (its owner loaded), or None."""
    if not secret.startswith(PREFIX) or len(secret) > 200:
        return None
    key = (
        ApiKey.objects.select_related("owner")
        .filter(secret_hash=_hash(secret), revoked_at__isnull=True, owner__is_active=True)
        .first()
    )
    if key is not None:
        now = timezone.now()
        # Write at most once a minute per key: a busy client should not turn reads into writes.
        if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


_on_revoke: list[Callable[[], None]] = []


def on_key_revoked(forget: Callable[[], None]) -> Callable[[], None]:
    """Register ``forget`` (a cache of keys, e.g. admission's) to run when a key is revoked or
    changed."""
    _on_revoke.append(forget)
    return forget


def _forget_keys() -> None:
    for forget in _on_revoke:
        forget()  # this process forgets it now; the others check it before their next answer


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    _forget_keys()
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def api_key_set_serves_memory(*, key: ApiKey, serves: bool) -> ApiKey:
    """Whether the key's requests are given its owner's memories (off for an agent that brings
    its own memory); from the key's next request on."""
    if key.serves_memory != serves:
        key.serves_memory = serves
        key.save(update_fields=["serves_memory"])
        _forget_keys()
    return key


def api_key_list_for_user(*, user: Any) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(owner=user)


def api_key_get_for_user(*, user: Any, pk: int) -> ApiKey:
    try:
        return ApiKey.objects.get(pk=pk, owner=user)
    except ApiKey.DoesNotExist as exc:
        raise Http404("No such API key") from exc
