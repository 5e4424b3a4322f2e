"""Secrets → ``[REDACTED:<kind>]`` markers, idempotently and fast.

Every transcript line passes through :class:`Redactor`, so the common case (text with no candidate
substring) must cost almost nothing: each rule has a gate, a regex with a literal prefix that CPython
searches as fast as ``in``, and the rule's real pattern runs only when its gate hits. Matches that
fall inside an existing marker are left alone, so a marker is never redacted again. A second stage
handles ``NAME=value`` assignments of secret-looking names (``.env`` files, ``export``, YAML, JSON,
kwargs, headers): keyword positions are found with ``str.find``, and the name and value around each
are judged by detect-secrets' keyword denylist plus our own rules against code false positives
(``token: str``, ``key = settings.key``). Patterns of token formats follow detect-secrets' plugins;
JWTs are validated with its ``JwtTokenDetector``. A pass repeats until nothing changes (only texts
that had a hit pay for the second pass), so ``redact(redact(x)) == redact(x)``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST

__all__ = ["MARKER_RE", "Redactor", "marker"]

MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
_MARKER_PREFIX = "[REDACTED:"
_MAX_ROUNDS = 4
_OWN_MIN = 6  # shorter configured values would shred ordinary words


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_OWN_MARKER = marker("own-secret")


_Replace = Callable[["re.Match[str]"], str | None]  # None: keep the match as it is


class _Rule:
    """One kind of secret: a cheap gate, the real pattern, and what a match becomes."""

    __slots__ = ("gate_re", "kind", "lower", "regex", "replace")

    def __init__(
        self, kind: str, gate: str, pattern: str, *, lower: bool = False, replace: _Replace | None = None
    ) -> None:
        self.kind = kind
        # A regex with a literal prefix is searched as fast as `in`; the rule runs only when it hits.
        self.gate_re = re.compile(gate)
        self.lower = lower  # the gate is searched in the lowercased text
        self.regex = re.compile(pattern)
        self.replace = replace  # None: the whole match becomes the marker

    def substitute(self, m: re.Match[str]) -> str:
        if _inside_marker(m.string, m.start()):
            return m.group(0)  # markers are never redacted again
        if self.replace is None:
            return marker(self.kind)
        result = self.replace(m)
        return m.group(0) if result is None else result


def _left_is_word(m: re.Match[str]) -> bool:
    i = m.start()
    return i > 0 and (m.string[i - 1].isalnum() or m.string[i - 1] in "_-")


def _right_is_word(m: re.Match[str]) -> bool:
    j = m.end()
    return j < len(m.string) and (m.string[j].isalnum() or m.string[j] in "_-")


def _token(kind: str, *, need_mixed: bool = False) -> _Replace:
    """A standalone token: not glued to a longer identifier; optionally must look random."""

    def replace(m: re.Match[str]) -> str | None:
        if _left_is_word(m) or _right_is_word(m):
            return None
        body = m.group(0)
        if need_mixed and not (
            any(c.isdigit() for c in body) and any(c.isupper() for c in body) and any(c.islower() for c in body)
        ):
            return None  # kebab-case identifiers such as "sk-learn-…" are not keys
        return marker(kind)

    return replace


def _jwt(m: re.Match[str]) -> str | None:
    if _left_is_word(m) or not JwtTokenDetector.is_formally_valid(m.group(0)):
        return None
    return marker("jwt")


# The user may be empty: redis://:password@host.
_URL_RE = re.compile(r"://([^:/?#\[\]@\s\"'<>\\]*):([^/?#\[\]@\s\"'<>\\]+)@")


def _url_password(m: re.Match[str]) -> str | None:
    inner = m
    password = inner.group(2)
    if password[0] in "$<{%*" or _is_placeholder(password):
        return None  # "${DB_PASSWORD}", "<password>", "****": references and placeholders
    return f"://{inner.group(1)}:{marker('password-in-url')}@"


_BEARER_RE = re.compile(r"(?i:(bearer)(\s+))([A-Za-z0-9._~+/-]{8,}=*)")


def _bearer(m: re.Match[str]) -> str | None:
    inner = m
    if _left_is_word(m) or not any(c.isdigit() for c in inner.group(3)):
        return None  # "bearer authentication" in prose
    return f"{inner.group(1)}{inner.group(2)}{marker('bearer-token')}"


_AUTH_RE = re.compile(
    r"(?i:((?:proxy-)?authorization)(\\?[\"']?\s*[:=]\s*\\?[\"']?)((?:basic|token|digest|bearer)\s+)?)"
    r"([^\s\"'\\,;]{8,})"
)


def _auth_header(m: re.Match[str]) -> str | None:
    inner = m
    if inner.group(4).startswith(("$", "{", "<", _MARKER_PREFIX)):
        return None
    scheme = inner.group(3) or ""
    kind = "bearer-token" if scheme.lower().startswith("bearer") else "auth-header"
    return f"{inner.group(1)}{inner.group(2)}{scheme}{marker(kind)}"


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "private-key",
        "PRIVATE KEY",
        r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        # Up to the END line; a block cut short (truncated output) loses its base64 and header lines.
        r"(?:[\s\S]{0,20000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\s|\\[rn])+(?:[A-Za-z0-9+/]{8,}={0,2}|[A-Za-z0-9+/]{1,7}={1,2}|[A-Za-z-]+: [^\n\\]*))*)",
    ),
    _Rule("anthropic-key", "sk-", r"sk-ant-[A-Za-z0-9_-]{20,}", replace=_token("anthropic-key")),
    _Rule(
        "openai-key",
        "sk-",
        r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        replace=_token("openai-key", need_mixed=True),
    ),
    _Rule(
        "aws-access-key",
        "A(?:KIA|SIA|BIA|CCA|3T)",
        r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}",
        replace=_token("aws-access-key"),
    ),
    _Rule(
        "github-token",
        "g(?:h[pousr]_|ithub_pat_)",
        r"g(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})",
        replace=_token("github-token"),
    ),
    _Rule(
        "slack-token",
        "xox|hooks\\.slack",
        r"(?:xox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9_/]+)",
        replace=_token("slack-token"),
    ),
    _Rule(
        "stripe-key",
        "k_(?:live|test)_",
        r"(?:sk|rk|pk)_(?:live|test)_[0-9a-zA-Z]{16,}",
        replace=_token("stripe-key"),
    ),
    _Rule("google-api-key", "AIza", r"AIza[0-9A-Za-z_-]{35}", replace=_token("google-api-key")),
    _Rule("gitlab-token", "glpat-", r"glpat-[0-9A-Za-z_-]{20,}", replace=_token("gitlab-token")),
    _Rule("huggingface-token", "hf_", r"hf_[A-Za-z0-9]{30,}", replace=_token("huggingface-token")),
    _Rule("npm-token", "npm_", r"npm_[A-Za-z0-9]{36}", replace=_token("npm-token")),
    _Rule(
        "telegram-bot-token",
        ":AA",
        r"[0-9]{8,10}:AA[0-9A-Za-z_-]{31,40}",
        replace=_token("telegram-bot-token"),
    ),
    _Rule("jwt", "eyJ", r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", replace=_jwt),
    _Rule("password-in-url", "://", _URL_RE.pattern, replace=_url_password),
    _Rule("auth-header", "authorization", _AUTH_RE.pattern, lower=True, replace=_auth_header),
    _Rule("bearer-token", "bearer", _BEARER_RE.pattern, lower=True, replace=_bearer),
)

# --- NAME=value assignments ------------------------------------------------------------------------

_HIT_RE = re.compile(
    r"(?i:key|secret|pass|pwd|token|credential)[\w.-]*"
    r"(?:\\?[\"'\]]){0,2}[ \t]*(?::=|=>|:(?![:/])|=(?![=~]))[ \t]*"
)
_HIT_WORDS_LOW = ("key", "secret", "pass", "pwd", "token", "credential")
_HIT_WORDS = tuple(v for w in _HIT_WORDS_LOW for v in (w, w.capitalize(), w.upper()))
_VALUE_RE = re.compile(
    # A quoted value may hold spaces (a passphrase); an unquoted one ends at the first.
    r"(?P<q>\\?[\"'`])(?P<qv>[^\r\n\"'`\\]{1,512})(?P=q)|(?P<uv>[^\s\"'`,;(){}\[\]<>\\]{1,512})(?P<after>[(.]?)"
)
_KEYWORDS = (*DENYLIST, "token", "credentials?", "passphrase", "access_?key", "secret_?key", "signing_?key")
_SECRET_NAME_RE = re.compile(r"(?:{})$|(?:^|_)pass$".format("|".join(_KEYWORDS)))
_ENV_NAME_RE = re.compile(r"[A-Z0-9_]*[A-Z][A-Z0-9_]*")
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD", "PRIMARY_KEY", "SORT_KEY", "FOREIGN_KEY", "PARTITION_KEY"})
_PLACEHOLDERS = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "str", "string", "int", "bool", "bytes"}
    | {"optional", "required", "secret", "password", "token", "changeme", "redacted", "example", "env"}
)
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _is_placeholder(value: str) -> bool:
    low = value.lower()
    return (
        low in _PLACEHOLDERS
        or len(set(value)) == 1  # "xxxxxxxx", "********"
        or "..." in value
        or "your" in low
        or low.startswith(("xxx", "<", "{{", "${", "$(", "%("))
    )


def is_secret_name(name: str) -> bool:
    """``DB_PASSWORD``, ``apiKey``, ``x-api-key``, ``client_secret``: names whose value is a secret."""
    name = name.rsplit(".", 1)[-1].strip("-_")
    if not name:
        return False
    if _ENV_NAME_RE.fullmatch(name):
        if name in _NOT_SECRET_ENV:
            return False
        if name.endswith("_KEY"):
            return True
    snake = _CAMEL_RE.sub("_", name).lower().replace("-", "_")
    return _SECRET_NAME_RE.search(snake) is not None


# Words of sentences, not of passphrases: a quoted value holding one is a message ("must be at least 8
# characters", "Paste the token from settings"), not a secret.
_PROSE_WORDS = frozenset(
    "a an the is are was were be been to of and or not no it its this that for from with your you do does did "
    "must should will can could in on at by as if than then here there please enter".split()
)


def _is_prose(value: str) -> bool:
    words = value.split()
    return (
        len(words) > 4
        or value.rstrip()[-1:] in (".", "!", "?", ":")
        or (words[0][:1].isupper() and words[0][1:].islower())  # "Reset password", "Enter password"
        or any(w.lower().strip(",;") in _PROSE_WORDS for w in words)
    )


def _value_is_secret(name: str, value: str, *, quoted: bool) -> bool:
    if len(value) < 4 or value.startswith(("$", "%", "{", "<", "#", "&", "*", _MARKER_PREFIX)):
        return False
    if _is_placeholder(value):
        return False
    env_style = _ENV_NAME_RE.fullmatch(name.rsplit(".", 1)[-1].strip("-_")) is not None
    if " " in value and not env_style and _is_prose(value):
        return False  # a message beside a code name; an ALL_CAPS variable's value is a secret whatever it says
    if quoted or env_style:
        return True
    # Unquoted value of a code-style name: `token: str`, `password=password` are code, not secrets.
    return len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _inside_marker(text: str, pos: int) -> bool:
    start = text.rfind(_MARKER_PREFIX, max(0, pos - 64), pos + 1)
    if start == -1:
        return False
    found = MARKER_RE.match(text, start)  # a whole marker, not just its prefix typed into the text
    return found is not None and found.end() > pos


def _keyword_positions(text: str, low: str) -> list[int]:
    # str.find runs at memory speed; a case-insensitive regex scan over every line would not.
    found: list[int] = []
    hay, words = (low, _HIT_WORDS_LOW) if len(low) == len(text) else (text, _HIT_WORDS)
    for word in words:
        i = hay.find(word)
        while i != -1:
            found.append(i)
            i = hay.find(word, i + 1)
    found.sort()
    return found


def _redact_assignments(text: str, low: str) -> str:
    out: list[str] = []
    last = 0
    for start in _keyword_positions(text, low):
        if start < last or _inside_marker(text, start):
            continue
        hit = _HIT_RE.match(text, start)
        if hit is None:
            continue
        name_start = start
        while name_start > 0 and text[name_start - 1] in _NAME_CHARS and start - name_start < 100:
            name_start -= 1
        name = re.split(r"[\\\"'\]\s:=]", text[name_start : hit.end()], maxsplit=1)[0]
        if not is_secret_name(name):
            continue
        value = _VALUE_RE.match(text, hit.end())
        if value is None:
            continue
        if value.group("qv") is not None:
            secret, quoted, (v_start, v_end) = value.group("qv"), True, value.span("qv")
        else:
            secret, quoted, (v_start, v_end) = value.group("uv"), False, value.span("uv")
            if value.group("after"):
                continue  # `token = make_token(...)`, `key = settings.key`: code references
        if not _value_is_secret(name, secret, quoted=quoted):
            continue
        out.append(text[last:v_start])
        out.append(marker("env-assignment"))
        last = v_end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


# --- the redactor ----------------------------------------------------------------------------------


class Redactor:
    """Callable text redactor; ``own_secrets`` are exact values the owner listed (replaced anywhere)."""

    def __init__(self, own_secrets: Sequence[str] = ()) -> None:
        # Very short values would shred ordinary text; the config should list real secrets.
        # Values that occur inside a marker would be replaced again on every pass.
        usable = {s for s in own_secrets if len(s.strip()) >= _OWN_MIN and "[" not in s and "]" not in s}
        self._own = tuple(sorted(usable, key=lambda s: (-len(s), s)))
        self._own_re = re.compile("|".join(re.escape(s) for s in self._own) or "(?!)")

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
            return self(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if (
                    isinstance(k, str)
                    and isinstance(v, str)
                    and is_secret_name(k)
                    and _value_is_secret(k, v.strip(), quoted=True)
                    and not MARKER_RE.fullmatch(v)
                ):
                    out[k] = marker("env-assignment")
                else:
                    out[self(k) if isinstance(k, str) else k] = self.redact_obj(v)
            return out
        if isinstance(value, list):
            return [self.redact_obj(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.redact_obj(v) for v in value)
        return value

    def _replace_own(self, text: str) -> str:
        # Outside markers only: "passwo" is a fine secret and also part of "[REDACTED:password-in-url]".
        parts = MARKER_RE.split(text) if _MARKER_PREFIX in text else [text]
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
        gates: dict[str, bool] = {}
        for rule in _RULES:
            hit = gates.get(rule.gate_re.pattern)
            if hit is None:
                hit = gates[rule.gate_re.pattern] = rule.gate_re.search(low if rule.lower else text) is not None
            if hit:
                new = rule.regex.sub(rule.substitute, text)
                if new != text:
                    text, low = new, new.lower()
        return _redact_assignments(text, low)
