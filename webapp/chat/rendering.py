"""Markdown for the transcript: rendered with markdown-it-py, then sanitised with nh3.

Raw HTML is switched off in the parser, so ``<script>`` typed by a user or produced by the
model comes out as text; nh3 then strips anything a future parser option might let through
(event handlers, ``javascript:`` links), so the page never trusts what a message contains.

Code blocks are highlighted by Pygments as ``<span class="k">`` tokens (classes only: the
Content-Security-Policy allows no inline style) and styled by ``static/pygments.css``, which is
``code_stylesheet()`` written out. Once sanitised, each block is wrapped with a head that names
its language and holds a Copy button (chat.js copies the block's text).
"""

from __future__ import annotations

import functools
import re

import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

CODE_STYLE = "default"  # Pygments' light style: every token colour 4.5:1 or more on #f8f8f8
CODE_SCOPE = ".code-block pre"
# A language name as it may appear in the label: anything else is shown as "text".
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_formatter = HtmlFormatter(nowrap=True)  # spans with classes, no <pre>, never style=""


@functools.lru_cache(maxsize=256)
def _lexer(language: str) -> Lexer | None:
    if not _LANGUAGE.fullmatch(language):
        return None
    try:
        return get_lexer_by_name(language)
    except ClassNotFound:
        return None


# A streaming answer is rendered again every few tokens: its finished code blocks, unchanged
# from one render to the next, are highlighted once.
@functools.lru_cache(maxsize=128)
def _highlight(code: str, language: str, _attrs: str = "") -> str:
    """Highlighted, escaped HTML of a fenced block; "" lets markdown-it escape it plain."""
    lexer = _lexer(language) if language else None
    return highlight(code, lexer, _formatter) if lexer is not None else ""


_markdown = MarkdownIt(
    "commonmark", {"html": False, "linkify": False, "breaks": True, "highlight": _highlight}
).enable(["table", "strikethrough"])

_cleaner = nh3.Cleaner(
    tags=set(
        "p br hr em strong del code pre span blockquote ul ol li h1 h2 h3 h4 h5 h6 a "
        "table thead tbody tr th td".split()
    ),
    attributes={
        "a": {"href", "title"},
        "code": {"class"},
        "ol": {"start"},
        "th": {"style"},
        "td": {"style"},
    },
    # Pygments' own short token classes, and nothing else, on a span.
    allowed_classes={"span": {name for name in STANDARD_TYPES.values() if name}},
    url_schemes={"http", "https", "mailto"},
    link_rel="noopener noreferrer nofollow",
    filter_style_properties={"text-align"},
)

# A code block as the sanitiser writes it: code text is escaped, so the first "</code></pre>"
# closes the block.
_CODE_BLOCK = re.compile(r'<pre><code(?: class="language-([^"]*)")?>.*?</code></pre>', re.S)


def _wrap_code_block(match: re.Match[str]) -> str:
    language = match.group(1) or ""
    label = language if _lexer(language) is not None else "text"
    return (
        '<div class="code-block"><div class="code-head">'
        f'<span class="code-lang">{escape(label)}</span>'
        '<button type="button" class="copy-code" aria-label="Copy code">Copy</button>'
        f"</div>{match.group(0)}</div>"
    )


def render_markdown(text: str) -> SafeString:
    """Safe HTML for a message's text (code blocks keep their ``language-x`` class)."""
    html = _cleaner.clean(_markdown.render(text))
    return mark_safe(_CODE_BLOCK.sub(_wrap_code_block, html))  # nh3 has just sanitised it


def code_stylesheet() -> str:
    """The Pygments rules for highlighted blocks, scoped to them: ``static/pygments.css``."""
    style = HtmlFormatter(style=CODE_STYLE)
    rules = style.get_background_style_defs(CODE_SCOPE) + style.get_token_style_defs(CODE_SCOPE)
    # No red box around Pygments' error tokens: in a chat they mark where a lexer gives up
    # (or a block that is still being written), not a mistake worth pointing at.
    rules = [rule for rule in rules if f"{CODE_SCOPE} .err " not in rule]
    header = f"/* Pygments {CODE_STYLE!r} style: code_stylesheet() in webapp/chat/rendering.py */"
    return "\n".join([header, *rules]) + "\n"
