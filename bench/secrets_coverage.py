"""How much of the credential corpus memory.redact.redactor catches, and how much ordinary text it leaves alone.

The corpus: every kind in tests/fixtures/secrets/kinds.toml, each sample generated from the kind's format
with a seeded random source and set into contexts (prose, code, JSON, shell, logs; each once more as it
stands JSON-escaped in a raw transcript line), and negatives: the hand-written lines of
tests/fixtures/secrets/negatives.txt plus generated hashes, UUIDs, base64 blobs, minified code, git SHAs,
prose and code, paths and URLs without credentials. A sample counts as redacted when no 8 characters
in a row of any of its random parts survive; a kind is covered when all of its samples are; a negative
is a false positive when redaction changes it at all.

Run: .venv/bin/python -m bench.secrets_coverage [--seed N] [--draws N] [--show N] [--code DIR]

``--code DIR`` also counts the lines changed in every ``*.py`` file under DIR (say, the virtualenv's
site-packages): a check on code nobody wrote for this corpus.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import string
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memory.redact.redactor import Redactor

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "secrets"
WINDOW = 8  # a surviving run of this many characters of a secret counts as a leak

# Where a token stands in a session: the same token in each (plus each kind's own samples).
CONTEXTS = (
    "{token}",
    "Here it is: {token} (keep it safe)",
    'client = Client("{token}")',
    '{{"value": "{token}", "retries": 3}}',
    "Use `{token}` for the staging box.",
    "2024-05-01T10:00:00Z INFO loaded credential {token} from the vault",
    "curl -s https://api.example.com/v1/items -H 'X-Request-Source: {token}'",
    "args: ['--input', '{token}', '--verbose']",
    "{token}\nnext line",
    "  '{token}',",
    "<td>{token}</td>",
    "export VENDOR_ID={token}",
)

_ALPHABETS = {
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "alnum": string.ascii_letters + string.digits,
    "lower": string.ascii_lowercase,
    "upper": string.ascii_uppercase,
    "upnum": string.ascii_uppercase + string.digits,
    "lownum": string.ascii_lowercase + string.digits,
    "digits": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
    "bech32": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
}
_HOSTS = ("db.internal.example.com", "api.example.org", "10.0.3.17", "git.example.net", "localhost")
_USERS = ("admin", "deploy", "alice", "svc-backup", "app")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z0-9-]+)(?::([^{}]*))?\}")


@dataclass(frozen=True)
class Sample:
    kind: str
    text: str
    pieces: tuple[str, ...]  # the random parts: none of their WINDOW-long runs may survive


@dataclass
class Report:
    kinds: int = 0
    kinds_covered: int = 0
    samples: int = 0
    redacted: int = 0
    negatives: int = 0
    false_positives: int = 0
    misses: list[tuple[Sample, str]] = field(default_factory=list)
    changed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def recall(self) -> float:
        return self.redacted / self.samples if self.samples else 1.0

    @property
    def kind_recall(self) -> float:
        return self.kinds_covered / self.kinds if self.kinds else 1.0

    @property
    def fp_rate(self) -> float:
        return self.false_positives / self.negatives if self.negatives else 0.0


class _Gen:
    """Fills a template; ``pieces`` collects the random (secret) parts it drew."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.pieces: list[str] = []

    def chars(self, alphabet: str, n: int) -> str:
        s = "".join(self.rng.choice(alphabet) for _ in range(n))
        self.pieces.append(s)
        return s

    def password(self, n: int) -> str:
        # As password managers make them by default: both cases and a digit.
        while True:
            s = "".join(self.rng.choice(_ALPHABETS["alnum"]) for _ in range(n))
            if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s):
                self.pieces.append(s)
                return s

    def fill(self, template: str, values: dict[str, str]) -> str:
        def one(m: re.Match[str]) -> str:
            if m.group(0) in ("{{", "}}"):
                return m.group(0)[0]
            name, arg = m.group(1), m.group(2) or ""
            if name in values:
                return values[name]
            return self.placeholder(name, arg)

        return _PLACEHOLDER.sub(one, template)

    def placeholder(self, name: str, arg: str) -> str:
        if name in _ALPHABETS:
            return self.chars(_ALPHABETS[name], int(arg))
        if name == "pw":
            return self.password(int(arg))
        if name == "one":
            return self.rng.choice(arg.split("|"))
        if name == "host":
            return self.rng.choice(_HOSTS)
        if name == "user":
            return self.rng.choice(_USERS)
        if name == "uuid":
            u = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            self.pieces.append(u)
            return u
        if name == "basic":
            user = self.rng.choice(_USERS)
            return self._b64piece(f"{user}:{self.password(int(arg))}".encode())
        if name == "jwt":
            return self._jwt()
        if name in ("pem", "pem-escaped"):
            return self._pem(self.rng.choice(arg.split("|")), escaped=name == "pem-escaped")
        raise ValueError(f"unknown placeholder {{{name}}}")

    def _b64piece(self, raw: bytes) -> str:
        s = base64.b64encode(raw).decode()
        self.pieces.append(s)
        return s

    def _jwt(self) -> str:
        def part(obj: object) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        claims = {"sub": str(self.rng.randrange(10**6)), "iat": 1700000000 + self.rng.randrange(10**6)}
        head, body = part({"alg": "HS256", "typ": "JWT"}), part(claims)
        sig = self.chars(_ALPHABETS["b64url"], 43)
        self.pieces.append(body)
        return f"{head}.{body}.{sig}"

    def _pem(self, label: str, *, escaped: bool) -> str:
        lines = [self.chars(_ALPHABETS["b64"], 64) for _ in range(self.rng.randrange(4, 9))]
        lines.append(self.chars(_ALPHABETS["b64"], 20) + "==")
        nl = "\\n" if escaped else "\n"
        header = f"Version: demo{nl}{nl}" if "PGP" in label else ""
        body = nl.join(lines)
        return f"-----BEGIN {label}-----{nl}{header}{body}{nl}-----END {label}-----{nl if escaped else ''}"


