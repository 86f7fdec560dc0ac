"""Markdown for the transcript: rendered with markdown-it-py, then sanitised with nh3.

Raw HTML is switched off in the parser, so ``<script>`` typed by a user or produced by the
model comes out as text; nh3 then strips anything a future parser option might let through
(event handlers, ``javascript:`` links), so the page never trusts what a message contains.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = set(
    "p br hr em strong del code pre blockquote ul ol li h1 h2 h3 h4 h5 h6 a "
    "table thead tbody tr th td".split()
)
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
}


def render_markdown(text: str) -> SafeString:
    """Safe HTML for a message's text (code blocks keep their ``language-x`` class)."""
    html = _markdown.render(text)
    return mark_safe(  # nh3 has just sanitised it
        nh3.clean(
            html,
            tags=ALLOWED_TAGS,
            attributes=ALLOWED_ATTRIBUTES,
            url_schemes={"http", "https", "mailto"},
            link_rel="noopener noreferrer nofollow",
            filter_style_properties={"text-align"},
        )
    )
