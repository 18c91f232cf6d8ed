"""What only the SQLite backend has: a file, a lock, a disk that fills up,
a process that is killed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import trio

from gemini_split.server.store import StoreError, StoreLocked, open_store
from gemini_split.server.store.sqlite import DB_NAME, SCHEMA_VERSION

from .test_store_contract import events, record


def _child(code: str, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


WRITER = """
    import sys, time, trio
    from gemini_split.server.store import open_store, SessionRecord, StoredEvent, hash_token
    async def main():
        store = open_store(sys.argv[1], exclusive=True)
        await store.open()
        await store.create(SessionRecord(id="s-k", owner="alice", token_hash=hash_token("t"),
                                         created=time.time(), updated=time.time()))
        store.append_events("s-k", [StoredEvent(i, "r-1", '{"type":"text_delta"}') for i in range(1, 101)])
        await store.save_turn("s-k", history=[{"role": "user", "parts": [{"text": "kept"}]}],
                              updated=time.time(), turns=1)
        await store.set_running("s-k", "r-2", updated=time.time())
        print("saved", flush=True)
        await trio.sleep_forever()
    trio.run(main)
"""


@pytest.mark.timeout(40)
async def test_a_saved_turn_survives_sigkill_and_the_running_request_is_remembered(tmp_path):
    state = tmp_path / "state"
    child = _child(WRITER, str(state))
    try:
        with trio.fail_after(15):
            line = await trio.to_thread.run_sync(child.stdout.readline)
        assert line == "saved\n", child.stderr.read()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store = open_store(state, exclusive=True)  # the dead process's lock is gone with it
    with trio.fail_after(10):
        await store.open()
        try:
            got = await store.get("s-k")
            assert got.history == [{"role": "user", "parts": [{"text": "kept"}]}]
            assert got.running_request == "r-2"
            assert [e.seq for e in await store.events_after("s-k", 0)] == list(range(1, 101))
        finally:
            await store.aclose()


async def test_a_second_server_on_the_same_directory_is_refused(tmp_path):
    first = open_store(tmp_path, exclusive=True)
    with trio.fail_after(10):
        await first.open()
        try:
            second = open_store(tmp_path, exclusive=True)
            with pytest.raises(StoreLocked, match=rf"{tmp_path} is in use by another gemini-split serve \(pid {os.getpid()}\)"):
                await second.open()
            # an embedded client (not exclusive) may still read it
            reader = open_store(tmp_path)
            await reader.open()
            await reader.aclose()
        finally:
            await first.aclose()
        again = open_store(tmp_path, exclusive=True)
        await again.open()
        await again.aclose()


@pytest.mark.parametrize("content", [b"this is not a database at all\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
async def test_a_corrupt_database_is_a_one_line_error_naming_the_file_and_stays_untouched(tmp_path, content):
    db = tmp_path / DB_NAME
    db.write_bytes(content)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    store = open_store(tmp_path, exclusive=True)
    with trio.fail_after(10), pytest.raises(StoreError) as caught:
        await store.open()
    message = str(caught.value)
    assert str(db) in message and "\n" not in message
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([DB_NAME, "serve.lock"])
    # and the lock was released: the next attempt fails the same way, not "in use"
    with trio.fail_after(10), pytest.raises(StoreError, match="database"):
        await open_store(tmp_path, exclusive=True).open()


async def test_another_programs_database_is_refused(tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    with trio.fail_after(10), pytest.raises(StoreError, match="not a gemini-split session database"):
        await open_store(tmp_path).open()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
async def test_an_unreadable_database_is_reported(tmp_path):
    store = open_store(tmp_path)
    await store.open()
    await store.aclose()
    (tmp_path / DB_NAME).chmod(0)
    with trio.fail_after(10), pytest.raises(StoreError, match=f"{tmp_path / DB_NAME}.*permission denied"):
        await open_store(tmp_path).open()


FILLER = """
    import resource, sys, time, trio
    from gemini_split.server.store import open_store, SessionRecord, StoredEvent, StoreError, hash_token
    async def main():
        store = open_store(sys.argv[1])
        await store.open()
        await store.create(SessionRecord(id="s-f", owner="a", token_hash=hash_token("t"),
                                         created=time.time(), updated=time.time()))
        await store.flush()
        # From now on no file may grow past 256 KiB: the disk is "full".
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        big = "x" * 4096
        seq = 0
        for _ in range(200):
            store.append_events("s-f", [StoredEvent(seq + i, None, big) for i in range(1, 11)])
            seq += 10
        try:
            await store.save_turn("s-f", history=[], updated=time.time(), turns=1)
            print("no error")
        except StoreError as exc:
            print("error:", exc)
        print("write_error:", store.write_error is not None)
        # The store stays usable for what fits.
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        await store.save_turn("s-f", history=[{"role": "user", "parts": [{"text": "ok"}]}], updated=time.time(), turns=2)
        print("after:", (await store.get("s-f")).turns, store.write_error is None)
        await store.aclose()
    trio.run(main)
