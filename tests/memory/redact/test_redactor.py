"""Secret redaction: every kind is caught, ordinary text is left alone, and redaction is idempotent."""

from __future__ import annotations

import base64
import json
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.redact.gate import Anchor, Gate
from memory.redact.redactor import MARKER_RE, Redactor, hides_value
from tests.memory.conftest import TRANSCRIPTS

R = Redactor()


def _b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


JWT = _b64({"alg": "HS256", "typ": "JWT"}) + "." + _b64({"sub": "1234567890"}) + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV"

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAxK1pWbZl8s0kJvTq3w4W\n"
    "Zq9ab+/cdEFghij==\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok", "sk-ant-api03", "anthropic-key"),
        ("OPENAI sk-proj-AbCdEfGhIjKlMnOpQrStUvWx12 ok", "sk-proj-AbCd", "openai-key"),
        ("legacy sk-AbCdEfGhIjKlMnOpQrStUvWx1234567890abcd", "sk-AbCd", "openai-key"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
        ("gh ghp_" + "aB3" * 12 + " done", "ghp_", "github-token"),
        ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_", "github-token"),
        ("slack xoxb-123456789012-abcdefABCDEF end", "xoxb-", "slack-token"),
        ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_", "stripe-key"),
        ("google AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSy", "google-api-key"),
        ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1 ok", "AAHdqTcv", "telegram-bot-token"),
        ("token " + JWT, JWT, "jwt"),
        ("curl -H 'Authorization: Bearer abc123def456ghi'", "abc123def456ghi", "bearer-token"),
        ("Authorization: token 0123456789abcdefgh", "0123456789abcdefgh", "auth-header"),
        ("header bearer ya29.a0AfH6SMBx3 sent", "ya29.a0AfH6SMBx3", "bearer-token"),
        ("key file:\n" + PEM + "\nafter", "MIIEowIBAAKCAQEA", "private-key"),
        ("API_KEY=abc123xyz", "abc123xyz", "env-assignment"),
        ('export DB_PASSWORD="hunter2"', "hunter2", "env-assignment"),
        ("SECRET_TOKEN: tok-987654", "tok-987654", "env-assignment"),
        ('{"api_key": "zzzzqwerty12"}', "zzzzqwerty12", "env-assignment"),
        ("client = Client(apiKey='Qw3rty!!x')", "Qw3rty!!x", "env-assignment"),
        ('raw {"command":"export TOKEN=\\"abc-def-123\\" && run"}', "abc-def-123", "env-assignment"),
        ('{"password": "correct horse battery staple"}', "horse battery", "env-assignment"),
        ("cache redis://:s3cretpass@localhost:6379/0", "s3cretpass", "password-in-url"),
        ("gitlab glpat-AbCdEf1234567890XyZ_12 ok", "glpat-AbCd", "gitlab-token"),
        ("hub hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678 ok", "hf_AbCd", "huggingface-token"),
        ("npm npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok", "npm_AbCd", "npm-token"),
    ],
)
def test_each_kind_of_secret_is_replaced_by_its_marker(text: str, secret: str, kind: str) -> None:
    out = R(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


def test_private_key_block_is_removed_whole_and_text_after_it_kept() -> None:
    out = R("before\n" + PEM + "\nafter")
    assert out == "before\n[REDACTED:private-key]\nafter"


def test_private_key_without_end_line_is_still_removed() -> None:
    out = R("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAAB")
    assert "b3BlbnNz" not in out
    assert "AAAAAAAB" not in out


def test_cut_off_private_key_inside_escaped_json_is_removed_up_to_the_prose() -> None:
    raw = '{"text": "-----BEGIN RSA PRIVATE KEY-----\\nProc-Type: 4,ENCRYPTED\\nMIIEvgIBADANBgkqhkiG9w0B\\nZq==\\n"} ok'
    assert R(raw) == '{"text": "[REDACTED:private-key]\\n"} ok'


def test_shared_transcript_fixtures_have_no_false_positives() -> None:
    # The fixtures are scrubbed real sessions: code, paths, SHAs, UUIDs, usage counters, URLs.
    for path in sorted(TRANSCRIPTS.rglob("*.json*")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            assert R(line) == line, path


def test_password_in_url_keeps_user_and_host() -> None:
    out = R("connect postgres://admin:hunter22@db.example.com:5432/app")
    assert out == "connect postgres://admin:[REDACTED:password-in-url]@db.example.com:5432/app"


def test_url_password_references_and_placeholders_stay() -> None:
    for text in ("https://${USER}:${PASS}@host", "https://user:<password>@host", "https://u:****@host"):
        assert R(text) == text


def test_own_secrets_are_replaced_anywhere_as_exact_substrings() -> None:
    r = Redactor(["correct-horse-battery", "tiny"])
    assert r("the phrase is xcorrect-horse-batteryx!") == "the phrase is x[REDACTED:own-secret]x!"
    assert r("tiny words stay") == "tiny words stay"  # too short to be a configured secret


def test_own_secret_that_also_occurs_inside_markers_is_replaced_only_outside_them() -> None:
    r = Redactor(["REDACTED", "own-secret"])
    out = r("plain REDACTED text own-secret")
    assert out == "plain [REDACTED:own-secret] text [REDACTED:own-secret]"
    assert r(out) == out


@pytest.mark.parametrize(
    "text",
    [
        "def f(token: str, api_key: Optional[str] = None): password = get_password()",
        "max_tokens=1000 sort_key=lambda x: x",
        "the password is wrong. password: please enter it again",
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f is on main",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "/usr/lib/python3.11/site-packages/detect_secrets/plugins/keyword.py",
        "pip install scikit-learn; use sk-learn-compatible-estimator-module",
        "PWD=/home/me/project",
        '{"input_tokens": 25, "cache_creation_input_tokens": 0, "output_tokens": 120}',
        "api_key = settings.api_key",
        "token = make_token(user)",
        "API_KEY=${API_KEY}",
        "PASSWORD=changeme",
        "The bearer of bad news",
        "Authorization: Bearer $TOKEN",
        "git@github.com:owner/repo.git and https://example.com/path?q=1",
        'password: ""',
        "Token::new(42) and key => value",
        # Messages and help texts next to secret-looking names: prose, not passphrases.
        'password: "must be at least 8 characters"',
        '{"password": "This field is required."}',
        '"reset_password": "Reset password"',
        'api_key: "The API key to use"',
        '{"token": "Paste the token from settings page"}',
        'errors.password = "Passwords do not match"',
        "'password': 'Enter password'",
        'The secret: "it was the config"',
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert R(text) == text


def test_markers_are_never_redacted_again() -> None:
    text = "API_KEY=[REDACTED:anthropic-key] and [REDACTED:password-in-url]: value123abc"
    assert R(text) == text


def test_a_typed_marker_prefix_does_not_shield_a_secret() -> None:
    out = R("[REDACTED: AKIAIOSFODNN7EXAMPLE")
    assert "AKIAIOSFODNN7EXAMPLE" not in out


def test_redact_obj_walks_tool_inputs() -> None:
    r = Redactor(["owner-value-1"])
    value = {
        "command": "curl -u x https://u:hunter22@h/ owner-value-1",
        "env": {"PASSWORD": "hi there 1", "HOME": "/root"},
        "args": ["AKIAIOSFODNN7EXAMPLE", 3, None, ("ghp_" + "x1" * 18,)],
    }
    out = r.redact_obj(value)
    assert out == {
        "command": "curl -u x https://u:[REDACTED:password-in-url]@h/ [REDACTED:own-secret]",
        "env": {"PASSWORD": "[REDACTED:env-assignment]", "HOME": "/root"},
        "args": ["[REDACTED:aws-access-key]", 3, None, ("[REDACTED:github-token]",)],
    }
    assert r.redact_obj(out) == out


def test_text_without_candidates_is_returned_unchanged_and_identical() -> None:
    text = "Hello Claude! Can you help me understand how Python decorators work?" * 100
    assert R(text) is text


def _fake(alphabet: str, n: int) -> str:
    """An obviously fake token body: the alphabet in order, repeated."""
    return (alphabet * (n // len(alphabet) + 1))[:n]


_HEX = "0123456789abcdef"
_B62 = string.ascii_letters + string.digits


def test_telegram_token_in_a_bot_api_url_is_redacted_and_the_url_kept() -> None:
    token = "1234567890:AA" + _fake(_B62, 33)
    out = R(f"GET https://api.telegram.org/bot{token}/getUpdates?timeout=30")
    assert out == "GET https://api.telegram.org/bot[REDACTED:telegram-bot-token]/getUpdates?timeout=30"


def test_twilio_account_sid_and_its_auth_token_are_both_redacted() -> None:
    out = R(f'client = Client("AC{_fake(_HEX, 32)}", "{_fake(_HEX[::-1], 32)}")')
    assert out == 'client = Client("[REDACTED:twilio-key]", "[REDACTED:twilio-key]")'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Server=db;Database=app;User Id=sa;Password=two words;Encrypt=yes",
            "Server=db;Database=app;User Id=sa;Password=[REDACTED:connection-string-password];Encrypt=yes",
        ),
        ("Pwd=Q1w2e3r4;Server=x", "Pwd=[REDACTED:connection-string-password];Server=x"),
        (
            "jdbc:mysql://db/app?user=me&password=lettersonly&useSSL=true",
            "jdbc:mysql://db/app?user=me&password=[REDACTED:env-assignment]&useSSL=true",
        ),
        ("mysql -u root --password Q1w2e3r4 app", "mysql -u root --password [REDACTED:cli-password] app"),
        ("deploy --api-key 'two words'", "deploy --api-key '[REDACTED:cli-password]'"),
        ("docker login -u me -p Q1w2e3r4 ghcr.io", "docker login -u me -p [REDACTED:cli-password] ghcr.io"),
        ("curl -u me:Q1w2e3r4 https://x", "curl -u me:[REDACTED:basic-auth] https://x"),
        (
            "machine git.example.com\n  login me\n  password Q1w2e3r4\n",
            "machine git.example.com\n  login me\n  password [REDACTED:netrc-password]\n",
        ),
        (  # a raw JSON line: the newline is the two characters \\n
            '"machine git.example.com login me password Q1w2e3r4\\nmachine b"',
            '"machine git.example.com login me password [REDACTED:netrc-password]\\nmachine b"',
        ),
        (
            '{"auths": {"ghcr.io": {"auth": "' + base64.b64encode(b"me:Q1w2e3r4").decode() + '"}}}',
            '{"auths": {"ghcr.io": {"auth": "[REDACTED:docker-auth]"}}}',
        ),
        (
            "https://a.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=" + _fake(_B62, 43) + "%3D",
            "https://a.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=[REDACTED:url-signature]",
        ),
    ],
)
def test_secrets_that_their_context_gives_away_are_redacted(text: str, expected: str) -> None:
    assert R(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "password = get_password();",
        "echo $PW | docker login --username me --password-stdin ghcr.io",
        "gh auth login --token-file ~/token.txt",
        "The machine room password is on the whiteboard.",
        "API_KEY = settings.API_KEY",
        "if not API_KEY: raise ValueError('missing key')",
        "const SECRET = await getSecret(name);",
        "docker run -u 1000:1000 nginx",
        "key-value store; cache key-d41d8cd98f00b204e9800998ecf8427 is 31 hex",
        "aws s3 cp s3://bucket/k . && git rev-parse HEAD  # 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
    ],
)
def test_code_that_only_names_a_secret_is_left_alone(text: str) -> None:
    assert R(text) == text


def test_a_bare_aws_secret_key_is_redacted_where_aws_is_named_and_left_alone_elsewhere() -> None:
    secret = _fake("wJalrXUtnFEMI/K7MDENG+bPxRfiCY", 40)
    assert R(f"AWS Secret Access Key [None]: {secret}") == "AWS Secret Access Key [None]: [REDACTED:aws-secret-key]"
    assert R(f"AKIA{_fake('QWERTYUIOP0123456789', 16)},{secret}").count("[REDACTED:") == 2
    # Without context 40 base64 characters are as likely a digest or an identifier: kept.
    assert R(f"digest {secret}") == f"digest {secret}"


def test_hides_value_takes_secret_named_keys_but_not_messages_or_placeholders() -> None:
    assert hides_value("DEPLOY_TOKEN", "two words")
    assert hides_value("password", "Q1w2e3r4")
    assert not hides_value("password", "Passwords do not match.")
    assert not hides_value("api_key", "${API_KEY}")
    assert not hides_value("HOME", "/root")


def test_gate_finds_overlapping_anchors_and_words_in_any_case() -> None:
    gate = Gate(
        [
            (Anchor("sk-"), 0),
            (Anchor("sk-ant-"), 1),
            (Anchor("bearer", fold=True), 2),
            (Anchor(r"-[0-9]{3}x", regex=True), 3),
            (Anchor("AKIA"), 4),
        ]
    )
    text = "sk-ant-123x and BEARER"
    assert gate.rules_in(text, text.lower()) == {0, 1, 2, 3}
    assert gate.rules_in("nothing here", "nothing here") == set()


def test_gate_refuses_anchors_that_would_hit_everywhere() -> None:
    with pytest.raises(ValueError, match="one character"):
        Gate([(Anchor("_"), 0)])
    with pytest.raises(ValueError, match="literal character"):
        Gate([(Anchor("[a-z]+_", regex=True), 0)])


# --- properties --------------------------------------------------------------------------------------

_ALNUM = string.ascii_letters + string.digits
_FRAGMENTS = [
    "API_KEY=",
    "password: ",
    '"token": "',
    "export SECRET=",
    "://user:",
    "@host",
    "Bearer ",
    "Authorization: ",
    "[REDACTED:jwt]",
    "[REDACTED:",
    "]",
    "sk-ant-",
    "sk-",
    "AKIA",
    "ghp_",
    "eyJ",
    ":AA",
    "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
    "machine h.example.com ",
    "login ",
    "password ",
    "--password ",
    ";Password=",
    "?token=",
    "&",
    "SG.",
    "dop_v1_",
    "key-",
    "AC",
    "SK",
    "curl -u ",
    '"auth": "',
    "aws ",
    "\\n",
    "\n",
    " ",
    "=",
    '"',
    "'",
    "\\",
]
_texts = st.lists(
    st.one_of(st.sampled_from(_FRAGMENTS), st.text(alphabet=_ALNUM + "-_.:/", max_size=40), st.text(max_size=10)),
    max_size=12,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_texts)
def test_redaction_is_idempotent(text: str) -> None:
    once = R(text)
    assert R(once) == once


def _chars(alphabet: str, n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=n)


_UPPER_NUM = string.ascii_uppercase + string.digits
_secrets = st.one_of(
    _chars(_ALNUM + "_-", 40).map(lambda s: "sk-ant-api03-" + s),
    _chars(_UPPER_NUM, 16).map(lambda s: "AKIA" + s),
    _chars(_ALNUM, 36).map(lambda s: "ghp_" + s),
    _chars(_ALNUM, 24).map(lambda s: "sk_live_" + s),
    _chars(_ALNUM + "_-", 35).map(lambda s: "AIza" + s),
    st.tuples(st.integers(10**8, 10**10 - 1), _chars(_ALNUM + "_-", 33)).map(lambda p: f"{p[0]}:AA{p[1]}"),
    _chars(_ALNUM, 24).map(lambda s: "sk-proj-" + s + "Aa1"),
    st.tuples(st.dictionaries(st.sampled_from("abcdef"), st.integers(), min_size=1), _chars(_ALNUM, 20)).map(
        lambda p: _b64({"alg": "HS256"}) + "." + _b64(p[0]) + "." + p[1]
    ),
    _chars(_ALNUM, 20).map(lambda s: "xoxb-1234-" + s),
    st.tuples(_chars(_ALNUM + "_-", 22), _chars(_ALNUM + "_-", 43)).map(lambda p: f"SG.{p[0]}.{p[1]}"),
    _chars("0123456789abcdef", 64).map(lambda s: "dop_v1_" + s),
    _chars("0123456789abcdef", 32).map(lambda s: "shpat_" + s),
    _chars("0123456789abcdef", 32).map(lambda s: "SK" + s),
    _chars("0123456789abcdef", 32).map(lambda s: "key-" + s),
    _chars(_ALNUM + "_-", 80).map(lambda s: "pypi-AgEIcHlwaS5vcmc" + s),
)


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=60), _secrets, st.text(max_size=60))
def test_an_inserted_secret_never_survives(before: str, secret: str, after: str) -> None:
    out = R(f"{before} {secret} {after}")
    assert secret not in out
    assert R(out) == out


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["API_KEY", "DB_PASSWORD", "SECRET_TOKEN", "aws_secret_access_key", "clientSecret"]),
    st.sampled_from(["=", ": ", " = ", "="]),
    st.sampled_from(['"', "'", ""]),
    _chars(_ALNUM, 12).map(lambda s: s + "9x"),
)
def test_an_assigned_secret_never_survives(name: str, sep: str, quote: str, value: str) -> None:
    out = R(f"config {name}{sep}{quote}{value}{quote}\nnext line")
    assert value not in out
    assert MARKER_RE.search(out)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30), st.text(alphabet=_ALNUM + "-_!", min_size=6, max_size=20), st.text(max_size=30))
