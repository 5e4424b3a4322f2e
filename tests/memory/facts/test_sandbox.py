"""The safe interpreter: only our commands, limits that stop runaway scripts, a host that lives on."""

from __future__ import annotations

import os
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.facts.api import FactsApi

from .conftest import T0, ok

ALLOWED = set(
    """append apply array break catch concat continue dict error eval expr for foreach format global if incr info
    join lappend lassign lindex linsert list llength lmap lrange lreplace lreverse lsearch lset lsort proc regexp
    regsub return scan set split string subst switch tailcall throw try unset uplevel upvar variable while lrepeat
    remember recall forget touch link search world graph viz consolidate sweep revive respond""".split()
)

ESCAPES = [
    "file delete -force /tmp",
    "file exists /etc/passwd",
    "open /etc/passwd",
    "exec ls",
    "exec /bin/sh -c {touch /tmp/x}",
    "socket 127.0.0.1 22",
    "socket -server x 0",
    "load /lib/x86_64-linux-gnu/libc.so.6",
    "source /etc/passwd",
    "cd /",
    "pwd",
    "glob /*",
    "puts stdout hi",
    "gets stdin",
    "read stdin",
    "interp create evil",
    "interp eval {} {exec ls}",
    "interp alias {} x {} exec",
    "interp invokehidden {} exec ls",
    "interp expose {} exec",
    "interp hidden",
    "namespace eval ::tcl {exec ls}",
    "namespace inscope :: exec ls",
    "::tcl::file::delete /tmp/x",
    "::tcl::chan::puts stdout hi",
    "::tcl::encoding::system",
    "::tcl::clock::seconds",
    "::oo::class create Evil",
    "::tcl::unsupported::disassemble script {exec ls}",
    "rename remember {}",
    "rename exec myexec",
    "info nameofexecutable",
    "info hostname",
    "info library",
    "info loaded",
    "info script",
    "info sharedlibextension",
    "info patchlevel",
    "package require http",
    "package require Tk",
    "encoding system",
    "clock seconds",
    "clock format 0 -format %Y",
    "after 1000",
    "after idle {exec ls}",
    "vwait forever",
    "update",
    "trace add variable x write {exec ls}",
    "zlib compress x",
    "pid",
    "chan names",
    "fconfigure stdout",
    "binary format a10 x",
    "coroutine c apply {{} {yield 1}}",
    "exit 1",
    "time {set x 1} 10",
    "::tcl::info::hostname",
    "unload x",
]


@pytest.mark.parametrize("script", ESCAPES)
async def test_escape_attempt_is_refused(api: FactsApi, script: str) -> None:
    result = await api.run_script(script, as_of=T0)
    assert not result.ok, f"{script!r} was not refused: {result.text!r}"


def test_the_escape_list_is_long_enough() -> None:
    assert len(ESCAPES) >= 30


async def test_info_commands_leaks_nothing_but_the_allowed_set(api: FactsApi) -> None:
    visible = set((await ok(api, "info commands")).split())
    assert visible <= ALLOWED, visible - ALLOWED
    assert {"remember", "recall", "respond"} <= visible
    assert await ok(api, "info commands ::tcl::file::*") == ""


async def test_renaming_or_redefining_our_commands_lasts_only_for_that_script(api: FactsApi) -> None:
    await ok(api, "proc remember args {return hijacked}; remember x")
    assert await ok(api, "remember a user Fact predicate p object o") == "a"
    await ok(api, "set ::global_state 1; proc helper {} {}")
    result = await api.run_script("set ::global_state")
    assert not result.ok  # every script gets a fresh interpreter


