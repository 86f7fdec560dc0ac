"""Small display helpers shared by the admin modules: links along the learning chain, readable
JSON and vote tables, and the JSONL download every "Export selected" action returns.

They only format what the admin already loaded; none of them queries the database, so list
pages stay at a fixed number of queries as long as each admin selects the related rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db.models import Model
from django.http import StreamingHttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

EMPTY = "—"


def admin_url(obj: Model) -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])


def admin_link(obj: Model | None, text: object = None) -> SafeString | str:
    """A link to ``obj``'s admin page (its str() as text by default); a dash for None."""
    if obj is None:
        return EMPTY
    return format_html('<a href="{}">{}</a>', admin_url(obj), obj if text is None else text)


def admin_list_link(model: type[Model], text: object, **filters: object) -> SafeString:
    """A link to ``model``'s admin list filtered by ``filters`` (e.g. ``message__id__exact=4``)."""
    meta = model._meta
    url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return format_html('<a href="{}?{}">{}</a>', url, query, text)


def pretty_json(value: Any) -> SafeString:
    return format_html(
        '<pre class="parley-json" style="white-space: pre-wrap; margin: 0">{}</pre>',
        json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True),
    )


def _cell(value: Any) -> str:
    if value is None:
        return EMPTY
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> SafeString | str:
    """An HTML table of ``rows`` (dicts) restricted to ``columns``; a dash when empty."""
    if not rows:
        return EMPTY
    head = format_html_join("", "<th>{}</th>", ((c,) for c in columns))
    body = format_html_join(
        "",
        "<tr>{}</tr>",
        (
            (format_html_join("", "<td>{}</td>", ((_cell(row.get(c)),) for c in columns)),)
            for row in rows
        ),
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


def jsonl_response(records: Iterable[dict[str, Any]], name: str) -> StreamingHttpResponse:
    """Stream ``records`` as a JSONL download called ``name``.jsonl."""
    lines = (json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
    return response
