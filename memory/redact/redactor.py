"""Secrets → ``[REDACTED:<kind>]`` markers, idempotently and fast.

Every transcript line passes through :class:`Redactor`, so the common case (text with no candidate)
must cost almost nothing. Stage one: rules for token formats (memory.redact.rules, after detect-secrets'
plugins and gitleaks' default rules) and for secrets that their context gives away (this module: key
blocks, JWTs, passwords in URLs, ``Authorization`` headers, signed URLs, ``curl -u``, docker's auths,
AWS secret keys), each run only where memory.redact.gate finds its anchors. Stage two: the value beside
a secret-looking name (memory.redact.names). Matches inside an existing marker are left alone, so a
marker is never redacted again, and a pass repeats until nothing changes (only texts that had a hit pay
for the second pass), so ``redact(redact(x)) == redact(x)``."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from detect_secrets.plugins.jwt import JwtTokenDetector

from memory.redact.gate import Anchor, Gate
from memory.redact.names import is_placeholder, is_secret_name, keyword_positions, redact_named, value_is_secret
from memory.redact.rules import MARKER_PREFIX, MARKER_RE, TOKEN_FORMATS, inside_marker, marker

__all__ = ["MARKER_RE", "Redactor", "hides_value", "is_secret_name", "marker"]

_MAX_ROUNDS = 4
_OWN_MIN = 6  # shorter configured values would shred ordinary words
_OWN_MARKER = marker("own-secret")

_Replace = Callable[["re.Match[str]"], str | None]  # None: keep the match as it is


class _Rule:
    """One kind of secret: the anchors the gate looks for, the real pattern, and what a match becomes."""

    __slots__ = ("anchors", "kind", "near", "regex", "replace")

    def __init__(
        self,
        kind: str,
        anchors: Sequence[str | Anchor],
        pattern: str,
        *,
        replace: _Replace | None = None,
        near: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        # The rule runs only on a text that holds one of its anchors (see redact_gate.Gate).
        self.anchors = tuple(a if isinstance(a, Anchor) else Anchor(a) for a in anchors)
        self.regex = re.compile(pattern)
        self.replace = replace  # None: the whole match becomes the marker
        self.near = near  # lowercase words: the pattern is looked for only within _NEAR characters of them

    def substitute(self, m: re.Match[str]) -> str:
        if inside_marker(m.string, m.start()):
            return m.group(0)  # markers are never redacted again
        if self.replace is None:
            return marker(self.kind)
        result = self.replace(m)
        return m.group(0) if result is None else result

    def apply(self, text: str, low: str) -> str:
        if not self.near or len(low) != len(text):  # (lowercasing changed the length: no positions to share)
            return self.regex.sub(self.substitute, text)
        out: list[str] = []
        last = 0
        for lo, hi in _windows(low, self.near):
            # Matches may end up to _NEAR past the window (so look-aheads see the real text) but start in it.
            for m in self.regex.finditer(text, max(lo, last), hi + _NEAR):
                if m.start() >= hi:
                    break
                new = self.substitute(m)
                if new != m.group(0):
                    out.append(text[last : m.start()])
                    out.append(new)
                    last = m.end()
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)


_NEAR = 400


def _windows(low: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for word in words:
        i = low.find(word)
        while i != -1:
            spans.append((max(0, i - _NEAR), i + len(word) + _NEAR))
            i = low.find(word, i + 1)
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _left_is_word(m: re.Match[str]) -> bool:
    i = m.start()
    return i > 0 and (m.string[i - 1].isalnum() or m.string[i - 1] in "_-")


def _right_is_word(m: re.Match[str]) -> bool:
    j = m.end()
    return j < len(m.string) and (m.string[j].isalnum() or m.string[j] in "_-")


def _token(kind: str, *, need_mixed: bool = False, after: str = "") -> _Replace:
    """A standalone token: not glued to a longer identifier; optionally must look random."""

    def replace(m: re.Match[str]) -> str | None:
        glued_left = _left_is_word(m) and not (after and m.string.endswith(after, 0, m.start()))
        if glued_left or _right_is_word(m):
            return None
        body = m.group(0)
        if need_mixed and not (
            any(c.isdigit() for c in body) and any(c.isupper() for c in body) and any(c.islower() for c in body)
        ):
            return None  # kebab-case identifiers such as "sk-learn-…" are not keys
        return marker(kind)

    return replace


def _value(kind: str, *, check: Callable[[str], bool] | None = None) -> _Replace:
    """Only the group ``v`` becomes the marker; the words around it (the name, the user) stay."""

    def replace(m: re.Match[str]) -> str | None:
        value = m.group("v")
        if value.startswith(("$", "{", "<", "%", MARKER_PREFIX)) or is_placeholder(value):
            return None  # "$PASS", "{password}", "<token>": references and placeholders
        if check is not None and not check(value):
            return None
        s, e = m.span("v")
        return m.string[m.start() : s] + marker(kind) + m.string[e : m.end()]

    return replace


def _jwt(m: re.Match[str]) -> str | None:
    if _left_is_word(m) or not JwtTokenDetector.is_formally_valid(m.group(0)):
        return None
    return marker("jwt")


# The user may be empty: redis://:password@host.
_URL_RE = re.compile(r"://([^:/?#\[\]@\s\"'<>\\]*):([^/?#\[\]@\s\"'<>\\]+)@")


def _url_password(m: re.Match[str]) -> str | None:
    password = m.group(2)
    if password[0] in "$<{%*" or is_placeholder(password):
        return None  # "${DB_PASSWORD}", "<password>", "****": references and placeholders
    return f"://{m.group(1)}:{marker('password-in-url')}@"


_BEARER_RE = re.compile(r"(?i:(bearer)(\s+))([A-Za-z0-9._~+/-]{8,}=*)")


def _bearer(m: re.Match[str]) -> str | None:
    if _left_is_word(m) or not any(c.isdigit() for c in m.group(3)):
        return None  # "bearer authentication" in prose
    return f"{m.group(1)}{m.group(2)}{marker('bearer-token')}"


_AUTH_RE = re.compile(
    r"(?i:((?:proxy-)?authorization)(\\?[\"']?\s*[:=]\s*\\?[\"']?)((?:basic|token|digest|bearer)\s+)?)"
    r"([^\s\"'\\,;]{8,})"
)


def _auth_header(m: re.Match[str]) -> str | None:
    if m.group(4).startswith(("$", "{", "<", MARKER_PREFIX)):
        return None
    scheme = m.group(3) or ""
    kind = "bearer-token" if scheme.lower().startswith("bearer") else "auth-header"
    return f"{m.group(1)}{m.group(2)}{scheme}{marker(kind)}"


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _aws_secret(value: str) -> bool:
    # 40 characters of base64 at random: not a git SHA (hex), a path or a run of words.
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and not all(c in "0123456789abcdefABCDEF" for c in value)
        and _entropy(value) >= 4.2
    )


def _docker_auth(value: str) -> bool:
    try:
        return b":" in base64.b64decode(value, validate=True)  # base64 of "user:password"
    except (binascii.Error, ValueError):
        return False


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private-key",
        ["PRIVATE KEY"],
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        # Up to the END line; a block cut short (truncated output) loses its base64 and header lines.
        r"(?:[\s\S]{0,20000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\s|\\[rn])+(?:[A-Za-z0-9+/]{8,}={0,2}|[A-Za-z0-9+/]{1,7}={1,2}|[A-Za-z-]+: [^\n\\]*))*)",
    ),
    # ours: PuTTY's .ppk files, up to the MAC line (or the end of a cut-off one).
    _Rule(
        "private-key",
        ["PuTTY-User-Key-File-"],
        r"PuTTY-User-Key-File-[0-9]:[\s\S]{0,20000}?(?:Private-(?:MAC|Hash):[ \t]*[0-9a-fA-F]+|\Z)",
    ),
    *(
        _Rule(f.kind, f.anchors, f.pattern, replace=_token(f.kind, need_mixed=f.mixed, after=f.after))
        for f in TOKEN_FORMATS
    ),
    # detect-secrets JwtTokenDetector validates the header and payload.
    _Rule("jwt", ["eyJ"], r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", replace=_jwt),
    # detect-secrets BasicAuthDetector; ours: the user and host stay, references stay.
    _Rule("password-in-url", ["://"], _URL_RE.pattern, replace=_url_password),
    _Rule("auth-header", [Anchor("authorization", fold=True)], _AUTH_RE.pattern, replace=_auth_header),
    _Rule("bearer-token", [Anchor("bearer", fold=True)], _BEARER_RE.pattern, replace=_bearer),
    # ours: a Twilio auth token right after its account SID (Client("AC…", "…"), "AC…:…@api.twilio.com").
    _Rule(
        "twilio-key",
        [Anchor(r"AC[0-9a-fA-F]{32}", regex=True)],
        r"(?<=\[REDACTED:twilio-key\])[\s\"',:/\\]{1,8}(?P<v>[0-9a-fA-F]{32})(?![0-9A-Za-z])",
        replace=_value("twilio-key"),
    ),
    # ours, after gitleaks curl-auth-user: "curl -u user:password".
    _Rule(
        "basic-auth",
        [" -u ", "--user"],
        r"\bcurl\b[^\n]{0,400}?\s(?:-u|--user)(?:[ \t]+|=)\\?['\"]?[^\s:'\"\\]{1,100}:(?P<v>[^\s'\"\\]{1,200})",
        replace=_value("basic-auth"),
    ),
    # ours: "docker login -u me -p secret" (and podman's, helm's).
    _Rule(
        "cli-password",
        [" -p "],
        r"\b(?:docker|podman|helm)\s+(?:registry\s+)?login\b[^\n]{0,200}?\s-p[ \t]+(?P<v>[^\s'\"]+)",
        replace=_value("cli-password"),
    ),
    # ours: docker's config.json keeps base64("user:password") under "auth".
    _Rule(
        "docker-auth",
        ['"auth'],
        r"\\?\"auth\\?\"\s*:\s*\\?\"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?=\\?\")",
        replace=_value("docker-auth", check=_docker_auth),
    ),
    # ours: signed URLs (Azure SAS, S3 and GCS pre-signed) carry a bearer signature in the query.
    _Rule(
        "url-signature",
        ["sig=", "X-Amz-Signature=", "X-Amz-Security-Token=", "X-Goog-Signature="],
        r"[?&;](?:sig|X-Amz-Signature|X-Amz-Security-Token|X-Goog-Signature)=(?P<v>[^&\s\"'#<>\\]{16,})",
        replace=_value("url-signature"),
    ),
    # detect-secrets AzureStorageKeyDetector: "AccountKey=…" in storage and service bus connection strings.
    _Rule(
        "azure-storage-key",
        ["AccountKey=", "SharedAccessKey="],
        r"(?:AccountKey|SharedAccessKey)=(?P<v>[A-Za-z0-9+/]{40,88}={0,2})",
        replace=_value("azure-storage-key"),
    ),
    # ours: an AWS secret access key has no prefix; 40 base64 characters count as one near "aws" or a key id.
    _Rule(
        "aws-secret-key",
        ["AKIA", "ASIA", Anchor("aws", fold=True)],
        r"(?<![A-Za-z0-9/+=])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        replace=_value("aws-secret-key", check=_aws_secret),
        near=("aws", "akia", "asia"),
    ),
)
_MEMO_CHARS = 200  # strings up to this long are remembered by redact_obj
_MEMO_SIZE = 8192  # entries kept before the memo starts again (bounded memory: ~2 MB)
_GATE = Gate([(a, i) for i, rule in enumerate(_RULES) for a in rule.anchors])


def hides_value(key: str, value: str) -> bool:
    """Whether a string stored under ``key`` (a JSON field, a tool input's argument) is a secret as a whole:
    the key names one (``password``, ``API_TOKEN``) and the value is not a placeholder or a message."""
    return is_secret_name(key) and value_is_secret(key, value.strip(), quoted=True) and not MARKER_RE.fullmatch(value)


class Redactor:
    """Callable text redactor; ``own_secrets`` are exact values the owner listed (replaced anywhere)."""

    def __init__(self, own_secrets: Sequence[str] = ()) -> None:
        # Very short values would shred ordinary text; the config should list real secrets.
        # Values that occur inside a marker would be replaced again on every pass.
        usable = {s for s in own_secrets if len(s.strip()) >= _OWN_MIN and "[" not in s and "]" not in s}
        self._own = tuple(sorted(usable, key=lambda s: (-len(s), s)))
        self._own_re = re.compile("|".join(re.escape(s) for s in self._own) or "(?!)")
        self._memo: dict[str, str] = {}  # short string -> redacted (see redact_obj)

    def __call__(self, text: str) -> str:
        for _ in range(_MAX_ROUNDS):
            new = self._once(text)
            if new == text:
                return text
            text = new
        return text

    def redact_obj(self, value: Any) -> Any:
        """Redacts every string inside dicts/lists/tuples; a secret-named key hides its whole string value."""
        if isinstance(value, str):
            if len(value) > _MEMO_CHARS:
                return self(value)
            # Short fields (a project, a keyword, a model) recur across records: each is redacted once.
            found = self._memo.get(value)
            if found is None:
                if len(self._memo) >= _MEMO_SIZE:
                    self._memo.clear()
                found = self._memo[value] = self(value)
            return found
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if isinstance(k, str) and isinstance(v, str) and hides_value(k, v):
                    out[k] = marker("env-assignment")
                else:
                    out[self(k) if isinstance(k, str) else k] = self.redact_obj(v)
            return out
        if isinstance(value, list):
            return [self.redact_obj(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.redact_obj(v) for v in value)
        return value

    def unchanged(self, texts: Sequence[str]) -> bool:
        """Whether redacting each of ``texts`` would give it back as it is, judged by one pass over them
        joined by newlines (a handoff's dozen short fields, one by one, cost a dozen passes).

        True is exact. A rule runs only where the gate finds an anchor, and each test the gate and the
        owner's secrets make holds in the joined text where it holds in a part: literals, ``in`` tests,
        positive look-behinds, look-aheads that a newline satisfies (tests/memory/redact/test_redactor.py holds
        the rules' regex anchors to that). The named-value finder judges a keyword by its own line, which
        a newline ends on both sides. False: some part may change.
        """
        joined = "\n".join(texts)
        low = joined.lower()
        if len(low) != len(joined):  # keyword_positions reads such a text another way: one by one, then
            return False
        if any(own in joined for own in self._own) or _GATE.rules_in(joined, low):
            return False
        positions = keyword_positions(joined, low)  # "token", "key": common words; most are no secret
        return not positions or redact_named(joined, positions) == joined

    def _replace_own(self, text: str) -> str:
        # Outside markers only: "passwo" is a fine secret and also part of "[REDACTED:password-in-url]".
        parts = MARKER_RE.split(text) if MARKER_PREFIX in text else [text]
        markers = MARKER_RE.findall(text) if len(parts) > 1 else []
        for i, part in enumerate(parts):
            if any(own in part for own in self._own):
                parts[i] = self._own_re.sub(_OWN_MARKER, part)  # one pass: never inside a fresh marker
        out = [parts[0]]
        for found, part in zip(markers, parts[1:], strict=True):
            out.append(found)
            out.append(part)
        return "".join(out)

    def _once(self, text: str) -> str:
        if self._own:
            text = self._replace_own(text)
        low = text.lower()
        for i in sorted(_GATE.rules_in(text, low)):
            new = _RULES[i].apply(text, low)
            if new != text:
                text, low = new, new.lower()
        return redact_named(text, keyword_positions(text, low))
