"""Sessions in Redis (``serve --store redis://…``), shared by several replicas.

Why Redis: several ``serve`` processes on several machines need one place for
sessions, and Redis has what this store needs built in — hashes for a
session's metadata, a Stream per session for its event log (numbered, range
reads, blocking reads for the replicas that relay it), sorted sets for the
listings, ``SET NX PX`` for leases. It is reached with ``coredis`` (anyio, so
it runs on Trio's loop; measured here against Debian's ``redis-server``).

Keys (``PREFIX`` is ``gs:`` unless ``?prefix=`` in the URL says otherwise;
``{id}`` is a Redis Cluster hash tag, so a session's keys live together):

``PREFIX{id}:s``   hash: the :class:`SessionRecord` fields (history and
                   approval as JSON), ``floor`` (the highest seq no longer
                   kept for replay) and ``kept`` (how many events above it).
``PREFIX{id}:e``   stream: one entry per event, entry id ``SEQ-0``, fields
                   ``d`` (the event's JSON), ``r`` (its request id), ``t``
                   (its timestamp, Unix ms) and ``y`` (its type).
``PREFIX{id}:lease``  which replica runs the session (see :mod:`..replicas.replica`).
``PREFIX{id}:cmd`` stream: messages relayed to the replica that runs it.
``PREFIX owner:<owner>``  sorted set: the owner's session ids by ``updated``.
``PREFIX all``     sorted set: every session id by ``updated`` (expiry).
``PREFIX pair:…``  paired browsers and pairing codes (:mod:`.redis_pairing`).

Writing. :meth:`append_events` only queues; one Trio task (a system task, so
it lives as long as the store, not as any one connection) writes what is
queued in one round trip per batch (a Lua script: refuse a batch that does
not follow the session's last stored event — Redis restarted without writes
it had acknowledged: those are sent again from the events written in the
last :data:`RECENT_SECONDS` — then XADD each event unless it
is already there, move ``floor`` up past what exceeds ``replay_capacity``,
``XTRIM MAXLEN ~`` the rest). Every other call on a session first waits until
the events of *that session* queued before it are written — that gives the
contract's order and read-your-writes without making one session's turn
wait for the whole queue of a thousand others (listing and expiry wait for
everything queued).

When Redis cannot be reached, appended events stay queued (at most
``buffer_limit`` of them) and are written when it is back; the failure is
:attr:`write_error` and every durable call raises :class:`StoreError`
meanwhile. Past the limit the oldest queued events are dropped and
:attr:`overflowed` names the sessions that lost some, so the server can end
their requests with an error instead of losing events silently.

Durability is Redis's: run it with ``appendonly yes`` (docs/deployment.md).

The URL's password is never logged or shown: messages name the server as
``redis://host:port/db``.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections import deque
from collections.abc import Sequence
from typing import Any

import trio

from . import DEFAULT_REPLAY_CAPACITY, EventMark, SessionRecord, SessionStore, SessionSummary, StoredEvent, StoreError
from .redis_pairing import RedisPairing

log = logging.getLogger(__name__)

#: Environment variable naming the Redis URL when ``--store`` does not.
REDIS_URL_ENV = "GEMINI_SPLIT_REDIS_URL"
DEFAULT_PREFIX = "gs:"
#: Events queued while Redis is unreachable, across all sessions.
DEFAULT_BUFFER_LIMIT = 100_000
#: Events written per round trip at most.
_MAX_BATCH = 2000
#: Seconds one Redis command may take before the server counts as unreachable.
COMMAND_TIMEOUT = 5.0
#: Seconds between attempts to write queued events while Redis is down.
RETRY_INTERVAL = 0.5
#: Seconds written events are kept in memory after Redis acknowledged them:
#: with ``appendfsync everysec`` Redis may answer before its append-only file
#: has the write (up to 2 s behind while an fsync is slow), and a Redis killed
#: then comes back without it. The next write finds the hole and fills it.
RECENT_SECONDS = 10.0
#: The most events kept so, whatever their age (a flood of writes keeps the
#: newest; memory stays bounded).
RECENT_MAX = 100_000
#: Seconds between two checks of whether Redis restarted.
RESTART_CHECK = 1.0
#: Connections for blocking reads (``XREAD BLOCK``: one per relayed client,
#: plus the replica's inbox) at most; Redis's own default ``maxclients``.
MAX_BLOCKING_READS = 10_000

_STRING_FIELDS = ("id", "owner", "token_hash", "model", "title", "project")

# KEYS: hash, stream. ARGV: capacity, force ("1" or "0"), then (seq,
# request id or "", data, timestamp ms, type)...
# Returns the session's last seq, or -1 when the session does not exist, or
# -2 - last (nothing written) when, unless forced, the first event does not
# follow the last one stored: Redis lost events it had acknowledged (a
# restart, its append-only file behind), which the writer sends again.
_APPEND = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_seq') or '0')
if ARGV[2] ~= '1' and #ARGV >= 3 and tonumber(ARGV[3]) > last + 1 then return -2 - last end
local floor = tonumber(redis.call('HGET', KEYS[1], 'floor') or '0')
local kept = tonumber(redis.call('HGET', KEYS[1], 'kept') or '0')
local capacity = tonumber(ARGV[1])
local added = 0
for i = 3, #ARGV, 5 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    if ARGV[i + 1] == '' then
      redis.call('XADD', KEYS[2], seq .. '-0', 'd', ARGV[i + 2], 't', ARGV[i + 3], 'y', ARGV[i + 4])
    else
      redis.call('XADD', KEYS[2], seq .. '-0', 'd', ARGV[i + 2], 't', ARGV[i + 3], 'y', ARGV[i + 4],
                 'r', ARGV[i + 1])
    end
    last = seq
    added = added + 1
  end
end
kept = kept + added
if kept > capacity then
  local gone = redis.call('XRANGE', KEYS[2], '(' .. floor .. '-0', '+', 'COUNT', kept - capacity)
  if #gone > 0 then
    floor = tonumber(string.match(gone[#gone][1], '^(%d+)'))
  end
  kept = capacity
  redis.call('XTRIM', KEYS[2], 'MAXLEN', '~', capacity)
end
redis.call('HSET', KEYS[1], 'last_seq', last, 'floor', floor, 'kept', kept)
return last
"""

