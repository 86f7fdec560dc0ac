"""The memory-budget arithmetic: parameter counts, what checkpointing saves, the refusal."""

from __future__ import annotations

import pytest
from transformers import LlamaConfig, LlamaForCausalLM

from tests.helpers import ROOT
from trainer.gpu_memory import (
    ANCHOR_TOKENS_ESTIMATE,
    SHAPES,
    MemoryBudgetError,
    ModelShape,
    activation_bytes_per_token,
    budget_table,
    check_budget,
    lora_parameters,
    memory_budget,
    vllm_share_of_training_gpu,
)

FOUR_B = SHAPES["4B (Qwen3-4B)"]
QKVO = ("q_proj", "k_proj", "v_proj", "o_proj")


def _budget(shape: ModelShape = FOUR_B, **overrides: object):
    values = {
        "dtype_bytes": 2,
        "lora_rank": 16,
        "target_modules": QKVO,
        "micro_batch_tokens": 4096,
        "gradient_checkpointing": True,
        "gpu_gib": 80.0,
        "vllm_share": 0.6,
        **overrides,
    }
    return memory_budget(shape, **values)  # type: ignore[arg-type]


@pytest.mark.parametrize("tied", [True, False])
def test_parameter_count_matches_a_real_model_of_the_same_shape(tied: bool) -> None:
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(config)
    shape = ModelShape.from_config(config)
    assert shape.parameters == sum(p.numel() for p in model.parameters())


def test_lora_parameters_match_peft() -> None:
    from peft import LoraConfig, get_peft_model

    config = LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = get_peft_model(
        LlamaForCausalLM(config), LoraConfig(r=8, target_modules=list(QKVO), task_type="CAUSAL_LM")
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lora_parameters(ModelShape.from_config(config), 8, QKVO) == trainable


def test_published_shapes_have_their_advertised_sizes() -> None:
    sizes = {name: shape.parameters / 1e9 for name, shape in SHAPES.items()}
    assert sizes["0.5B (Qwen2.5-0.5B)"] == pytest.approx(0.494, abs=0.01)
    assert sizes["4B (Qwen3-4B)"] == pytest.approx(4.02, abs=0.02)
    assert sizes["8B (Qwen3-8B)"] == pytest.approx(8.19, abs=0.02)


def test_checkpointing_keeps_a_small_fraction_of_the_activations() -> None:
    off = activation_bytes_per_token(FOUR_B, 2, gradient_checkpointing=False)
    on = activation_bytes_per_token(FOUR_B, 2, gradient_checkpointing=True)
    assert on < off / 10


def test_activations_grow_with_tokens_not_sequences() -> None:
    assert _budget(micro_batch_tokens=8192).activations_gib == pytest.approx(
        2 * _budget(micro_batch_tokens=4096).activations_gib
    )


def test_the_old_default_split_cannot_train_a_4b_model_and_a_lower_share_can() -> None:
    # vLLM at 0.85 of an 80 GiB GPU leaves 12 GiB: bf16 weights alone are 7.5 of them.
    assert not _budget(vllm_share=0.85).fits
    assert _budget(vllm_share=0.6).fits
    assert _budget(vllm_share=0.0).available_gib == 80.0


def test_fp32_weights_double_the_weights_share() -> None:
    assert _budget(dtype_bytes=4).weights_gib == pytest.approx(2 * _budget().weights_gib)


def test_a_budget_that_cannot_fit_is_refused_with_its_arithmetic() -> None:
    with pytest.raises(MemoryBudgetError) as refused:
        check_budget(_budget(SHAPES["8B (Qwen3-8B)"], vllm_share=0.85))
    message = str(refused.value)
    assert "GiB needed" in message and "12.0 GiB available" in message
    assert "micro_batch_tokens" in message
    assert check_budget(_budget()).fits


@pytest.mark.parametrize(
    ("env", "share"),
    [
        ({}, 0.85),
        ({"VLLM_GPU_MEMORY_UTILIZATION": "0.6"}, 0.6),
        ({"TRAIN_GPUS": "1", "VLLM_GPUS": "0", "VLLM_GPU_MEMORY_UTILIZATION": "0.9"}, 0.0),
        ({"TRAIN_GPUS": "0,1", "VLLM_GPUS": "1", "VLLM_GPU_MEMORY_UTILIZATION": "0.5"}, 0.5),
        ({"PARLEY_TRAIN_VLLM_SHARE": "0.3", "TRAIN_GPUS": "1", "VLLM_GPUS": "0"}, 0.3),
        ({"VLLM_GPU_MEMORY_UTILIZATION": ""}, 0.85),
    ],
)
def test_vllm_share_follows_the_gpu_split(env: dict[str, str], share: float) -> None:
    assert vllm_share_of_training_gpu(env) == share


def test_the_production_guide_shows_the_table_this_code_computes() -> None:
    guide = (ROOT / "docs" / "production.md").read_text()
    assert budget_table() in guide
    quoted = _budget(vllm_share=0.85, anchor_tokens=ANCHOR_TOKENS_ESTIMATE)  # the default anchor
    assert quoted.explain() in guide  # the refusal it quotes


def test_the_anchor_adds_the_base_distribution_it_keeps() -> None:
    from trainer.anchor import anchor_token_ids
    from trainer.config import UpdateConfig
    from trainer.gpu_memory import anchor_token_count

    without, with_anchor = _budget(), _budget(anchor_tokens=400)
    assert without.anchor_gib == 0.0 and "anchor" not in without.explain()
    assert with_anchor.anchor_gib == pytest.approx(400 * FOUR_B.vocab * 4 / 2**30)
    assert with_anchor.need_gib == pytest.approx(without.need_gib + with_anchor.anchor_gib)
    assert f"+ anchor {with_anchor.anchor_gib:.2f} " in with_anchor.explain()
    assert anchor_token_count(UpdateConfig(anchor_coef=0.0), None) == 0
    assert anchor_token_count(UpdateConfig(anchor_coef=1.0), None) == ANCHOR_TOKENS_ESTIMATE
    smol = ROOT / "var" / "models" / "SmolLM2-135M-Instruct"
    if smol.is_dir():  # the estimate covers the real tokenizer's count
        counted = anchor_token_count(UpdateConfig(anchor_coef=1.0), smol)
        assert counted == sum(len(ids) for ids in anchor_token_ids(str(smol)))
        assert counted <= ANCHOR_TOKENS_ESTIMATE
