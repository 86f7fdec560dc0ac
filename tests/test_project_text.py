"""The project's own text: a README a newcomer can read, and no development history anywhere.

Git keeps the history of how Parley was built; the tracked files describe what it is. So no
tracked text file may speak of the development process itself: numbered or ordinal working
sessions, stops, CI submissions, commit hashes quoted in prose, timings of past CI runs. The
patterns leave the domain meaning of "session" alone (a chat session, ``X-Session-Id``,
``PARLEY_SESSION_IDLE_MINUTES``, pytest's session scope, Django's session middleware).

No database, no network: ``python -m pytest -p no:django tests/test_project_text.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 250
README_FIRST_LINES = 80  # a newcomer reaches "how to chat" and "how to call /v1" within these

# Not scanned: CI's own scripts, and third-party files vendored as they were published.
SKIPPED_PREFIXES = (".ci/", "static/vendor/")

_ORDINAL = (
    r"(?:fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|[a-z]+teenth"
    r"|[a-z]*tieth|(?:twenty|thirty|forty)[- ]?(?:first|second|third|[a-z]+th)"
    r"|\d+(?:st|nd|rd|th))"
)
HISTORY_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        # "session 12", "stop 33": the numbered steps of the development process
        "numbered session or stop": r"\b(?:session|stop)\s+[0-9]+\b",
        # "the sixteenth session", "since the 20th session"
        "ordinal session": rf"\b{_ORDINAL}\s+session(?:s|'s)?\b",
        # "(second session; ...)", "in the first session": only after a parenthesis, preposition
        # or article, so that a user's "first session" stays possible as a domain phrase
        "first-to-third session": r"(?:\(|\b(?:since|in|until|before|after|from|of|the|a)\s+)"
        r"(?:first|second|third)\s+session(?:s|'s)?\b",
        "this session": r"\bthis\s+session\b",
        "previous sessions": r"\b(?:previous|earlier|past|later)\s+sessions?\b",
        # a CI submission, not a form's
        "submission": r"\b(?:this|that|the|a|each|every|previous|earlier|last|next|later)\s+"
        r"submissions?\b(?!\s+(?:of|form|button|handler))",
        "commit quoted in prose": r"\bcommit\s+[0-9a-f]{7,40}\b",
        "a past change": r"\b(?:since|before|until)\s+this\s+(?:change|fix|commit)\b"
        r"|\bbefore\s+the\s+fix\b",
        "other people's work beside a run": r"\b(?:helpers|other\s+engineers)'?\s+work\b",
        "CI timings": r"\bCI\b[^.\n]{0,60}?\b\d+(?:\.\d+)?\s?(?:s|seconds|min|minutes)\b",
    }.items()
}


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    files = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if name.startswith(SKIPPED_PREFIXES) or not path.is_file():
            continue  # skipped, or deleted in the working tree and not yet committed
        if path == Path(__file__).resolve():
            continue  # this file quotes what the patterns must catch
        files.append(path)
    return files


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (a NUL byte, or not UTF-8)."""
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def history_hits(paths: list[Path]) -> list[str]:
    """``file:line: [pattern] text`` for every line of ``paths`` that speaks of history."""
    hits = []
    for path in paths:
        text = _text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for name, pattern in HISTORY_PATTERNS.items():
                match = pattern.search(line)
                if match:
                    start = max(0, match.start() - 60)
                    excerpt = line[start : match.end() + 60].strip()
                    hits.append(f"{path.relative_to(ROOT)}:{number}: [{name}] {excerpt}")
    return hits


def test_no_tracked_file_speaks_of_the_projects_development_history() -> None:
    hits = history_hits(_tracked_text_files())
    print("\n".join(hits))
    assert not hits, f"{len(hits)} lines speak of the development history:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "line",
    [
        "On by default since the sixteenth session.",
        "Measured in the 20th session on CI.",
        "(second session; pip's download cache was warm)",
        "stop 33 took 1486 s",
        "the run of session 12",
        "Before this session it reached vLLM 40-200 ms late.",
        "Earlier sessions measured it on two preferences.",
        "the fix landed in commit 152ef7c",
        "the next submission ran the suite",
        ".ci/run took 22.6 minutes in all on CI",
        "2 helpers' work beside it",
        "Since this change an answer meets a preference only if it is not broken.",
    ],
)
def test_the_patterns_catch_development_history(line: str) -> None:
    assert any(pattern.search(line) for pattern in HISTORY_PATTERNS.values()), line


@pytest.mark.parametrize(
    "line",
    [
        "X-Session-Done: 1 closes the session",
        "PARLEY_SESSION_IDLE_MINUTES closes a session after 30 minutes",
        "Start each once per test session.",
        '@pytest.fixture(scope="session")',
        "the external session id of the conversation",
        "A browser's session cookie is no key.",
        "origin check, session auth, routing",
        "a new session every two turns",
        "with session cookies marked secure",
        "both sessions close after the idle timeout",
        "the form submission of the log-in page",
        "a user's first session with the API",
        "CI prints the 25 slowest tests.",
    ],
)
def test_the_patterns_leave_the_domain_meaning_of_session_alone(line: str) -> None:
    assert not any(pattern.search(line) for pattern in HISTORY_PATTERNS.values()), line


def _headings(lines: list[str]) -> list[tuple[int, str]]:
    """(1-based line number, heading text) of the Markdown headings outside code blocks."""
    headings, in_code = [], False
    for number, line in enumerate(lines, start=1):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            headings.append((number, line.lstrip("#").strip()))
    return headings


def test_the_readme_is_short_enough_to_read() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail to docs/"
    )


@pytest.mark.parametrize(
    "what, pattern",
    [("how to chat", r"\bchat\b"), ("how to call /v1", r"/v1\b")],
)
def test_the_readme_says_how_to_use_parley_early(what: str, pattern: str) -> None:
    headings = _headings(README.read_text().splitlines())
    found = [number for number, text in headings if re.search(pattern, text, re.IGNORECASE)]
    assert found, f"README.md has no heading on {what} (matching {pattern!r})"
    assert found[0] <= README_FIRST_LINES, (
        f"README.md's heading on {what} is on line {found[0]}, after line {README_FIRST_LINES}"
    )


def test_every_page_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\(((?:docs|trainer)/[^)#\s]+)", README.read_text())
    assert links
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to missing pages: {missing}"


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_docs_page_opens_with_a_title_and_what_it_is_for(page: Path) -> None:
    lines = page.read_text().splitlines()
    assert len(lines) > 2 and lines[0].startswith("# "), f"{page.name}: no '# Title' first line"
    assert not lines[1].strip() and lines[2].strip(), (
        f"{page.name}: the title is not followed by a paragraph saying what the page is for"
    )


def test_the_docs_build_as_a_site_with_no_broken_link(tmp_path: Path) -> None:
    """``make docs``: MkDocs in strict mode fails on a broken link or anchor, or a page the nav
    leaves out."""
    pytest.importorskip("mkdocs", reason="mkdocs is in requirements-test.txt")
    pytest.importorskip("material", reason="mkdocs-material is in requirements-test.txt")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert (tmp_path / "index.html").is_file() and (tmp_path / "api" / "index.html").is_file()
