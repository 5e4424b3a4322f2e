"""relay.worktrees against real git repositories in tmp_path: no mocks, no sleeps."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from relay import worktrees as wt
from relay.worktrees import WorktreeError


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment handed to relay.worktrees (as the bot hands it RelaySettings.env), and the tests' own
    git's: no global or system git config (no signing, no hooks path, no identity) leaks in."""
    (tmp_path / "gitconfig").write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    for who in ("AUTHOR", "COMMITTER"):
        for what in ("NAME", "EMAIL"):
            monkeypatch.delenv(f"GIT_{who}_{what}", raising=False)
    return dict(os.environ)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout


def commit_file(cwd: Path, name: str, text: str, message: str = "change") -> str:
    (cwd / name).parent.mkdir(parents=True, exist_ok=True)
    (cwd / name).write_text(text)
    git(cwd, "add", name)
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD").strip()


def head(cwd: Path, rev: str = "HEAD") -> str:
    return git(cwd, "rev-parse", rev).strip()


def status(cwd: Path) -> str:
    return git(cwd, "--no-optional-locks", "status", "--porcelain")


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    git(path, "config", "user.name", "Tester")
    git(path, "config", "user.email", "tester@example.com")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hi')\n")
    git(path, "add", "src")
    commit_file(path, "README.md", "one\ntwo\nthree\n", "init")
    return path


GOOD = ["main", "feature/x", "fix-123", "a.b", "über", "a/b/c", "x@y", "a-", "v1.0", "a_b", "a+b", "a./b", "A,B"]
BAD = [
    *["", "-x", "/x", "x/", "a..b", "a b", "a~b", "a^b", "a:b", "a?b", "a*b", "a[b", "a\\b", "a//b"],
    *["x.", "x.lock", "a/.b", ".a", "a@{b", "a\x01b", "a\x7fb", "a\tb", "a/b.lock/c", "HEAD", "a/", "@{-1}"],
]


@pytest.mark.parametrize("name", GOOD + BAD)
def test_valid_branch_name_agrees_with_git(name: str, tmp_path: Path) -> None:
    by_git = subprocess.run(["git", "check-ref-format", "--branch", name], cwd=tmp_path, capture_output=True)
    assert wt.valid_branch_name(name) == (by_git.returncode == 0) == (name in GOOD)


def test_valid_branch_name_refuses_at_and_long_names() -> None:
    assert not wt.valid_branch_name("@")  # git takes "@" as a branch name; it means HEAD everywhere else
    assert wt.valid_branch_name("a" * wt.MAX_BRANCH_LEN)
    assert not wt.valid_branch_name("a" * (wt.MAX_BRANCH_LEN + 1))


def test_creates_a_branch_from_base_head_and_stays_out_of_git_status(repo: Path, env: dict[str, str]) -> None:
    elsewhere = {"GIT_DIR": str(repo / "nowhere"), "GIT_INDEX_FILE": str(repo / "nowhere")}  # dropped
    tree = wt.ensure_worktree(repo, "feature/x", env=env | elsewhere)
    assert tree == wt.Worktree(repo, "feature/x", repo / ".macupos/worktrees/feature/x", "main", created=True)
    assert head(tree.path) == head(repo) == head(repo, "refs/heads/feature/x")
    assert (tree.path / "src" / "app.py").read_text() == "print('hi')\n"
    assert git(tree.path, "symbolic-ref", "HEAD").strip() == "refs/heads/feature/x"
    assert (repo / ".macupos" / ".gitignore").read_text() == "*\n"
    assert status(repo) == ""
    assert wt.current_branch(repo, env=env) == "main"


def test_reuses_an_existing_worktree_and_keeps_an_existing_gitignore(repo: Path, env: dict[str, str]) -> None:
    (repo / ".macupos").mkdir()
    (repo / ".macupos" / ".gitignore").write_text("*\n# ours\n")
    first = wt.ensure_worktree(repo, "x", env=env)
    (first.path / "note.txt").write_text("work in progress")
    again = wt.ensure_worktree(repo, "x", env=env)
    assert (again.created, again.path) == (False, first.path)
    assert (again.path / "note.txt").read_text() == "work in progress"
    assert (repo / ".macupos" / ".gitignore").read_text() == "*\n# ours\n"


def test_checks_out_an_existing_branch_and_honours_base(repo: Path, env: dict[str, str]) -> None:
    git(repo, "branch", "topic")
    topic = head(repo)
    git(repo, "checkout", "-q", "-b", "dev")
    dev = commit_file(repo, "dev.txt", "dev\n")
    git(repo, "checkout", "-q", "main")
    assert head(wt.ensure_worktree(repo, "topic", env=env).path) == topic
    made = wt.ensure_worktree(repo, "from-dev", base="dev", env=env)
    assert (made.base, head(made.path)) == ("dev", dev)


