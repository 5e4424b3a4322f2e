"""One check of ``macupos doctor``: what it found, and how to fix it when it failed."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Check", "fail"]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warning: bool = False  # passed, but worth the owner's attention (printed with its fix)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, False, detail, fix)
