"""The `macupos` command: one sub-command group per package. The only place that reads the environment."""

from __future__ import annotations

import click

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="macupos")
def main() -> None:
    """Macupos: a phone-driven desk for coding agents, with the Eywa memory core."""


def _register() -> None:
    from memory.cli import memory_group

    main.add_command(memory_group, name="memory")


_register()
