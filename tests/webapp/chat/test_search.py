"""Search in what was said: the words of answers, questions and titles, in any language, ranked,
the passage shown with its words marked and nothing stored ever rendered as markup; only the
searcher's own conversations, and the GIN index really used."""

from __future__ import annotations

import pytest
from django.db import connection
from django.urls import reverse

from tests.factories import AnswerFactory, QuestionFactory
from webapp.chat import services
from webapp.chat.models import Conversation, Message
from webapp.chat.search import (
    conversation_search,
    text_statement,
    words_query,
    words_statement,
)

pytestmark = [pytest.mark.django_db, pytest.mark.services]

FRIDGE = "Stell die Milch in den Kühlschrank, dort hält sie sich länger."


def said(owner, title: str, question: str, answer: str = "An answer.") -> Conversation:
    """A titled conversation of ``owner``'s: one question and its answer."""
    conversation = services.conversation_create(owner=owner, title=title)
    AnswerFactory(
        parent=QuestionFactory(conversation=conversation, content=question), content=answer
    )
    return conversation


def found(user, query: str) -> list[Conversation]:
    return [hit.conversation for hit in conversation_search(user=user, query=query)]


def test_a_word_only_an_answer_holds_finds_its_conversation_with_the_word_marked(alice) -> None:
    milk = said(alice, "Milk", "Where should I keep milk?", FRIDGE)
    said(alice, "Bread", "Where should I keep bread?", "In a bread box.")
    (hit,) = conversation_search(user=alice, query="Kühlschrank")
    assert hit.conversation == milk
    assert hit.title == "Milk"
    assert "<mark>Kühlschrank</mark>" in hit.snippet
    assert "Milch" in hit.snippet


def test_a_word_from_the_persons_own_message_finds_it(alice) -> None:
    saffron = said(alice, "Groceries", "Where can I buy saffron cheaply?")
    said(alice, "Weather", "Will it rain tomorrow?")
    (hit,) = conversation_search(user=alice, query="saffron")
    assert hit.conversation == saffron
    assert "<mark>saffron</mark>" in hit.snippet


def test_a_word_of_the_title_finds_it_marked_in_the_title(alice) -> None:
    trip = said(alice, "Trip to Lisbon", "Which museums are open on Mondays?")
    said(alice, "Tax return", "When is it due?")
    (hit,) = conversation_search(user=alice, query="lisbon")
    assert hit.conversation == trip
    assert hit.title == "Trip to <mark>Lisbon</mark>"
    assert hit.snippet == ""


def test_words_are_matched_as_prefixes_and_all_must_be_there(alice) -> None:
    milk = said(alice, "Milk", "Where should I keep milk?", FRIDGE)
    said(alice, "Fridge repair", "My Kühlschrank hums at night.")
    assert found(alice, "kühl") == found(alice, "Kühlschrank") != []
    assert found(alice, "Kühlschrank länger") == [milk]


def test_the_conversation_that_is_about_the_word_ranks_first(alice) -> None:
    aside = said(
        alice,
        "Weekend plans",
        "What could we do on Saturday?",
        "Go for a walk in the park, visit the market, cook something new, maybe bake a cake, "
        "read a book, call your parents, and have an espresso in the old town afterwards.",
    )
    about = said(
        alice,
        "Coffee at home",
        "How do I make a good espresso?",
        "For espresso, grind finely; an espresso shot takes about 25 seconds.",
    )
    assert found(alice, "espresso") == [about, aside]


def test_stored_markup_is_shown_as_text_and_only_the_marks_are_html(alice, client) -> None:
    said(alice, "<b>bold</b> title", "Is this safe? <script>alert('pwned')</script> Kühlschrank")
    (hit,) = conversation_search(user=alice, query="Kühlschrank")
    assert hit.snippet.endswith(
        "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt; <mark>Kühlschrank</mark>"
    )
    assert hit.title == "&lt;b&gt;bold&lt;/b&gt; title"
    client.force_login(alice)
    page = client.get(reverse("chat:list"), {"q": "Kühlschrank"}).content.decode()
    assert "<script>" not in page and "<b>" not in page
    assert "<mark>Kühlschrank</mark>" in page


def test_another_persons_conversation_is_never_found(alice, bob, client) -> None:
    said(bob, "Bob's Kühlschrank", "Kühlschrank?", FRIDGE)
    assert found(alice, "Kühlschrank") == []
    assert found(alice, "hlschr") == []  # the substring search is scoped the same way,
    assert found(alice, "Kü") == []  # also where it reads the messages without an index
    assert found(alice, "Bob") == []
    client.force_login(alice)
    page = client.get(reverse("chat:list"), {"q": "Kühlschrank"}).content.decode()
    assert "Bob" not in page and "Nothing in your conversations matches" in page


def test_an_answer_sampled_only_for_comparison_is_not_searched(alice) -> None:
    conversation = said(alice, "Colours", "Name a colour.", "Blue.")
    question = conversation.messages.get(role=Message.Role.USER)
    Message.objects.create(
        conversation=conversation,
        parent=question,
        role=Message.Role.ASSISTANT,
        turn_type=Message.TurnType.UNSEEN,
        selected=False,
        content="Vermilion.",
    )
    assert found(alice, "vermilion") == []
    assert found(alice, "blue") == [conversation]


def test_an_agents_housekeeping_calls_are_not_searched(alice) -> None:
    conversation = said(alice, "Colours", "Name a colour.", "Blue.")
    question = conversation.messages.get(role=Message.Role.USER)
    for role, content in (
        ("user", "Summarize the conversation: turquoise."),
        ("assistant", "Teal."),
    ):
        Message.objects.create(
            conversation=conversation,
            parent=question,
            role=role,
            turn_type=Message.TurnType.SIDE,
            selected=False,
            content=content,
        )
    assert found(alice, "turquoise") == [] and found(alice, "teal") == []
    assert found(alice, "blue") == [conversation]


