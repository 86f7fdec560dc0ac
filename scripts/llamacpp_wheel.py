"""Build llama-cpp-python's wheel once per machine, showing the compiler's progress.

    python scripts/llamacpp_wheel.py WHEELS_DIR requirements-llamacpp.txt

PyPI has only its source for Linux, and pip builds it in silence for minutes; this builds it
into WHEELS_DIR (kept across checkouts and virtual environments, so a new clone or CI run
installs it in seconds) with a progress bar over the compiler's steps. A wheel already there
is kept. Only the library is built (no multimodal tools), for this machine's CPU.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = re.compile(rb"\[(\d+)/(\d+)\]")


def pinned(requirements: Path) -> str:
    for line in requirements.read_text().splitlines():
        if line.startswith("llama-cpp-python=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit(f"{requirements}: no llama-cpp-python pin")


def main() -> int:
    wheels, requirements = Path(sys.argv[1]).expanduser(), Path(sys.argv[2])
    version = pinned(requirements)
    if list(wheels.glob(f"llama_cpp_python-{version}-*.whl")):
        print(
            f"parley | llama-cpp-python {version}: the wheel built on this machine is in {wheels}"
        )
        return 0
    wheels.mkdir(parents=True, exist_ok=True)
    print(f"parley | building llama-cpp-python {version} (llama.cpp) once for this machine")
    env = {
        **os.environ,
        "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DLLAVA_BUILD=OFF"),
        "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
    }
    command = [
        *(sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "-v"),
        *("--no-deps", "--no-binary", "llama-cpp-python", "-w", str(wheels)),
        f"llama-cpp-python=={version}",
    ]
    started = time.monotonic()
    with tempfile.NamedTemporaryFile(prefix="llamacpp-build-", suffix=".log", delete=False) as log:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            step = STEP.search(line)
            if step:
                done, total = int(step.group(1)), int(step.group(2))
                bar = "#" * (30 * done // total)
                minutes = (time.monotonic() - started) / 60
                print(
                    f"\rparley | compiling [{bar:<30}] {done}/{total}  {minutes:4.1f} min",
                    end="",
                    flush=True,
                )
        status = process.wait()
    print()
    if status != 0:
        tail = Path(log.name).read_text(errors="replace").splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr)
        print(f"parley | building llama-cpp-python failed (full log: {log.name})", file=sys.stderr)
        return status
    os.unlink(log.name)
    print(f"parley | llama-cpp-python built in {(time.monotonic() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
