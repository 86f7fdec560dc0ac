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


def test_two_peoples_jobs_train_in_one_stacked_run_each_gated_and_equal_to_alone(
    tmp_path_factory,
) -> None:
    from safetensors.torch import load_file

    from webapp.learning.workflows.together import train_and_gate_together

    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = {"algorithm": "combined", "lr": 1e-2, "target_modules": ["q_proj", "v_proj"]}
    people = [
        [_row(tokenizer, "what is two plus two?", " four.", reward=1.0)],
        [_row(tokenizer, "say hello", " yo", hint="start with Sure!", correction="Sure! Hello.")],
    ]
    root = tmp_path_factory.mktemp("updates")

    def job(rows: list[SampleRow], name: str) -> TrainJob:
        return TrainJob(
            config=config,
            samples=rows,
            base_model_dir=model_dir,
            init_adapter_dir=None,
            out_dir=root / name,
            processes=1,
            base_probe=None,
            gate=GateThresholds(max_kl=1e9, max_ppl_ratio=1e9),
        )

    steps: list[tuple[int, dict]] = []
    results = train_and_gate_together(
        [job(rows, f"together-{i}") for i, rows in enumerate(people)],
        record_step=lambda index, metrics: steps.append((index, metrics)),
    )
    assert sorted(index for index, _ in steps) == [0, 0, 1, 1]  # two steps each
    assert [r.passed for r in results] == [True, True]
    assert all({"probe_kl", "probe_ppl"} <= set(r.probe) for r in results)
    assert results[1].summary["sft_samples"] == 1 and results[0].summary["sft_samples"] == 0
    for i, rows in enumerate(people):
        train_and_gate(job(rows, f"alone-{i}"), record_step=lambda metrics: None)
        alone = load_file(str(root / f"alone-{i}" / "adapter_model.safetensors"))
        stacked = load_file(str(root / f"together-{i}" / "adapter_model.safetensors"))
        assert alone.keys() == stacked.keys()
        for name, weights in alone.items():
            assert (weights - stacked[name]).abs().max() < 1e-5, name
