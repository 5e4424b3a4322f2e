"""Git sync of the facts folder, against real git: two clones of a local bare remote, no network."""

from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from memory.facts.gitsync import (
    GitSync,
    SyncConflictError,
    SyncOutcome,
    SyncRefusedError,
    SyncState,
    SyncTimeoutError,
)

GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None, reason="needs the git CLI")


@pytest.fixture(autouse=True)
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config: the fixed identity is exercised and nothing leaks in."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "empty-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    argv = [str(GIT), "-C", str(cwd), "-c", "user.name=test", "-c", "user.email=test@localhost", *args]
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def bare_remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run([str(GIT), "init", "--quiet", "--bare", str(remote)], check=True)
    return remote


def facts_clone(remote: Path, dest: Path) -> str:
    """Clone the remote and lay it out as a facts folder; returns the clone's origin id."""
    subprocess.run([str(GIT), "clone", "--quiet", str(remote), str(dest)], check=True, capture_output=True)
    (dest / "events").mkdir(exist_ok=True)
    origin = uuid.uuid4().hex
    (dest / ".origin").write_text(origin)
    return origin


class TwoClones(NamedTuple):
    remote: Path
    a: Path
    b: Path
    origin_a: str
    origin_b: str


@pytest.fixture
def two_clones(tmp_path: Path) -> TwoClones:
    """Two facts folders, a and b, cloned from one bare remote; with their origin ids."""
    remote = bare_remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    return TwoClones(remote, a, b, facts_clone(remote, a), facts_clone(remote, b))


def append_events(folder: Path, origin: str, count: int) -> list[str]:
    ids = [uuid.uuid4().hex for _ in range(count)]
    with (folder / "events" / f"{origin}.jsonl").open("a") as log:
        for n, event_id in enumerate(ids):
            event = {"id": event_id, "at_ms": 1_700_000_000_000 + n, "origin": origin, "op": "remember", "args": {}}
            log.write(json.dumps(event) + "\n")
    return ids


def event_ids(folder: Path) -> list[str]:
    """Every event id in the folder's logs; fails on any line that is not a whole event."""
    ids = []
    for log in sorted((folder / "events").glob("*.jsonl")):
        data = log.read_text()
        assert data == "" or data.endswith("\n"), f"{log} ends mid-line"
        ids += [json.loads(line)["id"] for line in data.splitlines()]
    return ids


def write_snapshot(folder: Path) -> None:
    """What the engine does: a snapshot that is a function of every event it knows, in a stable order."""
    (folder / "snapshot.tcl").write_text("".join(f"remember {i} user Fact\n" for i in sorted(event_ids(folder))))


def conflict_markers(folder: Path) -> int:
    return sum(
        path.read_bytes().count(b"<<<<<<<")
        for path in folder.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(folder).parts
    )


def status_lines(folder: Path) -> list[str]:
    return git(folder, "status", "--porcelain", "--untracked-files=all").splitlines()


def assert_dead(pid: int) -> None:
    """Bounded wait (not a sleep) for a process to have exited; a zombie counts as dead."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        readable, _, _ = select.select([fd], [], [], 5.0)
    finally:
        os.close(fd)
    assert readable, f"process {pid} is still running"


def engine_double(folder: Path, calls: list[int]) -> GitSync:
    """A GitSync whose on_pulled does what the engine's replay_new does to the snapshot."""

    async def on_pulled() -> None:
        calls.append(1)
        write_snapshot(folder)

    return GitSync(folder, on_pulled=on_pulled, timeout_s=30)


async def test_two_clones_with_a_thousand_events_each_converge_without_conflicts(two_clones: TwoClones) -> None:
    remote, a, b, origin_a, origin_b = two_clones
    pulled_a: list[int] = []
    pulled_b: list[int] = []
    sync_a, sync_b = engine_double(a, pulled_a), engine_double(b, pulled_b)
    expected: set[str] = set()
    for round_no in range(5):
        expected |= set(append_events(a, origin_a, 200))
        expected |= set(append_events(b, origin_b, 200))
        write_snapshot(a)  # both sides rewrite the snapshot every round: merges meet a snapshot conflict
        write_snapshot(b)
        first, second = (sync_a, sync_b) if round_no % 2 == 0 else (sync_b, sync_a)
        assert (await first.sync_once()).pushed
        assert (await second.sync_once()).pushed

    for sync in (sync_a, sync_b, sync_a):
        await sync.sync_once()

    assert len(expected) == 2000
    for folder in (a, b):
        ids = event_ids(folder)
        assert len(ids) == 2000 and set(ids) == expected
        assert conflict_markers(folder) == 0
        assert status_lines(folder) == []
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD") == git(remote, "rev-parse", "HEAD")
    assert (a / "snapshot.tcl").read_text() == (b / "snapshot.tcl").read_text()
    assert pulled_a and pulled_b
    assert git(a, "log", "-1", "--format=%an <%ae>").strip() == "macupos <macupos@localhost>"


