"""Paired browsers and pairing codes in the SQLite database (schema 5:
tables ``browsers`` and ``pair_codes``), written by the store's one writer
thread like everything else in it (``sqlite.py``), so a code's single use is
one transaction.

Before schema 5, paired browsers were kept in ``STATE_DIR/browsers.json``:
:meth:`SQLitePairing.open` imports that file into the database once and then
removes it (only after the import is committed; a file it cannot read is
left where it is and said so, never deleted).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from .pairing import ALL, BrowserRecord, PairingCode, PairingStore

log = logging.getLogger(__name__)

#: The file paired browsers were kept in before schema 5.
LEGACY_FILE = "browsers.json"

_BROWSER_COLUMNS = ("id", "user", "cookie_hash", "created", "expires", "last_used", "user_agent", "permissions")
_SELECT = f"SELECT {', '.join(_BROWSER_COLUMNS)} FROM browsers"


def _browser(row: tuple[Any, ...]) -> BrowserRecord:
    values = dict(zip(_BROWSER_COLUMNS, row))
    values["permissions"] = tuple(json.loads(values["permissions"]))
    return BrowserRecord(**values)


def _row(b: BrowserRecord) -> tuple[Any, ...]:
    return (b.id, b.user, b.cookie_hash, b.created, b.expires, b.last_used, b.user_agent,
            json.dumps(list(b.permissions)))


class SQLitePairing(PairingStore):
    """The pairing tables of ``store`` (a :class:`~.sqlite.SQLiteStore`)."""

    def __init__(self, store: Any):
        self.store = store

    async def open(self) -> None:
        legacy = Path(self.store.directory) / LEGACY_FILE
        try:
            records = json.loads(legacy.read_text(encoding="utf-8"))
            rows = [_row(BrowserRecord(**{**r, "permissions": tuple(r.get("permissions", ()))})) for r in records]
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("cannot import the paired browsers of %s (%s): left as it is; those browsers must pair "
                        "again", legacy, exc)
            return

        def do(conn: sqlite3.Connection) -> None:
            conn.executemany(f"INSERT OR IGNORE INTO browsers ({', '.join(_BROWSER_COLUMNS)}) "
                             f"VALUES ({', '.join('?' * len(_BROWSER_COLUMNS))})", rows)

        await self.store._call(do)
        try:
            os.unlink(legacy)
        except OSError as exc:
            log.warning("imported %s into the database but cannot remove it: %s", legacy, exc.strerror or exc)
            return
        log.info("imported %d paired browser(s) from %s into the session database", len(rows), legacy)

    async def _add_code(self, code_hash: str, code: PairingCode, *, keep_until: float, max_per_user: int,
                        now: float) -> None:
        def do(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM pair_codes WHERE keep_until <= ?", (now,))
            conn.execute(
                "DELETE FROM pair_codes WHERE hash IN (SELECT hash FROM pair_codes WHERE user = ? AND used = 0 "
                "ORDER BY expires DESC, hash DESC LIMIT -1 OFFSET ?)", (code.user, max(max_per_user - 1, 0)))
            conn.execute("INSERT OR REPLACE INTO pair_codes (hash, user, permissions, expires, used, keep_until) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (code_hash, code.user, json.dumps(list(code.permissions)), code.expires, int(code.used),
                          keep_until))

        await self.store._call(do)

    async def take_code(self, code_hash: str, now: float) -> tuple[str, PairingCode | None]:
        def do(conn: sqlite3.Connection) -> tuple[str, PairingCode | None]:
            row = conn.execute("SELECT user, permissions, expires, used, keep_until FROM pair_codes WHERE hash = ?",
                               (code_hash,)).fetchone()
            if row is None or row[4] <= now:
                return "unknown", None
            user, permissions, expires, used, _ = row
            if used:
                return "used", None
            if expires <= now:
                return "expired", None
            conn.execute("UPDATE pair_codes SET used = 1 WHERE hash = ?", (code_hash,))
            return "ok", PairingCode(user=user, expires=expires, permissions=tuple(json.loads(permissions)), used=True)

        return await self.store._call(do)

    async def _add_browser(self, browser: BrowserRecord, *, max_per_user: int) -> list[str]:
        def do(conn: sqlite3.Connection) -> list[str]:
            dropped = [r[0] for r in conn.execute(
                "SELECT id FROM browsers WHERE user = ? ORDER BY last_used DESC, id DESC LIMIT -1 OFFSET ?",
                (browser.user, max(max_per_user - 1, 0)))]
            conn.executemany("DELETE FROM browsers WHERE id = ?", [(i,) for i in dropped])
            conn.execute(f"INSERT INTO browsers ({', '.join(_BROWSER_COLUMNS)}) "
                         f"VALUES ({', '.join('?' * len(_BROWSER_COLUMNS))})", _row(browser))
            return dropped

        return await self.store._call(do)

    async def browser_by_cookie(self, cookie_hash: str, now: float) -> BrowserRecord | None:
        def do(conn: sqlite3.Connection) -> BrowserRecord | None:
            row = conn.execute(f"{_SELECT} WHERE cookie_hash = ?", (cookie_hash,)).fetchone()
            if row is None:
                return None
            browser = _browser(row)
            if browser.expires <= now:
                conn.execute("DELETE FROM browsers WHERE id = ?", (browser.id,))
                return None
            return browser

        return await self.store._call(do)

    async def browsers(self, user: str, now: float) -> list[BrowserRecord]:
        def do(conn: sqlite3.Connection) -> list[BrowserRecord]:
            conn.execute("DELETE FROM browsers WHERE expires <= ?", (now,))
            return [_browser(r) for r in conn.execute(f"{_SELECT} WHERE user = ? ORDER BY created, id", (user,))]

        return await self.store._call(do)

    async def touch(self, browser_id: str, last_used: float) -> None:
        def do(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE browsers SET last_used = ? WHERE id = ?", (last_used, browser_id))

        await self.store._call(do)

    async def revoke(self, user: str, browser_id: str) -> list[str]:
        def do(conn: sqlite3.Connection) -> list[str]:
            if browser_id == ALL:
                ids = [r[0] for r in conn.execute("SELECT id FROM browsers WHERE user = ?", (user,))]
            else:
                ids = [r[0] for r in conn.execute("SELECT id FROM browsers WHERE user = ? AND id = ?",
                                                  (user, browser_id))]
            conn.executemany("DELETE FROM browsers WHERE id = ?", [(i,) for i in ids])
            return ids

        return await self.store._call(do)
