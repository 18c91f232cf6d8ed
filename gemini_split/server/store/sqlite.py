"""The default session store: one SQLite file (WAL mode) in the state directory.

One dedicated writer thread owns the database connection and runs every
operation, in the order issued. The Trio loop never touches SQLite: it puts
operations on a queue (``append_events`` returns at once) and awaits the
durable ones. The thread takes everything queued, runs it in one
transaction and commits — so events are written in batches whose size
follows the load, and a crash loses at most the batch being written.

``bench/sessions.py`` (w) measured this against a Trio task that gathers
events and hands each batch to ``trio.to_thread.run_sync``: the cost on the
loop came out the same within noise (about 18 µs per event each, GIL
contention included, on a loaded 2-core machine); ``to_thread`` reached
durability sooner in a flood of one-event batches. The dedicated thread is
kept because one ordered queue gives the contract's ordering (events before
the history that follows them, reads that see earlier writes) with no lock
and no extra task (see docs/architecture.md).

During a rush (``server/session/priority.py``: a burst's requests on
their way to a first delta, the loop busy) the thread waits before a
batch that holds only writes no first delta needs — events, ``create``,
``set_running`` (:meth:`SQLiteStore.defer_writes`) — until the rush ends,
any other operation is queued (a read, ``save_turn``, ``flush``: it takes
them all, in order) or :attr:`SQLiteStore.max_defer` seconds pass. It
holds the GIL while it binds rows, so in a 1,000-prompt burst its work
was ~9% of the daemon's samples until the last first delta
(docs/performance.md). A crash then loses at most ``max_defer`` seconds of
events more.

Durability: WAL with ``synchronous=NORMAL`` — a committed transaction
survives the process being killed; a power cut may lose the last
transactions (not corrupt the file).

Files in the state directory: ``sessions.db`` (+ its ``-wal``/``-shm``) and,
for a server, ``serve.lock`` (held with ``flock`` while it runs, so a second
``serve`` on the same directory is refused instead of sharing the database).
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import json
import logging
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from . import (
    DEFAULT_REPLAY_CAPACITY,
    EventMark,
    SessionRecord,
    SessionStore,
    SessionSummary,
    StoredEvent,
    StoreError,
    StoreLocked,
)
from .sqlite_pairing import SQLitePairing

log = logging.getLogger(__name__)

T = TypeVar("T")

DB_NAME = "sessions.db"
LOCK_NAME = "serve.lock"
SCHEMA_VERSION = 5

#: Paired browsers and pending pairing codes (``sqlite_pairing.py``): only
#: hashes of cookies and codes.
_PAIRING_TABLES = """
CREATE TABLE IF NOT EXISTS browsers (
    id TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    cookie_hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    last_used REAL NOT NULL DEFAULT 0,
    user_agent TEXT NOT NULL DEFAULT '',
    permissions TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS browsers_by_user ON browsers (user);
CREATE TABLE IF NOT EXISTS pair_codes (
    hash TEXT PRIMARY KEY,
    user TEXT NOT NULL,
    permissions TEXT NOT NULL DEFAULT '[]',
    expires REAL NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    keep_until REAL NOT NULL
);
"""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    approval TEXT NOT NULL DEFAULT '{}',
    title TEXT NOT NULL DEFAULT '',
    history TEXT NOT NULL DEFAULT '[]',
    turns INTEGER NOT NULL DEFAULT 0,
    running_request TEXT,
    last_seq INTEGER NOT NULL DEFAULT 0,
    timeline TEXT NOT NULL DEFAULT '{}',
    archive TEXT NOT NULL DEFAULT '[]',
    project TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (owner, updated);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    request_id TEXT,
    data TEXT NOT NULL,
    timestamp INTEGER NOT NULL DEFAULT 0,
    type TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
""" + _PAIRING_TABLES
#: Schema 1 → 2: events keep their timestamp and type (late-joiner replay).
_MIGRATE_1_TO_2 = """
ALTER TABLE events ADD COLUMN timestamp INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN type TEXT NOT NULL DEFAULT '';
"""
#: Schema 2 → 3: what rewinding a session needs (1.4; ``server/session/features/rewind.py``).
_MIGRATE_2_TO_3 = """
ALTER TABLE sessions ADD COLUMN timeline TEXT NOT NULL DEFAULT '{}';
ALTER TABLE sessions ADD COLUMN archive TEXT NOT NULL DEFAULT '[]';
"""
#: Schema 3 → 4: sessions remember their project directory (sessions per project).
_MIGRATE_3_TO_4 = """
ALTER TABLE sessions ADD COLUMN project TEXT NOT NULL DEFAULT '';
"""
#: Schema 4 → 5: paired browsers and pairing codes (``serve --web``) move
#: into the database from ``browsers.json`` (``sqlite_pairing.py`` imports it).
_MIGRATE_4_TO_5 = _PAIRING_TABLES
_COLUMNS_2 = ("id", "owner", "token_hash", "created", "updated", "model", "approval", "title", "history",
              "turns", "running_request", "last_seq")
_COLUMNS_3 = (*_COLUMNS_2, "timeline", "archive")
_COLUMNS = (*_COLUMNS_3, "project")
#: The sessions table's columns in each schema version this store opens.
_LAYOUTS = {1: _COLUMNS_2, 2: _COLUMNS_2, 3: _COLUMNS_3, 4: _COLUMNS, 5: _COLUMNS}

#: Operations the writer thread takes from its queue at most per transaction.
_MAX_BATCH = 5000
#: Seconds a deferrable write waits at most during a rush (module docstring).
DEFAULT_MAX_DEFER = 1.0


class SQLiteStore(SessionStore):
    """Sessions in ``DIR/sessions.db``. ``exclusive`` (a server) takes
    ``DIR/serve.lock`` for as long as the store is open."""

    def __init__(self, directory: Path, *, replay_capacity: int = DEFAULT_REPLAY_CAPACITY, exclusive: bool = False,
                 max_defer: float = DEFAULT_MAX_DEFER):
        self.directory = Path(directory)
        self.path = self.directory / DB_NAME
        self.replay_capacity = replay_capacity
        self.exclusive = exclusive
        self.max_defer = max_defer
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        #: Whether deferrable writes wait (:meth:`defer_writes`); set from
        #: the loop, read by the writer thread.
        self._deferring = False
        #: Set when the writer must not wait: an operation that is not
        #: deferrable was queued, or the rush ended.
        self._go = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_fd: int | None = None
        self._write_error: StoreError | None = None
        self._closed = False

    # --- lifetime ------------------------------------------------------------

    @property
    def write_error(self) -> StoreError | None:
        return self._write_error

    async def open(self) -> None:
        await trio.to_thread.run_sync(self._open_sync)

    def _open_sync(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"{self.directory}: cannot create the state directory: {exc.strerror or exc}") from None
        self._make_private()
        if self.exclusive:
            self._take_lock()
        try:
            conn = self._connect()
        except BaseException:
            self._release_lock()
            raise
        self._thread = threading.Thread(target=self._run, args=(conn,), name="session-store-writer", daemon=True)
        self._thread.start()

    def _make_private(self) -> None:
        """Every file of ours in the directory 0600, whatever the umask or
        the directory's mode: the database is created 0600 before SQLite
        opens it (SQLite gives its -wal, -shm and -journal files the
        database's mode), and files left 0644 by an earlier version are
        closed. A directory that others can read is said once at start."""
        info = os.stat(self.directory)
        if info.st_mode & 0o044:
            log.warning("the state directory %s can be listed by other local users (mode %04o): "
                        "chmod 700 it", self.directory, stat.S_IMODE(info.st_mode))
        try:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        except OSError:
            return  # _connect says what is wrong with it
        for name in (self.path.name, *(self.path.name + s for s in ("-wal", "-shm", "-journal")), LOCK_NAME):
            path = self.directory / name
            try:
                found = os.lstat(path)
                if stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid() and found.st_mode & 0o077:
                    os.chmod(path, 0o600)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("cannot make %s private: %s", path, exc.strerror or exc)

    def _take_lock(self) -> None:
        lock_path = self.directory / LOCK_NAME
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StoreError(f"{lock_path}: cannot open the lock file: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StoreLocked(
                f"{self.directory} is in use by another gemini-split serve (pid {holder}); "
                "stop it or give this one another --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def _connect(self) -> sqlite3.Connection:
        """Open and check the database without changing an existing file
        that is not ours: a corrupt or foreign file is reported, untouched."""
        # An empty file is what a crash right after creating it leaves.
        existed = self.path.exists() and self.path.stat().st_size > 0
        if existed and not os.access(self.path, os.R_OK | os.W_OK):
            raise StoreError(f"{self.path}: cannot open the session database: permission denied")
        try:
            conn = sqlite3.connect(
                f"file:{self.path}?mode={'rw' if existed else 'rwc'}", uri=True,
                isolation_level=None, check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the session database: {exc}") from None
        try:
            if existed:
                version = self._check(conn)
                if version == 1:
                    conn.executescript(_MIGRATE_1_TO_2)
                if version in (1, 2):
                    conn.executescript(_MIGRATE_2_TO_3)
                if version in (1, 2, 3):
                    conn.executescript(_MIGRATE_3_TO_4)
                if version in (1, 2, 3, 4):
                    conn.executescript(_MIGRATE_4_TO_5)
                if version != SCHEMA_VERSION:
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=5000")
            if not existed:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"{self.path}: not a usable session database: {exc}") from None
        except StoreError:
            conn.close()
            raise
        return conn

    def _check(self, conn: sqlite3.Connection) -> int:
        """The file's schema version (1 to 5), once it is ours and sound."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version not in _LAYOUTS or not {"sessions", "events"} <= tables:
            raise StoreError(f"{self.path}: not a gemini-split session database "
                             f"(schema version {version}, tables {sorted(tables) or 'none'})")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
        if tuple(columns) != _LAYOUTS[version]:
            raise StoreError(f"{self.path}: unexpected sessions table layout {columns}")
        # Reads every page of the two tables' b-trees: a damaged file is
        # found now, not in the middle of a resume.
        result = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if result != "ok":
            raise StoreError(f"{self.path}: the session database is damaged ({result})")
        return version

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._put(("stop", done))
            with trio.CancelScope(shield=True):
                await _wait(done)
                await trio.to_thread.run_sync(self._thread.join)
        self._release_lock()

    # --- the interface ------------------------------------------------------------

    def paired_browsers(self) -> SQLitePairing:
        return SQLitePairing(self)

    async def create(self, record: SessionRecord) -> None:
        row = _to_row(record)

        def do(conn: sqlite3.Connection) -> None:
            conn.execute(f"INSERT INTO sessions ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})", row)

        await self._call(do, deferrable=True)

    async def get(self, session_id: str) -> SessionRecord | None:
        def do(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return _from_row(row) if row is not None else None

        return await self._call(do)

    async def list_sessions(self, owner: str) -> list[SessionSummary]:
        def do(conn: sqlite3.Connection) -> list[SessionSummary]:
            rows = conn.execute(
                "SELECT id, title, created, updated, turns, model, project FROM sessions WHERE owner = ? "
                "ORDER BY updated DESC, id", (owner,)).fetchall()
            return [SessionSummary(*row) for row in rows]

        return await self._call(do)

    async def delete(self, session_id: str) -> bool:
        def do(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            return conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

        return await self._call(do)

    async def save_turn(self, session_id: str, *, history: list[dict[str, Any]], updated: float, turns: int,
                        title: str | None = None, model: str | None = None,
                        running_request: str | None = None, timeline: dict[str, Any] | None = None,
                        archive: list[dict[str, Any]] | None = None) -> None:
        history_json = json.dumps(history, ensure_ascii=False)
        timeline_json = None if timeline is None else json.dumps(timeline, ensure_ascii=False)
        archive_json = None if archive is None else json.dumps(archive, ensure_ascii=False)

        def do(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE sessions SET history = ?, updated = ?, turns = ?, running_request = ?, "
                "title = COALESCE(?, title), model = COALESCE(?, model), timeline = COALESCE(?, timeline), "
                "archive = COALESCE(?, archive) WHERE id = ?",
                (history_json, updated, turns, running_request, title, model, timeline_json, archive_json,
                 session_id),
            )

        await self._call(do)

    async def set_running(self, session_id: str, request_id: str | None, *, updated: float) -> None:
        def do(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE sessions SET running_request = ?, updated = ? WHERE id = ?",
                         (request_id, updated, session_id))

        await self._call(do, deferrable=True)

    async def set_token_hash(self, session_id: str, token_hash: str) -> None:
        def do(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE sessions SET token_hash = ? WHERE id = ?", (token_hash, session_id))

        await self._call(do)

    def append_events(self, session_id: str, events: Sequence[StoredEvent]) -> None:
        if events:
            self._queue.put(("events", session_id, events))

    def defer_writes(self, on: bool) -> None:
        """See the module docstring: while on, a batch of deferrable writes
        waits (at most :attr:`max_defer` seconds)."""
        self._deferring = on
        if not on:
            self._go.set()

    async def flush(self) -> None:
        await self._call(lambda conn: None)

    async def release_idle(self) -> None:
        """Free the connection's page cache (about 2 MB once a burst has
        filled it, in the writer thread's heap; the give-back that follows
        returns it to the system)."""
        if self._thread is not None and not self._closed:
            await self._call(lambda conn: conn.execute("PRAGMA shrink_memory"))

    async def events_after(self, session_id: str, last_seq: int, limit: int | None = None) -> list[StoredEvent] | None:
        def do(conn: sqlite3.Connection) -> list[StoredEvent] | None:
            row = conn.execute("SELECT last_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            if last_seq >= row[0]:
                return []
            rows = conn.execute("SELECT seq, request_id, data, timestamp, type FROM events "
                                "WHERE session_id = ? AND seq > ? "
                                "ORDER BY seq LIMIT ?", (session_id, last_seq, -1 if limit is None else limit)
                                ).fetchall()
            if not rows or rows[0][0] != last_seq + 1:
                return None
            return [StoredEvent(*r) for r in rows]

        return await self._call(do)

    async def event_marks(self, session_id: str) -> list[EventMark] | None:
        def do(conn: sqlite3.Connection) -> list[EventMark] | None:
            if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                return None
            rows = conn.execute("SELECT seq, timestamp, request_id, type FROM events WHERE session_id = ? "
                                "ORDER BY seq", (session_id,)).fetchall()
            return [EventMark(*r) for r in rows]

        return await self._call(do)

    async def expire(self, idle_before: float) -> list[str]:
        def do(conn: sqlite3.Connection) -> list[str]:
            gone = [r[0] for r in conn.execute("SELECT id FROM sessions WHERE updated < ?", (idle_before,))]
            for sid in gone:
                conn.execute("DELETE FROM events WHERE session_id = ?", (sid,))
                conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
            return gone

        return await self._call(do)

    # --- the writer thread ----------------------------------------------------------

    async def _call(self, fn: Callable[[sqlite3.Connection], T], *, deferrable: bool = False) -> T:
        """Run ``fn`` in the writer thread, in order; ``deferrable``: it may
        wait through a rush (:meth:`defer_writes`)."""
        if self._thread is None or self._closed:
            raise StoreError(f"{self.path}: the session store is not open")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if deferrable:
            self._queue.put(("call", fn, future, True))
        else:
            self._put(("call", fn, future, False))
        return await _wait(future)

    def _put(self, op: tuple[Any, ...]) -> None:
        """Queue an operation the writer must not wait with."""
        self._queue.put(op)
        self._go.set()

    def _run(self, conn: sqlite3.Connection) -> None:
        try:
            # No local keeps a batch while the thread waits for the next: the
            # last batch of a burst (a few hundred sessions' events and
            # turns) would live on through the quiet that follows, its
            # objects pinning pages of freed memory (gemini_split/memory.py).
            while self._write_batch(conn, self._next_batch()):
                pass
        finally:
            conn.close()

    def _next_batch(self) -> list[tuple[Any, ...]]:
        """The next operation (waiting for it) and those queued behind it;
        during a rush, a deferrable one first waits (module docstring)."""
        first = self._queue.get()
        if self._deferring and (first[0] == "events" or (first[0] == "call" and first[3])):
            give_up = time.monotonic() + self.max_defer
            while self._deferring and not self._go.is_set():
                left = give_up - time.monotonic()
                if left <= 0:
                    break
                self._go.wait(left)
        # Cleared before the queue is drained: whatever is queued after
        # this sets it again.
        self._go.clear()
        batch = [first]
        while len(batch) < _MAX_BATCH:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write_batch(self, conn: sqlite3.Connection, batch: list[tuple[Any, ...]]) -> bool:
        """Run a batch in one transaction; resolve its futures after the
        commit. Returns False once a stop was taken."""
        results: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        stop: concurrent.futures.Future[None] | None = None
        newest: dict[str, int] = {}
        failure: StoreError | None = None
        rows: list[tuple[str, int, str | None, str, int, str]] = []
        try:
            conn.execute("BEGIN")
            for op in batch:
                kind = op[0]
                if kind == "events":
                    _, sid, events = op
                    rows.extend((sid, e.seq, e.request_id, e.data, e.timestamp, e.type) for e in events)
                    newest[sid] = max(newest.get(sid, 0), events[-1].seq)
                elif kind == "call":
                    _, fn, future, _deferrable = op
                    if newest:  # a read must see the events appended before it
                        self._insert_events(conn, rows, newest)
                        rows, newest = [], {}
                    try:
                        results.append((future, fn(conn), None))
                    except sqlite3.Error:
                        raise
                    except Exception as exc:  # a bug in one operation fails only that one
                        results.append((future, None, exc))
                else:
                    stop = op[1]
            self._insert_events(conn, rows, newest)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            failure = StoreError(f"{self.path}: cannot write the session database: {exc}")
            log.error("%s", failure)
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        self._write_error = failure
        for future, value, error in results:
            if failure is not None:
                future.set_exception(failure)
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)
        if failure is not None:
            for op in batch:
                if op[0] == "call" and not op[2].done():
                    op[2].set_exception(failure)
        if stop is not None:
            stop.set_result(None)
            return False
        return True

    def _insert_events(self, conn: sqlite3.Connection, rows: list[tuple[str, int, str | None, str, int, str]],
                       newest: dict[str, int]) -> None:
        """Write gathered events, move each session's last_seq on and drop
        events beyond capacity."""
        if rows:
            conn.executemany("INSERT OR REPLACE INTO events (session_id, seq, request_id, data, timestamp, type) "
                             "VALUES (?, ?, ?, ?, ?, ?)", rows)
        for sid, seq in newest.items():
            conn.execute("UPDATE sessions SET last_seq = MAX(last_seq, ?) WHERE id = ?", (seq, sid))
            conn.execute("DELETE FROM events WHERE session_id = ? AND seq <= ?", (sid, seq - self.replay_capacity))


async def _wait(future: concurrent.futures.Future[T]) -> T:
    """Await a future resolved by another thread, without a worker thread."""
    if not future.done():
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        await done.wait()
    return future.result()


def _to_row(r: SessionRecord) -> tuple[Any, ...]:
    return (r.id, r.owner, r.token_hash, r.created, r.updated, r.model, json.dumps(r.approval),
            r.title, json.dumps(r.history, ensure_ascii=False), r.turns, r.running_request, r.last_seq,
            json.dumps(r.timeline, ensure_ascii=False), json.dumps(r.archive, ensure_ascii=False), r.project)


def _from_row(row: tuple[Any, ...]) -> SessionRecord:
    values = dict(zip(_COLUMNS, row))
    values["approval"] = json.loads(values["approval"])
    values["history"] = json.loads(values["history"])
    values["timeline"] = json.loads(values["timeline"])
    values["archive"] = json.loads(values["archive"])
    return SessionRecord(**values)
