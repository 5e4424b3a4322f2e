"""The deploy files parse with the tools that read them and agree with the settings the bot reads."""

from __future__ import annotations

import configparser
import plistlib
import re
import tomllib
from pathlib import Path

import yaml

from bot.settings import BOT_ENV_VARS, BotSettings, parse_dotenv
from tests.deploy.systemd import DEPLOY, assert_verifies_cleanly, needs_systemd_analyze, read_unit, unit_home

UNIT = DEPLOY / "macupos.service"


def unit() -> configparser.RawConfigParser:
    return read_unit(UNIT)


def test_systemd_unit_has_restart_policy_and_hardening() -> None:
    service = unit()["Service"]
    assert service["ExecStart"].split()[-1] == "bot"
    assert service["ExecStart"].split()[0].endswith("/macupos")
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) > 0
    assert service["User"] != "root"
    assert service["EnvironmentFile"].lstrip("-")
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "read-only",
        "PrivateTmp": "yes",
    }.items():
        assert service[key] == value, key
    writable = service["ReadWritePaths"].split()
    home = unit_home(UNIT)
    assert home in writable
    assert any(p.startswith("/srv/projects") for p in writable)
    assert unit()["Install"]["WantedBy"] == "multi-user.target"


@needs_systemd_analyze
def test_systemd_unit_verifies_cleanly(tmp_path: Path) -> None:
    assert_verifies_cleanly(UNIT, tmp_path)


def test_launchd_plist_has_the_keys() -> None:
    with (DEPLOY / "com.macupos.bot.plist").open("rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == "com.macupos.bot"
    assert plist["ProgramArguments"][0].endswith("/macupos")
    assert plist["ProgramArguments"][1:] == ["bot"]
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] in (True, {"SuccessfulExit": False})
    assert plist["WorkingDirectory"]
    assert plist["StandardOutPath"] and plist["StandardErrorPath"]
    env = plist["EnvironmentVariables"]
    assert {"MACUPOS_HOME", "MACUPOS_ENV_FILE", "PATH"} <= set(env)


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_runs_as_non_root_with_a_data_volume() -> None:
    steps = dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim")
    users = [args for word, args in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0", "0:0")
    volumes = [args for word, args in steps if word == "VOLUME"]
    env = " ".join(args for word, args in steps if word == "ENV")
    home = re.search(r"MACUPOS_HOME=(\S+)", env)
    assert home is not None
    assert any(home.group(1) in v for v in volumes)
    assert any(word == "HEALTHCHECK" and "doctor" in args for word, args in steps)
    assert any(word == "CMD" and '"bot"' in args for word, args in steps)
    assert "ffmpeg" not in " ".join(args for word, args in steps if word == "RUN")
    # Every path the image copies is in the build context the dockerignore lets through.
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    for _, args in (s for s in steps if s[0] == "COPY"):
        for src in args.split()[:-1]:
            assert f"!{src}" in ignore or f"!{src}/" in ignore, src
            assert (DEPLOY.parent / src).exists(), src


def test_the_image_copies_every_package_the_project_installs() -> None:
    """`macupos` is the console script's package: an image without it installs a command that cannot start."""
    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text(encoding="utf-8"))
    packages = [p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]]
    copied = {args.split()[0] for word, args in dockerfile() if word == "COPY"}
    assert set(packages) <= copied, set(packages) - copied
    # Dependencies that are not on PyPI are installed from the tree, before the project.
    assert "sdk/python" in copied


def test_compose_parses_and_mounts_the_home_volume() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    bot = compose["services"]["bot"]
    assert bot["restart"] == "unless-stopped"
    assert ".env" in bot["env_file"]
    assert bot["build"]["dockerfile"] == "deploy/Dockerfile"
    home = bot["environment"]["MACUPOS_HOME"]
    named = [v.split(":")[0] for v in bot["volumes"] if v.split(":")[1] == home]
    assert named and named[0] in compose["volumes"]


def test_env_example_lists_every_variable_the_bot_reads() -> None:
    text = (DEPLOY / ".env.example").read_text(encoding="utf-8")
    mentioned = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))
    missing = sorted(set(BOT_ENV_VARS) - mentioned)
    assert missing == []


def test_env_example_is_plain_enough_for_systemd_docker_and_the_bot(tmp_path: Path) -> None:
    text = (DEPLOY / ".env.example").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert re.fullmatch(r"[A-Z][A-Z0-9_]*=[^#'\"]*", line), line  # no export, quotes or trailing comments
    # As shipped (required values still blank) it parses; filled in, the bot accepts it.
    assert set(parse_dotenv(text)) == {"TELEGRAM_BOT_TOKEN", "MACUPOS_ALLOWED_USERS"}
    filled = text.replace("TELEGRAM_BOT_TOKEN=", "TELEGRAM_BOT_TOKEN=1:x").replace(
        "MACUPOS_ALLOWED_USERS=", "MACUPOS_ALLOWED_USERS=42"
    )
    dotenv = tmp_path / ".env"
    dotenv.write_text(filled, encoding="utf-8")
    settings = BotSettings.from_env({"MACUPOS_HOME": str(tmp_path)}, dotenv=dotenv, cwd=tmp_path)
    assert settings.allowed_users == frozenset({42})
