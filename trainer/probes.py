"""The default probe set the gate checks every candidate adapter on.

Five everyday requests (the kind of turn Parley is trained on) and one paragraph of plain
English written for this project. A candidate is compared with the base model on them: the
mean KL(candidate ‖ base) per token over the candidate's greedy answers to the prompts says how
far its behaviour drifted, and its perplexity on the paragraph says whether it still models
ordinary language. Neither is a quality score; both catch an update that broke the model.
Keep the set fixed: a changed probe set makes old and new gate figures incomparable.
"""

from __future__ import annotations

PROBE_PROMPTS: tuple[str, ...] = (
    "What is the capital of France?",
    "Give me three tips for sleeping better.",
    "Write one sentence about the sea.",
    "How do I boil an egg?",
    "Explain what a noun is to a child.",
)

PROBE_TEXT = (
    "The library opens at nine in the morning and closes at six in the evening. On weekdays "
    "it is quiet, and most of the people who come in are students reading at the long tables "
    "by the windows. On Saturdays families arrive with small children, who sit on the carpet "
    "in the corner while someone reads them a story. The staff know many of the regular "
    "visitors by name, and they are always happy to help anyone find a book, print a page or "
    "sign up for a card."
)
