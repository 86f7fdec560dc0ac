"""How well the secret detector (webapp.learning.secret_scan) tells secrets from ordinary text.

    python -m bench.secret_alarms [--show]

Reads, side by side in one run:
- the labelled sets (bench/data/secrets_*.json): secrets of many kinds in many languages, made
  up in the real formats, and ordinary text and code that could pass for them: secrets found
  and false alarms, per set and per language of the held-out one. ``secrets_labelled`` was
  written with the rules; ``secrets_blind`` and ``secrets_held_out`` were written blind to them
  and then tuned on (each file's ``_about`` gives its first reading); ``secrets_fresh`` was
  written blind and is never tuned on;
- ordinary chat: every prompt, next state, preference and recorded answer of the benchmarks
  (bench/data/*.json, bench/results/**/*.json): the share taken for a secret;
- code: Parley's own Python, a function at a time, as code answers look: the share taken.

A false alarm costs that turn's training only (docs/security.md); a missed secret can be learnt.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webapp.learning.secret_scan import secret_kinds, secrets_in

ROOT = Path(__file__).resolve().parent.parent
SETS = ("secrets_labelled", "secrets_blind", "secrets_held_out", "secrets_fresh")
HELD_OUT = "secrets_fresh"


def labelled(name: str = "secrets_labelled") -> dict:
    """A labelled set, its cases as {"text", "kind", "lang"} dicts."""
    data = json.loads((ROOT / "bench" / "data" / f"{name}.json").read_text())
    for part in ("secrets", "ordinary"):
        data[part] = [case if isinstance(case, dict) else {"text": case} for case in data[part]]
    return data


def set_figures(name: str) -> dict[str, Any]:
    """Secrets found and ordinary texts taken for one, in all and per language."""
    cases = labelled(name)
    figures: dict[str, Any] = {"found": 0, "secrets": 0, "alarms": 0, "ordinary": 0, "by": {}}
    for part, hit in (("secrets", "found"), ("ordinary", "alarms")):
        total = "secrets" if part == "secrets" else "ordinary"
        for case in cases[part]:
            lang = figures["by"].setdefault(
                case.get("lang", "?"), {"found": 0, "secrets": 0, "alarms": 0, "ordinary": 0}
            )
            flagged = bool(secret_kinds(case["text"]))
            for row in (figures, lang):
                row[total] += 1
                row[hit] += flagged
    return figures


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        if len(value.split()) >= 4 and not value.startswith("python -m "):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def chat_texts() -> list[str]:
    """The benchmarks' prompts, next states, preferences and recorded answers, each once."""
    files = sorted((ROOT / "bench" / "data").glob("*.json"))
    files += sorted((ROOT / "bench" / "results").glob("**/*.json"))
    texts: dict[str, None] = {}
    for path in files:
        if path.name.startswith("secrets_"):  # the labelled sets are read above
            continue
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        texts.update(dict.fromkeys(_strings(data)))
    return list(texts)


def code_texts() -> list[str]:
    """Parley's own functions, one text each, as a code answer would show them."""
    texts = []
    for path in sorted([*ROOT.glob("webapp/**/*.py"), *ROOT.glob("trainer/**/*.py")]):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                texts.append(ast.get_source_segment(source, node) or "")
    return [text for text in texts if text]


def alarm_share(texts: list[str], show: bool) -> tuple[int, int]:
    alarms = 0
    for text in texts:
        found = secrets_in(text)
        if found:
            alarms += 1
            if show:
                print(f"    {[s.kind for s in found]}: {text[:100]!r}")
    return alarms, len(texts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", action="store_true", help="print each false alarm")
    args = parser.parse_args(argv)
    failed = False
    for name in SETS:
        if not (ROOT / "bench" / "data" / f"{name}.json").exists():
            continue
        figures = set_figures(name)
        print(
            f"{name}: secrets found {figures['found']}/{figures['secrets']}, "
            f"ordinary taken for one {figures['alarms']}/{figures['ordinary']}"
        )
        if name == HELD_OUT:
            for lang, row in sorted(figures["by"].items()):
                print(
                    f"  {lang}: found {row['found']}/{row['secrets']}, "
                    f"false alarms {row['alarms']}/{row['ordinary']}"
                )
        elif name == "secrets_labelled":
            failed = figures["found"] < figures["secrets"] or bool(figures["alarms"])
    rows = [
        ("benchmarks' chat text", chat_texts()),
        ("Parley's own functions (code)", code_texts()),
    ]
    for name, texts in rows:
        alarms, total = alarm_share(texts, args.show)
        print(f"{name}: {alarms}/{total} taken for a secret ({alarms / max(total, 1):.1%})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
