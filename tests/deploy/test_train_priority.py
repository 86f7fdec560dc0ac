"""Training yields the CPU to serving: the Procfile starts the train worker niced
(PARLEY_TRAIN_NICE, 10), so on a small host a chat's tokens come before an update's steps."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT


def _train_line(procfile: str) -> str:
    [line] = [
        line.split(":", 1)[1].strip()
        for line in (ROOT / procfile).read_text().splitlines()
        if line.startswith("train:")
    ]
    return line


@pytest.mark.parametrize("procfile", ["Procfile", "Procfile.noserve"])
@pytest.mark.parametrize(("setting", "expected"), [(None, 10), ("15", 15)])
def test_the_train_worker_runs_at_a_lower_cpu_priority(
    procfile: str, setting: str | None, expected: int
) -> None:
    # The line as honcho runs it (through a shell), with Celery swapped for a report.
    line = _train_line(procfile)
    assert "-m celery -A webapp worker -Q train" in line
    command = line.split(" python ", 1)[0] + f" {sys.executable} -c 'import os; print(os.nice(0))'"
    env = {"PATH": "/usr/bin:/bin"} | ({"PARLEY_TRAIN_NICE": setting} if setting else {})
    base = int(
        subprocess.run(
            [sys.executable, "-c", "import os; print(os.nice(0))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    niced = subprocess.run(
        ["sh", "-c", command], env=env, capture_output=True, text=True, check=True
    )
    assert int(niced.stdout) == min(base + expected, 19)
