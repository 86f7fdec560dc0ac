"""Publishing a PolicyVersion: load its adapter into every serving replica, then make it live.

Publishing never interrupts serving: vLLM keeps answering while an adapter loads, new requests
ask for the new adapter's name, and requests in flight finish on the one they started with. If
any replica refuses, nothing changes. Rollback is the same path for an older version.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from trainer import publish
from webapp.learning.models import PolicyVersion


class PublishFailed(RuntimeError):
    """A serving replica refused the adapter; the version stays as it was."""


class AdapterPush(Protocol):
    """Loads an adapter folder into every replica under ``lora_name`` (trainer.publish.push)."""

    def __call__(
        self,
        adapter_dir: str | Path,
        *,
        lora_name: str,
        serving_urls: Sequence[str],
        timeout: float = ...,
        api_key: str = ...,
    ) -> list[dict[str, Any]]: ...


def policy_version_publish(
    *, version: PolicyVersion, push: AdapterPush | None = None
) -> PolicyVersion:
    """Load the version into every serving replica (``push``, the real one by default), then
    make it the live one of its lineage (rollback: an older version of it); PublishFailed when
    it failed the gate or a replica refused it."""
    push = publish.push if push is None else push
    if version.status == PolicyVersion.Status.REJECTED:
        raise PublishFailed(f"{version.label} failed the probe gate and cannot be published")
    if version.number != 0:
        try:
            push(
                version.adapter_path,
                lora_name=version.served_name(settings.PARLEY_MODEL_ID),
                serving_urls=settings.VLLM_BASE_URLS,
                timeout=60,
                api_key=settings.VLLM_API_KEY,
            )
        except publish.PublishError as exc:
            if "already" not in str(exc).lower():
                raise PublishFailed(str(exc)) from exc
    with transaction.atomic():
        # Only the version's own lineage changes: other users keep theirs.
        PolicyVersion.objects.select_for_update().filter(
            status=PolicyVersion.Status.LIVE, owner_id=version.owner_id
        ).exclude(pk=version.pk).update(status=PolicyVersion.Status.RETIRED)
        version.status = PolicyVersion.Status.LIVE
        version.published_at = timezone.now()
        version.save(update_fields=["status", "published_at"])
    return version


@transaction.atomic
def policy_lineage_reset(*, owner_id: int) -> PolicyVersion | None:
    """Take a user's lineage back to the shared model: their live version is marked rolled
    back, so their requests and their next update use the shared live version again. Their
    versions stay (nothing is wiped; any can be published again). The version that was live,
    or None when they had none."""
    live = (
        PolicyVersion.objects.select_for_update()
        .filter(owner_id=owner_id, status=PolicyVersion.Status.LIVE)
        .first()
    )
    if live is not None:
        live.status = PolicyVersion.Status.ROLLED_BACK
        live.save(update_fields=["status"])
    return live
