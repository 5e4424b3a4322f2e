"""Roles (bot.roles): where a role comes from and which wins, the configuration's forms, and the gate that admits
a role holder in a group chat only."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.auth import Gatekeeper, UpdateOrigin, Verdict
from bot.errors import ConfigError
from bot.roles import RoleBook
from bot.settings import BotSettings
from bot.state import BotState


def _settings(tmp_path: Path, roles: str = "", toml: dict[str, object] | None = None) -> BotSettings:
    env = {"TELEGRAM_BOT_TOKEN": "1:x", "MACUPOS_ALLOWED_USERS": "1,2", "MACUPOS_HOME": str(tmp_path / "home")}
    if roles:
        env["MACUPOS_ROLES"] = roles
    return BotSettings.from_env(env, toml=toml or {}, cwd=tmp_path)


def test_roles_come_from_the_environment_and_the_toml_table_and_bad_ones_are_named(tmp_path: Path) -> None:
    s = _settings(tmp_path, "approver:@Alice, member:77", {"roles": {"@bob": "viewer", "77": "approver"}})
    assert dict(s.roles) == {"@alice": "approver", "77": "member", "@bob": "viewer"}  # the environment wins
    for bad in ("owner:@alice", "approver", "member:@a b", "chief:@bob"):
        with pytest.raises(ConfigError) as err:
            _settings(tmp_path, bad)
        assert "MACUPOS_ROLES" in str(err.value)


async def test_the_owner_then_role_then_configuration_then_allowlist_decide_a_role(tmp_path: Path) -> None:
    state = await BotState.open(tmp_path / "bot.db")
    try:
        book = RoleBook(_settings(tmp_path, "member:@alice,viewer:99,approver:1"), state)
        await book.load()
        book.observe(50, "Alice", "Alice")
        book.observe(666, "stranger", "s")
        assert book.role_of(1) == "owner"  # configuration cannot change the owner
        assert book.role_of(2) == "approver"  # the allowlist's others decide, as before roles
        assert book.role_of(50) == "member" and book.role_of(99) == "viewer"
        assert book.role_of(666) is None and book.name(666) == "user 666"  # strangers are not even remembered
        await book.set("@alice", "approver", 1)
        await book.set("2", "none", 1)
        assert book.role_of(50) == "approver" and book.role_of(2) is None
        again = RoleBook(_settings(tmp_path, "member:@alice"), state)
        await again.load()
        again.observe(50, "alice")
        assert again.role_of(50) == "approver"  # /role outlives a restart and beats the configuration
        assert book.may_decide(50) and not book.may_decide(99)
        # A role admits its holder in a group chat only; the allowlist works everywhere, as before.
        gate = Gatekeeper(frozenset({1, 2}), admit=book.admits)
        assert gate.verdict(UpdateOrigin(50, -100, "message"), 0.0) is Verdict.ALLOW
        assert gate.verdict(UpdateOrigin(50, 50, "message"), 0.0) is Verdict.REFUSE
        assert gate.verdict(UpdateOrigin(666, -100, "message"), 0.0) is Verdict.REFUSE
        assert gate.verdict(UpdateOrigin(1, 1, "message"), 0.0) is Verdict.ALLOW
    finally:
        await state.close()
