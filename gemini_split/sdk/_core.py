"""The SDK's core, on Trio: a client, its sessions, their prompts and events.

Everything here runs on one Trio loop: the caller's own (a Trio program),
or the loop of a :class:`~._portal.Portal` thread (asyncio and blocking
callers); the public classes (``_async.py``, ``_sync.py``) only carry
calls to it. Nothing here is a second protocol client: a client is the
CLI's settings resolution (:func:`gemini_split.app.resolve_client_settings`:
``--server`` addresses, profiles, the local daemon, tokens, settings.json,
context files) and, in embedded mode, its embedded service
(:func:`gemini_split.app.hold_embedded`); a session is one
:func:`~gemini_split.client.session_scope.open_resumed_client` connection,
held open by a task of the client's nursery.

Events are the turn model's changes (:mod:`gemini_split.protocol.turn`,
what every face renders), folded once per session, plus the
:class:`~._questions.Approval` questions; each listener (a prompt's
:class:`CoreReply`, an :class:`CoreEvents` stream) has an unbounded channel
of them: a reply's holds one turn, a stream lives until it is closed.
"""

from __future__ import annotations

import collections
import io
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split._trio_util import single_exceptions
from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.connect import ClientSettings
from gemini_split.client.protocol_client import ProtocolClient, RequestFailed, TurnOutcome
from gemini_split.client.rewinding import Rewinding, Step, files_since, rewind, steps
from gemini_split.client.session_scope import listing_client, open_resumed_client
from gemini_split.environment import Environment
from gemini_split.errors import BadInput, GeminiSplitError
from gemini_split.options import ClientOptions
from gemini_split.protocol import ErrorCode, History, LocalProtocolError, Replay, ServerEvent, SessionInfo
from gemini_split.protocol.turn import ApprovalAsked, Change, Turn, TurnEnded
from gemini_split.transport import TransportError
from gemini_split.userfiles.env_files import load_env_file

from ._functions import FunctionTool, Invoker, PythonTool
from ._questions import Approval, Questions

__all__ = ["Closed", "ConnectConfig", "CoreClient", "CoreEvents", "CoreReply", "CoreSession", "Event",
           "PromptFailed", "open_core"]

log = logging.getLogger("gemini_split.sdk")

Event = Change | Approval
"""What a prompt's reply and a session's event stream yield."""

#: Events a session keeps from its opening until its first
#: :meth:`CoreSession.events` stream (an attach's replay among them).
BACKLOG = 2000
#: Seconds a cancelled wait for a prompt's end waits for the server to
#: confirm the cancel.
CANCEL_GRACE = 5.0
#: How the other clients of a session see this one (the CLI says
#: ``terminal``, an editor ``editor``).
LABEL = "python"


class PromptFailed(GeminiSplitError):
    """A prompt ended in an error (``code``: the protocol's error code,
    e.g. ``model_error``, ``busy``, ``connection_lost``), or could not be
    sent (``forbidden`` on a session watched read-only)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Closed(GeminiSplitError):
    """The client or session was used after it closed: closed by this
    program, or its connection ended for good (the message says why)."""


class ConnectConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Client.connect <gemini_split.sdk.Client.connect>` was
    given (its docstring says what each means)."""

    server: str | None = None
    token: str | None = None
    workspace: str | None = None
    model: str | None = None
    approval_mode: str | None = None
    ca: str | None = None
    insecure: bool = False
    environ: Mapping[str, str] | None = None
    tools: tuple[FunctionTool, ...] = ()
    label: str = LABEL


class _LogLines(io.StringIO):
    """A text stream whose lines go to the SDK's logger (what the CLI
    would print on stderr: warnings about settings, context files…)."""

    def __init__(self, level: int):
        super().__init__()
        self._level = level
        self._partial = ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            if line.strip():
                log.log(self._level, "%s", line)
        return len(text)

    def isatty(self) -> bool:
        return False


def _resolve(config: ConnectConfig) -> tuple[ClientSettings, Any]:
    """The client settings and, in embedded mode, the embedded service (its
    key checked), as ``gemini-split -p`` resolves them in ``workspace``.
    Blocking (files, maybe the local daemon's start): run in a thread."""
    workspace = Path(config.workspace).expanduser() if config.workspace else Path.cwd()
    env = Environment(stdin=io.StringIO(), stdout=_LogLines(logging.INFO), stderr=_LogLines(logging.WARNING),
                      environ=dict(os.environ if config.environ is None else config.environ),
                      cwd=workspace.absolute())
    env = load_env_file(env)
    options = ClientOptions(workspace=str(workspace), server=config.server, token=config.token, ca=config.ca,
                            insecure=config.insecure, model=config.model, approval_mode=config.approval_mode)
    settings = resolve_client_settings(options, env).choosing(label=config.label)
    return settings, embedded_service_for(options, env, settings)


