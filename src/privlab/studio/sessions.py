"""Browser sessions: signed, token-bound session cookies, per-session state kept on disk, and
the CSRF token.

Why: two people using one studio must never see each other's data choices, schemas,
releases or synthetic tables (DP Wizard kept them in global files), and a curator's work
must outlive a restart and never be pushed out by other clients' traffic. So:

- a session id is only accepted from a cookie this server signed for the current access
  token (`cookie_for`): a cookie planted by a page on another port of 127.0.0.1 (cookies
  ignore ports), forged, or issued under another token is ignored. A new token (a restart)
  takes over a session only at the token exchange, where the browser proves it holds the
  new token (`adopt`);
- a session is written to its own folder (`sessions/<id>/session.state`, 0600 in 0700
  folders, HMAC-signed with the workspace's cookie key) after every change and read back
  after a restart; a request that writes nothing stores nothing, so no amount of cookie-less
  or read-only traffic creates, grows or evicts anything;
- sessions go only by age (`MAX_AGE_S` untouched) or when their owner deletes them.

Job processes are not part of the record (`Session.jobs` starts empty after a restart; the
jobs module keeps its own records in the session's folder)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import os
import pickle
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privlab.studio.config import private_dir, private_file

#: Cookie names, each followed by `_PORT` (`cookie_name`).
SESSION_COOKIE = "privlab_studio_session"
CSRF_COOKIE = "privlab_studio_csrf"
TOKEN_COOKIE = "privlab_studio_token"
#: Sessions untouched this long are deleted with their folder (uploads, outputs).
MAX_AGE_S = 14 * 24 * 3600
#: A read-only visit refreshes the record's age at most this often.
TOUCH_S = 600
#: The session record inside its folder.
STATE_FILE = "session.state"


@dataclass
class Session:
    """One browser's state. `source` is the chosen data; `schema` the public schema in use.
    Its folder is created on first use, so a visit that writes nothing leaves nothing.
    `token_bound`: made under an access token (only those can be adopted by a new one)."""

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
    plans: list[Any] = field(default_factory=list)  # privlab.studio.plan.PlanResult
    plan_fields: dict[str, str] = field(default_factory=dict)  # the plan awaiting review
    assessment: Any = None  # (sections, report file name)
    entry_ids: list[int] = field(default_factory=list)  # ledger entries this session made
    jobs: dict[str, Any] = field(default_factory=dict)  # id -> privlab.studio.jobs.CommandJob
    gateway_check: Any = None  # last audit-log verification result
    messages: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) flash
    token_bound: bool = True
    saved: float = 0.0  # when its record was last written (0: never)
    forgotten: bool = False  # deleted by its owner: never written again

    @property
    def folder(self) -> Path:
        """The session's own folder (created now if needed, owner-only) for what it writes."""
        return private_dir(self.root)

    def flash(self, kind: str, text: str) -> None:
        self.messages.append((kind, text))

    def take_messages(self) -> list[tuple[str, str]]:
        out, self.messages = self.messages, []
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["jobs"] = {}  # live processes: the jobs module keeps its own records
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A record written before a field was added gets that field's default."""
        for f in dataclasses.fields(self):
            if f.name not in state and f.default_factory is not dataclasses.MISSING:
                state[f.name] = f.default_factory()
            elif f.name not in state and f.default is not dataclasses.MISSING:
                state[f.name] = f.default
        self.__dict__.update(state)


