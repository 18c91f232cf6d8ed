"""Where sessions live when no connection holds them: the session store.

A session is a durable object; a connection is only a view of it. The server
keeps each session's metadata, its conversation history and its event log in
a :class:`SessionStore`, so that a client can reconnect and resume (replay of
every event after the ``seq`` it last saw), and a restarted server can pick a
conversation up again.

Backends: :mod:`.sqlite` (the default: one SQLite file in WAL mode, written by
a dedicated thread), :mod:`.memory` (nothing survives the process) and
:mod:`.redis` (a Redis server several ``serve`` replicas share). A new
backend is one new module implementing :class:`SessionStore`, and
must pass the shared suite in ``tests/store/`` (add it to the ``store``
fixture there).

What every backend must guarantee
---------------------------------
1. **Order.** Operations issued by one Trio task take effect in the order
   they were issued: events appended before a :meth:`~SessionStore.save_turn`
   are stored before that history is, and a read sees every write issued
   before it (read-your-writes), including appended events not yet
   committed.
2. **Durability of turns.** When :meth:`~SessionStore.create`,
   :meth:`~SessionStore.save_turn`, :meth:`~SessionStore.set_running`,
   :meth:`~SessionStore.set_token_hash`,
   :meth:`~SessionStore.delete` or :meth:`~SessionStore.flush` return, what
   they wrote survives the process being killed (SIGKILL). The server sends
   ``finished`` only after ``save_turn`` has returned.
3. **Events off the hot path.** :meth:`~SessionStore.append_events` never
   blocks and never awaits: it queues. Queued events are written in batches
   soon after (a crash loses at most the batch being gathered). Cost on the
   event loop: a few microseconds per event. During a rush
   (:meth:`~SessionStore.defer_writes`) a backend may write them, and
   the writes of :meth:`~SessionStore.create` and
   :meth:`~SessionStore.set_running`, up to a second later.
4. **Bounded event logs.** Each session keeps its last ``replay_capacity``
   events; :meth:`~SessionStore.events_after` returns ``None`` when any event
   asked for is no longer kept (so the server can say ``replay_unavailable``
   instead of leaving a silent gap). Each event keeps its ``timestamp`` and
   ``type`` (:meth:`~SessionStore.event_marks` lists them for late-joiner
   replay by turns and times).
5. **Secrets.** The store holds a hash of each resume token, never the token
   (:func:`hash_token`); callers check a presented token with
   :func:`token_matches` (constant time). A session has one token at a
   time, shared by its clients: replacing it locks out every client that
   holds the old one.
6. **Failures are one exception.** Anything the backend cannot do (disk full,
   I/O error, corrupt file, lock held) is a :class:`StoreError` whose message
   names the file or server and says what went wrong. A failed write leaves
   the caller's in-memory state untouched; appended events that failed to
   be written are reported by the next durable call (and by
   :attr:`SessionStore.write_error`).
7. **Paired browsers** (``serve --web``) live in the store too
   (:meth:`~SessionStore.paired_browsers`; their contract: :mod:`.pairing`).
8. **Isolation is the caller's.** The store filters by owner where asked
   (:meth:`~SessionStore.list_sessions`); checking that a principal may touch
   a session is done by the server before calling it.
"""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemini_split.errors import GeminiSplitError
from gemini_split.protocol.replay import EventMark

if TYPE_CHECKING:
    from .pairing import PairingStore

#: Events kept per session for replay, unless configured otherwise.
DEFAULT_REPLAY_CAPACITY = 2000
#: Seconds an idle session is kept (7 days).
DEFAULT_SESSION_TTL = 7 * 24 * 3600.0
#: Characters of the first prompt kept as a session's title.
TITLE_LENGTH = 60


class StoreError(GeminiSplitError):
    """The session store cannot do what was asked (see the message)."""


class StoreLocked(StoreError):
    """Another server process holds the state directory."""


