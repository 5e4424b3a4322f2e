"""The `macupos` command: one sub-command group per package. The only place that reads the environment."""

from __future__ import annotations

import logging
import os

import click

from memory.cli import memory_group
from memory.settings import MemorySettings

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="macupos")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """Macupos: a phone-driven desk for coding agents, with the Eywa memory core.

    Configuration comes from the environment (MACUPOS_HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …) and the
    optional $MACUPOS_HOME/config.toml.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = MemorySettings.from_env(os.environ)


main.add_command(memory_group, name="memory")

if __name__ == "__main__":
    main()
