"""Rendering a streamed answer as markdown: what one render costs, and what a whole stream costs.

The chat repaints the answer written so far with the markdown renderer (markdown-it, Pygments,
nh3), so each repaint costs time linear in the answer's length and runs on the web server's
event loop. For a ~4,000-token answer (prose, lists, a table, Python and JavaScript blocks):
the time of one render of the whole text, then the answer replayed through ``StreamPainter``
at ``--tokens-per-s`` in 4-character deltas, with a ticker that measures how late the event
loop runs (what every other stream on the server would wait). No model, no database.

    python -m bench.stream_render [--tokens 4000] [--tokens-per-s 250]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.common import record
from webapp.chat import rendering
from webapp.chat.rendering import render_markdown
from webapp.frontdoor.streaming import RepaintThrottle, StreamPainter

CHARS_PER_TOKEN = 4


def long_answer(chars: int) -> str:
    prose = (
        "Here is **some** text with `inline code` and a [link](https://example.org). It explains "
        "the idea in a few words, then moves on to the next point.\n\n"
    )
    bullets = "- first item with *emphasis*\n- second item\n- a third, a little longer\n\n"
    python = "```python\n" + "".join(
        f'def f{i}(x: int) -> int:\n    """Step {i}."""\n    return x * {i} + len("<b>")  # why\n\n'
        for i in range(12)
    )
    javascript = "```javascript\n" + "".join(
        f"function g{i}(a) {{ const b = a + {i}; return `${{b}}`; }}\n" for i in range(15)
    )
    table = "| n | n² |\n|---|--:|\n" + "".join(f"| {i} | {i * i} |\n" for i in range(10))
    unit = "".join(
        [prose, bullets, python, "```\n\n", prose, javascript, "```\n\n", table, "\n", prose]
    )
    return (unit * (chars // len(unit) + 1))[:chars]


def time_one_render(text: str, repeats: int = 20) -> tuple[float, float]:
    """Median ms of a render of ``text``: with no code block highlighted yet, and with all."""
    cold, warm = [], []
    for _ in range(repeats):
        rendering._highlight.cache_clear()
        started = time.perf_counter()
        render_markdown(text)
        cold.append(time.perf_counter() - started)
        started = time.perf_counter()
        render_markdown(text)
        warm.append(time.perf_counter() - started)
    return statistics.median(cold) * 1000, statistics.median(warm) * 1000


async def replay(text: str, tokens_per_s: float) -> dict[str, float]:
    renders: list[float] = []
    sent: list[float] = []

    def render(so_far: str) -> str:
        started = time.perf_counter()
        html = str(render_markdown(so_far))
        renders.append(time.perf_counter() - started)
        return html

    async def send(html: str) -> None:
        sent.append(time.perf_counter())

    lags: list[float] = []

    async def ticker() -> None:  # how late a 5 ms sleep wakes: the loop's lag
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - started - 0.005)

    rendering._highlight.cache_clear()
    painter = StreamPainter(render=render, send=send, throttle=RepaintThrottle())
    ticking = asyncio.create_task(ticker())
    pieces = [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]
    started = time.perf_counter()
    for i, piece in enumerate(pieces):
        painter.add(piece)
        # Deltas on the model's schedule, however late the loop lets this run.
        await asyncio.sleep(max(0.0, started + (i + 1) / tokens_per_s - time.perf_counter()))
    streamed = time.perf_counter()
    await painter.close()
    ticking.cancel()
    return {
        "stream_s": round(streamed - started, 2),
        "repaints": len(renders),
        "render_ms_median": round(statistics.median(renders) * 1000, 2),
        "render_ms_max": round(max(renders) * 1000, 2),
        "render_share": round(sum(renders) / (streamed - started), 3),
        "loop_lag_ms_p99": round(sorted(lags)[int(0.99 * (len(lags) - 1))] * 1000, 2),
        "loop_lag_ms_max": round(max(lags) * 1000, 2),
        "last_delta_to_last_repaint_ms": round((sent[-1] - streamed) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--tokens-per-s", type=float, default=250.0)
    args = parser.parse_args()
    text = long_answer(args.tokens * CHARS_PER_TOKEN)
    cold_ms, warm_ms = time_one_render(text)
    print(f"one render of {len(text)} chars: {cold_ms:.1f} ms ({warm_ms:.1f} ms, blocks cached)")
    figures = asyncio.run(replay(text, args.tokens_per_s))
    for name, value in figures.items():
        print(f"{name:>30}: {value}")
    record(
        "stream_render",
        {
            "tokens": args.tokens,
            "tokens_per_s": args.tokens_per_s,
            "render_ms_whole": round(cold_ms, 2),
            "render_ms_whole_cached": round(warm_ms, 2),
            **figures,
        },
    )


if __name__ == "__main__":
    main()
