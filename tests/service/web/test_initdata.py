"""Telegram Mini App initData, checked as Telegram's documentation specifies: signed by this bot, at most an
hour old, from a user on the allowlist. Forged, stale, other-bot and malformed data is refused."""

from __future__ import annotations

import json
import time
from urllib.parse import parse_qsl, urlencode

import pytest

from service.web.initdata import InitDataError, check_init_data, sign_init_data

TOKEN = "123456:OUR-BOT-TOKEN"
OWNER = 4242
NOW = 1_800_000_000.0


def data(user_id: int = OWNER, age_s: float = 60, token: str = TOKEN, **extra: str) -> str:
    fields = {
        "query_id": "AAHdF6IQAAAAAN0XohDhrOrc",
        "user": json.dumps({"id": user_id, "first_name": "Ann", "username": "ann"}),
        "auth_date": str(int(NOW - age_s)),
        **extra,
    }
    return sign_init_data(fields, token)


def check(raw: str, **kw: float) -> int:
    return check_init_data(raw, TOKEN, {OWNER}, now=NOW, **kw).id


def test_data_signed_for_this_bot_by_an_allowed_user_is_accepted() -> None:
    assert check(data()) == OWNER
    assert check(data(signature="abc", chat_type="sender")) == OWNER  # every field but hash is signed


def test_the_hash_matches_telegrams_documented_construction() -> None:
    # data_check_string: fields but hash, sorted, "k=v" joined by \n; secret = HMAC_SHA256(token, "WebAppData").
    import hashlib
    import hmac

    fields = dict(parse_qsl(data()))
    given = fields.pop("hash")
    check_string = "\n".join(f"{k}={fields[k]}" for k in sorted(fields))
    secret = hmac.new(b"WebAppData", TOKEN.encode(), hashlib.sha256).digest()
    assert hmac.new(secret, check_string.encode(), hashlib.sha256).hexdigest() == given


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (data(token="654321:ANOTHER-BOT"), "not signed for this bot"),
        (data().replace("Ann", "Eve"), "not signed for this bot"),  # a field edited after signing
        (data(user_id=777).replace("777", str(OWNER)), "not signed for this bot"),  # someone else's, re-pointed
        (data(age_s=3601), "too old"),
        (data(age_s=-3600), "future"),
        (data(user_id=777), "allowlist"),
        (data() + "&hash=0000", "malformed"),  # a second hash
        ("user=%7B%7D&hash", "malformed"),
        ("", "no Telegram login data"),
        ("x" * 9000, "no Telegram login data"),
    ],
)
def test_forged_stale_other_bot_and_malformed_data_is_refused(raw: str, why: str) -> None:
    with pytest.raises(InitDataError, match=why):
        check(raw)


def test_data_without_a_hash_or_with_no_user_is_refused() -> None:
    fields = dict(parse_qsl(data()))
    fields.pop("hash")
    with pytest.raises(InitDataError, match="not signed"):
        check(urlencode(fields))
    no_user = sign_init_data({"auth_date": str(int(NOW)), "query_id": "q"}, TOKEN)
    with pytest.raises(InitDataError, match="names no user"):
        check(no_user)
    bool_user = sign_init_data({"auth_date": str(int(NOW)), "user": '{"id": true}'}, TOKEN)
    with pytest.raises(InitDataError, match="names no user"):
        check(bool_user)


def test_an_empty_bot_token_or_allowlist_refuses_everyone() -> None:
    with pytest.raises(InitDataError, match="not configured"):
        check_init_data(data(), "", {OWNER}, now=NOW)
    with pytest.raises(InitDataError, match="allowlist"):
        check_init_data(data(), TOKEN, set(), now=NOW)


def test_the_max_age_is_the_callers_and_the_clock_is_real_time_by_default() -> None:
    assert check(data(age_s=7000), max_age_s=7200) == OWNER
    fresh = sign_init_data({"auth_date": str(int(time.time())), "user": json.dumps({"id": OWNER})}, TOKEN)
    assert check_init_data(fresh, TOKEN, {OWNER}).id == OWNER
