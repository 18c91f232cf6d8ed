"""Paired browsers: one-time sign-in codes and the cookies they become.

A user asks for a code over the protocol (``pair``); the browser posts it to
``POST /api/pair`` once, within the code's lifetime, and gets a random
cookie and a random *page token*. The page keeps the token in its own
storage, which is the server's origin's alone (scheme, host and port), and
presents it with the cookie on every request; a browser is signed in only
by the two together. A cookie is sent to every port of the host, so a
program on another port could replay it: without the page token it signs
nothing in. The server keeps only SHA-256 hashes of codes and of cookie and
token together (256 random bits each: a plain hash is enough, nothing to
stretch), never the secrets themselves, and never logs them.

Codes and browsers are kept in the session store the server uses
(``server/store/pairing.py``: in memory, in the SQLite database, or in Redis
shared by every replica), so a restart does not sign anyone out and, with
replicas, a code from one redeems on another and a cookie works on all.
This module makes the secrets and decides what a person is told; the store
keeps the hashes (it is given as ``store``: this layer does not import the
server's).

Each check of a cookie (every WebSocket upgrade of the page) would be a
round trip to Redis: a small per-process cache keeps what was found for
:data:`CACHE_SECONDS`, and drops a browser the moment it is revoked — here,
or on another replica (:meth:`Pairing.run` reads the store's revocations).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import trio

log = logging.getLogger(__name__)

#: Seconds a pairing code stays valid.
DEFAULT_CODE_TTL = 600.0
#: Days a browser's cookie stays valid.
DEFAULT_COOKIE_DAYS = 30
#: Codes a user may hold unused at once (older ones are dropped).
MAX_CODES_PER_USER = 8
#: Browsers a user may have paired at once (the least recently used goes).
MAX_BROWSERS_PER_USER = 50
#: Seconds after its expiry that a code is still recognised (the page says
#: "expired" or "used" rather than "not known").
RECOGNISED_SECONDS = 600.0
#: Characters of a User-Agent kept.
MAX_USER_AGENT = 200
#: Seconds a cookie found valid is believed without asking the store again
#: (a revocation drops it at once; this bounds only what a revocation
#: missed — none is, but the store may have been restored from a backup).
CACHE_SECONDS = 60.0
#: Cookies remembered per process at most.
CACHE_SIZE = 10_000
#: Seconds between two writes of a browser's ``last_used``.
TOUCH_SECONDS = 60.0

#: What the store gives back for a browser (``server/store/pairing.py``'s
#: ``BrowserRecord``: id, user, cookie_hash, created, expires, last_used,
#: user_agent, permissions).
Browser = Any


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def _credential_hash(cookie: str, page: str) -> str:
    """What the store keeps of a browser's sign-in: the hash of its cookie
    and its page token together (a cookie alone signs nothing in)."""
    return _hash(f"{cookie}\n{page}")


class PairingError(Exception):
    """Why a code was refused: ``reason`` is ``expired``, ``used`` or
    ``unknown`` (what the page is told), the message says it to a person."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class Pairing:
    """The codes handed out and the browsers signed in, per user, kept in
    ``store`` (a ``PairingStore``: ``SessionStore.paired_browsers()``).

    ``user`` is the principal's ``user_id``, or ``""`` on a server without
    auth (loopback only). ``clock`` returns seconds since the epoch.
    Failures of the store are its ``StoreError`` (a
    :class:`~gemini_split.errors.GeminiSplitError`), raised to the caller.
    """

    def __init__(self, store: Any, *, code_ttl: float = DEFAULT_CODE_TTL,
                 cookie_days: float = DEFAULT_COOKIE_DAYS, clock: Callable[[], float] = time.time):
        self.store = store
        self.code_ttl = code_ttl
        self.cookie_seconds = cookie_days * 86400
        self.clock = clock
        #: cookie hash -> (browser, when it was read from the store: trio time)
        self._cache: OrderedDict[str, tuple[Browser, float]] = OrderedDict()
        #: Called with a browser id when it is revoked, here or on another
        #: replica (the server closes its sockets).
        self.on_revoke: Callable[[str], None] = lambda browser_id: None
        self._opened = False
        #: Counts revocations heard: a lookup that a revocation overtook
        #: is not cached.
        self._revocations = 0

    async def open(self) -> None:
        """Make the store's pairing usable (once)."""
        if not self._opened:
            await self.store.open()
            self._opened = True

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Open, then close the pages of browsers revoked on other replicas
        as they are, until cancelled (``nursery.start``, once the session
        store is open)."""
        await self.open()
        task_status.started()
        async for ids in self.store.revocations():
            for browser_id in ids:
                log.info("browser %s was signed out on another replica", browser_id)
                self._forget(browser_id)

    # --- codes ------------------------------------------------------------

    async def new_code(self, user: str, permissions: tuple[str, ...] = ()) -> tuple[str, str, float]:
        """A fresh one-time code for ``user`` (a browser it signs in gets
        ``permissions``): (code, code_id, expires)."""
        now = self.clock()
        code = secrets.token_urlsafe(24)
        hashed = _hash(code)
        expires = now + self.code_ttl
        await self.store.add_code(hashed, user=user, expires=expires, permissions=tuple(permissions),
                                  keep_until=expires + max(self.code_ttl, RECOGNISED_SECONDS),
                                  max_per_user=MAX_CODES_PER_USER, now=now)
        return code, hashed[:12], expires

    async def redeem(self, code: str, user_agent: str = "") -> tuple[Browser, str, str]:
        """Trade ``code`` for a new browser, its cookie and its page token;
        raises :class:`PairingError`. A code works once, on whichever replica."""
        now = self.clock()
        reason, entry = await self.store.take_code(_hash(code), now) if code else ("unknown", None)
        if reason == "used":
            raise PairingError("used", "this pairing link was used already: each works once; ask for a new one")
        if reason == "expired":
            raise PairingError("expired", "this pairing link has expired: ask for a new one (gemini-split pair)")
        if entry is None:
            raise PairingError("unknown", "this pairing link is not known here: ask for a new one "
                                          "(gemini-split pair)")
        cookie, page = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        browser, dropped = await self.store.add_browser(
            max_per_user=MAX_BROWSERS_PER_USER, id=secrets.token_hex(4), user=entry.user,
            cookie_hash=_credential_hash(cookie, page),
            created=now, expires=now + self.cookie_seconds, last_used=now,
            user_agent=_printable(user_agent)[:MAX_USER_AGENT], permissions=entry.permissions)
        for old in dropped:
            self._forget(old)
        log.info("paired browser %s for user %s", browser.id, entry.user or "(local)")
        return browser, cookie, page

    # --- cookies -------------------------------------------------------------

    async def browser_for(self, cookie: str | None, page: str | None) -> Browser | None:
        """The browser ``cookie`` and its ``page`` token sign in together,
        or None (either missing or wrong, revoked, expired). Cheap when
        asked again soon: see :data:`CACHE_SECONDS`."""
        if not cookie or not page:
            return None
        hashed = _credential_hash(cookie, page)
        now = self.clock()
        cached = self._cache.get(hashed)
        if cached is not None and trio.current_time() - cached[1] < CACHE_SECONDS:
            browser = cached[0]
            if browser.expires > now:
                self._cache.move_to_end(hashed)
                if now - browser.last_used >= TOUCH_SECONDS:
                    browser.last_used = now
                    await self.store.touch(browser.id, now)
                return browser
        self._cache.pop(hashed, None)
        heard = self._revocations
        browser = await self.store.browser_by_cookie(hashed, now)
        if browser is None:
            return None
        if now - browser.last_used >= TOUCH_SECONDS:
            browser.last_used = now
            await self.store.touch(browser.id, now)
        if heard != self._revocations:  # revoked meanwhile, perhaps: ask the store again
            return await self.browser_for(cookie, page)
        self._cache[hashed] = (browser, trio.current_time())
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return browser

    async def browsers(self, user: str) -> list[Browser]:
        """``user``'s paired browsers, oldest first."""
        return await self.store.browsers(user, self.clock())

    async def revoke(self, user: str, browser_id: str) -> bool:
        """Forget ``user``'s browser ``browser_id`` (``"all"``: every one)
        and close its connections, on every replica; False when there is no
        such browser of ``user``'s."""
        ids = await self.store.revoke(user, browser_id)
        for gone in ids:
            self._forget(gone)
        return bool(ids) or browser_id == "all"

    def _forget(self, browser_id: str) -> None:
        self._revocations += 1
        for hashed in [h for h, (b, _) in self._cache.items() if b.id == browser_id]:
            del self._cache[hashed]
        try:
            self.on_revoke(browser_id)
        except Exception:
            log.exception("closing the connections of browser %s failed", browser_id)


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)
