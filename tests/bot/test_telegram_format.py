"""Markdown → Telegram HTML and splitting under 4,096 characters, checked against the double's strict HTML parser."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.telegram_format import markdown_to_html, plain_text
from bot.telegram_split import TELEGRAM_LIMIT, split_message, utf16_len
from tests.doubles.telegram import check_html

MD_PIECES = [
    "# Heading",
    "## Sub *heading*",
    "**bold**",
    "*italic*",
    "_under_",
    "__strong__",
    "***both***",
    "~~strike~~",
    "`code <x>`",
    "``a`b``",
    "[link](https://example.org/?a=1&b=2)",
    "[file](src/app.py)",
    "<https://example.org>",
    "- item",
    "  - nested",
    "1. first",
    "- [x] done",
    "> quote **b**",
    "```python\nx = 1 < 2 & 3\n```",
    "```\nplain fence\n```",
    "```",
    "~~~sh",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "---",
    "snake_case_name",
    "2 * 3 * 4",
    "a < b > c & d",
    "&amp; &lt;",
    "\"quotes\" and 'apostrophes'",
    "\\*escaped\\*",
    "**unclosed",
    "*a **b* c**",
    "",
    "\n",
    "\n\n",
    " ",
    "é ü 🙂 中文",
]

markdown = st.lists(
    st.one_of(st.sampled_from(MD_PIECES), st.text(alphabet=st.characters(codec="utf-8"), max_size=40)), max_size=40
).map(" ".join)


def test_markdown_constructs_render_as_telegram_html() -> None:
    md = (
        "# Plan\nSome **bold**, *italic*, `a<b>` & [docs](https://x.org/?q=1&r=2).\n\n"
        "```python\nif a < b:\n    pass\n```\n> quoted *text*\n\n- one\n- two\n1. first"
    )
    html = markdown_to_html(md)
    assert html == (
        "<b>Plan</b>\nSome <b>bold</b>, <i>italic</i>, <code>a&lt;b&gt;</code> &amp; "
        '<a href="https://x.org/?q=1&amp;r=2">docs</a>.\n\n'
        '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>\n'
        "<blockquote>quoted <i>text</i></blockquote>\n\n• one\n• two\n1. first"
    )
    check_html(html)


def test_identifiers_and_arithmetic_are_not_emphasis() -> None:
    assert markdown_to_html("use my_var_name and 2 * 3 * 4") == "use my_var_name and 2 * 3 * 4"


def test_plain_text_drops_markup_and_keeps_link_targets() -> None:
    md = "## Done\n**Fixed** the `parser`; see [the PR](https://git.example/pr/1).\n\n```\nmake test\n```"
    assert plain_text(md) == "Done\nFixed the parser; see the PR (https://git.example/pr/1).\n\nmake test"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(markdown)
def test_any_markdown_renders_as_html_telegram_accepts(md: str) -> None:
    check_html(markdown_to_html(md))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Tiny limits can't carry a deep stack of reopened tags (nesting goes to 16); Telegram's is 4,096.
@given(markdown, st.integers(min_value=1, max_value=40), st.sampled_from([300, 1000, 4096]))
def test_split_html_chunks_fit_and_parse(md: str, repeat: int, limit: int) -> None:
    html = markdown_to_html("\n\n".join([md] * repeat))
    chunks = split_message(html, limit)
    visible = ""
    for chunk in chunks:
        assert len(chunk) <= limit
        text = check_html(chunk)
        assert text.strip(), "a chunk without visible text would be refused as empty"
        visible += text
    # nothing visible is lost; only whitespace-only stretches between chunks may be dropped
    assert "".join(visible.split()) == "".join(check_html(html).split())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.integers(min_value=1, max_value=500))
def test_split_plain_text_rejoins_to_the_original(text: str, limit: int) -> None:
    chunks = split_message(text, limit, html=False)
    assert all(0 < len(c) <= limit for c in chunks)
    assert "".join(chunks) == text


def test_a_100000_character_answer_splits_at_paragraphs() -> None:
    paragraph = "The relay resumed the session and the tests passed. " * 6
    text = "\n\n".join(f"{n}. {paragraph.strip()}" for n in range(330))
    assert len(text) > 100_000
    chunks = split_message(text, html=False)
    assert "".join(chunks) == text
    assert all(len(c) <= TELEGRAM_LIMIT for c in chunks)
    assert all(c.endswith("\n\n") for c in chunks[:-1])  # cut after a blank line, never mid-sentence
    html_chunks = split_message(markdown_to_html(text))
    assert all(len(c) <= TELEGRAM_LIMIT for c in html_chunks)
    for c in html_chunks:
        check_html(c)


def test_a_long_code_block_is_closed_and_reopened_in_each_chunk() -> None:
    code = "\n".join(f"line_{n} = {n} < {n + 1}" for n in range(2000))
    chunks = split_message(markdown_to_html(f"Output:\n```python\n{code}\n```\nDone."))
    assert len(chunks) > 5
    for chunk in chunks[1:-1]:
        assert chunk.startswith('<pre><code class="language-python">')
        assert chunk.endswith("</code></pre>")
        check_html(chunk)
    assert chunks[0].startswith("Output:\n<pre>")
    assert chunks[-1].endswith("</code></pre>\nDone.")
    lines = "".join(check_html(c) for c in chunks).split("\n")
    assert lines[1:-1] == [f"line_{n} = {n} < {n + 1}" for n in range(2000)]  # cut at line ends only


def test_split_never_cuts_a_tag_or_entity() -> None:
    html = ('<a href="https://example.org/a-long-path">link</a> &amp; ' * 40).strip()
    for chunk in split_message(html, 90):
        assert len(chunk) <= 90
        check_html(chunk)


def test_short_text_is_one_chunk_and_empty_text_none() -> None:
    assert split_message("hi") == ["hi"]
    assert split_message("") == []
    assert split_message("<pre></pre> ") == []  # nothing visible: Telegram would refuse it as empty
    with pytest.raises(ValueError, match="too small"):
        split_message('<a href="https://example.org/very/long">x</a>' * 3, 30)


@pytest.mark.parametrize(
    "md",
    [
        "[" * 100_000,
        "`a" * 50_000,
        "*a " * 30_000 + "x~~" * 30_000,
        "*a **b _c ~~d " * 7_000 + "e~~ f_ g** h*" * 7_000,
        "[x](" * 25_000,
    ],
    ids=["brackets", "backticks", "unclosed-emphasis", "deep-nesting", "unclosed-links"],
)
def test_hostile_100k_markdown_renders_and_splits_into_valid_chunks(md: str) -> None:
    chunks = split_message(markdown_to_html(md))
    assert chunks
    for chunk in chunks:
        assert len(chunk) <= TELEGRAM_LIMIT
        check_html(chunk)


def test_chunks_fit_telegrams_utf16_count_and_lose_no_emoji() -> None:
    # Telegram counts UTF-16 units: 🚀 is two. Chunks sized in characters would be refused or cut.
    html = markdown_to_html("Deployed 🚀 the **service** and checked it. " * 250 + "🚀 ok " * 2000)
    chunks = split_message(html)
    assert all(utf16_len(c) <= TELEGRAM_LIMIT for c in chunks)
    assert sum(c.count("🚀") for c in chunks) == 2250
    assert all("<b>service</b>" in c for c in chunks[:2])  # formatting kept, not stripped to plain text
