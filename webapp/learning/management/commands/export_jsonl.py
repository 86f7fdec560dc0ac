"""python manage.py export_jsonl [--out FILE] [--user NAME]: everything, one JSON per line."""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from webapp.learning.export import export_all


class Command(BaseCommand):
    help = (
        "Export conversations, judgements, samples, policy versions and training updates as "
        "JSONL (fields: see docs/learning.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", default="-", help="file to write (default: stdout)")
        parser.add_argument("--user", default="", help="only this user's data")

    def handle(self, *args: object, **options: object) -> None:
        owner = None
        if options["user"]:
            owner = get_user_model().objects.filter(username=options["user"]).first()
            if owner is None:
                raise CommandError(f"no user {options['user']!r}")
        out = sys.stdout if options["out"] == "-" else open(str(options["out"]), "w")
        counts: dict[str, int] = {}
        try:
            for record in export_all(owner=owner):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                counts[record["type"]] = counts.get(record["type"], 0) + 1
        finally:
            if out is not sys.stdout:
                out.close()
        self.stderr.write("exported " + ", ".join(f"{n} {t}s" for t, n in counts.items()))