def load_kinds(path: Path = FIXTURES / "kinds.toml") -> list[dict[str, object]]:
    with path.open("rb") as fh:
        kinds: list[dict[str, object]] = tomllib.load(fh)["kind"]
    return kinds


def _json_escaped(text: str) -> str:
    # As the sample stands in a raw transcript line: inside a JSON string, newlines and quotes escaped.
    return json.dumps({"type": "tool_result", "content": text})


def samples(kinds: list[dict[str, object]], *, seed: int = 1, draws: int = 2) -> list[Sample]:
    """``draws`` samples per context of each kind, each also JSON-escaped."""
    rng = random.Random(seed)
    out: list[Sample] = []
    for spec in kinds:
        kind = str(spec["id"])
        listed = spec.get("samples", [])
        own = [str(s) for s in listed] if isinstance(listed, list) else []
        templates = [*CONTEXTS, *own] if "token" in spec else own
        for template in templates:
            for _ in range(draws):
                gen = _Gen(rng)
                if "token" in spec:
                    token = gen.fill(str(spec["token"]), {})
                    text = gen.fill(template, {"token": token})
                else:
                    secret = gen.fill(str(spec["secret"]), {})
                    drawn = list(gen.pieces)
                    text = gen.fill(template, {"secret": secret})
                    gen.pieces = drawn  # random context (other keys, hosts) is not this sample's secret
                out.append(Sample(kind, text, tuple(gen.pieces)))
                out.append(Sample(kind, _json_escaped(text), tuple(gen.pieces)))
    return out


def _leaks(sample: Sample, out: str) -> bool:
    for piece in sample.pieces:
        if len(piece) < WINDOW:
            continue
        if any(piece[i : i + WINDOW] in out for i in range(len(piece) - WINDOW + 1)):
            return True
    return False


# --- negatives ---------------------------------------------------------------------------------------------

