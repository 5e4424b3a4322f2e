"""The facts page's changes (remember, forget, edit), each a script run by the facts engine, all or nothing."""

from __future__ import annotations

from starlette.responses import Response

from memory.facts import component, component_types, format_list
from service.web.core import WebCall, WebError, redirect

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


async def facts_action(call: WebCall) -> Response:
    """``op`` remember | forget | edit; the script's error (its line, its message) comes back to the page."""
    op = call.form.get("op", "")
    facts = await call.tenant.facts()
    provenance = f"web ({call.login.via} {call.login.who})".strip()
    if op == "forget":
        script = format_list(["forget", call.form.get("id", "")])
    elif op == "remember":
        script = fact_script(call.form)
    elif op == "edit":
        mid = call.form.get("id", "")
        m = await facts.get(mid)
        if m is None:
            return redirect("/facts", {"error": f"No memory with id {mid[:200]!r}."})
        if m.via_link:
            # A link's id is from~kind~to: edited, it is forgotten and linked anew (its id follows its ends).
            script = format_list(["forget", mid]) + "\n" + fact_script({**call.form, "id": "", "type": m.ctype})
        else:
            script = fact_script({**call.form, "type": m.ctype}, replace_id=mid)
    else:
        raise WebError("unknown facts action", status=400)
    result = await facts.run_script(script, provenance=provenance)
    if not result.ok:
        return redirect("/facts", {"error": (result.error or "the script failed")[:250]})
    return redirect("/facts", {"done": op})
