"""Markdown renders; HTML and script from a user or the model never do."""

from __future__ import annotations

from webapp.chat.rendering import render_markdown


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
    assert "a &lt; b" in html and "&lt;b&gt;" in html


def test_markdown_emphasis_lists_and_tables_render() -> None:
    html = render_markdown("**bold** and *it*\n\n- one\n- two\n\n| a | b |\n|---|--:|\n| 1 | 2 |")
    assert "<strong>bold</strong>" in html and "<em>it</em>" in html
    assert "<li>one</li>" in html
    assert '<td style="text-align:right">2</td>' in html


def test_style_attributes_keep_only_text_alignment() -> None:
    html = render_markdown("| a |\n|:-:|\n| 1 |")
    assert 'style="text-align:center"' in html
