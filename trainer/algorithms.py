"""The training algorithms Parley knows, in one registry.

Everything that depends on which algorithm runs reads it from here: ``UpdateConfig`` validates
``algorithm`` against it, the update (``trainer.update``) takes the signals it uses and runs
the loss it names (``trainer.policy_gradient``), the claim
(``webapp.learning.workflows.claiming``) takes the sample kinds it names, the bench offers its
names as choices and the admin shows its step metrics. Adding an algorithm means one entry
here and, for a new policy loss, that loss in ``trainer/losses.py`` (``POLICY_LOSSES``).
"""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE_KINDS = ("rl", "opd", "combined", "memory")
"""What a stored sample carries (``Sample.Kind``): a reward, a hint, both, or a person's
memories to distil (every algorithm trains those: ``Sample.distils_context``)."""

COMMON_STEP_METRICS = ("step", "loss", "grad_norm", "tokens", "tokens_per_second", "seconds")
"""Metrics every update step reports, whichever algorithm it runs."""


@dataclass(frozen=True)
class Algorithm:
    name: str
    """The value of ``UpdateConfig.algorithm`` and ``PARLEY_TRAIN_ALGORITHM``."""

    uses_reward: bool
    """The judged reward is an advantage (broadcast over the response)."""

    uses_hint: bool
    """The hinted teacher's per-token log-probs minus the old policy's are an advantage."""

    sample_kinds: tuple[str, ...]
    """The ``Sample.kind`` values an update claims. Every kind for those registered below: a
    sample lacking the algorithm's signal adds no policy gradient, but its correction (if any)
    is still trained with the supervised loss."""

    loss: str
    """The policy loss in ``trainer.losses``."""

    step_metrics: tuple[str, ...]
    """Metrics its steps report besides COMMON_STEP_METRICS (the admin's columns)."""

    def __post_init__(self) -> None:
        unknown = set(self.sample_kinds) - set(SAMPLE_KINDS)
        if unknown:
            raise ValueError(f"{self.name}: unknown sample kinds {sorted(unknown)}")

    def unused_reason(self, *, kind: str, has_hint: bool, has_correction: bool) -> str:
        """Why this algorithm never claims a sample of this shape ("" when it does): the words
        for the webapp's filter of the same two rules (``unused_by_algorithm`` in
        ``webapp.learning.selectors``), which the claim leaves out and the counts name.

        >>> ALGORITHMS["opd"].unused_reason(kind="rl", has_hint=False, has_correction=False)
        'opd trains only hints and corrections; a thumb alone is kept for rl or combined'
        >>> ALGORITHMS["combined"].unused_reason(kind="rl", has_hint=False, has_correction=False)
        ''
        """
        if not self.uses_reward and not (has_hint or has_correction):
            return (
                f"{self.name} trains only hints and corrections; "
                "a thumb alone is kept for rl or combined"
            )
        if not self.uses_hint and kind == "opd" and not has_correction:
            return f"{self.name} trains only rewards; a hint alone is kept for opd or combined"
        return ""

    @property
    def step_columns(self) -> tuple[str, ...]:
        """Every per-step metric in display order: step and loss first, throughput last."""
        step, loss, *rest = COMMON_STEP_METRICS
        return (step, loss, *self.step_metrics, *rest)


_PPO_METRICS = ("pg_loss", "kl", "clip_fraction", "sft_loss", "mean_advantage")

ALGORITHMS: dict[str, Algorithm] = {
    algorithm.name: algorithm
    for algorithm in (
        Algorithm("rl", True, False, SAMPLE_KINDS, "ppo_clip_loss", _PPO_METRICS),
        Algorithm("opd", False, True, SAMPLE_KINDS, "ppo_clip_loss", _PPO_METRICS),
        Algorithm("combined", True, True, SAMPLE_KINDS, "ppo_clip_loss", _PPO_METRICS),
    )
}


def algorithm_get(name: str) -> Algorithm:
    """The registered algorithm called ``name``; ValueError naming the known ones otherwise."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r} (known: {', '.join(ALGORITHMS)})") from None


def all_step_columns() -> tuple[str, ...]:
    """The union of every algorithm's step columns, in display order."""
    seen: dict[str, None] = {}
    for algorithm in ALGORITHMS.values():
        seen.update(dict.fromkeys(algorithm.step_columns))
    return tuple(seen)
