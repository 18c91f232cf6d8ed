"""The sessions of one server: live ones in memory, every one in the store.

A session is a durable object; a connection is only a *view* of it, and a
session may have several (attach: the laptop and the phone, a colleague
watching). The :class:`SessionManager` runs each live session in its own
nursery (not a connection's), so a request goes on when its clients go
away, and finds a session again for a client that resumes or attaches — in
memory if it is still live, otherwise restored from the store (after a
restart, or once it was unloaded).

Fan-out: one pump per session → N views
---------------------------------------
Events leave a session through its :class:`~.broadcast.Broadcast`, which
owns their whole way: the session only emits into its
:class:`~.outbox.Outbox`. Exactly one task takes them, the session's *pump*
(:meth:`Broadcast.pump`, run here), whether or not anyone is attached: it
numbers each event, encodes it once, follows it in the session's request
tracker and has the session hand it to the store, then appends the same
``(event, text)`` pairs to every attached :class:`View`'s own bounded
outbox (:meth:`View.offer`). Each view's writer sends from there at its own
pace. The pump takes the next batch once one view has caught up: the
session goes at the pace of its *fastest* view — meanwhile a delta stream
gathers and merges in the session outbox (a fast model and a slow network
make larger frames, not more of them), and a model that outruns even the
fastest view waits once that outbox is full. A view that falls further
behind than its own outbox holds (a client that stopped reading) is cut
off — removed at once and its connection closed with a reason saying so —
and never slows the session or the other views. A relay feeding views from
elsewhere (another replica) would call :meth:`Broadcast.fan_out` the same
way.

Among replicas (a shared Redis store) the pump hands a batch to the views
only once the store has it (:attr:`Broadcast.durable`), and an attaching
client's replay waits the same way: a client is shown only what the store
has, so when a runner dies the replica restoring the session — numbering on
from the store — never reuses a seq a client saw, and ends ``interrupted``
the request whose end the store lacks. While Redis is away, answers pause.

Replies to one connection (``state``, ``history``, ``sessions``, a ``busy``
refusal, an error about a bad message) are not session events: they go to
that view only (:meth:`View.send_direct`), unnumbered and unlogged.

A session with no view for ``detached_grace`` seconds (10 by default) and
no request running is unloaded from memory; the store has all of it, and
the next attach or resume restores it. Once many were unloaded and the
unloads stopped, the process gives the freed memory back to the system
(:class:`gemini_split.memory.GiveBackScheduler`): after a burst of
clients, an idle server returns to about its idle size.

Who may attach to what
----------------------
The session's owner (the principal's user id, or ``local`` without
authentication) only; with a resume token, only the right one (compared in
constant time). By id alone (no token, or ``latest``): a session nobody is
attached to (a resume, as before), or — when the server allows it
(``serve --allow-attach-by-id``, the default on loopback and Unix sockets)
— one that has clients attached. Every refusal is the same ``None``, after
the same store read, whatever the reason, so a caller can tell neither
another user's session nor a live one from one that never existed.

A reconnecting client does not close its old view: the server cannot tell
the same client from a second one holding the same token. A dead old view
goes when its transport notices, or when its outbox overflows; meanwhile
the tool calls of its request are handed over to the new one (see
:meth:`ClientCalls.hand_over`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from gemini_split.memory import GiveBackScheduler
from gemini_split.protocol import ClientInfo, SessionInfo
from gemini_split.protocol.messages import SESSION_ATTACHED_MAX
from gemini_split.transport import Principal

from .features.agents import end_interrupted
from .session import LOCAL_OWNER, Session
from ..store import SessionStore, SessionSummary, StoreError, StoredEvent, hash_token, token_matches
from .views import AttachPoint, View

__all__ = ["AmbiguousSession", "AttachPoint", "LATEST", "SessionGone", "SessionManager", "View", "owner_of"]

log = logging.getLogger(__name__)

#: Seconds a detached, idle session stays in memory before it is unloaded
#: (a client reconnecting within it finds it live; one coming later finds
#: it restored from the store, with nothing lost).
DEFAULT_DETACHED_GRACE = 10.0
#: Events read from the store at a time when replaying.
REPLAY_PAGE = 500
#: Seconds a replica waits for another to give up an idle session.
RELEASE_WAIT = 1.0
#: ``hello.session_id`` naming the caller's most recently used session.
LATEST = "latest"


def owner_of(principal: Principal | None) -> str:
    return principal.user_id if principal is not None else LOCAL_OWNER


def chosen_id(owner: str, name: str) -> str:
    """The id of a session its owner named ``name`` (``--session-id``).
    Each user of an authenticated server names sessions in a space of their
    own — two users may both choose ``build-42``, and choosing one never
    tells whether another user has it; without authentication (one user)
    the id is the name itself."""
    if owner == LOCAL_OWNER:
        return name
    digest = hashlib.sha256(owner.encode()).hexdigest()[:10]
    return f"u{digest}-{name}"


def no_such_session(session_id: str) -> str:
    """The one answer for a session that does not exist, is not the
    caller's, or was named with a wrong token (or, through a relay, joined
    by id where the runner does not allow it)."""
    if session_id == LATEST:
        return "no earlier session to resume"
    return f"no session {session_id!r} (it may have expired or been deleted)"


class AmbiguousSession(Exception):
    """A session id prefix that begins several of the caller's sessions
    (``matches``, all of them the caller's own)."""

    def __init__(self, prefix: str, matches: list[str]):
        self.prefix, self.matches = prefix, matches
        shown = ", ".join(matches[:10]) + (f" and {len(matches) - 10} more" if len(matches) > 10 else "")
        super().__init__(f"{prefix!r} begins {len(matches)} of your sessions ({shown}); give more of the id")


class SessionGone(Exception):
    """A session found for a connection stopped running here before the
    connection was attached (another replica took it over, or it was
    unloaded): the client reconnects and finds it where it runs now."""


@dataclass(frozen=True)
class RemoteSession:
    """What :meth:`SessionManager.find` returns for a session another
    replica runs (its lease is held there): relay to ``holder``."""

    record: Any
    holder: str


@dataclass(eq=False)
class _Live:
    session: Session
    scope: trio.CancelScope
    view_count: int = 0


class SessionManager:
    """Create with the store and a factory for new sessions; run
    :meth:`run` (``nursery.start``) before use. ``allow_attach_by_id``:
    whether a session with clients attached may be joined by id alone.
    ``memory``: told of every unload, gives freed memory back to the
    system (a new :class:`GiveBackScheduler` by default)."""

    def __init__(self, store: SessionStore, make_session: Callable[..., Session], *,
                 detached_grace: float = DEFAULT_DETACHED_GRACE, allow_attach_by_id: bool = True,
                 memory: GiveBackScheduler | None = None):
        self.store = store
        self.make_session = make_session
        self.detached_grace = detached_grace
        self.memory = memory if memory is not None else GiveBackScheduler()
        self.allow_attach_by_id = allow_attach_by_id
        self._live: dict[str, _Live] = {}
        self._nursery: trio.Nursery | None = None
        #: This process as one of several replicas on a shared store
        #: (``serve --store redis://``): a session runs here only while this
        #: replica holds its lease (:mod:`..replicas.replica`). None: the
        #: only server.
        self.replica: Any = None
        #: Runs what a relay on another replica forwards for a session that
        #: runs here (set by the service, which owns the replicas' code).
        self.on_forwarded: Callable[[Any], Awaitable[None]] | None = None

    @property
    def live(self) -> dict[str, Session]:
        return {sid: entry.session for sid, entry in self._live.items()}

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run sessions until cancelled (the store must be open). Sessions
        still live then stop; the store has them."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.memory.run)
                if self.replica is not None:
                    await self._start_replica(nursery)
                task_status.started()
                try:
                    await trio.sleep_forever()
                finally:
                    # The nursery takes no new task from here on.
                    self._nursery = None
        finally:
            self._nursery = None
            self._live.clear()

    # --- finding sessions -------------------------------------------------------

    async def create(self, principal: Principal | None, *, session_id: str | None = None) -> Session | None:
        """A new session of ``principal``: under a generated id, or under
        ``session_id`` (the caller's choice, ``hello.new_session_id``) —
        None when the caller already has a session by that id."""
        if session_id is None:
            session = self.make_session(principal=principal)
        else:
            session_id = chosen_id(owner_of(principal), session_id)
            # Live is checked after the store read: another connection may
            # have opened it meanwhile.
            if await self.store.get(session_id) is not None or session_id in self._live:
                return None
            session = self.make_session(principal=principal, session_id=session_id)
        if self.replica is not None and await self.replica.acquire(session.id) != self.replica.id:
            return None  # opened under this id on another replica meanwhile (raises StoreError without Redis)
        await self._start(session)
        return session

    async def find(self, session_id: str, resume_token: str | None, principal: Principal | None,
                   *, last_seq: int | None = None) -> Session | None:
        """The session to resume or attach to, or None (no such session,
        not the caller's, a wrong token, or joining by id alone a session
        with clients attached where the server does not allow it: never
        said which)."""
        owner = owner_of(principal)
        live = self._live.get(session_id)
        if session_id != LATEST and (live is None or live.session.owner != owner):
            session_id = await self._full_id(session_id, owner)
        if session_id == LATEST:
            # Every session that ever ran a request is in the store. The
            # latest conversation is one with an answer (a session stopped
            # before its first answer is not what the user was having),
            # or one answering its first prompt here now.
            mine = await self.store.list_sessions(owner)
            latest = next((s for s in mine if s.turns > 0 or (s.id in self._live and self._live[s.id].session.busy)),
                          None)
            if latest is None:
                return None
            session_id = latest.id
            resume_token = None  # the caller's own: ownership is the proof
        entry = self._live.get(session_id)
        if entry is not None:
            session = entry.session
            token_ok = token_matches(resume_token, session.token_hash) if resume_token is not None else (
                self.allow_attach_by_id or not session.views)
            if not token_ok and resume_token is not None and self.replica is not None:
                token_ok = await self._token_renewed_elsewhere(session, resume_token)
            if token_ok and session.owner == owner:
                return session
            # The same store read as for an id that is not live: the
            # refusal takes the same time whatever the reason.
            await self.store.get(session_id)
            return None
        record = await self.store.get(session_id)
        token_ok = record is not None and (resume_token is None or token_matches(resume_token, record.token_hash))
        if record is None or not token_ok or record.owner != owner:
            return None
        if self.replica is not None:
            holder = await self._take_lease(session_id)
            if holder != self.replica.id:
                return RemoteSession(record, holder)  # type: ignore[return-value]
            record = await self.store.get(session_id) or record  # as the last runner left it
        # The stored log says best whether a request was left running: its
        # start stored and its end not, though its "running" mark was
        # cleared (among replicas) or never made it (a crash before the
        # deferred write). A client resuming waits for that request's end.
        found, unended = await self.store.unended_request(session_id)
        if found:
            record.running_request = unended
        entry = self._live.get(session_id)  # restored meanwhile by another connection
        if entry is not None:
            return entry.session if (resume_token is not None or self.allow_attach_by_id
                                     or not entry.session.views) else None
        session = self.make_session(principal=principal, record=record)
        if record.running_request is not None:
            # Running until end_interrupted below ends it: a client attaching
            # meanwhile (through another connection) is told so, and takes
            # the end as that request's.
            session.events.logged.begin(record.running_request)
        if resume_token is not None:
            session.resume_token = resume_token
        else:
            # The store keeps only the hash: a client resuming by id gets a
            # new token (the old one stops working).
            session.resume_token = secrets.token_urlsafe(24)
            session.token_hash = hash_token(session.resume_token)
        if last_seq is not None and last_seq > session.log.last_seq:
            # The client saw events the crash lost before they were written:
            # number on from what it saw, so nothing new looks old to it.
            session.log.last_seq = last_seq
        # Live before any await: a connection restoring it meanwhile finds
        # this one instead of starting a second copy (whose token would
        # then replace this one's in the store).
        await self._start(session)
        if resume_token is None:
            await self.store.set_token_hash(session.id, session.token_hash)
        if record.running_request is not None:
            await end_interrupted(session, record.running_request)
        return session

    async def _full_id(self, name: str, owner: str) -> str:
        """The id of the caller's session that ``name`` stands for: the id
        itself, the name the caller chose (``--session-id``), or the one id
        it begins (the short id a client shows); else ``name`` unchanged
        (refused later, as any unknown id). Only the caller's own sessions
        are searched, so nothing here says whether another user has one.
        Raises :class:`AmbiguousSession` when it begins several of them."""
        record = await self.store.get(name)
        if (record is not None and record.owner == owner) or not name:
            return name
        named = chosen_id(owner, name) if owner != LOCAL_OWNER else name
        if named != name and (named in self._live or await self.store.get(named) is not None):
            return named  # one the caller named (chosen ids are per owner)
        ids = {s.id for s in await self.store.list_sessions(owner)}
        ids.update(sid for sid, entry in self._live.items() if entry.session.owner == owner)  # not stored yet
        matches = sorted(sid for sid in ids if sid.startswith(name) or sid.startswith(named))
        if len(matches) > 1:
            raise AmbiguousSession(name, matches)
        return matches[0] if matches else name

    async def activity(self, session_ids: Iterable[str]) -> tuple[set[str], dict[str, tuple[ClientInfo, ...]]]:
        """Which of ``session_ids`` are answering a prompt now, and who is
        attached now to each that has clients (a session listed without
        any has none): from the sessions live here, and — among replicas —
        from what the replica running each of the others publishes
        (:meth:`Replica.activity_of`, one round trip); a Redis that does
        not answer leaves those out (idle, no one attached) rather than
        failing the list."""
        running: set[str] = set()
        found: dict[str, tuple[ClientInfo, ...]] = {}
        elsewhere = []
        for sid in session_ids:
            entry = self._live.get(sid)
            if entry is not None:
                if entry.session.busy:
                    running.add(sid)
                if entry.session.views:
                    found[sid] = tuple(view.info for view in entry.session.views)
            else:
                elsewhere.append(sid)
        if self.replica is not None and elsewhere:
            try:
                for sid, (busy, clients) in (await self.replica.activity_of(elsewhere)).items():
                    if busy:
                        running.add(sid)
                    if clients:
                        found[sid] = clients
            except StoreError as exc:
                log.warning("%s; sessions listed without what other replicas say of them "
                            "(running, who is attached)", exc)
        return running, found

    async def list_sessions(self, principal: Principal | None) -> list[SessionSummary]:
        """The caller's sessions, most recently updated first."""
        return await self.store.list_sessions(owner_of(principal))

    async def delete(self, session_id: str, principal: Principal | None) -> bool:
        """Delete the caller's session (stopping it if live, closing every
        view of it). False when there is no such session of theirs."""
        owner = owner_of(principal)
        entry = self._live.get(session_id)
        if entry is not None:
            if entry.session.owner != owner:
                return False
            for view in list(entry.session.views):
                await view.close("the session was deleted")
            self._unload(session_id)
            await self.store.delete(session_id)
            return True
        record = await self.store.get(session_id)
        if record is None or record.owner != owner:
            return False
        return await self.store.delete(session_id)

    # --- attaching connections ------------------------------------------------

    def attach(self, session: Session, view: View) -> AttachPoint:
        """Add ``view`` to the session's views: from now on it gets every
        event logged after the returned point (whose ``last_seq`` is where
        a replay must stop). The others hear ``clients_changed``. Raises
        :class:`SessionGone` when the session no longer runs here (its
        lease was lost, or it was unloaded, since it was found)."""
        entry = self._live.get(session.id)
        if entry is None or entry.session is not session:
            raise SessionGone(session.id)
        entry.view_count += 1
        if view.label == "client":
            view.label = f"client {entry.view_count}"
        elif any(other.label == view.label for other in session.views):
            # Two clients from one host ("vm" and "vm"): told apart by number.
            view.label = f"{view.label}#{entry.view_count}"
        point = session.events.add_view(view)
        self._clients_changed(session)
        return point

    def detach(self, session: Session, view: View) -> None:
        """The view's connection ended. The session goes on (detached when
        it was the last view)."""
        view.detached.set()
        entry = self._live.get(session.id)
        if entry is None:
            return
        if session.events.remove_view(view):
            self._clients_changed(session)
            if not session.views:
                session.events.idle_since = trio.current_time()

    async def replay(self, session: Session, after: int, upto: int,
                     send: Callable[[StoredEvent], Awaitable[None]]) -> bool:
        """Send every logged event with ``after < seq <= upto``, in order,
        page by page, from the store. Returns False (having sent nothing)
        when some are no longer kept."""
        cursor = after
        while cursor < upto:
            page = await self.store.events_after(session.id, cursor, limit=REPLAY_PAGE)
            if page is None:
                return False
            if not page:  # the rest was lost with a crash: the client saw it
                break
            for event in page:
                if event.seq > upto:
                    return True
                await send(event)
            cursor = page[-1].seq
        return True

    # --- internals -----------------------------------------------------------------

    async def _start(self, session: Session) -> None:
        if self._nursery is None:
            raise RuntimeError("SessionManager.run must be started first")
        scope = trio.CancelScope()
        entry = _Live(session, scope)
        self._live[session.id] = entry
        session.events.idle_since = trio.current_time()
        session.events.cut_off = self._cut_off
        if self.replica is not None:
            # Its clients see only what the shared store has (broadcast.py).
            session.events.durable = session.saving.written
        session.busy_changed = lambda: self._clients_changed(session)

        async def run_session(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(session.run)
                    nursery.start_soon(self._pump, entry)
                    task_status.started()

        await self._nursery.start(run_session)

    def _cut_off(self, view: View, reason: str) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(view.close, reason)

    async def _pump(self, entry: _Live) -> None:
        """Run the session's pump (:meth:`Broadcast.pump`); unload the
        session once it has been detached and idle for ``detached_grace``."""
        session = entry.session
        await session.events.pump(grace=self.detached_grace, busy=lambda: session.busy)
        log.info("session %s: detached and idle for %gs, unloaded", session.id, self.detached_grace)
        self._unload(session.id)

    def _clients_changed(self, session: Session) -> None:
        """Among replicas: publish who is attached to ``session`` now, and
        whether it is answering a prompt, for the others' session lists
        (never waits). Called when a client comes or goes and when a
        request starts or ends."""
        if self.replica is not None and session.id in self.replica.held:
            self.replica.publish_clients(session.id, [view.info for view in session.views], running=session.busy)

    def _unload(self, session_id: str, *, release: bool = True) -> None:
        entry = self._live.pop(session_id, None)
        if entry is not None:
            entry.scope.cancel()
            if not self._live:
                self._live = {}  # an emptied dict keeps the table of its largest size (a burst's)
            self.memory.unloaded()
        if release and self.replica is not None and self._nursery is not None:
            self._nursery.start_soon(self.replica.release, session_id)

    # --- replicas (serve --store redis://) ---------------------------------------------

    async def _start_replica(self, nursery: trio.Nursery) -> None:
        self.replica.on_command = self.on_forwarded
        self.replica.on_lost = self._lost
        await nursery.start(self.replica.run)

    async def _take_lease(self, session_id: str) -> str:
        """Take the session's lease, asking the replica that holds it to
        give it up if it is idle there. Returns the holder after that."""
        if session_id not in self.replica.held:
            await self.replica.check_restart()  # raises StoreError just after a Redis restart
        holder = await self.replica.acquire(session_id)
        if holder == self.replica.id:
            return holder
        await self.replica.send(holder, session_id, "release")
        with trio.move_on_after(RELEASE_WAIT):
            while holder != self.replica.id:
                await trio.sleep(0.02)
                holder = await self.replica.acquire(session_id)
        return holder

    def release_if_idle(self, session_id: str) -> None:
        """Another replica asks for the session: give it up unless a
        request runs or a client is attached here."""
        entry = self._live.get(session_id)
        if entry is not None and not entry.session.busy and not entry.session.views:
            log.info("session %s: handed over to another replica", session_id)
            self._unload(session_id)

    def _lost(self, session_id: str) -> None:
        entry = self._live.get(session_id)
        if entry is None:
            return
        for view in list(entry.session.views):
            self._cut_off(view, "the session moved to another replica; reconnect")
        self._unload(session_id, release=False)

    async def _token_renewed_elsewhere(self, session: Session, resume_token: str | None) -> bool:
        """A relay on another replica gave the session a new token: the
        store has its hash."""
        record = await self.store.get(session.id)
        if record is not None and token_matches(resume_token, record.token_hash):
            session.token_hash = record.token_hash
            session.resume_token = resume_token  # what the next attach by id is given
            return True
        return False


def session_infos(summaries: list[SessionSummary], running: Container[str] = frozenset(),
                  attached: Mapping[str, tuple[ClientInfo, ...]] | None = None) -> tuple[SessionInfo, ...]:
    """``summaries`` as ``sessions`` lists them: the project directory,
    whether each is ``running`` (the ids in ``running``) and who is
    ``attached`` to each (by id), the first :data:`SESSION_ATTACHED_MAX`
    named. (An older client's ``Connection`` leaves out what its version
    lacks.)"""
    clients = attached or {}
    return tuple(SessionInfo(id=s.id, title=s.title, created=int(s.created * 1000), updated=int(s.updated * 1000),
                             turns=s.turns, model=s.model, project=s.project, running=s.id in running,
                             clients=len(clients.get(s.id, ())),
                             attached=tuple(clients.get(s.id, ())[:SESSION_ATTACHED_MAX]))
                 for s in summaries)
