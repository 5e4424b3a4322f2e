"""Structured facts (MemEcsy-style): typed memories with derived decay, driven by sandboxed Tcl scripts.

Public entry point: :class:`memory.facts.FactsApi`. See docs/facts.md. The facts graph (``build_graph``, drawn
by ``to_svg`` for the memory pages and ``graph_png`` for the bot's /graph) lives here, below both.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
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
    from memory.facts.graph import FactsGraph as FactsGraph
    from memory.facts.graph import GraphEdge as GraphEdge
    from memory.facts.graph import GraphNode as GraphNode
    from memory.facts.graph import build_graph as build_graph
    from memory.facts.graph import to_svg as to_svg
    from memory.facts.graph_image import graph_png as graph_png
    from memory.facts.model import Memory as Memory
    from memory.facts.model import State as State
    from memory.facts.model import component as component
    from memory.facts.model import component_types as component_types
    from memory.facts.tcl import ScriptResult as ScriptResult
    from memory.facts.tclwords import format_list as format_list
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