class SessionStore:
    """Sessions by id: in memory once used, on disk once written. Cookies carry
    `id.persistent-mac.token-mac` (see the module docstring)."""

    def __init__(self, secret: bytes, root: Path, token: str | None = None) -> None:
        self._secret = secret
        self._root = root
        self._token = token or ""
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._swept = 0.0

    # -- cookies ------------------------------------------------------------------------
    def _mac(self, *parts: str) -> str:
        msg = "|".join(parts).encode()
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()[:32]

    def cookie_for(self, session: Session) -> str:
        """The session cookie: valid for this token only (and adoptable by a later one)."""
        return f"{session.sid}.{self._persistent_mac(session.sid)}.{self._token_mac(session.sid)}"

    def _persistent_mac(self, sid: str) -> str:
        return self._mac("session", sid)

    def _token_mac(self, sid: str) -> str:
        return self._mac("bound", hashlib.sha256(self._token.encode()).hexdigest(), sid)

    def auth_cookie(self) -> str:
        """The access cookie a token exchange sets: derived from the token, never the token."""
        return self._mac("auth", hashlib.sha256(self._token.encode()).hexdigest())

    def auth_ok(self, cookie: str | None) -> bool:
        return bool(cookie) and hmac.compare_digest(str(cookie), self.auth_cookie())

    def _parse(self, cookie: str | None) -> tuple[str, str, str] | None:
        parts = (cookie or "").split(".")
        if len(parts) != 3 or not all(parts) or not _is_sid(parts[0]):
            return None
        return parts[0], parts[1], parts[2]

    # -- lookup ---------------------------------------------------------------------------
    def get(self, cookie: str | None) -> Session | None:
        """The session a cookie issued for this token names (a fresh, unstored one when it
        never wrote anything), else None: unsigned, forged or another token's."""
        parsed = self._parse(cookie)
        if parsed is None:
            return None
        sid, pmac, tmac = parsed
        if not (hmac.compare_digest(pmac, self._persistent_mac(sid))
                and hmac.compare_digest(tmac, self._token_mac(sid))):
            return None
        return self._lookup(sid) or self._fresh(sid, token_bound=bool(self._token))

    def adopt(self, cookie: str | None) -> Session | None:
        """At a token exchange only: a stored session this workspace's studio issued under an
        earlier token (a restart), taken over by the browser that holds the new one."""
        parsed = self._parse(cookie)
        if parsed is None or not hmac.compare_digest(parsed[1], self._persistent_mac(parsed[0])):
            return None
        session = self._lookup(parsed[0])
        return session if session is not None and session.token_bound else None

    def new(self) -> Session:
        """A fresh session (stored only once it writes something)."""
        return self._fresh(os.urandom(16).hex(), token_bound=bool(self._token))

    def _fresh(self, sid: str, token_bound: bool) -> Session:
        return Session(sid=sid, csrf=self._mac("csrf", sid), root=self._folder(sid),
                       token_bound=token_bound)

    def _folder(self, sid: str) -> Path:
        return self._root / "sessions" / sid

    def _lookup(self, sid: str) -> Session | None:
        with self._lock:
            self._maybe_sweep()
            session = self._sessions.get(sid)
            if session is None:
                session = self._load(sid)
                if session is not None:
                    self._sessions[sid] = session
            if session is not None:
                session.seen = time.time()
            return session

    def all(self) -> list[Session]:
        """Every stored session (read from disk if not in memory yet)."""
        folder = self._root / "sessions"
        if folder.is_dir():
            for path in folder.iterdir():
                if _is_sid(path.name):
                    self._lookup(path.name)
        with self._lock:
            return list(self._sessions.values())

    # -- storage --------------------------------------------------------------------------
    def save(self, session: Session) -> None:
        """Write the session's record (atomically, 0600, signed) and keep it in memory."""
        from privlab.utils.atomic import atomic_open

        if session.forgotten:
            return
        session.saved = time.time()
        body = pickle.dumps(session, protocol=pickle.HIGHEST_PROTOCOL)
        mac = hmac.new(self._secret, body, hashlib.sha256).hexdigest().encode()
        path = session.folder / STATE_FILE
        with self._lock:
            self._sessions[session.sid] = session
            with atomic_open(path, "wb", encoding=None) as fh:
                fh.write(mac + b"\n" + body)
            private_file(path)

    def stored(self, session: Session) -> bool:
        return session.saved > 0

    def _load(self, sid: str) -> Session | None:
        path = self._folder(sid) / STATE_FILE
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        mac, _, body = raw.partition(b"\n")
        expected = hmac.new(self._secret, body, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return None  # not written with this workspace's key: never unpickled
        try:
            session = pickle.loads(body)  # noqa: S301 - signed by this workspace's key
        except Exception:  # noqa: BLE001 - a record of an older privlab (a class moved)
            return None
        if not isinstance(session, Session) or session.sid != sid:
            return None
        session.root, session.jobs = self._folder(sid), {}
        return session

    def delete(self, session: Session) -> None:
        """Forget a session and delete its folder (its uploads and outputs)."""
        with self._lock:
            self._forget(session.sid, session)

    def _forget(self, sid: str, session: Session | None = None) -> None:
        session = self._sessions.pop(sid, None) or session
        if session is not None:
            session.forgotten = True
        for job in (session.jobs.values() if session is not None else ()):
            job.cancel()
        shutil.rmtree(self._folder(sid), ignore_errors=True)

    def _maybe_sweep(self) -> None:
        """Delete sessions untouched for MAX_AGE_S (at most once a minute; lock held)."""
        now = time.time()
        if now - self._swept < 60:
            return
        self._swept = now
        folder = self._root / "sessions"
        if not folder.is_dir():
            return
        for path in folder.iterdir():
            live = self._sessions.get(path.name)
            with contextlib.suppress(OSError):
                last = live.seen if live is not None else _age_of(path)
                if _is_sid(path.name) and now - last > MAX_AGE_S:
                    self._forget(path.name)

    def touch(self, session: Session) -> None:
        """A read-only visit of a stored session: refresh its age now and then."""
        if self.stored(session) and time.time() - session.saved > TOUCH_S:
            self.save(session)


def cookie_name(base: str, host_header: str | None) -> str:
    """`base_PORT`, the port of the Host the browser used (checked on loopback): cookies
    ignore ports, so without it two studios on one machine would overwrite each other's
    access and session cookies in one browser (Jupyter names its cookies likewise)."""
    host = host_header or ""
    tail = host.rsplit("]", 1)[-1]
    port = tail.rsplit(":", 1)[1] if ":" in tail else "80"
    return f"{base}_{port}" if port.isdigit() else base


def _age_of(folder: Path) -> float:
    state = folder / STATE_FILE
    return (state if state.exists() else folder).stat().st_mtime


def _is_sid(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdef" for c in text)


def csrf_ok(session: Session, form_value: Any, cookie_value: str | None) -> bool:
    """The double-submit check: the hidden field, the cookie and the session agree."""
    if not isinstance(form_value, str) or not cookie_value:
        return False
    return hmac.compare_digest(form_value, session.csrf) and \
        hmac.compare_digest(cookie_value, session.csrf)
