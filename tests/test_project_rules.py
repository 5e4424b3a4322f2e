"""The project's standing rules, checked on every run: import direction, lint, strict typing, and that only
SQLite touches a database file."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# bot → relay → memory: a package may import only the ones to its right. The service (`macupos serve`) builds
# on the memory alone, and the bot never on the service: what both need lives in memory. The `macupos`
# command's composition root (macupos/) may import them all, and nothing imports it.
FORBIDDEN = {
    "memory": {"relay", "bot", "service", "macupos"},
    "relay": {"bot", "service", "macupos"},
    "service": {"relay", "bot", "macupos"},
    "bot": {"service", "macupos"},
    "macupos": set(),
}


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


# The agent SDKs stay behind the relay: the bot speaks only the relay's own types (events, approvals, errors).
AGENT_SDKS = {"claude_agent_sdk", "openai_codex"}


def _loaded_modules(path: Path) -> set[str]:
    """What a file imports anywhere (function-local imports too), plus the literal names it hands to
    ``importlib.import_module`` or ``__import__``."""
    found = _imports(path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
            found.add(node.args[0].value.split(".")[0])
    return found


def test_the_bot_never_imports_the_agent_sdks() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for name in sorted(_loaded_modules(path) & AGENT_SDKS)
    ]
    assert offenders == []


def test_the_agent_sdk_rule_sees_every_way_of_importing(tmp_path: Path) -> None:
    forms = {
        "import claude_agent_sdk.types": {"claude_agent_sdk"},
        "from openai_codex.models import Turn": {"openai_codex"},
        "def f():\n    from claude_agent_sdk import query": {"claude_agent_sdk"},
        "import importlib\nimportlib.import_module('openai_codex.types')": {"openai_codex"},
        "__import__('claude_agent_sdk')": {"claude_agent_sdk"},
        "from relay.approvals import ApprovalDecision": set(),
    }
    for source, expected in forms.items():
        path = tmp_path / "probe.py"
        path.write_text(source + "\n", encoding="utf-8")
        assert _loaded_modules(path) & AGENT_SDKS == expected, source


def _reads_environment(tree: ast.Module) -> bool:
    """Whether code outside an `if __name__ == "__main__":` block touches os.environ / os.getenv, or declares
    a click option or argument that click fills from the environment (``envvar=``, ``auto_envvar_prefix=``)."""

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
            if isinstance(node, ast.Call) and any(k.arg in _ENV_KEYWORDS for k in node.keywords):
                return True
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value in _ENV_KEYWORDS for k in node.keys
            ):
                return True  # context_settings={"auto_envvar_prefix": …}
    return False


# click reads the environment itself for an option with envvar= (show_envvar= only shows it), or for every
# option under a context's auto_envvar_prefix.
_ENV_KEYWORDS = {"envvar", "auto_envvar_prefix"}


def test_the_environment_rule_sees_every_way_of_reading_it() -> None:
    forms = {
        "import os\nhome = os.environ['HOME']": True,
        "import os\nhome = os.getenv('HOME')": True,
        "@click.option('--port', envvar='MACUPOS_PORT')\ndef f(port): ...": True,
        "@click.argument('key', envvar=['A', 'B'])\ndef f(key): ...": True,
        "@click.group(context_settings={'auto_envvar_prefix': 'MACUPOS'})\ndef g(): ...": True,
        "@click.group(context_settings=dict(auto_envvar_prefix='MACUPOS'))\ndef g(): ...": True,
        "@click.option('--port', help='[MACUPOS_PORT]')\ndef f(port): ...": False,
        "def f(env):\n    return env.get('MACUPOS_HOME')": False,
        "import os\nif __name__ == '__main__':\n    main(os.environ)": False,
    }
    for source, expected in forms.items():
        assert _reads_environment(ast.parse(source)) is expected, source


def test_libraries_never_read_the_environment() -> None:
    # Config enters once at the edge: the composition root (macupos/cli.py loads it: memory/config/loader.py), and the
    # `__main__` blocks of stdio servers.
    offenders = [
        str(path.relative_to(ROOT))
        for package in ("memory", "relay", "service")
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


# A user's clone has nothing beside it: no workspace data folder, no design notes kept outside the repository.
# The workspace folder's name is joined here, not written out, so this rule does not name the path it forbids.
_WORKSPACE = "sha" + "red"
OUTSIDE_REFERENCES = {
    "the workspace folder beside the checkout": re.compile(r"\.\./" + _WORKSPACE + r"\b"),
    "the workspace's absolute folder": re.compile(r"/work/" + _WORKSPACE + r"\b"),
    "its data folder (as a path or joined parts)": re.compile(_WORKSPACE + r"""["']?\s*/\s*["']?data\b"""),
    "DESIGN.md": re.compile(r"\bDESIGN\.md\b"),
    "TESTING.md": re.compile(r"\bTESTING\.md\b"),
    "seeds/": re.compile(r"\bseeds/"),
}
# Code, tests, benches, scripts and deployment files; fixture data and golden outputs are quoted material.
SCANNED = ("macupos", "bot", "relay", "memory", "service", "tests", "bench", "scripts", "deploy", ".ci")
DATA_FOLDERS = ("tests/fixtures", "tests/memory/fixtures", "tests/memory/golden")