# KEYS: hash, all zset. ARGV: updated, the owner zsets' key prefix, then
# field/value pairs to set; a value of "\\0del" deletes the field. Returns 0
# when there is no such session (nothing is written). The owner's zset is
# named from the hash (one round trip, not a read first); like the other
# keys it lies under the store's prefix.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 3, #ARGV, 2 do
  if ARGV[i + 1] == '\\0del' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
if ARGV[1] ~= '' then
  local id = redis.call('HGET', KEYS[1], 'id')
  redis.call('ZADD', ARGV[2] .. redis.call('HGET', KEYS[1], 'owner'), ARGV[1], id)
  redis.call('ZADD', KEYS[2], ARGV[1], id)
end
return 1
"""
_DELETE_FIELD = "\0del"

# KEYS: hash, stream, owner zset, all zset. ARGV: id, updated, then the
# hash's field/value pairs. A session made anew (its id reused) starts empty.
# One script, not a MULTI pipeline: a single command is much cheaper to send
# through the client (measured: the pipeline was 9% of a busy replica's CPU).
_CREATE = """
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
return 1
"""


def redacted(url: str) -> str:
    """``url`` without user name, password or query: safe to log."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _float(value: float) -> str:
    return repr(float(value))


class RedisStore(SessionStore):
    """Sessions in the Redis server at ``url`` (``redis://``, ``rediss://``
    for TLS; ``user:password@`` for AUTH/ACL; ``/N`` for the database;
    ``?prefix=`` for the key prefix, ``?max_buffered_events=`` for the
    buffer kept while Redis is unreachable)."""

    def __init__(self, url: str, *, replay_capacity: int = DEFAULT_REPLAY_CAPACITY,
                 buffer_limit: int = DEFAULT_BUFFER_LIMIT, command_timeout: float = COMMAND_TIMEOUT):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise StoreError(f"{redacted(url)}: not a Redis URL (redis://host:port/db or rediss://…)")
        query = urllib.parse.parse_qs(parts.query)
        self.prefix = query.pop("prefix", [DEFAULT_PREFIX])[0]
        if "max_buffered_events" in query:
            try:
                buffer_limit = int(query.pop("max_buffered_events")[0])
            except ValueError:
                raise StoreError(f"{redacted(url)}: max_buffered_events must be a number") from None
        self.url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))
        #: The server as it may be shown: no credentials.
        self.name = redacted(url)
        self.replay_capacity = replay_capacity
        self.buffer_limit = buffer_limit
        self.command_timeout = command_timeout
        self.client: Any = None
        #: For blocking reads only (:attr:`blocking_client`).
        self.blocking_client: Any = None
        self._pending: deque[tuple[str, StoredEvent]] = deque()
        #: Events handed to the writer and not yet confirmed written.
        self._appended = 0
        self._written = 0
        #: Per session with events not written yet: the last seq queued,
        #: and the last seq written.
        self._queued_upto: dict[str, int] = {}
        self._written_upto: dict[str, int] = {}
        self._progress = trio.Event()
        self._wake = trio.Event()
        self._closing = trio.Event()
        self._done = trio.Event()
        self._write_error: StoreError | None = None
        self._attempts = 0
        self._retry_now = trio.Event()
        #: Sessions that lost queued events to the buffer limit.
        self.overflowed: set[str] = set()
        #: Events written lately, by session, and (when, session) in write
        #: order: see :meth:`_remember`.
        self._recent: dict[str, deque[StoredEvent]] = {}
        self._recent_order: deque[tuple[float, str]] = deque()
        self._append_script: Any = None
        self._create_script: Any = None
        self._update_script: Any = None
        self._opened = False
        self._open_error: BaseException | None = None

    # --- keys ---------------------------------------------------------------------

    def key(self, session_id: str, kind: str) -> str:
        """The key of one of a session's structures (``s``, ``e``, ``lease``, ``cmd``)."""
        return f"{self.prefix}{{{session_id}}}:{kind}"

    def _owner_key(self, owner: str) -> str:
        return f"{self.prefix}owner:{owner}"

    @property
    def _all_key(self) -> str:
        return f"{self.prefix}all"

    # --- lifetime -------------------------------------------------------------------

    @property
    def write_error(self) -> StoreError | None:
        return self._write_error

    async def open(self) -> None:
        import coredis

        try:
            self.client = coredis.Redis.from_url(self.url, decode_responses=True,
                                                 connect_timeout=self.command_timeout,
                                                 stream_timeout=self.command_timeout)
            # A blocking read holds its connection until something arrives:
            # in the command pool (64 connections), 64 relayed clients
            # waiting for events would hold up every write and lease
            # renewal. They get a pool of their own, as large as Redis lets.
            self.blocking_client = coredis.Redis.from_url(self.url, decode_responses=True,
                                                          connect_timeout=self.command_timeout,
                                                          max_connections=MAX_BLOCKING_READS)
        except (ValueError, coredis.exceptions.RedisError) as exc:
            raise StoreError(f"{self.name}: {exc}") from None
        started = trio.Event()
        trio.lowlevel.spawn_system_task(self._lifetime, started, name=f"redis-store {self.name}")
        await started.wait()
        if self._open_error is not None:
            raise StoreError(f"{self.name}: cannot reach Redis: {_describe(self._open_error)}") from None
        self._append_script = self.client.register_script(_APPEND)
        self._update_script = self.client.register_script(_UPDATE)
        self._create_script = self.client.register_script(_CREATE)
        self._opened = True

    async def _lifetime(self, started: trio.Event) -> None:
        """Holds the client open and writes queued events, until closed."""
        try:
            async with self.client, self.blocking_client:
                with trio.fail_after(self.command_timeout):
                    await self.client.ping()
                started.set()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    nursery.start_soon(self._watch_restarts)
                    await self._closing.wait()
                    nursery.cancel_scope.cancel()
        except BaseException as exc:  # a system task must not raise
            if not started.is_set():
                self._open_error = exc
                started.set()
            elif not isinstance(exc, trio.Cancelled):
                log.warning("%s: the Redis client stopped: %s", self.name, _describe(exc))
        finally:
            self._done.set()
            self._progress.set()

    async def aclose(self) -> None:
        if not self._opened:
            return
        self._opened = False
        with trio.CancelScope(shield=True):
            with trio.move_on_after(self.command_timeout):
                try:
                    await self._wait_written(self._appended)
                except StoreError:
                    pass
            if self._pending:
                log.warning("%s: %d event(s) could not be written before closing", self.name, len(self._pending))
            self._closing.set()
            await self._done.wait()

    # --- writing events ------------------------------------------------------------

    @property
    def events_appended(self) -> int:
        """Events handed to this store since it opened (``/metrics``)."""
        return self._appended

    @property
    def events_pending(self) -> int:
        """Events waiting to be written (more while Redis is away)."""
        return len(self._pending)

    def append_events(self, session_id: str, events: Sequence[StoredEvent]) -> None:
        for event in events:
            self._pending.append((session_id, event))
        if events:
            self._queued_upto[session_id] = max(self._queued_upto.get(session_id, 0), events[-1].seq)
        self._appended += len(events)
        while len(self._pending) > self.buffer_limit:
            lost_session, lost = self._pending.popleft()
            self._written += 1  # counted as done: it will never be written
            self._done_upto(lost_session, lost.seq)
            self.overflowed.add(lost_session)
        self._wake.set()

    def _done_upto(self, session_id: str, seq: int) -> None:
        """The session's events up to ``seq`` are written (or lost)."""
        if seq >= self._queued_upto.get(session_id, 0):
            self._queued_upto.pop(session_id, None)
            self._written_upto.pop(session_id, None)
        else:
            self._written_upto[session_id] = max(self._written_upto.get(session_id, 0), seq)

    async def _writer(self) -> None:
        while True:
            if not self._pending:
                self._wake = trio.Event()
                await self._wake.wait()
            batch: list[tuple[str, StoredEvent]] = []
            while self._pending and len(batch) < _MAX_BATCH:
                batch.append(self._pending.popleft())
            try:
                await self._write_batch(batch)
            except StoreError as exc:
                # Put them back, in order, and try again soon (at once when
                # a caller waits for them: _wait_written).
                self._pending.extendleft(reversed(batch))
                if self._write_error is None:
                    log.warning("%s; events are kept in memory until it is back", exc)
                self._write_error = exc
                self._attempts += 1
                self._notify()
                self._retry_now = trio.Event()
                with trio.move_on_after(RETRY_INTERVAL):
                    await self._retry_now.wait()
                continue
            if self._write_error is not None:
                log.info("%s: reachable again; queued events written", self.name)
            self._write_error = None
            self._attempts += 1
            self._written += len(batch)
            for session_id, event in batch:
                self._done_upto(session_id, event.seq)
            self._notify()

    async def _write_batch(self, batch: list[tuple[str, StoredEvent]]) -> None:
        per_session: dict[str, list[StoredEvent]] = {}
        for session_id, event in batch:
            per_session.setdefault(session_id, []).append(event)
        lasts = await self._append(per_session, force=False)
        # Redis lost events it had acknowledged (killed while its
        # append-only file was behind: ``appendfsync everysec`` on a busy
        # disk): send them again, from what was written lately, before the
        # batch — or, when they are not kept here any more, the batch
        # anyway (a gap in the log, as little as can be).
        repairs = {}
        for session_id, last in lasts.items():
            if last <= -2:
                stored = -2 - last
                first = per_session[session_id][0].seq
                lost = [e for e in self._recent.get(session_id, ()) if stored < e.seq < first]
                log.warning("%s: Redis lost events %d–%d of session %s it had stored (restarted?); %s",
                            self.name, stored + 1, first - 1, session_id,
                            "written again" if len(lost) == first - 1 - stored else
                            f"{len(lost)} of them written again (the others are no longer kept here)")
                repairs[session_id] = lost + per_session[session_id]
        if repairs:
            await self._append(repairs, force=True)
        self._remember(batch)
        if self.on_written is not None:
            self.on_written(per_session.keys())

    async def _append(self, per_session: dict[str, list[StoredEvent]], *, force: bool) -> dict[str, int]:
        """One round trip: each session's events through :data:`_APPEND`;
        what it returned, by session."""
        calls = {}
        for session_id, events in per_session.items():
            args = [str(self.replay_capacity), "1" if force else "0"]
            for event in events:
                args += [str(event.seq), event.request_id or "", event.data, str(event.timestamp), event.type]
            calls[session_id] = args
        async with self._command("write events"):
            if len(calls) == 1:  # the common case when few sessions stream: no pipeline
                [(session_id, args)] = calls.items()
                reply = await self._append_script(keys=[self.key(session_id, "s"), self.key(session_id, "e")],
                                                  args=args)
                return {session_id: int(reply)}
            async with self.client.pipeline(transaction=False) as pipe:
                # EVAL, not EVALSHA: a restarted Redis has no script cache,
                # and a pipeline cannot load it on the way.
                replies = {session_id: pipe.eval(_APPEND, [self.key(session_id, "s"), self.key(session_id, "e")],
                                                 args) for session_id, args in calls.items()}
            # pipeline results are awaited by leaving the block
            return {session_id: int(await reply) for session_id, reply in replies.items()}

    async def _watch_restarts(self) -> None:
        """Every :data:`RESTART_CHECK` seconds, Redis's ``run_id``: when it
        changed (Redis restarted), the events written lately are written
        again, so what it lost is back even for a session that writes
        nothing more (whose next write would have found the hole)."""
        first = True
        while True:
            if not first:
                await trio.sleep(RESTART_CHECK)
            first = False
            try:
                self.note_run_id(await self.server_run_id())
                if self._rewrite_recent and self._recent:
                    recent = {sid: list(events) for sid, events in self._recent.items()}
                    lasts = await self._append(recent, force=True)
                    log.info("%s: Redis restarted; the events written in the last %gs were written again "
                             "(%d session(s); those it lost are back)", self.name, RECENT_SECONDS,
                             sum(1 for last in lasts.values() if last >= 0))
                self._rewrite_recent = False
            except StoreError:
                continue  # not back yet: asked again

    async def server_run_id(self) -> str | None:
        """The Redis server's ``run_id`` (new at each start). Raises StoreError."""
        async with self._command("check whether Redis restarted"):
            return (await self.client.info("server")).get("run_id")

    def note_run_id(self, run_id: str | None) -> bool:
        """Whether ``run_id`` says Redis restarted since it was last seen
        (then :attr:`restarted_at` is now and :attr:`on_restart` is called)."""
        changed = self.run_id is not None and run_id is not None and run_id != self.run_id
        if run_id is not None:
            self.run_id = run_id
        if changed:
            self.restarted_at = trio.current_time()
            self._rewrite_recent = True  # by _watch_restarts
            log.warning("%s: Redis restarted (a new run_id)", self.name)
            self.on_restart()
        return changed

    #: The Redis server's run_id as last seen, and trio.current_time() when
    #: it was last seen to change (None: not since the store opened).
    run_id: str | None = None
    restarted_at: float | None = None
    _rewrite_recent = False
    #: Called when Redis is seen to have restarted (set by whoever cares).
    on_restart: Any = staticmethod(lambda: None)

    def _remember(self, batch: list[tuple[str, StoredEvent]]) -> None:
        """Keep the events written in the last :data:`RECENT_SECONDS`, at
        most :data:`RECENT_MAX` of them (what a Redis killed meanwhile may
        have lost though it acknowledged it)."""
        now = trio.current_time()
        for session_id, event in batch:
            self._recent.setdefault(session_id, deque()).append(event)
            self._recent_order.append((now, session_id))
        while self._recent_order and (self._recent_order[0][0] < now - RECENT_SECONDS
                                      or len(self._recent_order) > RECENT_MAX):
            _, session_id = self._recent_order.popleft()
            kept = self._recent[session_id]
            kept.popleft()
            if not kept:
                del self._recent[session_id]

    #: Called with the ids of sessions whose events were just written (a
    #: relay wakes up on it); set by whoever cares.
    on_written: Any = None

    def _notify(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def _wait_written(self, target: int, session_id: str | None = None) -> None:
        """Wait until ``target`` events are written — or, for
        ``session_id``, until its events up to seq ``target`` are. While
        Redis is down, one more attempt is made at once and its failure
        raised: a caller learns quickly, and learns nothing stale once
        Redis is back."""
        retried_at: int | None = None
        while (self._written < target if session_id is None else
               session_id in self._queued_upto and self._written_upto.get(session_id, 0) < target):
            if self._done.is_set():
                raise StoreError(f"{self.name}: the store is closed")
            if self._write_error is not None:
                if retried_at is not None and self._attempts > retried_at:
                    # A new exception per caller: raising the writer's one
                    # again would grow its traceback with every raise.
                    raise StoreError(str(self._write_error)) from None
                if retried_at is None:
                    retried_at = self._attempts
                    self._retry_now.set()
            await self._progress.wait()

    async def _sync(self, session_id: str | None = None) -> None:
        """Wait until every event appended before this call is written (of
        ``session_id`` only, if given)."""
        if session_id is None:
            if self._written < self._appended:
                await self._wait_written(self._appended)
        elif session_id in self._queued_upto:
            await self._wait_written(self._queued_upto[session_id], session_id)

    async def flush(self) -> None:
        await self._sync()

    async def written(self, session_id: str, seq: int) -> None:
        """Return once the session's events up to ``seq`` are in Redis (or
        lost to the buffer limit, or the store closed): while Redis is away
        this waits, and returns once it is back and they are written."""
        while (not self._done.is_set() and session_id in self._queued_upto
               and self._written_upto.get(session_id, 0) < seq):
            await self._progress.wait()

    async def unended_request(self, session_id: str, *, scan: int = 2000) -> tuple[bool, str | None]:
        """Whether the session's last ``request_started`` (among its last
        ``scan`` events) was found, and its request id when no ``finished``
        or ``error`` of it follows (it was running when its runner stopped).
        (False, None) when none is among them. Raises StoreError."""
        await self._sync(session_id)
        ended: set[str] = set()
        cursor = "+"
        seen = 0
        while seen < scan:
            async with self._command("read the last events"):
                rows = await self.client.xrevrange(self.key(session_id, "e"), cursor, "-", count=200)
            for row in rows:
                fields = row.field_values
                kind, rid = fields.get("y", ""), fields.get("r") or ""
                if kind in ("finished", "error") and rid:
                    ended.add(rid)
                elif kind == "request_started" and rid:
                    return True, None if rid in ended else rid
            seen += len(rows)
            if len(rows) < 200:
                break
            cursor = "(" + rows[-1].identifier
        return False, None

    # --- commands ------------------------------------------------------------------

    def _command(self, what: str, *, blocking: float = 0.0) -> _Command:
        """A Redis operation (``async with``); ``blocking``: seconds a
        blocking read may wait on top of the command timeout."""
        return _Command(self, what, blocking)

    async def ping(self) -> float:
        """Seconds one round trip to Redis takes; StoreError when it cannot
        be reached."""
        start = trio.current_time()
        async with self._command("ping"):
            await self.client.ping()
        return trio.current_time() - start

    async def create(self, record: SessionRecord) -> None:
        await self._sync(record.id)
        fields = self._fields(record)
        fields.update(floor="0", kept="0")
        args = [record.id, _float(record.updated)]
        for name, value in fields.items():
            args += [name, value]
        async with self._command("create a session"):
            await self._create_script(
                keys=[self.key(record.id, "s"), self.key(record.id, "e"), self._owner_key(record.owner),
                      self._all_key],
                args=args)

    @staticmethod
    def _fields(record: SessionRecord) -> dict[str, str]:
        fields = {name: getattr(record, name) for name in _STRING_FIELDS}
        fields.update(created=_float(record.created), updated=_float(record.updated),
                      approval=json.dumps(record.approval), history=json.dumps(record.history),
                      turns=str(record.turns), last_seq=str(record.last_seq),
                      timeline=json.dumps(record.timeline), archive=json.dumps(record.archive))
        if record.running_request is not None:
            fields["running_request"] = record.running_request
        return fields

    async def get(self, session_id: str) -> SessionRecord | None:
        await self._sync(session_id)
        async with self._command("read a session"):
            fields = await self.client.hgetall(self.key(session_id, "s"))
        if not fields:
            return None
        return self._record(fields)

    def _record(self, f: dict[str, str]) -> SessionRecord:
        try:
            return SessionRecord(
                id=f["id"], owner=f["owner"], token_hash=f["token_hash"], created=float(f["created"]),
                updated=float(f["updated"]), model=f.get("model", ""), approval=json.loads(f.get("approval", "{}")),
                title=f.get("title", ""), history=json.loads(f.get("history", "[]")), turns=int(f.get("turns", 0)),
                running_request=f.get("running_request"), last_seq=int(f.get("last_seq", 0)),
                timeline=json.loads(f.get("timeline", "{}")), archive=json.loads(f.get("archive", "[]")),
                project=f.get("project", ""),
            )
        except (KeyError, ValueError) as exc:
            raise StoreError(f"{self.name}: session {f.get('id', '?')!r} is not readable ({exc!r})") from None

    async def list_sessions(self, owner: str) -> list[SessionSummary]:
        await self._sync()
        names = ("id", "title", "created", "updated", "turns", "model", "project")
        async with self._command("list sessions"):
            ids = await self.client.zrange(self._owner_key(owner), 0, -1, rev=True)
            if not ids:
                return []
            async with self.client.pipeline(transaction=False) as pipe:
                replies = [pipe.hmget(self.key(sid, "s"), list(names)) for sid in ids]
        out = []
        for reply in replies:
            values = await reply
            if values[0] is None:
                continue  # deleted meanwhile
            sid, title, created, updated, turns, model, project = values
            out.append(SessionSummary(sid, title or "", float(created), float(updated), int(turns or 0), model or "",
                                      project or ""))
        return out

    async def delete(self, session_id: str) -> bool:
        await self._sync(session_id)
        h = self.key(session_id, "s")
        async with self._command("delete a session"):
            owner = await self.client.hget(h, "owner")
            if owner is None:
                return False
            async with self.client.pipeline(transaction=True) as pipe:
                deleted = pipe.delete([h, self.key(session_id, "e"), self.key(session_id, "cmd")])
                pipe.zrem(self._owner_key(owner), [session_id])
                pipe.zrem(self._all_key, [session_id])
            return bool(await deleted)

    async def _update(self, session_id: str, updated: float | None, fields: dict[str, str]) -> None:
        await self._sync(session_id)
        args = ["" if updated is None else _float(updated), self._owner_key("")]
        for name, value in fields.items():
            args += [name, value]
        async with self._command("update a session"):
            await self._update_script(keys=[self.key(session_id, "s"), self._all_key], args=args)

    async def save_turn(self, session_id: str, *, history: list[dict[str, Any]], updated: float, turns: int,
                        title: str | None = None, model: str | None = None,
                        running_request: str | None = None, timeline: dict[str, Any] | None = None,
                        archive: list[dict[str, Any]] | None = None) -> None:
        fields = {"history": json.dumps(history), "updated": _float(updated), "turns": str(turns),
                  "running_request": running_request if running_request is not None else _DELETE_FIELD}
        if timeline is not None:
            fields["timeline"] = json.dumps(timeline)
        if archive is not None:
            fields["archive"] = json.dumps(archive)
        if title is not None:
            fields["title"] = title
        if model is not None:
            fields["model"] = model
        await self._update(session_id, updated, fields)

    async def set_running(self, session_id: str, request_id: str | None, *, updated: float) -> None:
        await self._update(session_id, updated, {
            "running_request": request_id if request_id is not None else _DELETE_FIELD,
            "updated": _float(updated)})

    async def set_token_hash(self, session_id: str, token_hash: str) -> None:
        await self._update(session_id, None, {"token_hash": token_hash})

    async def events_after(self, session_id: str, last_seq: int, limit: int | None = None) -> list[StoredEvent] | None:
        await self._sync(session_id)
        async with self._command("read events"):
            async with self.client.pipeline(transaction=True) as pipe:
                head = pipe.hmget(self.key(session_id, "s"), ["id", "floor"])
                entries = pipe.xrange(self.key(session_id, "e"), f"{last_seq + 1}-0", "+", count=limit)
            exists, floor = await head
            rows = await entries
        if exists is None or last_seq < int(floor or 0):
            return None
        return [_event(row) for row in rows]

    async def event_marks(self, session_id: str) -> list[EventMark] | None:
        await self._sync(session_id)
        async with self._command("read event marks"):
            async with self.client.pipeline(transaction=True) as pipe:
                head = pipe.hmget(self.key(session_id, "s"), ["id", "floor"])
                entries = pipe.xrange(self.key(session_id, "e"), "-", "+")
            exists, floor = await head
            rows = await entries
        if exists is None:
            return None
        kept = [_event(row) for row in rows]
        return [EventMark(e.seq, e.timestamp, e.request_id, e.type) for e in kept if e.seq > int(floor or 0)]

    def paired_browsers(self) -> RedisPairing:
        """Shared by every replica (:mod:`.redis_pairing`)."""
        if self._pairing is None:
            self._pairing = RedisPairing(self)
        return self._pairing

    _pairing: RedisPairing | None = None

    async def expire(self, idle_before: float) -> list[str]:
        await self._sync()
        async with self._command("expire sessions"):
            from coredis import PureToken

            ids = await self.client.zrange(self._all_key, "-inf", f"({_float(idle_before)}",
                                           sortby=PureToken.BYSCORE)
        gone = []
        for sid in ids:
            if await self.delete(sid):
                gone.append(sid)
            else:
                async with self._command("expire sessions"):
                    await self.client.zrem(self._all_key, [sid])
        return gone


def _event(row: Any) -> StoredEvent:
    identifier, fields = row.identifier, row.field_values
    return StoredEvent(int(identifier.split("-", 1)[0]), fields.get("r") or None, fields["d"],
                       int(fields.get("t") or 0), fields.get("y", ""))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    if isinstance(exc, trio.TooSlowError):
        return "no answer in time"
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text


class _Command:
    """``async with``: one Redis operation; any failure becomes a
    :class:`StoreError` naming the server and what was being done."""

    def __init__(self, store: RedisStore, what: str, blocking: float = 0.0):
        self.store = store
        self.what = what
        self.scope = trio.fail_after(store.command_timeout + blocking)

    async def __aenter__(self) -> None:
        if self.store.client is None:
            raise StoreError(f"{self.store.name}: the store is not open")
        self.scope.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        try:
            self.scope.__exit__(exc_type, exc, tb)
        except trio.TooSlowError:
            raise StoreError(f"{self.store.name}: cannot {self.what}: Redis did not answer within "
                             f"{self.store.command_timeout:g}s") from None
        if exc is None or isinstance(exc, (trio.Cancelled, StoreError, KeyboardInterrupt)):
            return False
        if isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[0] is not None:
            return False  # a cancellation goes on as it is, never as a StoreError
        import coredis

        if isinstance(exc, (coredis.exceptions.RedisError, OSError, BaseExceptionGroup)):
            raise StoreError(f"{self.store.name}: cannot {self.what}: {_describe(exc)}") from None
        return False


def store_url(value: str | None, environ: dict[str, str] | os._Environ[str]) -> str | None:
    """The Redis URL for ``--store`` (or ``GEMINI_SPLIT_REDIS_URL``), if any."""
    return value or environ.get(REDIS_URL_ENV) or None


__all__ = ["RedisStore", "REDIS_URL_ENV", "redacted", "store_url"]
