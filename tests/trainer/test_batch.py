"""Collation keeps the sampled tokens in place and masks only what is trained."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.batch import (
    HINT_PREFIX,
    Sample,
    chat_prompt_ids,
    collate,
    hinted_messages,
    hinted_prompt_ids,
    move_targets,
)
from trainer.config import UpdateConfig, config_from_dict
from trainer.policy import load_policy, token_logprobs


def test_collate_right_pads_and_masks_only_the_targets() -> None:
    batch = collate(
        [[5, 6, 7], [8]],
        [[9, 10], [11, 12, 13]],
        pad_id=0,
        target_logprobs=[[-0.5, -1.5], [-1.0, -2.0, -3.0]],
    )
    assert batch.input_ids_B_T.tolist() == [[5, 6, 7, 9, 10], [8, 11, 12, 13, 0]]
    assert batch.attention_mask_B_T.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    assert batch.target_mask_B_T.tolist() == [[0, 0, 0, 1, 1], [0, 1, 1, 1, 0]]
    assert batch.target_logp_B_T.tolist() == [[0, 0, 0, -0.5, -1.5], [0, -1.0, -2.0, -3.0, 0]]


def test_move_targets_puts_teacher_values_at_the_student_positions() -> None:
    student = collate([[1, 2], [3, 4, 5]], [[7, 8], [9]])
    teacher = collate([[1, 2, 99, 98], [3, 4, 5, 97]], [[7, 8], [9]])
    values = torch.arange(teacher.input_ids_B_T.numel(), dtype=torch.float32)
    values = values.reshape(teacher.input_ids_B_T.shape) * teacher.target_mask_B_T
    moved = move_targets(values, teacher.target_mask_B_T, student.target_mask_B_T)
    assert moved[student.target_mask_B_T.bool()].tolist() == [4.0, 5.0, 10.0]
    assert torch.all(moved[~student.target_mask_B_T.bool()] == 0)


def test_a_sample_needs_one_sampler_logprob_per_response_token() -> None:
    with pytest.raises(ValueError, match="log-probs"):
        Sample([1, 2], [3, 4], [-1.0])
    with pytest.raises(ValueError, match="teacher_prompt_token_ids"):
        Sample([1, 2], [3], [-1.0], hint="be brief")


def test_the_hint_goes_to_the_last_user_message_only() -> None:
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
    ]
    hinted = hinted_messages(messages, "  say Sure!  ")
    assert hinted[0]["content"] == "first"
    assert hinted[2]["content"] == f"second{HINT_PREFIX}say Sure!"
    assert messages[2]["content"] == "second"  # the caller's list is untouched


def test_hinted_prompt_ids_extend_the_plain_prompt_with_the_hint(tiny_model_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "hello"}]
    plain = tokenizer.decode(chat_prompt_ids(tokenizer, messages))
    hinted = tokenizer.decode(hinted_prompt_ids(tokenizer, messages, "be brief"))
    assert plain.endswith("<|im_start|>assistant\n")
    assert hinted == plain.replace("hello", f"hello{HINT_PREFIX}be brief")


def test_token_logprobs_equal_a_full_forward_with_log_softmax(tiny_model_dir: Path) -> None:
    model = load_policy(tiny_model_dir, UpdateConfig())
    batch = collate([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]], pad_id=0)
    with torch.no_grad():
        ours = token_logprobs(
            model, batch.input_ids_B_T, batch.attention_mask_B_T, batch.target_mask_B_T
        )
        logits = model(
            input_ids=batch.input_ids_B_T, attention_mask=batch.attention_mask_B_T
        ).logits
    full = torch.log_softmax(logits[:, :-1], -1).gather(-1, batch.input_ids_B_T[:, 1:, None])
    mask = batch.target_mask_B_T[:, 1:].bool()
    assert torch.allclose(ours[:, 1:][mask], full.squeeze(-1)[mask], atol=1e-5)
    assert torch.all(ours[~batch.target_mask_B_T.bool()] == 0)


def test_config_from_dict_ignores_unknown_keys_and_round_trips() -> None:
    import dataclasses

    config = UpdateConfig(algorithm="opd", lr=1e-3, target_modules=("q_proj", "v_proj"))
    stored = {**dataclasses.asdict(config), "target_modules": ["q_proj", "v_proj"], "old": 1}
    assert config_from_dict(stored) == config


def test_config_refuses_modules_vllm_cannot_serve() -> None:
    with pytest.raises(ValueError, match="lm_head"):
        UpdateConfig(target_modules=("q_proj", "lm_head"))


def test_token_logprobs_at_a_temperature_are_the_scaled_distributions(
    tiny_model_dir: Path,
) -> None:
    """What vLLM's processed log-probs are at temperature T: log_softmax(logits / T)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    ids = torch.tensor([[5, 9, 12, 40, 41, 42], [7, 8, 9, 10, 11, 12]])
    mask = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]], dtype=torch.float32)
    temperature = torch.tensor([0.7, 1.0])
    with torch.no_grad():
        ours = token_logprobs(model, ids, torch.ones_like(ids), mask, temperature)
        logits = model(ids).logits[:, :-1] / temperature[:, None, None]
        full = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
        plain = token_logprobs(model, ids, torch.ones_like(ids), mask)
    assert torch.allclose(ours[:, 1:][mask[:, 1:].bool()], full[mask[:, 1:].bool()], atol=1e-5)
    assert not torch.allclose(ours[0], plain[0])  # 0.7 is not 1
    assert torch.allclose(ours[1], plain[1])
