"""Hindsight from a follow-up: the user's next message itself as the teacher's context.

After seeing what the user wrote next ("in km please", "Nein, in Celsius bitte", "lol no,
shorter"), the same model often answers the original request differently. The hindsight judge
(``trainer.judge.judge_verdict(kind="hindsight")``) makes that difference the training signal:
the hint is the user's follow-up, framed, so the OPD teacher is the policy with the follow-up in
its context and each token's advantage is teacher − old log-prob (self-distillation from user
interactions, Kleine Buening et al. 2026, arXiv 2603.12273; OpenClaw-RL's OPD with an extracted
hint is the same shape). No keyword list decides it, so it reads any language the model reads;
a follow-up that says nothing about the answer (a new question) changes the teacher little,
and so moves the model little. Thanks and other praise are no hint (``is_useful_hint``): the
cue judge's reward carries them.

Simplified: only the user's words are used (tool results are left to the cue judge's hints),
cut to ``MAX_FOLLOWUP_CHARS``.

>>> hindsight_hint("[user] No, in km please.")
'The user replied to this answer: "No, in km please." Answer so that they would not need to.'
>>> hindsight_hint("[tool result call_1] 42") is None
True
"""

from __future__ import annotations

from trainer.judge_cues import split_next_state

HINDSIGHT_VERSION = "hindsight-v1"
HINDSIGHT_FRAME = 'The user replied to this answer: "{said}" Answer so that they would not need to.'
MAX_FOLLOWUP_CHARS = 600
"""A follow-up longer than this (a pasted document) is cut: the teacher's prompt stays short."""


def followup_text(next_state: str) -> str:
    """What the user wrote in the next state (their messages joined), or ""."""
    user, _tools = split_next_state(next_state)
    return " ".join(part for part in user if part).strip()[:MAX_FOLLOWUP_CHARS]


def hindsight_hint(next_state: str) -> str | None:
    """The follow-up framed as the teacher's hint, or None when the user wrote nothing."""
    said = followup_text(next_state)
    return HINDSIGHT_FRAME.format(said=said) if said else None