@dataclass
class SessionRecord:
    """Everything the store keeps about one session but its event log."""

    id: str
    owner: str
    token_hash: str
    created: float
    updated: float
    model: str = ""
    #: Client-declared approval settings (mode, allowed tools), kept so a
    #: resumed conversation shows what it ran under.
    approval: dict[str, Any] = field(default_factory=dict)
    title: str = ""
    #: Gemini ``Content`` dicts, API-valid (every function call answered).
    history: list[dict[str, Any]] = field(default_factory=list)
    #: Completed requests (prompts that got ``finished`` or ``error``).
    turns: int = 0
    #: The request that was running when this was written, if any: found set
    #: after a crash, it means that request was interrupted.
    running_request: str | None = None
    #: The highest seq appended for this session.
    last_seq: int = 0
    #: (1.4) Where each prompt and tool call sits in the conversation
    #: (``server/session/features/rewind.py``: ``Timeline.to_record``), and the
    #: messages compressions dropped from the history: what rewinding needs.
    timeline: dict[str, Any] = field(default_factory=dict)
    archive: list[dict[str, Any]] = field(default_factory=list)
    #: The project directory it was started in, as its client saw it
    #: (``SessionContext.workspace_dirs[0]`` of its first request); "" when
    #: not said.
    project: str = ""


@dataclass(frozen=True)
class SessionSummary:
    """One line of ``--list-sessions``."""

    id: str
    title: str
    created: float
    updated: float
    turns: int
    model: str
    project: str = ""


@dataclass(frozen=True)
class StoredEvent:
    """One logged event: its seq, the request it belongs to (if any), the
    event exactly as it was sent (encoded JSON text), and — for late-joiner
    replay (``protocol/replay.py``) — its ``timestamp`` (Unix ms) and wire
    ``type``."""

    seq: int
    request_id: str | None
    data: str
    timestamp: int = 0
    type: str = ""


