"""`macupos serve --database`: keys made, listed and revoked in PostgreSQL by the CLI beside a running server
(from MACUPOS_DATABASE_URL too); a database that cannot be reached is one error line before listening, and
its URL's password is in no output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from tests.service.conftest import transcript_bytes
from tests.service.pg.conftest import MACUPOS, serve_env, serve_process


def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MACUPOS), "serve", *args],
        env=serve_env(home) | (env or {}),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_keys_live_in_the_database_and_a_revoked_one_is_refused_by_the_server(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    made = cli(home, "keys", "create", "--tenant", "alice", "--json", env={"MACUPOS_DATABASE_URL": pg_url})
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    assert not (home / "service.db").exists()  # not the embedded store's file
    headers = {"X-API-Key": key["api_key"]}
    with (
        serve_process(home, pg_url, tmp_path / "s.log") as (_, url),
        httpx.Client(base_url=url, headers=headers, timeout=60) as c,
    ):
        r = c.post("/v1/transcripts", params={"name": "a.jsonl"}, content=transcript_bytes("a", "zebrafish"))
        assert r.status_code == 200, r.text
        listed = cli(home, "--database", pg_url, "keys", "list", "--json")
        assert [k["key_id"] for k in json.loads(listed.stdout)] == [key["key_id"]]
        revoked = cli(home, "--database", pg_url, "keys", "revoke", key["key_id"])
        assert revoked.returncode == 0, revoked.stderr
        assert c.get("/v1/stats").status_code == 401


def test_a_database_that_cannot_be_reached_is_one_error_line_without_its_password(tmp_path: Path) -> None:
    for url, said in (
        ("postgresql://bob:sekrit@127.0.0.1:1/none", "cannot connect to the database"),
        ("host=127.0.0.1 port=1 password=sekrit nonsense", "neither a postgresql:// URL"),
    ):
        done = cli(tmp_path / "home", "--port", "0", "--database", url)
        assert done.returncode == 1
        assert said in done.stderr and "Traceback" not in done.stderr and "listening" not in done.stderr
        assert "sekrit" not in done.stderr + done.stdout
