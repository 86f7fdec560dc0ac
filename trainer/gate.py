"""The probe gate's decision: is a candidate adapter broken, or worse than the live version?

It refuses what is broken or worse, never what is merely different: there is no cap on the
total distance from the base, so a model may become as personal as its users make it. Pure
Python over the figures ``trainer.probing.probe_model`` measures, so the criteria can change
without touching the measurement:

- step size: KL(candidate ‖ live) per answer token on the probe prompts;
- general quality against the base: perplexity on ordinary text, and no more degenerate
  answers (``trainer.degenerate``: empty, repeating, cut off, mixing scripts) on the probe
  prompts than the base gives;
- the user's own feedback: on the newest judged samples, which the update held back and no
  version has trained on (``fresh``), the candidate must not score worse than the live version
  (``fresh_feedback_delta``). Other recent samples outside the update (``holdout``: mostly
  trained into earlier versions) are scored too (``feedback_delta``) but held to that only
  when there are no fresh ones: the user's newest word outranks their older one, so a change
  of mind is learnt, and a candidate that merely forgets old wording while it learns what the
  user asks now is kept. Its greedy answers to all those samples' prompts must not loop or come
  out empty more often than both the live version's and the base's (plus the allowance): the
  probe prompts are five fixed questions, and a preference can break the model on the user's
  own kind of prompt first.

``GateThresholds`` holds the defaults the webapp's ``PARLEY_GATE_*`` settings and the offline
replay both start from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer.degenerate import DEGENERATE_KINDS

HELD_BACK_KINDS = ("empty", "repeating")
"""What the gate counts in the answers to the held-back prompts. Not "cut_off": a user's own
prompts often ask for more than the answer length the gate affords, and the base is cut off
there too; not "language_switch": a user may ask for another language."""


@dataclass(frozen=True)
class GateThresholds:
    """What a candidate may not exceed (the webapp's ``PARLEY_GATE_*`` defaults)."""

    max_kl: float = 0.5
    """KL(candidate ‖ live) per probe answer token: the largest step one update may take."""

    max_ppl_ratio: float = 1.15
    """Probe perplexity at most this many times the base's."""

    max_feedback_drop: float = 0.05
    """How much worse (nats per token) the candidate may score on the user's held-back
    feedback than the live version."""

    max_degenerate_extra: int = 1
    """Degenerate probe answers allowed beyond the base's, per kind."""

    max_repeating_extra: int | None = None
    """For looping answers instead of ``max_degenerate_extra``, when set."""

    def decide(
        self, metrics: dict[str, float], base_metrics: dict[str, float]
    ) -> tuple[bool, list[str]]:
        """``gate_decision`` with these thresholds."""
        return gate_decision(
            metrics,
            base_metrics,
            self.max_kl,
            self.max_ppl_ratio,
            max_feedback_drop=self.max_feedback_drop,
            max_degenerate_extra=self.max_degenerate_extra,
            max_repeating_extra=self.max_repeating_extra,
        )


def gate_decision(
    metrics: dict[str, float],
    base_metrics: dict[str, float],
    max_kl: float,
    max_ppl_ratio: float,
    *,
    max_feedback_drop: float = 0.0,
    max_degenerate_extra: int = 0,
    max_repeating_extra: int | None = None,
) -> tuple[bool, list[str]]:
    """Pass unless the candidate is broken or worse; the reasons name each failure.

    - ``probe_kl`` (KL to the live version: this update's step) ≤ max_kl;
    - ``probe_ppl`` ≤ max_ppl_ratio · the base's;
    - for each degenerate kind, at most ``max_degenerate_extra`` more degenerate probe answers
      than the base gives (``max_repeating_extra``, when given, for looping answers instead:
      a loop is rarely the noise of a style change a cut-off answer can be);
    - with fresh feedback (the newest, trained into no version), ``fresh_feedback_delta`` ≥
      −max_feedback_drop (nats per token): what the user says now outranks what they said
      before, so ``feedback_delta`` (on feedback earlier versions trained on, reported) is held
      to the same bound only when there is no fresh feedback (a batch under four);
    - for each ``HELD_BACK_KINDS`` kind no more answers to the held-back prompts of that kind
      than the live version gives, or than the base gives plus the same allowance as on the
      probes, whichever is more: a loop already served may be trained away, never grow.
    Missing degenerate or feedback figures (an older record) are not failures.

    >>> gate_decision({"probe_kl": 0.01, "probe_ppl": 11.0}, {"probe_ppl": 10.0}, 0.1, 1.2)
    (True, [])
    """
    reasons = []
    kl, ppl, base_ppl = metrics["probe_kl"], metrics["probe_ppl"], base_metrics["probe_ppl"]
    if not math.isfinite(kl) or kl > max_kl:
        reasons.append(f"probe KL to the live version {kl:.4g} exceeds {max_kl:.4g}")
    if not math.isfinite(ppl) or ppl > max_ppl_ratio * base_ppl:
        reasons.append(
            f"probe perplexity {ppl:.4g} exceeds {max_ppl_ratio:.3g} × base {base_ppl:.4g}"
        )
    for kind in DEGENERATE_KINDS:
        key = f"degenerate_{kind}"
        count, base_count = metrics.get(key, 0.0), base_metrics.get(key, 0.0)
        extra = max_degenerate_extra
        if kind == "repeating" and max_repeating_extra is not None:
            extra = max_repeating_extra
        if count > base_count + extra:
            reasons.append(
                f"{count:.0f} {kind.replace('_', ' ')} probe answers (base: {base_count:.0f})"
            )
    fresh_samples = metrics.get("fresh_feedback_samples", 0.0)
    if fresh_samples > 0:
        fresh = metrics.get("fresh_feedback_delta", math.nan)
        if not (math.isfinite(fresh) and fresh >= -max_feedback_drop):
            reasons.append(
                f"the newest feedback ({fresh_samples:.0f} samples no version trained on) scores "
                f"{fresh:.4g} nats/token worse than the live version "
                f"(allowed: {max_feedback_drop:.3g})"
            )
    elif metrics.get("feedback_samples", 0.0) > 0:
        delta = metrics.get("feedback_delta", math.nan)
        if not (math.isfinite(delta) and delta >= -max_feedback_drop):
            reasons.append(
                f"held-back feedback scores {delta:.4g} nats/token worse than the live version "
                f"(allowed: {max_feedback_drop:.3g})"
            )
    prompts = metrics.get("held_back_prompts", 0.0)
    for kind in HELD_BACK_KINDS if prompts > 0 else ():
        count = metrics.get(f"held_back_{kind}", 0.0)
        live = metrics.get(f"held_back_live_{kind}", 0.0)
        base = base_metrics.get(f"held_back_{kind}", 0.0)
        extra = max_degenerate_extra
        if kind == "repeating" and max_repeating_extra is not None:
            extra = max_repeating_extra
        if count > max(live, base + extra):
            reasons.append(
                f"{count:.0f} {kind} answers to {prompts:.0f} held-back prompts "
                f"(live: {live:.0f}, base: {base:.0f})"
            )
    return not reasons, reasons
