"""The simulated user of the learning benchmarks, and their turns judged as the webapp judges them.

A user with one preference (``bench.preferences``) reacts to an answer in one of four ways:

- ``thumbs``: 👍 when the answer meets the preference, 👎 when it misses (the RL-only signal);
- ``comments``: the same, plus the preference's comment on a miss;
- ``corrections``: comments, plus the answer rewritten by the preference's fix;
- ``next_state``: no buttons: the user's next message carries it ("No, that's not what I asked
  for. <comment>" / "Thanks, perfect!"), read by the default judge
  (``trainer.judge.judge_verdict(kind="cues")``).

A broken answer (looping, empty) is a miss whatever it begins with. ``judged_sample`` turns one
reaction into the trainer's ``Sample`` the way the webapp's judge task and ``trainer_run`` do;
the replay (``bench.replay``) trains on those, the live benchmark (``bench.personalize``) sends
the reactions through the API instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.preferences import Preference, answer_flaws, flaw_comment

FEEDBACK_KINDS = ("thumbs", "comments", "corrections", "next_state")
NEGATIVE_NEXT = "No, that's not what I asked for. {comment}"
POSITIVE_NEXT = "Thanks, perfect!"


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


def react(
    preference: Preference, answer: str, feedback: str, *, token_ids: Sequence[int]
) -> UserReaction:
    """The simulated user's reaction to one answer, per the feedback kind.

    A broken answer (looping, empty: ``bench.preferences.answer_flaws``) is a miss whatever
    it begins with; the user says so (``flaw_comment``, after the preference's comment when
    that is missed too) and rewrites nothing, since a correction of a loop would teach it."""
    flaws = answer_flaws(answer, token_ids)
    satisfied = preference.satisfied(answer)
    good = satisfied and not flaws
    truth = 1 if good else -1
    said = [] if satisfied else [preference.comment]
    if flaws:
        said.append(flaw_comment(flaws))
    comment = " ".join(said)
    if feedback == "next_state":
        text = POSITIVE_NEXT if good else NEGATIVE_NEXT.format(comment=comment)
        return UserReaction(truth=truth, next_state=f"[user] {text}")
    if feedback not in FEEDBACK_KINDS:
        raise ValueError(f"unknown feedback {feedback!r}; one of {', '.join(FEEDBACK_KINDS)}")
    if good or feedback == "thumbs":
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


def _no_llm(messages: list[dict[str, str]], n: int, choices: Any = None) -> list[str]:
    raise RuntimeError("the cue judge asks no language model")


def judged_sample(answer: Answer, reaction: UserReaction, tokenizer: Any) -> tuple[Any, Any]:
    """(the trainer's Sample or None when the turn has no signal, the judge's Verdict).

    Mirrors the webapp: ``message_evidence`` (the user's hint from their comment),
    ``judge_verdict`` (the default cue judge), ``_sample_kind`` and ``trainer_run._sample``.
    """
    from trainer.batch import Sample, hinted_prompt_ids
    from trainer.judge import feedback_hint, is_useful_hint, judge_verdict

    user_hint = None
    if reaction.rating or reaction.comment or reaction.correction:
        user_hint = feedback_hint(comment=reaction.comment, correction=reaction.correction, tags=())
        user_hint = user_hint if is_useful_hint(user_hint) else None
    verdict = judge_verdict(
        kind="cues",
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
    correction_ids = None
    if reaction.correction:
        correction_ids = tokenizer.encode(reaction.correction, add_special_tokens=False)
        if tokenizer.eos_token_id is not None:
            correction_ids.append(tokenizer.eos_token_id)
    messages = [{"role": "user", "content": answer.prompt}]
    sample = Sample(
        prompt_token_ids=answer.prompt_token_ids,
        response_token_ids=answer.response_token_ids,
        sampler_logprobs=answer.logprobs,
        reward=float(verdict.score),
        hint=verdict.hint,
        teacher_prompt_token_ids=(
            hinted_prompt_ids(tokenizer, messages, verdict.hint) if verdict.hint else None
        ),
        correction_token_ids=correction_ids,
    )
    return sample, verdict
