"""The one configuration loader of every `macupos` command (the environment beats `.env`, which beats
config.toml: memory/config/loader.py states it), and the parsers of the values more than one part reads.

The names below are this package's surface: other packages import them from here, never from a module
inside (tests/test_package_surfaces.py). They load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.config.loader import Config as Config
    from memory.config.loader import find_dotenv as find_dotenv
    from memory.config.loader import load_config as load_config
    from memory.config.loader import parse_dotenv as parse_dotenv
    from memory.config.loader import public_url as public_url
    from memory.config.loader import read_dotenv as read_dotenv
    from memory.config.loader import telegram_user_ids as telegram_user_ids
else:
    from memory._lazy import surface

    __getattr__, __dir__ = surface(__name__, __file__)
