"""`AsyncClient`: the memory service's API on an httpx.AsyncClient. The same methods as the sync
:class:`~macupos_client.Client`, awaited: each made of its :mod:`~macupos_client._calls` function."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from macupos_client import _calls
from macupos_client._api import API
from macupos_client._core import Call, Pages, Request, as_method

__all__ = ["AsyncClient"]

T = TypeVar("T")
P = ParamSpec("P")

_GZIP_ON_THREAD = 256 * 1024  # a larger body is compressed off the event loop


def _pages(describe: Callable[P, Pages[T]]) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[T]]:
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        pages = describe(*args, **kwargs)
        call: Call[Any] | None = pages.first
        while call is not None:
            page = await self._call(call)
            for item in pages.items(page):
                yield item
            call = pages.after(page)

    return as_method(method, describe, "AsyncClient", "AsyncIterator[{}]")


class AsyncClient(API[httpx.AsyncClient]):
    """``async with AsyncClient(url, key) as client: ...`` (or :meth:`from_env`); :meth:`aclose` when done.

    Its errors, retries and ``last_rate_limit`` are those of the sync :class:`~macupos_client.Client`.
    """

    _http_class = httpx.AsyncClient

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the transport -------------------------------------------------------------------------------

    async def _send(self, request: Request) -> httpx.Response:
        content = request.content
        if request.gzip and content is not None:
            if len(content) > _GZIP_ON_THREAD:
                content = await asyncio.to_thread(gzip.compress, content, 6)
            else:
                content = gzip.compress(content, 6)
        retries = 0
        while True:
            with self._answered():
                response = await self._http.send(self._build(request, content))
            wait = self._wait(response, request, retries)
            if wait is None:
                return response
            retries += 1
            await asyncio.sleep(wait)

    async def _call(self, call: Call[T]) -> T:
        return call.parse(await self._send(call.request))

    @classmethod
    def _make_method(cls, describe: Callable[..., Call[Any]]) -> Callable[..., Any]:
        async def method(self: AsyncClient, /, *args: Any, **kwargs: Any) -> Any:
            return await self._call(describe(*args, **kwargs))

        return as_method(method, describe, cls.__name__)

    # -- the handoffs, page by page --------------------------------------------------------------------

    iter_handoff_pages = _pages(_calls.iter_handoff_pages)
    iter_handoffs = _pages(_calls.iter_handoffs)
