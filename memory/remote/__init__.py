"""The memory service's client behind the same facade: `RemoteEywa`, its HTTP client and the durable
outbox of transcript snapshots; and the capped HTTP protocol the service (and the bot's trigger endpoint)
serve with.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.remote.http import KEY_FIX as KEY_FIX
    from memory.remote.http import RemoteMemoryError as RemoteMemoryError
    from memory.remote.http import ServiceClient as ServiceClient
    from memory.remote.http import ServiceUnreachableError as ServiceUnreachableError
    from memory.remote.http import Timeouts as Timeouts
    from memory.remote.http_limits import LimitedHttpTools as LimitedHttpTools
    from memory.remote.http_limits import limited_protocol as limited_protocol
    from memory.remote.outbox import Outbox as Outbox
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
