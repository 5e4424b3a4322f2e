"""One session's page over HTTP (`macupos serve --local`): the turn outline, folded tool output, Edit and
MultiEdit as diffs, Task calls linked to their subagent sessions, paging by turns with permalinks (and the
old byte addresses still working), and the JSON and CSV exports, with hostile transcript text inert in all."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memory.facade import Eywa
from tests.service.web.conftest import HOSTILE, memory_settings, seed_memory
from tests.service.web.local_pages import assert_no_markup, logged_in_local

TOOLS = "web-tools-1"
SCRIPT = "<script>window.__pwned=1</script>"


def _line(n: int, role: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        message["model"] = "claude-sonnet-4-5"
    return {
        "type": role,
        "sessionId": TOOLS,
        "uuid": f"u{n}",
        "parentUuid": f"u{n - 1}" if n else None,
        "isSidechain": False,
        "timestamp": f"2026-03-02T11:00:{n:02d}Z",
        "cwd": "/srv/app",
        "message": message,
        **extra,
    }


def _use(tool_id: str, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": tool_id, "name": name, "input": args}]


def _result(tool_id: str, text: str) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]


def _agent_file(folder: Path, agent: str, said: str, description: str) -> None:
    rows = [
        {
            "type": "user",
            "sessionId": TOOLS,
            "uuid": f"{agent}-1",
            "parentUuid": None,
            "isSidechain": True,
            "agentId": agent,
            "timestamp": "2026-03-02T11:00:30Z",
            "message": {"role": "user", "content": said},
        }
    ]
    (folder / f"agent-{agent}.jsonl").write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    (folder / f"agent-{agent}.meta.json").write_text(json.dumps({"description": description}), encoding="utf-8")


async def _seed_tools(home: Path) -> None:
    """A session that edits files, runs a command and starts two subagents: one its Task result names (the
    renderer links it), one it does not (the page matches it by the call's description)."""
    src = home / "claude" / "projects" / "-srv-app"
    lines = [
        _line(0, "user", f"please refactor {HOSTILE}"),
        _line(
            1,
            "assistant",
            [
                {"type": "text", "text": "Editing."},
                *_use(
                    "e1",
                    "Edit",
                    {
                        "file_path": "/srv/app/x.py",
                        "old_string": "alpha = 1\nkeep = 0",
                        "new_string": f"alpha = 2\nkeep = 0\n{SCRIPT}",
                    },
                ),
            ],
        ),
        _line(2, "user", _result("e1", "The file /srv/app/x.py has been updated.")),
        _line(
            3,
            "assistant",
            _use(
                "m1",
                "MultiEdit",
                {
                    "file_path": "/srv/app/y.py",
                    "edits": [
                        {"old_string": "one", "new_string": "uno"},
                        {"old_string": f"two {SCRIPT}", "new_string": "dos"},
                    ],
                },
            ),
        ),
        _line(4, "user", _result("m1", "ok")),
        _line(5, "assistant", _use("b1", "Bash", {"command": "ls -la /srv/app"})),
        _line(6, "user", _result("b1", "\n".join(f"file-{i}.py {SCRIPT}" for i in range(30)))),
        _line(7, "assistant", _use("k1", "Task", {"description": "Check the exporter tests", "prompt": "run them"})),
        _line(8, "user", _result("k1", "all 12 pass")),
        _line(9, "assistant", _use("k2", "Task", {"description": "Audit the logs", "prompt": "read them"})),
        _line(10, "user", _result("k2", "nothing odd"), toolUseResult={"agentId": "b2"}),
        _line(11, "assistant", [{"type": "text", "text": "done"}]),
    ]
    (src / f"{TOOLS}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    agents = src / TOOLS / "subagents"
    agents.mkdir(parents=True)
    _agent_file(agents, "c3", "check the exporter tests", "Check the exporter tests")
    _agent_file(agents, "b2", "audit the logs", "Audit the logs")
    async with await Eywa.open(memory_settings(home)) as eywa:
        await eywa.ingest([src], use_llm=False)


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A logged-in client of `serve --local` over the hostile seed and the session that uses tools."""
    home = tmp_path / "home"
    await seed_memory(home)
    await _seed_tools(home)
    async with logged_in_local(home) as client:
        yield client


async def test_the_outline_lists_every_turn_and_tool_output_is_folded(web: httpx.AsyncClient) -> None:
    page = (await web.get(f"/sessions/{TOOLS}")).text
    assert_no_markup(page)
    outline = page[page.index('id="outline"') : page.index("</details>", page.index('id="outline"'))]
    items = re.findall(r'href="#turn-(\d+)"', outline)
    assert items == ["1", "2"]  # the user's turn and the assistant's, both on this page
    assert "please refactor" in outline and "&lt;script&gt;" in outline  # the preview, escaped
    assert '<h3 class="turn role-user" id="turn-1">' in page and 'id="turn-2"' in page
    folded = re.findall(r'<details class="result">\s*<summary>Result · (\d+) lines?</summary>', page)
    assert folded and "30" in folded and '<details class="result" open' not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page  # the output, as text
    assert re.search(r"<b>Tool: Bash</b> <code>ls -la /srv/app</code>", page)  # the call, readable


async def test_edit_and_multiedit_show_as_diffs_old_lines_first(web: httpx.AsyncClient) -> None:
    page = (await web.get(f"/sessions/{TOOLS}")).text
    diffs = re.findall(r'<div class="diff"[^>]*>(.*?)</div>', page, re.S)
    assert len(diffs) == 3  # the Edit's, and one for each of the MultiEdit's two edits
    edit = diffs[0]
    assert edit.index("<del>") < edit.index("alpha = 1") < edit.index("<ins>") < edit.index("alpha = 2")
    assert "keep = 0</span>" in edit  # unchanged, shown as context
    assert '<ins><span class="sign" aria-hidden="true">+</span>&lt;script&gt;' in edit  # escaped
    assert "uno" in diffs[1] and diffs[2].index("two &lt;script&gt;") < diffs[2].index("dos")
    assert_no_markup(page)


async def test_task_calls_link_to_their_subagent_sessions(web: httpx.AsyncClient) -> None:
    page = (await web.get(f"/sessions/{TOOLS}")).text
    body = page[page.index('id="transcript-body"') :]
    unnamed = body.index("<b>Tool: Task</b>")
    assert body.index(f'href="/sessions/{TOOLS}/agent-c3"', unnamed) > unnamed  # matched by description
    assert f'<p class="subagent">→ subagent <a href="/sessions/{TOOLS}/agent-b2">' in body  # named by its result
    child = await web.get(f"/sessions/{TOOLS}/agent-c3")
    assert child.status_code == 200 and f'href="/sessions/{TOOLS}"' in child.text  # and back


async def test_pages_go_by_turns_and_old_byte_links_open_the_turn_holding_the_byte(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home, big_transcript_bytes=700_000)
    async with await Eywa.open(memory_settings(home)) as eywa:
        read = await eywa.transcript_turns(ids["big"], lambda ix: (0, 0))
    assert read is not None
    index = read.index
    big = quote(ids["big"])
    async with logged_in_local(home) as web:
        seen: list[int] = []
        address = "?turn=0"
        pages = 0
        while address:
            page = await web.get(f"/sessions/{big}{address}")
            assert page.status_code == 200 and len(page.content) < 600_000
            assert_no_markup(page.text)
            pages += 1
            seen += [int(n) for n in re.findall(r'<h3 class="turn[^"]*" id="turn-(\d+)"', page.text)]
            found = re.search(r'id="next-page" href="[^"?]*(\?turn=\d+)[^"]*"', page.text)
            address = found.group(1) if found else ""
        assert pages >= 4 and seen == list(range(1, len(index.turns)))  # every turn once, in order
        seventh = index.turns[7]
        old = (await web.get(f"/sessions/{big}?at={seventh.start + 40}")).text
        first = re.search(r'<h3 class="turn[^"]*" id="turn-(\d+)"', old)
        assert first and first.group(1) == "7"
        permalink = (await web.get(f"/sessions/{big}?turn=7")).text
        assert re.search(r'<a href="/sessions/[^"]+\?turn=7#turn-7"', permalink)
        assert 'rel="prev"' in permalink and "?turn=0#transcript" in permalink


async def test_the_session_exports_as_json_and_csv_with_its_text_inert(web: httpx.AsyncClient) -> None:
    as_json = await web.get(f"/sessions/{TOOLS}?format=json")
    assert as_json.status_code == 200 and as_json.headers["content-type"].startswith("application/json")
    assert "attachment" in as_json.headers["content-disposition"] and "<" not in as_json.text
    rows = json.loads(as_json.text)
    turns = [r for r in rows if r["turn"] is not None]
    assert [r["turn"] for r in turns] == [0, 1, 2] and turns[1]["heading"].startswith("User")
    assert SCRIPT in turns[1]["text"]  # the text as stored, escaped only by JSON
    as_csv = await web.get(f"/sessions/{TOOLS}?format=csv")
    assert as_csv.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(as_csv.text.lstrip("\ufeff"))))
    assert [r["turn"] for r in table if r["turn"]] == ["0", "1", "2"]
    assert (await web.get(f"/sessions/{TOOLS}?format=xml")).status_code == 400
