"""Structured facts (MemEcsy-style): typed memories with derived decay, driven by sandboxed Tcl scripts.

Public entry point: :class:`memory.facts.api.FactsApi`. See docs/facts.md.
"""
