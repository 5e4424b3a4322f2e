"""Memories, their typed components, and the registry of component types.

A component type is a name plus ordered fields; adding one is one ``ComponentType(...)`` and a
``register(...)`` call. Values are validated here so the engine, replay and snapshot load agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from memory.errors import MemoryStoreError

__all__ = [
    "FACT",
    "RELATIONSHIP",
    "USER_PREFERENCE",
    "ComponentType",
    "FactsError",
    "Field",
    "Memory",
    "State",
    "check_name",
    "component",
    "component_types",
    "format_number",
    "register",
]

MAX_NAME = 200
MAX_VALUE = 4000
_NAME_RE = re.compile(r"^[^\s\x00-\x1f\x7f]+$")
RESERVED = frozenset({"all"})


class FactsError(MemoryStoreError):
    """A refused operation (unknown id, duplicate id, bad field...); scripts see it as a Tcl error.

    Under the memory core's one root, so a caller that must not fail on memory catches MemoryStoreError alone."""


class State(StrEnum):
    ACTIVE = "Active"
    DORMANT = "Dormant"
    ARCHIVED = "Archived"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: Literal["text", "number"] = "text"
    required: bool = False
    default: str | float = ""


@dataclass(frozen=True, slots=True)
class ComponentType:
    name: str
    fields: tuple[Field, ...]
    # Which injection tier it feeds: identity lines, the decay-ranked top 8, or neither.
    tier: Literal["identity", "recent", "none"] = "recent"
    # A field naming another entity (a graph edge), e.g. Relationship.target.
    target_field: str = ""

    def normalize(self, raw: dict[str, str]) -> dict[str, str | float]:
        """Validated fields in declaration order, defaults filled in."""
        known = {f.name: f for f in self.fields}
        for name in raw:
            if name not in known:
                allowed = ", ".join(known)
                raise FactsError(f"{self.name} has no field {name!r} (fields: {allowed})")
        out: dict[str, str | float] = {}
        for f in self.fields:
            if f.name not in raw:
                if f.required:
                    raise FactsError(f"{self.name} needs the field {f.name!r}")
                out[f.name] = f.default
                continue
            value = raw[f.name]
            if len(value) > MAX_VALUE:
                raise FactsError(f"{self.name}.{f.name} is longer than {MAX_VALUE} characters")
            if f.kind == "number":
                try:
                    number = float(value)
                except ValueError:
                    raise FactsError(f"{self.name}.{f.name} must be a number, got {value!r}") from None
                if not math.isfinite(number) or not 0.0 <= number <= 1.0:
                    raise FactsError(f"{self.name}.{f.name} must be between 0 and 1, got {value!r}")
                out[f.name] = number
            else:
                out[f.name] = value
        return out


_REGISTRY: dict[str, ComponentType] = {}


def register(ctype: ComponentType) -> ComponentType:
    if ctype.name in _REGISTRY:
        raise ValueError(f"component type {ctype.name} is already registered")
    _REGISTRY[ctype.name] = ctype
    return ctype


def component(name: str) -> ComponentType:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise FactsError(f"unknown component type {name!r} (known: {known})") from None


def component_types() -> tuple[ComponentType, ...]:
    return tuple(_REGISTRY.values())


FACT = register(
    ComponentType(
        "Fact",
        (Field("predicate", required=True), Field("object", required=True), Field("confidence", "number", default=1.0)),
    )
)
USER_PREFERENCE = register(
    ComponentType(
        "UserPreference",
        (Field("code_style"), Field("active_project"), Field("avoid_patterns")),
        tier="identity",
    )
)
RELATIONSHIP = register(
    ComponentType(
        "Relationship",
        (Field("target", required=True), Field("kind", required=True), Field("strength", "number", default=1.0)),
        target_field="target",
    )
)


def check_name(what: str, value: str) -> str:
    if not value or len(value) > MAX_NAME or not _NAME_RE.match(value):
        raise FactsError(f"{what} must be 1-{MAX_NAME} characters without spaces or control characters: {value!r}")
    if value in RESERVED:
        raise FactsError(f"{value!r} is reserved and cannot be used as {what}")
    return value


def format_number(value: float) -> str:
    """Stable, exact text for numbers: the shortest that reads back as the same float (0.9, 0.123456789),
    a whole number without ".0". Exact, so an exported snapshot loads back unchanged."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(slots=True)
class Memory:
    id: str
    subject: str
    ctype: str
    fields: dict[str, str | float]
    created_ms: int
    ts_ms: int
    last_access_ms: int
    access_count: int = 0
    state: State = State.ACTIVE
    sweep_marked_ms: int | None = None
    provenance: str = ""
    via_link: bool = False

    @property
    def target(self) -> str:
        tf = component(self.ctype).target_field
        return str(self.fields.get(tf, "")) if tf else ""

    def field_text(self, name: str) -> str:
        value = self.fields.get(name, "")
        return format_number(value) if isinstance(value, float) else value
