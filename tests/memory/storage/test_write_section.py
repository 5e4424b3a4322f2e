"""The facade's one write section hook: every public method of `Eywa` that changes the database changes it
inside `Eywa.write_section` (where the PostgreSQL store plugs its fleet-wide write section in).

Which methods write is not listed here: each public method is called on a real database and the file's
``PRAGMA data_version``, read from a connection of the test's own, says whether anything was committed, and
when: before, inside or after the section.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

from memory.facade import Eywa, writes
from memory.ingest import IngestReport
from memory.settings import MemorySettings
from memory.storage import CostEntry
from memory.storage.database import Database

PARENT = "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"  # daaain_new: a session with a subagent
LIFECYCLE = {"open", "close"}  # opening and closing the database are not writes of memory


class Watched(Eywa):
    """`Eywa` whose write section notes the database's data_version when the outermost section starts and
    ends (a writing method that calls another re-enters it)."""

    def __init__(self, settings: MemorySettings, db: Database) -> None:
        super().__init__(settings, db)
        self.observer = sqlite3.connect(settings.db_path, isolation_level=None)
        self.sections: list[tuple[int, int]] = []
        self._depth = 0

    def version(self) -> int:
        return int(self.observer.execute("PRAGMA data_version").fetchone()[0])

    @contextlib.asynccontextmanager
    async def _watched(self) -> AsyncIterator[None]:
        self._depth += 1
        start = self.version() if self._depth == 1 else 0
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.sections.append((start, self.version()))

    def write_section(self) -> AbstractAsyncContextManager[None]:
        return self._watched()

    async def close(self) -> None:
        self.observer.close()
        await super().close()


class Leaky(Watched):
    """A writing method added without ``@writes``: what the check must catch."""

    async def note_cost(self) -> None:
        async with self.db.write() as conn:
            await conn.execute("INSERT INTO ledger(ts, engine) VALUES ('2025-01-01T00:00:00.000+00:00', 'claude')")

    @writes
    async def note_cost_in_section(self) -> None:
        await self.note_cost()


async def writes_outside(eywa: Watched, call: Callable[[], Awaitable[object]]) -> str | None:
    """Why ``call`` wrote outside the write section, or None (it wrote inside, or not at all)."""
    eywa.sections = []
    before = eywa.version()
    await call()
    after = eywa.version()
    if before == after:
        return None
    if not eywa.sections:
        return "wrote without entering write_section"
    # Every commit must fall inside a section: between sections (and around them) the version stands still.
    edges = [before, *(v for section in eywa.sections for v in section), after]
    outside = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]
    return None if all(a == b for a, b in outside) else "wrote outside write_section too"


@dataclass
class Scene:
    transcripts: Path
    out: Path
    other: str = ""  # a session of another family, linked to PARENT and then forgotten
    source: str = ""
    seen: list[str] = field(default_factory=list)


async def _drain(files: AsyncIterator[object]) -> None:
    async for _ in files:
        pass


Call = Callable[[Eywa, Scene], Awaitable[object]]

# One call of each public method, in an order that leaves each something to work on.
CALLS: dict[str, Call] = {
    "ingest": lambda e, s: e.ingest([s.transcripts], extract=False),
    "extract_pending": lambda e, s: e.extract_pending(IngestReport(), use_llm=False),
    "get": lambda e, s: e.get("subagent"),
    "search": lambda e, s: e.search("subagent"),
    "hidden_from": lambda e, s: e.hidden_from(None, [PARENT]),
    "show": lambda e, s: e.show(PARENT),
    "list_handoffs": lambda e, s: e.list_handoffs(),
    "stats": lambda e, s: e.stats(),
    "handoff": lambda e, s: e.handoff(PARENT),
    "session_row": lambda e, s: e.session_row(PARENT),
    "is_forgotten": lambda e, s: e.is_forgotten(PARENT),
    "source": lambda e, s: e.source(s.source),
    "sources_holding": lambda e, s: e.sources_holding([PARENT]),
    "list_sessions": lambda e, s: e.list_sessions(limit=50),
    "children": lambda e, s: e.children(PARENT),
    "transcript_turns": lambda e, s: e.transcript_turns(PARENT, lambda index: (0, 4096)),
    "keeps_costs": lambda e, s: e.keeps_costs(),
    "record_cost": lambda e, s: e.record_cost(CostEntry("claude", session_id=PARENT, cost_usd=0.01)),
    "cost_totals": lambda e, s: e.cost_totals("engine"),
    "memory_spent_today": lambda e, s: e.memory_spent_today(),
    "linked_rollouts": lambda e, s: e.linked_rollouts(PARENT),
    "cost_view": lambda e, s: e.cost_view(),
    "export_dir": lambda e, s: e.export_dir(s.out),
    "handoff_files": lambda e, s: _drain(e.handoff_files()),
    "import_dir": lambda e, s: e.import_dir(s.out),
    "extract": lambda e, s: e.extract(PARENT, use_llm=False),
    "link": lambda e, s: e.link(s.other, parent_id=PARENT),
    "forget": lambda e, s: e.forget(s.other),
}


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, fn in inspect.getmembers(cls)
        if not name.startswith("_")
        and name not in LIFECYCLE
        and (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn))
    }


def test_every_public_method_has_a_call_here() -> None:
    # A new method must be added to CALLS, and is then judged by what it does to the database.
    assert public_methods(Eywa) == set(CALLS)


async def test_every_method_that_writes_writes_inside_the_write_section(
    settings: MemorySettings, transcripts: Path, tmp_path: Path
) -> None:
    scene = Scene(transcripts, tmp_path / "export")
    problems: dict[str, str] = {}
    wrote: set[str] = set()
    async with await Watched.open(settings) as eywa:
        for name, call in CALLS.items():
            version = eywa.version()
            problem = await writes_outside(eywa, functools.partial(call, eywa, scene))
            if problem is not None:
                problems[name] = problem
            if eywa.version() != version:
                wrote.add(name)
            if name == "ingest":
                families = await eywa.list_sessions(limit=50)
                scene.other = next(f.session_id for f in families if f.session_id != PARENT)
                row = await eywa.session_row(PARENT)
                assert row is not None
                scene.source = row.source_path
    assert problems == {}, problems
    # The watch sees writes at all: these certainly change the database.
    assert {"ingest", "extract_pending", "record_cost", "link", "forget"} <= wrote


async def test_a_writing_method_outside_the_section_is_caught(settings: MemorySettings) -> None:
    async with await Leaky.open(settings) as eywa:
        assert await writes_outside(eywa, eywa.note_cost) == "wrote without entering write_section"
        assert await writes_outside(eywa, eywa.note_cost_in_section) is None
        assert await writes_outside(eywa, eywa.keeps_costs) is None  # a read: nothing to judge
