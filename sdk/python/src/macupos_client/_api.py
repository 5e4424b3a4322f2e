"""The clients' API methods, listed once: each a :class:`Method` made of its :mod:`~macupos_client._calls`
function, blocking on a :class:`~macupos_client.Client` and awaited on an :class:`~macupos_client.AsyncClient`."""

from __future__ import annotations

import types
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

import httpx

from macupos_client import _calls
from macupos_client._core import Call, ClientBase

__all__ = ["API", "Method"]

T = TypeVar("T")
P = ParamSpec("P")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)


class Method(Generic[P, T]):
    """``client.get(...)`` runs the call ``_calls.get(...)`` describes, with its parameters and docstring. The
    client's class makes the function (:meth:`API._make_method`), once a class."""

    def __init__(self, describe: Callable[P, Call[T]]) -> None:
        self.describe = describe
        self.__doc__ = describe.__doc__
        self.made: dict[type[Any], Callable[..., Any]] = {}

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[Concatenate[Any, P], Any]: ...

    @overload
    def __get__(self, client: ClientBase[httpx.Client], owner: type[Any] | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(
        self, client: ClientBase[httpx.AsyncClient], owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, client: ClientBase[Any] | None, owner: type[Any] | None = None) -> Callable[..., Any]:
        cls = cast("type[API[Any]]", owner or type(client))
        if cls not in self.made:
            self.made[cls] = cls._make_method(self.describe)
        function = self.made[cls]
        return function if client is None else types.MethodType(function, client)


class API(ClientBase[H]):
    """Every method that is one call of the service, on both clients."""

    @classmethod
    def _make_method(cls, describe: Callable[..., Call[Any]]) -> Callable[..., Any]:
        """This class's method (a function of ``self`` and ``describe``'s parameters) running ``describe``'s call."""
        raise NotImplementedError

    request = Method(_calls.request)

    # -- memory ----------------------------------------------------------------------------------------

    upload_transcript = Method(_calls.upload_transcript)
    upload_handoff = Method(_calls.upload_handoff)
    get = Method(_calls.get)
    get_text = Method(_calls.get_text)
    search = Method(_calls.search)
    session = Method(_calls.session)
    forget = Method(_calls.forget)
    script = Method(_calls.script)
    facts_tier = Method(_calls.facts_tier)
    export = Method(_calls.export)
    stats = Method(_calls.stats)
    list_handoffs = Method(_calls.list_handoffs)

    # -- keys (admin keys) and webhooks -------------------------------------------------------------------

    create_key = Method(_calls.create_key)
    list_keys = Method(_calls.list_keys)
    revoke_key = Method(_calls.revoke_key)
    create_webhook = Method(_calls.create_webhook)
    list_webhooks = Method(_calls.list_webhooks)
    delete_webhook = Method(_calls.delete_webhook)
    webhook_deliveries = Method(_calls.webhook_deliveries)
