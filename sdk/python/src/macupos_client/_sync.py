"""`Client`: the memory service's API on an httpx.Client, blocking. The same methods as
:class:`~macupos_client.AsyncClient`, not awaited: each made of its :mod:`~macupos_client._calls` function."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from macupos_client import _calls
from macupos_client._api import API
from macupos_client._core import Call, Pages, Request, as_method

__all__ = ["Client"]

T = TypeVar("T")
P = ParamSpec("P")


def _pages(describe: Callable[P, Pages[T]]) -> Callable[Concatenate[Client, P], Iterator[T]]:
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        pages = describe(*args, **kwargs)
        call: Call[Any] | None = pages.first
        while call is not None:
            page = self._call(call)
            yield from pages.items(page)
            call = pages.after(page)

    return as_method(method, describe, "Client", "Iterator[{}]")


class Client(API[httpx.Client]):
    """``with Client(url, key) as client: ...`` (or :meth:`from_env`); :meth:`close` when done.

    Every error is a :class:`~macupos_client.MacuposError`. A 429 or 503 whose Retry-After asks for at most
    ``max_retry_wait`` seconds is sent again, up to ``max_retries`` times. ``last_rate_limit`` holds the
    last answer's ``X-RateLimit-*`` headers.
    """

    _http_class = httpx.Client

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- the transport -------------------------------------------------------------------------------

    def _send(self, request: Request) -> httpx.Response:
        content = request.content
        if request.gzip and content is not None:
            content = gzip.compress(content, 6)
        retries = 0
        while True:
            with self._answered():
                response = self._http.send(self._build(request, content))
            wait = self._wait(response, request, retries)
            if wait is None:
                return response
            retries += 1
            time.sleep(wait)

    def _call(self, call: Call[T]) -> T:
        return call.parse(self._send(call.request))

    @classmethod
    def _make_method(cls, describe: Callable[..., Call[Any]]) -> Callable[..., Any]:
        def method(self: Client, /, *args: Any, **kwargs: Any) -> Any:
            return self._call(describe(*args, **kwargs))

        return as_method(method, describe, cls.__name__)

    # -- the handoffs, page by page --------------------------------------------------------------------

    iter_handoff_pages = _pages(_calls.iter_handoff_pages)
    iter_handoffs = _pages(_calls.iter_handoffs)