"""


@pytest.mark.timeout(60)
def test_a_full_disk_is_a_store_error_and_the_store_recovers(tmp_path):
    child = _child(FILLER, str(tmp_path))
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"error: {tmp_path / DB_NAME}: cannot write the session database"), out
    assert lines[1:] == ["write_error: True", "after: 2 True"], out


SCHEMA_1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, token_hash TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, model TEXT NOT NULL DEFAULT '', approval TEXT NOT NULL DEFAULT '{}',
    title TEXT NOT NULL DEFAULT '', history TEXT NOT NULL DEFAULT '[]', turns INTEGER NOT NULL DEFAULT 0,
    running_request TEXT, last_seq INTEGER NOT NULL DEFAULT 0);
CREATE INDEX sessions_by_owner ON sessions (owner, updated);
CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, request_id TEXT, data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
INSERT INTO sessions (id, owner, token_hash, created, updated, last_seq) VALUES ('s-old', 'alice', 'h', 1, 1, 1);
INSERT INTO events VALUES ('s-old', 1, 'r-1', '{"type":"text_delta"}');
PRAGMA user_version=1;
"""


async def test_a_schema_1_database_is_migrated_and_keeps_its_sessions_and_events(tmp_path):
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / DB_NAME)
    conn.executescript(SCHEMA_1)
    conn.close()
    store = open_store(state)
    with trio.fail_after(10):
        await store.open()
        try:
            [old] = await store.events_after("s-old", 0)
            store.append_events("s-old", events(2, 2))
            marks = await store.event_marks("s-old")
        finally:
            await store.aclose()
    assert old.data == '{"type":"text_delta"}' and old.timestamp == 0 and old.type == ""
    assert [m.seq for m in marks] == [1, 2]
    assert sqlite3.connect(state / DB_NAME).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION



async def test_a_schema_2_database_is_migrated_its_sessions_in_no_project(tmp_path):
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / DB_NAME)
    conn.executescript(SCHEMA_1.replace("PRAGMA user_version=1;", "")
                       + "ALTER TABLE events ADD COLUMN timestamp INTEGER NOT NULL DEFAULT 0;"
                         "ALTER TABLE events ADD COLUMN type TEXT NOT NULL DEFAULT '';"
                         "PRAGMA user_version=2;")
    conn.close()
    store = open_store(state)
    with trio.fail_after(10):
        await store.open()
        try:
            [old] = await store.list_sessions("alice")
            record = await store.get("s-old")
        finally:
            await store.aclose()
    assert old.id == "s-old" and old.project == "" and record is not None and record.project == ""
    assert sqlite3.connect(state / DB_NAME).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