def _scanned_files() -> list[Path]:
    files = [ROOT / "pyproject.toml"]
    for top in SCANNED:
        files += [p for p in sorted((ROOT / top).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    own = Path(__file__).resolve()
    return [
        p
        for p in files
        if p.resolve() != own and not any(p.relative_to(ROOT).as_posix().startswith(d + "/") for d in DATA_FOLDERS)
    ]


def test_nothing_refers_to_paths_outside_the_repository() -> None:
    offenders: list[str] = []
    for path in _scanned_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary files (models, images) hold no references
        for lineno, line in enumerate(text.splitlines(), 1):
            offenders += [
                f"{path.relative_to(ROOT)}:{lineno}: {name}"
                for name, pattern in OUTSIDE_REFERENCES.items()
                if pattern.search(line)
            ]
    assert offenders == []


# Only SQLite opens a database file. On Linux, closing any descriptor of a file drops every POSIX lock the
# process holds on it, SQLite's too, and the next process to close its last connection then deletes the
# live WAL (memory/storage/share.py). So outside the storage package no Python file call may touch a database
# path (the file, its -wal/-shm/-journal) unless the same function first proves with
# `Database.check_closed` that this process holds no connection to it.
STORAGE_PACKAGE = {"memory/storage/database.py", "memory/storage/share.py"}
_FILE_CALLS = {
    "open", "read_bytes", "read_text", "write_bytes", "write_text", "unlink", "rename", "replace", "touch",
    "copy", "copy2", "copyfile", "copyfileobj", "move", "remove", "truncate", "mmap",
}  # fmt: skip
_DATABASE_NAME = re.compile(r"\bdb_path\b|\bdb_file\b|\.db\b|-wal\b|-shm\b|-journal\b|\bmemory\.db|\bbot\.db")


def _opens_through_sqlite(func: ast.expr) -> bool:
    """`Database.open(…)`, `BotState.open(…)`: a class's opener, which goes through memory.db."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return False
    return func.value.id == "cls" or func.value.id[:1].isupper()


def _tainted(nodes: list[ast.AST], known: set[str]) -> set[str]:
    """The names bound (assigned, looped over, `with … as`) to something that names a database path."""
    names = set(known)
    for _ in range(3):  # a chain of assignments: a few rounds reach the fixed point
        for node in (n for top in nodes for n in ast.walk(top)):
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(node, ast.Assign):
                pairs = [(t, node.value) for t in node.targets]
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                pairs = [(node.target, node.iter)]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                pairs = [(node.optional_vars, node.context_expr)]
            for target, value in pairs:
                if _names_database(value, names):
                    bound = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
                    names |= {n.id for n in bound if isinstance(n, ast.Name)}  # not `self` of `self.x = …`
    return names


def _names_database(expr: ast.expr, tainted: set[str]) -> bool:
    if _DATABASE_NAME.search(ast.unparse(expr)):
        return True
    return any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(expr))


def _database_file_calls(source: str) -> list[str]:
    """The file calls in ``source`` that name a database path, in functions that never call check_closed."""
    tree = ast.parse(source)
    found: list[str] = []
    scopes: list[ast.AST] = [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]
    module_level = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    constants = _tainted(list(module_level), set())  # _COMPANIONS = ("-wal", "-shm") reaches every function
    for scope in [*scopes, ast.Module(body=module_level, type_ignores=[])]:
        tainted = _tainted([scope], constants)
        calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call)]
        guarded = any(isinstance(c.func, ast.Attribute) and c.func.attr == "check_closed" for c in calls)
        if guarded:
            continue
        for call in calls:
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name not in _FILE_CALLS or _opens_through_sqlite(func):
                continue
            named = [*call.args, *(k.value for k in call.keywords)]
            if isinstance(func, ast.Attribute):
                named.append(func.value)  # path.unlink(): the path is the receiver
            if any(_names_database(arg, tainted) for arg in named):
                found.append(f"line {call.lineno}: {ast.unparse(call)}")
    return sorted(set(found))


def test_only_sqlite_touches_a_database_file_outside_the_storage_package() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} {hit}"
        for package in ("macupos", "bot", "relay", "memory", "service")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() not in STORAGE_PACKAGE
        for hit in _database_file_calls(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_database_file_rule_sees_the_ways_of_touching_a_file() -> None:
    source = textwrap.dedent(
        """
        import shutil
        def peek(settings):
            with open(settings.db_path, "rb") as fh:
                return fh.read(16)
        def backup(home):
            shutil.copy(home / "memory.db", home / "backup")
        def tidy(path):
            path.with_name(path.name + "-wal").unlink()
        async def guarded(path):
            Database.check_closed(path, "move it")
            path.rename(path.with_name("memory.db.old"))
        def unrelated(path):
            path.with_suffix(".md").write_text("notes")
        SIDES = ("-wal", "-shm")
        def sides(path):
            for suffix in SIDES:
                side = path.with_name(path.name + suffix)
                side.unlink(missing_ok=True)
        """
    )
    hits = _database_file_calls(source)
    assert [h.split(":")[0] for h in hits] == ["line 19", "line 4", "line 7", "line 9"]
