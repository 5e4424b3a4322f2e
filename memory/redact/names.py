"""Secrets beside their names: the value after a secret-looking name, in any of the ways text spells it.

``NAME=value`` and ``NAME: value`` (``.env`` files, ``export``, YAML, JSON, kwargs, headers), flags
(``--password value``), netrc entries (``machine host login me password value``) and connection
strings (``Server=…;Password=value;``). Positions of the keywords (key, secret, pass, pwd, token,
credential) are found with ``str.find``, which runs at memory speed, and each is judged where it
stands: the name by detect-secrets' keyword denylist, the value by our rules against code that merely
names a secret (``token: str``, ``key = settings.key``, ``password = get_password()``) and against
messages beside such names (``"password": "must be at least 8 characters"``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from detect_secrets.plugins.keyword import DENYLIST

from memory.redact.rules import MARKER_PREFIX, inside_marker, marker

__all__ = ["is_placeholder", "is_secret_name", "keyword_positions", "redact_named", "value_is_secret"]

_HIT_RE = re.compile(
    # The name's tail is bounded: over "key-key-key-…" an unbounded one made every keyword scan to the end.
    r"(?i:key|secret|pass|pwd|token|credential)[\w.-]{0,64}"
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
    # Code after a name and a colon or `=`: `if not API_KEY: raise …`, `const KEY = await …`.
    | {"raise", "return", "await", "yield", "new", "not", "lambda", "function", "typeof", "self", "this"}
)
# `settings.API_KEY`, `os.environ`, `e.session`: a reference in code (a token's parts hold digits).
_DOTTED_NAME_RE = re.compile(r"[A-Za-z_]+(?:\.[A-Za-z_]+)+")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
_NAME_END_RE = re.compile(r"[\\\"'\]\s:=]")


def is_placeholder(value: str) -> bool:
    low = value.lower()
    return (
        low in _PLACEHOLDERS
        or len(set(value)) == 1  # "xxxxxxxx", "********"
        or "..." in value
        or "your" in low
        or low.startswith(("xxx", "<", "{{", "${", "$(", "%("))
    )


@lru_cache(maxsize=4096)  # names repeat on every line: "input_tokens", "OPENAI_API_KEY"
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


def _is_reference(value: str) -> bool:
    # "$PASS", "%PASS%", "{password}", "<token>", "#comment", "&anchor", "*alias", or a marker already.
    return value.startswith(("$", "%", "{", "<", "#", "&", "*", MARKER_PREFIX))


def value_is_secret(name: str, value: str, *, quoted: bool) -> bool:
    if len(value) < 4 or _is_reference(value) or is_placeholder(value):
        return False
    env_style = _ENV_NAME_RE.fullmatch(name.rsplit(".", 1)[-1].strip("-_")) is not None
    if " " in value and not env_style and _is_prose(value):
        return False  # a message beside a code name; an ALL_CAPS variable's value is a secret whatever it says
    if quoted:
        return True
    if _DOTTED_NAME_RE.fullmatch(value):
        return False
    if env_style:
        return True
    # Unquoted value of a code-style name: `token: str`, `password=password` are code, not secrets.
    return len(value) >= 6 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def keyword_positions(text: str, low: str) -> list[int]:
    """Where a keyword starts, in order; ``low`` is ``text.lower()``."""
    found: list[int] = []
    hay, words = (low, _HIT_WORDS_LOW) if len(low) == len(text) else (text, _HIT_WORDS)
    for word in words:
        i = hay.find(word)
        while i != -1:
            found.append(i)
            i = hay.find(word, i + 1)
    found.sort()
    return found


_Span = tuple[int, int, str]  # the value's start and end, and the marker's kind


def _assignment(text: str, start: int) -> _Span | None:
    hit = _HIT_RE.match(text, start)
    if hit is None:
        return None
    window = text[max(0, start - 100) : start]
    name_start = start - (len(window) - len(window.rstrip(_NAME_CHARS)))
    name = _NAME_END_RE.split(text[name_start : hit.end()], maxsplit=1)[0]
    if not is_secret_name(name):
        return None
    value = _VALUE_RE.match(text, hit.end())
    if value is None:
        return None
    if value.group("qv") is not None:
        secret, quoted, group = value.group("qv"), True, "qv"
    else:
        secret, quoted, group = value.group("uv"), False, "uv"
        if value.group("after"):
            return None  # `token = make_token(...)`, `key = settings.key`: code references
    # In a URL's query string ("?user=me&password=…") a value is data, never code: judge it as if quoted.
    v_start, v_end = value.span(group)
    in_query = name_start > 0 and text[name_start - 1] in "?&" and hit.group(0).rstrip().endswith("=")
    if in_query:
        secret = re.split(r"[&#]", secret, maxsplit=1)[0]  # the next parameter is not part of it
        v_end = v_start + len(secret)
    if not value_is_secret(name, secret, quoted=quoted or in_query):
        return None
    return (v_start, v_end, "env-assignment")


# ADO.NET, ODBC and JDBC connection strings: "Server=db;User Id=sa;Password=any value here;".
_CONN_RE = re.compile(
    r"(?i:password|pwd)[ \t]*=[ \t]*(?P<v>[^;\r\n\"'\\]{1,200})"
    r"(?P<post>;[ \t]*[A-Za-z][\w ]*=)?"  # the next key=value pair, if any
)


def _connection_string(text: str, start: int) -> _Span | None:
    m = _CONN_RE.match(text, start)
    if m is None:
        return None
    # Another key=value pair beside it: code (`password = get();`) has neither a `;` before nor one after.
    if not (text[max(0, start - 20) : start].rstrip(" \t").endswith(";") or m.group("post")):
        return None
    value = m.group("v").rstrip(" \t")
    if not value or _is_reference(value) or is_placeholder(value):
        return None
    return (m.start("v"), m.start("v") + len(value), "connection-string-password")


# Flags with the secret after a space ("--password hunter2", "--api-key 'k'"); "--password=…" is an assignment.
_FLAG_NAMES = frozenset(
    {"password", "passwd", "pass", "token", "api-key", "apikey", "api-token", "access-token", "auth-token"}
    | {"secret", "client-secret", "secret-key"}
)
_FLAG_VALUE_RE = re.compile(
    r"[ \t]+(?:(?P<q>['\"])(?P<qv>[^'\"\r\n]{1,200})(?P=q)|(?P<v>[^\s'\"`;|&-][^\s'\"`;|&]{3,199}))"
)
_FLAG_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"


def _flag(text: str, start: int) -> _Span | None:
    window = text[max(0, start - 30) : start]
    flag_start = start - (len(window) - len(window.rstrip(_FLAG_NAME_CHARS)))
    if text[flag_start] != "-":
        return None
    end = start
    while end < len(text) and end - start < 30 and text[end] in _FLAG_NAME_CHARS:
        end += 1
    flag = text[flag_start:end]
    if not flag.startswith("-") or flag.lstrip("-").lower() not in _FLAG_NAMES or flag.startswith("---"):
        return None
    if flag_start > 0 and (text[flag_start - 1].isalnum() or text[flag_start - 1] == "_"):
        return None
    value = _FLAG_VALUE_RE.match(text, end)
    if value is None:
        return None
    group = "qv" if value.group("qv") is not None else "v"
    secret = value.group(group)
    if _is_reference(secret) or is_placeholder(secret):
        return None
    if group == "v" and secret.isalpha() and secret.islower():
        return None  # "the --username and --password options": a word of prose, not a password
    return (*value.span(group), "cli-password")


# netrc(5): "machine <host> [login <user>] [account …] password <secret>", over one line or several. In a
# raw JSON line a newline is the two characters \n.
_WS = r"(?:\s|\\[nrt])+"
_NETRC_PASSWORD_RE = re.compile(rf"password{_WS}(?P<v>[^\s\\]+)")
_NETRC_BEFORE_RE = re.compile(
    rf"(?:(?<=\\[nrt])|(?<![\w-]))(?:machine{_WS}(?P<host>[^\s\\]+)|default)"
    rf"(?:{_WS}(?:login|account|port|protocol){_WS}[^\s\\]+)*{_WS}\Z"  # the tokens up to "password"
)


def _netrc(text: str, start: int) -> _Span | None:
    m = _NETRC_PASSWORD_RE.match(text, start)
    if m is None:
        return None
    # The entry starts at the last "machine" (or "default") before the password, within a few lines.
    lo = max(0, start - 300)
    begin = max(text.rfind("machine", lo, start), text.rfind("default", lo, start))
    entry = _NETRC_BEFORE_RE.match(text, begin, start) if begin != -1 else None
    if entry is None:
        return None
    host = entry.group("host")
    if host is not None and not ("." in host or ":" in host or host == "localhost"):
        return None  # "the machine room password is …": prose, not a netrc entry
    value = m.group("v")
    if _is_reference(value) or is_placeholder(value):
        return None
    return (*m.span("v"), "netrc-password")


def redact_named(text: str, positions: list[int]) -> str:
    """Replaces the secret values beside the keywords at ``positions`` (from :func:`keyword_positions`)."""
    out: list[str] = []
    last = 0
    for start in positions:
        if start < last or inside_marker(text, start):
            continue
        span = _connection_string(text, start) or _assignment(text, start) or _flag(text, start)
        if span is None and text.startswith("password", start):
            span = _netrc(text, start)
        if span is None or span[0] < last:
            continue
        v_start, v_end, kind = span
        out.append(text[last:v_start])
        out.append(marker(kind))
        last = v_end
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)