def test_an_own_secret_never_survives(before: str, secret: str, after: str) -> None:
    r = Redactor([secret])
    out = r(before + secret + after)
    assert secret not in MARKER_RE.sub("", out)
    assert r(out) == out


def test_redact_obj_remembers_short_strings_without_changing_what_it_returns() -> None:
    r = Redactor(("owner-secret-value",))
    key = "sk-proj-" + "a1B2" * 12
    fields = [f"key {key}", "owner-secret-value", "walrus-index", f"key {key}"]
    first, second = r.redact_obj(fields), r.redact_obj(list(reversed(fields)))
    assert first == [r(x) for x in fields] and second == list(reversed(first))
    assert key not in str(first) and "owner-secret-value" not in str(second)
    for i in range(20_000):  # the memo is bounded: it starts again rather than grow
        r.redact_obj(f"keyword-{i}")
    assert len(r._memo) <= 8192  # the bound is the point


# --- unchanged(): one pass over a handoff's fields ----------------------------------------------------

_parts = st.lists(st.one_of(_texts, _secrets, st.sampled_from(_FRAGMENTS)), max_size=6)


@settings(max_examples=1500, deadline=None)
@given(_parts)
def test_unchanged_is_said_only_of_parts_that_redaction_leaves_as_they_are(parts: list[str]) -> None:
    r = Redactor(["owner-secret-1"])
    if r.unchanged(parts):
        assert [r(p) for p in parts] == parts