async def test_a_schema_3_database_is_migrated_its_sessions_in_no_project(tmp_path):
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / DB_NAME)
    conn.executescript(SCHEMA_1.replace("PRAGMA user_version=1;", "")
                       + "ALTER TABLE events ADD COLUMN timestamp INTEGER NOT NULL DEFAULT 0;"
                         "ALTER TABLE events ADD COLUMN type TEXT NOT NULL DEFAULT '';"
                         "ALTER TABLE sessions ADD COLUMN timeline TEXT NOT NULL DEFAULT '{}';"
                         "ALTER TABLE sessions ADD COLUMN archive TEXT NOT NULL DEFAULT '[]';"
                         "PRAGMA user_version=3;")
    conn.close()
    store = open_store(state)
    with trio.fail_after(10):
        await store.open()
        try:
            [old] = await store.list_sessions("alice")
            record = await store.get("s-old")
        finally:
            await store.aclose()
    assert old.project == "" and record is not None and record.project == "" and record.timeline == {}
    assert sqlite3.connect(state / DB_NAME).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


SCHEMA_4 = (SCHEMA_1.replace("PRAGMA user_version=1;", "")
            + "ALTER TABLE events ADD COLUMN timestamp INTEGER NOT NULL DEFAULT 0;"
              "ALTER TABLE events ADD COLUMN type TEXT NOT NULL DEFAULT '';"
              "ALTER TABLE sessions ADD COLUMN timeline TEXT NOT NULL DEFAULT '{}';"
              "ALTER TABLE sessions ADD COLUMN archive TEXT NOT NULL DEFAULT '[]';"
              "ALTER TABLE sessions ADD COLUMN project TEXT NOT NULL DEFAULT '';"
              "PRAGMA user_version=4;")


async def test_a_schema_4_database_and_its_browsers_json_move_into_schema_5_nothing_lost(tmp_path):
    """Paired browsers were kept in STATE_DIR/browsers.json before schema 5:
    they are imported into the database (still signed in), and the file goes
    only once they are."""
    import hashlib
    import json
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / DB_NAME)
    conn.executescript(SCHEMA_4)
    conn.close()
    now = time.time()
    cookie_hash = hashlib.sha256(b"the-cookie").hexdigest()
    # As gemini_split/web/pairing.py wrote it before schema 5.
    (state / "browsers.json").write_text(json.dumps([
        {"id": "ab12cd34", "user": "alice", "cookie_hash": cookie_hash, "created": now - 100, "expires": now + 3600,
         "last_used": now - 50, "user_agent": "Firefox/1", "permissions": ["read"]}]))
    store = open_store(state)
    with trio.fail_after(10):
        await store.open()
        try:
            pairing = store.paired_browsers()
            await pairing.open()
            found = await pairing.browser_by_cookie(cookie_hash, now)
            [old] = await store.list_sessions("alice")
        finally:
            await store.aclose()
    assert found is not None and (found.id, found.user, found.permissions) == ("ab12cd34", "alice", ("read",))
    assert found.user_agent == "Firefox/1" and found.last_used == now - 50
    assert old.id == "s-old"
    assert not (state / "browsers.json").exists()
    assert sqlite3.connect(state / DB_NAME).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5


async def test_an_unreadable_browsers_json_is_left_in_place_and_said(tmp_path, caplog):
    state = tmp_path / "state"
    state.mkdir()
    (state / "browsers.json").write_text("{not json")
    store = open_store(state)
    with trio.fail_after(10):
        await store.open()
        try:
            await store.paired_browsers().open()
            listed = await store.paired_browsers().browsers("alice", time.time())
        finally:
            await store.aclose()
    assert listed == []
    assert (state / "browsers.json").read_text() == "{not json"
    assert "cannot import the paired browsers" in caplog.text