async def test_a_script_cannot_touch_the_file_system(api: FactsApi, tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("safe")
    for script in (f"file delete {target}", f"set f [open {target} w]", f"exec rm {target}"):
        assert not (await api.run_script(script)).ok
    assert target.read_text() == "safe"


async def test_an_endless_loop_is_stopped_with_a_clear_error(api: FactsApi) -> None:
    result = await api.run_script("while 1 {}")
    assert not result.ok and "time limit exceeded" in (result.error or "")
    assert await ok(api, "world")  # the host and the store live on


async def test_a_command_flood_hits_the_command_limit(api: FactsApi) -> None:
    result = await api.run_script("while 1 {incr i}")
    assert not result.ok and "limit exceeded" in (result.error or "")


async def test_a_huge_string_repeat_is_refused_before_allocating(api: FactsApi) -> None:
    result = await api.run_script("string repeat x 1000000000")
    assert not result.ok and "exceed the sandbox limit" in (result.error or "")
    result = await api.run_script("lrepeat 1000000000 x")
    assert not result.ok and "exceed the sandbox limit" in (result.error or "")


async def test_doubling_a_string_until_memory_runs_out_kills_only_the_sandbox(api: FactsApi) -> None:
    result = await api.run_script("set s x\nwhile 1 {append s $s}")
    assert not result.ok
    # The memory limit stops it; on a machine loaded by other work the host's deadline may come first: either
    # way the sandbox process is killed and the host goes on.
    said = result.error or ""
    assert "memory limit" in said or "limit exceeded" in said or "script stopped: no answer within" in said
    assert await ok(api, "remember after user Fact predicate p object o") == "after"


async def test_errors_carry_the_message_and_the_script_line(api: FactsApi) -> None:
    result = await api.run_script("set a 1\nset b 2\n\nrecall\n")
    assert not result.ok
    assert result.line == 4 and "usage: recall" in (result.error or "")
    assert result.text == f"error: {result.error} (line 4)"
    result = await api.run_script("proc f {} {\n  error boom\n}\nset x 1\nf")
    assert result.error == "boom" and result.line == 5


async def test_add_once_is_an_error_a_script_can_catch(api: FactsApi) -> None:
    await ok(api, "remember editor user Fact predicate favorite-editor object Helix")
    result = await api.run_script("remember editor user Fact predicate favorite-editor object Vim")
    assert not result.ok and "already exists" in (result.error or "")
    text = await ok(api, "list [catch {remember editor user Fact predicate e object Vim} e] $e")
    assert text.startswith("1 ") and "already exists" in text
    assert (await api.get("editor")).fields["object"] == "Helix"  # type: ignore[union-attr]


async def test_a_failing_script_changes_nothing(api: FactsApi) -> None:
    result = await api.run_script("remember a user Fact predicate p object o\nrecall user\nerror late")
    assert not result.ok
    assert await api.get("a") is None
    assert (await api.world())["memories"] == 0


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ('return -code error "abort, do not store"', "abort, do not store"),
        ("return -code 5 x", "return code 5"),
        ("sweep -grace inf", "-grace must be"),
        ("sweep -grace nan", "-grace must be"),
        ("sweep -grace -5", "-grace must be"),
        ("link a y~b x", "cannot contain '~'"),
    ],
)
async def test_a_script_that_ends_in_an_error_of_any_kind_stores_nothing(
    api: FactsApi, script: str, error: str
) -> None:
    result = await api.run_script(f"remember a user Fact predicate p object o\n{script}")
    assert not result.ok and error in result.text
    assert await api.get("a") is None


async def test_a_plain_return_is_a_result_not_an_error(api: FactsApi) -> None:
    assert await ok(api, "remember a user Fact predicate p object o; return done") == "done"
    assert await api.get("a") is not None


async def test_the_memecsy_example_recalls_checks_stores_only_if_new_and_responds(api: FactsApi) -> None:
    script = """
set m [recall user]
if {[string first "Helix" $m] < 0} {
    remember editor user Fact predicate favorite-editor object Helix confidence 0.9
}
respond "Noted your editor preference."
"""
    first = await api.run_script(script)
    second = await api.run_script(script)
    assert first.response == second.response == "Noted your editor preference."
    assert (await api.world())["memories"] == 1


_WORDS = st.sampled_from(
    [
        "remember", "recall", "forget", "link", "search", "world", "graph", "viz", "consolidate", "sweep",
        "revive", "respond", "touch", "set", "puts", "exec", "while", "if", "proc", "string", "repeat",
        "user", "all", "Fact", "predicate", "object", "-limit", "-max", "-dry-run", "0", "1", "-1",
        "1e309", "x", "{", "}", "[", "]", '"', "$", "\\", ";", "\n", "#", "{*}", "catch", "error", "lrepeat",
        "info", "commands", "rename", "interp", "namespace", "Relationship", "UserPreference", "target",
    ]
)  # fmt: skip
_NOISE = st.text(alphabet=string.printable + "éß中", max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.one_of(_WORDS, _NOISE), max_size=25))
async def test_generated_scripts_never_crash_the_host(api: FactsApi, parts: list[str]) -> None:
    result = await api.run_script(" ".join(parts))
    assert result.ok or result.error
    assert os.getpid() > 0
    assert (await api.run_script("world")).ok
