"""Several people's adapters on one base: each row goes through its own person's adapter only,
a new adapter is the one ``load_policy`` makes, and a saved one is peft's format."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

import trainer.stacked_lora
from trainer.config import UpdateConfig
from trainer.policy import load_policy, trainable_parameters
from trainer.stacked_lora import StackedPolicy, new_person_lora


def _base(model_dir: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)


def _two_people(model_dir: Path) -> StackedPolicy:
    """Two people whose adapters differ from each other and from the base (B made non-zero)."""
    base = _base(model_dir)
    people = [new_person_lora(base, UpdateConfig(seed=seed)) for seed in (0, 1)]
    model = StackedPolicy(base, people)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for k in (0, 1):
            for param in model.person_parameters(k):
                param.add_(torch.randn(param.shape, generator=generator) * 0.1)
    return model.eval()


def _ids() -> torch.Tensor:
    return torch.randint(3, 250, (4, 12), generator=torch.Generator().manual_seed(1))


def test_doctests_hold() -> None:
    assert doctest.testmod(trainer.stacked_lora).failed == 0


def test_each_row_goes_through_its_own_persons_adapter(tiny_model_dir: Path) -> None:
    model, ids = _two_people(tiny_model_dir), _ids()
    persons = [1, 0, 0, 1]
    with torch.no_grad(), model.rows(persons):
        mixed = model(input_ids=ids).logits
    for row, person in enumerate(persons):
        with torch.no_grad(), model.person(person):
            alone = model(input_ids=ids[row : row + 1]).logits
        torch.testing.assert_close(mixed[row : row + 1], alone, atol=1e-5, rtol=0)
    with torch.no_grad(), model.person(0):
        assert not torch.allclose(model(input_ids=ids).logits, mixed, atol=1e-3)


def test_a_persons_gradient_comes_from_their_rows_only(tiny_model_dir: Path) -> None:
    model, ids = _two_people(tiny_model_dir), _ids()
    with model.rows([0, 1, 0, 1]):
        logits = model(input_ids=ids).logits
        logits[[0, 2]].sum().backward()  # the loss of person 0's rows only
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.person_parameters(0))
    assert all(p.grad is None or not p.grad.any() for p in model.person_parameters(1))


def test_people_of_different_ranks_share_a_pass(tiny_model_dir: Path) -> None:
    base = _base(tiny_model_dir)
    people = [new_person_lora(base, UpdateConfig(lora_rank=r, seed=r)) for r in (4, 8)]
    model = StackedPolicy(base, people).eval()
    with torch.no_grad():
        for k in (0, 1):
            for param in model.person_parameters(k):
                param.add_(0.1)
    ids = _ids()
    with torch.no_grad(), model.rows([0, 1, 1, 0]):
        mixed = model(input_ids=ids).logits
    for row, person in enumerate([0, 1, 1, 0]):
        with torch.no_grad(), model.person(person):
            alone = model(input_ids=ids[row : row + 1]).logits
        torch.testing.assert_close(mixed[row : row + 1], alone, atol=1e-5, rtol=0)


def test_disabled_is_the_base_and_unrouted_is_an_error(tiny_model_dir: Path) -> None:
    model, ids = _two_people(tiny_model_dir), _ids()
    with torch.no_grad(), model.disable_adapter():
        torch.testing.assert_close(
            model(input_ids=ids).logits, _base(tiny_model_dir)(input_ids=ids).logits
        )
    with pytest.raises(RuntimeError, match="no routing"):
        model(input_ids=ids)


def test_a_new_adapter_is_the_one_load_policy_makes(tiny_model_dir: Path) -> None:
    config = UpdateConfig(seed=3)
    model = StackedPolicy(_base(tiny_model_dir), [new_person_lora(_base(tiny_model_dir), config)])
    policy = load_policy(tiny_model_dir, config)
    expected = trainable_parameters(policy)
    got = model.person_parameters(0)
    assert [p.shape for p in got] == [p.shape for p in expected]  # so optimizer.pt carries over
    for mine, theirs in zip(got, expected, strict=True):
        assert torch.equal(mine, theirs)


def test_a_saved_adapter_loads_in_peft_and_scores_the_same(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    model, ids = _two_people(tiny_model_dir), _ids()
    model.save_person(1, tmp_path / "one")
    with torch.no_grad(), model.person(1):
        expected = model(input_ids=ids).logits
    peft_model = PeftModel.from_pretrained(_base(tiny_model_dir), str(tmp_path / "one"))
    with torch.no_grad():
        torch.testing.assert_close(peft_model(input_ids=ids).logits, expected)
