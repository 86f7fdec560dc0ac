"""Reads of the learning state that serving and the UI need."""

from __future__ import annotations

from webapp.learning.models import PolicyVersion


def policy_version_live() -> PolicyVersion:
    """The version new requests are served by: the live adapter, else the base model (v0)."""
    live = PolicyVersion.objects.filter(status=PolicyVersion.Status.LIVE).first()
    if live is not None:
        return live
    base, _ = PolicyVersion.objects.get_or_create(
        number=0, defaults={"status": PolicyVersion.Status.LIVE}
    )
    return base
