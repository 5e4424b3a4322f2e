"""The TypeScript client (sdk/typescript) against a real server: its declarations type-check with tsc, node's
own test runner runs its tests against a `macupos serve` app on 127.0.0.1 (and a second one whose rate
limit is tight, for 429 and Retry-After), and its README's first example runs as written.

node comes from Debian's nodejs and tsc from sdk/typescript/node_modules; `scripts/setup --test` installs
both."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.settings import Limits
from tests.cli_env import REPO
from tests.service.conftest import Server, running_service, transcript_bytes

SDK = REPO / "sdk" / "typescript"
TSC = SDK / "node_modules" / ".bin" / "tsc"
NODE_TIMEOUT_S = 300  # a bound on each node run; they take seconds


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    output: str


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: run scripts/setup --test (it installs Debian's nodejs)")
    return node


async def _run(*args: str, cwd: Path, env: dict[str, str]) -> Ran:
    """A process in this event loop, so that the servers the test started keep answering meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        async with asyncio.timeout(NODE_TIMEOUT_S):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        return Ran(-1, out.decode(errors="replace") + f"\n[killed after {NODE_TIMEOUT_S} s]")
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(errors="replace"))


def _node_env(**extra: str) -> dict[str, str]:
    """This environment without the person's own MACUPOS_ settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MACUPOS_")}
    env["NO_COLOR"] = "1"
    return env | extra


@asynccontextmanager
async def _servers(tmp_path: Path) -> AsyncIterator[tuple[Server, Server]]:
    """The service (write, read and admin keys of tenant "ts"), and one that lets a key one request per 100 s."""
    async with AsyncExitStack() as stack:
        main = await stack.enter_async_context(running_service(tmp_path / "home"))
        tight = Limits(rate_per_s=0.01, rate_burst=1)
        limited = await stack.enter_async_context(running_service(tmp_path / "limited", limits=tight))
        await main.add_key("ts")
        await main.add_key("ts", "read")
        await main.add_key("ts", "admin")
        await limited.add_key("ts")
        yield main, limited


def test_the_declarations_type_check() -> None:
    """index.d.ts is valid TypeScript, and test/types.check.ts (typical use, and misuse that must fail) agrees."""
    if not TSC.exists():
        pytest.fail(f"tsc is missing at {TSC}: run scripts/setup --test")
    tsc = [_node(), str(TSC), "-p", "tsconfig.json"]
    ran = subprocess.run(tsc, cwd=SDK, env=_node_env(), capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
    assert ran.returncode == 0, ran.stdout + ran.stderr


async def test_the_node_tests_pass_against_a_real_server(tmp_path: Path) -> None:
    node = _node()
    if not (SDK / "node_modules" / "typescript").is_dir():
        pytest.fail(f"typescript is missing in {SDK / 'node_modules'}: run scripts/setup --test")
    async with _servers(tmp_path) as (main, limited):
        env = _node_env(
            MACUPOS_MEMORY_URL=main.url,
            MACUPOS_API_KEY=main.keys["ts"],
            MACUPOS_READ_KEY=main.keys["ts:read"],
            MACUPOS_ADMIN_KEY=main.keys["ts:admin"],
            MACUPOS_LIMITED_URL=limited.url,
            MACUPOS_LIMITED_KEY=limited.keys["ts"],
        )
        files = sorted(str(p.relative_to(SDK)) for p in (SDK / "test").glob("*.test.js"))
        ran = await _run(node, "--test", "--test-reporter=spec", *files, cwd=SDK, env=env)
    assert ran.code == 0, ran.output
    assert re.search(r"^ℹ fail 0$", ran.output, re.M), ran.output
    assert re.search(r"^ℹ skipped 0$", ran.output, re.M), ran.output  # every server and key was given
    assert not re.search(r"^ℹ pass 0$", ran.output, re.M), ran.output


def _first_example(readme: Path) -> str:
    found = re.search(r"```(?:js|javascript|ts|typescript)\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    assert found, f"{readme} has no code block"
    return found.group(1)


async def test_the_readme_example_uploads_and_gets(tmp_path: Path) -> None:
    """The README's first code block, run as written with node, with the package as an installed one would
    be (node_modules/@macupos/client) and a Claude Code session file beside it."""
    node = _node()
    work = tmp_path / "example"
    (work / "node_modules" / "@macupos").mkdir(parents=True)
    (work / "node_modules" / "@macupos" / "client").symlink_to(SDK, target_is_directory=True)
    (work / "example.mjs").write_text(_first_example(SDK / "README.md"), encoding="utf-8")
    (work / "session.jsonl").write_bytes(transcript_bytes("ex-1", "why did the upload retry", "ECONNRESET"))
    async with running_service(tmp_path / "home") as srv:
        key = await srv.add_key("readme")
        ran = await _run(node, "example.mjs", cwd=work, env=_node_env(MACUPOS_MEMORY_URL=srv.url, MACUPOS_API_KEY=key))
    assert ran.code == 0, ran.output
    assert "remembered [ 'ex-1' ]" in ran.output, ran.output
    assert "2026-03-02" in ran.output and "nothing yet" not in ran.output, ran.output
