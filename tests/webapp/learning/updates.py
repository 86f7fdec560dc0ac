"""Fakes for the update stages' tests: ready samples, an adapter push, a trainer run."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from tests.factories import AnswerFactory
from webapp.learning.models import Judgement, Sample
from webapp.learning.selectors import policy_version_for, policy_version_live
from webapp.learning.workflows.training import TrainJob, TrainResult


class FakePush(list):
    """An adapter push that records each call and loads nothing."""

    def __call__(self, adapter_dir, *, lora_name, serving_urls, timeout=30.0, api_key=""):
        self.append(
            {"dir": str(adapter_dir), "name": lora_name, "urls": list(serving_urls), "key": api_key}
        )
        return [{"replica": u, "status": 200} for u in serving_urls]


def ready_samples(n: int) -> list[Sample]:
    user = get_user_model().objects.get_or_create(username="alice")[0]
    out = []
    for i in range(n):
        answer = AnswerFactory(
            parent__conversation__owner=user,
            parent__content=f"q{i}",
            content="a",
            token_ids=[5, 6],
            token_logprobs=[-1.0, -1.0],
            prompt_token_ids=[1, 2],
            usage=None,
            served_model="base",
            sampling_params={},
        )
        judgement = Judgement.objects.create(
            message=answer, fingerprint=f"f{i}", source="feedback", score=1
        )
        out.append(
            Sample.objects.create(
                message=answer,
                judgement=judgement,
                kind="rl",
                reward=1.0,
                prompt_token_ids=[1, 2],
                response_token_ids=[5, 6],
                response_logprobs=[-1.0, -1.0],
                prompt_messages=[{"role": "user", "content": f"q{i}"}],
                policy_version=policy_version_live(),
            )
        )
    return out


class FakeRun:
    """A trainer that writes an empty adapter, records one step and reports a gate result."""

    def __init__(self, *, passed: bool = True, error: str = "") -> None:
        self.passed, self.error = passed, error
        self.jobs: list[TrainJob] = []

    def __call__(self, job: TrainJob, *, record_step) -> TrainResult:
        self.jobs.append(job)
        if self.error:
            raise RuntimeError(self.error)
        job.out_dir.mkdir(parents=True)
        (job.out_dir / "adapter_config.json").write_text("{}")
        record_step({"step": 0, "loss": 0.5})
        return TrainResult(
            summary={"loss": 0.4, "done": True},
            probe={"probe_kl": 0.01, "probe_ppl": 10.0},
            base_probe={"probe_ppl": 9.9},
            passed=self.passed,
            reasons=[] if self.passed else ["probe KL 9.0 > 0.5"],
        )


def user_samples(user, n: int, *, reward: float = 1.0) -> list[Sample]:
    """``n`` judged answers in ``user``'s conversations, each a ready sample."""
    out = []
    for i in range(n):
        answer = AnswerFactory(
            parent__conversation__owner=user,
            parent__content=f"{user.username} q{i}",
            policy_version=policy_version_for(user=user),
        )
        judgement = Judgement.objects.create(
            message=answer, fingerprint=f"f{i}", source="feedback", score=int(reward)
        )
        out.append(
            Sample.objects.create(
                message=answer,
                judgement=judgement,
                kind="rl",
                reward=reward,
                prompt_token_ids=[1, 2],
                response_token_ids=[5, 6],
                response_logprobs=[-1.0, -1.0],
                prompt_messages=[{"role": "user", "content": f"q{i}"}],
                policy_version=answer.policy_version,
            )
        )
    return out
