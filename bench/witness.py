"""A witness for the gate's perplexity: text neither the gate nor the language anchor sees.

The gate measures general language on one paragraph (``trainer.probes.PROBE_TEXT``), and the
language anchor (``trainer.anchor``) trains the model to keep the base's distribution on five
others. Both are plain narrative English, so an anchored model could in principle look good on
the probe while drifting on everything else. The replay therefore also measures perplexity on
these three texts, of other registers (a conversation, a news report, a technical note),
written for this benchmark and used nowhere in training or gating. Keep them fixed.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trainer.probing import text_nll

WITNESS_TEXTS: tuple[str, ...] = (
    '"Are you coming to the meeting tomorrow?" asked Tom. "I think so," said Priya, "but I '
    'have to drop my sister at the airport first, so I might be ten minutes late." "That\'s '
    'fine. Could you bring the printed agenda?" "Sure, I will print it tonight."',
    "The city council voted on Tuesday to extend the number 12 bus route to the new hospital. "
    "The change will take effect in March and is expected to cost about two million pounds a "
    "year. Residents of the eastern estates, who currently need two buses to reach the "
    "hospital, welcomed the decision.",
    "A hard drive stores data on spinning magnetic platters, while a solid state drive uses "
    "flash memory chips with no moving parts. Solid state drives read and write data much "
    "faster and use less power, but they cost more for the same amount of storage, so large "
    "archives are still often kept on hard drives.",
)


def witness_perplexity(model: Any, tokenizer: Any) -> float:
    """exp of the mean next-token loss over all the witness texts' tokens."""
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with torch.no_grad():
        for text in WITNESS_TEXTS:
            ids_1_T = torch.tensor(
                [tokenizer(text, add_special_tokens=False)["input_ids"]], device=device
            )
            nll, tokens = text_nll(model, ids_1_T)
            total, count = total + nll, count + tokens
    return math.exp(total / count)
