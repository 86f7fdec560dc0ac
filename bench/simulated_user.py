"""The simulated user of the learning benchmarks, and their turns judged as the webapp judges them.

A user with one preference (``bench.preferences``) reacts to an answer in one of seven ways:

- ``thumbs``: 👍 when the answer meets the preference, 👎 when it misses (the RL-only signal);
- ``pairs``: thumbs, and after a 👎 the comparison offered below the 👎'd answer ("Is one of them
  better?", ``webapp.learning.comparisons``): the first of the answers sampled beside it that
  meets the preference is chosen, or none (``choose``);
- ``comments``: the same, plus the preference's comment on a miss;
- ``corrections``: comments, plus the answer rewritten by the preference's fix;
- ``next_state``: no buttons: the user's next message carries it ("No, that's not what I asked
  for. <comment>" / "Thanks, perfect!"), read by the default judge
  (``trainer.judge.judge_verdict(kind="cues")``);
- ``followups``: no buttons, and the next message is what a person writes: on a miss one of the
  preference's own follow-ups ("in km please", "Nein, in Celsius bitte", "请用公制单位。"), on
  a hit one of several thanks, and now and then (``NEUTRAL_SHARE`` of the turns, drawn from a
  seeded generator) neither: a new, unrelated question, which says nothing about the answer
  (``UserReaction.neutral``). ``language`` picks English, German or Chinese.
- ``memory``: the user states the preference once, as a memory (its comment), and then only
  asks new questions: every answer is served with the memory in its prompt and none is reacted
  to (a neutral reaction; the replay distils the memory instead, ``bench.replay_memory``).

A broken answer (looping, empty) is a miss whatever it begins with. ``judged_sample`` turns one
reaction into the trainer's ``Sample`` the way the webapp's judge task and ``trainer_run`` do;
the replay (``bench.replay``) trains on those, the live benchmark (``bench.personalize``) sends
the reactions through the API instead.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.preferences import FLAW_COMMENTS, Preference, answer_flaws, flaw_comment

FEEDBACK_KINDS = (
    "thumbs",
    "comments",
    "corrections",
    "next_state",
    "followups",
    "pairs",
    "memory",
)
NEGATIVE_NEXT = "No, that's not what I asked for. {comment}"
POSITIVE_NEXT = "Thanks, perfect!"
LANGUAGES = ("en", "de", "zh")
NEUTRAL_SHARE = 0.25
"""How often a user of ``followups`` moves on to a new question instead of reacting."""
THANKS = {
    "en": [
        "Thanks, perfect!",
        "great, thank you",
        "That's exactly what I needed, thanks.",
        "Perfect, cheers!",
        "Nice, thanks a lot.",
    ],
    "de": ["Danke, genau das wollte ich!", "Super, vielen Dank!", "Perfekt, danke dir.", "Danke!"],
    "zh": ["谢谢，正是我想要的！", "太好了，非常感谢", "完美，谢谢！", "很好，谢谢。"],
}
NEW_QUESTIONS = {
    "en": [
        "By the way, what's a good book to read this summer?",
        "Another question: how do I keep basil alive indoors?",
        "What time does the sun set in Lisbon in June?",
        "Can you recommend a podcast about history?",
        "How many hours of sleep does a teenager need?",
    ],
    "de": [
        "Andere Frage: Wie halte ich Basilikum in der Wohnung am Leben?",
        "Übrigens, kannst du mir ein Buch für den Sommer empfehlen?",
        "Kennst du einen Podcast über Geschichte?",
        "Wie viele Stunden Schlaf braucht ein Teenager?",
    ],
    "zh": [
        "换个话题：室内怎么养罗勒？",
        "对了，能推荐一本适合夏天读的书吗？",
        "你知道有什么好听的历史播客吗？",
        "青少年每天需要睡几个小时？",
    ],
}
FLAW_FOLLOWUPS = {
    "en": FLAW_COMMENTS,
    "de": {
        "repeating": "Du wiederholst dich ständig, bitte nur einmal antworten.",
        "empty": "Du hast gar nichts geantwortet.",
        "language_switch": "Bitte bleib bei einer Sprache.",
    },
    "zh": {
        "repeating": "你一直在重复，请只回答一次。",
        "empty": "你什么都没回答。",
        "language_switch": "请只用一种语言回答。",
    },
}


@dataclass(frozen=True)
class Answer:
    """One answer as serving records it: the prompt's and the answer's token ids, log-probs."""

    prompt: str
    prompt_token_ids: list[int]
    response_token_ids: list[int]
    logprobs: list[float]
    text: str


@dataclass(frozen=True)
class UserReaction:
    """What the simulated user did about one answer (the webapp's Feedback and next message)."""

    truth: int  # +1 the answer met the preference, -1 it missed
    rating: int = 0
    comment: str = ""
    correction: str = ""
    next_state: str = ""
    # the user moved on (a new question) without saying how the answer served them: a perfect
    # judge reads 0 here, whatever the truth
    neutral: bool = False


def followup(
    preference: Preference,
    *,
    satisfied: bool,
    flaws: Sequence[str],
    language: str,
    rng: random.Random,
    neutral_share: float = NEUTRAL_SHARE,
) -> tuple[str, bool]:
    """What a person writes next, and whether it is a new question rather than a reaction: a
    thanks on a hit; on a miss one of the preference's follow-ups in ``language`` (its English
    ones, or its comment, where it has none), then a sentence per flaw of a broken answer."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; one of {', '.join(LANGUAGES)}")
    if rng.random() < neutral_share:
        return rng.choice(NEW_QUESTIONS[language]), True
    if satisfied and not flaws:
        return rng.choice(THANKS[language]), False
    said = []
    if not satisfied:
        phrasings = preference.followups.get(language) or preference.followups.get("en")
        said.append(rng.choice(phrasings or [preference.comment]))
    said += [FLAW_FOLLOWUPS[language][kind] for kind in flaws]
    return " ".join(said), False


def react(
    preference: Preference,
    answer: str,
    feedback: str,
    *,
    token_ids: Sequence[int],
    language: str = "en",
    seed: int = 0,
    turn: int | None = None,
    neutral_share: float = NEUTRAL_SHARE,
) -> UserReaction:
    """The simulated user's reaction to one answer, per the feedback kind.

    A broken answer (looping, empty: ``bench.preferences.answer_flaws``) is a miss whatever
    it begins with; the user says so (``flaw_comment``, after the preference's comment when
    that is missed too) and rewrites nothing, since a correction of a loop would teach it.

    ``followups`` only: ``language`` of the user's messages; which phrasing, and whether the
    user moves on to a new question, is drawn from a generator seeded by ``seed`` and ``turn``
    (the turn's index; by default the answer's text), so a run is repeatable."""
    flaws = answer_flaws(answer, token_ids)
    satisfied = preference.satisfied(answer)
    good = satisfied and not flaws
    truth = 1 if good else -1
    if feedback == "followups":
        # a str seed is hashed with SHA-512: the same draw in every process, unlike hash()
        rng = random.Random(f"{seed}:{answer if turn is None else turn}")
        text, neutral = followup(
            preference,
            satisfied=satisfied,
            flaws=flaws,
            language=language,
            rng=rng,
            neutral_share=neutral_share,
        )
        return UserReaction(truth=truth, next_state=f"[user] {text}", neutral=neutral)
    if feedback == "memory":  # the preference was said once, as a memory: nothing more
        return UserReaction(truth=truth, neutral=True)
    said = [] if satisfied else [preference.comment]
    if flaws:
        said.append(flaw_comment(flaws))
    comment = " ".join(said)
    if feedback == "next_state":
        text = POSITIVE_NEXT if good else NEGATIVE_NEXT.format(comment=comment)
        return UserReaction(truth=truth, next_state=f"[user] {text}")
    if feedback not in FEEDBACK_KINDS:
        raise ValueError(f"unknown feedback {feedback!r}; one of {', '.join(FEEDBACK_KINDS)}")
    if good or feedback in ("thumbs", "pairs"):
        return UserReaction(truth=truth, rating=truth)
    correction = ""
    if feedback == "corrections" and preference.correctable and not flaws:
        correction = preference.correct(answer) or ""
    return UserReaction(
        truth=truth,
        rating=-1,
        comment=comment,
        correction=correction,
        next_state=f"[user feedback] {comment}",
    )


def choose(preference: Preference, alternatives: Sequence[Answer]) -> int | None:
    """Which of the answers offered beside a 👎 the user chooses as better: the first that
    meets the preference and is whole (``Preference.meets``), or None when none is better.

    >>> sure = Preference("sure", "Start with 'Sure!'", {"regex_must": ["^Sure!"]})
    >>> offered = [Answer("q", [1], [2], [0.0], "No."), Answer("q", [1], [3], [0.0], "Sure! Yes.")]
    >>> choose(sure, offered), choose(sure, offered[:1])
    (1, None)
    """
    for index, answer in enumerate(alternatives):
        if preference.meets(answer.text, answer.response_token_ids):
            return index
    return None


def _no_llm(messages: list[dict[str, str]], n: int, choices: Any = None) -> list[str]:
    raise RuntimeError("the cue judge asks no language model")


def judged_sample(
    answer: Answer, reaction: UserReaction, tokenizer: Any, *, judge: str = "cues"
) -> tuple[Any, Any]:
    """(the trainer's Sample or None when the turn has no signal, the judge's Verdict).

    As the webapp does it: ``message_evidence`` (the user's hint from their comment),
    ``judge_verdict`` (``judge``: the webapp's default, the cue judge, unless set),
    ``_sample_kind`` and ``trainer.batch.trainer_sample``.
    """
    from trainer.batch import trainer_sample
    from trainer.judge import feedback_hint, is_useful_hint, judge_verdict

    user_hint = None
    if reaction.rating or reaction.comment or reaction.correction:
        user_hint = feedback_hint(comment=reaction.comment, correction=reaction.correction, tags=())
        user_hint = user_hint if is_useful_hint(user_hint) else None
    verdict = judge_verdict(
        kind=judge,
        request=answer.prompt,
        answer=answer.text,
        next_state=reaction.next_state,
        rating=reaction.rating,
        user_hint=user_hint,
        m=1,
        complete=_no_llm,
    )
    if not (verdict.score or verdict.hint or reaction.correction):
        return None, verdict
    sample = trainer_sample(
        tokenizer,
        prompt_messages=[{"role": "user", "content": answer.prompt}],
        prompt_token_ids=answer.prompt_token_ids,
        response_token_ids=answer.response_token_ids,
        response_logprobs=answer.logprobs,
        reward=float(verdict.score),
        hint=verdict.hint,
        correction=reaction.correction,
    )
    return sample, verdict
