"""The search page over real HTTP: matched results apart from the recent handoffs that only fill up to k, a
plain statement when nothing matched, the explanation as narrow-screen cards, and the scoring formula (the
installed copy kept equal to docs/retrieval.md's)."""

from __future__ import annotations

import re
from pathlib import Path

from service.web.search_view import FORMULA
from tests.service.web.conftest import seed_memory
from tests.service.web.local_pages import assert_no_markup, logged_in_local

DOCS = Path(__file__).parents[3] / "docs" / "retrieval.md"


def score_section(markdown: str) -> str:
    found = re.search(r"^## Score\n.*?(?=^## )", markdown, flags=re.S | re.M)
    assert found, "docs/retrieval.md has no '## Score' section"
    return found.group(0).strip()


def test_the_formula_the_page_shows_is_docs_retrieval_md_score_section() -> None:
    assert FORMULA.read_text(encoding="utf-8").strip() == score_section(DOCS.read_text(encoding="utf-8")), (
        "service/web/static/retrieval-score.md differs from docs/retrieval.md's '## Score': copy it again"
    )


async def test_a_query_that_matches_nothing_says_so_and_shows_recent_handoffs_apart(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await seed_memory(home)
    async with logged_in_local(home) as web:
        page = await web.get("/search", params={"q": "quetzalcoatl", "days_back": "36500"})
        assert page.status_code == 200
        html = page.text
        assert 'id="nothing-matched"' in html and "Nothing in memory matched" in html
        assert 'data-matched="yes"' not in html
        assert html.count('data-matched="no"') >= 1  # the recent ones, listed under their own heading
        assert html.index('id="matched"') < html.index('id="recent"') < html.index('data-matched="no"')
        assert "recent, not a match" in html
        assert_no_markup(html)


async def test_matched_results_come_first_with_their_explanation_as_cards(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with logged_in_local(home) as web:
        html = (await web.get("/search", params={"q": "zeppelin exporter", "max": "5"})).text
        assert 'id="nothing-matched"' not in html
        first = html.index('data-matched="yes"')
        assert f'data-session="{ids["main"]}" data-matched="yes"' in html
        if 'data-matched="no"' in html:  # what fills up to k never comes before a match
            assert first < html.index('id="recent"') < html.index('data-matched="no"')
        assert '<table class="cards explain-parts">' in html and '<td data-label="value">' in html
        assert 'href="#formula"' in html and 'id="formula"' in html
        assert "score                 = terms + content" in html  # the formula, rendered
        assert_no_markup(html)


async def test_a_project_alone_counts_as_a_match(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = await seed_memory(home)
    async with logged_in_local(home) as web:
        html = (await web.get("/search", params={"project": "billing"})).text
        assert f'data-session="{ids["imported"]}" data-matched="yes"' in html