async def test_a_half_written_last_line_is_cut_before_it_is_committed(two_clones: TwoClones) -> None:
    _, a, b, origin_a, _ = two_clones
    ids = append_events(a, origin_a, 5)
    log = a / "events" / f"{origin_a}.jsonl"
    whole = log.read_bytes()
    with log.open("ab") as f:
        f.write(b'{"id": "torn", "at_ms": 17')  # a crash mid-append

    outcome = await GitSync(a).sync_once()

    assert outcome.repaired == (f"events/{origin_a}.jsonl",)
    assert log.read_bytes() == whole
    assert status_lines(a) == []
    await GitSync(b).sync_once()
    assert event_ids(b) == ids


async def test_a_whole_last_event_that_only_lost_its_newline_is_kept(tmp_path: Path) -> None:
    a = tmp_path / "a"
    origin = facts_clone(bare_remote(tmp_path), a)
    ids = append_events(a, origin, 2)
    log = a / "events" / f"{origin}.jsonl"
    log.write_bytes(log.read_bytes().removesuffix(b"\n"))

    outcome = await GitSync(a).sync_once()

    assert outcome.repaired == (f"events/{origin}.jsonl",)
    assert event_ids(a) == ids
    assert status_lines(a) == []


async def test_damaged_lines_that_arrive_with_a_pull_are_repaired(two_clones: TwoClones) -> None:
    remote, a, b, _, _ = two_clones
    good = json.dumps({"id": "e1", "at_ms": 1, "origin": "x", "op": "remember", "args": {}})
    (b / "events" / "x.jsonl").write_text(f'{good}\n{{"id": "half\n{good.replace("e1", "e2")}\n{{"id": "torn')
    git(b, "add", "events/x.jsonl")  # pushed by a plain git, not by the sync
    git(b, "commit", "--quiet", "-m", "damaged")
    git(b, "push", "--quiet", "origin", "HEAD")

    outcome = await GitSync(a).sync_once()

    assert outcome.pulled and outcome.repaired == ("events/x.jsonl",)
    assert event_ids(a) == ["e1", "e2"]
    assert status_lines(a) == []
    assert git(remote, "show", "HEAD:events/x.jsonl").splitlines() == [good, good.replace("e1", "e2")]


