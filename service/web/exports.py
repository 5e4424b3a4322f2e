"""What a page shows, as a file: ``export_response(rows, "json" | "csv", filename)``.

Exports carry hostile text (handoffs, facts, transcripts) into other programs, so:

- they are always an attachment with their own content type (never ``text/html``: WebHeaders adds
  ``nosniff``), and JSON escapes ``<``, ``>`` and ``&`` so even a sniffing viewer finds no markup;
- a CSV cell that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or
  a carriage return) gets a leading apostrophe (OWASP's "CSV injection" advice);
- nothing is un-redacted: rows are written exactly as the memory stored them.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import Response

from service.web.core import WebError

__all__ = ["EXPORT_FORMATS", "csv_cell", "export_response", "to_csv", "to_json"]

EXPORT_FORMATS = ("json", "csv")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def csv_cell(value: Any) -> str:
    """One cell as text a spreadsheet shows rather than evaluates: lists joined by "; ", mappings as JSON."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        return f"{value:.6g}" if isinstance(value, float) else str(value)  # a number, not text: as it is
    elif isinstance(value, Mapping):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        text = "; ".join(csv_cell(v).removeprefix("'") for v in value)
    else:
        text = str(value)
    # Any text that starts like a formula is defused, "-1" in a string included: a number column is
    # written from numbers (above), so only text is ever prefixed.
    return "'" + text if text.startswith(_FORMULA_START) else text


def to_csv(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV with one header line: the union of the rows' keys, in first-seen order."""
    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, None)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([csv_cell(c) for c in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return out.getvalue()


def to_json(rows: list[dict[str, Any]]) -> str:
    text = json.dumps(rows, ensure_ascii=False, indent=1, default=str)
    # Inert even if a viewer ignores the type: no markup characters survive as such.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def export_response(rows: list[dict[str, Any]], fmt: str, filename: str) -> Response:
    """``rows`` as a downloadable ``filename.json`` or ``filename.csv`` (the extension is added here)."""
    name = _SAFE_NAME.sub("-", filename).strip("-.") or "export"
    headers = {
        "Content-Disposition": f'attachment; filename="{name}.{fmt}"',
        "Cache-Control": "no-store",  # a memory's contents: not for shared caches
        "X-Content-Type-Options": "nosniff",
    }
    if fmt == "json":
        return Response(to_json(rows), media_type="application/json", headers=headers)
    if fmt == "csv":
        # The BOM makes spreadsheet programs read UTF-8 as UTF-8.
        return Response("\ufeff" + to_csv(rows), media_type="text/csv; charset=utf-8", headers=headers)
    raise WebError(f"exports are {' or '.join(EXPORT_FORMATS)}, not {fmt[:20]!r}", status=400)
