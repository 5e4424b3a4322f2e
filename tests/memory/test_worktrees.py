"""Sessions in the bot's git worktrees (``<P>/.macupos/worktrees/<branch>``): memory groups, indexes and recalls
them under project ``<P>``, their handoffs name their branch, and grounding can prefer a branch's handoffs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.facade import Eywa
from memory.grounding import explain_text
from memory.handoffs.format import from_markdown, to_markdown
from memory.hooks import project_for
from memory.models import Handoff
from memory.redact.privacy import Privacy, write_private_file
from memory.remote.client import RemoteEywa
from memory.settings import MemorySettings
from memory.sources.worktrees import is_worktree, project_root, worktree_projects
from tests.memory.conftest import offline_settings
from tests.memory.remote_harness import remote_service
from tests.memory.test_cli import macupos
from tests.service.conftest import transcript_bytes

GARDEN = "/work/garden"
FIX_LOGIN = f"{GARDEN}/.macupos/worktrees/fix/login"  # a branch with a "/": nested folders
AS_OF = datetime(2026, 3, 10, tzinfo=UTC)


def write(folder: Path, sid: str, *words: str, cwd: str = GARDEN, branch: str = "main", day: str) -> Path:
    path = folder / f"{sid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(transcript_bytes(sid, *words, cwd=cwd, branch=branch, day=day))
    return path


def corpus(folder: Path) -> Path:
    """Three zeppelin sessions in the main folder (newest first by score), an older one on fix/login in its
    worktree, and one of another project."""
    for n, day in enumerate(("2026-03-09", "2026-03-08", "2026-03-07"), 1):
        write(folder, f"m{n}", "zeppelin", "exporter", day=day)
    write(folder, "b1", "zeppelin", "exporter", cwd=FIX_LOGIN, branch="fix/login", day="2026-03-01")
    write(folder, "o1", "walrus", "penguin", cwd="/work/orchard", day="2026-03-05")
    return folder


@pytest.fixture
async def eywa(tmp_path: Path) -> AsyncIterator[Eywa]:
    async with await Eywa.open(offline_settings(tmp_path / "home")) as e:
        await e.ingest([corpus(tmp_path / "src")], use_llm=False)
        yield e


def ids(results: list[object]) -> list[str]:
    return [str(getattr(r, "session_id", "")) for r in results]


@pytest.mark.parametrize(
    ("cwd", "root"),
    [
        (FIX_LOGIN, GARDEN),
        (f"{GARDEN}/.macupos/worktrees/fix-login", GARDEN),
        (f"{GARDEN}/.macupos/worktrees/fix-login/", GARDEN),
        (f"{GARDEN}/.macupos/worktrees", GARDEN),
        ("C:\\work\\garden\\.macupos\\worktrees\\fix-login", "C:\\work\\garden"),
        (GARDEN, GARDEN),
        (f"{GARDEN}/.macupos/inbox", f"{GARDEN}/.macupos/inbox"),
        (f"{GARDEN}/.macupos/worktrees-old/x", f"{GARDEN}/.macupos/worktrees-old/x"),
        ("", ""),
    ],
)
def test_a_worktree_folder_belongs_to_its_main_folder(cwd: str, root: str) -> None:
    assert project_root(cwd) == root
    assert is_worktree(cwd) == (root != cwd)


def test_a_worktree_sessions_projects_lose_the_worktrees_own_folder_names() -> None:
    named = ["login", "fix", "worktrees", "macupos", "billing"]
    assert worktree_projects(named, FIX_LOGIN, ["garden"]) == ["garden", "billing"]
    assert worktree_projects(named, GARDEN, ["garden"]) == named  # no worktree: as they are


async def test_a_worktree_session_is_its_main_folders_project_and_its_handoff_names_its_branch(eywa: Eywa) -> None:
    view = await eywa.show("b1")
    garden = await eywa.get("", project="garden", max_handoffs=5, as_of=AS_OF)
    listed = await eywa.list_handoffs(limit=10, project="garden")
    login = await eywa.list_handoffs(limit=10, project="login")
    terms = await eywa.db.read(
        lambda conn: {str(t) for (t,) in conn.execute("SELECT term FROM term_df WHERE field = 0")}
    )
    assert view.session is not None and view.session.cwd == FIX_LOGIN  # the raw folder is kept
    assert view.handoff is not None and view.handoff.projects == ("garden",)
    assert "\nbranch: fix/login\n" in view.handoff.markdown
    assert from_markdown(view.handoff.markdown).extra["branch"] == "fix/login"
    assert set(ids(garden.results)) == {"m1", "m2", "m3", "b1"}
    assert "b1" in ids(listed) and login == []
    assert "garden" in terms and not {"login", "fix", "worktrees"} & terms


async def test_a_private_main_folder_hides_its_worktree_sessions(tmp_path: Path) -> None:
    src = corpus(tmp_path / "src")
    private = replace(offline_settings(tmp_path / "p"), private_projects=(Path(GARDEN),))
    async with await Eywa.open(private) as eywa:
        report = await eywa.ingest([src], use_llm=False)
        assert report.sessions_private == 4  # m1-m3 and the worktree's b1: nothing of them is stored
        assert {r.session_id for r in await eywa.list_handoffs(limit=10)} == {"o1"}

    settings = offline_settings(tmp_path / "later")
    async with await Eywa.open(settings) as eywa:
        await eywa.ingest([src], use_llm=False)  # before the project went private
        write_private_file(settings.home, [Path(GARDEN)])
        elsewhere = await eywa.get("zeppelin", as_of=AS_OF, viewer=Path("/work/orchard"))
        own = await eywa.get("zeppelin", as_of=AS_OF, viewer=Path(FIX_LOGIN))
        hidden = await eywa.hidden_from(Path("/work/orchard"), ["b1", "o1"])
    assert "b1" not in ids(elsewhere.results) and hidden == {"b1"}
    assert "b1" in ids(own.results)  # the worktree is the private project's own folder


def test_privacy_covers_a_private_folders_worktrees() -> None:
    privacy = Privacy((Path(GARDEN),))
    assert privacy.covers(FIX_LOGIN) and privacy.covers(f"{GARDEN}/.macupos/worktrees/x")
    assert not privacy.covers("/work/orchard/.macupos/worktrees/x")
    assert not privacy.without(Path(FIX_LOGIN))  # a worktree session sees its own project's sessions


async def test_a_branch_preference_puts_its_sessions_first_and_none_changes_nothing(eywa: Eywa) -> None:
    plain = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF)
    none = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF, branch=None)
    empty = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF, branch="")
    branch = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF, branch="fix/login")
    unknown = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF, branch="nowhere")
    main = await eywa.get("zeppelin", max_handoffs=3, as_of=AS_OF, branch="main")
    recent = await eywa.get("", max_handoffs=2, as_of=AS_OF, days_back=30, branch="fix/login")
    scores = {r.session_id: r.score for r in (await eywa.get("zeppelin", max_handoffs=5, as_of=AS_OF)).results}
    assert ids(plain.results) == ["m1", "m2"]
    for same in (none, empty):
        assert [r.as_json(True) for r in same.results] == [r.as_json(True) for r in plain.results]
        assert same.markdowns == plain.markdowns
    assert ids(branch.results) == ["b1", "m1"]  # b1 was 4th by score: read from beyond k
    assert [r.score for r in branch.results] == [scores["b1"], scores["m1"]]  # a reordering: scores unchanged
    first = branch.results[0].as_json()
    assert first["branch_preference"] == {"branch": "fix/login", "same": True, "score_rank": 4}
    assert ids(unknown.results) == ["m1", "m2"] and ids(main.results) == ["m1", "m2", "m3"]
    assert ids(recent.results)[0] == "b1"  # no query: the branch's recent handoffs first too

    explained = explain_text(branch.results)
    assert explained.startswith("branch 'fix/login' preferred: reordered")
    assert "same branch, #4 by score" in explained and "other branch, #1 by score" in explained
    assert "order unchanged" in explain_text(unknown.results)
    assert "branch" not in explain_text(plain.results)


async def test_an_imported_handoff_tells_its_branch_by_its_file(tmp_path: Path) -> None:
    settings = offline_settings(tmp_path / "home")
    folder = tmp_path / "import"
    folder.mkdir()
    for sid, day, extra in (("i-new", "2026-03-09", {}), ("i-old", "2026-03-01", {"branch": "fix/login"})):
        h = Handoff(sid, f"{day}T10:00:00+00:00", "Zeppelin exporter work", 30.0, "", ["garden"], ["zeppelin"], 2)
        (folder / f"{sid}.md").write_text(to_markdown(replace(h, extra=extra)), encoding="utf-8")
    async with await Eywa.open(settings) as eywa:
        assert not (await eywa.import_dir(folder)).rejected
        plain = await eywa.get("zeppelin", as_of=AS_OF)
        branch = await eywa.get("zeppelin", as_of=AS_OF, branch="fix/login")
        assert await eywa.export_dir(tmp_path / "export") == 2
    assert ids(plain.results) == ["i-new", "i-old"] and ids(branch.results) == ["i-old", "i-new"]
    exported = (tmp_path / "export" / "2026" / "03" / "01" / "i-old.md").read_text(encoding="utf-8")
    assert exported == (folder / "i-old.md").read_text(encoding="utf-8")  # the key round-trips


def test_the_hooks_project_of_a_worktree_is_its_main_folders(tmp_path: Path) -> None:
    main = tmp_path / "garden"
    (main / ".git").mkdir(parents=True)
    tree = main / ".macupos" / "worktrees" / "fix" / "login"
    tree.mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {main}/.git/worktrees/login\n")  # what `git worktree add` writes
    assert project_for(tree) == project_for(tree / "src") == project_for(main) == "garden"


async def test_the_pages_list_a_worktree_session_under_its_main_folder(tmp_path: Path) -> None:
    async with await Eywa.open(offline_settings(tmp_path / "home")) as eywa:
        await eywa.ingest([corpus(tmp_path / "src")], extract=False)  # no handoffs: the folder alone decides
        garden = await eywa.list_sessions(project="garden", limit=10, offset=0)
        login = await eywa.list_sessions(project="login", limit=10, offset=0)
    assert {s.session_id for s in garden} == {"m1", "m2", "m3", "b1"} and login == []


def test_memory_get_takes_a_branch(tmp_path: Path) -> None:
    src = corpus(tmp_path / "src")
    assert macupos(tmp_path, "ingest", str(src)).returncode == 0
    asked = ("get", "zeppelin", "--max", "2", "--as-of", "2026-03-10T00:00:00Z", "--branch", "fix/login")
    r = macupos(tmp_path, *asked, "--json")
    assert r.returncode == 0, r.stderr
    assert [x["session_id"] for x in json.loads(r.stdout)] == ["b1", "m1"]
    explained = macupos(tmp_path, *asked, "--explain").stdout
    assert explained.startswith("branch 'fix/login' preferred: reordered")


async def test_the_service_and_its_client_pass_the_branch_through(tmp_path: Path) -> None:
    async with remote_service(tmp_path) as (srv, settings):
        src = corpus(tmp_path / "src")
        async with await RemoteEywa.open(settings) as eywa:
            await eywa.ingest([src])
            plain = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF)
            branch = await eywa.get("zeppelin", max_handoffs=2, as_of=AS_OF, branch="fix/login")
            listed = await eywa.list_handoffs(limit=10, project="garden")
        async with srv.client(srv.keys["alice"]) as c:
            params = {"q": "zeppelin", "max": "2", "as_of": AS_OF.isoformat(), "branch": "fix/login"}
            raw = (await c.get("/v1/get", params=params)).json()
    assert ids(plain.results) == ["m1", "m2"] and all(r.branch_note is None for r in plain.results)
    assert ids(branch.results) == ["b1", "m1"] and "b1" in branch.markdowns
    assert branch.results[0].branch_note is not None and branch.results[0].branch_note.score_rank == 4
    assert explain_text(branch.results).startswith("branch 'fix/login' preferred: reordered")
    assert [x["session_id"] for x in raw] == ["b1", "m1"] and raw[0]["branch_preference"]["same"] is True
    assert "b1" in ids(listed)  # the service's extraction groups it under the main folder too


async def test_an_empty_memory_answers_a_branch_preference_with_nothing(settings: MemorySettings) -> None:
    async with await Eywa.open(settings) as eywa:
        assert (await eywa.get("zeppelin", branch="fix/login")).results == []