_WORDS = (
    "the a to of and in for on with is that this it we you our key token password secret credential auth api "
    "login user account session config server client request response cache index file path build test deploy "
    "value name error retry timeout default machine bearer hash salt vault rotate store read write fetch "
    "update because when then after before should must will can"
).split()
_IDENT = ("user", "token", "key", "config", "session", "auth", "cache", "item", "value", "secret", "client")
_EXT = ("py", "ts", "go", "rs", "md", "json", "yaml", "toml", "sh", "txt", "lock")


def _ident(rng: random.Random) -> str:
    parts = rng.sample(_IDENT, rng.randrange(1, 4))
    style = rng.randrange(3)
    if style == 0:
        return "_".join(parts)
    if style == 1:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "_".join(parts).upper()


def _hexs(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _b64s(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n)).decode()


_NEGATIVE_MAKERS: tuple[Callable[[random.Random], str], ...] = (
    # hashes
    lambda r: f"{r.choice(['md5', 'sha1', 'sha256', 'sha512'])}: {_hexs(r, r.choice([32, 40, 64, 128]))}",
    lambda r: f'ETag: "{_hexs(r, 32)}"',
    lambda r: f"{_hexs(r, 64)}  dist/app-{r.randrange(1, 9)}.{r.randrange(20)}.tar.gz",
    lambda r: f'"integrity": "sha512-{_b64s(r, 64)}"',
    lambda r: f"checksum={_hexs(r, 64)}",
    # UUIDs
    lambda r: f"request-id: {uuid.UUID(int=r.getrandbits(128), version=4)}",
    lambda r: f'"session_id": "{uuid.UUID(int=r.getrandbits(128), version=4)}"',
    lambda r: f"/api/v1/items/{str(uuid.UUID(int=r.getrandbits(128), version=4)).upper()}/history",
    # base64 blobs
    lambda r: f"data:image/png;base64,{_b64s(r, r.randrange(60, 600))}",
    lambda r: f'{{"type": "thinking", "signature": "{_b64s(r, r.randrange(100, 400))}"}}',
    lambda r: _b64s(r, 57),
    lambda r: f"content: {_b64s(r, r.randrange(16, 120))}",
    # git
    lambda r: f"commit {_hexs(r, 40)}",
    lambda r: f"{_hexs(r, 7)} {' '.join(r.choices(_WORDS, k=r.randrange(3, 8))).capitalize()}",
    lambda r: f"git checkout {_hexs(r, 40)} -- src/",
    lambda r: f"Merge: {_hexs(r, 7)} {_hexs(r, 7)}",
    # minified code
    lambda r: (
        f"!function(e,t){{var n={{{_ident(r)}:e.{_ident(r)},{_ident(r)}:t}};return n.{_ident(r)}||e}}"
        f"(this,function(){{return{{key:{r.randrange(99)},token:null}}}});"
    ),
    lambda r: f"var {r.choice('abcdefg')}=function(e){{return e.{_ident(r)}&&e.{_ident(r)}.length>{r.randrange(9)}}};",
    lambda r: f".{_ident(r).replace('_', '-').lower()}{{color:#{_hexs(r, 6)};margin:{r.randrange(20)}px}}",
    # prose
    lambda r: " ".join(r.choices(_WORDS, k=r.randrange(6, 20))).capitalize() + r.choice(".!?"),
    # code
    lambda r: f"{_ident(r)} = settings.{_ident(r)}",
    lambda r: f'{_ident(r)} = os.environ.get("{_ident(r).upper()}")',
    lambda r: f"def {_ident(r).lower()}({_ident(r).lower()}: str) -> bool:",
    lambda r: f"if not {_ident(r)}: raise ValueError('missing {r.choice(_IDENT)}')",
    lambda r: f"const {_ident(r)} = await get{r.choice(_IDENT).capitalize()}({_ident(r)});",
    # paths
    lambda r: (
        f"/home/{r.choice(_USERS)}/projects/{r.choice(_IDENT)}/src/{_ident(r).lower()}/{_ident(r).lower()}."
        f"{r.choice(_EXT)}"
    ),
    lambda r: f"./{_ident(r).lower()}/{_ident(r).lower()}_{r.randrange(100)}.{r.choice(_EXT)}:{r.randrange(1, 999)}",
    # URLs without credentials
    lambda r: (
        f"https://github.com/{r.choice(_USERS)}/{r.choice(_IDENT)}-{r.choice(_IDENT)}/pull/{r.randrange(1, 9999)}"
    ),
    lambda r: f"https://example.com/search?q={r.choice(_WORDS)}+{r.choice(_WORDS)}&page={r.randrange(1, 20)}",
    lambda r: f"git@github.com:{r.choice(_USERS)}/{r.choice(_IDENT)}.git",
    lambda r: (
        f"{r.choice(['postgres', 'redis', 'mongodb', 'amqp'])}://{r.choice(_HOSTS)}:{r.randrange(1000, 9999)}/app"
    ),
    lambda r: f"https://{r.choice(_USERS)}@{r.choice(_HOSTS)}/{r.choice(_IDENT)}",
)


