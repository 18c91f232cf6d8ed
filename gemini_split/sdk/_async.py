"""The async API: :class:`Client`, :class:`Session`, :class:`Reply`,
:class:`Events` — the same classes under Trio and under asyncio.

Under Trio the core (:mod:`._core`) runs on the caller's own loop and every
call is a plain ``await``; under asyncio it runs on a :class:`~._portal.Portal`
thread and every call is carried there (:meth:`Portal.acall
<gemini_split.sdk._portal.Portal.acall>`). Which one is decided once, when
the client is entered (``sniffio``), and held by the objects it makes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from os import PathLike
from typing import Any, TypeVar

import sniffio
import trio

from gemini_split.client.rewinding import Rewinding, Step
from gemini_split.protocol import History, Replay, SessionInfo
from gemini_split.protocol.turn import TurnEnded

from ._core import LABEL, ConnectConfig, CoreClient, CoreEvents, CoreReply, CoreSession, Event, open_core
from ._functions import Invoker, as_function_tool, invoke_in_trio
from ._portal import Held, Portal
from ._sync import SyncClient, SyncConnection

__all__ = ["Client", "Connecting", "Events", "Reply", "Session"]

T = TypeVar("T")


class _Runner:
    """How the async API reaches the core: ``await`` it (Trio), or through
    a portal (asyncio)."""

    def __init__(self, portal: Portal | None = None):
        self.portal = portal

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        if self.portal is None:
            return await fn(*args)
        return await self.portal.acall(fn, *args)


class Connecting:
    """What :meth:`Client.connect` returns: ``async with`` it (Trio or
    asyncio) for a :class:`Client`, or ``with`` it for a
    :class:`~gemini_split.sdk.SyncClient`. Single use."""

    def __init__(self, config: ConnectConfig):
        self.config = config
        self._resource: AbstractAsyncContextManager[CoreClient] | None = None
        self._portal: Portal | None = None
        self._held: Held | None = None
        self._sync: SyncConnection | None = None

    async def __aenter__(self) -> Client:
        library = sniffio.current_async_library()
        if library == "trio":
            self._resource = open_core(self.config, invoke_in_trio)
            return Client(await self._resource.__aenter__(), _Runner())
        if library != "asyncio":
            raise RuntimeError(f"gemini_split's Client runs under Trio or asyncio, not {library}")
        portal = await asyncio.to_thread(Portal.start)
        try:
            core, self._held = await portal.acall(portal.hold, open_core(self.config, _asyncio_invoker()))
        except BaseException:
            await portal.astop()
            raise
        self._portal = portal
        return Client(core, _Runner(portal))

    async def __aexit__(self, *exc: Any) -> None:
        if self._resource is not None:
            await self._resource.__aexit__(*exc)
            return
        if self._portal is not None:
            assert self._held is not None
            try:
                await self._portal.acall(self._held.release)
            finally:
                await self._portal.astop()

    def __enter__(self) -> SyncClient:
        self._sync = SyncConnection.open(self.config)
        return self._sync.client

    def __exit__(self, *exc: Any) -> None:
        if self._sync is not None:
            self._sync.close()


class Client:
    """A client of gemini-split's agent: embedded in this process, through
    the local daemon, or of a ``serve`` server. Get one with
    ``async with Client.connect(...) as client:``; its sessions
    (:meth:`new_session`, :meth:`resume`, :meth:`attach`) are closed with it.
    See docs/sdk.md."""

    def __init__(self, core: CoreClient, runner: _Runner):
        self._core = core
        self._runner = runner

    @staticmethod
    def connect(server: str | None = None, *, token: str | None = None, workspace: str | PathLike[str] | None = None,
                model: str | None = None, approval_mode: str | None = None,
                tools: Iterable[Callable[..., Any]] = (), environ: Mapping[str, str] | None = None,
                ca: str | None = None, insecure: bool = False, label: str = LABEL) -> Connecting:
        """Where and how to connect, resolved as ``gemini-split -p`` resolves
        its flags when the client is entered:

        ``server``: None (settings.json's ``geminiSplit.server`` or
        ``GEMINI_SERVER_MODE``, else embedded: the agent runs in this
        process with your ``GEMINI_API_KEY``), ``"local"`` (this user's
        local daemon, started if needed), a ``ws://``/``wss://``/``unix:``/
        ``stdio:`` address, or a profile name from servers.json.
        ``token``: the server's token (else ``GEMINI_SERVER_TOKEN`` or the
        profile's); ``ca``/``insecure``: TLS as ``--ca``/``--insecure``.
        ``workspace``: where the tools work (default: the current
        directory); its settings.json, GEMINI.md files and ``.env`` are read
        as the CLI reads them. ``model`` (``-m``), ``approval_mode``
        (``default``, ``auto_edit``, ``yolo``, ``plan``,
        ``reject_dangerous``). ``tools``: Python functions the model may
        call (plain functions or :func:`~gemini_split.sdk.tool`\\ s).
        ``environ``: the environment to read (default ``os.environ``).
        ``label``: how the other clients of a session see this one.

        Raises :class:`TypeError`/:class:`ValueError` at once for a tool
        whose declaration cannot be made; when entered,
        :class:`~gemini_split.errors.ConfigurationError` (``MissingApiKey``,
        ``BadInput``…) for what the CLI would refuse. The server is reached
        by each session: :meth:`new_session` and the others raise
        :class:`~gemini_split.transport.ConnectFailed` (its subclass
        ``AuthenticationFailed`` for a token it refuses) when it cannot be."""
        config = ConnectConfig(
            server=server, token=token, workspace=str(workspace) if workspace is not None else None, model=model,
            approval_mode=approval_mode, ca=ca, insecure=insecure,
            environ=dict(environ) if environ is not None else None,
            tools=tuple(as_function_tool(fn) for fn in tools), label=label)
        names = [t.name for t in config.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"two tools share a name: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
        return Connecting(config)

    async def new_session(self, *, session_id: str | None = None) -> Session:
        """A new session (``session_id``: under that name, as ``--session-id``)."""
        return await self._open(session_id=session_id)

    async def resume(self, session: str = "latest") -> Session:
        """An earlier session of yours: its id (or the start of one),
        ``"latest"`` (this workspace's last) or a number (as
        ``--list-sessions`` numbers them). ``"latest"`` with none opens a
        new session, as ``--resume latest`` does (said in the log). Raises
        :class:`~gemini_split.client.failures.HandshakeFailed` (code
        ``unknown_session``) for an id there is no session of, and
        :class:`~gemini_split.errors.BadInput` for a number."""
        return await self._open(resume=session)

    async def attach(self, session: str, *, watch: bool = False, replay_limit: int | None = None) -> Session:
        """A session others may be using (as ``gemini-split attach``): its
        last turn is replayed (``replay_limit``: that many turns) into
        :meth:`Session.events`, and every client's turns follow live.
        ``watch``: read-only (no prompts, no approvals)."""
        replay = Replay(limit=replay_limit) if replay_limit is not None else None
        return await self._open(resume=session, attach=True, watch=watch, replay=replay)

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        """Your sessions where this client connects, newest first (each
        with its ``id``, ``project``, ``title``, ``turns``…)."""
        return await self._runner.run(self._core.list_sessions)

    async def _open(self, **choice: Any) -> Session:
        core = await self._runner.run(_open_session, self._core, choice)
        return Session(core, self._runner)


async def _open_session(core: CoreClient, choice: dict[str, Any]) -> CoreSession:
    return await core.open_session(**choice)


class Session:
    """One conversation (see docs/sdk.md). ``async with`` closes its
    connection at the end (the session stays on the server, to resume)."""

    def __init__(self, core: CoreSession, runner: _Runner):
        self._core = core
        self._runner = runner

    @property
    def id(self) -> str:
        """The session's id (what :meth:`Client.resume` and :meth:`Client.attach` take)."""
        return self._core.id

    def prompt(self, text: str) -> Reply:
        """Send ``text`` (when the reply is first read): iterate the
        :class:`Reply` for its events, or ``await reply.text()``. One prompt
        at a time per session. Raises
        :class:`~gemini_split.sdk.PromptFailed` (``forbidden``) on a session
        watched read-only."""
        return Reply(CoreReply(self._core, text), self._runner)

    def events(self) -> Events:
        """Every event of the session from now on (every client's turns, an
        attach's replay): ``async with session.events() as events: async
        for event in events: …``."""
        return Events(self._core, self._runner)

    async def steps(self) -> list[Step]:
        """The session's prompts, oldest first (``number``, ``point.prompt``,
        ``files`` changed in that step)."""
        return await self._runner.run(self._core.steps)

    async def rewind(self, to: int | Step, *, files: bool = False) -> Rewinding:
        """Take the conversation back to before prompt ``to`` (1: the
        first; a :class:`Step`), and with ``files`` the files the agent's
        edit tools changed since (``Rewinding.files`` says what happened to
        each). Raises :class:`ValueError` for a prompt it does not have,
        :class:`~gemini_split.client.failures.RequestFailed` (``busy``
        while a prompt runs)."""
        return await self._runner.run(_rewind, self._core, to, files)

    async def history(self) -> History:
        """The conversation so far: ``messages`` (the model's history) and
        ``points`` (its prompts)."""
        return await self._runner.run(self._core.history)

    async def aclose(self) -> None:
        await self._runner.run(self._core.aclose)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def _rewind(core: CoreSession, to: int | Step, files: bool) -> Rewinding:
    return await core.rewind(to, files=files)


