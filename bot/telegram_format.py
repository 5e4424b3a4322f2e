"""The agents' Markdown → Telegram-safe HTML (or plain text); :mod:`bot.telegram_split` cuts it to size.

Markdown is parsed into a small tree first, so every tag the HTML renderer writes is balanced and
properly nested by construction; all other text is escaped. Unsupported constructs degrade to text:
headings become bold lines, list markers become bullets, tables become preformatted blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["brief", "markdown_to_html", "plain_text"]

_MAX_HREF = 2048  # longer URLs stay text, so a link reopened after a cut (bot.telegram_split) fits in a chunk
_LINK_SCHEME = re.compile(r"^(?:https?|tg|mailto):", re.IGNORECASE)
_ESCAPABLE = frozenset("\\`*_{}[]()#+-.!|~>")
_MAX_NESTING = 16
_DELIMS = {"**": "b", "__": "b", "*": "i", "_": "i", "~~": "s"}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)[^`]*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
_TASK = re.compile(r"^\[([ xX])\]\s+")
_TABLE = re.compile(r"^\s*\|.*\|\s*$")
_RUNS = {c: re.compile(re.escape(c) + "+") for c in "`*_~"}
_LINK_TARGET = re.compile(r"\(\s*<?([^\s()<>]+(?:\([^\s()]*\)[^\s()<>]*)*)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s<>]+)>")


@dataclass(slots=True)
class _El:
    tag: str
    children: list[_Node] = field(default_factory=list)
    attrs: tuple[tuple[str, str], ...] = ()


_Node = str | _El


# --- public API -------------------------------------------------------------------------------


def markdown_to_html(md: str) -> str:
    """Render Markdown as HTML that Telegram's ``parse_mode="HTML"`` accepts."""
    return _render_html(_blocks(md))


def plain_text(md: str) -> str:
    """The same Markdown as plain text without markup: the fallback when Telegram rejects the HTML."""
    return _render_plain(_blocks(md))


# --- block level ------------------------------------------------------------------------------


def _blocks(md: str, *, in_quote: bool = False) -> list[_Node]:
    lines = md.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[list[_Node]] = []  # rendered lines
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append(_inline("\n".join(para)))
            para.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker, lang = fence.group(1), fence.group(2)
            indent = len(line) - len(line.lstrip(" "))
            body: list[str] = []
            i += 1
            while i < len(lines):
                close = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", lines[i])
                if close and close.group(1)[0] == marker[0] and len(close.group(1)) >= len(marker):
                    i += 1
                    break
                body.append(_dedent(lines[i], indent))
                i += 1
            out.append([_pre("\n".join(body), lang)])
            continue
        if not line.strip():
            flush()
            if out and out[-1]:  # one blank line between blocks, however many were written
                out.append([])
        elif heading := _HEADING.match(line):
            flush()
            out.append([_El("b", _inline(heading.group(2)))])
        elif _RULE.match(line):
            flush()
            out.append(["──────────"])
        elif _QUOTE.match(line) and not in_quote:
            flush()
            inner: list[str] = []
            while i < len(lines) and (q := _QUOTE.match(lines[i])):
                inner.append(q.group(1))
                i += 1
            out.append([_El("blockquote", _blocks("\n".join(inner), in_quote=True))])
            continue
        elif item := _ITEM.match(line):
            flush()
            out.append(_list_item(item))
        elif _TABLE.match(line) and i + 1 < len(lines) and _TABLE.match(lines[i + 1]):
            flush()
            rows: list[str] = []
            while i < len(lines) and _TABLE.match(lines[i]):
                rows.append(lines[i].strip())
                i += 1
            out.append([_El("pre", ["\n".join(rows)])])
            continue
        else:
            para.append(line)
        i += 1
    flush()
    while out and not out[-1]:
        out.pop()
    nodes: list[_Node] = []
    for n, rendered in enumerate(out):
        if n:
            nodes.append("\n")
        nodes.extend(rendered)
    return nodes


def _dedent(line: str, indent: int) -> str:
    stripped = len(line) - len(line.lstrip(" "))
    return line[min(stripped, indent) :]


def _pre(code: str, lang: str) -> _El:
    lang = re.sub(r"[^\w+#.-]", "", lang)
    if lang:
        return _El("pre", [_El("code", [code], (("class", f"language-{lang}"),))])
    return _El("pre", [code])


def _list_item(item: re.Match[str]) -> list[_Node]:
    indent, marker, rest = item.groups()
    depth = len(indent.expandtabs(4)) // 2
    bullet = "•" if marker in "-*+" else marker
    task = _TASK.match(rest)
    if task:
        bullet = "☑" if task.group(1) in "xX" else "☐"
        rest = rest[task.end() :]
    return ["  " * depth + bullet + " ", *_inline(rest)]


# --- inline level -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Frame:
    marker: str
    children: list[_Node] = field(default_factory=list)


