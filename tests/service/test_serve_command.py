"""The real `macupos serve` command: keys made and revoked by the CLI beside a running server, answers equal
to the local CLI's on the same data, no key in any log line, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import re
import signal
import ssl
from pathlib import Path

import httpx

from tests.service.conftest import gz, transcript_bytes
from tests.service.serve_proc import cli as _cli
from tests.service.serve_proc import serving as _serving

QUERY_TIME = "2026-03-05T00:00:00Z"


def test_serve_answers_like_the_local_cli_and_keys_are_managed_beside_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    created = _cli(home, "serve", "keys", "create", "--tenant", "alice", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert set(key) == {"api_key", "tenant", "key_id", "scope"} and key["tenant"] == "alice"
    plain = _cli(home, "serve", "keys", "create", "--tenant", "bob", "--scope", "read", "--label", "laptop")
    assert plain.returncode == 0 and re.fullmatch(r"mpk_[0-9a-f]{12}_\S{43}\n", plain.stdout)
    assert "shown only this once" in plain.stderr
    bob_key = plain.stdout.strip()
    log = tmp_path / "serve.log"
    with _serving(home, log) as (proc, url):
        headers = {"X-API-Key": key["api_key"]}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
            up = c.post(
                "/v1/transcripts",
                params={"name": "proj/s1.jsonl"},
                content=gz(transcript_bytes("s1", "zebra", "crossing")),
                headers={"Content-Encoding": "gzip"},
            )
            assert up.status_code == 200 and up.json()["sessions"] == ["s1"]
            c.post(
                "/v1/transcripts",
                params={"name": "s2.jsonl"},
                content=transcript_bytes("s2", "walrus", day="2026-03-03"),
            )
            c.post("/v1/script", json={"script": "remember ed user Fact predicate editor object Helix"})
            remote_get = c.get("/v1/get", params={"q": "zebra walrus", "as_of": QUERY_TIME}).json()
            remote_search = c.get("/v1/search", params={"q": "crossing"}).json()
            remote_show = c.get("/v1/sessions/s1").text
            c.get("/v1/get", headers={"X-API-Key": key["api_key"] + "x"})  # a near-miss key: refused, never logged
            c.get("/v1/get", headers={"Authorization": f"Bearer {bob_key[:-1]}"})
        tenant_home = home / "tenants" / "alice"
        local_get = json.loads(
            _cli(tenant_home, "memory", "get", "zebra walrus", "--as-of", QUERY_TIME, "--json").stdout
        )
        local_search = json.loads(_cli(tenant_home, "memory", "search", "crossing", "--json").stdout)
        local_show = _cli(tenant_home, "memory", "show", "s1").stdout
        assert remote_get == local_get and sorted(r["session_id"] for r in remote_get) == ["s1", "s2"]
        assert remote_search == local_search
        assert remote_show == local_show

        listed = json.loads(_cli(home, "serve", "keys", "list", "--json").stdout)
        assert {(k["tenant"], k["scope"], k["label"]) for k in listed} == {
            ("alice", "write", ""),
            ("bob", "read", "laptop"),
        }
        table = _cli(home, "serve", "keys", "list").stdout
        assert key["key_id"] in table and key["api_key"] not in table
        revoked = _cli(home, "serve", "keys", "revoke", key["key_id"])
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        assert httpx.get(f"{url}/v1/stats", headers=headers, timeout=30).status_code == 401
        assert httpx.get(f"{url}/v1/stats", headers={"X-API-Key": bob_key}, timeout=30).json()["tenant"] == "bob"
        assert _cli(home, "serve", "keys", "revoke", "000000000000").returncode == 1

        proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal: the exit a service manager expects.
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
    text = log.read_text(errors="replace")
    assert "POST /v1/transcripts 200" in text  # the access line: route template, status, time
    assert "Application shutdown complete" in text
    assert "mpk_" not in text.replace("mpk_<masked>", "")
    assert key["api_key"] not in text and bob_key not in text
    assert "zebra" not in text  # a query or a tenant's words never reach the log
    assert (tenant_home / "facts" / "snapshot.tcl").read_text().count("Helix") == 1  # closed cleanly


def test_serve_refuses_to_start_clearly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    half_tls = _cli(home, "serve", "--certfile", str(tmp_path / "c.pem"))
    assert half_tls.returncode == 2 and "both --certfile and --keyfile" in half_tls.stderr
    with _serving(home, tmp_path / "first.log") as (_, url):
        port = url.rsplit(":", 1)[1]
        taken = _cli(home, "serve", "--port", port)
    assert taken.returncode == 1
    assert taken.stderr.startswith("Error: the service could not start:") and "Traceback" not in taken.stderr
    bad_tenant = _cli(home, "serve", "keys", "create", "--tenant", "../x")
    assert bad_tenant.returncode == 2 and "tenant name" in bad_tenant.stderr


# A self-signed certificate for 127.0.0.1, made for these tests only (valid until 2126):
#   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 36500 -nodes -subj /CN=macupos-test \
#     -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout tls-key.pem -out tls-cert.pem
FIXTURES = Path(__file__).with_name("fixtures")


def test_serve_speaks_tls_with_a_certificate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key = json.loads(_cli(home, "serve", "keys", "create", "--tenant", "alice", "--json").stdout)["api_key"]
    # The key file must not be readable by others, as a real one would be.
    cert, private = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes((FIXTURES / "tls-cert.pem").read_bytes())
    private.write_bytes((FIXTURES / "tls-key.pem").read_bytes())
    private.chmod(0o600)
    log = tmp_path / "tls.log"
    trust = ssl.create_default_context(cafile=str(cert))
    with _serving(home, log, "--certfile", str(cert), "--keyfile", str(private), scheme="https", verify=trust) as (
        _,
        url,
    ):
        assert url.startswith("https://127.0.0.1:")
        with httpx.Client(base_url=url, verify=trust, timeout=30) as c:
            assert c.get("/healthz").json() == {"status": "ok"}
            assert c.get("/v1/stats", headers={"X-API-Key": key}).json()["tenant"] == "alice"
        plain = url.replace("https://", "http://")
        try:
            answered = httpx.get(f"{plain}/healthz", timeout=10).status_code
        except httpx.HTTPError:
            answered = None
        assert answered in (None, 400)  # plain HTTP on the TLS port gets nothing useful
