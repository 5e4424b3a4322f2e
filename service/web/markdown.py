"""Markdown (a transcript as memory renders it, a handoff) to HTML that cannot carry markup of its own.

Every character of the text is escaped first; only this module's own tags are added around it: headings,
paragraphs, lists, quotes, code blocks, tables, ``code``, **bold** and *italics*. A link is shown as its
text and its address, never as an ``<a>``: transcripts and handoffs are hostile text, and an address in
them (``javascript:``, a look-alike) is nothing to click on in the owner's own memory.
"""

from __future__ import annotations

import re
from html import escape

from markupsafe import Markup

__all__ = ["handoff_parts", "render_markdown"]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^(\s*)\d{1,9}[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")

# Inline patterns, applied to text already escaped (so they can only wrap it, never open a tag of its own).
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_LINK = re.compile(r"\[([^\]\n]{1,500})\]\(([^)\s]{1,2000})\)")
_SLOT = re.compile("\x00(\\d+)\x00")


def _inline(text: str) -> str:
    """One line's inline markup, escaped. Code spans are set aside first so nothing inside them is parsed."""
    slots: list[str] = []

    def keep(html: str) -> str:
        slots.append(html)
        return f"\x00{len(slots) - 1}\x00"

    text = text.replace("\x00", "")
    text = _CODE.sub(lambda m: keep(f"<code>{escape(m.group(1))}</code>"), text)
    text = _LINK.sub(
        lambda m: keep(f'{escape(m.group(1))} <span class="url">({escape(m.group(2))})</span>'),
        text,
    )
    out = escape(text)
    out = _BOLD.sub(r"<strong>\1</strong>", out)
    out = _ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", out)
    return _SLOT.sub(lambda m: slots[int(m.group(1))], out)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|").removesuffix("|")
    return [c.strip() for c in body.split("|")]


def render_markdown(text: str) -> Markup:
    """``text`` as safe HTML (a ``Markup``: templates insert it as it is)."""
    out: list[str] = []
    para: list[str] = []
    lines = text.splitlines()
    i = 0

    def flush() -> None:
        if para:
            out.append("<p>" + "<br>".join(_inline(p) for p in para) + "</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(1)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end: a page may cut a block)
            out.append("<pre><code>" + escape("\n".join(body)) + "</code></pre>")
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            tag = f"h{min(len(heading.group(1)) + 1, 6)}"  # h1 is the page's own title
            out.append(f"<{tag}>{_inline(heading.group(2))}</{tag}>")
            i += 1
            continue
        if _RULE.match(line):
            flush()
            out.append("<hr>")
            i += 1
            continue
        if _QUOTE.match(line):
            flush()
            quoted: list[str] = []
            while i < len(lines) and (m := _QUOTE.match(lines[i])):
                quoted.append(m.group(1))
                i += 1
            out.append("<blockquote>" + str(render_markdown("\n".join(quoted))) + "</blockquote>")
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            flush()
            head = _cells(line)
            rows: list[list[str]] = []
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(_cells(lines[i]))
                i += 1
            html = ['<div class="table"><table><thead><tr>']
            html += [f"<th>{_inline(c)}</th>" for c in head]
            html.append("</tr></thead><tbody>")
            for row in rows:
                html.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>")
            html.append("</tbody></table></div>")
            out.append("".join(html))
            continue
        item = _BULLET.match(line) or _NUMBERED.match(line)
        if item:
            flush()
            tag = "ul" if _BULLET.match(line) else "ol"
            items: list[str] = []
            while i < len(lines) and (m := (_BULLET.match(lines[i]) if tag == "ul" else _NUMBERED.match(lines[i]))):
                items.append(_inline(m.group(2)))
                i += 1
                # A wrapped item's continuation lines (indented, not a new item) belong to it.
                while (
                    i < len(lines)
                    and lines[i].startswith(("  ", "\t"))
                    and lines[i].strip()
                    and not (_BULLET.match(lines[i]) or _NUMBERED.match(lines[i]))
                ):
                    items[-1] += "<br>" + _inline(lines[i].strip())
                    i += 1
            out.append(f"<{tag}>" + "".join(f"<li>{x}</li>" for x in items) + f"</{tag}>")
            continue
        para.append(line)
        i += 1
    flush()
    return Markup("\n".join(out))


def handoff_parts(markdown: str) -> tuple[str, str]:
    """(frontmatter, body) of a handoff file: the body is rendered, the frontmatter shown as it is."""
    if markdown.startswith("---\n"):
        end = markdown.find("\n---", 4)
        if end > 0:
            return markdown[4:end], markdown[end + 4 :].lstrip("\n")
    return "", markdown
