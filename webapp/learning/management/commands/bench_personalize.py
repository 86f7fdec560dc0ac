"""python manage.py bench_personalize [options]: the personalization benchmark.

The benchmark itself is bench/personalize.py.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Simulate a user with a preference, run the live loop, score each published version."

    def run_from_argv(self, argv: list[str]) -> None:
        # The benchmark starts its own Parley (scratch var/, free ports) and parses its options.
        from bench.personalize import main

        sys.exit(main(argv[2:]))

    def handle(self, *args: object, **options: object) -> None:  # pragma: no cover - see above
        from bench.personalize import main

        main([])
