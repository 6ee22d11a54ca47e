"""The gateway's HTTP/1.1 connection layer: uvicorn's httptools protocol with limits.

uvicorn's defaults leave three doors open that the ASGI app cannot close, because they are
decided before it sees a request: the request head is unbounded (an 8 MB header is buffered
and accepted), a connection that sends nothing, or a head that never ends, stays open
forever (no timer runs until a first response), and errors the server answers itself are
`text/plain`. `GatewayHttpProtocol` keeps uvicorn's fast C parser and adds, per connection:

- the request line and headers limited to `limits.max_header_bytes` (431, JSON, closed);
- the head must arrive within `limits.body_timeout_s` (408, JSON, closed); the body's
  deadline is the front door's (`privlab.service.front_door.FrontDoor`);
- at most `limits.max_connections` open connections per process (503, JSON, closed);
- a malformed request is answered 400 with the JSON error body.

The limits are read from the app it serves (the `FrontDoor`'s `limits`, found through the
`.app` chain of whatever uvicorn wraps around it, e.g. its message logger under
`--log-level trace`), so the class can be named by its import path: uvicorn's worker
processes import it by name. An app that carries no limits is refused (each connection
fails with `UnsafeConfigurationError` in the server log), never served with defaults.
`uvicorn_options(config)` is what `privlab serve` passes to uvicorn; it also turns uvicorn's
X-Forwarded-For handling off (`proxy_headers=False`): the front door believes that header
only from `trusted_proxies`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from privlab.errors import UnsafeConfigurationError
from privlab.query.config import GatewayConfig, Limits

__all__ = ["GatewayHttpProtocol", "limits_of", "uvicorn_options"]

_REASONS = {400: b"Bad Request", 408: b"Request Timeout",
            431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}
_DRAIN_S = 1.0  # read and drop what a refused client still sends, so it reads the answer


def uvicorn_options(config: GatewayConfig) -> dict[str, Any]:
    """uvicorn settings for the gateway (`uvicorn.run(app, **uvicorn_options(cfg))`). The
    head limit is `GatewayHttpProtocol`'s own (h11's `h11_max_incomplete_event_size` is not
    read by the httptools protocol, so it is not set)."""
    limits = config.limits
    return {"http": "privlab.service.http:GatewayHttpProtocol", "proxy_headers": False,
            "forwarded_allow_ips": "", "timeout_keep_alive": limits.keep_alive_s,
            "server_header": False}


def limits_of(app: Any) -> Limits:
    """The `Limits` of the gateway app under any wrappers (each keeps the inner app in
    `.app`, as uvicorn's middlewares do); refuses an app that carries none, so the
    configured limits are never silently replaced by defaults."""
    seen: set[int] = set()
    current = app
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        limits = getattr(current, "limits", None)
        if isinstance(limits, Limits):
            return limits
        current = getattr(current, "app", None)
    raise UnsafeConfigurationError(
        f"GatewayHttpProtocol serves the privlab gateway only: {type(app).__name__} carries "
        "no gateway limits (through its .app chain); serve privlab.service.create_app(...)")


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over the limit (answered 431)."""


class GatewayHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head size and time limits, a connection cap and
    JSON errors (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits: Limits = limits_of(self.app)
        self._in_head = True
        self._head_bytes = 0  # bytes received while a head is incomplete (a head in pieces)
        self._parsed_head = 0  # request line and headers the parser has read (a whole head)
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self._limits.max_connections:
            self._refuse(503, "unavailable", "too many open connections; retry later")
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self._limits.max_header_bytes \
                and not self._refused:
            self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._parsed_head = 0
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # else already answered (e.g. 431 from a parser callback)
            self._refuse(400, "refused", "malformed HTTP request")

    # -- helpers ----------------------------------------------------------------------------

    def _count_head(self, n: int) -> None:
        """Count a parsed piece of the head; over the limit, answer 431 and stop the parser
        (the error it raises ends the request before the app sees it). This catches a head
        that arrives whole in one read, which `data_received`'s count lets through."""
        self._parsed_head += n
        if self._parsed_head > self._limits.max_header_bytes:
            if not self._refused:
                self._refuse_head()
            raise _HeadTooLarge

    def _refuse_head(self) -> None:
        self._refuse(431, "header_too_large", "the request line and headers are limited to "
                     f"limits.max_header_bytes ({self._limits.max_header_bytes} bytes)")

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self._limits.body_timeout_s, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._in_head or self._refused or self.transport.is_closing():
            return
        if self._head_bytes == 0 and self.cycle is not None:
            self.transport.close()  # an idle keep-alive connection: uvicorn's timer's job
            return
        self._refuse(408, "timeout", "the request head did not arrive within "
                     f"limits.body_timeout_s ({self._limits.body_timeout_s:g} s)")

    def _refuse(self, status: int, code: str, reason: str) -> None:
        """Answer `status` with the JSON error body, then close (after a short drain)."""
        self._refused = True
        self._cancel_head_timer()
        body = json.dumps({"error": code, "reason": reason}).encode()
        head = (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n" % (status, _REASONS[status], len(body)))
        if not self.transport.is_closing():
            self.transport.write(head + body)
            self.loop.call_later(_DRAIN_S, self.transport.close)
