"""Serving a client whose session another replica runs: the relay.

A replica that finds a session's lease held by another replica (see
:mod:`.redis_replica`) does not run it; it relays:

* **to the client**, every event of the session after the client's last seq,
  read from the session's event Stream in Redis (``XRANGE`` then
  ``XREAD BLOCK``, one cursor): exactly the texts the runner logged, in seq
  order, each once;
* **to the runner**, every message the client sends (prompt, cancel, tool
  answers, tool list, history/state requests), unchanged, through the
  runner's inbox; the runner's session acts on it as if its own connection
  had received it, and its answer comes back as events like any other.

A relay watches the lease. When the runner gives the session up or dies
(its lease expires), the relay drops the client's connection; the client
reconnects on its own (through nginx: to any replica) and resumes from its
last seq on a replica that now takes the lease and restores the session
from the store — a request that was running ends ``interrupted``, as after a
single server's crash. When the relay itself dies, the client reconnects the
same way, and the runner, unaffected, goes on.

``list_sessions`` / ``delete_session`` are answered by the relay itself from
the store (only ever the caller's own sessions).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.protocol import (
    Cancel,
    Connected,
    Connection,
    DeleteSession,
    Error,
    ErrorCode,
    GenerateContentRequest,
    History,
    ListSessions,
    RemoteProtocolError,
    SessionInfo,
    Sessions,
    ToolExecutionResponse,
    decode,
    encode,
)
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectionBroken, ConnectionClosed, MessageStream, MessageTooLarge, Principal

from ..views import View
from . import SessionRecord, StoreError, hash_token, token_matches
from .redis_replica import Replica

#: What only a client that may act sends (an observer gets ``forbidden``).
_ACTS = (GenerateContentRequest, Cancel, ToolExecutionResponse)

log = logging.getLogger(__name__)


class Relay:
    """One client connection relayed to the replica ``holder``, which runs
    the session ``record`` describes."""

    def __init__(self, replica: Replica, stream: MessageStream, conn: Connection, record: SessionRecord,
                 holder: str, principal: Principal | None, *, resume_token: str | None,
                 last_seq: int | None, capabilities: list[str], manager: Any):
        self.replica = replica
        self.stream = stream
        self.conn = conn
        self.record = record
        self.holder = holder
        self.principal = principal
        self.resume_token = resume_token
        self.last_seq = last_seq
        self.capabilities = capabilities
        self.manager = manager
        #: Why the relay ended (for the log).
        self.ended = ""
        #: This relayed connection, as the runner knows it (its replies to
        #: this connection alone come back on ``relay:<id>``).
        self.relay_id = secrets.token_hex(8)
        self.role = "driver"
        self.label = "client"

    async def run(self) -> None:
        store = self.replica.store
        sid = self.record.id
        token = self.resume_token
        cursor = self.last_seq if self.last_seq is not None else self.record.last_seq
        if token is None or not token_matches(token, self.record.token_hash):
            # Resumed by id: a new token (the store keeps only its hash).
            token = secrets.token_urlsafe(24)
            await store.set_token_hash(sid, hash_token(token))
        await self.stream.send(self.conn.send(stamp(Connected(
            server=f"gemini-split/{__version__}", session_id=sid, resume_token=token, model=self.record.model,
            capabilities=self.capabilities, resumed=True, role=self.role, label=self.label,
            # Live events start after the client's last seq: the request
            # running then (the store says which) is running for it too.
            last_seq=cursor, active_request_id=self.record.running_request,
        ))))
        if await store.events_after(sid, cursor, limit=1) is None:
            await self._send(Error(code=ErrorCode.REPLAY_UNAVAILABLE.value,
                                   message=f"the events after seq {cursor} are no longer kept; here is the "
                                           "session's history instead"))
            await self._send(History(messages=list(self.record.history)))
            cursor = (await store.get(sid) or self.record).last_seq
        log.info("session %s: relayed to replica %s", sid, self.holder)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._forward_events, cursor, nursery.cancel_scope)
                nursery.start_soon(self._watch_lease, nursery.cancel_scope)
                await self._forward_messages()
                self.ended = self.ended or "the client left"
                nursery.cancel_scope.cancel()
        except* (ConnectionClosed, ConnectionBroken):
            self.ended = self.ended or "the client left"
        log.info("session %s: relay ended (%s)", sid, self.ended)

    async def _send(self, message: Any) -> None:
        await self.stream.send(encode(stamp(message)))

    async def _forward_events(self, cursor: int, scope: trio.CancelScope) -> None:
        try:
            async for texts in self.replica.follow(self.record.id, cursor, replies=self.relay_id):
                for text in texts:
                    await self.stream.send(text)
        except StoreError as exc:
            self.ended = f"lost the store: {exc}"
            await self.stream.aclose("the session store is unreachable; reconnect")
        except (ConnectionClosed, ConnectionBroken):
            self.ended = self.ended or "the client left"
        scope.cancel()

    async def _watch_lease(self, scope: trio.CancelScope) -> None:
        while True:
            await trio.sleep(self.replica.lease_ttl / 3)
            try:
                holder = await self.replica.holder(self.record.id)
            except StoreError:
                continue  # _forward_events says so
            if holder != self.holder:
                self.ended = "the replica running the session gave it up or stopped"
                # Not a clean end: the client reconnects and resumes where a
                # replica takes the session over.
                await self.stream.aclose("the session moved to another replica; reconnect")
                scope.cancel()
                return

    async def _forward_messages(self) -> None:
        while True:
            try:
                text = await self.stream.receive()
            except MessageTooLarge as exc:
                await self._send(Error(code=ErrorCode.MESSAGE_TOO_LARGE.value, message=str(exc)))
                continue
            except (ConnectionClosed, ConnectionBroken):
                return
            try:
                message = decode(text)
            except RemoteProtocolError as exc:
                await self._send(Error(code=exc.code.value, message=str(exc)))
                continue
            if isinstance(message, Error):
                continue
            if isinstance(message, ListSessions | DeleteSession):
                await self._answer_sessions(message)
                continue
            if self.role == "observer" and isinstance(message, _ACTS):
                await self._send(Error(code=ErrorCode.FORBIDDEN.value, in_reply_to=message.id,
                                       message="this client watches the session (observer): it cannot prompt, "
                                               "cancel or answer tool calls"))
                continue
            try:
                await self.replica.send(self.holder, self.record.id, "msg", owner=self.record.owner,
                                        relay=self.relay_id, role=self.role, label=self.label,
                                        text=text if isinstance(text, str) else text.decode())
            except StoreError as exc:
                await self._send(Error(
                    code=ErrorCode.STORAGE_ERROR.value,
                    request_id=message.id if isinstance(message, GenerateContentRequest) else None,
                    message=f"the message could not be passed to the replica running this session: {exc}"))

    async def _answer_sessions(self, message: ListSessions | DeleteSession) -> None:
        try:
            if isinstance(message, DeleteSession):
                if message.session_id == self.record.id or not await self.manager.delete(message.session_id,
                                                                                          self.principal):
                    await self._send(Error(code=ErrorCode.UNKNOWN_SESSION.value, in_reply_to=message.id,
                                           message=f"no session {message.session_id!r} that can be deleted here"))
                    return
            summaries = await self.manager.list_sessions(self.principal)
        except StoreError as exc:
            await self._send(Error(code=ErrorCode.STORAGE_ERROR.value, in_reply_to=message.id,
                                   message=f"the server cannot read its sessions: {exc}"))
            return
        await self._send(Sessions(in_reply_to=message.id, sessions=tuple(
            SessionInfo(id=s.id, title=s.title, created=int(s.created * 1000), updated=int(s.updated * 1000),
                        turns=s.turns, model=s.model)
            for s in summaries)))


class RelayedView(View):
    """On the runner: a client connected to another replica, as the session
    sees it. Not one of the session's views (its events reach it through
    the session's Stream, read by the relay); a reply to it alone
    (:meth:`send_direct`) goes back through ``relay:<id>``."""

    def __init__(self, replica: Replica, relay_id: str, **kw: Any):
        super().__init__(close=_no_close, **kw)
        self.replica = replica
        self.relay_id = relay_id
        self.last_used = trio.current_time()

    def send_direct(self, event: Any) -> None:
        text = encode(stamp(event))
        self.replica.reply_soon(self.relay_id, text)


async def _no_close(reason: str) -> None:
    return None


#: Relayed views idle this long are forgotten (their relay is gone or silent).
RELAYED_VIEW_IDLE = 3600.0


async def run_forwarded(manager: Any, command: tuple[str, str, dict[str, str]]) -> None:
    """On the runner: act on one command from its inbox (a relayed client
    message, or a request to give an idle session up)."""
    sid, kind, fields = command
    session = manager.live.get(sid)
    if session is None:
        return  # unloaded meanwhile: the relay sees the lease go and reconnects its client
    if kind == "release":
        manager.release_if_idle(sid)
        return
    if kind != "msg" or fields.get("owner") != session.owner:
        log.warning("session %s: inbox command refused (%r)", sid, kind)
        return
    try:
        message = decode(fields.get("text", ""))
    except RemoteProtocolError as exc:
        log.warning("session %s: a relayed message could not be read: %s", sid, exc)
        return
    views: dict[tuple[str, str], RelayedView] = manager.__dict__.setdefault("_relayed_views", {})
    now = trio.current_time()
    for key in [k for k, v in views.items() if now - v.last_used > RELAYED_VIEW_IDLE]:
        del views[key]
    relay_id = fields.get("relay", "")
    view = views.get((sid, relay_id))
    if view is None:
        role = fields.get("role") if fields.get("role") in ("driver", "observer") else "driver"
        view = views[(sid, relay_id)] = RelayedView(manager.replica, relay_id, role=role,
                                                    label=(fields.get("label") or "client")[:64] + " (relayed)")
    view.last_used = now
    if not view.may_act and isinstance(message, _ACTS):
        view.send_direct(Error(code=ErrorCode.FORBIDDEN.value, in_reply_to=message.id,
                               message="an observer cannot prompt, cancel or answer tool calls"))
        return
    await session.handle(message, view)
