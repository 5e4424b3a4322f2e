"""No raw secret at rest: an uploaded transcript holding every credential kind of the corpus, and a token in
its upload name, leaves none of them in any file under MACUPOS_HOME (spool, databases, handoffs, file
names) nor in a log line; forgetting the session removes its spooled copy under every name it came with."""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3
from pathlib import Path

import pytest

from bench.secrets_coverage import Sample, load_kinds, samples
from memory.redact.redactor import Redactor
from service.spool_redact import TOO_LONG, LineRedactor, redact_line
from tests.memory.redact.test_secrets_corpus import STRUCTURED, one_of_each_kind, secrets_transcript, traces
from tests.service.conftest import claude_lines, running_service

R = Redactor()
SESSION = "secrets-at-rest"


def _chosen() -> list[Sample]:
    return one_of_each_kind(samples(load_kinds(), seed=1, draws=2))


def _transcript(chosen: list[Sample]) -> bytes:
    return secrets_transcript(chosen, SESSION).encode()


def _everything(home: Path) -> bytes:
    """Every file's path and raw bytes, and every SQLite database's rows as SQL text."""
    out: list[bytes] = []
    for path in sorted(home.rglob("*")):
        out.append(str(path.relative_to(home)).encode())
        if not path.is_file():
            continue
        out.append(path.read_bytes())
        if path.suffix == ".db":
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                out.append("\n".join(conn.iterdump()).encode())
            finally:
                conn.close()
    return b"\n".join(out)


_CLIENT_LOGS = ("httpx", "httpcore")  # this test's own client, which logs the URL it asked for


def _spooled(home: Path) -> list[Path]:
    return sorted(p for p in (home / "tenants" / "alice" / "spool").rglob("*") if p.is_file())


async def test_no_credential_of_the_corpus_rests_on_disk_and_forget_removes_every_copy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    chosen = _chosen()
    data = _transcript(chosen)
    token = "ghp_" + next(s for s in chosen if s.kind == "github-classic-pat").pieces[0]
    password = "Vq7mZ2xKp9LwR4tNs8"
    first = f"https://deploy:{password}@git.example.net/{token}.jsonl"  # a token in the name, as the file
    second = "backup/session.jsonl"
    pieces = [p for s in chosen for p in s.pieces] + [*STRUCTURED, password]
    home = tmp_path / "home"
    async with running_service(home) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            r1 = await c.post("/v1/transcripts", params={"name": first}, content=data)
            r2 = await c.post(
                "/v1/transcripts",
                params={"name": second},
                content=gzip.compress(data),
                headers={"Content-Encoding": "gzip"},
            )
            again = await c.post("/v1/transcripts", params={"name": first}, content=data)
            assert r1.status_code == 200, r1.text
            assert r1.json()["sessions"] == [SESSION] and r1.json()["counts"]["new"] == 1
            assert r2.status_code == 200 and r2.json()["sessions"] == [SESSION]
            assert again.json()["counts"] == {"new": 0, "updated": 0, "unchanged": 1}  # the spool is deterministic
            spooled = [p for p in _spooled(home) if p.suffix == ".jsonl"]
            assert len(spooled) == 2, spooled  # one file per name
            assert all(b"REDACTED" in p.read_bytes() for p in spooled)
            assert traces(pieces, _everything(home / "tenants" / "alice" / "spool")) == []
    # The server has stopped: its databases are closed, their raw bytes (WAL included) read as they rest.
    stored = _everything(home)
    assert b"REDACTED" in stored
    assert traces(pieces, stored) == []
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith(_CLIENT_LOGS)]
    assert traces(pieces, "\n".join(logged).encode()) == []
    assert any("REDACTED" in line for line in logged)  # the spooled file's name was logged, redacted

    async with running_service(home) as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            forgotten = await c.delete(f"/v1/sessions/{SESSION}")
            assert forgotten.json() == {"forgotten": [SESSION]}
            assert _spooled(home) == []  # neither name's copy is left
            back = await c.post("/v1/transcripts", params={"name": "third/session.jsonl"}, content=data)
            assert back.status_code == 200 and back.json()["sessions"] == []
            assert _spooled(home) == []  # a forgotten session uploaded again is not kept, not even spooled


