"""Serving a client whose session another replica runs: the relay.

A replica that finds a session's lease held by another replica (see
:mod:`.replica`) does not run it; it relays:

* **to the client**, every event of the session after the client's last seq,
  read from the session's event Stream in Redis (``XRANGE`` then
  ``XREAD BLOCK``, one cursor): exactly the texts the runner logged, in seq
  order, each once;
* **to the runner**, every message the client sends (prompt, cancel, tool
  answers, tool list, history/state requests), unchanged, through the
  runner's inbox; the runner's session acts on it as if its own connection
  had received it, and its answer comes back as events like any other.

The relayed client is one of the session's clients on the runner too: the
relay *joins* there first (the runner attaches a :class:`RelayedView`, the
others hear ``clients_changed``, and the runner answers with the attach
point: last seq, running request, unanswered tool calls, who is attached);
``connected`` says what the runner said. What the client asks to see again
(``hello.replay``: last turns, a time window; by default the last turn when
it attaches by id without a seq) is planned by
:func:`~gemini_split.protocol.replay.plan_replay` over the Stream's event
marks, and sent marked ``replayed`` before the live part. Tool calls whose
client left are handed to it as to a local client. When the relay ends it
*leaves*; if its replica dies, the runner notices (see
:mod:`.replica`) and drops it.

A client that joins by id alone is judged by the runner as its own would
be (refused while clients are attached unless the server allows attaching
by id), and given the resume token the session's other clients hold — the
runner sends it in its answer, which the relay deletes from Redis once read
— never a new one: the store keeps one token's hash, and replacing it would
lock every other client out of its next reconnect (issue 34).

A relay watches the lease. When the runner gives the session up or dies
(its lease expires), the relay drops the client's connection; the client
reconnects on its own (through nginx: to any replica) and resumes from its
last seq on a replica that now takes the lease and restores the session
from the store — a request that was running ends ``interrupted``, as after a
single server's crash. When the relay itself dies, the client reconnects the
same way, and the runner, unaffected, goes on.

``list_sessions`` / ``delete_session`` are answered by the relay itself from
the store (only ever the caller's own sessions), and so is ``pair``
(``serve --web``: paired browsers are in the store too).
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

import trio

from gemini_split import __version__
from gemini_split.protocol import (
    ASK_USER_CAPABILITY,
    Rewind,
    starts_request,
    Cancel,
    ClientInfo,
    Compress,
    Connected,
    Connection,
    DeleteSession,
    Error,
    ErrorCode,
    GenerateContentRequest,
    History,
    ListSessions,
    Pair,
    RemoteProtocolError,
    Replay,
    Sessions,
    ToolExecutionResponse,
    decode,
    encode,
    usable_capabilities,
)
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectionBroken, ConnectionClosed, MessageStream, MessageTooLarge, Principal

from ..session.manager import no_such_session, session_infos
from gemini_split.protocol.replay import DEFAULT_ATTACH_REPLAY, mark_replayed, plan_replay, replay_from_query
from ..session.features.server_tools import APPROVALS_CAPABILITY
from ..session.features.tool_hooks import runs_tool_hooks
from ..session.views import View
from ..store import SessionRecord, StoreError, hash_token, token_matches
from .replica import RelayedClient, Replica

#: What only a client that may act sends (an observer gets ``forbidden``).
_ACTS = (GenerateContentRequest, Compress, Cancel, ToolExecutionResponse, Rewind)


log = logging.getLogger(__name__)

#: Seconds a relay waits for the runner to take its client in.
JOIN_TIMEOUT = 10.0
#: Events read from the store per page of a replay.
REPLAY_PAGE = 500


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
        #: (1.4) Answers ``pair`` (the service's ``answer_pair``): paired
        #: browsers are in the shared store, so the relay answers it here.
        self.answer_pair: Any = None

    @property
    def _client_capabilities(self) -> tuple[str, ...]:
        hello = self.conn.hello
        return tuple(hello.capabilities) if hello is not None else ()

    @property
    def replay(self) -> Replay | None:
        """What the client asked to see again (``hello.replay`` or the
        WebSocket query, which the service has checked already)."""
        hello = self.conn.hello
        replay = hello.replay if hello is not None else None
        if replay is None and self.stream.replay_query:
            replay = replay_from_query(dict(self.stream.replay_query))
        if replay is None and self.last_seq is None:
            replay = DEFAULT_ATTACH_REPLAY  # attached by id: the last turn
        return replay

    async def run(self) -> None:
        store = self.replica.store
        sid = self.record.id
        await self.replica.relay_started(self.relay_id)
        try:
            await self._run()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(store.command_timeout):
                await self.replica.relay_ended(self.holder, sid, self.relay_id)
        log.info("session %s: relay ended (%s)", sid, self.ended)

    async def _run(self) -> None:
        store = self.replica.store
        sid = self.record.id
        try:
            joined = await self._join()
        except _RefusedById:
            self.ended = "refused: attached by id alone to a session with clients attached"
            hello = self.conn.hello
            text = no_such_session(hello.session_id if hello is not None and hello.session_id else sid)
            await self.stream.send(self.conn.send(stamp(Error(code=ErrorCode.UNKNOWN_SESSION.value, message=text,
                                                              fatal=True))))
            await self.stream.aclose(text)
            return
        if joined is None:
            self.ended = "the replica running the session did not take the client in"
            await self.stream.aclose("the replica running this session does not answer; reconnect")
            return
        token = await self._token(joined)
        upto = int(joined["last_seq"])
        replay = self.replay
        plan = None
        if replay is not None:
            marks = await store.event_marks(sid)
            plan = plan_replay(marks or [], replay, upto=upto,
                               hidden=[(a, b) for a, b in self.record.timeline.get("hidden", ())])
        attached = tuple(ClientInfo(label=c["label"], role=c["role"]) for c in joined["clients"])
        await self.stream.send(self.conn.send(stamp(Connected(
            server=f"gemini-split/{__version__}", session_id=sid, resume_token=token, model=self.record.model,
            model_auth=str(joined.get("model_auth", "")), capabilities=self.capabilities, resumed=True, role=self.role, label=joined["label"],
            clients=len(attached), attached=attached, last_seq=upto,
            active_request_id=joined["active_request_id"],
            pending_tool_calls=tuple(joined["pending_tool_calls"]),
            pending_approvals=tuple(joined.get("pending_approvals", ())),
            replay_truncated=plan is not None and plan.truncated,
        ))))
        log.info("session %s: relayed to replica %s", sid, self.holder)
        if plan is not None:
            await self._replay_planned(plan.seqs)
        elif self.last_seq is not None:
            await self._replay_after(self.last_seq, upto)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._forward_events, upto, nursery.cancel_scope)
                nursery.start_soon(self._watch_lease, nursery.cancel_scope)
                await self._forward_messages()
                self.ended = self.ended or "the client left"
                nursery.cancel_scope.cancel()
        except* (ConnectionClosed, ConnectionBroken):
            self.ended = self.ended or "the client left"

    @property
    def _has_token(self) -> bool:
        """Whether the client came with the session's resume token."""
        return self.resume_token is not None and token_matches(self.resume_token, self.record.token_hash)

    async def _token(self, joined: dict[str, Any]) -> str:
        """The resume token for ``connected``: the client's own, or — it
        attached by id — the one the runner's clients hold, as the runner
        itself answers an attach by id. Never a new one while the session
        runs: the store keeps one token's hash, so a new token would stop
        the driver's and every other client's from working on the next
        reconnect (issue 34). A runner that does not send it (an older
        version) leaves only the old way: a new token."""
        if self._has_token:
            return self.resume_token  # type: ignore[return-value]
        token = joined.get("resume_token")
        if isinstance(token, str) and token:
            return token
        token = secrets.token_urlsafe(24)
        await self.replica.store.set_token_hash(self.record.id, hash_token(token))
        return token

    async def _join(self) -> dict[str, Any] | None:
        """Ask the runner to take this client in; its answer (the attach
        point, with the session's resume token when the client came
        without it), or None when it did not answer or refused."""
        await self.replica.send(self.holder, self.record.id, "join", owner=self.record.owner, relay=self.relay_id,
                                replica=self.replica.id, role=self.role, label=self.label,
                                approves="1" if APPROVALS_CAPABILITY in self._client_capabilities else "",
                                hooks=self._hooks_field(),
                                asks="1" if self.conn.hello is not None
                                and ASK_USER_CAPABILITY in usable_capabilities(self.conn.hello) else "",
                                token="" if self._has_token else "1")
        reply = await self.replica.control_reply(self.relay_id, JOIN_TIMEOUT)
        if reply is not None and reply.get("by_id_refused"):
            raise _RefusedById
        if reply is None or "joined" not in reply:
            log.warning("session %s: the runner %s did not take the relayed client in (%s)", self.record.id,
                        self.holder, "no answer" if reply is None else reply.get("refused"))
            return None
        return reply["joined"]

    def _hooks_field(self) -> str:
        """(1.4) For the runner's view: "" when the client does not run
        tool hooks, else the seconds a round of them may take ("60" when
        it did not say)."""
        hello = self.conn.hello
        if hello is None or not runs_tool_hooks(hello):
            return ""
        return repr(float(hello.tool_hooks_timeout or 60.0))

    async def _replay_planned(self, seqs: tuple[int, ...]) -> None:
        """The planned events, marked ``replayed``."""
        if not seqs:
            return
        wanted = set(seqs)
        await self._replay_after(seqs[0] - 1, seqs[-1], wanted)

    async def _replay_after(self, after: int, upto: int, wanted: set[int] | None = None) -> None:
        """The logged events with ``after < seq <= upto`` (those in
        ``wanted`` only, if given) marked ``replayed`` — or, when they are no
        longer kept, say so and send the history instead."""
        store = self.replica.store
        cursor = after
        while cursor < upto:
            page = await store.events_after(self.record.id, cursor, limit=REPLAY_PAGE)
            if page is None:
                await self._send(Error(code=ErrorCode.REPLAY_UNAVAILABLE.value,
                                       message=f"the events after seq {after} are no longer kept; here is the "
                                               "session's history instead"))
                record = await store.get(self.record.id) or self.record
                await self._send(History(messages=list(record.history)))
                return
            if not page:
                return
            for event in page:
                if event.seq > upto:
                    return
                if wanted is None or event.seq in wanted:
                    text = self.conn.text_for_peer(event.data)  # as the client's version may have it
                    if text is not None:
                        await self.stream.send(mark_replayed(text))
                cursor = event.seq

    async def _send(self, message: Any) -> None:
        """Stamp, encode and send a message of the relay's own, as the
        client's version may have it."""
        sent = self.conn.for_peer(stamp(message))
        if sent is not None:
            await self.stream.send(encode(sent))

    async def _forward_events(self, cursor: int, scope: trio.CancelScope) -> None:
        try:
            async for texts in self.replica.follow(self.record.id, cursor, replies=self.relay_id):
                for text in texts:
                    sent = self.conn.text_for_peer(text)  # as the client's version may have it
                    if sent is not None:
                        await self.stream.send(sent)
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
                if message.fatal:
                    return  # the client ended the protocol: nothing more goes out
                continue
            if isinstance(message, ListSessions | DeleteSession):
                await self._answer_sessions(message)
                continue
            if isinstance(message, Pair) and self.answer_pair is not None:
                await self._send(await self.answer_pair(self.principal, message, where=f"relay {self.relay_id}",
                                                        paired_browser=self.stream.paired_browser))
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
                    request_id=message.id if starts_request(message) else None,
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
        running, attached = await self.manager.activity(s.id for s in summaries)
        await self._send(Sessions(in_reply_to=message.id, sessions=session_infos(summaries, running, attached)))


