"""Unload retired versions: the serving replicas hold only live versions (and those still
writing an answer).

Publishing loads a version where its lineage is served and every replica loads versions on
first use, so without this each replica would keep every version it ever served. The periodic
sweep (``unload_retired_adapters``, on celery beat) asks each replica what it holds
(``GET /v1/models``) and unloads every Parley adapter (``<PARLEY_MODEL_ID>-v<number>``) that
may go:

- its version is not live, it stopped being live longer than ``PARLEY_ADAPTER_UNLOAD_GRACE_S``
  ago (longer than the longest answer), and no answer it is writing is unfinished (a
  ``streaming`` message of that version started within the grace); or
- its version is no longer in the database (a deleted lineage's).

A version that was never live (a candidate being published) counts from when it was made.
Other names (the base, adapters loaded by hand) are left alone. A request that asks for an
unloaded version later — a rollback, an old answer's alternatives — finds it missing and loads
it again (``webapp.inference.adapter_load``), so unloading never fails a request; the next
sweep unloads it again once it is idle.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from trainer import publish
from webapp.chat.models import Message
from webapp.learning.models import PolicyVersion

log = logging.getLogger(__name__)

ListAdapters = Callable[[str], list[str]]
"""The adapter names a replica holds (``trainer.publish.loaded_adapters``, or a fake)."""
UnloadAdapter = Callable[[str, str], None]
"""Unload one adapter (replica, name) from a replica (``trainer.publish.unload``, or a fake)."""


def version_number(name: str, *, model_id: str) -> int | None:
    """The policy version a served adapter name stands for, or None for any other name.

    >>> version_number("parley-v12", model_id="parley"), version_number("base", model_id="parley")
    (12, None)
    """
    match = re.fullmatch(rf"{re.escape(model_id)}-v(\d+)", name)
    return int(match.group(1)) if match else None


def versions_kept(*, numbers: Iterable[int], now: datetime, grace: timedelta) -> set[int]:
    """Of ``numbers``, the versions a replica keeps: live, not live for ``grace`` yet, or with
    an answer started within ``grace`` that is still being written."""
    numbers = set(numbers)
    cutoff = now - grace
    kept = set()
    for version in PolicyVersion.objects.filter(number__in=numbers):
        ended = version.retired_at or version.published_at or version.created_at
        if version.status == PolicyVersion.Status.LIVE or ended > cutoff:
            kept.add(version.number)
    writing = Message.objects.filter(
        policy_version__number__in=numbers - kept,
        status=Message.Status.STREAMING,
        created_at__gt=cutoff,
    ).values_list("policy_version__number", flat=True)
    return kept | set(writing)


def _real_loaded(replica: str) -> list[str]:
    return publish.loaded_adapters(replica, api_key=settings.VLLM_API_KEY)


def _real_unload(replica: str, name: str) -> None:
    publish.unload(name, serving_url=replica, api_key=settings.VLLM_API_KEY)


def adapters_unload_retired(
    *,
    loaded: ListAdapters = _real_loaded,
    unload: UnloadAdapter = _real_unload,
    now: datetime | None = None,
) -> dict[str, list[str]]:
    """Unload from each replica of ``VLLM_BASE_URLS`` the Parley adapters it may drop; the
    names unloaded, per replica. A replica that cannot say what it holds, or refuses an
    unload, is logged and left for the next sweep (a restarted replica holds nothing old)."""
    now = timezone.now() if now is None else now
    grace = timedelta(seconds=settings.ADAPTER_UNLOAD_GRACE_S)
    unloaded: dict[str, list[str]] = {}
    for replica in settings.VLLM_BASE_URLS:
        try:
            names = loaded(replica)
        except publish.PublishError as exc:
            log.info("cannot list the adapters of %s: %s", replica, exc)
            continue
        numbers = {
            name: number
            for name in names
            if (number := version_number(name, model_id=settings.PARLEY_MODEL_ID)) is not None
        }
        kept = versions_kept(numbers=numbers.values(), now=now, grace=grace)
        unloaded[replica] = []
        for name, number in sorted(numbers.items(), key=lambda item: item[1]):
            if number in kept:
                continue
            try:
                unload(replica, name)
            except publish.PublishError as exc:
                log.warning("could not unload %s from %s: %s", name, replica, exc)
                continue
            unloaded[replica].append(name)
        if unloaded[replica]:
            log.info("unloaded %s from %s", ", ".join(unloaded[replica]), replica)
    return unloaded
