"""The script commands (``remember``, ``recall``, ``search``…): argument parsing and text output.

Each command gets its words as strings and returns text; a refusal raises ``FactsError``, which the
script sees as a Tcl error it can ``catch``. Memories come back as one Tcl dict per line, wrapped in
braces, so ``foreach m [recall user] {dict get $m object}`` works and a human can still read it.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable, Sequence

from memory.facts import decay
from memory.facts.engine import FactsEngine
from memory.facts.model import FactsError, Memory
from memory.facts.snapshot import iso_ms
from memory.facts.tclwords import format_list

__all__ = ["COMMANDS", "Session", "recall_targets"]

MAX_LIMIT = 10_000
MAX_EDGES = 500


def _int(value: str, what: str, low: int = 0) -> int:
    try:
        number = int(value)
    except ValueError:
        raise FactsError(f"{what} must be an integer, got {value!r}") from None
    if number < low:
        raise FactsError(f"{what} must be at least {low}")
    return number


def _float(value: str, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise FactsError(f"{what} must be a number, got {value!r}") from None


def _split_limit(args: list[str], default: int) -> tuple[list[str], int]:
    if "-limit" in args:
        i = args.index("-limit")
        if i + 1 >= len(args):
            raise FactsError("-limit needs a value")
        return args[:i] + args[i + 2 :], min(MAX_LIMIT, _int(args[i + 1], "-limit", 1))
    return args, default


class Session:
    """One script's view of the engine: a fixed clock, the provenance to stamp, and its response."""

    def __init__(self, engine: FactsEngine, now_ms: int, provenance: str) -> None:
        self.engine = engine
        self.now_ms = now_ms
        self.provenance = provenance
        self.response: str | None = None

    def call(self, name: str, args: list[str]) -> tuple[bool, str]:
        fn = COMMANDS.get(name)
        if fn is None:
            return False, f"unknown command {name!r}"
        try:
            return True, fn(self, args)
        except FactsError as exc:
            return False, str(exc)
        except sqlite3.Error as exc:
            return False, f"storage error: {exc}"

    def describe(self, m: Memory, extra: Sequence[str] = ()) -> str:
        words = ["id", m.id, "subject", m.subject, "type", m.ctype]
        for name in m.fields:
            words += [name, m.field_text(name)]
        words += ["decay", f"{self.engine.decay_of(m, self.now_ms):.3f}", "state", m.state.value]
        words += ["created", iso_ms(m.created_ms)[:10], *extra]
        return "{" + format_list(words) + "}"


def _remember(s: Session, args: list[str]) -> str:
    if len(args) < 3 or len(args) % 2 == 0:
        raise FactsError("usage: remember id subject Type field value ?field value ...?")
    mid, subject, ctype, *pairs = args
    fields = dict(zip(pairs[::2], pairs[1::2], strict=True))
    if len(fields) != len(pairs) // 2:
        raise FactsError("a field is given twice")
    return s.engine.remember(mid, subject, ctype, fields, now_ms=s.now_ms, provenance=s.provenance)


def recall_targets(e: FactsEngine, target: str, now_ms: int, limit: int) -> list[Memory]:
    """What ``recall target`` returns: one memory by id, a subject's memories, or ``all`` (no Archived)."""
    if target == "all":
        return e.ranked("state != 'Archived'", (), now_ms, limit)
    if (m := e.get(target)) is not None:
        return [m]
    return e.ranked("subject = ? AND state != 'Archived'", (target,), now_ms, limit)


def _recall(s: Session, args: list[str]) -> str:
    rest, limit = _split_limit(args, 100)
    if len(rest) != 1:
        raise FactsError("usage: recall subject|all|id ?-limit n?")
    found = recall_targets(s.engine, rest[0], s.now_ms, limit)
    s.engine.touch([m.id for m in found], now_ms=s.now_ms)
    return "\n".join(s.describe(m) for m in found)


def _forget(s: Session, args: list[str]) -> str:
    if len(args) != 1:
        raise FactsError("usage: forget id")
    return s.engine.forget(args[0], now_ms=s.now_ms)


def _touch(s: Session, args: list[str]) -> str:
    if not args:
        raise FactsError("usage: touch id ?id ...?")
    for mid in args:
        if s.engine.get(mid) is None:
            raise FactsError(f"no memory with id {mid!r}")
    s.engine.touch(args, now_ms=s.now_ms)
    return str(len(args))


def _link(s: Session, args: list[str]) -> str:
    if len(args) not in (3, 4):
        raise FactsError("usage: link from to kind ?strength?")
    strength = _float(args[3], "strength") if len(args) == 4 else 1.0
    return s.engine.link(args[0], args[1], args[2], strength, now_ms=s.now_ms, provenance=s.provenance)


