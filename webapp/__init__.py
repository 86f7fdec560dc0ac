"""Parley's Django project. The Celery app is loaded here so @shared_task binds to it."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]
