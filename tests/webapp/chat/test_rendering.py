"""Markdown renders; HTML and script from a user or the model never do."""

from __future__ import annotations

import re
from pathlib import Path

from webapp.chat.rendering import code_stylesheet, render_markdown

ROOT = Path(__file__).resolve().parents[3]


def code_label(html: str) -> list[str]:
    return re.findall(r'<span class="code-lang">([^<]*)</span>', html)


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def test_script_tags_render_as_text() -> None:
    html = render_markdown("<script>alert('x')</script>")
    assert "<script" not in html
    assert "&lt;script&gt;" in html


def test_event_handler_attributes_render_as_text() -> None:
    html = render_markdown('<img src=x onerror="alert(1)">')
    assert "<img" not in html
    assert "&lt;img" in html


def test_javascript_links_are_dropped() -> None:
    html = render_markdown("[click](javascript:alert(1)) and [ok](https://example.org)")
    assert 'href="javascript' not in html
    assert 'href="https://example.org"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


def test_code_blocks_keep_their_language_and_escape_their_text() -> None:
    html = render_markdown("```python\nif a < b:\n    print('<b>')\n```")
    assert '<pre><code class="language-python">' in html
    assert "if a &lt; b:\n    print('&lt;b&gt;')" in text_of(html)


def test_markdown_emphasis_lists_and_tables_render() -> None:
    html = render_markdown("**bold** and *it*\n\n- one\n- two\n\n| a | b |\n|---|--:|\n| 1 | 2 |")
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<li>one</li>" in html
    assert '<td style="text-align:right">2</td>' in html


def test_style_attributes_keep_only_text_alignment() -> None:
    html = render_markdown("| a |\n|:-:|\n| 1 |")
    assert 'style="text-align:center"' in html


def test_code_blocks_are_highlighted_with_pygments_classes_under_a_labelled_head() -> None:
    html = render_markdown("```python\ndef f(x):\n    return x  # done\n```")
    assert '<span class="k">def</span>' in html and '<span class="nf">f</span>' in html
    assert '<span class="c1"># done</span>' in html
    assert code_label(html) == ["python"]
    assert html.startswith('<div class="code-block"><div class="code-head">')
    assert '<button type="button" class="copy-code" aria-label="Copy code">Copy</button>' in html
    assert html.rstrip().endswith("</code></pre></div>")


def test_code_blocks_carry_classes_and_never_a_style_attribute() -> None:
    html = render_markdown("```js\nconst a = `x${b}`; // c\n```\n\n```css\np { color: red }\n```")
    assert html.count('class="code-block"') == 2 and "style=" not in html


def test_script_in_a_code_block_stays_text() -> None:
    html = render_markdown(
        "```html\n<script>alert(1)</script>\n```\n\n```\n<script>x</script>\n```"
    )
    assert "<script" not in html
    assert text_of(html).count("&lt;script&gt;") == 2 and code_label(html) == ["html", "text"]


def test_a_language_label_is_only_ever_a_known_language_name() -> None:
    html = render_markdown('```"><img src=x onerror=alert(1)>\nx\n```')
    assert "<img" not in html and code_label(html) == ["text"]
    html = render_markdown("```no-such-language\nplain <b>\n```\n\n    indented code\n")
    assert code_label(html) == ["text", "text"]
    assert '<pre><code class="language-no-such-language">plain &lt;b&gt;\n</code></pre>' in html
    assert "<pre><code>indented code\n</code></pre>" in html


def test_an_unclosed_fence_renders_as_code_to_the_end() -> None:
    html = render_markdown("Here:\n\n```python\nfor i in range(3):\n    print('<i>'")
    assert "<p>Here:</p>" in html and code_label(html) == ["python"]
    assert '<span class="k">for</span>' in html and "&lt;i&gt;" in html
    assert html.rstrip().endswith("</code></pre></div>")


def test_inline_code_is_not_a_code_block() -> None:
    html = render_markdown("Call `f()` twice.")
    assert "<code>f()</code>" in html and "code-block" not in html


def test_the_code_stylesheet_is_the_one_the_site_serves() -> None:
    served = (ROOT / "static" / "pygments.css").read_text()
    assert served == code_stylesheet(), (
        "static/pygments.css is out of date: write code_stylesheet() of "
        "webapp/chat/rendering.py to it"
    )
    rules = [line for line in served.splitlines() if not line.startswith("/*")]
    assert rules and all(line.startswith(".code-block pre") for line in rules)
