"""The blocking API: :class:`SyncClient`, :class:`SyncSession`,
:class:`SyncReply`, :class:`SyncEvents` — the async API's methods as
blocking calls and iterators, for scripts with no event loop.

Each call is carried to the core's Trio loop in a :class:`~._portal.Portal`
thread and waits for it (``trio.from_thread.run``). Python tools are plain
functions here (they run in worker threads); an ``async def`` tool needs
the async :class:`~gemini_split.sdk.Client`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gemini_split.client.rewinding import Rewinding, Step
from gemini_split.protocol import History, Replay, SessionInfo
from gemini_split.protocol.turn import TurnEnded

from ._core import ConnectConfig, CoreClient, CoreEvents, CoreReply, CoreSession, Event, open_core
from ._portal import Held, Portal

__all__ = ["SyncClient", "SyncConnection", "SyncEvents", "SyncReply", "SyncSession"]


class SyncConnection:
    """A :class:`SyncClient` and what holds it open: its portal thread and
    the task that holds the core client there."""

    def __init__(self, client: SyncClient, portal: Portal, held: Held):
        self.client = client
        self._portal = portal
        self._held = held

    @classmethod
    def open(cls, config: ConnectConfig) -> SyncConnection:
        """Raises what entering ``Client.connect(...)`` raises, and
        :class:`TypeError` for an ``async def`` tool."""
        asynchronous = [t.name for t in config.tools if t.is_async]
        if asynchronous:
            raise TypeError(f"the blocking client runs plain functions as tools; {', '.join(asynchronous)} "
                            "is async: use it with `async with Client.connect(...)` (Trio or asyncio)")
        portal = Portal.start()
        try:
            core, held = portal.call(portal.hold, open_core(config, _no_async_tools))
        except BaseException:
            portal.stop()
            raise
        return cls(SyncClient(core, portal), portal, held)

    def close(self) -> None:
        """Close the client's sessions (and its embedded service), then the portal."""
        try:
            self._portal.call(self._held.release)
        finally:
            self._portal.stop()


async def _no_async_tools(fn: Callable[..., Awaitable[Any]], args: dict[str, Any]) -> Any:
    raise AssertionError("SyncConnection.open refuses async tools")


class SyncClient:
    """The blocking :class:`~gemini_split.sdk.Client`: ``with
    Client.connect(...) as client:`` (see docs/sdk.md)."""

    def __init__(self, core: CoreClient, portal: Portal):
        self._core = core
        self._portal = portal

    def new_session(self, *, session_id: str | None = None) -> SyncSession:
        """See :meth:`Client.new_session <gemini_split.sdk.Client.new_session>`."""
        return self._open(session_id=session_id)

    def resume(self, session: str = "latest") -> SyncSession:
        """See :meth:`Client.resume <gemini_split.sdk.Client.resume>`."""
        return self._open(resume=session)

    def attach(self, session: str, *, watch: bool = False, replay_limit: int | None = None) -> SyncSession:
        """See :meth:`Client.attach <gemini_split.sdk.Client.attach>`."""
        replay = Replay(limit=replay_limit) if replay_limit is not None else None
        return self._open(resume=session, attach=True, watch=watch, replay=replay)

    def list_sessions(self) -> tuple[SessionInfo, ...]:
        """See :meth:`Client.list_sessions <gemini_split.sdk.Client.list_sessions>`."""
        return self._portal.call(self._core.list_sessions)

    def _open(self, **choice: Any) -> SyncSession:
        async def open_session() -> CoreSession:
            return await self._core.open_session(**choice)

        return SyncSession(self._portal.call(open_session), self._portal)


class SyncSession:
    """The blocking :class:`~gemini_split.sdk.Session`; ``with`` closes it."""

    def __init__(self, core: CoreSession, portal: Portal):
        self._core = core
        self._portal = portal

    @property
    def id(self) -> str:
        return self._core.id

    def prompt(self, text: str) -> SyncReply:
        """See :meth:`Session.prompt <gemini_split.sdk.Session.prompt>`."""
        return SyncReply(CoreReply(self._core, text), self._portal)

    def events(self) -> SyncEvents:
        """See :meth:`Session.events <gemini_split.sdk.Session.events>`:
        ``with session.events() as events: for event in events: …``."""
        return SyncEvents(self._core, self._portal)

    def steps(self) -> list[Step]:
        return self._portal.call(self._core.steps)

    def rewind(self, to: int | Step, *, files: bool = False) -> Rewinding:
        """See :meth:`Session.rewind <gemini_split.sdk.Session.rewind>`."""
        async def rewind() -> Rewinding:
            return await self._core.rewind(to, files=files)

        return self._portal.call(rewind)

    def history(self) -> History:
        return self._portal.call(self._core.history)

    def close(self) -> None:
        self._portal.call(self._core.aclose)

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class SyncReply:
    """The blocking :class:`~gemini_split.sdk.Reply`: an iterator of events."""

    def __init__(self, core: CoreReply, portal: Portal):
        self._core = core
        self._portal = portal

    def __iter__(self) -> SyncReply:
        return self

    def __next__(self) -> Event:
        item = self._portal.call(self._core.next)
        if item is None:
            raise StopIteration
        return item

    def text(self) -> str:
        """See :meth:`Reply.text <gemini_split.sdk.Reply.text>`."""
        return self._portal.call(self._core.text)

    def result(self) -> TurnEnded:
        return self._portal.call(self._core.result)

    def cancel(self) -> None:
        self._portal.call(self._core.cancel)


class SyncEvents:
    """The blocking :class:`~gemini_split.sdk.Events`."""

    def __init__(self, session: CoreSession, portal: Portal):
        self._session = session
        self._portal = portal
        self._core: CoreEvents | None = None

    def __enter__(self) -> SyncEvents:
        self._core = self._portal.call(self._session.events)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._core is not None:
            self._portal.call(self._core.aclose)

    def __iter__(self) -> SyncEvents:
        return self

    def __next__(self) -> Event:
        if self._core is None:
            raise RuntimeError("enter the stream first: with session.events() as events")
        item = self._portal.call(self._core.next)
        if item is None:
            raise StopIteration
        return item
