"""One ``serve`` replica among several on one Redis: leases, its inbox, following.

**Leases.** Exactly one replica runs a session's agent loop: the one whose
id is in the session's lease key (``SET NX PX``). A replica takes the lease
when it creates or restores a session, renews every lease it holds every
``ttl/3`` seconds (one Lua call for all of them), and releases it when it
unloads the session. A renewal that finds the lease gone or someone else's
reports the session as *lost*: the replica must stop running it at once
(split brain is worse than an interrupted request). If a replica dies, its
leases expire after ``ttl`` and another replica restores the session from the
store; the request that was running ends ``interrupted``, as after a crash.

**Inbox.** Each replica reads one Stream of its own,
``PREFIX replica:<id>:inbox`` (``XREAD BLOCK``; one blocked connection per
replica, whatever the number of sessions). A replica that serves a client of
a session another replica runs forwards the client's messages there
(:meth:`Replica.send`), and asks there for an idle session to be given up
(``release``).

**Relayed clients.** A relayed client is one of the session's clients on
the runner too (it counts in ``clients_changed`` and ``connected.clients``,
and is handed tool calls left unanswered): the relay *joins* through the
runner's inbox and *leaves* when its client goes. Each replica keeps the ids
of the relays it runs in ``PREFIX replica:<id>:relays`` (a set, rewritten at
every renewal and expiring with the replica); a runner drops a relayed client
whose relay is no longer listed there — its replica died, or its leave was
lost.

**Who is attached, and whether it runs.** The runner publishes who is
attached to each session it holds, and whether it is answering a prompt
(``PREFIX <id>:clients``, JSON ``{"clients": [...], "running": bool}``),
whenever either changes, only while the lease is its own, expiring with
the lease and renewed with it; any replica listing sessions reads them in
one round trip (:meth:`Replica.activity_of`). A session nobody runs, or
one idle with no one attached, has no such key.

**Following.** A relaying replica reads the session's event Stream from the
client's last seq with ``XREAD BLOCK`` (:meth:`Replica.follow`). Streams, not
pub/sub: the replay (``XRANGE``) and the live part are one sequence read
from one cursor, so nothing falls between them and nothing comes twice; a
pub/sub message published while no one listens is gone. Measured here
(bench/replicas.py): an event reaches a follower on another replica in well
under a millisecond on loopback.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from ..store import StoredEvent, StoreError
from ..store.redis import RedisStore, _event

log = logging.getLogger(__name__)

#: Seconds a lease lasts without renewal (a dead replica's sessions wait
#: this long before another replica takes them).
DEFAULT_LEASE_TTL = 10.0
#: Inbox entries kept (a replica reads them at once; this only bounds a
#: dead replica's inbox).
INBOX_LENGTH = 10_000
#: Milliseconds one blocking read waits before it is issued again.
BLOCK_MS = 1000

# KEYS: N leases, then the N sessions' clients keys. ARGV: replica id, ttl
# ms, N. Renews the leases held (and takes back the ones that expired while
# Redis was out of reach, if no one took them) with their clients keys;
# returns the indexes (1-based) of those another replica holds now.
_RENEW = """
local lost = {}
local n = tonumber(ARGV[3])
for i = 1, n do
  local key = KEYS[i]
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    redis.call('PEXPIRE', KEYS[n + i], ARGV[2])
  elseif holder == false then
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
  else
    table.insert(lost, i)
  end