def negatives(*, seed: int = 1, count: int = 1200, path: Path = FIXTURES / "negatives.txt") -> list[str]:
    """The hand-written lines plus ``count`` generated ones, a fair share of each kind."""
    lines = [
        line.replace("\\n", "\n")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    rng = random.Random(seed)
    lines += [_NEGATIVE_MAKERS[i % len(_NEGATIVE_MAKERS)](rng) for i in range(count)]
    return lines


# --- measuring ---------------------------------------------------------------------------------------------


def measure(redact: Callable[[str], str], corpus: list[Sample], negative: list[str]) -> Report:
    report = Report()
    start = time.perf_counter()
    by_kind: dict[str, bool] = {}
    for sample in corpus:
        out = redact(sample.text)
        ok = not _leaks(sample, out)
        report.samples += 1
        report.redacted += ok
        by_kind[sample.kind] = by_kind.get(sample.kind, True) and ok
        if not ok:
            report.misses.append((sample, out))
    report.kinds = len(by_kind)
    report.kinds_covered = sum(by_kind.values())
    for text in negative:
        out = redact(text)
        report.negatives += 1
        if out != text:
            report.false_positives += 1
            report.changed.append((text, out))
    report.seconds = time.perf_counter() - start
    return report


def _lines(report: Report, show: int) -> Iterator[str]:
    yield f"kinds covered: {report.kinds_covered}/{report.kinds} ({report.kind_recall:.1%})"
    yield f"samples redacted: {report.redacted}/{report.samples} ({report.recall:.2%})"
    yield f"false positives: {report.false_positives}/{report.negatives} ({report.fp_rate:.2%})"
    yield f"time: {report.seconds:.2f} s"
    for sample, out in report.misses[:show]:
        yield f"MISS {sample.kind}: {out[:300]!r}"
    for text, out in report.changed[:show]:
        yield f"FP {text[:150]!r} -> {out[:150]!r}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=2, help="samples per context and kind")
    parser.add_argument("--show", type=int, default=10, help="misses and false positives to print")
    parser.add_argument("--code", type=Path, help="also count changed lines in the *.py files under this folder")
    args = parser.parse_args()
    redactor = Redactor()
    corpus = samples(load_kinds(), seed=args.seed, draws=args.draws)
    report = measure(redactor, corpus, negatives(seed=args.seed))
    for line in _lines(report, args.show):
        print(line)
    if args.code is not None:
        code = [
            line
            for path in sorted(args.code.rglob("*.py"))
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        ]
        changed = [(line, out) for line in code if (out := redactor(line)) != line]
        print(f"code lines changed: {len(changed)}/{len(code)} ({len(changed) / max(len(code), 1):.3%})")
        for line, out in changed[: args.show]:
            print(f"CHANGED {line.strip()[:150]!r} -> {out.strip()[:150]!r}")


if __name__ == "__main__":
    main()