class SessionStore(ABC):
    """The narrow interface every backend implements. All methods are
    called from one Trio run; see the module docstring for the guarantees."""

    #: Events each session keeps for replay.
    replay_capacity: int = DEFAULT_REPLAY_CAPACITY

    @property
    def write_error(self) -> StoreError | None:
        """The last failure of a background write, until a write succeeds."""
        return None

    async def open(self) -> None:
        """Make the store usable (open files, check them). Raises
        :class:`StoreError` naming what is unusable."""

    @abstractmethod
    async def aclose(self) -> None:
        """Write everything queued, then release the store. Idempotent."""

    @abstractmethod
    async def create(self, record: SessionRecord) -> None:
        """Store a new session. Durable on return."""

    @abstractmethod
    async def get(self, session_id: str) -> SessionRecord | None:
        """The session, or None if there is none with this id."""

    @abstractmethod
    async def list_sessions(self, owner: str) -> list[SessionSummary]:
        """The owner's sessions, most recently updated first."""

    @abstractmethod
    async def delete(self, session_id: str) -> bool:
        """Remove a session and its events. Returns whether it existed."""

    @abstractmethod
    async def save_turn(
        self,
        session_id: str,
        *,
        history: list[dict[str, Any]],
        updated: float,
        turns: int,
        title: str | None = None,
        model: str | None = None,
        running_request: str | None = None,
        timeline: dict[str, Any] | None = None,
        archive: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record a completed turn (or any change of history): durable on
        return, after every event appended before the call. ``timeline`` /
        ``archive``: the rewind data (None: unchanged)."""

    @abstractmethod
    async def set_running(self, session_id: str, request_id: str | None, *, updated: float) -> None:
        """Record that a request started (or that none runs). Durable."""

    @abstractmethod
    async def set_token_hash(self, session_id: str, token_hash: str) -> None:
        """Replace the session's resume token (its hash). Durable."""

    @abstractmethod
    def append_events(self, session_id: str, events: Sequence[StoredEvent]) -> None:
        """Queue events (in seq order, after any appended before) for
        writing. Never blocks."""

    @abstractmethod
    async def flush(self) -> None:
        """Every event appended so far is durable on return."""

    async def release_idle(self) -> None:
        """Let go of what only a busy store needs (the server went quiet),
        such as a database's page cache; nothing is lost and the next call
        works as before. Does nothing by default."""

    async def unended_request(self, session_id: str) -> tuple[bool, str | None]:
        """From the session's stored log: whether its last
        ``request_started`` was found, and that request's id when no
        ``finished`` or ``error`` of it follows. The log says it better than
        the record's ``running_request`` after a crash: that mark is written
        beside the request (during a rush, up to a second later), so a
        crash can leave a request's start stored and the mark not. This one
        reads :meth:`event_marks`. Raises :class:`StoreError`."""
        ended: set[str] = set()
        for mark in reversed(await self.event_marks(session_id) or []):
            if mark.type in ("finished", "error") and mark.request_id:
                ended.add(mark.request_id)
            elif mark.type == "request_started" and mark.request_id:
                return True, None if mark.request_id in ended else mark.request_id
        return False, None

    def defer_writes(self, on: bool) -> None:
        """A burst's requests are on their way to their first deltas and
        the loop is busy (True), or no longer (False): writes no first
        delta needs may wait (contract item 3). Called from the loop; must
        not block. This one writes as before."""

    async def written(self, session_id: str, seq: int) -> None:
        """Return once the session's events appended up to ``seq`` are
        durable (or lost to a full buffer, or the store closed). Never
        raises: while the store is out of reach it waits. This one returns
        at once (a store that writes as it is told)."""

    @abstractmethod
    async def events_after(self, session_id: str, last_seq: int, limit: int | None = None) -> list[StoredEvent] | None:
        """The kept events with ``seq > last_seq``, in order (at most
        ``limit`` of them: a resume replays page by page, so the first event
        goes out before the last is read); ``None`` when some of them are no
        longer kept, or there is no such session."""

    @abstractmethod
    async def event_marks(self, session_id: str) -> list[EventMark] | None:
        """Seq, timestamp, request id and type of every kept event of the
        session, oldest first (what :func:`~gemini_split.protocol.replay.plan_replay`
        reads to find turns and times); ``None`` when there is no such
        session."""

    @abstractmethod
    async def expire(self, idle_before: float) -> list[str]:
        """Delete sessions not updated since ``idle_before`` (epoch
        seconds); returns their ids."""

    @abstractmethod
    def paired_browsers(self) -> PairingStore:
        """``serve --web``'s paired browsers and pairing codes, kept where
        the sessions are (:mod:`.pairing`: its contract). Usable once the
        store is open."""


def hash_token(token: str) -> str:
    """What the store keeps instead of a resume token. The token is 192
    random bits, so a plain SHA-256 cannot be reversed or guessed."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str | None, token_hash: str) -> bool:
    """Whether ``token`` is the one ``token_hash`` was made from, compared
    in constant time."""
    presented = hash_token(token or "")
    return hmac.compare_digest(presented, token_hash)


def make_title(prompt: str) -> str:
    """A session's title: the first line of its first prompt, shortened."""
    line = " ".join(prompt.strip().split("\n", 1)[0].split())
    if len(line) <= TITLE_LENGTH:
        return line
    return line[: TITLE_LENGTH - 1].rstrip() + "…"


def open_store(location: str | Path | None, *, replay_capacity: int = DEFAULT_REPLAY_CAPACITY,
               exclusive: bool = False) -> SessionStore:
    """The store for a ``--state-dir`` value: ``:memory:`` (or None) keeps
    sessions in this process only; anything else is a directory holding a
    SQLite database; a ``redis://`` or ``rediss://`` URL is a Redis server
    shared by replicas (:mod:`.redis`). ``exclusive`` (``serve``) refuses a
    directory another server already uses. Call :meth:`SessionStore.open`
    before use."""
    if isinstance(location, str) and location.startswith(("redis://", "rediss://")):
        from .redis import RedisStore

        return RedisStore(location, replay_capacity=replay_capacity)
    if location is None or str(location) == ":memory:":
        from .memory import MemoryStore

        return MemoryStore(replay_capacity=replay_capacity)
    from .sqlite import SQLiteStore

    return SQLiteStore(Path(location), replay_capacity=replay_capacity, exclusive=exclusive)