class Reply:
    """A prompt's answer as it comes: ``async for event in reply`` yields
    :data:`~gemini_split.sdk.Event`\\ s up to its
    :class:`~gemini_split.sdk.TurnEnded`; :meth:`text` and :meth:`result`
    run it to its end."""

    def __init__(self, core: CoreReply, runner: _Runner):
        self._core = core
        self._runner = runner

    def __aiter__(self) -> Reply:
        return self

    async def __anext__(self) -> Event:
        item = await self._runner.run(self._core.next)
        if item is None:
            raise StopAsyncIteration
        return item

    async def text(self) -> str:
        """The final text of the answer (after its last tool call). Its
        questions are denied. Raises :class:`~gemini_split.sdk.PromptFailed`
        when the prompt ended in an error; cancelled, it cancels the prompt."""
        return await self._runner.run(self._core.text)

    async def result(self) -> TurnEnded:
        """How the prompt ended (``reason``, ``text``, ``usage``,
        ``error_code``…), running it to its end as :meth:`text` does."""
        return await self._runner.run(self._core.result)

    async def cancel(self) -> None:
        """Cancel the prompt: local tools stop, the server is told."""
        await self._runner.run(self._core.cancel)


class Events:
    """A session's live events (:meth:`Session.events`); an async context
    manager and an async iterator."""

    def __init__(self, session: CoreSession, runner: _Runner):
        self._session = session
        self._runner = runner
        self._core: CoreEvents | None = None

    async def __aenter__(self) -> Events:
        self._core = await self._runner.run(self._session.events)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._core is not None:
            await self._runner.run(self._core.aclose)

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> Event:
        if self._core is None:
            raise RuntimeError("enter the stream first: async with session.events() as events")
        item = await self._runner.run(self._core.next)
        if item is None:
            raise StopAsyncIteration
        return item


def _asyncio_invoker() -> Invoker:
    """How an ``async def`` tool runs for an asyncio client: on the loop
    that entered the client, awaited from the portal's Trio loop."""
    loop = asyncio.get_running_loop()

    async def invoke(fn: Callable[..., Awaitable[Any]], args: dict[str, Any]) -> Any:
        async def call() -> Any:
            return await fn(**args)

        future = asyncio.run_coroutine_threadsafe(call(), loop)
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake(_: object) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        try:
            await done.wait()
        except trio.Cancelled:
            future.cancel()
            raise
        return future.result()

    return invoke
