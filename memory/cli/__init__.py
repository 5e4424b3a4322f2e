"""`macupos memory …`: the memory's command-line front door.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.cli.main import memory_group as memory_group
    from memory.cli.types import HOME_KEY as HOME_KEY
    from memory.cli.types import SETTINGS_ERROR_KEY as SETTINGS_ERROR_KEY
    from memory.cli.types import StorageFaultExit as StorageFaultExit
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
