"""The hyperparameters of one training update, as a frozen dataclass.

A ``TrainingUpdate`` stores ``dataclasses.asdict(config)`` as JSON, so every update records the
config it ran with; ``config_from_dict`` turns that JSON (or a settings dict) back into one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from trainer.algorithms import algorithm_get

OldLogpSource = Literal["recompute", "sampler"]
Teacher = Literal["base", "policy"]
BaseDtype = Literal["auto", "float32", "bfloat16"]

# vLLM's LoRA support for Llama-family models covers exactly these projections; an adapter
# with any other target (embeddings, lm_head, norms) would train but fail to load in serving.
VLLM_LORA_MODULES = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
)


@dataclass(frozen=True)
class UpdateConfig:
    algorithm: str = "combined"
    """Which signal trains the policy, a name in trainer.algorithms.ALGORITHMS: "rl" (reward as
    advantage), "opd" (teacher − student log-probs per token, teacher = the model with the hint
    in its prompt) or "combined" (w_rl·reward + w_opd·(teacher − old)). Samples lacking the
    chosen signal add no policy gradient; corrections are trained under every algorithm."""

    lr: float = 1e-3
    """AdamW learning rate for the LoRA parameters, well above the 1e-5 usual for full
    fine-tuning: LoRA's B starts at zero, only its product with A moves the model, and one
    update is just a few steps on ~8 samples. Measured on SmolLM2-135M (8 samples, 2 steps,
    combined): the "Sure!" opening's log-prob rises by 0.33 nats at 1e-4, 0.94 at 3e-4 and
    1.66 at 1e-3; at 1e-3 the second step clips 35% of tokens (PPO's trust region does the
    work), against 13% at 3e-4. Chosen by the replay sweep
    (``python -m bench.sweep --grid lr=3e-4,1e-3``)."""

    steps_per_batch: int = 2
    """Optimizer steps per update; each step is one full pass over the batch (gradients
    accumulated over micro-batches). Step 1 reuses step 0's log-probs as the old policy."""

    micro_batch_size: int = 16
    """At most this many sequences per forward/backward pass (micro_batch_tokens is the limit
    that matters for memory); results do not change with either."""

    micro_batch_tokens: int = 4096
    """Padded tokens (sequences × longest of them) per forward/backward pass: activation memory
    grows with tokens, not sequences, so this is what keeps a pass inside its memory budget. A
    sample longer than this gets a micro-batch of its own."""

    gradient_checkpointing: bool | None = None
    """Recompute each layer's activations in the backward pass instead of keeping them: about a
    third more compute for a fraction of the activation memory. None: on for a GPU, off on the
    CPU (where memory is rarely the limit and compute always is)."""

    base_dtype: BaseDtype = "auto"
    """Precision of the frozen base weights. "auto": bfloat16 on a GPU that supports it (half
    the memory of fp32, and what vLLM serves), float32 on the CPU (this CPU has no fast bf16).
    The LoRA weights, their gradients and the optimizer state are fp32 whatever this says."""

    clip_low: float = 0.2
    """PPO ratio may fall to 1 − clip_low before a negative advantage stops pushing it down."""

    clip_high: float = 0.28
    """PPO ratio may rise to 1 + clip_high before a positive advantage stops pushing it up
    (DAPO's clip-higher: more room for unlikely tokens to grow)."""

    kl_coef: float = 0.0
    """Weight of the k3 KL(policy ‖ base) penalty on response tokens; 0 skips the reference
    forward pass entirely. The probe gate bounds drift between versions either way."""

    w_rl: float = 1.0
    """Weight of the reward advantage in the combined advantage."""

    w_opd: float = 1.0
    """Weight of the per-token teacher − old advantage in the combined advantage."""

    sft_coef: float = 0.5
    """Weight of the supervised loss on a user's correction (the answer they wrote), and on
    a hint's refinement (see refine_max_tokens)."""

    anchor_coef: float = 1.0
    """Weight of the language anchor (``trainer.anchor``): the exact KL(base ‖ policy) per token
    on five paragraphs of everyday English, added to every step's loss, so the general
    language the probe perplexity measures stays where the base had it. 0 skips it. Chosen by
    the replay (``python -m bench.sweep --grid anchor_coef=0,1``): without it the served
    versions' probe perplexity creeps up version after version while the preference is learnt
    either way."""

    refine_max_tokens: int = 64
    """Hint refinement (``trainer.refine``): each hinted sample without a user's correction is
    given the teacher's greedy answer to the hinted prompt, at most this many tokens, trained
    like a correction under the prompt the user sent. 0 turns it off (then a comment teaches
    through OPD alone)."""

    use_running_baseline: bool = False
    """Subtract a running mean of rewards from rewards that are not in a GRPO group (groups of
    two or more siblings are always group-normalised)."""

    batch_baseline: bool = True
    """Subtract the batch's mean reward from the rewards of samples not in a GRPO group (a
    group of the batch's singles, not normalised by their spread). A batch whose answers all got
    the same verdict then carries no reward signal (neither the +1 of an all-liked batch nor the
    −1 of an all-disliked one), while a miss among mostly liked answers weighs more (−1.75 at 7 of
    8 liked); hints and corrections still train. AdamW's state is carried along the lineage, so a
    batch without any signal still moves the adapter by the previous update's momentum. Not with
    use_running_baseline (set this False to use that one).

    Chosen by the replay: after a change of mind every answer misses, and without it the all −1
    batches push down every sampled token until answers come out empty and the gate refuses
    them, so nothing new is learnt after the switch (``python -m bench.replay --then
    all-lowercase --switch-after 8 --versions 16 --set batch_baseline=false``; the figures at
    the default are in docs/benchmarks.md)."""

    initial_baseline: float = 0.0
    """Running baseline carried over from the previous update (its summary reports the new
    one); only used with use_running_baseline."""

    baseline_momentum: float = 0.9
    """EMA momentum of the running baseline: b ← m·b + (1 − m)·r."""

    old_logp_source: OldLogpSource = "recompute"
    """Where the PPO ratio's "old" log-probs come from. "recompute" (default): the trainer's own
    fp32 log-probs before the first step, so clipping only measures drift this update caused,
    not the bf16/fp32 gap between vLLM and the trainer (which would otherwise use up the 0.2
    clip range on some tokens and silently drop their gradient); the sampler mismatch is then
    corrected by truncated importance weights min(π_old/π_sampler, tis_cap). It costs nothing
    extra, because the first step's forward pass is exactly the old policy. "sampler": the
    stored vLLM log-probs are the old policy, the ratio against them is the importance weight
    and is truncated at tis_cap (dual clip)."""

    tis_cap: float = 2.0
    """Cap on the truncated importance weight (or on the ratio, with old_logp_source="sampler")."""

    lora_rank: int = 16
    """LoRA rank for a new adapter; must not exceed vLLM's --max-lora-rank (VLLM_MAX_LORA_RANK,
    16 by default): the trainer refuses a larger one, which serving could not load."""

    lora_alpha: int = 32
    """LoRA scaling numerator: the update is scaled by alpha / rank."""

    lora_dropout: float = 0.0
    """Dropout on the LoRA input. 0 keeps the first step's log-probs equal to the old policy's
    (otherwise the trainer spends one extra forward pass to recompute them)."""

    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Modules that get LoRA; only projections vLLM can serve (see VLLM_LORA_MODULES)."""

    teacher: Teacher = "base"
    """OPD teacher: "base" (adapter disabled: the frozen base model, a fixed target) or
    "policy" (the current adapter at the start of the update, hint in the prompt)."""

    memory_teacher: Teacher = "base"
    """The teacher of memory samples (``Sample.distils_context``: the memories in the prompt),
    "base" or "policy" as ``teacher``. With "policy" what the adapter learnt adds to what the
    memory does in context, so the target moves past the base's reading of it."""

    max_grad_norm: float = 1.0
    """Gradients of the LoRA parameters are clipped to this global norm before each step."""

    seed: int = 0
    """Seeds the new adapter's initialisation and every random draw, so reruns are identical."""

    group_eps: float = 1e-6
    """Added to the group std when normalising GRPO advantages."""

    def __post_init__(self) -> None:
        unsupported = set(self.target_modules) - VLLM_LORA_MODULES
        if unsupported:
            raise ValueError(f"vLLM cannot serve LoRA on {sorted(unsupported)}")
        algorithm_get(self.algorithm)  # ValueError naming the known algorithms
        if self.refine_max_tokens < 0:
            raise ValueError(f"refine_max_tokens must be 0 or more, not {self.refine_max_tokens}")
        if self.old_logp_source not in ("recompute", "sampler"):
            raise ValueError(f"unknown old_logp_source {self.old_logp_source!r}")
        for teacher in (self.teacher, self.memory_teacher):
            if teacher not in ("base", "policy"):
                raise ValueError(f"unknown teacher {teacher!r}")
        if self.steps_per_batch < 1 or self.micro_batch_size < 1 or self.micro_batch_tokens < 1:
            raise ValueError(
                "steps_per_batch, micro_batch_size and micro_batch_tokens must be at least 1"
            )
        if self.base_dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"unknown base_dtype {self.base_dtype!r}")
        if self.anchor_coef < 0:
            raise ValueError(f"anchor_coef must be 0 or more, not {self.anchor_coef}")
        if self.batch_baseline and self.use_running_baseline:
            raise ValueError(
                "batch_baseline (on by default) and use_running_baseline are two baselines: "
                "set batch_baseline=false to use the running one"
            )


def config_from_dict(values: dict[str, Any]) -> UpdateConfig:
    """An UpdateConfig from stored JSON or settings; unknown keys ignored, lists made tuples."""
    known = {field.name for field in dataclasses.fields(UpdateConfig)}
    kwargs = {key: value for key, value in values.items() if key in known}
    if "target_modules" in kwargs:
        kwargs["target_modules"] = tuple(kwargs["target_modules"])
    return UpdateConfig(**kwargs)
