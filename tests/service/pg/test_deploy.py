"""The compose profile of the service on PostgreSQL: a database with a health check, a server that waits for
it, takes its URL from the environment and parses as `macupos serve` does, and an image with the driver."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.deploy.test_serve_deploy import PORT, _args_parse

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def test_the_postgres_profile_runs_a_database_and_a_server_that_waits_for_it() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    db, server = compose["services"]["postgres"], compose["services"]["memory-pg"]
    assert db["profiles"] == server["profiles"] == ["postgres"]  # neither starts with `docker compose up` alone
    assert "pg_isready" in db["healthcheck"]["test"]
    assert server["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert server["command"][:2] == ["macupos", "serve"]
    _args_parse(server["command"][2:])
    url = server["environment"]["MACUPOS_DATABASE_URL"]
    assert url.startswith("postgresql://macupos:${POSTGRES_PASSWORD") and url.endswith("@postgres:5432/macupos")
    assert "POSTGRES_PASSWORD:?" in db["environment"]["POSTGRES_PASSWORD"]  # no default password
    assert server["ports"] == [f"127.0.0.1:{PORT}:{PORT}"]
    volumes = {v.split(":")[0] for s in (db, server) for v in s["volumes"]}
    assert volumes <= set(compose["volumes"]) and "macupos-service" not in volumes
    assert server["cap_drop"] == ["ALL"]


def test_the_image_carries_the_postgresql_driver() -> None:
    assert 'pip install /src/sdk/python "/src[postgres]"' in (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
