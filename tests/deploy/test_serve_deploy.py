"""The deploy files of the memory service (`macupos serve`): the systemd unit, the compose service, the Caddy
example and the image, agreeing with each other and with the command they start."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from service.cli import serve_group
from tests.deploy.systemd import DEPLOY, assert_verifies_cleanly, needs_systemd_analyze, read_unit, unit_home

UNIT = DEPLOY / "macupos-serve.service"
PORT = "8750"


def unit() -> configparser.RawConfigParser:
    return read_unit(UNIT)


def _args_parse(args: list[str]) -> None:
    """The arguments are ones `macupos serve` takes (checked by click, without starting a server)."""
    ctx = serve_group.make_context("serve", [*args, "keys"], resilient_parsing=False)
    assert ctx.params["port"] == int(PORT)


def test_the_serve_unit_runs_macupos_serve_hardened_on_loopback() -> None:
    service = unit()["Service"]
    argv = service["ExecStart"].split()
    assert argv[0].endswith("/macupos") and argv[1] == "serve"
    _args_parse(argv[2:])
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == PORT
    assert service["User"] != "root" and service["Restart"] == "on-failure"
    home = unit_home(UNIT)
    assert service["ReadWritePaths"].split() == [home]
    assert service["StateDirectory"] == Path(home).name
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "UMask": "0077",
    }.items():
        assert service[key] == value, key
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


@needs_systemd_analyze
def test_the_serve_unit_verifies_cleanly(tmp_path: Path) -> None:
    assert_verifies_cleanly(UNIT, tmp_path)


def test_the_compose_memory_service_serves_on_host_loopback_with_its_own_volume() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    memory = compose["services"]["memory"]
    assert memory["profiles"] == ["serve"]  # `docker compose up` alone starts the bot only
    assert memory["command"][:2] == ["macupos", "serve"]
    _args_parse(memory["command"][2:])
    assert memory["ports"] == [f"127.0.0.1:{PORT}:{PORT}"]
    home = memory["environment"]["MACUPOS_HOME"]
    (volume,) = [v.split(":")[0] for v in memory["volumes"] if v.split(":")[1] == home]
    assert volume in compose["volumes"] and volume != "macupos-home"
    assert f"127.0.0.1:{PORT}/healthz" in " ".join(memory["healthcheck"]["test"])
    assert memory["restart"] == "unless-stopped" and memory["cap_drop"] == ["ALL"]
    assert memory["build"]["dockerfile"] == "deploy/Dockerfile"


def test_the_image_carries_the_service_package() -> None:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY service /src/service" in text
    assert "!service/" in (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8")


def test_the_caddy_example_proxies_to_the_services_port_with_room_for_a_transcript() -> None:
    text = (DEPLOY / "Caddyfile").read_text(encoding="utf-8")
    assert re.search(rf"reverse_proxy 127\.0\.0\.1:{PORT}\b", text)
    size = re.search(r"max_size (\d+)MB", text)
    assert size is not None and int(size.group(1)) >= 50
    assert text.count("{") == text.count("}")
    assert not re.search(r"^\s*log\b", text, flags=re.MULTILINE)  # no access log of query text


def test_the_serve_options_parse_without_a_server() -> None:
    result = CliRunner().invoke(serve_group, ["--help"])
    assert result.exit_code == 0 and "--allow-register" in result.output