def test_system_prompts_an_agent_sends_are_not_searched(alice) -> None:
    conversation = services.conversation_create(owner=alice, title="Agent", source="api")
    services.message_append(
        conversation=conversation, role="system", content="You are a Kühlschrank expert."
    )
    assert found(alice, "Kühlschrank") == []


def test_a_german_word_with_an_umlaut_is_found_in_any_case(alice) -> None:
    milk = said(alice, "Milk", "Where should I keep milk?", FRIDGE)
    assert found(alice, "kühlschrank") == [milk]
    assert found(alice, "KÜHLSCHRANK") == [milk]
    assert found(alice, "länger") == [milk]


def test_a_russian_word_is_found(alice) -> None:
    fridge = said(alice, "Ремонт", "Что делать?", "Холодильник сломался, вызовите мастера.")
    said(alice, "Погода", "Будет ли дождь?", "Завтра солнечно.")
    (hit,) = conversation_search(user=alice, query="холодильник")
    assert hit.conversation == fridge
    assert "<mark>Холодильник</mark>" in hit.snippet
    assert found(alice, "мастер") == [fridge]


def test_a_chinese_phrase_is_found_inside_a_sentence_written_without_spaces(alice) -> None:
    wall = said(alice, "旅行", "我们明天去哪里？", "我们明天去北京看长城，然后吃烤鸭。")
    said(alice, "天气", "明天会下雨吗？", "明天是晴天。")
    (hit,) = conversation_search(user=alice, query="北京看长城")
    assert hit.conversation == wall
    assert "<mark>北京看长城</mark>" in hit.snippet
    assert found(alice, "烤鸭") == [wall]


def test_a_japanese_phrase_is_found(alice) -> None:
    tea = said(alice, "お茶", "おすすめは？", "京都の抹茶がおいしいです。")
    assert found(alice, "抹茶") == [tea]


def test_a_part_of_a_word_is_found_when_no_word_starts_with_it(alice) -> None:
    milk = said(alice, "Milk", "Where should I keep milk?", FRIDGE)
    (hit,) = conversation_search(user=alice, query="schrank")
    assert hit.conversation == milk
    assert "Kühl<mark>schrank</mark>" in hit.snippet


def test_a_query_of_punctuation_alone_is_searched_as_text(alice) -> None:
    code = said(alice, "C++", "Is C++ faster than C?")
    assert found(alice, "++") == [code]
    assert found(alice, "   ") == []


def test_words_become_prefix_terms_of_one_query() -> None:
    assert words_query(["kühl", "milch"]) == "'kühl':* & 'milch':*"


def test_an_empty_search_shows_the_list_as_it_is_without_one(alice, client) -> None:
    first = said(alice, "First", "One?")
    second = said(alice, "Second", "Two?")
    client.force_login(alice)
    page = client.get(reverse("chat:list"), {"q": "  "}).content.decode()
    assert page.index(f"conversation-item-{second.pk}") < page.index(
        f"conversation-item-{first.pk}"
    )
    assert "search-hit" not in page


def test_a_result_links_to_its_conversation_with_title_and_passage(alice, client) -> None:
    milk = said(alice, "Milk", "Where should I keep milk?", FRIDGE)
    client.force_login(alice)
    page = client.get(reverse("chat:list"), {"q": "Kühlschrank", "current": milk.pk}).content
    page = page.decode()
    assert f'href="{reverse("chat:conversation", args=[milk.pk])}" aria-current="page"' in page
    assert '<span class="title">Milk</span>' in page
    assert '<span class="snippet">' in page and "<mark>Kühlschrank</mark>" in page


def _many_messages(owner, others, count: int) -> None:
    """``count`` messages spread over ``owner`` and ``others``, written in bulk."""
    people = [owner, *others]
    conversations = [
        Conversation.objects.create(owner=people[i % len(people)], title=f"Talk {i}")
        for i in range(count // 10)
    ]
    Message.objects.bulk_create(
        Message(
            conversation=conversations[i % len(conversations)],
            role=Message.Role.USER if i % 2 else Message.Role.ASSISTANT,
            content=f"message {i} about topic{i % 997} and filler words here",
        )
        for i in range(count)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE chat_message; ANALYZE chat_conversation")


def _plan(statement: tuple[str, dict[str, object]], *, scans: bool = True) -> str:
    sql, params = statement
    with connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_indexscan"):
            cursor.execute(f"SET LOCAL {setting} = {'on' if scans else 'off'}")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_migration_made_the_indexes_and_the_search_uses_them(alice, bob) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexdef LIKE '%USING gin%'")
        indexes = {row[0] for row in cursor.fetchall()}
    assert {
        "chat_message_content_words",
        "chat_conversation_title_words",
        "chat_message_content_trigrams",
    } <= indexes
    _many_messages(alice, [bob], 5000)
    words = _plan(words_statement(owner_id=alice.pk, words=["topic123"]))
    assert "Bitmap Index Scan on chat_message_content_words" in words
    assert len(found(alice, "topic123")) == 2
    # A table this small is read faster whole, or along another index: the planner is asked
    # only whether the trigram index serves the query (python -m bench.search times it on
    # 20,000 longer messages, where the planner picks it by itself).
    piece = _plan(text_statement(owner_id=alice.pk, text="opic123 and fill"), scans=False)
    assert "Bitmap Index Scan on chat_message_content_trigrams" in piece
    assert found(alice, "opic123 and fill") == found(alice, "topic123")
