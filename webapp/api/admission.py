"""Which key is asking and which policy version answers a /v1 chat request.

The first token must not wait on the database. A key seen in the last ``FRESH_S`` seconds is
taken as it was. A key seen within ``TRUSTED_S`` starts the model at once with what was
remembered, and is looked up again while the model reads the prompt (``Admission.recheck``):
the view gives out nothing until that answer is in, so a revoked key still gets its 401 and a
newly published version still answers (the view restarts the model on it). A key not seen
before is looked up first: nobody without a valid key makes the model do any work.

Requests that need a lookup together share one, so a burst of streams costs one database trip.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError

from webapp.api.errors import ApiError, storage_unavailable
from webapp.api.keys import api_key_authenticate, on_key_revoked
from webapp.api.models import ApiKey
from webapp.learning.models import PolicyVersion
from webapp.learning.selectors import policy_version_for
from webapp.memory.selectors import ServedMemory, memories_served
from webapp.memory.signals import on_memories_changed

FRESH_S = 2.0
TRUSTED_S = 600.0
_MAX_REMEMBERED = 10_000

Memories = tuple[ServedMemory, ...]
Looked = tuple[ApiKey, PolicyVersion, Memories]
Lookup = asyncio.Future[Looked]
_remembered: dict[tuple[str, str], tuple[float, ApiKey, PolicyVersion, Memories]] = {}
_lookups: dict[tuple[str, str], Lookup] = {}


@dataclass(frozen=True)
class Admission:
    key: ApiKey
    version: PolicyVersion
    memories: Memories = ()
    """The owner's memories to serve (none when the key serves none)."""
    # The database's answer for a remembered key, still on its way; None when already checked.
    recheck: Lookup | None = None


def model_resolve(model: str, *, owner_id: int | None = None) -> PolicyVersion:
    """The policy version a request's ``model`` names for the key's owner, or the 404 it gets.

    ``parley`` is the owner's own live version in user scope (else the shared one, else the
    base); the base model's name is always the base.
    """
    if model == settings.PARLEY_MODEL_ID:
        return policy_version_for(user=owner_id)
    if model == settings.BASE_MODEL_DIR.name:
        return PolicyVersion.objects.get(number=0)
    raise ApiError(
        404,
        f"The model '{model}' does not exist; use '{settings.PARLEY_MODEL_ID}' "
        "(GET /v1/models lists them).",
        param="model",
        code="model_not_found",
    )


def key_and_version_lookup(secret: str, model: str) -> Looked:
    """One trip to the database: the key, then the version and the memories to serve."""
    try:
        key = api_key_authenticate(secret=secret)
        if key is None:
            raise ApiError(401, "Incorrect or revoked API key provided.", code="invalid_api_key")
        memories = memories_served(owner_id=key.owner_id) if key.serves_memory else ()
        return key, model_resolve(model, owner_id=key.owner_id), memories
    except DatabaseError as exc:
        raise storage_unavailable(
            "The database cannot be reached right now; please retry shortly."
        ) from exc


async def _look_up(secret: str, model: str) -> Looked:
    try:
        key, version, memories = await sync_to_async(key_and_version_lookup)(secret, model)
    except ApiError:
        _remembered.pop((secret, model), None)
        raise
    if len(_remembered) >= _MAX_REMEMBERED:
        _remembered.clear()
    _remembered[(secret, model)] = (time.monotonic(), key, version, memories)
    return key, version, memories


def _shared_lookup(secret: str, model: str) -> Lookup:
    """The lookup in flight for this key and model, started if there is none."""
    name = (secret, model)
    lookup = _lookups.get(name)
    if lookup is None:
        lookup = asyncio.ensure_future(_look_up(secret, model))
        _lookups[name] = lookup

        def done(finished: Lookup) -> None:
            if _lookups.get(name) is finished:
                del _lookups[name]
            if not finished.cancelled():
                finished.exception()  # retrieved here too: a recheck nobody awaits is no error

        lookup.add_done_callback(done)
    return lookup


async def admission(secret: str, model: str) -> Admission:
    remembered = _remembered.get((secret, model))
    age = time.monotonic() - remembered[0] if remembered is not None else math.inf
    if remembered is not None and age < FRESH_S:
        return Admission(*remembered[1:])
    lookup = _shared_lookup(secret, model)
    if remembered is not None and age < TRUSTED_S:
        return Admission(*remembered[1:], recheck=lookup)
    return Admission(*await asyncio.shield(lookup))


@on_memories_changed
def forget_memories(owner_id: int) -> None:
    """Forget the remembered keys of a person whose memories changed in this process."""
    for name, remembered in list(_remembered.items()):
        if remembered[1].owner_id == owner_id:
            _remembered.pop(name, None)


@on_key_revoked
def forget_keys() -> None:
    """Forget every remembered key in this process (a key was revoked here)."""
    _remembered.clear()
