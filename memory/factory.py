"""Which memory a caller gets: the local database (`Eywa`, `FactsApi`) or the memory service
(`RemoteEywa`, `RemoteFacts`), picked from the settings (``memory_url``) in one place.

Callers hold a :class:`Memory` and a :class:`Facts`: the methods both kinds offer, with the same
arguments and the same dataclasses, so the CLI, the hooks, the MCP server, the relay and the bot never
ask which one they have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from memory.settings import MemorySettings

if TYPE_CHECKING:  # the CLI imports this module on every start: the memory stack only when used
    from memory.errors import StorageError
    from memory.facade import Grounding, SessionView
    from memory.facts.api import LoadReport
    from memory.facts.tcl import ScriptResult
    from memory.handoffs.adopt import ImportReport
    from memory.index.retrieval import ContentHit
    from memory.ingest import IngestReport, ProgressFn
    from memory.redact.redactor import Redactor
    from memory.remote.http import Timeouts
    from memory.storage.ledger import CostEntry, CostTotal, GroupBy
    from memory.storage.rows import HandoffRow

__all__ = ["Facts", "Memory", "open_facts", "open_memory"]


class Memory(Protocol):
    """What :class:`~memory.facade.Eywa` and :class:`~memory.remote.client.RemoteEywa` both offer."""

    @property
    def settings(self) -> MemorySettings: ...

    @property
    def redactor(self) -> Redactor:
        """The owner's redactor (``MACUPOS_SECRETS`` and every known token format)."""
        ...

    @property
    def last_fault(self) -> StorageError | None:
        """The last storage fault the local database met, or None (a service client without one: None)."""
        ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    async def ingest(
        self,
        paths: Sequence[Path] = (),
        *,
        force: bool = False,
        extract: bool = True,
        use_llm: bool | None = None,
        progress: ProgressFn | None = None,
    ) -> IngestReport: ...

    async def get(
        self,
        query: str = "",
        *,
        project: str | None = None,
        days_back: float | None = None,
        max_handoffs: int | None = None,
        as_of: datetime | None = None,
        viewer: Path | None = None,
        branch: str | None = None,
    ) -> Grounding: ...

    async def search(self, query: str, limit: int = 10, *, viewer: Path | None = None) -> list[ContentHit]: ...

    async def hidden_from(self, viewer: Path | None, session_ids: Sequence[str]) -> set[str]: ...

    async def show(self, session_id: str) -> SessionView: ...

    async def extract(
        self, session_id: str | None = None, *, transcript_path: Path | None = None, use_llm: bool | None = None
    ) -> list[HandoffRow]: ...

    async def link(self, session_id: str, *, parent_id: str) -> None: ...

    async def list_handoffs(
        self,
        *,
        limit: int = 20,
        project: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: tuple[float, str] | None = None,
    ) -> list[HandoffRow]: ...

    async def forget(self, session_id: str) -> list[str]: ...

    async def import_dir(self, root: Path, *, batch_files: int = ..., workers: int = 0) -> ImportReport: ...

    async def export_dir(self, root: Path) -> int: ...

    async def stats(self) -> dict[str, Any]: ...

    # The cost ledger stays in the local database (a service client keeps one only when opened with it).

    async def keeps_costs(self) -> bool: ...

    async def record_cost(self, entry: CostEntry) -> int: ...

    async def cost_totals(self, by: GroupBy = "session", *, engines: tuple[str, ...] = ()) -> list[CostTotal]: ...

    async def memory_spent_today(self, timezone: str | None = None) -> float: ...

    async def linked_rollouts(self, session_id: str) -> list[Path]: ...


class Facts(Protocol):
    """What :class:`~memory.facts.api.FactsApi` and :class:`~memory.remote.facts.RemoteFacts` both offer."""

    async def close(self, *, snapshot: bool = True) -> None: ...

    async def run_script(self, text: str, *, as_of: datetime | None = None, provenance: str = "") -> ScriptResult: ...

    async def remember(
        self,
        mid: str,
        subject: str,
        ctype: str,
        fields: Mapping[str, str],
        *,
        provenance: str = "",
        now: datetime | None = None,
    ) -> str: ...

    async def tiered_injection(self, now: datetime | None = None) -> list[str]: ...

    async def world(self) -> dict[str, int]: ...

    async def export_snapshot(self) -> str: ...

    async def load_snapshot(
        self, text: str, *, provenance: str = "snapshot load", now: datetime | None = None
    ) -> LoadReport: ...

    async def rebuild(self) -> int: ...

    async def replay_new(self) -> int: ...


async def open_memory(settings: MemorySettings, *, local_db: bool = False, timeouts: Timeouts | None = None) -> Memory:
    """The memory of ``settings``. ``local_db``: a service client also opens the local database (the relay
    and the bot keep their cost ledger there). ``timeouts``: a service client's (the hooks' are short)."""
    if settings.remote:
        from memory.remote.client import RemoteEywa

        return await RemoteEywa.open(settings, timeouts=timeouts, local_db=local_db)
    from memory.facade import Eywa

    return await Eywa.open(settings)


async def open_facts(settings: MemorySettings, *, timeouts: Timeouts | None = None) -> Facts:
    if settings.remote:
        from memory.remote.facts import RemoteFacts

        return await RemoteFacts.open(settings, timeouts=timeouts)
    from memory.facts.api import FactsApi

    return await FactsApi.from_settings(settings)
