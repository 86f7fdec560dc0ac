"""python manage.py publish_version N: make version N live (rollback too), loaded into its
lineage's home replica (``webapp.replicas``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.learning.models import PolicyVersion
from webapp.learning.workflows.publishing import PublishFailed, policy_version_publish


class Command(BaseCommand):
    help = "Publish (or roll back to) a policy version: load it where it is served, then live."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("number", type=int, help="the version number (0 = the base model)")

    def handle(self, *args: object, **options: object) -> None:
        version = PolicyVersion.objects.filter(number=options["number"]).first()
        if version is None:
            raise CommandError(f"no version v{options['number']}")
        try:
            policy_version_publish(version=version)
        except PublishFailed as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{version.label} is live")
