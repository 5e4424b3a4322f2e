"""The tokenizer: stopwords, short terms, compounds and their parts, normalization and plural folding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory.index.tokenize import fold, keyword_terms, normalize_term, project_terms, query_terms, tokenize


def test_lowercases_and_drops_stopwords_and_short_tokens() -> None:
    assert tokenize("Let's continue work on the Retrieval of a DB") == ["retrieval", "db"]


def test_keeps_allowlisted_short_terms_and_letter_digit_pairs() -> None:
    assert tokenize("AI ML UI api cli mcp llm gpu tg go ts S3 v2 3d 42 x") == [
        "ai", "ml", "ui", "api", "cli", "mcp", "llm", "gpu", "tg", "go", "ts", "s3", "v2", "3d",
    ]  # fmt: skip


def test_compound_identifier_yields_itself_then_its_parts() -> None:
    assert tokenize("eywa-mcp score_handoffs") == ["eywa-mcp", "eywa", "mcp", "score-handoffs", "score", "handoffs"]
    assert tokenize("state-of-the-art") == ["state-of-the-art", "state", "art"]
    assert tokenize("--flag -x a-b") == ["flag"]


def test_punctuation_and_unicode_split_cleanly() -> None:
    assert tokenize("retrieval.py: «Überprüfung» (naïve) café—résumé") == [
        "retrieval", "überprüfung", "naïve", "café", "résumé",
    ]  # fmt: skip
    assert tokenize("ｆｕｌｌｗｉｄｔｈ") == ["fullwidth"]  # NFKC


def test_normalize_term_gives_lowercase_hyphenated_form() -> None:
    assert normalize_term("  Eywa MCP ") == "eywa-mcp"
    assert normalize_term("score_handoffs") == "score-handoffs"
    assert normalize_term("memory/db.py") == "memory-db-py"
    assert normalize_term("--") == ""


def test_fold_meets_singular_and_plural() -> None:
    pairs = [("lists", "list"), ("indexes", "index"), ("queries", "query"), ("caches", "cache"),
             ("matches", "match"), ("classes", "class"), ("files", "file"), ("trees", "tree")]  # fmt: skip
    for plural, singular in pairs:
        assert fold(plural) == fold(singular), (plural, singular)
    assert fold("status") == "status" and fold("redis") == "redis" and fold("ts") == "ts"
    assert fold("posting-lists") == "posting-list"


def test_query_terms_are_folded_and_distinct() -> None:
    assert query_terms("Posting lists, posting list, LISTS") == ["posting", "list"]


def test_keyword_terms_cover_whole_and_parts() -> None:
    assert keyword_terms("Posting Lists") == ["posting-list", "posting", "list"]
    assert keyword_terms("sqlite") == ["sqlit"]
    assert keyword_terms("!!") == []


def test_project_terms_use_full_name_and_last_path_component_only() -> None:
    assert project_terms("/home/me/src/eywa-mcp") == ["home-me-src-eywa-mcp", "eywa-mcp", "eywa", "mcp"]
    assert project_terms("macupos") == ["macupo"]
    assert project_terms("C:\\work\\Relay\\") == ["c-work-relay", "relay"]


@given(st.text())
def test_any_text_tokenizes_to_clean_terms(text: str) -> None:
    for token in tokenize(text):
        assert token == token.lower() and token.strip("-") == token and " " not in token
        assert query_terms(token)  # every token survives as a query term