@settings(max_examples=300, deadline=None)
@given(_parts, st.sampled_from(_FRAGMENTS), st.sampled_from(_FRAGMENTS))
def test_unchanged_is_said_of_prose_with_common_keywords_and_refused_for_a_secret(
    parts: list[str], before: str, after: str
) -> None:
    prose = ["Fixed the tokenizer", "keyword index", "the key files", "pass the token count to the parser"]
    assert R.unchanged(prose)
    assert not R.unchanged([*prose, f"{before}sk-ant-api03-{'a1B2' * 10}{after}"])


def test_the_rules_regex_anchors_hold_where_a_newline_follows_or_precedes() -> None:
    # unchanged() joins the parts by newlines: an anchor that a part's own start or end satisfies and a
    # newline does not (^, $, \b, \Z, a negative look-behind) could hide a secret from it.
    from memory.redact.redactor import _GATE

    patterns = [rx.pattern for regexes in _GATE._regexes.values() for rx, _ in regexes]
    assert patterns
    for pattern in patterns:
        bare = pattern.replace("[^", "[")  # a negated class is not an anchor
        for token in ("^", "$", r"\A", r"\Z", r"\b", r"\B", "(?<!"):
            assert token not in bare, pattern
        lookaheads = re.findall(r"\(\?!(\[[^\]]*\])\)", pattern)
        assert len(lookaheads) == pattern.count("(?!"), pattern  # only of a class, so a newline can be judged
        assert all(re.fullmatch(cls, "\n") is None for cls in lookaheads), pattern