class _RefusedById(Exception):
    """The runner refused a client attaching by id alone (the server does
    not allow it while the session has clients attached)."""


class RelayedView(View):
    """On the runner: a client connected to another replica, as the session
    sees it — one of its views (counted, handed tool calls), whose events
    reach it through the session's Stream, read by the relay (so it takes
    none here); a reply to it alone (:meth:`send_direct`) goes back through
    ``relay:<id>``."""

    def __init__(self, replica: Replica, relay_id: str, **kw: Any):
        super().__init__(close=_no_close, **kw)
        self.replica = replica
        self.relay_id = relay_id

    def offer(self, batch: Any) -> bool:
        return True  # the relay reads them from Redis

    def send_direct(self, event: Any) -> None:
        text = encode(stamp(event))
        self.replica.reply_soon(self.relay_id, text)


def _seconds(text: str | None) -> float | None:
    try:
        value = float(text or "")
    except ValueError:
        return None
    return value if value > 0 else None


async def _no_close(reason: str) -> None:
    return None


async def run_forwarded(manager: Any, command: tuple[str, str, dict[str, str]]) -> None:
    """On the runner: act on one command from its inbox (a relayed client
    joining, leaving or sending a message, or a request to give an idle
    session up)."""
    sid, kind, fields = command
    replica: Replica = manager.replica
    relay_id = fields.get("relay", "")
    if kind == "leave":
        entry = replica.relayed.pop((sid, relay_id), None)
        if entry is not None:
            entry.detach()
        return
    session = manager.live.get(sid)
    if kind == "release":
        if session is not None:
            manager.release_if_idle(sid)
        return
    if session is None or fields.get("owner") != session.owner or kind not in ("join", "msg"):
        if kind == "join":  # unloaded meanwhile: the relay sees the lease go and reconnects its client
            replica.reply_soon(relay_id, json.dumps({"refused": "the session does not run here"}), control=True)
        elif session is not None:
            log.warning("session %s: inbox command refused (%r)", sid, kind)
        return
    if kind == "join" and fields.get("token") == "1" and not manager.allow_attach_by_id and session.views:
        # As for a client of this replica: by id alone, a session with
        # clients attached only where the server allows it.
        replica.reply_soon(relay_id, json.dumps({"refused": "attached by id alone", "by_id_refused": True}),
                           control=True)
        return
    entry = replica.relayed.get((sid, relay_id))
    if kind == "join" or entry is None:
        entry = _attach(manager, session, relay_id, fields)
        if kind == "join":
            point = entry.point
            try:
                # The relay replays up to the point from Redis: all of it
                # must be there first (the store writes in the background).
                await manager.store.flush()
            except StoreError as exc:
                replica.relayed.pop((sid, relay_id), None)
                entry.detach()
                replica.reply_soon(relay_id, json.dumps({"refused": str(exc)}), control=True)
                return
            joined = {
                "last_seq": point.last_seq, "active_request_id": point.active_request_id,
                "pending_tool_calls": list(point.pending_tool_calls),
                "pending_approvals": list(point.pending_approvals), "label": entry.view.label,
                "clients": [{"label": c.label, "role": c.role} for c in point.clients],
                "model_auth": getattr(session.model, "auth_description", "")}
            if fields.get("token") == "1" and session.resume_token is not None:
                # Attached by id: the relay hands its client the token this
                # session's clients hold (the store keeps only its hash).
                # The relay deletes this reply once read.
                joined["resume_token"] = session.resume_token
            replica.reply_soon(relay_id, json.dumps({"joined": joined}), control=True)
            # Calls whose client left are this one's to answer too, and the
            # approval questions still open are asked again. The relay sends
            # them after its replay, with any reply sent to the view before
            # this answer (a call handed to every driver meanwhile: not
            # asked again here), as Replica.follow reads its replies from
            # the first.
            session.catch_up(entry.view, point.last_seq)
            return
    try:
        message = decode(fields.get("text", ""))
    except RemoteProtocolError as exc:
        log.warning("session %s: a relayed message could not be read: %s", sid, exc)
        return
    view = entry.view
    if not view.may_act and isinstance(message, _ACTS):
        view.send_direct(Error(code=ErrorCode.FORBIDDEN.value, in_reply_to=message.id,
                               message="an observer cannot prompt, cancel or answer tool calls"))
        return
    await session.handle(message, view)


def _attach(manager: Any, session: Any, relay_id: str, fields: dict[str, str]) -> RelayedClient:
    """Attach a relayed client to ``session`` (replacing one under the same
    relay id, if any) and list it with the replica."""
    replica: Replica = manager.replica
    old = replica.relayed.pop((session.id, relay_id), None)
    if old is not None:
        old.detach()
    role = fields.get("role") if fields.get("role") in ("driver", "observer") else "driver"
    label = (fields.get("label") or "client")[:64]
    view = RelayedView(replica, relay_id, role=role, label=label, approves=fields.get("approves") == "1",
                       tool_hooks=bool(fields.get("hooks")), hook_timeout=_seconds(fields.get("hooks")),
                       answers_questions=fields.get("asks") == "1")
    point = manager.attach(session, view)
    entry = RelayedClient(replica=fields.get("replica", ""), view=view,
                          detach=lambda: manager.detach(session, view), point=point)
    replica.relayed[(session.id, relay_id)] = entry
    return entry
