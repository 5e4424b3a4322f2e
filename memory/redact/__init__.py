"""What memory must never keep: secrets replaced by markers before text reaches memory, disk or logs, and
private projects memory leaves alone.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.redact.logs import RedactingFilter as RedactingFilter
    from memory.redact.logs import install as install
    from memory.redact.privacy import Privacy as Privacy
    from memory.redact.privacy import load_privacy as load_privacy
    from memory.redact.privacy import write_private_file as write_private_file
    from memory.redact.redactor import Redactor as Redactor
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
