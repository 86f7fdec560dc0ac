"""python manage.py create_api_key --user NAME [--name LABEL]: print a new key for scripts."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.api.keys import ApiKeyLimitReached, api_key_create


class Command(BaseCommand):
    help = "Create an API key for a user and print it (it is shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username that owns the key")
        parser.add_argument("--name", default="", help="a label to recognise the key by")
        parser.add_argument(
            "--create-user", action="store_true", help="create the user first if it does not exist"
        )

    def handle(self, *args: object, **options: object) -> None:
        users = get_user_model()
        username = str(options["user"])
        user = users.objects.filter(username=username).first()
        if user is None:
            if not options["create_user"]:
                raise CommandError(f"no user {username!r}; create it first or pass --create-user")
            user = users.objects.create_user(username=username)
            user.set_unusable_password()
            user.save()
        try:
            _, secret = api_key_create(owner=user, name=str(options["name"]))
        except ApiKeyLimitReached as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(secret)
