"""The one tokenizer for queries, keywords and projects, so both sides of the index agree on terms.

Rules (docs/retrieval.md):

- Unicode NFKC, lowercase; a token is a run of letters and digits, and runs joined by ``-`` or
  ``_`` form one compound identifier (``eywa-mcp``, ``score_handoffs`` → ``score-handoffs``).
- A compound yields itself *and* its parts, so the keyword ``eywa-mcp`` is found by ``eywa``, by
  ``mcp`` and (most strongly, since all three terms match) by ``eywa-mcp``.
- Stopwords go; tokens shorter than 3 characters go unless allowlisted (``ai``, ``ui``, ``db``, …)
  or made of letters and digits (``s3``, ``v2``, ``3d``).
- Index and query terms are *folded* (:func:`fold`): plural ``s``/``es``/``ies`` and a final ``e``
  are dropped, so ``posting-lists`` meets ``list`` and ``caches`` meets ``cache``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "SHORT_TERMS",
    "STOPWORDS",
    "fold",
    "keyword_terms",
    "normalize_term",
    "project_terms",
    "query_terms",
    "tokenize",
]

# Letters/digits, optionally joined into one identifier by single hyphens or underscores.
_TOKEN = re.compile(r"[^\W_]+(?:[-_][^\W_]+)*")
_SEPARATORS = re.compile(r"[^\w]+|_+")
_PART = re.compile(r"[-_]")
_HAS_DIGIT = re.compile(r"\d")

SHORT_TERMS: frozenset[str] = frozenset(
    "ai ml ui ux api cli mcp llm gpu cpu tg db ci cd io os js ts go qa pr vm hr kb gh pg ip "
    "ar vr rl nlp sql css".split()
)

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all almost along already also although always am among an and
    another any anybody anyone anything anyway anywhere are aren around as at back be became because
    become been before being below between both but by can cannot could couldn did didn do does doesn
    doing don done down during each either else enough etc even ever every everyone everything
    few for from further get gets getting give given going gone got had hadn has hasn have haven
    having he her here hers herself him himself his how however i if in into is isn it its itself
    just keep know known let lets like made make many may maybe me might mine more most much must
    my myself need needs neither never no nobody none nor not nothing now of off often on once one
    only onto or other others otherwise our ours ourselves out over own per perhaps please quite
    rather really same say says see seem seems shall she should shouldn show since so some somebody
    someone something sometimes somewhere still such than that the their theirs them themselves then
    there therefore these they thing things think this those though through thus to together too
    toward towards under until up upon us use used using very via was wasn way we well were weren
    what whatever when whenever where whereas wherever whether which while who whoever whole whom
    whose why will with within without won would wouldn yes yet you your yours yourself yourselves
    continue work find want tell thanks thank hi hello okay ok
    """.split()
)


def _keep(token: str) -> bool:
    if token in STOPWORDS:
        return False
    if len(token) >= 3:
        return True
    return token in SHORT_TERMS or (len(token) == 2 and bool(_HAS_DIGIT.search(token)) and not token.isdigit())


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order, duplicates kept: each compound is followed by its kept parts."""
    out: list[str] = []
    for match in _TOKEN.finditer(unicodedata.normalize("NFKC", text).lower()):
        raw = match.group(0)
        if "-" not in raw and "_" not in raw:
            if _keep(raw):
                out.append(raw)
            continue
        compound = raw.replace("_", "-")
        parts = [p for p in _PART.split(raw) if _keep(p)]
        if parts and compound not in STOPWORDS:
            out.append(compound)
        out.extend(parts)
    return out


def normalize_term(term: str) -> str:
    """The lowercase-hyphenated form of a keyword or project name: ``"Eywa MCP"`` → ``"eywa-mcp"``."""
    text = unicodedata.normalize("NFKC", term).lower()
    return _SEPARATORS.sub("-", text).strip("-")


def fold(term: str) -> str:
    """Light, deterministic plural folding; applied to index and query terms alike.

    Only the end of the term changes, so a compound folds through its last part
    (``posting-lists`` → ``posting-list``). ``ss``/``us``/``is`` endings are kept (class, status, redis).
    """
    w = term
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        if w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith(("xes", "zes", "ches", "shes", "sses")):
            w = w[:-2]
        else:
            w = w[:-1]
    # A final "e" goes too, so "cache" and "caches" (→ "cach") meet; "ee" stays (tree, free).
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


def _unique(terms: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(terms))


def query_terms(text: str) -> list[str]:
    """The distinct folded terms of a query, in order of first appearance."""
    return _unique(fold(t) for t in tokenize(text))


def keyword_terms(keyword: str) -> list[str]:
    """The index terms of one keyword: its normalized form and its tokens, folded."""
    norm = normalize_term(keyword)
    if not norm:
        return []
    return _unique([fold(norm), *(fold(t) for t in tokenize(norm))])


def project_terms(project: str) -> list[str]:
    """The index terms of one project: its normalized full name plus the terms of its last path component.

    ``/home/me/src/eywa-mcp`` → ``home-me-src-eywa-mcp``, ``eywa-mcp``, ``eywa``, ``mcp``; the
    folders above the last one (``home``, ``src``) are left out: they would match everything.
    """
    full = normalize_term(project)
    if not full:
        return []
    last = next((p for p in reversed(re.split(r"[/\\]", project)) if p.strip()), project)
    return _unique([fold(full), *keyword_terms(last)])