@asynccontextmanager
async def open_core(config: ConnectConfig, invoke: Invoker) -> AsyncIterator[CoreClient]:
    """A :class:`CoreClient` for ``config``, its ``async def`` tools run by
    ``invoke``; its sessions are closed and its embedded service (if any)
    stopped at the end. Raises what the CLI's settings resolution raises
    (:class:`~gemini_split.errors.ConfigurationError` and its subclasses:
    ``MissingApiKey``, ``BadInput``…) and
    :class:`~gemini_split.transport.ConnectFailed`."""
    settings, service = await trio.to_thread.run_sync(_resolve, config)
    with single_exceptions():
        async with hold_embedded(settings, service) as held, trio.open_nursery() as nursery:
            try:
                yield CoreClient(held, nursery, config.tools, invoke)
            finally:
                nursery.cancel_scope.cancel()


class CoreClient:
    """A connected client: where its sessions are, and their nursery."""

    def __init__(self, settings: ClientSettings, nursery: trio.Nursery, tools: Sequence[FunctionTool],
                 invoke: Invoker):
        self.settings = settings
        self._nursery = nursery
        self._tools = tuple(tools)
        self._invoke = invoke

    async def open_session(self, *, resume: str | None = None, session_id: str | None = None, attach: bool = False,
                           watch: bool = False, replay: Replay | None = None) -> CoreSession:
        """A new session (``session_id``: under that id), an earlier one
        (``resume``: its id, ``latest`` or a number as ``--resume`` takes
        them), or one others use (``attach``; ``watch``: read-only).
        Raises :class:`~gemini_split.transport.ConnectFailed` (its subclass
        ``HandshakeFailed`` with code ``unknown_session``…) and
        :class:`~gemini_split.errors.BadInput`."""
        settings = self.settings.choosing(resume=resume, new_session_id=session_id, attach=attach,
                                          role="observer" if watch else "driver", replay=replay)
        session = CoreSession(settings, self._tools, self._invoke, watching=watch)
        with single_exceptions():
            await self._nursery.start(session.hold)
        return session

    async def list_sessions(self) -> tuple[SessionInfo, ...]:
        """This user's sessions where the client connects, newest first.
        Raises :class:`~gemini_split.client.failures.RequestFailed`."""
        async with listing_client(self.settings) as client:
            return await client.list_sessions()


class _Listener:
    """One reader of a session's events: an unbounded channel, what it
    wants of them, and the questions it handed out."""

    def __init__(self, wants: Callable[[Event], bool], *, deny_on_move: bool):
        self._send, self._receive = trio.open_memory_channel(math.inf)
        self.wants = wants
        self.saw_end = False
        #: Whether a question left unanswered is denied when the reader
        #: moves on: a prompt's own questions are; a session stream's may be
        #: another client's to answer.
        self._deny_on_move = deny_on_move
        self._handed: list[Approval] = []

    def offer(self, item: Event) -> bool:
        """Queue ``item`` if wanted; whether it was."""
        return self.wants(item) and self.put(item)

    def put(self, item: Event) -> bool:
        try:
            self._send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        self.saw_end = self.saw_end or isinstance(item, TurnEnded)
        return True

    def close(self) -> None:
        self._send.close()

    async def next(self) -> Event | None:
        """The next event, or None at the end; questions handed out before
        and left unanswered are denied first (``deny_on_move``)."""
        for question in self._handed:
            if not question.answered:
                question.deny()
        self._handed.clear()
        try:
            item = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return None
        if isinstance(item, Approval) and self._deny_on_move:
            self._handed.append(item)
        return item