def _inline(text: str, *, links: bool = True) -> list[_Node]:
    stack = [_Frame("")]
    pairs = _bracket_pairs(text) if links and "[" in text else {}
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in _ESCAPABLE:
            stack[-1].children.append(text[i + 1])
            i += 2
        elif c == "`":
            i = _code_span(text, i, stack[-1].children)
        elif c == "[" and links and (link := _link(text, i, pairs)):
            label, url, end = link
            frame = stack[-1].children
            if _LINK_SCHEME.match(url) and len(url) <= _MAX_HREF:
                frame.append(_El("a", _inline(label, links=False), (("href", url),)))
            else:  # a file path or odd scheme: keep what the agent meant, as text
                frame.extend(_inline(label, links=False))
                if url != label:
                    frame.append(f" ({url})")
            i = end
        elif c == "<" and links and (auto := _AUTOLINK.match(text, i)) and len(auto.group(1)) <= _MAX_HREF:
            stack[-1].children.append(_El("a", [auto.group(1)], (("href", auto.group(1)),)))
            i = auto.end()
        elif c in "*_~":
            i = _delimiter(text, i, stack)
        else:
            stack[-1].children.append(c)
            i += 1
    _collapse(stack, 0)  # unclosed emphasis is literal text
    return stack[0].children


def _code_span(text: str, i: int, out: list[_Node]) -> int:
    run = _run_length(text, i)
    ticks = text[i : i + run]
    j = i + run
    while True:
        j = text.find(ticks, j)
        if j < 0:
            out.append(ticks)
            return i + run
        end = j + run
        if end < len(text) and text[end] == "`":  # a longer run: not our closer
            j = end + _run_length(text, end)
            continue
        body = text[i + run : j]
        if len(body) > 2 and body[0] == " " and body[-1] == " ":
            body = body[1:-1]
        out.append(_El("code", [body]))
        return end


def _run_length(text: str, i: int) -> int:
    """How many copies of ``text[i]`` start at ``i`` (a regex match: no slicing of long texts)."""
    m = _RUNS[text[i]].match(text, i)
    return m.end() - i if m else 1


def _bracket_pairs(text: str) -> dict[int, int]:
    """Index of each ``[`` → index of its matching ``]``, in one pass (escaped brackets ignored)."""
    pairs: dict[int, int] = {}
    opened: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 1
        elif ch == "[":
            opened.append(i)
        elif ch == "]" and opened:
            pairs[opened.pop()] = i
        i += 1
    return pairs


def _link(text: str, i: int, pairs: dict[int, int]) -> tuple[str, str, int] | None:
    j = pairs.get(i)
    if j is None:
        return None
    m = _LINK_TARGET.match(text, j + 1)
    if not m:
        return None
    return text[i + 1 : j], m.group(1), m.end()


def _delimiter(text: str, i: int, stack: list[_Frame]) -> int:
    c = text[i]
    run = _run_length(text, i)
    end = i + run
    if (c == "~" and run != 2) or run > 3:
        stack[-1].children.append(text[i:end])
        return end
    before = text[i - 1] if i else " "
    after = text[end] if end < len(text) else " "
    can_open = not after.isspace()
    can_close = not before.isspace()
    if c == "_":  # snake_case identifiers are never emphasis
        can_open = can_open and not before.isalnum()
        can_close = can_close and not after.isalnum()
    left = run
    while left and can_close:
        depth = _open_frame(stack, c, left)
        if depth is None:
            break
        size = len(stack[depth].marker)
        _collapse(stack, depth)
        frame = stack.pop()
        if frame.children:
            stack[-1].children.append(_El(_DELIMS[frame.marker], frame.children))
        else:
            stack[-1].children.append(frame.marker * 2)
        left -= size
    if left and can_open and len(stack) <= _MAX_NESTING:  # deeper is never real emphasis
        if left >= 2:
            stack.append(_Frame(c * 2))
            left -= 2
        if left:
            stack.append(_Frame(c))
            left = 0
    if left:
        stack[-1].children.append(c * left)
    return end


def _open_frame(stack: list[_Frame], c: str, run: int) -> int | None:
    """Index of the innermost open frame that a closing run of ``run`` × ``c`` can close.

    A frame opened by the same run length wins (``**a *b** c*`` closes the bold, not the italic).
    """
    for exact in (True, False):
        for depth in range(len(stack) - 1, 0, -1):
            marker = stack[depth].marker
            if marker[0] == c and (len(marker) == run if exact else len(marker) <= run):
                return depth
    return None


def _collapse(stack: list[_Frame], depth: int) -> None:
    """Turn the frames above ``stack[depth]`` into literal text inside it (their markers were not emphasis).

    One pass bottom-up, so each node moves once however deep the unclosed markers piled up.
    """
    target = stack[depth].children
    for frame in stack[depth + 1 :]:
        target.append(frame.marker)
        target.extend(frame.children)
    del stack[depth + 1 :]


# --- rendering --------------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _render_html(nodes: list[_Node]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            parts.append(_escape(node))
            continue
        attrs = "".join(f' {k}="{_escape(v).replace(chr(34), "&quot;")}"' for k, v in node.attrs)
        parts.append(f"<{node.tag}{attrs}>{_render_html(node.children)}</{node.tag}>")
    return "".join(parts)


def _render_plain(nodes: list[_Node]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            parts.append(node)
        elif node.tag == "a":
            label = _render_plain(node.children)
            href = dict(node.attrs)["href"]
            parts.append(label if label == href else f"{label} ({href})")
        elif node.tag == "blockquote":
            parts.append("\n".join("> " + line for line in _render_plain(node.children).split("\n")))
        else:
            parts.append(_render_plain(node.children))
    return "".join(parts)


def brief(text: str, limit: int = 80) -> str:
    """Someone's text echoed back in a reply: on one line, cut at ``limit`` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
