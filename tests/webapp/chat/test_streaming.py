"""Repainting a streaming answer: the first text at once, then throttled, and the rest at the end.

Pure: a fake clock for the throttle, a fake ``send`` for the painter (no socket, no database).
"""

from __future__ import annotations

import asyncio

import pytest

from webapp.chat.rendering import render_markdown
from webapp.frontdoor.streaming import RepaintThrottle, StreamPainter


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_repaint_is_due_at_once_and_the_next_after_the_interval() -> None:
    clock = FakeClock()
    throttle = RepaintThrottle(min_interval_s=0.06, render_share=0.1, clock=clock)
    assert throttle.wait_s() == 0
    started, clock.now = clock.now, clock.now + 0.002  # a 2 ms render
    throttle.painted(started=started)
    assert throttle.wait_s() == pytest.approx(0.058)
    clock.now += 0.03
    assert throttle.wait_s() == pytest.approx(0.028)
    clock.now += 0.05
    assert throttle.wait_s() == 0


def test_a_slow_render_spaces_the_repaints_out_to_its_share_of_the_time() -> None:
    clock = FakeClock()
    throttle = RepaintThrottle(min_interval_s=0.06, render_share=0.1, clock=clock)
    started, clock.now = clock.now, clock.now + 0.02  # a 20 ms render of a long answer
    throttle.painted(started=started)
    assert throttle.wait_s() == pytest.approx(0.18)  # one render in every 200 ms


class Page:
    def __init__(self) -> None:
        self.frames: list[str] = []

    async def send(self, html: str) -> None:
        self.frames.append(html)


def painter_for(page: Page, min_interval_s: float = 0.2) -> StreamPainter:
    return StreamPainter(
        render=lambda text: text.upper(),
        send=page.send,
        throttle=RepaintThrottle(min_interval_s=min_interval_s, render_share=0.5),
    )


async def test_the_first_text_is_drawn_at_once_and_later_text_together() -> None:
    page = Page()
    painter = painter_for(page)
    painter.add("Hel")
    await asyncio.sleep(0.01)
    assert page.frames == ["HEL"]
    painter.add("lo")
    painter.add(" there")
    await asyncio.sleep(0.02)
    assert page.frames == ["HEL"]  # within the interval: not yet
    for _ in range(100):
        if len(page.frames) == 2:
            break
        await asyncio.sleep(0.02)
    assert page.frames == ["HEL", "HELLO THERE"]  # drawn once the interval has passed
    await painter.close()
    assert page.frames == ["HEL", "HELLO THERE"]  # nothing new: no last repaint


async def test_close_draws_the_text_that_arrived_since_the_last_repaint() -> None:
    page = Page()
    painter = painter_for(page, min_interval_s=30)
    for piece in ("a", "b", "c"):
        painter.add(piece)
        await asyncio.sleep(0.01)
    await painter.close()
    assert page.frames == ["A", "ABC"]
    await painter_for(page).close()  # a painter never given any text draws nothing
    assert page.frames == ["A", "ABC"]


async def test_a_page_that_has_gone_does_not_stop_the_answer_being_stored() -> None:
    async def gone(html: str) -> None:
        raise ConnectionError("closed")

    painter = StreamPainter(render=str, send=gone, throttle=RepaintThrottle(min_interval_s=30))
    painter.add("a")
    await asyncio.sleep(0.01)
    painter.add("b")
    await painter.close()  # neither the failed repaint nor the last one raises


async def test_a_fast_long_answer_is_repainted_a_bounded_number_of_times() -> None:
    """About 1,000 tokens in 1 s: a few dozen repaints of the real renderer, the last complete."""
    page = Page()
    painter = StreamPainter(
        render=lambda text: str(render_markdown(text)),
        send=page.send,
        throttle=RepaintThrottle(min_interval_s=0.06),
    )
    pieces = ["Some **text** ", "and `code`\n\n", "```python\n", "x = 1\n"] * 250
    for piece in pieces:
        painter.add(piece)
        await asyncio.sleep(0.001)
    await painter.close()
    assert 2 <= len(page.frames) <= 40
    assert page.frames[-1] == render_markdown("".join(pieces))


async def test_close_ends_the_repaints_even_when_their_cancellation_is_lost() -> None:
    """On Python 3.11 ``asyncio.wait_for``, which redis-py sends each command to the channel
    layer through, returns the send's result when the cancellation lands as the send finishes:
    the repaints end all the same, and so does the answer."""
    sending = asyncio.Event()

    async def send_losing_cancellation(html: str) -> None:
        sending.set()
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass  # lost, as asyncio.wait_for loses it

    painter = StreamPainter(render=str, send=send_losing_cancellation)
    painter.add("a")
    await sending.wait()
    await asyncio.wait_for(painter.close(), timeout=2)