def test_recreates_a_worktree_whose_folder_was_deleted_by_hand(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    work = commit_file(tree.path, "w.txt", "w\n")
    shutil.rmtree(tree.path)
    again = wt.ensure_worktree(repo, "x", env=env)
    assert again.created and head(again.path) == work


@pytest.mark.parametrize(
    ("branch", "base", "message"),
    [("main", None, "main checkout's own branch"), ("x", "nope", "no branch nope"), ("a..b", None, "not a valid")],
)
def test_refusals(repo: Path, branch: str, base: str | None, message: str, env: dict[str, str]) -> None:
    with pytest.raises(WorktreeError, match=message):
        wt.ensure_worktree(repo, branch, base, env=env)


def test_repository_without_commits_or_without_git(tmp_path: Path, env: dict[str, str]) -> None:
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(empty))
    with pytest.raises(WorktreeError, match=r"no commits yet.*first commit"):
        wt.ensure_worktree(empty, "x", env=env)
    (tmp_path / "plain").mkdir()
    with pytest.raises(WorktreeError, match="not a git repository"):
        wt.ensure_worktree(tmp_path / "plain", "x", env=env)
    git(empty, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "first")
    with pytest.raises(WorktreeError, match="not on a branch"):
        git(empty, "checkout", "-q", "--detach")
        wt.current_branch(empty, env=env)


