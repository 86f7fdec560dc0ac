"""Conversations, their messages, and the feedback people give on answers.

A conversation is a tree: every message points at the message it follows (``parent``), so a
regenerated answer is a sibling of the first (same parent) and both are kept. The transcript
shows one path through the tree: at each fork the ``selected`` child (the newest by default).
Writes go through ``webapp.chat.services``; nothing here has behaviour beyond small helpers.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from webapp.chat.feedback_spec import RATING, feedback_state


class Conversation(models.Model):
    class Source(models.TextChoices):
        WEB = "web"
        API = "api"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    title_from_user = models.BooleanField(
        default=False, help_text="The user named it: no automatic title replaces it."
    )
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.WEB)
    external_session_id = models.CharField(max_length=200, blank=True, db_index=True)
    api_key = models.ForeignKey(
        "api.ApiKey", null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations"
    )
    train_consent = models.BooleanField(
        default=True, help_text="Use this conversation for training."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity_at = models.DateTimeField(auto_now_add=True, db_index=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    finalize_skip_reason = models.CharField(
        max_length=300,
        blank=True,
        help_text="Why closing it left no sample (the sweep skips it until consent changes).",
    )

    class Meta:
        ordering = ["-last_activity_at"]
        indexes = [models.Index(fields=["owner", "-last_activity_at"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    class TurnType(models.TextChoices):
        MAIN = "main"
        SIDE = "side"
        # sampled beside an answer the user disliked, to compare it with: never shown
        UNSEEN = "unseen"

    class Status(models.TextChoices):
        COMPLETE = "complete"
        STREAMING = "streaming"
        STOPPED = "stopped"
        FAILED = "failed"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children"
    )
    selected = models.BooleanField(default=True, help_text="Shown at its fork of the transcript.")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=200, blank=True)
    turn_index = models.PositiveIntegerField(default=0)
    turn_type = models.CharField(max_length=8, choices=TurnType.choices, default=TurnType.MAIN)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    error = models.TextField(blank=True)

    # What produced an assistant message, kept so training uses exactly the sampled tokens.
    policy_version = models.ForeignKey(
        "learning.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="messages",
    )
    served_model = models.CharField(max_length=200, blank=True)
    completion_id = models.CharField(max_length=100, null=True, blank=True, unique=True)
    prompt_token_ids = models.JSONField(null=True, blank=True)
    token_ids = models.JSONField(null=True, blank=True)
    token_logprobs = models.JSONField(null=True, blank=True)
    # The request's parameters, stored once per turn: an answer's siblings from the same
    # request (n > 1) hold {"same_as": <the first answer's id>} instead of a copy.
    sampling_params = models.JSONField(default=dict, blank=True)
    finish_reason = models.CharField(max_length=32, blank=True)
    usage = models.JSONField(null=True, blank=True)
    # The person's memories the answer was given ([{"id", "text"}], in the served form of
    # trainer.memory_prompt): its prompt_token_ids include them, the stored conversation not.
    memories = models.JSONField(default=list, blank=True)

    # The first message of the next main request in the session (the user's reply or the tool
    # results): the "next state" the judge sees.
    next_state = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="previous_turns"
    )
    # Why the judge left this answer alone (ineligible, no signal, a request the judge
    # refused): the sweep skips it until new evidence (feedback, a next state) clears it.
    judging_skip_reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"

    @property
    def is_assistant(self) -> bool:
        return self.role == self.Role.ASSISTANT

    def as_openai(self) -> dict[str, object]:
        """The message as an OpenAI chat message (for prompts and exports)."""
        message: dict[str, object] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        if self.name:
            message["name"] = self.name
        return message


class Feedback(models.Model):
    """One person's current feedback on one answer; earlier states are kept in ``history``."""

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="feedback")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="feedback"
    )
    rating = models.SmallIntegerField(default=0, help_text="+1 👍, −1 👎, 0 none (withdrawn).")
    tags = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True)
    correction = models.TextField(blank=True, help_text="The answer the user wanted.")
    history = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "author"], name="one_feedback_per_author"),
            models.CheckConstraint(
                condition=models.Q(rating__in=sorted(RATING.values)), name="feedback_rating_is_sign"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rating:+d} on message {self.message_id}"

    @property
    def is_empty(self) -> bool:
        return not any(feedback_state(self).values())