async def test_the_writer_keeps_nothing_of_what_it_wrote_while_it_waits(tmp_path):
    """The last batch of a burst is not held through the quiet after it
    (its objects would pin pages of freed memory: issue 45 item 8)."""
    import sqlite3
    import weakref

    store = open_store(tmp_path / "state", exclusive=True)
    await store.open()
    try:
        await store.create(record("s-w"))
        written = events(1, 50, "r-w")
        watched = weakref.ref(written[-1])
        store.append_events("s-w", written)  # the last operation: nothing comes after it
        del written
        with trio.fail_after(10):
            while True:  # durable: seen by another connection (no store call, which would queue one)
                db = sqlite3.connect(tmp_path / "state" / DB_NAME)
                try:
                    if db.execute("SELECT count(*) FROM events WHERE session_id = 's-w'").fetchone()[0] == 50:
                        break
                finally:
                    db.close()
                await trio.sleep(0.02)
            deadline = trio.current_time() + 2
            while watched() is not None and trio.current_time() < deadline:
                await trio.sleep(0.02)  # the writer returns from the batch a moment after committing it
        assert watched() is None, "the writer thread still holds the events it wrote"
    finally:
        await store.aclose()


#: A burst's worth of writes, then the store's release_idle: the bytes glibc
#: has handed out (mallinfo2's uordblks, every thread's heap) before and after.
PAGE_CACHE = """
import ctypes, json, sys, time, trio
from gemini_split.server.store import open_store, SessionRecord, StoredEvent, hash_token

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2

async def main():
    store = open_store(sys.argv[1], exclusive=True)
    await store.open()
    for i in range(1000):
        await store.create(SessionRecord(id=f"s-{i}", owner="o", token_hash=hash_token("t"),
                                         created=time.time(), updated=time.time()))
        store.append_events(f"s-{i}", [StoredEvent(j, "r", json.dumps({"content": "x" * 200, "seq": j}))
                                       for j in range(1, 20)])
    await store.flush()
    before = mallinfo2().uordblks
    await store.release_idle()
    after = mallinfo2().uordblks
    assert len(await store.events_after("s-999", 0)) == 19  # still reads as before
    await store.aclose()
    print(json.dumps({"before": before, "after": after}))

trio.run(main)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
@pytest.mark.timeout(60)
def test_release_idle_frees_the_page_cache_a_burst_filled(tmp_path):
    out = subprocess.run([sys.executable, "-c", PAGE_CACHE, str(tmp_path / "state")], capture_output=True,
                         text=True, timeout=50, env={**os.environ, "PYTHONMALLOC": "malloc"})
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["before"] - seen["after"] > 1_000_000, seen  # SQLite's default cache is up to 2 MB


def _committed_events(directory, session_id: str) -> int:
    """Events of a session another connection sees in the file: what was committed."""
    import sqlite3

    conn = sqlite3.connect(f"file:{directory / DB_NAME}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT COUNT(*) FROM events WHERE session_id = ?", (session_id,)).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.timeout(30)
async def test_during_a_rush_writes_no_first_delta_needs_wait_but_never_past_a_read_the_rush_or_max_defer(tmp_path):
    """``defer_writes(True)`` (a burst on its way to its first deltas):
    appended events and a session's creation wait; a read does not, and
    takes them with it (read-your-writes); the rush's end writes them; and
    however long the rush, nothing waits more than ``max_defer``."""
    from gemini_split.server.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path, max_defer=3.0)
    await store.open()
    try:
        await store.create(record("s-1"))
        store.defer_writes(True)
        store.append_events("s-1", events(1, 5))
        await trio.sleep(0.3)
        assert _committed_events(tmp_path, "s-1") == 0
        with trio.fail_after(1.5):
            got = await store.events_after("s-1", 0)
        assert [e.seq for e in got] == [1, 2, 3, 4, 5]
        assert _committed_events(tmp_path, "s-1") == 5

        created = trio.Event()

        async def create() -> None:
            await store.create(record("s-2"))
            created.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            await trio.sleep(0.3)
            assert not created.is_set()
            store.defer_writes(False)
            with trio.fail_after(1.5):
                await created.wait()

        store.defer_writes(True)
        began = time.monotonic()
        store.append_events("s-1", events(6, 8))
        with trio.fail_after(10):
            while _committed_events(tmp_path, "s-1") < 8:
                await trio.sleep(0.05)
        assert 2.8 <= time.monotonic() - began < 6
    finally:
        await store.aclose()
