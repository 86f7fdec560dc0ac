"""The language anchor: exact KL(base ‖ policy) on everyday English, and its effect on an update."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from trainer.anchor import (
    ANCHOR_TEXTS,
    anchor_batch,
    anchor_kl,
    anchor_token_ids,
    next_token_logprobs,
)
from trainer.config import UpdateConfig
from trainer.policy import adapter_disabled, load_policy
from trainer.probes import PROBE_TEXT
from trainer.update import run_update

from .test_update_smoke import _samples


def test_anchor_kl_is_zero_at_the_base_and_matches_the_definition() -> None:
    base = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]]), -1)
    policy = torch.log_softmax(torch.tensor([[0.0, 1.0, -3.0], [0.5, 0.5, 0.0]]), -1)
    assert float(anchor_kl(base, base)) == 0.0
    # torch's own KL(target ‖ input), averaged over the rows: an independent formula
    by_torch = float(F.kl_div(policy, base, log_target=True, reduction="batchmean"))
    assert float(anchor_kl(base, policy)) == pytest.approx(by_torch)
    # and from the probabilities themselves: sum p log(p / q)
    p, q = base.exp(), policy.exp()
    by_hand = (
        sum(sum(p[i, v] * math.log(p[i, v] / q[i, v]) for v in range(3)) for i in range(2)) / 2
    )
    assert float(anchor_kl(base, policy)) == pytest.approx(float(by_hand))
    assert float(anchor_kl(base, policy)) > 0.0
    assert float(anchor_kl(policy, base)) != pytest.approx(by_hand)  # direction matters


def test_anchor_batch_pads_right_and_masks_the_padding() -> None:
    ids, mask = anchor_batch(((5, 6, 7), (8,)), pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_the_anchor_never_quotes_the_probe_paragraph() -> None:
    probe_sentences = {s.strip() for s in PROBE_TEXT.split(".") if s.strip()}
    for text in ANCHOR_TEXTS:
        for sentence in probe_sentences:
            assert sentence not in text
    assert "library" not in " ".join(ANCHOR_TEXTS).lower()


def test_every_real_next_token_is_scored_once(tiny_model_dir: Path) -> None:
    token_ids = anchor_token_ids(str(tiny_model_dir))
    assert len(token_ids) == len(ANCHOR_TEXTS) and all(len(ids) > 20 for ids in token_ids)
    ids, mask = anchor_batch(token_ids, pad_id=0)
    model = load_policy(tiny_model_dir, UpdateConfig())
    with torch.no_grad():
        logp = next_token_logprobs(model, ids, mask)
    assert logp.shape[0] == sum(len(t) - 1 for t in token_ids)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(logp.shape[0]), atol=1e-4)
    # Row by row, in order: each paragraph alone, unpadded, gives the same distributions at
    # the same positions, so no padded position is scored and no real one is shifted.
    alone = []
    with torch.no_grad():
        for paragraph in token_ids:
            one, one_mask = anchor_batch((paragraph,), pad_id=0)
            alone.append(next_token_logprobs(model, one, one_mask))
    assert torch.allclose(logp, torch.cat(alone), atol=1e-4)


def test_the_anchor_tokens_follow_a_tokenizer_replaced_in_place(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    before = anchor_token_ids(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.add_tokens(["barley"])  # a word of the first paragraph becomes one new token
    tokenizer.save_pretrained(str(folder))
    after = anchor_token_ids(str(folder))
    assert after != before
    assert len(tokenizer) - 1 in after[0]


def _anchor_drift(model_dir: Path, adapter_dir: Path) -> float:
    """KL(base ‖ adapter) on the anchor paragraphs, measured afresh from the saved adapter."""
    model = load_policy(model_dir, UpdateConfig(), init_adapter_dir=adapter_dir)
    ids, mask = anchor_batch(anchor_token_ids(str(model_dir)), pad_id=0)
    with torch.no_grad():
        policy = next_token_logprobs(model, ids, mask)
        with adapter_disabled(model):
            base = next_token_logprobs(model, ids, mask)
    return float(anchor_kl(base, policy))


def test_the_anchor_keeps_an_update_closer_to_the_base_on_everyday_text(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    samples = _samples(tiny_model_dir)
    drift = {}
    for coef in (0.0, 20.0):
        config = UpdateConfig(lr=3e-2, steps_per_batch=3, anchor_coef=coef)
        results = list(
            run_update(
                config,
                samples,
                base_model_dir=tiny_model_dir,
                init_adapter_dir=None,
                out_adapter_dir=tmp_path / f"a{coef}",
            )
        )
        steps = results[:-1]
        if coef == 0.0:
            assert all(step["anchor_kl"] is None for step in steps)
        else:
            assert steps[0]["anchor_kl"] == pytest.approx(0.0, abs=1e-6)  # starts at the base
            assert steps[-1]["anchor_kl"] > 0.0
            assert all(math.isfinite(step["loss"]) for step in steps)
        drift[coef] = _anchor_drift(tiny_model_dir, tmp_path / f"a{coef}")
    assert drift[0.0] > 0.0
    assert drift[20.0] < drift[0.0]


def test_the_anchor_measures_drift_from_the_base_not_from_the_starting_adapter(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """An update that starts from a trained adapter compares it with the base (adapter off):
    its first step's anchor KL is the adapter's own drift, measured afresh, not 0."""
    samples = _samples(tiny_model_dir)
    start = tmp_path / "start"
    for _ in run_update(
        UpdateConfig(lr=3e-2, steps_per_batch=3, anchor_coef=0.0),
        samples,
        base_model_dir=tiny_model_dir,
        init_adapter_dir=None,
        out_adapter_dir=start,
    ):
        pass
    drift = _anchor_drift(tiny_model_dir, start)
    assert drift > 1e-4
    steps = list(
        run_update(
            UpdateConfig(steps_per_batch=1, anchor_coef=1.0),
            samples,
            base_model_dir=tiny_model_dir,
            init_adapter_dir=start,
            out_adapter_dir=tmp_path / "next",
        )
    )[:-1]
    assert steps[0]["anchor_kl"] == pytest.approx(drift, rel=1e-3)


def test_a_negative_anchor_weight_is_refused() -> None:
    with pytest.raises(ValueError, match="anchor_coef"):
        UpdateConfig(anchor_coef=-1.0)
