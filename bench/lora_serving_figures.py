"""bench.lora_serving's figures (pure): each configuration's rounds of concurrent streams,
the ratios against everyone on one adapter, paired round by round, and the side-by-side table."""

from __future__ import annotations

from dataclasses import dataclass

from bench.common import median, percentile

BASE = "base"
REFERENCE = "1"  # the configuration every ratio is taken against: everyone on one adapter


def adapter_name(index: int) -> str:
    return f"user-{index:02d}"


@dataclass
class Round:
    """One configuration's batch of concurrent streams in one round."""

    ttfts_ms: list[float]
    tokens: int
    wall_s: float
    rss_mb: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else float("nan")


@dataclass
class ColdLoad:
    """An adapter never loaded before: the load call, then two requests on it one after another."""

    load_ms: float
    cold_ttft_ms: float
    warm_ttft_ms: float
    rss_added_mb: float


def config_figures(rounds: list[Round]) -> dict[str, float]:
    """TTFT percentiles over every stream of every round; tokens/s the median over rounds."""
    ttfts = [t for r in rounds for t in r.ttfts_ms]
    return {
        "ttft_p50_ms": median(ttfts),
        "ttft_p99_ms": percentile(ttfts, 0.99),
        "tokens_per_s": median([r.tokens_per_s for r in rounds]),
        "rss_mb": max((r.rss_mb for r in rounds), default=float("nan")),
    }


def ratios(rounds: list[Round], reference: list[Round]) -> dict[str, float]:
    """Against the reference configuration, paired round by round (drift cancels out): the
    median over rounds of this round's figure / the reference's figure in the same round."""

    def paired(value) -> float:  # noqa: ANN001
        pairs = zip(rounds, reference, strict=True)
        return median([value(a) / value(b) for a, b in pairs])

    return {
        "ttft_p50": paired(lambda r: median(r.ttfts_ms)),
        "ttft_p99": paired(lambda r: percentile(r.ttfts_ms, 0.99)),
        "tokens_per_s": paired(lambda r: r.tokens_per_s),
        "rss": paired(lambda r: r.rss_mb),
    }


def cold_load_figures(loads: list[ColdLoad]) -> dict[str, float]:
    return {
        "count": len(loads),
        "load_ms_median": median([c.load_ms for c in loads]),
        "load_ms_max": max((c.load_ms for c in loads), default=float("nan")),
        "cold_ttft_ms_median": median([c.cold_ttft_ms for c in loads]),
        "warm_ttft_ms_median": median([c.warm_ttft_ms for c in loads]),
        "cold_over_warm_ttft": median([c.cold_ttft_ms / c.warm_ttft_ms for c in loads]),
        "rss_added_mb_median": median([c.rss_added_mb for c in loads]),
    }


def table(results: dict[str, list[Round]], streams: int) -> str:
    """The side-by-side table, every configuration against the one-adapter case."""
    lines = [
        f"{'adapters':<10}{'streams':>8}{'TTFT p50 ms':>13}{'TTFT p99 ms':>13}{'tok/s':>8}"
        f"{'RSS MB':>9}{'p50 ×':>8}{'p99 ×':>8}{'tok/s ×':>9}{'RSS ×':>8}"
    ]
    for name, rounds in results.items():
        f, r = config_figures(rounds), ratios(rounds, results[REFERENCE])
        lines.append(
            f"{name:<10}{streams:>8}{f['ttft_p50_ms']:>13.1f}{f['ttft_p99_ms']:>13.1f}"
            f"{f['tokens_per_s']:>8.1f}{f['rss_mb']:>9.0f}{r['ttft_p50']:>8.3f}"
            f"{r['ttft_p99']:>8.3f}{r['tokens_per_s']:>9.3f}{r['rss']:>8.3f}"
        )
    return "\n".join(lines)


def stream_models(config: str, streams: int) -> list[str]:
    """The model each of the round's streams asks for: the base, or adapters spread evenly.

    >>> stream_models("2", 4), stream_models(BASE, 2)
    (['user-00', 'user-01', 'user-00', 'user-01'], ['base', 'base'])
    """
    if config == BASE:
        return [BASE] * streams
    return [adapter_name(i % int(config)) for i in range(streams)]
