"""Server-side SVG charts: a line chart and a grouped bar chart, small enough to re-render on
every poll, with no JavaScript and nothing fetched from a CDN.

Simplified on purpose: categorical x axis (one slot per point or day), a linear y axis labelled
at its minimum, maximum and zero, a legend, and a ``<title>`` tooltip per point or bar. Every
piece of text is escaped; the result is marked safe for templates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 520, 220
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 28, 34
POINT_TOOLTIPS_MAX = 120


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]
    color: str


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _y_range(values: list[float], *, include_zero: bool) -> tuple[float, float]:
    low, high = min(values), max(values)
    if include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high == low:
        pad = abs(high) * 0.5 or 1.0
        low, high = low - pad, high + pad
    return low, high


def _frame(
    title: str,
    body: list[str],
    low: float,
    high: float,
    x_labels: Sequence[str],
    series: Sequence[Series],
) -> SafeString:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def y(value: float) -> float:
        return TOP + plot_h * (high - value) / (high - low)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{LEFT}" y="16" class="chart-title">{escape(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" class="axis"/>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" '
        'class="axis"/>',
        f'<text x="{LEFT - 4}" y="{y(high) + 4:.1f}" class="tick" text-anchor="end">'
        f"{_fmt(high)}</text>",
        f'<text x="{LEFT - 4}" y="{y(low) + 4:.1f}" class="tick" text-anchor="end">'
        f"{_fmt(low)}</text>",
    ]
    if low < 0 < high:
        parts.append(
            f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{LEFT + plot_w}" y2="{y(0):.1f}" class="zero"/>'
            f'<text x="{LEFT - 4}" y="{y(0) + 4:.1f}" class="tick" text-anchor="end">0</text>'
        )
    if x_labels:
        parts.append(
            f'<text x="{LEFT}" y="{HEIGHT - 18}" class="tick">{escape(x_labels[0])}</text>'
        )
        if len(x_labels) > 1:
            parts.append(
                f'<text x="{LEFT + plot_w}" y="{HEIGHT - 18}" class="tick" text-anchor="end">'
                f"{escape(x_labels[-1])}</text>"
            )
    x = LEFT
    for s in series:
        parts.append(
            f'<rect x="{x}" y="{HEIGHT - 11}" width="9" height="9" fill="{escape(s.color)}"/>'
            f'<text x="{x + 13}" y="{HEIGHT - 3}" class="tick">{escape(s.name)}</text>'
        )
        x += 20 + 7 * len(s.name)
    parts.extend(body)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # every text above is escaped


def _empty(title: str) -> SafeString:
    return mark_safe(  # the title is escaped
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(title)}: no data yet" xmlns="http://www.w3.org/2000/svg">'
        f'<text x="{LEFT}" y="16" class="chart-title">{escape(title)}</text>'
        f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="tick" text-anchor="middle">'
        "no data yet</text></svg>"
    )


def line_chart(title: str, series: Sequence[Series], x_labels: Sequence[str]) -> SafeString:
    """One polyline per series over the shared x slots; ``None`` values leave a gap."""
    values = [v for s in series for v in s.values if v is not None]
    if not values:
        return _empty(title)
    low, high = _y_range(values, include_zero=False)
    count = max(len(s.values) for s in series)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (plot_w / 2 if count == 1 else plot_w * i / (count - 1))

    def y(value: float) -> float:
        return TOP + plot_h * (high - value) / (high - low)

    body: list[str] = []
    for s in series:
        path, pen_down = [], False
        for i, value in enumerate(s.values):
            if value is None:
                pen_down = False
                continue
            path.append(f"{'L' if pen_down else 'M'}{x(i):.1f} {y(value):.1f}")
            pen_down = True
        body.append(
            f'<path d="{" ".join(path)}" fill="none" stroke="{escape(s.color)}" stroke-width="2"/>'
        )
        if count <= POINT_TOOLTIPS_MAX:
            for i, value in enumerate(s.values):
                if value is None:
                    continue
                label = escape(f"{s.name} {x_labels[i] if i < len(x_labels) else i}: {value:.4g}")
                body.append(
                    f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="2.5" '
                    f'fill="{escape(s.color)}"><title>{label}</title></circle>'
                )
    return _frame(title, body, low, high, x_labels, series)


def bar_chart(title: str, series: Sequence[Series], x_labels: Sequence[str]) -> SafeString:
    """Grouped bars: one group per x slot, one bar per series within it."""
    values = [v for s in series for v in s.values if v is not None]
    if not values or not x_labels:
        return _empty(title)
    low, high = _y_range(values, include_zero=True)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(x_labels)
    bar = max(slot * 0.8 / len(series), 1.0)

    def y(value: float) -> float:
        return TOP + plot_h * (high - value) / (high - low)

    body: list[str] = []
    for i, label in enumerate(x_labels):
        for j, s in enumerate(series):
            value = s.values[i] if i < len(s.values) else None
            if value is None:
                continue
            top, bottom = sorted((y(value), y(0)))
            body.append(
                f'<rect x="{LEFT + slot * i + slot * 0.1 + bar * j:.1f}" y="{top:.1f}" '
                f'width="{bar:.1f}" height="{max(bottom - top, 0.5):.1f}" '
                f'fill="{escape(s.color)}"><title>{escape(f"{label} {s.name}: {value:g}")}'
                "</title></rect>"
            )
    return _frame(title, body, low, high, x_labels, series)
