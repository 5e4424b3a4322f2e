"""Reading and checking the systemd units in deploy/ (the bot's and the memory service's)."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed"
)


def read_unit(path: Path) -> configparser.RawConfigParser:
    # strict=False: systemd allows repeated keys (several Environment= lines).
    parser = configparser.RawConfigParser(strict=False, delimiters=("=",), comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser


def unit_home(path: Path) -> str:
    """The MACUPOS_HOME the unit sets."""
    return next(
        line.split("=", 2)[2] for line in path.read_text().splitlines() if line.startswith("Environment=MACUPOS_HOME=")
    )


def assert_verifies_cleanly(path: Path, tmp_path: Path) -> None:
    """`systemd-analyze verify` passes the unit without a word."""
    # verify insists the ExecStart binary exists; swap in one that does, keep everything else.
    text = re.sub(r"^ExecStart=\S+", "ExecStart=/bin/true", path.read_text(), flags=re.MULTILINE)
    copy = tmp_path / path.name
    copy.write_text(text, encoding="utf-8")
    result = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # unknown keys are only warned about
