"""The launcher's stop leaves nothing behind: processes honcho started are listed before it is
signalled, and any that outlive it (honcho killed after its 30 s, a worker still finishing an
update) are killed, instead of running on without their database."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil

from webapp.infra.launcher import _descendants, _kill_all


def test_processes_orphaned_by_a_killed_parent_are_killed_too() -> None:
    # A parent (standing in for honcho) and its child, both ignoring SIGTERM.
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)']); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 20
    while len(_descendants(parent.pid)) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    tree = _descendants(parent.pid)
    assert tree, "the child did not start"
    parent.send_signal(signal.SIGKILL)  # the parent goes; its child is orphaned, still running
    parent.wait(timeout=10)
    assert all(p.is_running() for p in tree)
    _kill_all(tree)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
    _kill_all(tree)  # already gone: nothing to do, no error
