"""A user's learning preferences: pausing and resuming what their feedback trains.

Pausing changes nothing that is recorded: answers are still judged and become samples (kept,
exported, shown on "My model"); the training trigger and the batch leave them out
(``workflows.claiming.claimable_samples``) until the user resumes, in either learning scope.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.learning.models import LearningPreference


def learning_paused(*, user_id: int | None) -> bool:
    if user_id is None:
        return False
    return LearningPreference.objects.filter(user_id=user_id, paused=True).exists()


@transaction.atomic
def learning_pause_set(*, user: Any, paused: bool) -> LearningPreference:
    preference, _ = LearningPreference.objects.select_for_update().get_or_create(user=user)
    if preference.paused != paused:
        preference.paused = paused
        preference.save(update_fields=["paused", "updated_at"])
    return preference