async def test_only_events_snapshot_and_config_are_tracked(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    a = tmp_path / "a"
    origin = facts_clone(remote, a)
    append_events(a, origin, 3)
    write_snapshot(a)
    (a / "backups").mkdir()
    for scratch in (".lock", "facts.lock", "snapshot.tcl.bak", "snapshot.tcl.bak-2", "events/x.jsonl.tmp", "backups/1"):
        (a / scratch).write_text("local only")

    await GitSync(a).sync_once()

    tracked = sorted(git(a, "ls-files").splitlines())
    assert tracked == [".gitattributes", ".gitignore", f"events/{origin}.jsonl", "snapshot.tcl"]
    assert status_lines(a) == []
    assert "events/*.jsonl merge=union" in (a / ".gitattributes").read_text()


async def test_push_once_merges_first_when_the_remote_moved_on(two_clones: TwoClones) -> None:
    remote, a, b, origin_a, origin_b = two_clones
    append_events(a, origin_a, 3)
    await GitSync(a).push_once()
    append_events(b, origin_b, 4)

    outcome = await GitSync(b).push_once()

    assert outcome.committed and outcome.pulled and outcome.pushed
    assert git(b, "rev-parse", "HEAD") == git(remote, "rev-parse", "HEAD")
    assert len(event_ids(b)) == 7


async def test_pull_once_merges_without_pushing(two_clones: TwoClones) -> None:
    remote, a, b, origin_a, origin_b = two_clones
    append_events(a, origin_a, 2)
    await GitSync(a).sync_once()
    append_events(b, origin_b, 1)
    calls: list[int] = []

    outcome = await engine_double(b, calls).pull_once()

    assert outcome.pulled and not outcome.pushed and calls == [1]
    assert len(event_ids(b)) == 3
    assert git(b, "rev-parse", "HEAD") != git(remote, "rev-parse", "HEAD")


async def test_a_hand_edit_conflict_aborts_the_merge_without_markers(two_clones: TwoClones) -> None:
    _, a, b, _, _ = two_clones
    (a / "README.md").write_text("facts of the laptop\n")
    (b / "README.md").write_text("facts of the server\n")
    await GitSync(a).sync_once()

    with pytest.raises(SyncConflictError) as caught:
        await GitSync(b).sync_once()

    assert caught.value.paths == ("README.md",)
    assert (b / "README.md").read_text() == "facts of the server\n"
    assert conflict_markers(b) == 0 and status_lines(b) == []


async def test_a_code_repository_is_refused_and_left_untouched(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    a = tmp_path / "a"
    facts_clone(remote, a)
    (a / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    sync = GitSync(a)
    before = status_lines(a)

    status = sync.check()
    assert status.state is SyncState.REFUSED and "pyproject.toml" in status.reason
    with pytest.raises(SyncRefusedError, match=r"pyproject\.toml"):
        await sync.sync_once()
    assert not (a / ".gitignore").exists()
    assert status_lines(a) == before
    assert git(a, "rev-list", "--all") == ""


async def test_a_facts_folder_inside_a_bigger_repository_is_refused(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    facts_clone(bare_remote(tmp_path), outer)
    facts = outer / "facts"
    (facts / "events").mkdir(parents=True)

    status = GitSync(facts).check()

    assert status.state is SyncState.REFUSED and "above the facts folder" in status.reason
    with pytest.raises(SyncRefusedError):
        await GitSync(facts).push_once()


async def test_a_remote_that_is_not_a_facts_repository_is_refused(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path)
    a, code = tmp_path / "a", tmp_path / "code"
    facts_clone(remote, a)
    subprocess.run([str(GIT), "clone", "--quiet", str(remote), str(code)], check=True, capture_output=True)
    (code / "setup.py").write_text("print('code')\n")
    git(code, "add", "setup.py")
    git(code, "commit", "--quiet", "-m", "code")
    git(code, "push", "--quiet", "origin", "HEAD")

    with pytest.raises(SyncRefusedError, match=r"setup\.py"):
        await GitSync(a).sync_once()
    assert not (a / "setup.py").exists()


@pytest.mark.parametrize(
    ("make", "state"),
    [
        (lambda p: None, SyncState.MISSING),
        (lambda p: (p / "events").mkdir(parents=True), SyncState.NOT_A_REPO),
        (lambda p: subprocess.run([str(GIT), "init", "--quiet", str(p)], check=True), SyncState.NO_REMOTE),
    ],
)
async def test_without_a_repository_or_remote_every_step_is_a_no_op(tmp_path: Path, make, state) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "facts"
    make(folder)
    sync = GitSync(folder)

    status = sync.check()

    assert status.state is state and not status.eligible and status.reason
    for step in (sync.sync_once, sync.push_once, sync.pull_once):
        assert await step() == SyncOutcome(status)
    assert not (folder / ".gitignore").exists()
    assert not (folder / ".git").exists() or state is SyncState.NO_REMOTE


def hanging_git(tmp_path: Path, hang_on: str) -> Path:
    """A git that passes through to the real one, except that it hangs (with a child of its own) on one command."""
    script = tmp_path / "hanging-git"
    script.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        f'  if [ "$arg" = {hang_on} ] || [ {hang_on} = any ]; then\n'
        f"    sleep 300 & echo $! > {tmp_path}/grandchild.pid\n"
        f"    echo $$ > {tmp_path}/child.pid\n"
        "    exec sleep 300\n"
        "  fi\n"
        "done\n"
        f'exec {GIT} "$@"\n'
    )
    script.chmod(0o755)
    return script


async def test_a_hanging_fetch_times_out_and_is_killed_with_its_children(tmp_path: Path) -> None:
    a = tmp_path / "a"
    facts_clone(bare_remote(tmp_path), a)
    sync = GitSync(a, git=str(hanging_git(tmp_path, "fetch")), timeout_s=1.0)

    with pytest.raises(SyncTimeoutError) as caught:
        await asyncio.wait_for(sync.pull_once(), timeout=15)

    assert "fetch" in caught.value.command and caught.value.timeout_s == 1.0
    assert_dead(int((tmp_path / "child.pid").read_text()))
    assert_dead(int((tmp_path / "grandchild.pid").read_text()))


def test_a_hanging_git_in_check_times_out_and_is_killed(tmp_path: Path) -> None:
    a = tmp_path / "a"
    facts_clone(bare_remote(tmp_path), a)

    with pytest.raises(SyncTimeoutError, match="killed"):
        GitSync(a, git=str(hanging_git(tmp_path, "any")), timeout_s=0.5).check()

    assert_dead(int((tmp_path / "child.pid").read_text()))
    assert_dead(int((tmp_path / "grandchild.pid").read_text()))


async def test_run_pulls_at_start_and_again_each_interval_until_stopped(two_clones: TwoClones) -> None:
    _, a, b, _, origin_b = two_clones
    append_events(b, origin_b, 2)
    await GitSync(b).sync_once()
    pulls: list[int] = []
    twice = asyncio.Event()

    async def on_pulled() -> None:
        pulls.append(len(event_ids(a)))
        if len(pulls) == 1:  # B moves on after A's first pull: only A's next interval can bring it
            append_events(b, origin_b, 3)
            await GitSync(b).sync_once()
        else:
            twice.set()

    stop = asyncio.Event()
    task = asyncio.create_task(GitSync(a, push_every_s=600, pull_every_s=0.1, on_pulled=on_pulled).run(stop))
    await asyncio.wait_for(twice.wait(), timeout=15)
    stop.set()
    await asyncio.wait_for(task, timeout=15)

    assert pulls[:2] == [2, 5]
    assert len(event_ids(a)) == 5 and status_lines(a) == []
