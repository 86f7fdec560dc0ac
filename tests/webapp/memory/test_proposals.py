"""Tuning cases for ``standing_preference``: which comment, correction or follow-up proposes a
memory, and which text the proposal gets. Pure functions: no database, no network.

``python -m pytest tests/webapp/memory/test_proposals.py``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from webapp.memory.proposals import MAX_CHARS, holds_secret, standing_preference

# language: (what the person wrote, the memory proposed)
PROPOSED: dict[str, list[tuple[str, str]]] = {
    "en": [
        ("thanks! btw please always use metric units, I'm in Germany", "Always use metric units"),
        ("Please call me Sam from now on", "Call me Sam"),
        ("I'm vegetarian, so no meat please", "I'm vegetarian"),
        ("From now on, answer in German", "From now on, answer in German"),
        ("Can you always answer in metric?", "Always answer in metric"),
        ("Never use emojis", "Never use emojis"),
        ("I'm a beginner, can you explain simpler?", "I'm a beginner"),
        ("I write Python", "I write Python"),
        ("I live in Toronto", "I live in Toronto"),
        ("I like my answers short and to the point", "I like my answers short and to the point"),
        ("In general, keep answers brief", "In general, keep answers brief"),
        ("If I ask for code, always use TypeScript", "If I ask for code, always use TypeScript"),
        ("Always use metric because I'm in Germany", "Always use metric"),
        ("Remember that I'm vegan", "I'm vegan"),
        ("That's wrong, I'm vegan", "I'm vegan"),
        ("This is wrong. From now on, double-check units.", "From now on, double-check units"),
        ("Good answer, but please remember I'm on a low-sodium diet", "I'm on a low-sodium diet"),
        ("Please address me as Dr. Lee", "Address me as Dr. Lee"),
        ("Use km, not miles", "Use km"),
        ("I'm not a native English speaker, keep it simple", "I'm not a native English speaker"),
        ("Please be more concise in future", "Be more concise in future"),
        ("Keep answers under 100 words", "Keep answers under 100 words"),
        ("I hate it when you use bullet points", "I hate it when you use bullet points"),
        ("I'm gluten intolerant", "I'm gluten intolerant"),
        ("Assume I'm on Linux", "Assume I'm on Linux"),
        ('"Call me Sam"', "Call me Sam"),
        ("Can you use Celsius?", "Use Celsius"),
    ],
    "de": [
        ("Antworte immer auf Deutsch", "Antworte immer auf Deutsch"),
        ("Danke! Übrigens, nenn mich bitte Max.", "Nenn mich bitte Max"),
        ("Ich bin Vegetarierin, also bitte keine Fleischrezepte", "Ich bin Vegetarierin"),
        ("Ich lebe seit zehn Jahren in Spanien", "Ich lebe seit zehn Jahren in Spanien"),
        ("Ich bin Anfänger, erklär es bitte einfacher", "Ich bin Anfänger"),
        ("Ich mag es, wenn du kurz antwortest", "Ich mag es, wenn du kurz antwortest"),
        (
            "Ich möchte, dass du immer auf Deutsch antwortest",
            "Ich möchte, dass du immer auf Deutsch antwortest",
        ),
        ("Verwende bitte metrische Einheiten", "Verwende bitte metrische Einheiten"),
        ("Kannst du in Zukunft bitte immer Quellen angeben?", "Bitte immer Quellen angeben"),
        ("Ich bin Python-Entwickler", "Ich bin Python-Entwickler"),
        ("Sieze mich bitte", "Sieze mich"),
    ],
    "es": [
        ("Siempre responde en español, por favor", "Siempre responde en español"),
        ("Llámame Lucía", "Llámame Lucía"),
        ("Soy vegetariana", "Soy vegetariana"),
        ("Vivo en México", "Vivo en México"),
        ("De ahora en adelante, usa el sistema métrico", "Usa el sistema métrico"),
        ("Me gustan las respuestas cortas", "Me gustan las respuestas cortas"),
        ("¿Puedes responder siempre en español?", "Responder siempre en español"),
        ("No uses emojis nunca", "No uses emojis nunca"),
        ("Me puedes llamar Pepe", "Me puedes llamar Pepe"),
    ],
    "fr": [
        ("Réponds toujours en français", "Réponds toujours en français"),
        ("Appelle-moi Julie", "Appelle-moi Julie"),
        ("Je suis végétarien", "Je suis végétarien"),
        ("J'habite à Lyon", "J'habite à Lyon"),
        ("Désormais, utilise le système métrique", "Utilise le système métrique"),
        ("Je suis développeur Java", "Je suis développeur Java"),
        ("N'utilise jamais d'emojis", "N'utilise jamais d'emojis"),
        ("Dorénavant, tutoie-moi", "Tutoie-moi"),
    ],
    "pt": [
        ("Sempre responda em português", "Sempre responda em português"),
        ("Me chame de Ana", "Me chame de Ana"),
        ("Sou vegano", "Sou vegano"),
        ("Moro em Lisboa", "Moro em Lisboa"),
        ("Prefiro respostas curtas", "Prefiro respostas curtas"),
        ("Nunca use emojis", "Nunca use emojis"),
        ("Você pode sempre responder em português?", "Sempre responder em português"),
    ],
    "it": [
        ("Rispondi sempre in italiano", "Rispondi sempre in italiano"),
        ("Chiamami Marco", "Chiamami Marco"),
        ("Sono vegetariano", "Sono vegetariano"),
        ("Abito a Torino", "Abito a Torino"),
        ("Preferisco risposte brevi", "Preferisco risposte brevi"),
        ("Non usare mai emoji", "Non usare mai emoji"),
        ("Sono un insegnante", "Sono un insegnante"),
    ],
    "ru": [
        ("Всегда отвечай по-русски", "Всегда отвечай по-русски"),
        ("Зови меня Саша", "Зови меня Саша"),
        ("Я вегетарианец", "Я вегетарианец"),
        ("Я живу в Москве", "Я живу в Москве"),
        ("Я программист", "Я программист"),
        ("Мне нравятся короткие ответы", "Мне нравятся короткие ответы"),
        ("Никогда не используй эмодзи", "Никогда не используй эмодзи"),
        ("С этого момента обращайся ко мне на ты", "Обращайся ко мне на ты"),
    ],
    "zh": [
        ("以后请用中文回答", "以后请用中文回答"),
        ("叫我小王", "叫我小王"),
        ("我是素食者", "我是素食者"),
        ("我住在上海", "我住在上海"),
        ("我是初学者，请解释得简单一点", "我是初学者"),
        ("我喜欢简短的回答", "我喜欢简短的回答"),
        ("请记住我是素食者", "我是素食者"),
        ("不要再用表情符号了", "不要再用表情符号了"),
        ("从现在开始，回答尽量简短", "从现在开始，回答尽量简短"),
    ],
    "ja": [
        ("これからは敬語で話してください", "これからは敬語で話してください"),
        ("サムと呼んでください", "サムと呼んでください"),
        ("私はベジタリアンです", "私はベジタリアンです"),
        ("東京に住んでいます", "東京に住んでいます"),
        ("いつも日本語で答えて", "いつも日本語で答えて"),
        ("私はエンジニアです", "私はエンジニアです"),
        ("卵アレルギーがあります", "卵アレルギーがあります"),
        ("今後は絵文字を使わないでください", "今後は絵文字を使わないでください"),
    ],
    "ko": [
        ("앞으로는 존댓말로 답해 주세요", "앞으로는 존댓말로 답해 주세요"),
        ("저를 민수라고 불러 주세요", "저를 민수라고 불러 주세요"),
        ("저는 채식주의자예요", "저는 채식주의자예요"),
        ("저는 서울에 살아요", "저는 서울에 살아요"),
        ("항상 한국어로 대답해 주세요", "항상 한국어로 대답해 주세요"),
        ("저는 개발자예요", "저는 개발자예요"),
        ("저는 땅콩 알레르기가 있어요", "저는 땅콩 알레르기가 있어요"),
        ("파이썬을 주로 사용해요", "파이썬을 주로 사용해요"),
    ],
}

# language: what the person wrote, which proposes nothing
NOTHING: dict[str, list[str]] = {
    "en": [
        "make this one shorter",
        "redo that as a table",
        "shorter please",
        "Thanks, great answer!",
        "What is the capital of France?",
        "No, Paris is in France",
        "this is wrong",
        "How are you?",
        "Do you always use metric?",
        "You always get this wrong",
        "Never mind",
        "I'm in a hurry",
        "I'm in Germany this week",
        "I prefer the first one",
        "I like this answer",
        "Give me that in miles",
        "Answer in Spanish",
        "I'll always be grateful",
        "What if I'm vegetarian?",
        "Use grams for this recipe",
        "Use metric for now",
        "Call me back later",
        "Thanks as always!",
        "Great answer as usual, you're always so helpful",
        "Every time I ask you give me imperial units",
        "Give me the answers to questions 1-5",
        "Your answers are always wrong",
        "I'm learning a lot from this",
        "My name is not important",
        "I prefer not to say",
        "Make the code use metric units",
    ],
    "de": [
        "Mach das kürzer",
        "Das ist falsch",
        "Danke, super Antwort!",
        "Du antwortest immer auf Englisch, das nervt",
        "Kannst du das als Tabelle machen?",
        "Ich bin in Eile",
        "Wie immer eine tolle Antwort",
        "Warum antwortest du immer so lang?",
        "Nein, der Rhein fließt durch Köln",
        "Ich wohne gerade im Hotel",
    ],
    "es": [
        "¿Cuál es la capital de Francia?",
        "Hazlo más corto",
        "Gracias, muy útil",
        "Siempre te equivocas",
        "Esto está mal",
        "¿Por qué siempre respondes en inglés?",
        "Estoy en casa",
        "Prefiero esta versión",
    ],
    "fr": [
        "Merci beaucoup !",
        "Tu te trompes toujours",
        "Fais plus court",
        "Quelle est la capitale de l'Italie ?",
        "Pourquoi tu réponds toujours en anglais ?",
        "Je suis en retard",
        "Je préfère celle-ci",
        "Non, Paris est en France",
    ],
    "pt": [
        "Obrigado!",
        "Isso está errado",
        "Faça mais curto",
        "Por que você sempre responde em inglês?",
        "Estou em casa",
        "Refaça em tabela",
        "Não, Lisboa é a capital de Portugal",
    ],
    "it": [
        "Grazie mille!",
        "Sbagli sempre",
        "Fallo più breve",
        "Perché rispondi sempre in inglese?",
        "Sono in ritardo",
        "Rifallo come tabella",
        "No, Roma è la capitale d'Italia",
    ],
    "ru": [
        "Спасибо!",
        "Ты всегда ошибаешься",
        "Сделай короче",
        "Почему ты всегда отвечаешь по-английски?",
        "Я в шоке",
        "Переделай в таблицу",
        "Нет, столица России — Москва",
    ],
    "zh": [
        "谢谢！",
        "这个不对",
        "把这个改短一点",
        "法国的首都是哪里？",
        "你总是用英文回答",
        "我更喜欢这个",
        "我在开会",
        "不对，长城不在上海",
    ],
    "ja": [
        "ありがとうございます！",
        "これは間違っています",
        "もっと短くして",
        "日本の首都はどこですか？",
        "いつもありがとう",
        "私は大丈夫です",
        "いつも英語で答えるのはなぜですか？",
        "この回答を表にしてください",
    ],
    "ko": [
        "감사합니다!",
        "틀렸어요",
        "더 짧게 해 주세요",
        "한국의 수도는 어디예요?",
        "항상 감사합니다",
        "저는 괜찮아요",
        "왜 항상 영어로 대답해요?",
        "이 답변을 표로 정리해 줘",
    ],
}

SECRETS = [
    "my password is hunter2",
    "My password: Tr0ub4dor&3, and call me Sam",
    "here is my key sk-abc123def456ghi789jkl012",
    "my api key is ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "Mein Passwort ist Sommer2024",
    "Mi contraseña es perro123",
    "mot de passe : soleil42",
    "Мой пароль qwerty123",
    "パスワードはabc123です",
    "비밀번호는 1234abcd입니다",
    "我的密码是abc12345，叫我小王",
]


def _table(rows: Mapping[str, Sequence[Any]]) -> list[Any]:
    return [
        pytest.param(*(row if isinstance(row, tuple) else (row,)), id=f"{language}-{index}")
        for language, cases in rows.items()
        for index, row in enumerate(cases)
    ]


@pytest.mark.parametrize("text, memory", _table(PROPOSED))
def test_a_standing_preference_is_proposed_trimmed_to_its_standing_part(
    text: str, memory: str
) -> None:
    assert standing_preference(text) == memory


@pytest.mark.parametrize("text", _table(NOTHING))
def test_a_one_off_request_question_correction_complaint_or_thanks_proposes_nothing(
    text: str,
) -> None:
    assert standing_preference(text) is None


@pytest.mark.parametrize("text", SECRETS)
def test_a_text_holding_a_secret_proposes_nothing(text: str) -> None:
    assert holds_secret(text)
    assert standing_preference(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "I forgot my password, call me Sam",
        "Never ask me for my password",
        "internationalization matters",
        "Use fewer tokens please",
    ],
)
def test_a_password_word_without_a_value_or_a_long_word_is_no_secret(text: str) -> None:
    assert not holds_secret(text)


def test_every_language_has_at_least_six_cases_both_ways() -> None:
    for language in PROPOSED:
        assert len(PROPOSED[language]) + len(NOTHING[language]) >= 6
        assert PROPOSED[language] and NOTHING[language]


@pytest.mark.parametrize("text", ["", "   ", "!!!", "\n\n"])
def test_an_empty_text_proposes_nothing(text: str) -> None:
    assert standing_preference(text) is None


def test_a_follow_up_of_several_lines_proposes_its_standing_line() -> None:
    text = "Thanks, that worked.\nWhat about Python 3.12?\nAlso, call me Sam."
    assert standing_preference(text) == "Call me Sam"


def test_the_first_standing_clause_is_the_one_proposed() -> None:
    assert standing_preference("I'm a nurse. Also always use metric units.") == "I'm a nurse"


def test_a_memory_is_capitalised_and_never_longer_than_the_limit() -> None:
    memory = standing_preference("from now on " + "answer in plain words " * 25)
    assert memory is not None and memory[0] == "F" and len(memory) <= MAX_CHARS


def test_a_clause_too_long_to_be_a_standing_statement_proposes_nothing() -> None:
    assert standing_preference("from now on " + "answer in plain words " * 30) is None
    assert standing_preference("sprich mich " + "bitte " * 3000) is None  # and quickly
