"""The facts page's changes (remember, forget, edit), each a script run by the facts engine, all or nothing.

After a change the page comes back as it was (its filters, from the form's ``back``) at the place the
change was made: the edited memory's row, the Remember form used, the row after a forgotten one. A change
the engine refuses shows the same page again with what was typed and why (400 for a form we cannot read,
422 for a script the engine refused), nothing lost.

Forget is asked first, on its own page (/facts/edit?id=…&forget=1, no script needed), rather than undone
after: the engine's ``remember`` restarts a memory's decay clock, its access count and its created date,
so an "undo" would bring back a different, stronger memory than the one forgotten, and say nothing."""

from __future__ import annotations

from starlette.responses import RedirectResponse, Response

from memory import MemoryStoreError
from memory.facts import Memory, component, component_types, format_list
from service.web.core import WebCall, WebError
from service.web.facts_pages import FactsView, render_facts

__all__ = ["fact_script", "facts_action"]

_MAX_FIELD = 4000


def fact_script(form: dict[str, str], *, replace_id: str = "") -> str:
    """The Tcl script a facts form asks for: ``remember`` (or ``link`` for a Relationship), after a
    ``forget`` of the memory it replaces when editing. Every word quoted: nothing in a form is code."""
    ctype = form.get("type", "")
    component(ctype)  # FactsError (a MemoryStoreError) naming the known types
    subject = form.get("subject", "").strip()
    lines: list[str] = []
    if replace_id:
        lines.append(format_list(["forget", replace_id]))
    values = {
        f.name: form.get(f"f_{f.name}", "").strip() for t in component_types() if t.name == ctype for f in t.fields
    }
    if any(len(v) > _MAX_FIELD for v in values.values()):
        raise WebError(f"a field is longer than {_MAX_FIELD} characters", status=400)
    if ctype == "Relationship" and not form.get("id", "").strip():
        words = ["link", subject, values.get("target", ""), values.get("kind", "")]
        if values.get("strength"):
            words.append(values["strength"])
        lines.append(format_list(words))
    else:
        mid = replace_id or form.get("id", "").strip()
        words = ["remember", mid, subject, ctype]
        for name, value in values.items():
            if value:
                words += [name, value]
        lines.append(format_list(words))
    return "\n".join(lines)


def _back(view: FactsView, fragment: str, **params: str) -> RedirectResponse:
    # 303: a reload after the change does not send the form again.
    return RedirectResponse(view.href(fragment, **params), status_code=303)


def _edit_again(call: WebCall, m: Memory, view: FactsView, error: str, status: int) -> Response:
    """The edit form again, holding what was typed, with the reason it was not saved."""
    fields = [
        (f.name, call.form.get(f"f_{f.name}", "")) for t in component_types() if t.name == m.ctype for f in t.fields
    ]
    return call.render(
        "fact_edit.html",
        status=status,
        nav="facts",
        m=m,
        subject=call.form.get("subject", ""),
        fields=fields,
        error=error,
        forget=False,
        back=view.query_string(),
        back_href=view.href(f"fact-{m.id}"),
        near="",
    )


async def _remember(call: WebCall, view: FactsView, provenance: str) -> Response:
    ctype = call.form.get("type", "")[:40]
    try:
        script = fact_script(call.form)
    except (WebError, MemoryStoreError) as exc:  # an unknown type, a field too long: the form was wrong
        message = exc.message if isinstance(exc, WebError) else str(exc)
        return await render_facts(call, view, status=400, error=message, made_as=ctype, typed=call.form)
    result = await (await call.tenant.facts()).run_script(script, provenance=provenance)
    if not result.ok:
        error = (result.error or "the script failed")[:300]
        return await render_facts(call, view, status=422, error=error, made_as=ctype, typed=call.form)
    return _back(view, f"remember-{ctype}", done="remember", **{"as": ctype})


async def _edit(call: WebCall, view: FactsView, provenance: str) -> Response:
    mid = call.form.get("id", "")
    facts = await call.tenant.facts()
    m = await facts.get(mid)
    if m is None:  # forgotten meanwhile (another tab, the bot): nothing left to hold the typing against
        return _back(view, "memories", error=f"No memory with id {mid[:200]!r}.")
    try:
        if m.via_link:
            # A link's id is from~kind~to: edited, it is forgotten and linked anew (its id follows its ends).
            script = format_list(["forget", mid]) + "\n" + fact_script({**call.form, "id": "", "type": m.ctype})
        else:
            script = fact_script({**call.form, "type": m.ctype}, replace_id=mid)
    except WebError as exc:
        return _edit_again(call, m, view, exc.message, 400)
    result = await facts.run_script(script, provenance=provenance)
    if not result.ok:
        return _edit_again(call, m, view, (result.error or "the script failed")[:300], 422)
    new_id = result.result.strip() or mid  # the last command's value: the id remembered or linked
    # Saved, it is the strongest memory again: on the first page.
    return _back(FactsView(view.q, view.ctype, view.state, view.root), f"fact-{new_id}", done="edit", id=new_id)


async def _forget(call: WebCall, view: FactsView, provenance: str) -> Response:
    mid = call.form.get("id", "")
    result = await (await call.tenant.facts()).run_script(format_list(["forget", mid]), provenance=provenance)
    if not result.ok:
        return _back(view, "memories", error=(result.error or "the script failed")[:250])
    near = call.form.get("near", "")[:300]
    return _back(view, f"fact-{near}" if near and near != mid else "memories", done="forget")


async def facts_action(call: WebCall) -> Response:
    """``op`` remember | forget | edit, from the view in the form's ``back``."""
    op = call.form.get("op", "")
    view = FactsView.of_back(call.form.get("back", ""))
    provenance = f"web ({call.login.via} {call.login.who})".strip()
    if op == "remember":
        return await _remember(call, view, provenance)
    if op == "edit":
        return await _edit(call, view, provenance)
    if op == "forget":
        return await _forget(call, view, provenance)
    raise WebError("unknown facts action", status=400)
