"""What each kind of feedback teaches, at today's defaults: feedback kind × preference.

    python -m bench.feedback_table [--runs DIR ...] [--at 8 16] [--out FILE]

Reads every replay run already written under ``--runs`` (``bench/results/replay-cpu`` by
default, recursively; not the ``partial/`` files of runs in progress), keeps those at today's
defaults (``bench.sweep_labels.run_label`` says "defaults"; a run that changed a setting, or
was scored or gated by older rules, is left out and counted), and prints one markdown table: a
row per preference (formatting ones first, then content ones), a column per feedback kind,
each cell the held-out score at the reported versions (mean ± half the range over the seeds
run), the peak of the mean curve up to the last of them, the worst served perplexity ratio and
the versions the gate refused. A cell with no run says so; a run that stopped before a
reported version shows "–" there. Follow-ups in German or Chinese are columns of their own;
"memory" (the preference said once as a memory, then only new questions) is scored without
the memory in the prompt. Below the table, what went wrong in the runs: refused versions, the
judge's unparsed and wrong votes, follow-ups that were new questions (no
signal), and the comparisons where no answer was better.

It makes no runs: ``python -m bench.replay --name NAME --feedback KIND --versions 16 --seeds 0 1
2`` makes a cell's (about 25-35 minutes a run on 2 cores). Runs from the `make run`
environment as well as `make bench`'s (it reads JSON only).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import ROOT
from bench.preferences import load_preferences
from bench.sweep_table import load_runs

FEEDBACK_COLUMNS = ("thumbs", "pairs", "followups", "followups/de", "followups/zh")
FEEDBACK_COLUMNS += ("comments", "corrections", "memory")
"""The table's columns, least effort first: what most people give, then what takes words; last
the preference said once as a memory, scored without it (what the adapter learnt on its own)."""

DEFAULT_RUNS = ROOT / "bench" / "results" / "replay-cpu"


def column_of(run: dict[str, Any]) -> str:
    """The column a run belongs to: its feedback kind, with the language of its follow-ups
    where that is not English.

    >>> column_of({"feedback": "followups", "language": "de"}), column_of({"feedback": "thumbs"})
    ('followups/de', 'thumbs')
    """
    language = run.get("language") or "en"
    return run["feedback"] if language == "en" else f"{run['feedback']}/{language}"


def at_defaults(run: dict[str, Any]) -> bool:
    """Whether the run used today's defaults: the default algorithm, and a label that names no
    setting but its language."""
    from trainer.config import UpdateConfig

    label = run["settings_label"]
    named = [part for part in label.split(", ") if not part.startswith("language=")]
    return run["algorithm"] == UpdateConfig().algorithm and (label == "defaults" or not named)


def newest_per_seed(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run per (column, preference, seed): the one that got furthest (more versions), the
    later file on a tie; the same cell is often re-run in a second folder."""
    best: dict[tuple[str, str, int], dict[str, Any]] = {}
    for run in runs:
        key = (column_of(run), run["preference"], run["seed"])
        kept = best.get(key)
        if kept is None or (len(run["versions"]), run["_mtime"]) > (
            len(kept["versions"]),
            kept["_mtime"],
        ):
            best[key] = run
    return list(best.values())


def spread(values: Sequence[float]) -> str:
    """Mean ± half the range, or the one value.

    >>> spread([0.5, 1.0]), spread([0.25]), spread([])
    ('0.75 ± 0.25', '0.25', '–')
    """
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    half = (max(values) - min(values)) / 2
    return f"{statistics.fmean(values):.2f} ± {half:.2f}"


def held_out(run: dict[str, Any], version: int, name: str) -> float:
    """A version's held-out score; for a memory run, without the memory in the prompt (as
    served it would count what the prompt does, not what was learnt).

    >>> v = {"scores": {"p": {"held_out": 0.5}}, "score_without_memory": 0.25}
    >>> held_out({"feedback": "memory", "versions": [v]}, 0, "p")
    0.25
    >>> held_out({"feedback": "comments", "versions": [v]}, 0, "p")
    0.5
    """
    entry = run["versions"][version]
    if run["feedback"] == "memory":
        return float(entry["score_without_memory"])
    return float(entry["scores"][name]["held_out"])


