"""Paired browsers and pending pairing codes, kept in the session store.

``serve --web`` signs browsers in with one-time codes (``gemini_split/web/pairing.py``
makes the codes and cookies, and decides what to say); where they are kept
is the store's, so that they live where the sessions do: in this process
(:class:`MemoryPairing`), in the SQLite database (``sqlite.py``: schema 5)
or in Redis, shared by every replica (``redis_pairing.py``). Each backend's
:meth:`~gemini_split.server.store.SessionStore.paired_browsers` gives its
own; the contract is tested once for all (``tests/store/test_pairing_contract.py``).

What every backend guarantees:

1. **Only hashes.** Codes and cookies are never given to the store: only
   their SHA-256 hashes (``code_hash``, ``cookie_hash``).
2. **A code works once**, even when several replicas redeem it at the same
   moment: :meth:`PairingStore.take_code` marks it used and says what it
   found in one atomic step. A used or expired code is still recognised
   (``used`` / ``expired``, not ``unknown``) until ``keep_until``.
3. **Bounded per user**: :meth:`~PairingStore.add_code` keeps a user's
   ``max_per_user`` newest unused codes (older ones are forgotten), and
   :meth:`~PairingStore.add_browser` the ``max_per_user`` most recently used
   browsers (the others are revoked: their ids are returned).
4. **Expiry**: a browser whose ``expires`` has passed is never returned
   again, and is forgotten.
5. **Revocation is heard everywhere**: :meth:`~PairingStore.revocations`
   yields the ids revoked by *other* processes sharing the store (Redis
   replicas), so each can close that browser's open pages; a backend no
   other process shares never yields.
6. **Failures** are :class:`~gemini_split.server.store.StoreError`, as for
   sessions.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import trio

#: The id ``revoke`` takes for every browser of the user.
ALL = "all"


@dataclass
class PairingCode:
    """A pairing code as kept (under its hash)."""

    user: str
    expires: float
    permissions: tuple[str, ...] = ()
    used: bool = False


@dataclass
class BrowserRecord:
    """A paired browser as kept. ``user`` is the principal's ``user_id``
    (``""`` on a server without auth); times are seconds since the epoch."""

    id: str
    user: str
    cookie_hash: str
    created: float
    expires: float
    last_used: float = 0.0
    user_agent: str = ""
    permissions: tuple[str, ...] = ()


class PairingStore(ABC):
    """Codes and browsers in one backend (see the module docstring)."""

    async def open(self) -> None:
        """Make it usable (the SQLite store imports an old ``browsers.json``
        here). Called once, after the session store is open."""

    async def add_code(self, code_hash: str, *, user: str, expires: float, permissions: tuple[str, ...] = (),
                       keep_until: float, max_per_user: int, now: float) -> None:
        """Keep a new code (unused) of ``user``'s; forget the user's oldest
        unused codes beyond ``max_per_user``, and codes whose
        ``keep_until`` has passed."""
        await self._add_code(code_hash, PairingCode(user=user, expires=expires, permissions=tuple(permissions)),
                             keep_until=keep_until, max_per_user=max_per_user, now=now)

    @abstractmethod
    async def _add_code(self, code_hash: str, code: PairingCode, *, keep_until: float, max_per_user: int,
                        now: float) -> None:
        """:meth:`add_code`, the record made."""

    @abstractmethod
    async def take_code(self, code_hash: str, now: float) -> tuple[str, PairingCode | None]:
        """Use the code, atomically: ``("ok", code)`` the first time within
        its life; else ``("used", None)``, ``("expired", None)`` or
        ``("unknown", None)``."""

    async def add_browser(self, *, max_per_user: int, **fields: Any) -> tuple[BrowserRecord, list[str]]:
        """Keep a new browser (``fields``: those of :class:`BrowserRecord`);
        returns it, and the ids of the user's least recently used browsers
        revoked to stay within ``max_per_user``."""
        fields["permissions"] = tuple(fields.get("permissions", ()))
        browser = BrowserRecord(**fields)
        return browser, await self._add_browser(browser, max_per_user=max_per_user)

    @abstractmethod
    async def _add_browser(self, browser: BrowserRecord, *, max_per_user: int) -> list[str]:
        """:meth:`add_browser`, the record made: the ids dropped."""

    @abstractmethod
    async def browser_by_cookie(self, cookie_hash: str, now: float) -> BrowserRecord | None:
        """The browser whose cookie hashes to ``cookie_hash``, unless it has
        expired (then it is forgotten) or there is none."""

    @abstractmethod
    async def browsers(self, user: str, now: float) -> list[BrowserRecord]:
        """``user``'s unexpired browsers, oldest first."""

    @abstractmethod
    async def touch(self, browser_id: str, last_used: float) -> None:
        """Record when the browser was last used (nothing if it is gone)."""

    @abstractmethod
    async def revoke(self, user: str, browser_id: str) -> list[str]:
        """Forget ``user``'s browser ``browser_id`` (:data:`ALL`: every one
        of ``user``'s); returns the ids forgotten (none: no such browser of
        ``user``'s). Other processes sharing the store hear them
        (:meth:`revocations`)."""

    async def revocations(self) -> AsyncIterator[list[str]]:
        """Ids of browsers revoked by other processes sharing this store, as
        they are revoked, forever. Default: no other process shares it."""
        await trio.sleep_forever()
        yield []  # pragma: no cover - an async generator needs a yield


