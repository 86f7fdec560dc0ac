"""python manage.py ensure_admin: create the admin account on first start.

Takes DJANGO_SUPERUSER_USERNAME / _PASSWORD / _EMAIL from the environment when set; otherwise
creates ``admin`` with a generated password, prints it once and keeps it in var/admin.txt
(readable by the owner only) so a lost terminal does not lock anyone out.
"""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from webapp.config import write_private


class Command(BaseCommand):
    help = "Create the first admin account if there is none."

    def handle(self, *args: object, **options: object) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME") or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD") or ""
        email = os.environ.get("DJANGO_SUPERUSER_EMAIL") or ""
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email=email, password=password)
        if generated:
            note = settings.VAR_DIR / "admin.txt"
            write_private(note, f"username: {username}\npassword: {password}\n")
            self.stdout.write(
                f"ensure_admin | created the admin account: username {username!r}, "
                f"password {password!r} (also in {note})"
            )
        else:
            self.stdout.write(
                f"ensure_admin | created the admin account {username!r} from the environment"
            )
