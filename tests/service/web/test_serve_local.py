"""`macupos serve --local` refuses what it must not do: listen beyond loopback, a Mini App URL that is not
HTTPS, a bad allowlist, or serving a memory that lives in a service; the pages can be turned off."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from macupos.cli import main


def run(home: Path, *args: str, **env: str) -> tuple[int, str]:
    base = {"MACUPOS_HOME": str(home), "MACUPOS_MEMORY_LLM": "0", "MACUPOS_PUBLIC_URL": "", "MACUPOS_MEMORY_URL": ""}
    result = CliRunner().invoke(main, ["serve", *args], env=base | env, catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (("--local", "--host", "0.0.0.0"), {}, "127.0.0.1 only"),
        (("--local", "--public-url", "http://memory.example.org"), {}, "must be an https:// URL"),
        (("--local",), {"MACUPOS_PUBLIC_URL": "ftp://x"}, "must be an https:// URL"),
        (("--local",), {"MACUPOS_ALLOWED_USERS": "42,@ann"}, "not a numeric Telegram user id"),
        (("--local", "--no-web"), {}, "cannot go with --no-web"),
    ],
)
def test_serve_local_refuses_with_a_clear_error(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    code, output = run(tmp_path / "home", *args, **env)
    assert code != 0 and says in output
    assert not (tmp_path / "home" / "memory.db").exists()  # refused before anything was opened


def test_the_help_names_local_and_the_public_url(tmp_path: Path) -> None:
    code, output = run(tmp_path / "home", "--help")
    assert code == 0 and "--local" in output and "MACUPOS_PUBLIC_URL" in output