class MemoryPairing(PairingStore):
    """In this process only (``--state-dir :memory:``): a restart signs
    every browser out."""

    def __init__(self) -> None:
        self._codes: dict[str, tuple[PairingCode, float]] = {}
        self._browsers: dict[str, BrowserRecord] = {}

    async def _add_code(self, code_hash: str, code: PairingCode, *, keep_until: float, max_per_user: int,
                        now: float) -> None:
        for h in [h for h, (_, keep) in self._codes.items() if keep <= now]:
            del self._codes[h]
        mine = sorted((c.expires, h) for h, (c, _) in self._codes.items() if c.user == code.user and not c.used)
        for _, h in mine[: max(0, len(mine) - max_per_user + 1)]:
            del self._codes[h]
        self._codes[code_hash] = (copy.copy(code), keep_until)

    async def take_code(self, code_hash: str, now: float) -> tuple[str, PairingCode | None]:
        entry = self._codes.get(code_hash)
        if entry is None or entry[1] <= now:
            return "unknown", None
        code = entry[0]
        if code.used:
            return "used", None
        if code.expires <= now:
            return "expired", None
        code.used = True
        return "ok", copy.copy(code)

    async def _add_browser(self, browser: BrowserRecord, *, max_per_user: int) -> list[str]:
        mine = sorted((b.last_used, b.id) for b in self._browsers.values() if b.user == browser.user)
        dropped = [old for _, old in mine[: max(0, len(mine) - max_per_user + 1)]]
        for old in dropped:
            del self._browsers[old]
        self._browsers[browser.id] = copy.copy(browser)
        return dropped

    async def browser_by_cookie(self, cookie_hash: str, now: float) -> BrowserRecord | None:
        for browser in self._browsers.values():
            if browser.cookie_hash == cookie_hash:
                if browser.expires <= now:
                    del self._browsers[browser.id]
                    return None
                return copy.copy(browser)
        return None

    async def browsers(self, user: str, now: float) -> list[BrowserRecord]:
        return sorted((copy.copy(b) for b in self._browsers.values() if b.user == user and b.expires > now),
                      key=lambda b: (b.created, b.id))

    async def touch(self, browser_id: str, last_used: float) -> None:
        browser = self._browsers.get(browser_id)
        if browser is not None:
            browser.last_used = last_used

    async def revoke(self, user: str, browser_id: str) -> list[str]:
        ids = [b.id for b in self._browsers.values() if b.user == user and browser_id in (ALL, b.id)]
        for gone in ids:
            del self._browsers[gone]
        return ids
