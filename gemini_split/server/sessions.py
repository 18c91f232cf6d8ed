"""The sessions of one server: live ones in memory, every one in the store.

A session is a durable object; a connection is only a view of it. The
:class:`SessionManager` runs each live session in its own nursery (not the
connection's), so a request goes on when its client goes away, and finds a
session again for a client that resumes it — in memory if it is still live,
otherwise restored from the store (after a restart, or once it was unloaded).

Events leave a session through its outbox. Exactly one task takes them at
any time: the writer of the attached connection, or, while no connection is
attached, a *detached drain* that only logs them (numbered, encoded once,
handed to the store). So every event is logged exactly once and in order,
whoever is watching. A session detached for ``detached_grace`` seconds with
no request running is unloaded from memory; the store has all of it.

Who may resume what: the session's owner (the principal's user id, or
``local`` without authentication), and, when a resume token is presented,
only with the right one (compared in constant time). Every refusal is the
same ``None``, whatever the reason, so a caller cannot tell another user's
session from one that never existed.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from gemini_split.transport import Principal

from .session import LOCAL_OWNER, Session
from .store import SessionStore, SessionSummary, StoredEvent, hash_token, token_matches

log = logging.getLogger(__name__)

#: Seconds a detached, idle session stays in memory before it is unloaded
#: (a client reconnecting within it finds it live).
DEFAULT_DETACHED_GRACE = 300.0
#: Events read from the store at a time when replaying.
REPLAY_PAGE = 500
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


@dataclass(eq=False)
class View:
    """One connection attached to a session."""

    close: Callable[[str], Awaitable[None]]
    detached: trio.Event = field(default_factory=trio.Event)


@dataclass(eq=False)
class _Live:
    session: Session
    scope: trio.CancelScope
    view: View | None = None
    drain: trio.CancelScope | None = None


class SessionManager:
    """Create with the store and a factory for new sessions; run
    :meth:`run` (``nursery.start``) before use."""

    def __init__(self, store: SessionStore, make_session: Callable[..., Session], *,
                 detached_grace: float = DEFAULT_DETACHED_GRACE):
        self.store = store
        self.make_session = make_session
        self.detached_grace = detached_grace
        self._live: dict[str, _Live] = {}
        self._nursery: trio.Nursery | None = None

    @property
    def live(self) -> dict[str, Session]:
        return {sid: entry.session for sid, entry in self._live.items()}

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Run sessions until cancelled (the store must be open). Sessions
        still live then stop; the store has them."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
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
            if session_id in self._live or await self.store.get(session_id) is not None:
                return None
            if session_id in self._live:  # opened by another connection meanwhile
                return None
            session = self.make_session(principal=principal, session_id=session_id)
        await self._start(session)
        return session

    async def find(self, session_id: str, resume_token: str | None, principal: Principal | None,
                   *, last_seq: int | None = None) -> Session | None:
        """The session to resume, or None (no such session, not the
        caller's, or a wrong token: never said which)."""
        owner = owner_of(principal)
        if (session_id != LATEST and owner != LOCAL_OWNER and session_id not in self._live
                and await self.store.get(session_id) is None):
            session_id = chosen_id(owner, session_id)  # one the caller named (--session-id)
        if session_id == LATEST:
            # Every session that ever ran a request is in the store.
            mine = await self.store.list_sessions(owner)
            if not mine:
                return None
            session_id = mine[0].id
            resume_token = None  # the caller's own: ownership is the proof
        entry = self._live.get(session_id)
        if entry is not None:
            session = entry.session
            token_ok = resume_token is None or token_matches(resume_token, session.token_hash)
            return session if token_ok and session.owner == owner else None
        record = await self.store.get(session_id)
        token_ok = record is not None and (resume_token is None or token_matches(resume_token, record.token_hash))
        if record is None or not token_ok or record.owner != owner:
            return None
        entry = self._live.get(session_id)  # restored meanwhile by another connection
        if entry is not None:
            return entry.session
        session = self.make_session(principal=principal, record=record)
        if resume_token is not None:
            session.resume_token = resume_token
        else:
            # The store keeps only the hash: a client resuming by id gets a
            # new token (the old one stops working).
            session.resume_token = secrets.token_urlsafe(24)
            session.token_hash = hash_token(session.resume_token)
            await self.store.set_token_hash(session.id, session.token_hash)
        if last_seq is not None and last_seq > session.log.last_seq:
            # The client saw events the crash lost before they were written:
            # number on from what it saw, so nothing new looks old to it.
            session.log.last_seq = last_seq
        await self._start(session)
        if record.running_request is not None:
            await session.interrupted(record.running_request)
        return session

    async def list_sessions(self, principal: Principal | None) -> list[SessionSummary]:
        return await self.store.list_sessions(owner_of(principal))

    async def delete(self, session_id: str, principal: Principal | None) -> bool:
        """Delete the caller's session (stopping it if live). False when
        there is no such session of theirs."""
        owner = owner_of(principal)
        entry = self._live.get(session_id)
        if entry is not None:
            if entry.session.owner != owner:
                return False
            if entry.view is not None:
                await entry.view.close("the session was deleted")
            self._unload(session_id)
            await self.store.delete(session_id)
            return True
        record = await self.store.get(session_id)
        if record is None or record.owner != owner:
            return False
        return await self.store.delete(session_id)

    # --- attaching connections ------------------------------------------------

    async def attach(self, session: Session, view: View) -> None:
        """Make ``view`` the session's connection: a previous one is closed,
        the detached drain stops (the view's writer takes events now)."""
        entry = self._live[session.id]
        previous = entry.view
        entry.view = view
        if entry.drain is not None:
            entry.drain.cancel()
            entry.drain = None
        if previous is not None:
            await previous.close("the session was resumed on another connection")

    def detach(self, session: Session, view: View) -> None:
        """The view's connection ended. Unless another view took over, the
        session goes on detached."""
        view.detached.set()
        entry = self._live.get(session.id)
        if entry is None or entry.view is not view:
            return
        entry.view = None
        self._start_drain(entry)

    async def replay(self, session: Session, last_seq: int, send: Callable[[StoredEvent], Awaitable[None]]) -> bool:
        """Send every logged event after ``last_seq``, in order, page by
        page. Returns False (having sent nothing) when some are no longer
        kept. Call it attached and before taking from the outbox: nothing
        is logged meanwhile."""
        cursor = last_seq
        target = session.log.last_seq
        while cursor < target:
            page = await self.store.events_after(session.id, cursor, limit=REPLAY_PAGE)
            if page is None:
                return False
            if not page:  # the rest was lost with a crash: the client saw it
                break
            for event in page:
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

        async def run_session(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await session.run(task_status=task_status)

        await self._nursery.start(run_session)
        self._start_drain(entry)

    def _start_drain(self, entry: _Live) -> None:
        if self._nursery is None:  # shutting down: nothing runs detached any more
            return
        entry.drain = trio.CancelScope()
        self._nursery.start_soon(self._drain, entry, entry.drain)

    async def _drain(self, entry: _Live, scope: trio.CancelScope) -> None:
        """While no connection is attached: log the session's events, and
        unload it once it has been idle for ``detached_grace``."""
        session = entry.session
        with scope:
            deadline = trio.current_time() + self.detached_grace
            while True:
                with trio.move_on_at(deadline):
                    session.log_events(await session.outbox.take())
                    continue
                if session.busy:
                    deadline = trio.current_time() + self.detached_grace
                    continue
                if session.outbox_pending:
                    session.log_events(await session.outbox.take())
                    continue
                log.info("session %s: detached and idle for %gs, unloaded", session.id, self.detached_grace)
                self._unload(session.id)
                return

    def _unload(self, session_id: str) -> None:
        entry = self._live.pop(session_id, None)
        if entry is not None:
            entry.scope.cancel()
            if entry.drain is not None:
                entry.drain.cancel()
