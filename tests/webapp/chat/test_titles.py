"""Model titles, the pure part: the prompt, and what is left of a reply after cleaning.

No database, no model: ``python -m pytest tests/webapp/chat/test_titles.py``.
"""

from __future__ import annotations

import doctest

import pytest

from webapp.chat import titles
from webapp.chat.titles import TITLE_LENGTH, clean_title, title_from_reply, title_prompt


def test_doctests_hold() -> None:
    assert doctest.testmod(titles).failed == 0


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ('"Green Tea Benefits"', "Green Tea Benefits"),
        ("“Green Tea Benefits”", "Green Tea Benefits"),
        ("«Bienfaits du thé vert»", "Bienfaits du thé vert"),
        ("'Green Tea Benefits'.", "Green Tea Benefits"),
        ("**Green Tea Benefits**", "Green Tea Benefits"),
        ("# Green Tea Benefits", "Green Tea Benefits"),
        ("- *Green Tea Benefits*", "Green Tea Benefits"),
        ("1. `Green Tea` Benefits", "Green Tea Benefits"),
        ("Title: Green Tea Benefits", "Green Tea Benefits"),
        ('**Title:** "Green Tea Benefits".', "Green Tea Benefits"),
        ("Green Tea Benefits!", "Green Tea Benefits"),
        ("Green Tea Benefits…", "Green Tea Benefits"),
        ("  Green   Tea\tBenefits  ", "Green Tea Benefits"),
        ("Who Won the 2018 World Cup?", "Who Won the 2018 World Cup?"),  # a question stays one
        ("reverse_linked_list in Python", "reverse_linked_list in Python"),
    ],
)
def test_quotes_markdown_labels_and_end_punctuation_are_peeled(reply: str, title: str) -> None:
    assert clean_title(reply) == title


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ("Green Tea Benefits\nGreen tea is rich in antioxidants.", "Green Tea Benefits"),
        ("\n\nGreen Tea Benefits\n", "Green Tea Benefits"),
        ("Here's a possible title:\n\nGreen Tea Benefits\n\nIt covers…", "Green Tea Benefits"),
        ("Title:\nGreen Tea Benefits", "Green Tea Benefits"),
    ],
)
def test_a_reply_of_several_lines_gives_its_title_line(reply: str, title: str) -> None:
    assert clean_title(reply) == title


@pytest.mark.parametrize("reply", ["", "   ", "\n\n", '""', "**", "# ", "...", "Title:"])
def test_a_reply_with_nothing_in_it_cleans_to_nothing(reply: str) -> None:
    assert clean_title(reply) == ""
    assert title_from_reply(reply, request="Tell me about green tea") == ""


def test_a_long_title_is_cut_at_a_word_to_the_sidebars_length() -> None:
    reply = "Comprehensive Internationalization Considerations Regarding Telecommunications"
    title = clean_title(reply)
    assert len(title) <= TITLE_LENGTH and title.endswith("…")
    assert reply.startswith(title.removesuffix("…"))
    assert title.removesuffix("…").split() == reply.split()[: len(title.split())]


@pytest.mark.parametrize(
    ("reply", "first"),
    [
        ("How to Write an Email to a Landlord about a Broken Heating System", "Email my landlord"),
        ("I'm excited to help plan a trip to Lisbon", "Plan a trip to Lisbon"),
        ("Sure! Lisbon Trip Plan", "Plan a trip to Lisbon"),
        ("Hello! How can I help you today?", "hello"),
        ("Lisbon is lovely. Go in May", "Plan a trip to Lisbon"),
        ("Photosynthesis and Photosynthesis", "Explain photosynthesis"),
        ("Bienvenida!", "Plan a 3-day trip to Lisbon in October"),
        ("The Unseen Light", "Explique-moi la photosynthèse simplement."),
        ("Greeting to a five year old", "Explain recursion to a five year old"),  # an example's
        ("!!! ???", "Plan a trip to Lisbon"),
    ],
)
def test_junk_is_refused(reply: str, first: str) -> None:
    """Too long, an answer rather than a name, a loop, another subject, a copied example."""
    assert title_from_reply(reply, request=first) == ""


@pytest.mark.parametrize(
    ("reply", "first", "title"),
    [
        ("Capital of France: Paris", "What is the capital of France?", "Capital of France: Paris"),
        ("Sci-Fi Movie Recommendation", "Recommend a sci-fi movie", "Sci-Fi Movie Recommendation"),
        (
            "Causes of World War I: The Triple Alliance and the Triple Entente",
            "Can you summarize the causes of World War I?",
            "Causes of World War I",  # too long whole: its head names it
        ),
        (
            "Photosynthesis Explained Simply",
            "Explique-moi la photosynthèse simplement.",
            "Photosynthesis Explained Simply",  # another language, the same word
        ),
        ("Spaghetti Carbonara", "Wie koche ich Spaghetti Carbonara?", "Spaghetti Carbonara"),
        ("Как выучить английский", "Как выучить английский язык быстро?", "Как выучить английский"),
        ("東京のラーメン屋", "東京でおすすめのラーメン屋はどこですか？", "東京のラーメン屋"),
    ],
)
def test_a_title_of_a_few_words_on_the_subject_is_kept(reply: str, first: str, title: str) -> None:
    assert title_from_reply(reply, request=first) == title


def test_the_answer_ties_a_title_to_the_conversation_too() -> None:
    request, reply = "What do we know about Mars?", "Red Planet Facts"
    assert title_from_reply(reply, request=request) == ""
    answer = "Mars, the Red Planet, is the fourth planet from the Sun."
    assert title_from_reply(reply, request=request, answer=answer) == "Red Planet Facts"


def test_the_prompt_asks_for_a_title_of_the_first_message_alone() -> None:
    messages = title_prompt("  Plan a   trip to Lisbon  ")
    assert messages[0]["role"] == "system" and "title" in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "Message: Plan a trip to Lisbon\nTitle:"}
    roles = [m["role"] for m in messages[1:-1]]
    assert roles == ["user", "assistant"] * len(titles.EXAMPLES)


def test_the_prompt_quotes_only_the_opening_of_a_long_message() -> None:
    quoted = title_prompt("word " * 1000)[-1]["content"]
    assert len(quoted) < titles.REQUEST_CHARS + 40 and quoted.endswith("…\nTitle:")
