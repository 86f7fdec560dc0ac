"""Memories in the prompt, context distillation of them, and the gap the gate measures: pure
functions and a tiny random Llama (no database)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from trainer.batch import chat_prompt_ids, trainer_sample
from trainer.config import UpdateConfig
from trainer.memory_gap import is_learnt, memory_gaps
from trainer.memory_prompt import (
    MARKER,
    memory_block,
    sentence,
    served_messages,
    served_tokens,
)
from trainer.policy import adapter_disabled, load_policy, token_logprobs
from trainer.policy_gradient import policy_gradient_terms, prepare_chunk
from trainer.update import run_update

ASKED = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Plan my week."},
]


def test_memories_go_after_the_last_user_message_in_the_appended_form() -> None:
    served = served_messages(ASKED, ["Call me Sam", "Use metric units."], form="appended")
    assert served[-1]["content"] == "Plan my week." + MARKER + "Call me Sam. Use metric units."
    assert served[:3] == ASKED[:3]
    assert ASKED[-1]["content"] == "Plan my week."  # the request itself is not changed


def test_the_system_form_adds_to_an_agents_own_system_message() -> None:
    served = served_messages(ASKED, ["Call me Sam"], form="system")
    assert served[0]["content"].startswith("You are helpful.\n\nWhat you know about the user")
    assert "- Call me Sam." in served[0]["content"]
    assert served[-1] == ASKED[-1]
    bare = served_messages(ASKED[1:], ["Call me Sam"], form="system")
    assert bare[0]["role"] == "system" and len(bare) == len(ASKED)


def test_both_forms_and_no_memories() -> None:
    both = served_messages(ASKED, ["Call me Sam"], form="both")
    assert MARKER in both[-1]["content"] and "Call me Sam" in both[0]["content"]
    assert served_messages(ASKED, [], form="both") == ASKED
    with pytest.raises(ValueError, match="unknown memory form"):
        served_messages(ASKED, ["x"], form="sideways")


def test_text_parts_get_the_memories_as_one_more_part() -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    served = served_messages(parts, ["Call me Sam"])
    assert served[0]["content"][-1] == {"type": "text", "text": MARKER + "Call me Sam."}


def test_sentences_blocks_and_the_token_estimate() -> None:
    assert sentence("  call   me Sam ") == "call me Sam."
    assert sentence("叫我小明。") == "叫我小明。"
    assert memory_block(["a", "b!"]) == "a. b!"
    assert served_tokens([]) == 0
    one, two = served_tokens(["Call me Sam"]), served_tokens(["Call me Sam", "I'm vegetarian"])
    assert 0 < one < two
    assert served_tokens(["Call me Sam"], "both") > one


def test_a_memory_sample_is_taught_by_the_served_prompt_and_learnt_without_it(
    tiny_model_dir: Path,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    asked = [{"role": "user", "content": "Plan my week."}]
    served_ids = chat_prompt_ids(tokenizer, served_messages(asked, ["Call me Sam"]))
    response = tokenizer(" Sure Sam, here it is.", add_special_tokens=False)["input_ids"]
    sample = trainer_sample(
        tokenizer,
        prompt_messages=asked,
        prompt_token_ids=served_ids,
        response_token_ids=response,
        response_logprobs=[-1.0] * len(response),
        reward=None,
        hint=None,
        correction="",
        memory="Call me Sam.",
    )
    assert sample.distils_context
    assert sample.teacher_prompt_token_ids == served_ids
    assert sample.prompt_token_ids == chat_prompt_ids(tokenizer, asked)
    assert sample.hint == "Call me Sam." and sample.reward is None


def _memory_sample(tokenizer: object, question: str, answer: str) -> object:
    asked = [{"role": "user", "content": question}]
    response = tokenizer(answer, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    return trainer_sample(
        tokenizer,
        prompt_messages=asked,
        prompt_token_ids=chat_prompt_ids(tokenizer, served_messages(asked, ["Call me Sam"])),
        response_token_ids=response,
        response_logprobs=[-0.5] * len(response),
        reward=None,
        hint=None,
        correction="",
        memory="Call me Sam.",
    )


@pytest.mark.parametrize("algorithm", ["rl", "opd", "combined"])
def test_the_advantage_is_teacher_minus_student_on_the_sampled_tokens(
    tiny_model_dir: Path, algorithm: str
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = UpdateConfig(algorithm=algorithm, memory_teacher="policy", lr=1e-3)
    model = load_policy(tiny_model_dir, config)
    samples = [_memory_sample(tokenizer, "Plan my week.", " Sure Sam, here it is.")]
    chunk = prepare_chunk(
        model, config, samples, [0.0], use_rl=True, use_opd=algorithm != "rl",
        pad_id=0, device=torch.device("cpu"),
    )  # fmt: skip
    sample = samples[0]
    mask = chunk.batch.target_mask_B_T.bool()

    def scored(prompt: list[int]) -> torch.Tensor:
        ids = torch.tensor([prompt + sample.response_token_ids])
        target = torch.zeros_like(ids, dtype=torch.float32)
        target[0, len(prompt) :] = 1
        with torch.no_grad():
            logp = token_logprobs(model, ids, torch.ones_like(ids), target)
        return logp[target.bool()]

    student, teacher = scored(sample.prompt_token_ids), scored(sample.teacher_prompt_token_ids)
    # The sampler's log-probs were the teacher's: the old policy is the student's own.
    assert torch.allclose(chunk.batch.target_logp_B_T[mask], student, atol=1e-5)
    assert bool(chunk.uses_opd_B[0]) and not bool(chunk.uses_rl_B[0])
    model.train()
    logp = token_logprobs(
        model,
        chunk.batch.input_ids_B_T,
        chunk.batch.attention_mask_B_T,
        chunk.batch.target_mask_B_T,
        chunk.batch.temperature_B,
    )
    policy_gradient_terms(config, chunk, logp, first_step=True)
    assert chunk.advantages_B_T is not None
    expected = config.w_opd * (teacher - student)
    assert torch.allclose(chunk.advantages_B_T[mask], expected, atol=1e-4)


@pytest.mark.parametrize(
    ("teacher", "memory_teacher"), [("base", "policy"), ("policy", "base"), ("base", "base")]
)
def test_memory_samples_are_taught_by_their_own_teacher_setting(
    tiny_model_dir: Path, teacher: str, memory_teacher: str
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = UpdateConfig(teacher=teacher, memory_teacher=memory_teacher, lr=1e-3)
    model = load_policy(tiny_model_dir, config)
    for name, parameter in model.named_parameters():  # an adapter that differs from the base
        if "lora_B" in name:
            torch.nn.init.normal_(
                parameter.data, std=0.5, generator=torch.Generator().manual_seed(0)
            )
    sample = _memory_sample(tokenizer, "Plan my week.", " Sure Sam, here it is.")
    chunk = prepare_chunk(
        model, config, [sample], [0.0], use_rl=True, use_opd=True, pad_id=0,
        device=torch.device("cpu"),
    )  # fmt: skip
    ids = torch.tensor([sample.teacher_prompt_token_ids + sample.response_token_ids])
    target = torch.zeros_like(ids, dtype=torch.float32)
    target[0, len(sample.teacher_prompt_token_ids) :] = 1
    with torch.no_grad():
        policy = token_logprobs(model, ids, torch.ones_like(ids), target)[target.bool()]
        with adapter_disabled(model):
            base = token_logprobs(model, ids, torch.ones_like(ids), target)[target.bool()]
    assert not torch.allclose(policy, base, atol=1e-3)
    taught = chunk.teacher_logp_B_T[chunk.batch.target_mask_B_T.bool()]
    assert torch.allclose(taught, policy if memory_teacher == "policy" else base, atol=1e-5)


def test_an_unknown_memory_teacher_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown teacher 'student'"):
        UpdateConfig(memory_teacher="student")  # type: ignore[arg-type]


def test_an_update_of_memory_samples_alone_trains_and_moves_the_student(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    samples = [
        _memory_sample(tokenizer, question, " Sure Sam, here you go.")
        for question in ("Plan my week.", "Name a fruit.", "Tell me a joke.")
    ]
    config = UpdateConfig(algorithm="rl", lr=5e-3, refine_max_tokens=0)
    out = tmp_path / "out"
    steps = list(
        run_update(
            config,
            samples,
            base_model_dir=tiny_model_dir,
            init_adapter_dir=None,
            out_adapter_dir=out,
        )
    )
    done = steps[-1]
    assert done["done"] and (tmp_path / "out" / "adapter_model.safetensors").exists()
    assert any(step.get("tokens", 0) > 0 for step in steps[:-1])


def test_the_gap_is_measured_per_memory_for_the_policy_and_the_base(tiny_model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = load_policy(tiny_model_dir, UpdateConfig())
    gaps = memory_gaps(model, tokenizer, ["Call me Sam", "Use metric units"], prompts=["Hi"])
    assert [g["memory"] for g in gaps] == ["Call me Sam", "Use metric units"]
    for figures in gaps:
        assert set(figures) == {"memory", "gap", "base_gap", "learnt"}
        # A fresh adapter is the base: the same gap with it on and off.
        assert figures["gap"] == pytest.approx(figures["base_gap"], abs=1e-4)
        assert figures["learnt"] is False


def test_learnt_means_most_of_a_visible_gap_closed() -> None:
    assert is_learnt({"gap": 0.1, "base_gap": 0.5})
    assert not is_learnt({"gap": 0.3, "base_gap": 0.5})
    assert not is_learnt({"gap": -0.1, "base_gap": 0.0})
    assert not is_learnt({})
