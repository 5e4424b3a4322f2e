"""The project's standing rules, checked on every run: import direction, lint and strict typing."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# bot → relay → memory: a package may import only the ones to its right.
FORBIDDEN = {"memory": {"relay", "bot"}, "relay": {"bot"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_flow_bot_to_relay_to_memory(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imports(path) & FORBIDDEN[package]
    ]
    assert offenders == []


def _reads_environment(tree: ast.Module) -> bool:
    """Whether code outside an `if __name__ == "__main__":` block touches os.environ / os.getenv."""

    def is_main_guard(node: ast.stmt) -> bool:
        return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)

    for top in tree.body:
        if is_main_guard(top):
            continue
        for node in ast.walk(top):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in {"environ", "getenv", "environb"}
            ):
                return True
    return False


def test_libraries_never_read_the_environment() -> None:
    # Config enters once at the edge (bot/cli.py, and the `__main__` blocks of stdio servers).
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("memory", "relay")
        for path in sorted((ROOT / package).rglob("*.py"))
        if _reads_environment(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_ruff_is_clean() -> None:
    lint = _run(str(BIN / "ruff"), "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run(str(BIN / "ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_packages_type_check_strictly() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
