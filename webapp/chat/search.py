"""Search in what was said: a person's conversations whose title, questions or answers hold the
words they typed, best first, each with the passage that matched and its words marked.

PostgreSQL full-text search over the ``'simple'`` configuration: it lowercases and splits on
word boundaries and assumes no language (no stemmer, no stop words), so German, Russian or any
text written with spaces between words is found by its words; every word typed is matched as a
prefix, so a word half typed already finds. Scripts written without spaces (Chinese, Japanese,
Thai, ...) make one "word" of a whole run of characters, so a query in them, and any query the
words find nothing for, is matched as a case-insensitive substring instead.

The words are looked up in GIN indexes on ``to_tsvector('simple', content)`` and on the titles
(migration 0006); the SQL below repeats those expressions exactly, or the planner would not
use them. The passage shown is cut from the text as it was written (ts_headline would drop
whatever looks like an HTML tag), escaped, and only the words found are marked up.

Only what the person can open is searched: their own conversations (a deleted one is gone from
the database), their messages and the answers to them, not the system prompts and tool results
an agent sends, never an answer sampled only to be compared with (``unseen``) and never an
agent's housekeeping calls (``side`` turns: its history summaries, memory flushes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from webapp.chat.models import Conversation, Message

RESULTS = 30
RANKED = 300  # the newest matching messages ranked (see words_statement)
QUERY_MAX_CHARS = 200
# How much the title counts beside the best message: a title names what it is about.
TITLE_WEIGHT = 2.0
# The passage shown: about this many characters before and after the first match.
SNIPPET_BEFORE, SNIPPET_AFTER = 40, 100

_WORD = re.compile(r"\w+")
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0002ffff]"
)
_TRIGRAM = re.compile(r"[^\W_]{3}")  # pg_trgm takes its trigrams from runs of letters, digits
SEARCHED_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


@dataclass(frozen=True)
class SearchHit:
    conversation: Conversation
    title: SafeString  # escaped, the words found marked
    snippet: SafeString  # the passage of the best-matching message, or "" for a title alone


def conversation_search(*, user: Any, query: str) -> list[SearchHit]:
    """``user``'s conversations that match ``query``, best first (at most ``RESULTS``)."""
    text = " ".join(query.split())[:QUERY_MAX_CHARS]
    words = _WORD.findall(text.lower())
    if not text:
        return []
    if words and not _UNSPACED.search(text):
        hits = _by_words(user=user, words=words)
        if hits:
            return hits
    return _by_substring(user=user, text=text)


def words_query(words: list[str]) -> str:
    """The ``to_tsquery`` text for ``words``: all of them, each as a prefix (``\\w`` runs need no
    quoting beyond the quotes around each)."""
    return " & ".join(f"'{word}':*" for word in words)


def words_statement(*, owner_id: int, words: list[str]) -> tuple[str, dict[str, object]]:
    """The SQL and parameters of a search by ``words`` (``EXPLAIN`` it to see the plan).

    The query is a MATERIALIZED value, opaque to the planner: it then always looks the words up
    in the index (a bitmap of the rows, read without computing a single tsvector), where a word
    it knows to be common would make it compute ``to_tsvector`` for every message instead.
    The person's conversations are a MATERIALIZED list too, so that the messages found are
    checked against it in one hash rather than looked up one by one. Only the newest
    ``RANKED`` matching messages are ranked, since ranking computes each one's tsvector: a
    word nearly every message holds ranks among the recent ones.
    """
    messages = Message._meta.db_table
    found = f"""
    WITH query AS MATERIALIZED (SELECT to_tsquery('simple', %(query)s) AS query),
    mine AS MATERIALIZED (SELECT id FROM {_CONVERSATIONS} WHERE owner_id = %(owner)s),
    candidates AS (
        SELECT m.id
        FROM {messages} m JOIN mine ON mine.id = m.conversation_id, query
        WHERE m.role = ANY(%(roles)s) AND m.turn_type <> ALL(%(hidden)s)
          AND to_tsvector('simple', m.content) @@ query.query
        ORDER BY m.id DESC
        LIMIT %(ranked)s
    ),
    matched AS (
        SELECT DISTINCT ON (m.conversation_id) m.conversation_id, m.id AS message_id,
               ts_rank(to_tsvector('simple', m.content), query.query) AS rank
        FROM candidates JOIN {messages} m ON m.id = candidates.id, query
        ORDER BY m.conversation_id, rank DESC, m.id DESC
    ),
    titled AS (
        SELECT c.id AS conversation_id, ts_rank(to_tsvector('simple', c.title), query.query) AS rank
        FROM {_CONVERSATIONS} c, query
        WHERE c.owner_id = %(owner)s AND to_tsvector('simple', c.title) @@ query.query
    ),
    found AS (
        SELECT coalesce(matched.conversation_id, titled.conversation_id) AS conversation_id,
               matched.message_id,
               coalesce(matched.rank, 0) + %(title_weight)s * coalesce(titled.rank, 0) AS score
        FROM matched FULL JOIN titled ON titled.conversation_id = matched.conversation_id
    )"""
    params = {**_params(owner_id), "query": words_query(words), "title_weight": TITLE_WEIGHT}
    return _best_first(found), params


