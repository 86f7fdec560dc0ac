"""The language anchor: keep the model's general English where the base model had it.

Preference learning moves the adapter on chat answers; a little of that move leaks into how
the model continues ordinary text, which the gate sees as probe perplexity creeping up version
after version (``python -m bench.replay --set anchor_coef=0`` shows the creep). The anchor is a
regulariser in the spirit of InstructGPT's pretraining mix: on a few paragraphs of
everyday English, the full-vocabulary KL(base ‖ policy) per token, added to every step's loss
with weight ``anchor_coef``. Its minimum is the base model's own distribution, so it cannot be
overfitted past the base the way a language-modelling loss on a small text could, and it says
nothing about chat answers, where the preference lives.

The paragraphs were written for this project and share no sentence or topic with the gate's
probe paragraph (``trainer.probes.PROBE_TEXT``), so the gate still measures held-out text.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from trainer.batch import collate

ANCHOR_TEXTS: tuple[str, ...] = (
    "When the rain stopped, the farmer walked out to the far field to see how much of the "
    "barley had been flattened. Most of it was still standing. He checked the ditch along the "
    "hedge, cleared a branch that had fallen across the gate, and went back to the house for "
    "breakfast, thinking about whether the ground would be dry enough to cut by Thursday.",
    "To repair a bicycle tyre, first take the wheel off the frame and let out any air that is "
    "left. Lever one side of the tyre over the rim, pull out the inner tube and pump a little "
    "air into it so you can hear or feel where it leaks. Rough up the rubber around the hole, "
    "spread a thin layer of glue, wait a minute and press the patch on firmly.",
    "Our train was forty minutes late, so we missed the connection and spent the afternoon in "
    "a town none of us had planned to see. It turned out to have a small museum about "
    "clockmaking, a bakery that sold warm apple cake, and a bridge over the river where we "
    "watched the swans until the next train came in just after five.",
    "Water boils at a lower temperature on a mountain than at the coast, because the air "
    "pressure is lower the higher you go. That is why pasta takes longer to cook at altitude "
    "and why climbers carry stoves that can run for a long time. A pressure cooker works the "
    "other way round: it raises the pressure, so the water gets hotter before it boils.",
    "Dear Maria, thank you for the lovely photographs from the wedding. Everyone looks so "
    "happy, and the garden was beautiful in the evening light. I am sorry again that I could "
    "not be there, but I hope to visit in the spring, when the new baby has arrived. Give my "
    "love to your parents and tell your brother I still owe him a game of chess.",
)


def anchor_token_ids(model_dir: str) -> tuple[tuple[int, ...], ...]:
    """The anchor paragraphs in the base model's tokens, one tuple per paragraph.

    Tokenized once per model folder and tokenizer file version: a folder whose tokenizer is
    replaced in place (a new base model under the same path) is tokenized again.
    """
    return _tokenized(str(Path(model_dir)), _tokenizer_stamp(Path(model_dir)))


def _tokenizer_stamp(model_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of the folder's tokenizer files: the cache key's version part."""
    files = sorted(model_dir.glob("tokenizer*")) + sorted(model_dir.glob("*.model"))
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())


@functools.lru_cache(maxsize=4)
def _tokenized(
    model_dir: str, stamp: tuple[tuple[str, int, int], ...]
) -> tuple[tuple[int, ...], ...]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return tuple(
        tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in ANCHOR_TEXTS
    )


def anchor_batch(token_ids: tuple[tuple[int, ...], ...], pad_id: int) -> tuple[Tensor, Tensor]:
    """(input ids, attention mask), right-padded: the paragraphs as one batch."""
    batch = collate([[] for _ in token_ids], [list(ids) for ids in token_ids], pad_id=pad_id)
    return batch.input_ids_B_T, batch.attention_mask_B_T


def next_token_logprobs(model: torch.nn.Module, input_ids_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """log-softmax over the vocabulary at every position that predicts a real next token: (N, V)."""
    logits_B_T_V = model(input_ids=input_ids_B_T, attention_mask=mask_B_T).logits
    predicts_B_T = mask_B_T.bool().clone()
    predicts_B_T[:, :-1] &= mask_B_T[:, 1:].bool()
    predicts_B_T[:, -1] = False
    return F.log_softmax(logits_B_T_V[predicts_B_T].float(), dim=-1)


def anchor_kl(base_logp_N_V: Tensor, policy_logp_N_V: Tensor) -> Tensor:
    """Mean over positions of the exact KL(base ‖ policy) over the vocabulary, in nats.

    >>> p = torch.log_softmax(torch.tensor([[1.0, 2.0, 3.0]]), -1)
    >>> float(anchor_kl(p, p))
    0.0
    """
    return (base_logp_N_V.exp() * (base_logp_N_V - policy_logp_N_V)).sum(-1).mean()
