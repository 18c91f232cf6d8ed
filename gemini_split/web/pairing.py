"""Paired browsers: one-time sign-in codes and the cookies they become.

A user asks for a code over the protocol (``pair``); the browser posts it to
``POST /api/pair`` once, within the code's lifetime, and gets a random
cookie. The server keeps only SHA-256 hashes of codes and cookies (a cookie
is 256 random bits: a plain hash is enough, nothing to stretch), never the
secrets themselves, and never logs them. Paired browsers are kept in
``browsers.json`` in the server's state directory when it has one (written
atomically, mode 0600), so a restart does not sign everyone out.

Everything here is synchronous and holds no lock: the server runs it on its
one Trio thread.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: Seconds a pairing code stays valid.
DEFAULT_CODE_TTL = 600.0
#: Days a browser's cookie stays valid.
DEFAULT_COOKIE_DAYS = 30
#: Codes a user may hold unused at once (older ones are dropped).
MAX_CODES_PER_USER = 8
#: Browsers a user may have paired at once (the least recently used goes).
MAX_BROWSERS_PER_USER = 50
#: Characters of a User-Agent kept.
MAX_USER_AGENT = 200


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass
class _Code:
    user: str
    expires: float
    permissions: tuple[str, ...] = ()
    used: bool = False


@dataclass
class Browser:
    id: str
    user: str
    cookie_hash: str
    created: float
    expires: float
    last_used: float = 0.0
    user_agent: str = ""
    permissions: tuple[str, ...] = ()


class PairingError(Exception):
    """Why a code was refused: ``reason`` is ``expired``, ``used`` or
    ``unknown`` (what the page is told), the message says it to a person."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class Pairing:
    """The codes handed out and the browsers signed in, per user.

    ``user`` is the principal's ``user_id``, or ``""`` on a server without
    auth (loopback only). ``clock`` returns seconds since the epoch.
    """

    def __init__(self, *, code_ttl: float = DEFAULT_CODE_TTL, cookie_days: float = DEFAULT_COOKIE_DAYS,
                 path: Path | None = None, clock: Callable[[], float] = time.time):
        self.code_ttl = code_ttl
        self.cookie_seconds = cookie_days * 86400
        self.path = path
        self.clock = clock
        self._codes: dict[str, _Code] = {}
        self._browsers: dict[str, Browser] = {}
        #: Called with a browser id when it is revoked (the server closes its sockets).
        self.on_revoke: Callable[[str], None] = lambda browser_id: None
        self._load()

    # --- codes ------------------------------------------------------------

    def new_code(self, user: str, permissions: tuple[str, ...] = ()) -> tuple[str, str, float]:
        """A fresh one-time code for ``user`` (a browser it signs in gets
        ``permissions``): (code, code_id, expires)."""
        now = self.clock()
        self._drop_stale_codes(now)
        mine = sorted((c.expires, h) for h, c in self._codes.items() if c.user == user and not c.used)
        for _, h in mine[: max(0, len(mine) - MAX_CODES_PER_USER + 1)]:
            del self._codes[h]
        code = secrets.token_urlsafe(24)
        hashed = _hash(code)
        expires = now + self.code_ttl
        self._codes[hashed] = _Code(user=user, expires=expires, permissions=tuple(permissions))
        return code, hashed[:12], expires

    def redeem(self, code: str, user_agent: str = "") -> tuple[Browser, str]:
        """Trade ``code`` for a new browser and its cookie; raises
        :class:`PairingError`. A code works once."""
        now = self.clock()
        entry = self._codes.get(_hash(code)) if code else None
        if entry is None:
            raise PairingError("unknown", "this pairing link is not known here: ask for a new one "
                                          "(gemini-split pair)")
        if entry.used:
            raise PairingError("used", "this pairing link was used already: each works once; ask for a new one")
        if entry.expires <= now:
            raise PairingError("expired", "this pairing link has expired: ask for a new one (gemini-split pair)")
        entry.used = True
        cookie = secrets.token_urlsafe(32)
        browser = Browser(id=secrets.token_hex(4), user=entry.user, cookie_hash=_hash(cookie), created=now,
                          expires=now + self.cookie_seconds, last_used=now,
                          user_agent=_printable(user_agent)[:MAX_USER_AGENT], permissions=entry.permissions)
        mine = sorted((b.last_used, b.id) for b in self._browsers.values() if b.user == entry.user)
        for _, old in mine[: max(0, len(mine) - MAX_BROWSERS_PER_USER + 1)]:
            self._forget(old)
        self._browsers[browser.id] = browser
        self._save()
        log.info("paired browser %s for user %s", browser.id, entry.user or "(local)")
        return browser, cookie

    # --- cookies -------------------------------------------------------------

    def browser_for(self, cookie: str | None) -> Browser | None:
        """The browser ``cookie`` signs in, or None (unknown, revoked, expired)."""
        if not cookie:
            return None
        hashed = _hash(cookie)
        for browser in self._browsers.values():
            if secrets.compare_digest(browser.cookie_hash, hashed):
                if browser.expires <= self.clock():
                    self._forget(browser.id)
                    self._save()
                    return None
                browser.last_used = self.clock()
                return browser
        return None

    def browsers(self, user: str) -> list[Browser]:
        """``user``'s paired browsers, oldest first."""
        now = self.clock()
        return sorted((b for b in self._browsers.values() if b.user == user and b.expires > now),
                      key=lambda b: b.created)

    def revoke(self, user: str, browser_id: str) -> bool:
        """Forget ``user``'s browser ``browser_id`` (``"all"``: every one) and
        close its connections; False when there is no such browser of
        ``user``'s."""
        ids = [b.id for b in self._browsers.values() if b.user == user and browser_id in ("all", b.id)]
        if not ids and browser_id != "all":
            return False
        for browser in ids:
            self._forget(browser)
        self._save()
        return True

    def _forget(self, browser_id: str) -> None:
        self._browsers.pop(browser_id, None)
        try:
            self.on_revoke(browser_id)
        except Exception:
            log.exception("closing the connections of browser %s failed", browser_id)

    def _drop_stale_codes(self, now: float) -> None:
        for hashed in [h for h, c in self._codes.items() if c.expires <= now - self.code_ttl]:
            del self._codes[hashed]

    # --- persistence -------------------------------------------------------

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            records = json.loads(self.path.read_text(encoding="utf-8"))
            for record in records:
                browser = Browser(**{**record, "permissions": tuple(record.get("permissions", ()))})
                self._browsers[browser.id] = browser
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as exc:
            log.warning("cannot read the paired browsers in %s (%s): every browser must pair again",
                        self.path, exc)
            self._browsers.clear()

    def _save(self) -> None:
        if self.path is None:
            return
        data = json.dumps([asdict(b) for b in self._browsers.values()]).encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".browsers-")
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot save the paired browsers to %s: %s", self.path, exc)


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)
