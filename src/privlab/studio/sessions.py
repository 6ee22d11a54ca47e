"""Browser sessions: a signed session-id cookie, per-session state and the CSRF token.

Why: two people using one studio must never see each other's data choices, schemas,
releases or synthetic tables (DP Wizard kept them in global files). Each session's state
lives in memory under its id and its files in its own folder; nothing is looked up by a
name a browser chose. The id cookie is HMAC-signed, so a browser cannot pick another
session's id without the server's secret."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SESSION_COOKIE = "privlab_studio_session"
CSRF_COOKIE = "privlab_studio_csrf"
TOKEN_COOKIE = "privlab_studio_token"
#: Sessions idle longer than this are forgotten (their files stay until the workspace is
#: cleaned: they are the curator's).
IDLE_S = 12 * 3600
#: Most sessions kept in memory; past it the least recently seen is forgotten first.
MAX_SESSIONS = 1000


@dataclass
class Session:
    """One browser's state. `source` is the chosen data; `schema` the public schema in use.
    Its folder is created on first use, so a visit that writes nothing leaves nothing."""

    sid: str
    csrf: str
    root: Path
    created: float = field(default_factory=time.time)
    seen: float = field(default_factory=time.time)
    source: Any = None  # privlab.studio.sources.Source
    schema: Any = None  # privlab.schema.Schema (reviewed / bundled), or None
    draft: Any = None  # a draft Schema drawn from the data (private until reviewed)
    review: Any = None  # privlab.studio.review.Review of the draft, in progress
    show_help: bool = True
    releases: list[Any] = field(default_factory=list)  # privlab.studio.protect.Result
    assessment: Any = None  # (sections, report file name)
    entry_ids: list[int] = field(default_factory=list)  # ledger entries this session made
    jobs: dict[str, Any] = field(default_factory=dict)  # id -> privlab.studio.jobs.CommandJob
    gateway_check: Any = None  # last audit-log verification result
    messages: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) flash

    @property
    def folder(self) -> Path:
        """The session's own folder (created now if needed) for what it writes."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root

    def flash(self, kind: str, text: str) -> None:
        self.messages.append((kind, text))

    def take_messages(self) -> list[tuple[str, str]]:
        out, self.messages = self.messages, []
        return out


class SessionStore:
    """Sessions by id; ids are 128-bit random, cookies carry `id.signature`."""

    def __init__(self, secret: bytes, root: Path) -> None:
        self._secret = secret
        self._root = root
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def sign(self, sid: str) -> str:
        mac = hmac.new(self._secret, sid.encode(), hashlib.sha256).hexdigest()[:32]
        return f"{sid}.{mac}"

    def _unsign(self, cookie: str | None) -> str | None:
        if not cookie or "." not in cookie:
            return None
        sid, _, _mac = cookie.partition(".")
        return sid if hmac.compare_digest(self.sign(sid), cookie) else None

    def get(self, cookie: str | None) -> Session | None:
        """The session a valid cookie names, else None (an unsigned or forged id is ignored)."""
        sid = self._unsign(cookie)
        with self._lock:
            self._expire()
            session = self._sessions.get(sid) if sid else None
            if session is not None:
                session.seen = time.time()
            return session

    def new(self) -> Session:
        sid = secrets.token_hex(16)
        session = Session(sid=sid, csrf=secrets.token_urlsafe(32),
                          root=self._root / "sessions" / sid)
        with self._lock:
            while len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.seen)
                self._forget(oldest.sid)
            self._sessions[sid] = session
        return session

    def all(self) -> list[Session]:
        with self._lock:
            return list(self._sessions.values())

    def _expire(self) -> None:
        now = time.time()
        for sid in [s for s, v in self._sessions.items() if now - v.seen > IDLE_S]:
            self._forget(sid)

    def _forget(self, sid: str) -> None:
        session = self._sessions.pop(sid)
        for job in session.jobs.values():
            job.cancel()


def csrf_ok(session: Session, form_value: Any, cookie_value: str | None) -> bool:
    """The double-submit check: the hidden field, the cookie and the session agree."""
    if not isinstance(form_value, str) or not cookie_value:
        return False
    return hmac.compare_digest(form_value, session.csrf) and \
        hmac.compare_digest(cookie_value, session.csrf)