def text_statement(*, owner_id: int, text: str) -> tuple[str, dict[str, object]]:
    """The SQL and parameters of a search for ``text`` anywhere, case aside: the person's
    conversations whose title or a message holds it, newest first, the newest such message of
    each for its passage.

    A text with three letters in a row is looked up in the trigram index (pg_trgm, migration
    0006), which finds the few messages that can hold it. A shorter one has no trigram to look
    up: the person's own messages are read, found through their conversations. Text without
    upper and lower case (Chinese, digits) is compared with LIKE: the same matches as ILIKE,
    without case-folding every message read (about five times faster)."""
    like = "LIKE" if text.lower() == text.upper() else "ILIKE"
    scope = (
        f"JOIN {_CONVERSATIONS} c ON c.id = m.conversation_id WHERE c.owner_id = %(owner)s"
        if _TRIGRAM.search(text)
        else f"WHERE m.conversation_id = ANY(ARRAY("
        f"SELECT id FROM {_CONVERSATIONS} WHERE owner_id = %(owner)s))"
    )
    found = f"""
    WITH matched AS (
        SELECT DISTINCT ON (m.conversation_id) m.conversation_id, m.id AS message_id
        FROM {Message._meta.db_table} m {scope}
          AND m.role = ANY(%(roles)s) AND m.turn_type <> ALL(%(hidden)s)
          AND m.content {like} %(pattern)s
        ORDER BY m.conversation_id, m.id DESC
    ),
    found AS (
        SELECT c.id AS conversation_id, matched.message_id, 0 AS score
        FROM {_CONVERSATIONS} c LEFT JOIN matched ON matched.conversation_id = c.id
        WHERE c.owner_id = %(owner)s
          AND (matched.message_id IS NOT NULL OR c.title {like} %(pattern)s)
    )"""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _best_first(found), {**_params(owner_id), "pattern": f"%{escaped}%"}


_CONVERSATIONS = Conversation._meta.db_table


def _params(owner_id: int) -> dict[str, object]:
    return {
        "owner": owner_id,
        "roles": [role.value for role in SEARCHED_ROLES],
        # never an answer sampled only to be compared with, nor an agent's housekeeping
        "hidden": [Message.TurnType.UNSEEN.value, Message.TurnType.SIDE.value],
        "ranked": RANKED,
        "limit": RESULTS,
    }


def _best_first(found: str) -> str:
    """The conversations ``found`` names (one row each: its id, the message that matched or
    null, a score), best first, with the matched message's text."""
    return f"""{found},
    ranked AS (
        SELECT c.*, found.message_id, found.score
        FROM {_CONVERSATIONS} c JOIN found ON found.conversation_id = c.id
        ORDER BY found.score DESC, c.last_activity_at DESC, c.id DESC
        LIMIT %(limit)s
    )
    SELECT ranked.*, m.content AS message_content
    FROM ranked LEFT JOIN {Message._meta.db_table} m ON m.id = ranked.message_id
    ORDER BY ranked.score DESC, ranked.last_activity_at DESC, ranked.id DESC"""


def _by_words(*, user: Any, words: list[str]) -> list[SearchHit]:
    # Where the words are, to mark them: each searched word as the start of a word.
    pattern = re.compile(
        r"(?<!\w)(?:" + "|".join(re.escape(word) for word in words) + r")\w*", re.IGNORECASE
    )
    return _hits(words_statement(owner_id=user.pk, words=words), pattern)


def _by_substring(*, user: Any, text: str) -> list[SearchHit]:
    pattern = re.compile(re.escape(text), re.IGNORECASE)
    return _hits(text_statement(owner_id=user.pk, text=text), pattern)


def _hits(statement: tuple[str, dict[str, object]], pattern: re.Pattern[str]) -> list[SearchHit]:
    return [
        SearchHit(
            conversation=conversation,
            title=_title(conversation.title, pattern),
            snippet=_passage(conversation.message_content, pattern)
            if conversation.message_id
            else SafeString(""),
        )
        for conversation in Conversation.objects.raw(*statement)
    ]


def _passage(content: str, pattern: re.Pattern[str]) -> SafeString:
    """The words around the first match of ``pattern`` in ``content``, every match marked; cut
    at spaces, with an ellipsis where text was left out."""
    text = " ".join(content.split())
    match = pattern.search(text)
    at, to = (match.start(), match.end()) if match else (0, 0)
    start = max(0, at - SNIPPET_BEFORE)
    end = min(len(text), to + SNIPPET_AFTER)
    if start > 0 and " " in text[start:at]:
        start = text.index(" ", start, at) + 1
    if end < len(text) and " " in text[to:end]:
        end = text.rindex(" ", to, end)
    passage = _marked(text[start:end], pattern)
    return mark_safe(("…" if start else "") + passage + ("…" if end < len(text) else ""))


def _title(title: str, pattern: re.Pattern[str]) -> SafeString:
    """``title`` escaped, every match of ``pattern`` in it marked."""
    return _marked(title, pattern) if title else SafeString("New conversation")


def _marked(text: str, pattern: re.Pattern[str]) -> SafeString:
    """``text`` escaped, every match of ``pattern`` in <mark>: only the marks are markup."""
    html: list[str] = []
    done = 0
    for match in pattern.finditer(text):
        html += [escape(text[done : match.start()]), "<mark>", escape(match[0]), "</mark>"]
        done = match.end()
    html.append(escape(text[done:]))
    return mark_safe("".join(html))  # every piece of the text went through escape()
