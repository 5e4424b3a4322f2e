"""The pages' routes, mounted by service/app.py beside the API (or alone, for ``--local``)."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from service.web import actions, facts_actions, facts_pages, live, pages, session_page, webhooks_page
from service.web.chrome import Chrome
from service.web.core import Web
from service.web.login import LoginRoutes
from service.web.security import WebHeaders
from service.web.settings import WebSettings

__all__ = ["STATIC", "Chrome", "Web", "WebHeaders", "WebSettings", "web_routes"]

STATIC = Path(__file__).parent / "static"


def web_routes(web: Web) -> list[BaseRoute]:
    login = LoginRoutes(web)
    chrome = Chrome(web)  # the router's default (an unknown address) is set by service/app.py
    return [
        Route("/", web.page("/", pages.search_page), methods=["GET"]),
        Route("/search", web.page("/search", pages.search_page), methods=["GET"]),
        Route("/sessions", web.page("/sessions", pages.sessions_page), methods=["GET"]),
        Route("/sessions/events", web.page("/sessions/events", live.sessions_events), methods=["GET"]),
        Route("/sessions/{id:path}", web.page("/sessions/{id}", session_page.session_page), methods=["GET"]),
        Route("/review", web.page("/review", pages.review_page), methods=["GET"]),
        Route("/review", web.page("/review", actions.review_action, scope="write"), methods=["POST"]),
        Route("/review/events", web.page("/review/events", live.review_events), methods=["GET"]),
        Route("/facts", web.page("/facts", facts_pages.facts_page), methods=["GET"]),
        Route("/facts", web.page("/facts", facts_actions.facts_action, scope="write"), methods=["POST"]),
        Route("/facts/edit", web.page("/facts/edit", facts_pages.fact_edit_page, scope="write"), methods=["GET"]),
        Route("/facts/graph.json", web.page("/facts/graph.json", facts_pages.graph_json), methods=["GET"]),
        Route("/facts/graph.svg", web.page("/facts/graph.svg", facts_pages.graph_svg), methods=["GET"]),
        Route("/cost", web.page("/cost", pages.cost_page), methods=["GET"]),
        Route("/stats", web.page("/stats", pages.stats_page), methods=["GET"]),
        Route("/webhooks", web.page("/webhooks", webhooks_page.webhooks_page), methods=["GET"]),
        Route("/webhooks", web.page("/webhooks", webhooks_page.webhooks_action, scope="write"), methods=["POST"]),
        Route("/login", login.login_page, methods=["GET"]),
        Route("/login", login.login_submit, methods=["POST"]),
        Route("/logout", login.logout, methods=["POST"]),
        Route("/tg", login.mini_app, methods=["GET"]),
        Route("/tg/auth", login.mini_app_auth, methods=["POST"]),
        Route("/favicon.ico", chrome.favicon, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