end
return lost
"""
# KEYS: lease, clients. ARGV: replica id, activity JSON ("" for none:
# idle, no one attached), ttl ms. Writes it only while the lease is ours (a
# replica that lost it never overwrites the new runner's).
_PUBLISH = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then return redis.call('DEL', KEYS[2]) end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
"""
# KEYS: lease. ARGV: replica id. Deletes it if ours.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: lease. ARGV: replica id, ttl ms. Takes it when free or already ours.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
return holder
"""

#: What arrives in an inbox: (session id, kind, fields).
Command = tuple[str, str, dict[str, str]]


def new_replica_id() -> str:
    """Host, process and a random part: unique, and says where it runs."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Replica:
    """This process as one replica of several sharing ``store``. Start
    :meth:`run` (``nursery.start``) before use."""

    def __init__(self, store: RedisStore, *, replica_id: str | None = None, lease_ttl: float = DEFAULT_LEASE_TTL):
        self.store = store
        self.id = replica_id or new_replica_id()
        self.lease_ttl = lease_ttl
        #: Sessions whose lease this replica holds.
        self.held: set[str] = set()
        #: Leases taken here, and lost here to another replica (``/metrics``
        #: counters: after a replica dies, the others' takes rise).
        self.leases_taken = 0
        self.leases_lost = 0
        #: Called with a session id whose lease was lost (stop running it).
        self.on_lost: Callable[[str], None] = lambda sid: None
        #: Whether the last lease renewal reached Redis.
        self.renewed_ok = True
        self._replies, self._replies_out = trio.open_memory_channel[tuple[str, str]](10_000)
        #: Called for each inbox command.
        self.on_command: Callable[[Command], Awaitable[None]] | None = None
        #: The relays running here (their ids), listed in Redis for runners.
        self.relays: set[str] = set()
        #: Relays ended whose removal from that list failed (Redis away).
        self._unlist: set[str] = set()
        #: On this replica as a runner: the clients relayed to it, by
        #: (session id, relay id).
        self.relayed: dict[tuple[str, str], RelayedClient] = {}
        #: Who is attached to sessions held here and whether they run,
        #: not yet published (the JSON of the key's value).
        self._clients: dict[str, dict[str, Any]] = {}
        self._clients_dirty = trio.Event()
        self._renew_soon = trio.Event()
        store.on_restart = lambda: self._renew_soon.set()

    @property
    def _ttl_ms(self) -> int:
        return max(int(self.lease_ttl * 1000), 1)

    def lease_key(self, session_id: str) -> str:
        return self.store.key(session_id, "lease")

    def clients_key(self, session_id: str) -> str:
        return self.store.key(session_id, "clients")

    def inbox_key(self, replica_id: str) -> str:
        return f"{self.store.prefix}replica:{replica_id}:inbox"

    def relays_key(self, replica_id: str) -> str:
        return f"{self.store.prefix}replica:{replica_id}:relays"

    # --- leases ---------------------------------------------------------------------

    async def acquire(self, session_id: str) -> str:
        """Take the session's lease if it is free (or ours already).
        Returns the holder's id: ours when taken."""
        async with self.store._command("take a session lease"):
            holder = await self.store.client.eval(_ACQUIRE, [self.lease_key(session_id)], [self.id, self._ttl_ms])
        if holder == self.id and session_id not in self.held:
            self.held.add(session_id)
            self.leases_taken += 1
        return holder

    async def check_restart(self) -> None:
        """Raise StoreError while Redis may have restarted without leases
        it had acknowledged (``appendfsync everysec``: its append-only file
        may be behind): for ``ttl/3`` and a second after a restart, no
        replica takes over a session another may still run (its runner
        renews it at once on seeing the restart)."""
        self.store.note_run_id(await self.store.server_run_id())
        since = self.store.restarted_at
        if since is not None and trio.current_time() - since < self.lease_ttl / 3 + 1.0:
            raise StoreError(f"{self.store.name}: Redis restarted moments ago; a session run elsewhere is taken "
                             "over once its replica had time to renew its lease")

    async def holder(self, session_id: str) -> str | None:
        async with self.store._command("read a session lease"):
            return await self.store.client.get(self.lease_key(session_id))

    async def release(self, session_id: str) -> None:
        """Give the lease up (if still ours). Errors are logged: an unreleased
        lease only expires later."""
        self.held.discard(session_id)
        try:
            async with self.store._command("release a session lease"):
                await self.store.client.eval(_RELEASE, [self.lease_key(session_id)], [self.id])
        except StoreError as exc:
            log.warning("%s; the lease of %s expires by itself", exc, session_id)

    async def _renew_once(self) -> None:
        await self._list_relays()
        held = sorted(self.held)
        if not held:
            return
        async with self.store._command("renew session leases"):
            lost = await self.store.client.eval(
                _RENEW, [self.lease_key(sid) for sid in held] + [self.clients_key(sid) for sid in held],
                [self.id, self._ttl_ms, len(held)])
            await self.store.client.pexpire(self.inbox_key(self.id), self._ttl_ms * 6)
        for index in lost or ():
            sid = held[int(index) - 1]
            if sid in self.held:
                self.held.discard(sid)
                self.leases_lost += 1
                log.error("session %s: its lease is held by another replica now; stopped here", sid)
                self.on_lost(sid)

    async def _renew(self) -> None:
        """Renew every ``ttl/3``. While Redis is out of reach the sessions
        running here go on (their events wait in the store's buffer, and
        are shown to clients once written); when
        it is back, a lease another replica took meanwhile stops ours."""
        while True:
            # At once when Redis restarted: a lease it lost is free for
            # anyone until renewed here.
            with trio.move_on_after(self.lease_ttl / 3 if self.renewed_ok else min(0.5, self.lease_ttl / 3)):
                await self._renew_soon.wait()
            self._renew_soon = trio.Event()
            try:
                await self._renew_once()
                self.renewed_ok = True
            except StoreError as exc:
                if self.renewed_ok:
                    log.warning("%s; leases not renewed (sessions running here go on)", exc)
                self.renewed_ok = False

    # --- relayed clients ---------------------------------------------------------------

    async def _list_relays(self) -> None:
        """Keep this replica's list of relays (it expires with the replica):
        add the running ones again, take out those whose removal failed.
        Never rewritten whole: a relay listing itself meanwhile stays."""
        key = self.relays_key(self.id)
        gone = set(self._unlist)
        async with self.store._command("list relays"):
            async with self.store.client.pipeline(transaction=True) as pipe:
                if gone:
                    pipe.srem(key, list(gone))
                if self.relays:
                    pipe.sadd(key, list(self.relays))
                    pipe.pexpire(key, self._ttl_ms * 2)
        self._unlist -= gone

    async def relay_started(self, relay_id: str) -> None:
        """List a relay before it joins (a runner checking meanwhile finds it)."""
        self.relays.add(relay_id)
        key = self.relays_key(self.id)
        async with self.store._command("list a relay"):
            async with self.store.client.pipeline(transaction=False) as pipe:
                pipe.sadd(key, [relay_id])
                pipe.pexpire(key, self._ttl_ms * 2)

    async def relay_ended(self, holder: str, session_id: str, relay_id: str) -> None:
        """Unlist a relay and tell the runner its client left. Errors are
        logged: the next renewal unlists it, and the runner then drops it."""
        self.relays.discard(relay_id)
        try:
            async with self.store._command("unlist a relay"):
                await self.store.client.srem(self.relays_key(self.id), [relay_id])
        except StoreError as exc:
            self._unlist.add(relay_id)
            log.warning("%s; the runner of %s drops the relayed client by itself", exc, session_id)
            return
        try:
            await self.send(holder, session_id, "leave", relay=relay_id)
        except StoreError as exc:
            log.warning("%s; the runner of %s drops the relayed client by itself", exc, session_id)

    async def _check_relayed(self) -> None:
        """Drop the relayed clients whose relay is gone (not listed by its
        replica any more)."""
        if not self.relayed:
            return
        entries = list(self.relayed.items())
        async with self.store._command("check relayed clients"):
            async with self.store.client.pipeline(transaction=False) as pipe:
                replies = [pipe.sismember(self.relays_key(entry.replica), relay_id)
                           for (_, relay_id), entry in entries]
        for (key, entry), reply in zip(entries, replies, strict=True):
            if not await reply and self.relayed.get(key) is entry:
                log.info("session %s: the relayed client %s is gone (its replica stopped or lost its leave)",
                         key[0], entry.view.label)
                del self.relayed[key]
                entry.detach()

    async def _check_relayed_forever(self) -> None:
        while True:
            await trio.sleep(self.lease_ttl)
            try:
                await self._check_relayed()
            except StoreError as exc:
                log.warning("%s; relayed clients not checked", exc)

    # --- who is attached, and running (for other replicas' session lists) --------------

    def publish_clients(self, session_id: str, clients: list[Any], *, running: bool = False) -> None:
        """Say who is attached to a session held here (``ClientInfo``s) and
        whether it is answering a prompt, without waiting: the latest word
        per session is written soon."""
        self._clients[session_id] = {"clients": [{"label": c.label, "role": c.role} for c in clients],
                                     "running": running}
        self._clients_dirty.set()

    async def _publish_clients(self) -> None:
        while True:
            await self._clients_dirty.wait()
            self._clients_dirty = trio.Event()
            pending, self._clients = self._clients, {}
            try:
                async with self.store._command("publish who is attached"):
                    async with self.store.client.pipeline(transaction=False) as pipe:
                        for sid, activity in pending.items():
                            value = json.dumps(activity) if activity["clients"] or activity["running"] else ""
                            pipe.eval(_PUBLISH, [self.lease_key(sid), self.clients_key(sid)],
                                      [self.id, value, self._ttl_ms])
            except StoreError as exc:
                log.warning("%s; who is attached is published again shortly", exc)
                for sid, activity in pending.items():
                    self._clients.setdefault(sid, activity)  # unless a newer word came meanwhile
                await trio.sleep(self.lease_ttl / 3)
                self._clients_dirty.set()

    async def activity_of(self, session_ids: list[str]) -> dict[str, tuple[bool, tuple[Any, ...]]]:
        """Whether each of ``session_ids`` is answering a prompt and who is
        attached to it (``ClientInfo``s), as the replica running it says;
        sessions idle without clients, or whose word is unreadable, are
        left out. Raises StoreError."""
        from gemini_split.protocol import ClientInfo

        async with self.store._command("read who is attached"):
            async with self.store.client.pipeline(transaction=False) as pipe:
                replies = [pipe.get(self.clients_key(sid)) for sid in session_ids]
            texts = [await reply for reply in replies]
        found: dict[str, tuple[bool, tuple[Any, ...]]] = {}
        for sid, text in zip(session_ids, texts, strict=True):
            try:
                activity = json.loads(text or "{}")
                clients = tuple(ClientInfo(label=str(c["label"]), role="observer" if c.get("role") == "observer"
                                           else "driver") for c in activity.get("clients") or ())
                running = activity.get("running") is True
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # not ours to trust: listed idle, without clients
            if running or clients:
                found[sid] = (running, clients)
        return found

    # --- the inbox -------------------------------------------------------------------

    async def send(self, replica_id: str, session_id: str, kind: str, **fields: str) -> None:
        """Put a command in another replica's inbox."""
        key = self.inbox_key(replica_id)
        async with self.store._command("forward a message"):
            async with self.store.client.pipeline(transaction=False) as pipe:
                pipe.xadd(key, {"s": session_id, "k": kind, **fields}, trim_strategy=_maxlen(),
                          threshold=INBOX_LENGTH, trim_operator=_approx())
                # A dead replica's inbox goes away by itself (a live one
                # extends this at every renewal).
                pipe.pexpire(key, self._ttl_ms * 6)

    async def _read_inbox(self) -> None:
        key = self.inbox_key(self.id)
        cursor = "$"
        # "$" only means "after now" on the first read: from then on, the
        # id of the last entry read, so nothing is skipped between reads.
        async with self.store._command("read the inbox"):
            info = await self.store.client.xrevrange(key, "+", "-", count=1)
        if info:
            cursor = info[0].identifier
        while True:
            try:
                with trio.fail_after(self.store.command_timeout + BLOCK_MS / 1000):
                    reply = await self.store.blocking_client.xread({key: cursor}, count=100, block=BLOCK_MS)
            except Exception as exc:  # Redis away: try again shortly
                log.warning("%s: cannot read the replica inbox: %s", self.store.name, exc)
                await trio.sleep(0.5)
                continue
            for rows in (reply or {}).values():
                for row in rows:
                    cursor = row.identifier
                    fields = dict(row.field_values)
                    sid, kind = fields.pop("s", ""), fields.pop("k", "")
                    if self.on_command is not None:
                        try:
                            await self.on_command((sid, kind, fields))
                        except Exception:
                            log.exception("session %s: inbox command %r failed", sid, kind)

    # --- following a session run elsewhere ----------------------------------------------

    def reply_key(self, relay_id: str) -> str:
        return f"{self.store.prefix}relay:{relay_id}"

    def reply_soon(self, relay_id: str, text: str, *, control: bool = False) -> None:
        """Send a reply meant for one relayed connection only (unnumbered,
        unlogged), in order with the others, without waiting. ``control``:
        for the relay itself (JSON), not its client."""
        try:
            self._replies.send_nowait((relay_id, "c" if control else "d", text))
        except trio.WouldBlock:
            log.warning("replies to relayed clients pile up; one was dropped")

    async def _send_replies(self) -> None:
        async for relay_id, field, text in self._replies_out:
            key = self.reply_key(relay_id)
            try:
                async with self.store._command("send a reply"):
                    async with self.store.client.pipeline(transaction=False) as pipe:
                        pipe.xadd(key, {field: text}, trim_strategy=_maxlen(), threshold=1000,
                                  trim_operator=_approx())
                        pipe.pexpire(key, self._ttl_ms * 6)
            except StoreError as exc:
                log.warning("%s; a reply to a relayed client was lost", exc)

    async def control_reply(self, relay_id: str, timeout: float) -> dict[str, Any] | None:
        """The first control reply to relay ``relay_id``, or None when none
        comes within ``timeout`` seconds.
        The entry is deleted once read: it may carry the session's resume
        token, which Redis keeps no longer than that (the store keeps only
        its hash)."""
        key = self.reply_key(relay_id)
        cursor = "0-0"
        with trio.move_on_after(timeout):
            while True:
                async with self.store._command("wait for the runner", blocking=BLOCK_MS / 1000):
                    reply = await self.store.blocking_client.xread({key: cursor}, count=100, block=BLOCK_MS)
                for row in (reply or {}).get(key, ()):
                    cursor = row.identifier
                    if "c" in row.field_values:
                        try:
                            async with self.store._command("delete a control reply"):
                                await self.store.client.xdel(key, [row.identifier])
                        except StoreError as exc:  # it expires with the stream
                            log.warning("%s; a control reply to a relay is kept until its stream expires", exc)
                        return json.loads(row.field_values["c"])
        return None

    async def follow(self, session_id: str, last_seq: int, *, replies: str | None = None
                     ) -> AsyncIterator[list[str]]:
        """The texts of the session's events after ``last_seq`` as they are
        written — and of every reply to relayed connection ``replies``, from
        its first (control replies left out) — batch by batch, forever (the
        caller stops when it wants). Raises StoreError when Redis is
        unreachable.

        From its first: the runner may reply to a relayed client before it
        answers the join (a tool call it hands to every driver after a
        batch of events, while it waits for its store to flush), and such
        a reply reaches the client after its replay, as one queued for a
        local client does — never skipped for having come before the join's
        answer (issue 44)."""
        key = self.store.key(session_id, "e")
        cursors = {key: f"{last_seq}-0"}
        if replies is not None:
            cursors[self.reply_key(replies)] = "0-0"  # its own stream
        while True:
            async with self.store._command("follow a session", blocking=BLOCK_MS / 1000):
                reply = await self.store.blocking_client.xread(dict(cursors), count=500, block=BLOCK_MS)
            for stream, rows in (reply or {}).items():
                if rows:
                    cursors[stream] = rows[-1].identifier
                    texts = [_event(row).data if stream == key else row.field_values.get("d") for row in rows]
                    yield [text for text in texts if text is not None]

    # --- lifetime -----------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew)
            nursery.start_soon(self._read_inbox)
            nursery.start_soon(self._send_replies)
            nursery.start_soon(self._check_relayed_forever)
            nursery.start_soon(self._publish_clients)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(2):
                    for sid in sorted(self.held):
                        await self.release(sid)


@dataclass(eq=False)
class RelayedClient:
    """On the runner: a client relayed from replica ``replica``, attached
    as ``view`` at ``point``; ``detach()`` takes it off its session."""

    replica: str
    view: Any
    detach: Callable[[], None]
    point: Any = None


def _maxlen() -> Any:
    from coredis import PureToken

    return PureToken.MAXLEN


def _approx() -> Any:
    from coredis import PureToken

    return PureToken.APPROXIMATELY


def encode_fields(**values: Any) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
