"""The real OpenClaw client, installed from the npm registry into a folder of the project's own.

OpenClaw needs Node >= 24.16; the system's Node may be older, so Node 24 comes from the npm
registry's ``node`` package into the same folder (``var/openclaw/``, never on PATH). Each run
gets a state folder of its own (config, sessions, workspace), so nothing is read from or
written to the user's ``~/.openclaw``.

    python -m bench.openclaw_client            # install (about 30 s and 770 MB)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.launching import ROOT

OPENCLAW_VERSION = "2026.9.6"
NODE_VERSION = "24.21.0"
CLIENT_DIR = Path(os.environ.get("PARLEY_OPENCLAW_DIR") or ROOT / "var" / "openclaw")


def bin_dir(folder: Path = CLIENT_DIR) -> Path:
    return folder / "node_modules" / ".bin"


def installed(folder: Path = CLIENT_DIR) -> bool:
    """Node 24 and the pinned OpenClaw are both in ``folder``."""
    package = folder / "node_modules" / "openclaw" / "package.json"
    if not (bin_dir(folder) / "node").exists() or not package.exists():
        return False
    return json.loads(package.read_text()).get("version") == OPENCLAW_VERSION


def install(folder: Path = CLIENT_DIR) -> None:
    """``npm install`` Node 24, then OpenClaw with that Node first on the PATH (its install
    scripts refuse an older Node). Needs the system's ``npm`` and the npm registry."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: apt-get install npm (or nodejs), then retry")
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "package.json").exists():
        (folder / "package.json").write_text('{"name": "parley-openclaw", "private": true}\n')
    env = {**os.environ, "PATH": f"{bin_dir(folder)}{os.pathsep}{os.environ.get('PATH', '')}"}
    # Two tries, not npm's default of many minutes of retries, where the registry is out of reach.
    quiet = ["--no-audit", "--no-fund", "--loglevel=error", "--fetch-retries=1"]
    for spec in (f"node@{NODE_VERSION}", f"openclaw@{OPENCLAW_VERSION}"):
        started = time.monotonic()
        print(f"openclaw | npm install {spec} into {folder}", flush=True)
        subprocess.run([npm, "install", *quiet, spec], cwd=folder, env=env, check=True)
        print(f"openclaw | {spec} installed in {time.monotonic() - started:.0f} s", flush=True)


@dataclass(frozen=True)
class Profile:
    """What OpenClaw is told about Parley's model, and how much of its agent it brings.

    ``slim`` is the documented profile for a small context: two tools (read, exec), no skills,
    no bootstrap files, no memory plugin. ``full`` is OpenClaw's default agent (12 tools, its
    whole workspace prompt): about 15k tokens before the first word, for large-context models.
    """

    name: str = "slim"
    context_window: int = 8192
    max_tokens: int = 256


def provider_config(
    *, base_url: str, api_key: str, profile: Profile, workspace: Path | None = None
) -> dict[str, Any]:
    """The ``openclaw.json`` that points OpenClaw's default agent at Parley: the README's and
    docs/openclaw.md's config (a test holds them equal). ``workspace``: the agent's folder
    (OpenClaw's own default, ``~/.openclaw/workspace``, when None)."""
    config: dict[str, Any] = {
        "models": {
            "providers": {
                "parley": {
                    "baseUrl": base_url.rstrip("/") + "/v1",
                    "apiKey": api_key,
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "parley",
                            "name": "Parley (learns from you)",
                            "reasoning": False,
                            "input": ["text"],
                            "contextWindow": profile.context_window,
                            "maxTokens": profile.max_tokens,
                        }
                    ],
                }
            },
        },
        "agents": {"defaults": {"model": {"primary": "parley/parley"}}},
    }
    if workspace is not None:
        config["agents"]["defaults"]["workspace"] = str(workspace)
    if profile.name == "slim":
        config["tools"] = {"allow": ["read", "exec"], "toolSearch": False}
        config["skills"] = {"allowBundled": []}
        config["plugins"] = {"slots": {"memory": "none"}}
        config["agents"]["defaults"].update(
            skipBootstrap=True,
            contextInjection="never",
            skills=[],
            compaction={"memoryFlush": {"enabled": False}},
        )
    return config


@dataclass
class TurnResult:
    message: str
    exit_code: int
    seconds: float
    reply: str
    log: str


class Agent:
    """OpenClaw's agent, run one turn at a time (``openclaw agent --local``) in a state folder
    of its own."""

    def __init__(self, state_dir: Path, config: dict[str, Any], folder: Path = CLIENT_DIR) -> None:
        self.state_dir = state_dir
        self.folder = folder
        (state_dir / "home").mkdir(parents=True, exist_ok=True)
        (state_dir / "openclaw.json").write_text(json.dumps(config, indent=2))
        workspace = config["agents"]["defaults"].get("workspace")
        if workspace:
            Path(workspace).mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{bin_dir(self.folder)}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(self.state_dir / "home"),
            "OPENCLAW_STATE_DIR": str(self.state_dir),
            "OPENCLAW_CONFIG_PATH": str(self.state_dir / "openclaw.json"),
            "OPENCLAW_NO_AUTO_UPDATE": "1",
            "NO_COLOR": "1",
        }

    def turn(self, message: str, *, session_id: str, timeout: float = 600) -> TurnResult:
        started = time.monotonic()
        command = [
            str(bin_dir(self.folder) / "openclaw"),
            *("agent", "--local", "--json", "--session-id", session_id, "--message", message),
        ]
        # A session of its own: a turn that times out is stopped with everything it started
        # (the shells of its exec tool, node workers), not only the openclaw process.
        process = subprocess.Popen(
            command,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=timeout)
            code = process.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            code, err = 124, err + "\n(timed out)"
        return TurnResult(
            message=message,
            exit_code=code,
            seconds=round(time.monotonic() - started, 1),
            reply=reply_text(out),
            log=err,
        )


def reply_text(out: str) -> str:
    """The reply in ``openclaw agent --json``'s output (its payloads' text), else ``out``.

    >>> reply_text('{"payloads": [{"text": "Paris."}, {"text": "(cut)"}], "meta": {}}')
    'Paris.\\n(cut)'
    """
    try:
        payloads = json.loads(out).get("payloads") or []
    except (ValueError, AttributeError):
        return out.strip()
    return "\n".join(p["text"] for p in payloads if isinstance(p, dict) and p.get("text"))


if __name__ == "__main__":
    if installed():
        print(f"openclaw | {OPENCLAW_VERSION} with Node {NODE_VERSION} already in {CLIENT_DIR}")
    else:
        install()