def test_diff_stat_and_patch_cover_all_work_without_touching_the_index(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    commit_file(repo, "main-only.txt", "later on main\n")  # after the fork: not the branch's work
    commit_file(tree.path, "README.md", "one\nTWO\nthree\nfour\n")  # committed
    (tree.path / "src" / "app.py").write_text("print('bye')\n")  # uncommitted
    (tree.path / "new.txt").write_text("a\nb\n")  # untracked
    (tree.path / "blob.bin").write_bytes(b"\0\1\2")  # untracked, binary
    git(tree.path, "add", "new.txt")  # staged, so the real index holds something to keep
    before = status(tree.path)
    index = Path(git(tree.path, "rev-parse", "--git-path", "index").strip())
    index_bytes = index.read_bytes()

    stat = wt.diff_stat(repo, "x", "main", env=env)
    text = wt.patch(repo, "x", "main", env=env)

    assert {f.path: (f.added, f.removed) for f in stat.files} == {
        "README.md": (2, 1),
        "src/app.py": (1, 1),
        "new.txt": (2, 0),
        "blob.bin": (0, 0),
    }
    assert (stat.added, stat.removed) == (5, 2)
    assert "+TWO" in text and "+print('bye')" in text and "+b" in text and "Binary files" in text
    assert "main-only" not in text
    assert status(tree.path) == before
    assert index.read_bytes() == index_bytes
    assert wt.unmerged_commits(repo, "x", "main", env=env) == 1
    assert wt.has_uncommitted(repo, "x", env=env)
    shutil.rmtree(tree.path)  # no worktree: the branch's commits alone
    assert [f.path for f in wt.diff_stat(repo, "x", "main", env=env).files] == ["README.md"]
    assert not wt.has_uncommitted(repo, "x", env=env)


def test_merge_fast_forward(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    tip = commit_file(tree.path, "feature.txt", "f\n")
    result = wt.merge(repo, "x", "main", env=env)
    assert result == wt.MergeResult("fast-forward", ("feature.txt",), tip)
    assert head(repo) == tip and (repo / "feature.txt").exists() and status(repo) == ""
    assert wt.merge(repo, "x", "main", env=env).outcome == "up-to-date"


def test_merge_commit_when_base_moved_on(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    branch_tip = commit_file(tree.path, "feature.txt", "f\n")
    base_tip = commit_file(repo, "other.txt", "o\n")
    result = wt.merge(repo, "x", "main", env=env)
    assert (result.outcome, result.files, result.commit) == ("merge-commit", ("feature.txt",), head(repo))
    assert git(repo, "log", "-1", "--format=%P %s").split() == [base_tip, branch_tip, "Merge", "branch", "'x'"]
    assert status(repo) == ""


def test_conflict_leaves_the_main_checkout_untouched(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    commit_file(tree.path, "README.md", "one\nbranch\nthree\n")
    (tree.path / "src" / "app.py").write_text("print('branch')\n")  # uncommitted: committed by merge
    commit_file(repo, "README.md", "one\nbase\nthree\n")
    base_tip = commit_file(repo, "src/app.py", "print('base')\n")
    (repo / "scratch.txt").write_text("untracked, kept")
    files_before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts}
    result = wt.merge(repo, "x", "main", env=env)
    assert (result.outcome, sorted(result.files), result.commit) == ("conflict", ["README.md", "src/app.py"], base_tip)
    assert head(repo) == base_tip and status(repo) == "?? scratch.txt\n"
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert {p: p.read_bytes() for p in files_before} == files_before
    assert git(tree.path, "log", "-1", "--format=%s").strip() == "Work of @x (uncommitted when merged)"
    instruction = wt.resolve_instruction("x", "main", result.files)
    assert "git merge main" in instruction and "README.md" in instruction and "tests" in instruction
    # The agent starts the merge but leaves markers: merging now would carry them into main.
    assert subprocess.run(["git", "-C", str(tree.path), "merge", "-q", "main"], capture_output=True).returncode
    with pytest.raises(WorktreeError, match="unresolved conflicts") as caught:
        wt.merge(repo, "x", "main", env=env)
    assert sorted(caught.value.files) == ["README.md", "src/app.py"] and head(repo) == base_tip


def test_trial_merge_fallback_finds_the_same_conflicts(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    commit_file(tree.path, "README.md", "one\nbranch\nthree\n")
    commit_file(repo, "README.md", "one\nbase\nthree\n")
    base_tip = head(repo)
    assert wt._conflicts_by_trial(wt._Git(env), repo, "x", "main") == ("README.md",)
    git(repo, "checkout", "-q", "-b", "y", "HEAD~1")
    commit_file(repo, "y.txt", "y\n")
    git(repo, "checkout", "-q", "main")
    assert wt._conflicts_by_trial(wt._Git(env), repo, "y", "main") is None
    assert head(repo) == base_tip and status(repo) == ""
    assert [w.branch for w in wt.list_worktrees(repo, env=env)] == ["x"]
    assert len(git(repo, "worktree", "list").splitlines()) == 2


def test_merge_refused_when_main_is_dirty_or_elsewhere(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    (tree.path / "work.txt").write_text("uncommitted")
    (repo / "README.md").write_text("dirty\n")
    with pytest.raises(WorktreeError, match="uncommitted changes") as caught:
        wt.merge(repo, "x", "main", env=env)
    assert caught.value.files == ("README.md",)
    git(repo, "checkout", "-q", "README.md")
    git(repo, "checkout", "-q", "-b", "other")
    with pytest.raises(WorktreeError, match="on other, not main"):
        wt.merge(repo, "x", "main", env=env)
    assert status(tree.path) == "?? work.txt\n"  # refused before anything was committed


@pytest.mark.parametrize("base_moved", [False, True])
def test_merge_refused_when_it_would_overwrite_untracked_files(
    repo: Path, base_moved: bool, env: dict[str, str]
) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    commit_file(tree.path, "clash.txt", "branch\n")
    if base_moved:
        commit_file(repo, "other.txt", "o\n")
    before = head(repo)
    (repo / "clash.txt").write_text("mine, untracked")
    with pytest.raises(WorktreeError, match=r"overwrite untracked files.*clash\.txt") as caught:
        wt.merge(repo, "x", "main", env=env)
    assert caught.value.files == ("clash.txt",)
    assert head(repo) == before and (repo / "clash.txt").read_text() == "mine, untracked"
    assert status(repo) == "?? clash.txt\n"


def test_merge_commits_uncommitted_work_with_a_fallback_identity(repo: Path, env: dict[str, str]) -> None:
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    tree = wt.ensure_worktree(repo, "x", env=env)
    (tree.path / "README.md").write_text("changed\n")
    (tree.path / "fresh.txt").write_text("fresh\n")
    result = wt.merge(repo, "x", "main", env=env)
    assert (result.outcome, sorted(result.files)) == ("fast-forward", ["README.md", "fresh.txt"])
    assert (repo / "fresh.txt").read_text() == "fresh\n" and status(tree.path) == ""
    log = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s").strip()
    assert log == "Macupos <macupos@localhost>|Macupos <macupos@localhost>|Work of @x (uncommitted when merged)"


def test_discard_throws_away_unmerged_work(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "feature/x", env=env)
    commit_file(tree.path, "w.txt", "w\n")
    (tree.path / "loose.txt").write_text("uncommitted")
    wt.discard(repo, "feature/x", env=env)
    assert not (repo / ".macupos" / "worktrees" / "feature").exists()
    assert git(repo, "branch", "--list", "feature/x") == "" and wt.list_worktrees(repo, env=env) == []
    wt.discard(repo, "feature/x", env=env)  # again: nothing left to do
    with pytest.raises(WorktreeError, match="main checkout's branch"):
        wt.discard(repo, "main", env=env)


def test_discard_after_the_folder_was_deleted_by_hand(repo: Path, env: dict[str, str]) -> None:
    tree = wt.ensure_worktree(repo, "x", env=env)
    commit_file(tree.path, "w.txt", "w\n")
    shutil.rmtree(tree.path)
    assert [(w.branch, w.prunable) for w in wt.list_worktrees(repo, env=env)] == [("x", True)]
    wt.discard(repo, "x", env=env)
    assert git(repo, "branch", "--list", "x") == "" and wt.list_worktrees(repo, env=env) == []


def test_list_worktrees_lists_only_ours(repo: Path, tmp_path: Path, env: dict[str, str]) -> None:
    a = wt.ensure_worktree(repo, "a/one", env=env)
    wt.ensure_worktree(repo, "b", env=env)
    git(repo, "worktree", "add", "-q", str(tmp_path / "elsewhere"), "-b", "elsewhere")
    git(a.path, "checkout", "-q", "--detach")
    listed = {(w.path, w.branch, w.head, w.prunable) for w in wt.list_worktrees(repo, env=env)}
    assert listed == {(a.path, None, head(repo), False), (repo / ".macupos/worktrees/b", "b", head(repo), False)}
    assert not wt.ensure_worktree(repo, "a/one", env=env).created  # detached (a rebase, say): reused as it is


def test_push_and_remote_of(repo: Path, tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(WorktreeError, match="no remote"):
        wt.push(repo, "main", env=env)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(repo, "remote", "add", "up", str(remote))
    assert wt.remote_of(repo, "main", env=env) == "up"
    git(repo, "remote", "add", "second", str(tmp_path / "nowhere.git"))
    assert wt.remote_of(repo, "main", env=env) is None
    git(repo, "remote", "add", "origin", str(remote))
    assert wt.remote_of(repo, "main", env=env) == "origin"
    git(repo, "config", "branch.main.remote", "up")
    assert wt.remote_of(repo, "main", env=env) == "up"

    assert wt.push(repo, "main", env=env) == "pushed main to up (new branch)"
    old = head(repo)
    new = commit_file(repo, "more.txt", "m\n")
    assert wt.push(repo, "main", env=env) == f"pushed main to up ({old[:7]}..{new[:7]})"
    assert head(remote, "main") == new
    assert wt.push(repo, "main", env=env) == "main is already up to date on up"
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    commit_file(repo, "diverged.txt", "d\n")
    with pytest.raises(WorktreeError, match=r"push of main to up failed.*rejected"):
        wt.push(repo, "main", env=env)
    assert head(remote, "main") == new


def test_a_new_branch_takes_the_spare_checked_out_ahead_and_no_listing_shows_it(
    repo: Path, env: dict[str, str]
) -> None:
    spare = repo / ".macupos" / "worktrees" / ".spare"
    assert wt.prepare_spare(repo, "main", env=env)
    assert (spare / "README.md").read_text() == "one\ntwo\nthree\n" and head(spare) == head(repo)
    assert [w.path.name for w in wt.list_worktrees(repo, env=env)] == []  # the spare is no branch's
    assert status(repo) == ""
    # The base moves on after the spare was made: the branch still starts at the base's HEAD of now.
    commit_file(repo, "later.py", "x = 1\n", "base moved")
    tree = wt.ensure_worktree(repo, "fix-a", env=env)
    assert tree.created and not spare.exists()
    assert head(tree.path) == head(repo) and (tree.path / "later.py").read_text() == "x = 1\n"
    assert git(tree.path, "rev-parse", "--abbrev-ref", "HEAD").strip() == "fix-a"
    assert status(tree.path) == "" and status(repo) == ""
    # Without a spare the branch is checked out as before; a spare someone changed is not taken.
    assert wt.ensure_worktree(repo, "fix-b", env=env).created
    assert wt.prepare_spare(repo, "main", env=env)
    (spare / "README.md").write_text("changed\n", encoding="utf-8")
    tree_c = wt.ensure_worktree(repo, "fix-c", env=env)
    assert (tree_c.path / "README.md").read_text() == "one\ntwo\nthree\n" and spare.exists()
    assert sorted(w.branch or "" for w in wt.list_worktrees(repo, env=env)) == ["fix-a", "fix-b", "fix-c"]
