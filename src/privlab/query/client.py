"""`Client`: a small HTTP client for the DP query gateway (standard library only).

    from privlab.query import Client
    c = Client("http://127.0.0.1:8000", key="pk_...")
    answer = c.query("SELECT sex, COUNT(*) FROM adult GROUP BY sex", epsilon=0.5)
    answer["rows"], answer["column_info"], answer["remaining_budget"]

Errors map onto privlab's error model: 400 -> `QueryRefused` (an `InvalidInputError`),
402 -> `BudgetExceededError`, 401 / 403 -> `AccessDenied`, 429 -> `RateLimited`, anything
else -> `PrivlabError`. One persistent connection per thread (HTTP keep-alive).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

from privlab.errors import BudgetExceededError, InvalidInputError, PrivlabError
from privlab.query.planner import AccessDenied, QueryRefused

#: Reuse a keep-alive connection only if it was used this recently (uvicorn closes idle ones
#: after 5 s; a POST on a connection the server already closed could not be safely retried).
IDLE_REUSE_S = 3.0


class RateLimited(PrivlabError):
    """HTTP 429: too many requests; `retry_after` seconds to wait."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Client:
    """Talk to a gateway at `url` with API key `key`."""

    def __init__(self, url: str, key: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInputError(f"--url must be http(s)://host[:port], got {url!r}")
        if not isinstance(key, str) or not key.strip():
            raise InvalidInputError("--key is required (or set PRIVLAB_API_KEY)")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.key = key.strip()
        self.timeout = timeout
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - self._local.used > IDLE_REUSE_S:
            conn.close()  # the server may have closed an idle keep-alive connection
            conn = None
        self._local.used = time.monotonic()
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else \
                http.client.HTTPConnection
            conn = cls(self.host, self.port, timeout=self.timeout)
            self._local.conn = conn
        return conn

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                 auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json"}
        if auth:
            headers["Authorization"] = f"Bearer {self.key}"
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, self.prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
                break
            except (ConnectionError, http.client.HTTPException, OSError) as exc:
                conn.close()
                self._local.conn = None
                # A POST that reached the server may have been charged: never resend it.
                if attempt or method != "GET" or isinstance(exc, TimeoutError):
                    raise PrivlabError(f"gateway {self.host}:{self.port} unreachable or the "
                                       f"connection dropped ({type(exc).__name__})") from None
        try:
            doc = json.loads(payload) if payload else None
        except json.JSONDecodeError:
            doc = None
        if resp.status < 400:
            return doc
        reason = doc.get("reason", "") if isinstance(doc, dict) else payload[:200].decode(
            "utf-8", "replace")
        if resp.status == 400:
            raise QueryRefused(reason)
        if resp.status in (401, 403):
            raise AccessDenied(reason)
        if resp.status == 402:
            raise BudgetExceededError(reason)
        if resp.status == 429:
            raise RateLimited(reason, float(resp.getheader("Retry-After") or 1))
        raise PrivlabError(f"gateway error {resp.status}: {reason}")

    # -- API --------------------------------------------------------------------------------

    def query(self, sql: str, epsilon: float, delta: float = 0.0,
              mechanism: str | None = None) -> dict[str, Any]:
        """Run one DP query; returns columns, rows, column_info, guarantee, remaining_budget."""
        body: dict[str, Any] = {"sql": sql, "epsilon": epsilon, "delta": delta}
        if mechanism is not None:
            body["mechanism"] = mechanism
        return self._request("POST", "/v1/queries", body)

    def budget(self) -> dict[str, Any]:
        return self._request("GET", "/v1/budget")

    def tables(self) -> dict[str, Any]:
        return self._request("GET", "/v1/tables")

    def history(self, limit: int = 100) -> list[dict[str, Any]]:
        return self._request("GET", "/v1/queries?" + urlencode({"limit": limit}))["queries"]

    def get(self, query_id: str) -> dict[str, Any]:
        return self._request("GET", f"/v1/queries/{query_id}")

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/healthz", auth=False)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