def _search(s: Session, args: list[str]) -> str:
    terms, limit = _split_limit(args, 10)
    if not terms:
        raise FactsError("usage: search term ?term ...? ?-limit n?")
    hits = s.engine.search(terms, s.now_ms, limit)
    return "\n".join(s.describe(m, ("score", f"{score:.3f}")) for m, score in hits)


def _world(s: Session, args: list[str]) -> str:
    if args:
        raise FactsError("usage: world")
    return format_list(w for k, v in s.engine.counts().items() for w in (k, str(v)))


def _edges(s: Session, args: list[str]) -> list[tuple[str, str, str, Memory]]:
    """Graph edges (from, label, to, memory) reachable from ``root`` within ``depth`` steps, or all."""
    if len(args) > 2:
        raise FactsError("usage: graph|viz ?root? ?depth?")
    depth = _int(args[1], "depth", 1) if len(args) == 2 else 2
    e = s.engine

    def out_of(m: Memory) -> tuple[str, str, str, Memory]:
        if m.target:
            return (m.subject, m.field_text("kind") or m.ctype, m.target, m)
        return (m.subject, m.field_text("predicate") or m.ctype, m.id, m)

    if not args:
        return [out_of(m) for m in e.ranked("state != 'Archived'", (), s.now_ms, MAX_EDGES)]
    edges: list[tuple[str, str, str, Memory]] = []
    seen = {args[0]}
    queue = deque([(args[0], 0)])
    while queue and len(edges) < MAX_EDGES:
        node, level = queue.popleft()
        if level >= depth:
            continue
        for m in e.ranked("subject = ? AND state != 'Archived'", (node,), s.now_ms, MAX_EDGES):
            edge = out_of(m)
            edges.append(edge)
            if edge[2] not in seen:
                seen.add(edge[2])
                queue.append((edge[2], level + 1))
    return edges[:MAX_EDGES]


def _graph(s: Session, args: list[str]) -> str:
    return "\n".join("{" + format_list(edge[:3]) + "}" for edge in _edges(s, args))


def _mermaid(text: str) -> str:
    return '"' + text.replace('"', "#quot;").replace("\n", " ")[:80] + '"'


def _viz(s: Session, args: list[str]) -> str:
    nodes: dict[str, str] = {}
    lines = ["flowchart LR"]

    def node(name: str, label: str) -> str:
        if name not in nodes:
            nodes[name] = f"n{len(nodes)}"
            lines.append(f"  {nodes[name]}[{_mermaid(label)}]")
        return nodes[name]

    for source, label, target, m in _edges(s, args):
        a = node(source, source)
        if m.target:
            b = node(target, target)
        elif m.ctype == "Fact":
            b = node(target, m.field_text("object"))
        else:
            b = node(target, ", ".join(f"{k}: {m.field_text(k)}" for k in m.fields if m.field_text(k)) or m.id)
        lines.append(f"  {a} -->|{_mermaid(label)}| {b}")
    return "\n".join(lines)


def _consolidate(s: Session, args: list[str]) -> str:
    if args:
        raise FactsError("usage: consolidate")
    return format_list(w for k, v in s.engine.consolidate(now_ms=s.now_ms).items() for w in (k, str(v)))


def _sweep(s: Session, args: list[str]) -> str:
    dry_run, max_delete, grace_days = False, 100, 7.0
    i = 0
    while i < len(args):
        opt = args[i]
        if opt == "-dry-run":
            dry_run = True
            i += 1
        elif opt in ("-max", "-grace") and i + 1 < len(args):
            if opt == "-max":
                max_delete = _int(args[i + 1], "-max")
            else:
                grace_days = _float(args[i + 1], "-grace")
                # Days a marked memory waits before it is deleted: a finite number ≥ 0 (NaN fails this too).
                if not 0.0 <= grace_days <= 1e6:
                    raise FactsError(f"-grace must be a number of days from 0 to 1000000, got {args[i + 1]!r}")
            i += 2
        else:
            raise FactsError("usage: sweep ?-dry-run? ?-max n? ?-grace days?")
    grace_ms = int(grace_days * decay.DAY_MS)
    report = s.engine.sweep(now_ms=s.now_ms, grace_ms=grace_ms, max_delete=max_delete, dry_run=dry_run)
    return format_list(w for k, v in report.items() for w in (k, str(v)))


def _revive(s: Session, args: list[str]) -> str:
    if len(args) != 1:
        raise FactsError("usage: revive id")
    return s.engine.revive(args[0], now_ms=s.now_ms)


def _respond(s: Session, args: list[str]) -> str:
    s.response = " ".join(args)
    return s.response


COMMANDS: dict[str, Callable[[Session, list[str]], str]] = {
    "remember": _remember,
    "recall": _recall,
    "forget": _forget,
    "touch": _touch,
    "link": _link,
    "search": _search,
    "world": _world,
    "graph": _graph,
    "viz": _viz,
    "consolidate": _consolidate,
    "sweep": _sweep,
    "revive": _revive,
    "respond": _respond,
}
