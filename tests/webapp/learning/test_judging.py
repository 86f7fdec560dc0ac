"""From turns and feedback to judgements and samples, with a scripted judge model."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.factories import AnswerFactory
from trainer.hindsight import HINDSIGHT_VERSION
from trainer.judge import CUES_VERSION
from webapp.chat import feedback, services
from webapp.chat.models import Message
from webapp.learning.models import Judgement, PolicyVersion, Sample
from webapp.learning.tasks import judge_message as judge_message_task
from webapp.learning.workflows.judging import finalize_conversation, judge_message

pytestmark = [pytest.mark.django_db, pytest.mark.services]


class ScriptedJudge:
    """The LLM judge answering from a script and recording each prompt it was asked."""

    model = "scripted"

    def __init__(self) -> None:
        self.votes = ["ok \\boxed{-1}", "\\boxed{-1}", "\\boxed{1}"]
        self.hints = [
            "\\boxed{1} [HINT_START]That's wrong: 2+2 is 4, answer it right.[HINT_END]",
            "\\boxed{1} [HINT_START]ok[HINT_END]",
            "none",
        ]
        self.calls: list[list[dict]] = []

    def complete(self, messages: list[dict], n: int, choices=None) -> list[str]:
        self.calls.append(messages)
        return (self.hints if "[HINT_START]" in messages[-1]["content"] else self.votes)[:n]


@pytest.fixture
def judge(monkeypatch, settings) -> ScriptedJudge:
    settings.JUDGE_KIND = "llm"
    monkeypatch.setattr("webapp.core.outbox.send", lambda *a: None)
    return ScriptedJudge()


@pytest.fixture
def user():
    return get_user_model().objects.create_user("alice")


def _turn(
    user, *, consent=True, turn_type="main", version=None, question="What is 2+2?", answer="5"
):
    return AnswerFactory(
        parent__conversation__owner=user,
        parent__conversation__train_consent=consent,
        parent__content=question,
        policy_version=version,
        turn_type=turn_type,
        content=answer,
        token_ids=[7, 8],
        token_logprobs=[-1.0, -2.0],
        prompt_token_ids=[1, 2, 3],
        usage=None,
        served_model="base",
        sampling_params={},
    )


def _follow_up(answer: Message, text: str) -> Message:
    nxt = services.message_append(
        conversation=answer.conversation, role="user", content=text, parent=answer
    )
    services.message_link_next_state(turns=[answer], next_state=nxt)
    return nxt


def test_a_thumbs_up_is_the_reward_without_asking_the_prm(judge, user) -> None:
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, rating=1)
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert (judgement.source, judgement.score, judgement.votes) == ("feedback", 1, [])
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward, sample.status) == ("rl", 1.0, "ready")
    assert sample.response_token_ids == [7, 8] and sample.response_logprobs == [-1.0, -2.0]
    assert sample.prompt_token_ids == [1, 2, 3]
    assert sample.prompt_messages == [{"role": "user", "content": "What is 2+2?"}]
    assert judge.calls == []


def test_a_thumbs_down_with_a_comment_is_a_combined_sample_with_the_users_hint(judge, user) -> None:
    answer = _turn(user)
    feedback.feedback_set(
        message=answer,
        author=user,
        rating=-1,
        comment="  It is 4, be precise. ",
        tags=["not correct"],
        allowed_tags=["not correct"],
    )
    judge_message(answer.pk, judge=judge)
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward) == ("combined", -1.0)
    assert sample.hint == "It is 4, be precise. (Reasons: not correct.)"


def test_a_correction_alone_is_an_opd_sample_and_kept_for_supervision(judge, user) -> None:
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, correction="2+2 = 4.")
    judge_message(answer.pk, judge=judge)
    sample = Sample.objects.get(message=answer)
    assert sample.kind in ("opd", "combined") and sample.correction == "2+2 = 4."


def test_a_plain_follow_up_is_judged_by_majority_of_prm_votes(judge, user) -> None:
    answer = _turn(user)
    _follow_up(answer, "No, that's wrong. Try again.")
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert judgement.source == "prm" and judgement.score == -1
    assert [v["score"] for v in judgement.votes] == [-1, -1, 1]
    assert all(v["text"] for v in judgement.votes)
    assert judgement.hint == "That's wrong: 2+2 is 4, answer it right."
    prm_prompt = judge.calls[0][-1]["content"]
    assert "What is 2+2?" in prm_prompt and "5" in prm_prompt and "No, that's wrong" in prm_prompt
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward, sample.hint) == (
        "combined",
        -1.0,
        "That's wrong: 2+2 is 4, answer it right.",
    )


def test_a_tie_and_no_useful_hint_makes_no_sample(judge, user) -> None:
    answer = _turn(user)
    _follow_up(answer, "hmm")
    judge.votes = judge.hints = ["\\boxed{1}", "\\boxed{-1}", "no box"]
    judge_message(answer.pk, judge=judge)
    assert Judgement.objects.get(message=answer).score == 0
    assert not Sample.objects.filter(message=answer).exists()


@pytest.mark.parametrize("case", ["no consent", "side turn", "old version"])
def test_turns_that_must_never_become_samples(judge, user, settings, case) -> None:
    settings.SAMPLE_MAX_VERSION_LAG = 2
    version = None
    if case == "old version":
        version = PolicyVersion.objects.get(number=0)
        PolicyVersion.objects.filter(number=0).update(status="retired")
        PolicyVersion.objects.create(number=5, status="live", adapter_path="/x")
    answer = _turn(
        user,
        consent=case != "no consent",
        turn_type="side" if case == "side turn" else "main",
        version=version,
    )
    feedback.feedback_set(message=answer, author=user, rating=1)
    judge_message(answer.pk, judge=judge)
    assert not Sample.objects.filter(message=answer).exists()


def test_a_redelivered_task_leaves_one_judgement_and_one_sample(judge, user) -> None:
    answer = _turn(user)
    _follow_up(answer, "Wrong.")
    judge_message(answer.pk, judge=judge)
    judge_message(answer.pk, judge=judge)
    judge_message_task.run(answer.pk)  # an unchanged answer: the judge is not asked
    assert Judgement.objects.filter(message=answer).count() == 1
    assert Sample.objects.filter(message=answer).count() == 1


def test_changed_feedback_supersedes_the_ready_sample(judge, user) -> None:
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, rating=1)
    judge_message(answer.pk, judge=judge)
    feedback.feedback_set(message=answer, author=user, rating=-1)
    judge_message(answer.pk, judge=judge)
    statuses = sorted(Sample.objects.filter(message=answer).values_list("reward", "status"))
    assert statuses == [(-1.0, "ready"), (1.0, "superseded")]


def test_a_closed_session_without_samples_keeps_its_last_turn(judge, user) -> None:
    first = _turn(user, question="Hi", answer="Hello!")
    conversation = first.conversation
    prompt = services.message_append(
        conversation=conversation, role="user", content="Bye", parent=first
    )
    last = AnswerFactory(
        parent=prompt,
        content="Goodbye!",
        token_ids=[9],
        token_logprobs=[-0.1],
        prompt_token_ids=[1],
        usage=None,
        served_model="base",
        sampling_params={},
    )
    services.conversation_close(conversation=conversation)
    finalize_conversation(conversation.pk, judge=judge)
    sample = Sample.objects.get(message__conversation=conversation)
    assert sample.message == last
    assert sample.judgement.source == "session_end"
    assert "ended the conversation" in judge.calls[0][-1]["content"]
    finalize_conversation(conversation.pk, judge=judge)
    assert Sample.objects.filter(message__conversation=conversation).count() == 1


def test_feedback_and_next_states_queue_the_judge_after_commit(
    user, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(
        "webapp.core.outbox.send", lambda task, args: sent.append((str(task), *args))
    )
    answer = _turn(user)
    with django_capture_on_commit_callbacks(execute=True):
        feedback.feedback_set(message=answer, author=user, rating=1)
    assert sent == [("webapp.learning.tasks.judge_message", answer.pk)]
    with django_capture_on_commit_callbacks(execute=True):
        _follow_up(answer, "thanks")
    assert sent[-1] == ("webapp.learning.tasks.judge_message", answer.pk)
    with django_capture_on_commit_callbacks(execute=True):
        services.conversation_close(conversation=answer.conversation)
    assert sent[-1] == ("webapp.chat.tasks.finalize_conversation", answer.conversation.pk)
    with django_capture_on_commit_callbacks(execute=False) as pending:
        feedback.feedback_set(message=answer, author=user, rating=-1)
    assert len(pending) == 1 and len(sent) == 3  # nothing is sent before the commit


def test_the_sweep_finds_turns_that_were_never_queued(judge, user) -> None:
    from webapp.learning.services import messages_awaiting_judgement

    answer = _turn(user)
    _follow_up(answer, "ok then")
    assert messages_awaiting_judgement() == [answer.pk]
    judge_message(answer.pk, judge=judge)
    assert messages_awaiting_judgement() == []


def test_export_jsonl_writes_conversations_judgements_and_samples(judge, user, tmp_path) -> None:
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, rating=1, comment="Great, thanks a lot!")
    judge_message(answer.pk, judge=judge)
    out = tmp_path / "export.jsonl"
    call_command("export_jsonl", "--out", str(out), stderr=StringIO())
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["type"] for r in records] == ["conversation", "judgement", "sample", "policy_version"]
    assert (records[3]["number"], records[3]["owner"]) == (0, None)  # the base: shared lineage
    assert records[0]["messages"][1]["feedback"][0]["comment"] == "Great, thanks a lot!"
    assert records[2]["response_token_ids"] == [7, 8]


def test_the_learning_status_says_what_became_of_an_answer(judge, user) -> None:
    from webapp.learning.selectors import learning_status

    answer = _turn(user)
    assert learning_status(message_id=answer.pk) is None
    feedback.feedback_set(message=answer, author=user, rating=-1, comment="Be precise: it is 4.")
    judge_message(answer.pk, judge=judge)
    assert learning_status(message_id=answer.pk).detail == "judged -1 · hint taken"
    sample = Sample.objects.get(message=answer)
    version = PolicyVersion.objects.create(number=3, status="candidate", adapter_path="/x")
    from webapp.learning.models import TrainingUpdate

    update = TrainingUpdate.objects.create(algorithm="rl", produced_version=version, status="done")
    Sample.objects.filter(pk=sample.pk).update(status="consumed", update=update)
    status = learning_status(message_id=answer.pk)
    assert status.detail == "judged -1 · hint taken · trained into v3"


def test_judging_pushes_the_status_to_open_chat_pages(
    judge, user, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    pushed: list[tuple[int, int]] = []
    monkeypatch.setattr("webapp.learning.notify._push", lambda c, m: pushed.append((c, m)))
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, rating=1)
    with django_capture_on_commit_callbacks(execute=True):
        judge_message(answer.pk, judge=judge)
    assert pushed == [(answer.conversation_id, answer.pk)]


def test_a_rated_answer_in_a_closed_session_is_judged_once(judge, user) -> None:
    answer = _turn(user)
    feedback.feedback_set(message=answer, author=user, rating=-1, comment="Start with 'Sure!'")
    services.conversation_close(conversation=answer.conversation)
    judge_message(answer.pk, judge=judge)
    finalize_conversation(answer.conversation_id, judge=judge)
    assert Judgement.objects.filter(message=answer).count() == 1
    assert Sample.objects.filter(message=answer).count() == 1


def test_the_default_judge_reads_a_correction_in_the_next_message(judge, user, settings) -> None:
    settings.JUDGE_KIND = "cues"
    answer = _turn(user, question="What is the capital of Italy?", answer="Paris.")
    _follow_up(answer, "No, that's wrong. Paris is in France.")
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert (judgement.source, judgement.score, judgement.judge_model) == ("prm", -1, "cues")
    assert judgement.prompt_version == CUES_VERSION
    assert [v["score"] for v in judgement.votes] == [-1]
    assert judgement.hint == "Paris is in France."  # the user's words, without the complaint
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward) == ("combined", -1.0)


def test_unparseable_votes_and_a_nonsense_hint_make_no_opd_sample(judge, user) -> None:
    """What the 135M judge really wrote in a session that kept asking for lowercase."""
    judge.votes = ["The assistant should", "", "\\boxed{-1}"]
    judge.hints = [
        "",
        "[HINT_START][HINT_END]",
        "\\boxed{1} [HINT_START]To find the second-to-last uppercase letter, you need to "
        "find the third-to-last uppercase letter. ### Instruction[HINT_END]",
    ]
    answer = _turn(user, question="Write 'HELLO' in lowercase.", answer="HELLO")
    _follow_up(answer, "in lowercase please, I asked twice")
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert [v["score"] for v in judgement.votes] == [None, None, -1]
    assert judgement.votes[0]["text"] == "The assistant should" and judgement.score == -1
    assert judgement.hint == "" and len(judgement.hint_votes) == 3
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.hint) == ("rl", "")


@pytest.mark.parametrize(
    ("follow_up", "kind", "reward"),
    [
        ("Nein, bitte in Kilometern, nicht in Meilen.", "combined", -1.0),
        ("请用公制单位，不要英里。", "combined", -1.0),
        ("Und wie weit ist es von Berlin nach Hamburg?", "opd", 0.0),  # a new question: no sign
    ],
)
def test_a_follow_up_in_any_language_becomes_a_hindsight_sample(
    judge, user, settings, follow_up, kind, reward
) -> None:
    """With PARLEY_JUDGE=hindsight the user's next message itself is the teacher's context:
    no keyword decides it, so a German or Chinese follow-up trains as an English one."""
    settings.JUDGE_KIND = "hindsight"
    answer = _turn(user, question="How far is Paris from Lyon?", answer="About 290 miles.")
    _follow_up(answer, follow_up)
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert (judgement.judge_model, judgement.prompt_version) == ("hindsight", HINDSIGHT_VERSION)
    assert follow_up in judgement.hint
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward, sample.hint) == (kind, reward, judgement.hint)
    assert sample.response_token_ids == [7, 8]  # the tokens served, as every sample


def test_thanks_is_a_reward_and_no_hindsight_hint(judge, user, settings) -> None:
    settings.JUDGE_KIND = "hindsight"
    answer = _turn(user, question="How far is Paris from Lyon?", answer="About 465 km.")
    _follow_up(answer, "Danke, genau das wollte ich!")
    judge_message(answer.pk, judge=judge)
    sample = Sample.objects.get(message=answer)
    assert (sample.kind, sample.reward, sample.hint) == ("rl", 1.0, "")


OPENCLAW_RUNTIME = (
    "\n\nRuntime: agent=main | session=agent:main:explicit:s1 | sessionId=s1 | host=vm | "
    "os=Linux 6.18.44 (x64) | node=v24.21.0 | model=parley/parley | shell=bash"
)
OPENCLAW_CONTEXT = (
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
    '"Active exec sessions:\\nnone"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>'
)


def test_an_agents_envelope_is_not_read_as_the_users_words(judge, user, settings) -> None:
    """OpenClaw's messages as it sends them: a time stamp and runtime line around the user's
    words, and its own context as an extra user message. The judge reads the words; the
    hint is the user's, not the stamp; the agent's context is nobody's request."""
    settings.JUDGE_KIND = "cues"
    answer = _turn(
        user,
        question="[Sat 2026-12-05 21:17 UTC] What is the capital of France?" + OPENCLAW_RUNTIME,
        answer="Paris is a city. Paris is a city. Paris is a city.",
    )
    assert answer.conversation.title == "What is the capital of France?"
    follow = _follow_up(
        answer, "[Sat 2026-12-05 21:18 UTC] No, that is far too long. One short sentence, please."
    )
    services.message_append(
        conversation=answer.conversation, role="user", content=OPENCLAW_CONTEXT, parent=follow
    )
    judge_message(answer.pk, judge=judge)
    judgement = Judgement.objects.get(message=answer)
    assert judgement.score == -1
    assert judgement.next_state_text == (
        "[user] No, that is far too long. One short sentence, please."
    )
    assert "UTC" not in judgement.hint and "Runtime" not in judgement.hint
    assert "short sentence" in judgement.hint
