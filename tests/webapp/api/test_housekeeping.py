"""OpenClaw's housekeeping calls told from its turns, and its rewrites of a session's messages
taken out before matching: pure functions, on the texts OpenClaw really sends."""

from __future__ import annotations

import doctest

import pytest

from tests.webapp.api import openclaw_texts as oc
from webapp.api import housekeeping, rewrites
from webapp.api.housekeeping import Housekeeping, housekeeping_kind
from webapp.api.rewrites import steady, steady_head


def _sys(content: str) -> dict:
    return {"role": "system", "content": content}


def _user(content: str) -> dict:
    return {"role": "user", "content": content}


def _answer(content: str = "Paris.") -> dict:
    return {"role": "assistant", "content": content}


TOOL_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
FLUSH_HISTORY = [_sys(oc.MEMORY_FLUSH_SYSTEM), _user(oc.FIRST_IN_MEMORY_FLUSH), _answer()]


@pytest.mark.parametrize(
    ("messages", "kind"),
    [
        pytest.param(
            [_sys(oc.SUMMARY_SYSTEM), _user(oc.SUMMARY_USER)], Housekeeping.SUMMARY, id="summary"
        ),
        pytest.param(
            [_sys(oc.SUMMARY_SYSTEM), _user(oc.TURN_PREFIX_USER)],
            Housekeeping.SUMMARY,
            id="turn-prefix summary",
        ),
        pytest.param(
            [*FLUSH_HISTORY, _user(oc.MEMORY_FLUSH_USER)], Housekeeping.MEMORY_FLUSH, id="flush"
        ),
        pytest.param(  # the flush's tool call and its result: still the flush
            [*FLUSH_HISTORY, _user(oc.MEMORY_FLUSH_USER), _answer(""), TOOL_RESULT],
            Housekeeping.MEMORY_FLUSH,
            id="flush tool result",
        ),
        pytest.param(
            [_sys(oc.SYSTEM), _user(f"{oc.STAMP} {oc.HEARTBEAT}")],
            Housekeeping.HEARTBEAT,
            id="heartbeat",
        ),
        pytest.param(
            [_sys(oc.SYSTEM), _user(oc.HEARTBEAT_CONFIGURED)],
            Housekeeping.HEARTBEAT,
            id="configured heartbeat",
        ),
        pytest.param(
            [_user("Read HEARTBEAT.md if it exists (workspace context). Follow it strictly.")],
            Housekeeping.HEARTBEAT,
            id="older heartbeat",
        ),
    ],
)
def test_openclaws_housekeeping_calls_are_told_by_its_own_wording(messages, kind) -> None:
    assert housekeeping_kind(messages) == kind


LATER = _user(f"{oc.STAMP} And Berlin?")


@pytest.mark.parametrize(
    "messages",
    [
        pytest.param([_sys(oc.SYSTEM), _user(oc.FIRST)], id="first turn"),
        pytest.param([_sys(oc.SYSTEM_LATER), _user(oc.FIRST), _answer(), LATER], id="later"),
        # After compaction the summary opens the history; the turn is the user's.
        pytest.param(
            [_sys(oc.SYSTEM), _user(oc.COMPACTED_FIRST), _answer(), LATER], id="compacted"
        ),
        # A flush's or a heartbeat's prompt earlier in the history makes no later turn one.
        pytest.param(
            [_sys(oc.SYSTEM), _user(oc.MEMORY_FLUSH_USER), _answer(), LATER], id="after a flush"
        ),
        pytest.param(
            [_sys(oc.SYSTEM), _user(oc.HEARTBEAT), _answer("NO_REPLY"), LATER],
            id="after a heartbeat",
        ),
        pytest.param(
            [_user("Please summarize our conversation, and what is a heartbeat?")],
            id="asked for a summary",
        ),
    ],
)
def test_the_users_own_turns_are_no_housekeeping(messages) -> None:
    assert housekeeping_kind(messages) is None


def test_a_runtime_line_that_changes_within_a_session_is_taken_out() -> None:
    expected = f"{oc.STAMP} What is the capital of France?"
    for first in (oc.FIRST, oc.FIRST_WITH_WORKSPACE, oc.FIRST_IN_MEMORY_FLUSH):
        assert steady(first) == expected
        assert steady_head(first) == expected
        assert first.startswith(steady_head(oc.FIRST_WITH_WORKSPACE))


def test_a_runtime_line_joined_to_a_summary_with_no_break_is_taken_out() -> None:
    assert steady(oc.COMPACTED_FIRST).endswith("</summary>")
    assert steady_head(oc.COMPACTED_FIRST) == steady(oc.COMPACTED_FIRST)


def test_the_users_words_and_their_time_stamp_stay() -> None:
    other_question = oc.FIRST.replace("capital of France", "capital of Spain")
    other_minute = oc.FIRST.replace("23:44", "23:45")
    assert len({steady(oc.FIRST), steady(other_question), steady(other_minute)}) == 3
    words = "Runtime: the bus takes 20 minutes"  # no runtime line, only the word
    assert steady(words) == steady_head(words) == words


def test_the_doctests_hold() -> None:
    assert doctest.testmod(housekeeping).failed == 0
    assert doctest.testmod(rewrites).failed == 0
