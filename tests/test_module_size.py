"""Every Python module stays small enough to hold one concept: at most ``MAX_LINES`` lines.

A module past that is split by concept, not in half. Migrations are generated and left out.

No database, no network: ``python -m pytest tests/test_module_size.py``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def tracked_modules() -> list[Path]:
    """The git-tracked ``.py`` files outside migrations that are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    paths = (ROOT / name for name in filter(None, listed.split("\0")))
    # a tracked file deleted in the working tree and not yet committed is no module any more
    return [p for p in paths if "migrations" not in p.relative_to(ROOT).parts and p.is_file()]


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_every_module_is_at_most_400_lines() -> None:
    modules = tracked_modules()
    assert modules, "git listed no Python module"
    sizes = {path.relative_to(ROOT).as_posix(): line_count(path) for path in modules}
    offenders = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    for name, n in offenders.items():
        print(f"{name}: {n} lines (at most {MAX_LINES})")
    assert offenders == {}
