"""Celery entry points: the one seam where trainer/ meets webapp/."""

from trainer.tasks import health, judging, sessions, training

__all__ = ["health", "judging", "sessions", "training"]
