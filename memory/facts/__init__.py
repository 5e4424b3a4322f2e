"""Structured facts (MemEcsy-style): typed memories with derived decay, driven by sandboxed Tcl scripts.

Public entry point: :class:`memory.facts.FactsApi`. See docs/facts.md.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_project_rules.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.facts.api import FactsApi as FactsApi
    from memory.facts.api import LoadReport as LoadReport
    from memory.facts.decay import effective as effective
    from memory.facts.events import load_origin as load_origin
    from memory.facts.events import read_events as read_events
    from memory.facts.gitsync import GitSync as GitSync
    from memory.facts.model import Memory as Memory
    from memory.facts.model import State as State
    from memory.facts.model import component as component
    from memory.facts.model import component_types as component_types
    from memory.facts.tcl import ScriptResult as ScriptResult
    from memory.facts.tclwords import format_list as format_list
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(
        __name__,
        {
            "FactsApi": "memory.facts.api",
            "GitSync": "memory.facts.gitsync",
            "LoadReport": "memory.facts.api",
            "Memory": "memory.facts.model",
            "ScriptResult": "memory.facts.tcl",
            "State": "memory.facts.model",
            "component": "memory.facts.model",
            "component_types": "memory.facts.model",
            "effective": "memory.facts.decay",
            "format_list": "memory.facts.tclwords",
            "load_origin": "memory.facts.events",
            "read_events": "memory.facts.events",
        },
    )

__all__ = [
    "FactsApi",
    "GitSync",
    "LoadReport",
    "Memory",
    "ScriptResult",
    "State",
    "component",
    "component_types",
    "effective",
    "format_list",
    "load_origin",
    "read_events",
]
