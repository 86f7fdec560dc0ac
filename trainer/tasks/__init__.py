"""Celery entry points: the one seam where trainer/ meets webapp/."""

from trainer.tasks import health

__all__ = ["health"]
