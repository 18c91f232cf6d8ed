"""What a session writes to its store: its record at its first request, the
mark that a request runs, its events, and its history after each turn.

One :class:`Saving` per session, reading the session's fields as they are
when it writes (the session passes itself: ``id``, ``owner``,
``token_hash``, ``model_name``, ``title``, ``turns``, ``history``,
``tool_choice``, ``context``, ``timeline``, ``log``, ``emit_nowait``). A
store failure is said to the clients (``storage_error``, not fatal) and the
session goes on in memory.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import trio

from gemini_split.protocol import Error, ErrorCode, ServerEvent, encode

from ...store import SessionRecord, SessionStore, StoredEvent, StoreError

log = logging.getLogger(__name__)


class Saving:
    """The store side of one session."""

    def __init__(self, session: Any, store: SessionStore, *, persisted: bool):
        self.session = session
        self.store = store
        #: Whether the store has this session yet: it is written at its
        #: first request (a connection that never prompts leaves nothing).
        self.persisted = persisted
        #: From a request's start until that first record is written (:meth:`starting`):
        #: every event logged so far, handed to the store once it exists.
        self._unstored: list[StoredEvent] | None = None
        #: Set when that first write is over (stored or failed).
        self._created = trio.Event()

    async def written(self, seq: int) -> None:
        """Return once the session's events up to ``seq`` are durable in
        the store — at once when the store does not have the session (it
        was never written: nothing of it can be restored). Never raises."""
        while self._unstored is not None:
            await self._created.wait()
        if self.persisted:
            await self.store.written(self.session.id, seq)

    def starting(self) -> None:
        """A request starts (called at once, before its ``request_started``
        can be shown): a session not in the store yet is about to be
        written, so from here :meth:`written` waits for that first write.

        Without this, the first write began only when :meth:`record_start`
        got its turn — after the session's broadcast could have shown the
        request's start (nothing was unsaved yet, so ``written`` returned
        at once): a runner stopped then left a client waiting for a prompt
        the store never had."""
        if self.persisted or self._unstored is not None:
            return
        # Every event logged until the record exists is kept here (the
        # in-memory log is bounded; the store must get them all).
        self._created = trio.Event()
        self._unstored = [StoredEvent(e.seq or 0, e.request_id, encode(e), _ms(e.timestamp), e.TYPE)
                          for e in self.session.log.kept()]

    async def record_start(self, request_id: str) -> None:
        """Write to the store that ``request_id`` runs — with the session's
        record itself at its first request (then the events logged so far
        follow it).

        It runs beside the request, not before it: a store write waits its
        turn behind every other session's (one writer thread, or a Redis
        round trip), and 1,000 sessions starting at once made each first
        delta wait seconds for it. What a client is promised is unchanged:
        the request's ``finished`` waits for this (and for the turn's own
        write, :meth:`save`), and the session's events reach the store in
        order, after its record."""
        session = self.session
        try:
            if self.persisted:
                await self.store.set_running(session.id, request_id, updated=time.time())
                return
            self.starting()  # done already when the session started the request
            now = time.time()
            context = session.context
            try:
                await self.store.create(SessionRecord(
                    id=session.id, owner=session.owner, token_hash=session.token_hash,
                    created=now, updated=now, model=session.model_name, running_request=request_id,
                    title=session.title,  # listed while the first prompt still runs
                    approval=session.tool_choice.to_record() if session.tool_choice is not None else {},
                    project=context.workspace_dirs[0] if context and context.workspace_dirs else "",
                ))
            except BaseException:
                self._unstored = None
                self._created.set()
                raise
            # No await from here on: :meth:`logged` hands over what comes next.
            self.store.append_events(session.id, self._unstored)
            self._unstored = None
            self.persisted = True
            self._created.set()
        except StoreError as exc:
            self.failed(exc)

    def logged(self, batch: list[tuple[ServerEvent, str]]) -> None:
        """Hand logged events to the store's event log (batched off the hot
        path), or keep them while the first record is being written."""
        if self.persisted or self._unstored is not None:
            stored = [StoredEvent(e.seq or 0, e.request_id, text, _ms(e.timestamp), e.TYPE) for e, text in batch]
            if self.persisted:
                self.store.append_events(self.session.id, stored)
            else:
                self._unstored.extend(stored)

    async def save(self, request_id: str | None = None) -> None:
        """Save the history (and the rewind timeline with it): durable on
        return, shielded; a failure is said to the clients."""
        session = self.session
        timeline = session.timeline
        archive = timeline.archive if timeline.archive_changed else None
        try:
            with trio.CancelScope(shield=True):
                await self.store.save_turn(session.id, history=session.history, updated=time.time(),
                                           turns=session.turns, title=session.title, model=session.model_name,
                                           timeline=timeline.to_record(), archive=archive)
            if archive is not None:
                timeline.archive_changed = False
        except StoreError as exc:
            self.failed(exc)

    def failed(self, exc: StoreError) -> None:
        log.error("session %s: %s", self.session.id, exc)
        # No request_id: this does not end the request, which goes on.
        self.session.emit_nowait(Error(
            code=ErrorCode.STORAGE_ERROR.value, fatal=False,
            message=f"the server could not save this session ({exc}); it goes on in memory, "
                    "but will not survive a server restart",
        ))


def _ms(timestamp: object) -> int:
    return timestamp if isinstance(timestamp, int) else 0