class CoreSession:
    """One session, on a connection of its own (see the module's docstring)."""

    def __init__(self, settings: ClientSettings, tools: Sequence[FunctionTool], invoke: Invoker, *, watching: bool):
        self.settings = settings
        self.watching = watching
        self._tools = tools
        self._invoke = invoke
        self._turn = Turn()
        self._listeners: list[_Listener] = []
        self._backlog: collections.deque[Event] | None = collections.deque(maxlen=BACKLOG)
        self._questions = None if watching else Questions(self._deliver)
        self._closing = trio.Event()
        self._closed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self.client: ProtocolClient | None = None
        #: Why the connection ended by itself, if it did.
        self.ended: str | None = None
        #: This session's running prompt, if any.
        self.reply: CoreReply | None = None

    @property
    def id(self) -> str:
        assert self.client is not None and self.client.connected is not None
        return self.client.connected.session_id

    @property
    def closed(self) -> bool:
        return self._closing.is_set()

    async def hold(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the session's connection, offer the Python tools, and keep
        it until :meth:`aclose`."""
        try:
            async with open_resumed_client(self.settings, _warn, on_event=self._on_event, asker=self._questions,
                                           on_notice=_warn) as client:
                self.client = client
                await self._offer_tools(client)
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._close_when_over, client)
                    task_status.started()
                    await self._closing.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self._closing.set()
            for listener in self._listeners:
                listener.close()
            self._closed.set()

    async def _close_when_over(self, client: ProtocolClient) -> None:
        """The connection ended for good (reconnecting spent): so does the
        session here, its streams with it."""
        await client.wait_closed()
        self.ended = client.closed_reason or "the connection to the server ended"
        self._closing.set()

    async def aclose(self) -> None:
        """Close the session's connection (a prompt still running is
        cancelled here; the session itself stays on the server, to resume)."""
        self._closing.set()
        await self._closed.wait()

    async def _offer_tools(self, client: ProtocolClient) -> None:
        if not self._tools or self.watching:
            return
        registry = client.executor.registry
        for function in self._tools:
            if registry.get(function.name) is not None:
                raise BadInput(f"a tool named {function.name!r} is built in: give yours another name "
                               "(tool(fn, name=...))")
            registry.register(PythonTool(function, self._invoke))
        if client.tool_choice is None:
            await client.announce_tools()

    async def _on_event(self, event: ServerEvent) -> None:
        for change in self._turn.apply(event, now=trio.current_time()):
            if isinstance(change, ApprovalAsked) and self._questions is not None:
                continue  # asked here as an Approval (Questions), not told twice
            self._deliver(change)

    def _deliver(self, item: Event) -> int:
        """Hand ``item`` to every listener that wants it; how many took it."""
        if self._backlog is not None and not isinstance(item, Approval):
            self._backlog.append(item)  # a question is never kept: it is asked now or not at all
        return sum(listener.offer(item) for listener in list(self._listeners))

    def listen(self, listener: _Listener) -> None:
        if self.closed:
            listener.close()
        else:
            self._listeners.append(listener)

    def forget(self, listener: _Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
        listener.close()

    async def events(self) -> CoreEvents:
        """A stream of every event of this session from now on; the first
        one starts with the events since the session opened (at most
        :data:`BACKLOG`, an attach's replay among them)."""
        if self.closed:
            raise Closed(self._closed_reason())
        stream = CoreEvents(self, self._backlog or ())
        self._backlog = None
        return stream

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._nursery is None or self.closed:
            raise Closed(self._closed_reason())
        self._nursery.start_soon(fn, *args)

    async def steps(self) -> list[Step]:
        """The session's prompts, oldest first (``Step.number`` 1 is the
        first), with the files each changed. Raises ``RequestFailed``."""
        return await steps(self._connected())

    async def rewind(self, to: int | Step, *, files: bool = False) -> Rewinding:
        """Take the conversation back to before prompt ``to`` (a number
        from 1, or a :class:`Step`); ``files``: also put back what the
        agent's edit tools changed since (a file changed by hand since is
        left, and said so in the result). Raises :class:`ValueError` for a
        prompt the session does not have, ``RequestFailed`` (``busy`` while
        a prompt runs)."""
        client = self._connected()
        found = await steps(client)
        number = to.number if isinstance(to, Step) else to
        if not 1 <= number <= len(found):
            raise ValueError(f"prompt {number}: session {self.id} has {len(found)} prompt(s)")
        step = found[number - 1]
        planned = files_since(client, found, step) if files else []
        return await rewind(client, step, conversation=True, files=files, planned=planned)

    async def history(self) -> History:
        """The conversation so far (``messages``) and its prompts
        (``points``). Raises ``RequestFailed``."""
        return await self._connected().get_history()

    def _closed_reason(self) -> str:
        return f"the session's connection ended: {self.ended}" if self.ended else "the session is closed"

    def _connected(self) -> ProtocolClient:
        if self.closed or self.client is None:
            raise Closed(self._closed_reason())
        return self.client


class CoreReply:
    """One prompt: started by the first :meth:`next` (or :meth:`result`),
    its events until its :class:`TurnEnded`."""

    def __init__(self, session: CoreSession, prompt: str):
        if session.watching:
            raise PromptFailed("forbidden", "this session is watched read-only (attach(..., watch=True)): "
                                            "it cannot send prompts")
        self._session = session
        self.prompt = prompt
        self._listener: _Listener | None = None
        #: The last TurnEnded seen (None until the end).
        self.ended: TurnEnded | None = None

    def _start(self) -> _Listener:
        if self._listener is not None:
            return self._listener
        session = self._session
        if session.reply is not None:
            raise PromptFailed("busy", "a prompt is still running in this session: wait for its end (or cancel "
                                       "it) before the next")
        listener = _Listener(self._wants, deny_on_move=True)
        session.start_soon(self._run, listener)
        session.reply, self._listener = self, listener
        session.listen(listener)
        return listener

    def _wants(self, item: Event) -> bool:
        """Questions, notices, and the events of this prompt's own request
        (never another client's answer in the same session)."""
        if isinstance(item, Approval):
            return True
        request_id = getattr(item, "request_id", None)
        client = self._session.client
        return request_id is None or client is not None and request_id == client.turn_request_id

    async def _run(self, listener: _Listener) -> None:
        session = self._session
        client = session.client
        assert client is not None
        outcome, failure = None, None
        try:
            outcome = await client.run_turn(
                self.prompt, model=session.settings.session.model if session.settings.endpoint.server else None,
                context=session.settings.context.message)
        except (RequestFailed, TransportError, LocalProtocolError) as exc:
            failure = (getattr(exc, "code", None) or ErrorCode.CONNECTION_LOST.value, str(exc))
        finally:
            if not listener.saw_end:  # ended without a finished/error event: refused here, connection lost…
                listener.put(_ended_here(outcome, failure, client))
            session.forget(listener)
            if session.reply is self:
                session.reply = None

    async def next(self) -> Event | None:
        """The next event of this prompt, None after its end (see
        :class:`~._questions.Approval` for questions)."""
        item = await self._start().next()
        if isinstance(item, TurnEnded):
            self.ended = item
        return item

    async def result(self) -> TurnEnded:
        """Run the prompt to its end (denying its questions) and return how
        it ended. Cancelled here, it cancels the prompt and waits for its
        end (at most :data:`CANCEL_GRACE` seconds), so that the session
        takes the next prompt at once."""
        try:
            while (item := await self.next()) is not None:
                if isinstance(item, Approval):
                    item.deny()
        except trio.Cancelled:
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + CANCEL_GRACE
                await self.cancel()
                while await self.next() is not None:
                    pass
            raise
        assert self.ended is not None
        return self.ended

    async def text(self) -> str:
        """The answer's final text (after its last tool call, as ``-o json``'s
        ``response``). Raises :class:`PromptFailed` when it ended in an error."""
        ended = await self.result()
        if ended.reason == "error":
            raise PromptFailed(ended.error_code or "error", ended.error_message or "the prompt failed")
        return ended.text

    async def cancel(self) -> None:
        """Cancel the prompt if it runs: local tools stop, the server is
        told; it ends with reason ``cancelled``."""
        session = self._session
        if session.reply is self and session.client is not None:
            await session.client.cancel()


def _ended_here(outcome: TurnOutcome | None, failure: tuple[str, str] | None, client: ProtocolClient) -> TurnEnded:
    """The :class:`TurnEnded` of a prompt that ended with no event saying
    so: refused before it was sent, its connection lost, or its session
    closed while it ran."""
    error = outcome.error if outcome is not None else None
    if error is not None:
        code, message = error.code, error.message
    elif failure is not None:
        code, message = failure
    elif client.closed_reason is not None:
        code, message = ErrorCode.CONNECTION_LOST.value, client.closed_reason
    else:
        code, message = ErrorCode.CANCELLED.value, "the session was closed while the prompt ran"
    return TurnEnded(request_id=outcome.request_id if outcome is not None else None, reason="error", usage=None,
                     api=None, turns=0, retries=0, text="", error_code=code, error_message=message,
                     fatal=bool(error is not None and error.fatal))


class CoreEvents:
    """Every event of a session, live, until closed (or the session is)."""

    def __init__(self, session: CoreSession, earlier: Iterable[Event] = ()):
        self._session = session
        self._listener = _Listener(lambda item: True, deny_on_move=False)
        for item in earlier:
            self._listener.put(item)
        session.listen(self._listener)

    async def next(self) -> Event | None:
        return await self._listener.next()

    async def aclose(self) -> None:
        self._session.forget(self._listener)


def _warn(line: str) -> None:
    log.warning("%s", line)