def _whole(data: bytes) -> bytes:
    return b"".join(bytes(redact_line(R, line)) for line in data.splitlines(keepends=True))


@pytest.mark.parametrize("piece", [1, 7, 64, 1 << 20])
def test_a_secret_split_across_pieces_of_the_body_is_redacted_whole(piece: int) -> None:
    data = _transcript(_chosen()[:12]) + b'{"type": "user", "text": "cut short ghp_803COWGsJQ0r3POyGb3jDoSHDCOvNmo8NzjP'
    out: list[bytes | bytearray] = []
    lines = LineRedactor(R, out.append)
    for i in range(0, len(data), piece):
        lines.feed(data[i : i + piece])
    lines.finish()
    got = b"".join(out)
    assert got == _whole(data)
    assert b"803COWGsJQ0r3POyGb3jDoSHDCOvNmo8NzjP" not in got and got.endswith(b"[REDACTED:github-token]")


def test_a_line_without_secrets_is_kept_byte_for_byte_and_the_others_stay_json() -> None:
    plain = b'{"type": "user", "message": {"content": "caf\\u00e9 \\ud83d"}}\r\n'
    assert redact_line(R, plain) == plain
    leaky = b'{"type": "user", "url": "https:\\/\\/u:Vq7mZ2xKp9LwR4tNs8@h\\/x", "bad": "\\ud83d"}\n'
    out = bytes(redact_line(R, leaky))
    assert b"Vq7mZ2xKp9LwR4tNs8" not in out and out.endswith(b"\n")
    assert json.loads(out)["url"] == "https://u:[REDACTED:password-in-url]@h/x"
    junk = b"not json: export GITHUB_TOKEN=ghp_803COWGsJQ0r3POyGb3jDoSHDCOvNmo8NzjP \xff\n"
    assert redact_line(R, junk).endswith(b"\xff\n") and b"803COWGs" not in redact_line(R, junk)


def test_a_line_past_the_cap_is_dropped_as_it_comes() -> None:
    out: list[bytes | bytearray] = []
    lines = LineRedactor(R, out.append, cap=100)
    long = b"x" * 60 + b" ghp_803COWGsJQ0r3POyGb3jDoSHDCOvNmo8NzjP " + b"y" * 200 + b"\n"
    for i in range(0, len(long), 16):
        lines.feed(long[i : i + 16])
    lines.feed(b'{"a": 1}\n' + b"z" * 150)
    lines.finish()
    assert b"".join(out) == TOO_LONG + b"\n" + b'{"a": 1}\n' + TOO_LONG


def test_a_secret_under_a_repeated_json_key_is_redacted_too() -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    line = ('{"message":{"content":"' + token + '","content":"hi"}}\n').encode()
    out = bytes(redact_line(Redactor(), line))
    assert token.encode() not in out and b"REDACTED" in out


async def test_a_loglines_export_is_redacted_as_one_document_even_where_json_escapes_a_secret(
    tmp_path: Path,
) -> None:
    password = "hunter2-" + "Zq8vW3pLx"
    records = [json.loads(line) for line in claude_lines("exp-1", [(f"deploy with {URL_SECRET}", "done")])]
    text = json.dumps({"loglines": records}, indent=2).replace("https://", "https:\\/\\/")  # as some tools write
    text = text.replace("PASSWORD", password)
    assert password in text and "https:\\/\\/" in text
    async with running_service(tmp_path / "home") as srv:
        key = await srv.add_key("alice")
        async with srv.client(key) as c:
            up = await c.post("/v1/transcripts", params={"name": "export.json"}, content=text.encode())
            assert up.status_code == 200 and up.json()["sessions"] == ["exp-1"], up.text
        spooled = _spooled(srv.home)
        assert spooled and all(password.encode() not in p.read_bytes() for p in spooled)


URL_SECRET = "https://deploy:PASSWORD@git.example.com/app.git"
