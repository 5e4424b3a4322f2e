"""The facts pages: the memories (filtered, strongest first, or exported as JSON/CSV), one memory's edit form
and its forget confirmation, and their graph (data for static/graph.js, an SVG for a browser without it).

The page's view (its filters, its page) travels with every form as ``back``, so an action, or an error
shown with what was typed, comes back to the same view and to the place on it where it was made."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.responses import Response

from memory.facts import Memory, build_graph, component_types
from memory.facts import effective as effective_decay
from service.web.core import WebCall, WebError, query
from service.web.exports import EXPORT_FORMATS, export_response
from service.web.facts_graph import graph_json, graph_svg  # routed here (service/web/routes.py)

__all__ = ["FactsView", "fact_edit_page", "facts_page", "graph_json", "graph_svg", "render_facts"]

FACTS_PAGE = 100
_EXPORT_BASE = ("id", "type", "subject")
_EXPORT_TAIL = ("decay", "state", "access_count", "created", "provenance")


@dataclass(frozen=True, slots=True)
class FactsView:
    """What the facts page shows: its filters (words, type, state), its graph's root and its page."""

    q: str = ""
    ctype: str = ""
    state: str = ""
    root: str = ""
    page: int = 1

    @classmethod
    def read(cls, params: dict[str, str]) -> FactsView:
        """From a query string's values (or a form's ``back``), each cut as ``query`` cuts it."""

        def cut(name: str, limit: int) -> str:
            return params.get(name, "").replace("\x00", "")[:limit]

        try:
            page = min(100_000, max(1, int(params.get("page", "1"))))
        except ValueError:
            page = 1
        return cls(cut("q", 200), cut("type", 40), cut("state", 20), cut("root", 200), page)

    @classmethod
    def of_back(cls, back: str) -> FactsView:
        return cls.read(dict(parse_qsl(back[:2000], keep_blank_values=True)))

    def pairs(self, **extra: str) -> list[tuple[str, str]]:
        values = {"q": self.q, "type": self.ctype, "state": self.state, "root": self.root}
        values["page"] = str(self.page) if self.page > 1 else ""
        return [(k, v) for k, v in {**values, **extra}.items() if v]

    def query_string(self, **extra: str) -> str:
        return urlencode(self.pairs(**extra), quote_via=quote)

    def href(self, fragment: str = "", **extra: str) -> str:
        """``/facts`` showing this view (plus ``extra``), at ``#fragment``: a local path, never elsewhere."""
        qs = self.query_string(**extra)
        return "/facts" + (f"?{qs}" if qs else "") + (f"#{quote(fragment, safe='~-._')}" if fragment else "")


def _fact_row(m: Memory, decay: float) -> dict[str, Any]:
    return {
        "m": m,
        "fields": [(name, m.field_text(name)) for name in m.fields],
        "decay": decay,
        "created": time.strftime("%Y-%m-%d", time.gmtime(m.created_ms / 1000)),
    }


def _export_row(row: dict[str, Any]) -> dict[str, Any]:
    """One memory as an export row: its fields as columns of their own (a spreadsheet sorts on them)."""
    m: Memory = row["m"]
    out: dict[str, Any] = {"id": m.id, "type": m.ctype, "subject": m.subject}
    for name, value in row["fields"]:
        # A type's field named like a base column keeps a prefix rather than overwrite it.
        out[f"field_{name}" if name in _EXPORT_BASE + _EXPORT_TAIL else name] = value
    out |= {"decay": round(row["decay"], 4), "state": m.state.value, "access_count": m.access_count}
    return out | {"created": row["created"], "provenance": m.provenance}


def _matches(m: Memory, text: str) -> bool:
    words = [m.id, m.subject, m.ctype, *(m.field_text(k) for k in m.fields)]
    return text in " ".join(words).casefold()


def _types() -> list[tuple[str, list[str]]]:
    return [(t.name, [f.name for f in t.fields]) for t in component_types()]


async def _chosen(call: WebCall, view: FactsView, now_ms: int) -> tuple[list[Memory], list[tuple[float, Memory]]]:
    """(every memory, (decay, memory) of those the view's filters choose, strongest first)."""
    facts = await call.tenant.facts()
    memories = await facts.all_memories()
    text = view.q.casefold().strip()
    chosen = [
        m
        for m in memories
        if (not view.ctype or m.ctype == view.ctype)
        and (not view.state or m.state.value == view.state)
        and (not text or _matches(m, text))
    ]
    half_life_ms = facts.engine.half_life_ms
    ranked = [(effective_decay(m.ts_ms, m.access_count, now_ms, half_life_ms), m) for m in chosen]
    ranked.sort(key=lambda pair: -pair[0])
    return memories, ranked


async def render_facts(
    call: WebCall,
    view: FactsView,
    *,
    status: int = 200,
    done: str = "",
    done_id: str = "",
    made_as: str = "",
    error: str = "",
    typed: dict[str, str] | None = None,
) -> Response:
    """The facts page for ``view``; after a failed remember, ``typed`` (the form as sent) fills its form
    again and ``error`` is shown beside it."""
    now_ms = int(time.time() * 1000)
    memories, rows = await _chosen(call, view, now_ms)
    shown = [_fact_row(m, decay) for decay, m in rows[(view.page - 1) * FACTS_PAGE : view.page * FACTS_PAGE]]
    facts = await call.tenant.facts()
    types = _types()
    return call.render(
        "facts.html",
        status=status,
        nav="facts",
        view=view,
        back=view.query_string(),
        exports={fmt: FactsView(view.q, view.ctype, view.state).href(format=fmt) for fmt in EXPORT_FORMATS},
        rows=shown,
        total=len(rows),
        more=len(rows) > view.page * FACTS_PAGE,
        graph=build_graph(memories, root=view.root, now_ms=now_ms),
        types=types,
        world=await facts.world(),
        done=done,
        done_id=done_id if any(row["m"].id == done_id for row in shown) else "",
        made_as=made_as if any(name == made_as for name, _ in types) else "",  # else its error shows on top
        error=error,
        typed=typed or {},
    )


async def facts_page(call: WebCall) -> Response:
    """The page, or with ``?format=json|csv`` every memory its filters choose (all its pages) as a file."""
    view = FactsView.read(dict(call.request.query_params))
    fmt = query(call.request, "format", limit=8).lower()
    if fmt in EXPORT_FORMATS:
        _, rows = await _chosen(call, view, int(time.time() * 1000))
        return export_response([_export_row(_fact_row(m, decay)) for decay, m in rows], fmt, "facts")
    return await render_facts(
        call,
        view,
        done=query(call.request, "done", limit=20),
        done_id=query(call.request, "id", limit=300),
        made_as=query(call.request, "as", limit=40),
        error=query(call.request, "error", limit=300),
    )


async def fact_edit_page(call: WebCall) -> Response:
    """One memory's form, or (``?forget=1``) the question before forgetting it: Forget is never one tap."""
    mid = query(call.request, "id", limit=300)
    view = FactsView.of_back(query(call.request, "back", limit=2000))
    facts = await call.tenant.facts()
    m = await facts.get(mid)
    if m is None:
        raise WebError(f"no memory with id {mid!r}", status=404)
    fields = [(f.name, m.field_text(f.name)) for t in component_types() if t.name == m.ctype for f in t.fields]
    return call.render(
        "fact_edit.html",
        nav="facts",
        m=m,
        subject=m.subject,
        fields=fields,
        error="",
        forget=query(call.request, "forget", limit=1) == "1",
        back=view.query_string(),
        back_href=view.href(f"fact-{m.id}"),
        near=query(call.request, "near", limit=300),
    )
