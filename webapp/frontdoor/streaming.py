"""The answer as it is written: its markdown drawn again as the tokens arrive, at a bounded rate.

Each repaint renders the whole text so far with the renderer of the stored message, so the
finished message replaces the last repaint without a jump. A render costs time linear in the
text's length, so repaints are throttled: the first text is drawn at once (the time to the
first token stays the model's), later text at most once every ``min_interval_s``, and a long
answer, whose render takes longer, less often still, so that rendering one answer takes at most
``render_share`` of the time. Text that arrives meanwhile is drawn together at the next repaint,
so a fast model never builds up a backlog of repaints.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)

# Up to this many characters a render takes about half a millisecond: cheaper than a thread, and
# the first text (time to first token) never waits for a free worker thread.
INLINE_RENDER_CHARS = 1000


class RepaintThrottle:
    """Says how long to wait before the next repaint, given when and how long the last one took."""

    def __init__(
        self,
        *,
        min_interval_s: float = 0.06,
        render_share: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval_s, self.render_share, self.clock = min_interval_s, render_share, clock
        self._next_at = -math.inf  # nothing drawn yet: the first repaint is due at once

    def wait_s(self) -> float:
        return max(0.0, self._next_at - self.clock())

    def painted(self, *, started: float) -> None:
        """Record a repaint that began at ``started`` (on ``clock``) and has just ended."""
        cost = self.clock() - started
        self._next_at = started + max(self.min_interval_s, cost / self.render_share)


class StreamPainter:
    """Draws a streaming answer: ``add`` each piece of text, ``close`` once it has ended.

    ``render`` turns the text so far into the fragment that replaces what the page shows (it
    must be safe to call from a worker thread), and ``send`` sends it. Repaints run in a task of
    their own, so the stream is read on while one is rendered and sent.
    """

    def __init__(
        self,
        *,
        render: Callable[[str], str],
        send: Callable[[str], Awaitable[None]],
        throttle: RepaintThrottle | None = None,
    ) -> None:
        self.render, self.send = render, send
        self.throttle = throttle or RepaintThrottle()
        self._parts: list[str] = []
        self._drawn = 0  # how many of the parts the page shows
        self._arrived = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    @property
    def text(self) -> str:
        """The whole text so far (a page that comes to the answer late is drawn from it)."""
        return "".join(self._parts)

    def add(self, text: str) -> None:
        self._parts.append(text)
        self._arrived.set()
        if self._task is None:
            self._task = asyncio.create_task(self._repaint_while_streaming())

    async def _repaint_while_streaming(self) -> None:
        while True:
            await self._arrived.wait()
            if self._closing:
                return
            delay = self.throttle.wait_s()
            if delay > 0:
                await asyncio.sleep(delay)
            self._arrived.clear()
            await self._repaint()

    async def _repaint(self) -> None:
        started = self.throttle.clock()
        count = len(self._parts)
        text = "".join(self._parts)
        if len(text) <= INLINE_RENDER_CHARS:
            html = self.render(text)
        else:  # a long render in a thread, not on the event loop every other stream waits for
            html = await asyncio.to_thread(self.render, text)
        self._drawn = count
        self.throttle.painted(started=started)
        await self.send(html)

    async def close(self) -> None:
        """Stop repainting, then draw the text that came after the last repaint, if any.

        A failed send (the page has gone) is logged, not raised: the caller still has an
        answer to store.

        The repaints are told to stop as well as cancelled: on Python 3.11 a cancellation that
        lands just as a send finishes is lost (``asyncio.wait_for`` returns the send's result
        instead, and redis-py sends every command to the channel layer through it), and the
        repaints would then wait for text that never comes, and this close with them.
        """
        task, self._task = self._task, None
        if task is not None:
            self._closing = True
            self._arrived.set()
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the caller itself is being cancelled, not only the repaints
            except Exception:
                logger.debug("a repaint of a streaming answer failed", exc_info=True)
        if self._drawn < len(self._parts):
            try:
                await self._repaint()
            except Exception:
                logger.debug("the last repaint of a streaming answer failed", exc_info=True)
