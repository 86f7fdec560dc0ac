"""The training workflow's one adapter to trainer/, run for real on a tiny random model."""

from __future__ import annotations

from transformers import AutoTokenizer

from tests.trainer.tiny import build_tiny_model
from trainer.batch import chat_prompt_ids
from trainer.gate import GateThresholds
from webapp.learning.workflows.training import SampleRow, TrainJob, train_and_gate


def _row(tokenizer, question: str, answer: str, **signals) -> SampleRow:
    messages = [{"role": "user", "content": question}]
    response = tokenizer(answer, add_special_tokens=False)["input_ids"]
    fields = {"reward": None, "hint": None, "correction": "", "group_id": None, **signals}
    return SampleRow(
        prompt_messages=messages,
        prompt_token_ids=chat_prompt_ids(tokenizer, messages),
        response_token_ids=response,
        response_logprobs=[-3.0] * len(response),
        **fields,
    )


def test_stored_rows_are_trained_recorded_per_step_and_gated(tmp_path_factory) -> None:
    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [
        _row(tokenizer, "what is two plus two?", " four.", reward=1.0),
        _row(tokenizer, "say hello", " yo", hint="start with Sure!", correction="Sure! Hello."),
    ]
    out_dir = tmp_path_factory.mktemp("update") / "adapter"
    job = TrainJob(
        config={"algorithm": "combined", "lr": 1e-2, "target_modules": ["q_proj", "v_proj"]},
        samples=rows,
        base_model_dir=model_dir,
        init_adapter_dir=None,
        out_dir=out_dir,
        processes=1,
        base_probe=None,
        gate=GateThresholds(max_kl=1e9, max_ppl_ratio=0.0),  # none passes: reasons say why
    )
    steps: list[dict] = []
    result = train_and_gate(job, record_step=steps.append)
    assert [step["step"] for step in steps] == [0, 1]
    assert (out_dir / "adapter_config.json").is_file()
    assert result.summary["done"] and result.summary["sft_samples"] == 1
    assert result.summary["pg_samples"] == 2  # the reward and the hint each carry a signal
    assert result.base_probe["probe_ppl"] > 0 and result.base_probe["probe_kl"] == 0
    assert {"probe_kl", "probe_ppl"} <= set(result.probe)
    assert not result.passed and "perplexity" in result.reasons[0]