def cell(runs: Sequence[dict[str, Any]], at: Sequence[int]) -> str:
    """A cell's text: held-out at each reported version, then (seeds, worst served perplexity
    ratio, versions refused)."""
    if not runs:
        return "not run"
    name = runs[0]["preference"]
    scores = []
    for version in at:
        values = [held_out(r, version, name) for r in runs if version < len(r["versions"])]
        scores.append(spread(values))
    ratios = [
        v["ppl_ratio"] for r in runs for v in r["versions"][1:] if v.get("ppl_ratio") is not None
    ]
    refused = sum(len(r["summary"].get("refused") or []) for r in runs)
    worst = f"{max(ratios):.2f}×" if ratios else "no ppl"
    peak, peak_at = _peak(runs, name, last=max(at))
    return f"{' / '.join(scores)}, peak {peak:.2f}@v{peak_at} ({len(runs)}s, {worst}, {refused}r)"


def _peak(runs: Sequence[dict[str, Any]], name: str, *, last: int) -> tuple[float, int]:
    """The highest held-out score of the mean curve over the seeds (each version averaged over
    the seeds that reached it), up to version ``last``, and the first version at it."""
    curve = []
    for version in range(len(max((r["versions"] for r in runs), key=len))):
        if version > last:
            break
        values = [held_out(r, version, name) for r in runs if version < len(r["versions"])]
        curve.append(statistics.fmean(values))
    best = max(curve)
    return best, curve.index(best)


def problems(runs: Sequence[dict[str, Any]]) -> list[str]:
    """What went wrong or said nothing in the runs, one line per cell that had any."""
    lines = []
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        cells.setdefault((run["preference"], column_of(run)), []).append(run)
    for (name, column), group in sorted(cells.items()):
        said = []
        refused = [f"s{r['seed']}: v{', v'.join(map(str, r['summary']['refused']))}" for r in group]
        refused = [text for r, text in zip(group, refused, strict=True) if r["summary"]["refused"]]
        if refused:
            said.append("refused " + "; ".join(refused))
        judge = {k: sum(r["judge"].get(k, 0) for r in group) for k in group[0]["judge"]}
        if judge.get("votes"):
            unparsed = judge["votes"] - judge["parsed"]
            wrong = judge["parsed"] - judge["right"]
            said.append(f"votes {judge['votes']}: {unparsed} unparsed, {wrong} wrong")
        if judge.get("neutral"):
            said.append(f"{judge['neutral']} follow-ups were new questions")
        if judge.get("compared"):
            none = judge["compared"] - judge["chosen"]
            said.append(f"{judge['compared']} comparisons, none better in {none}")
        if said:
            lines.append(f"- {name}, {column}: " + "; ".join(said))
    return lines


def table(runs: Sequence[dict[str, Any]], at: Sequence[int], preferences: Sequence[Any]) -> str:
    """The markdown table, a row per preference that has a run, formatting ones first."""
    by_cell: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        by_cell.setdefault((run["preference"], column_of(run)), []).append(run)
    columns = [c for c in FEEDBACK_COLUMNS if any(column == c for _, column in by_cell)]
    ran = {name for name, _ in by_cell}
    ordered = sorted(
        (p for p in preferences if p.name in ran), key=lambda p: (bool(p.prompts), p.name)
    )
    head = ["preference", "base", *columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for preference in ordered:
        kind = "content" if preference.prompts else "format"
        row = [f"{preference.name} ({kind})", _base(preference.name, runs)]
        for column in columns:
            group = sorted(by_cell.get((preference.name, column), []), key=lambda r: r["seed"])
            row.append(cell(group, at))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _base(name: str, runs: Sequence[dict[str, Any]]) -> str:
    """The base model's held-out score (every run's version 0 agrees; the first is shown)."""
    first = next(r for r in runs if r["preference"] == name)
    return f"{held_out(first, 0, name):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.feedback_table", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", nargs="+", type=Path, default=[DEFAULT_RUNS])
    parser.add_argument("--at", nargs="+", type=int, default=[8, 16], help="versions reported")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    loaded = []
    found = (p for folder in args.runs for p in folder.rglob("replay-*.json"))
    for path in sorted(p for p in found if "partial" not in p.parts):  # runs in progress
        for run in load_runs([path]):
            loaded.append({**run, "_mtime": path.stat().st_mtime})
    kept = [run for run in loaded if at_defaults(run) and column_of(run) in FEEDBACK_COLUMNS]
    runs = newest_per_seed(kept)
    preferences = load_preferences(ROOT / "bench" / "data" / "preferences.json")
    at_text = " / ".join(f"v{v}" for v in args.at)
    text = "\n".join(
        [
            f"Held-out score at {at_text} (mean ± half the range over seeds), the peak of the "
            "mean curve and where (s seeds, the worst served perplexity ratio to the base, "
            "r versions refused by the gate).",
            "",
            table(runs, args.at, preferences),
            "",
            f"{len(runs)} runs at the defaults ({len(loaded) - len(kept)} others left out: "
            "changed settings, older rules, or a feedback kind not in the table).",
            *problems(runs),
        ]
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
