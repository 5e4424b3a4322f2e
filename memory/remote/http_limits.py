"""The HTTP/1.1 protocol under an app: uvicorn's httptools protocol with the two limits it lacks, on the
request head (the request line and its header fields). Both HTTP servers use it: the memory service
(`macupos serve`, service/server.py) and the bot's trigger endpoint (bot/trigger_server.py); it lives here,
below both, with the memory's other HTTP code.

* Its size: past ``header_bytes`` the request is answered ``431`` and the connection closed, before the app
  (and so any key check) sees it. httptools gathers a header's value by concatenation with no cap, so
  without this one 256 MB header costs minutes of CPU and its size in memory.
* The time to send it: a connection whose head is not complete ``head_timeout_s`` after the connection was
  made (or after the head's first byte, for the next request on a kept-alive connection) is closed, so a
  slow client (slowloris) cannot hold connections open by trickling header bytes.

The bytes are counted as they come in, not in the parser's callbacks: httptools calls ``on_header`` only
once a field is whole, so a single endless field would never be seen there. TLS sits below this protocol
(asyncio's SSL transport), so both limits apply to the decrypted stream alike.
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

__all__ = ["LimitedHttpTools", "limited_protocol"]

logger = logging.getLogger(__name__)


class LimitedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a cap on the request head's size and on the time to send it."""

    # Set by limited_protocol, the way to make one: each server passes its own caps.
    header_bytes: ClassVar[int]
    head_timeout_s: ClassVar[float]

    # uvicorn calls the protocol class with keywords (config=…, server_state=…, app_state=…, _loop=…); the
    # state below is set up in connection_made, which always comes before any other callback.
    _in_head: bool
    _head_seen: int
    _head_timer: asyncio.TimerHandle | None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._in_head = True
        self._head_seen = 0
        self._head_timer = None
        super().connection_made(transport)
        self._arm_head_timer()  # a connection that sends nothing at all is dropped too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        while data and not self.transport.is_closing():
            if not self._in_head:
                super().data_received(data)
                return
            room = self.header_bytes - self._head_seen
            if len(data) <= room:
                self._head_seen += len(data)
                super().data_received(data)
                return
            # Only the head's share of the cap goes to the parser: a body that came in the same read must not
            # count against the head, and a head past the cap must not reach httptools' buffers.
            piece, data = data[:room], data[room:]
            self._head_seen += len(piece)
            if piece:
                super().data_received(piece)
            if self._in_head and not self.transport.is_closing():
                self._refuse(431, b"request header fields too large")
                return

    # Parser callbacks (httptools calls them by name while data_received feeds it)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        if self._head_timer is None:  # the next request's head on a kept-alive connection starts its clock
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_seen = 0

    # The head's clock

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self._head_seen:  # a request had begun: say why it ends (a silent connection is just closed)
            self._refuse(408, b"the request head took too long")
        else:
            self.transport.close()

    def _refuse(self, status: int, message: bytes) -> None:
        logger.debug("refused a request head: %s", message.decode())
        self._cancel_head_timer()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(message)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
            message,
        ]
        self.transport.write(b"".join(head))
        self.transport.close()


def limited_protocol(header_bytes: int, head_timeout_s: float) -> type[LimitedHttpTools]:
    """The protocol class for ``uvicorn.Config(http=…)``: a head of at most ``header_bytes``, sent within
    ``head_timeout_s``."""

    class Configured(LimitedHttpTools):
        pass

    Configured.header_bytes = header_bytes
    Configured.head_timeout_s = head_timeout_s
    return Configured
