"""The tool calls a connected client takes part in: running the server's
calls on this client's tools, once each, and answering the server's
approval questions about the calls it runs itself (and, 1.4, the
``ask_user`` questions of its server-run ``ask_user`` calls: the answers
go back in the ``tool_decision``, for the question shown and no other).

:class:`ToolCalls` belongs to one :class:`~.protocol_client.ProtocolClient`
(seen through :class:`CallsClient`: this module never imports it) and sees every server event before the UI does (:meth:`ToolCalls.intercept`).
A ``tool_execution_request`` for this client runs in the reader's nursery
and is answered once, however often the server asks (it asks again after a
reconnect when the answer was lost); the answers are kept for that. A
``tool_awaiting_approval`` becomes the same question a local call asks
(:class:`~.approval.Asker`); it is withdrawn when the question is over
elsewhere (decided by another client, the call or request ended, the
connection went). (1.6) A question about an edit that carries its whole
proposed text is shown as a diff in the user's editor when an IDE
companion is connected (the executor's ``ide``): accepting it there
approves, with the text the user changed it to when they did; rejecting it
denies. A ``hook_request`` (1.4: a server asks this client's
BeforeTool/AfterTool hooks about a tool it runs) runs the user's hooks here
and answers with their combined output; it ends with its request.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import msgspec
import trio

from gemini_split.protocol import (
    AgentStarted,
    ClientMessage,
    EditedFile,
    Connection,
    Error,
    Finished,
    HookRequest,
    HookResponse,
    LocalProtocolError,
    ServerEvent,
    ToolAwaitingApproval,
    ToolCallAnswered,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolError,
    ToolDelta,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolProgress,
    TOOL_PROGRESS_LIMIT,
)
from gemini_split.stamping import stamp
from gemini_split.tools.approval import Answer, ApprovalRequest
from gemini_split.tools.base import ToolFailed, ToolKind
from gemini_split.tools.builtin import plan_mode
from gemini_split.transport import ConnectionBroken, ConnectionClosed

from .turn import Turn

log = logging.getLogger(__name__)

#: Answers to tool calls (and approval decisions made here) kept for a
#: server that asks again after a reconnect.
ANSWERS_KEPT = 256
#: What of a ``hook_request``'s input reaches the hooks: gemini-cli's
#: tool-event fields. The common ones (``session_id``, ``cwd``,
#: ``hook_event_name``…) are this client's, never the server's.
HOOK_INPUT_FIELDS = ("tool_name", "tool_input", "tool_response", "mcp_context", "original_request_name")


class CallsClient(Protocol):
    """What :class:`ToolCalls` needs of its client
    (:class:`~gemini_split.client.protocol_client.ProtocolClient`)."""

    #: The client's tools, approvals and questions (a ``ToolExecutor``).
    executor: Any
    #: The user's hooks (a ``userfiles.hooks.HookRunner``), or None.
    hooks: Any
    #: The protocol's state for this connection.
    conn: Connection

    @property
    def observer(self) -> bool: ...

    @property
    def announced(self) -> bool: ...

    @property
    def current_turn(self) -> Turn | None: ...

    async def on_event(self, event: ServerEvent) -> None: ...

    async def send(self, message: ClientMessage | Error) -> None: ...

    async def announce_tools(self) -> None: ...


class _Question:
    """A server-side approval question being asked here."""

    def __init__(self, request_id: str | None):
        #: The request the call belongs to (its end withdraws the question).
        self.request_id = request_id
        self.scope = trio.CancelScope()
        #: Why it was withdrawn, told to the asker so that it ends visibly
        #: ("": the UI shows it already).
        self.withdrawn = ""
        #: Set once the question is off the screen.
        self.asked = trio.Event()


class ToolCalls:
    """The calls of one client's connection (see the module's docstring)."""

    def __init__(self, client: CallsClient):
        self._client = client
        # Local calls by id: running now (with their scope once it runs), or
        # answered (a call runs once).
        self._running: dict[str, trio.CancelScope | None] = {}
        self._answers: OrderedDict[str, ToolExecutionResponse] = OrderedDict()
        # Server-side approval questions being asked here, and the ones
        # answered here (their tool_decided is not news to the UI).
        self._asking: dict[str, _Question] = {}
        self._decided_here: OrderedDict[str, None] = OrderedDict()
        # Hook runs a server asked for, by hook id: (request id, scope).
        self._hook_runs: dict[str, tuple[str | None, trio.CancelScope]] = {}
        # (1.4) Sub-agents' names by (request, agent id), from agent_started:
        # a question about a sub-agent's call says which agent asks.
        self._agents: dict[tuple[str | None, int], str] = {}

    def agent_name(self, request_id: str | None, agent_id: int) -> str:
        """The name of sub-agent ``agent_id`` of ``request_id`` ("" for the
        main agent, or one this client did not see start)."""
        return self._agents.get((request_id, agent_id), f"sub-agent {agent_id}") if agent_id else ""

    async def intercept(self, message: ServerEvent, turn: Turn | None, nursery: trio.Nursery) -> bool:
        """Take the part of ``message`` that concerns the calls, before the
        UI sees it. Returns True when the UI is not to see it: a call this
        client runs (it reports the run itself), or the ``tool_decided`` of a
        question answered here."""
        client = self._client
        if isinstance(message, AgentStarted):
            self._agents[(message.request_id, message.agent_id)] = message.name
            while len(self._agents) > ANSWERS_KEPT:
                del self._agents[next(iter(self._agents))]
        if isinstance(message, ToolExecutionRequest) and self._runs_here(message, turn):
            await self._requested(message, nursery)
            return True
        if isinstance(message, HookRequest):
            if not message.replayed:
                nursery.start_soon(self._run_hooks, message, turn)
            return True
        if isinstance(message, ToolCallAnswered) and message.call_id in self._running \
                and (turn is None or message.request_id != turn.request_id):
            self._abandon(message.call_id)
        if isinstance(message, ToolAwaitingApproval) and self._can_answer(message) \
                and not message.replayed and not client.observer:
            # A replayed question is history (one still waiting is asked
            # again, unlogged, after the replay).
            if message.call_id not in self._asking:  # asked again after a reconnect: one question
                self._asking[message.call_id] = _Question(message.request_id)
                nursery.start_soon(self._answer_approval, message)
        elif isinstance(message, ToolDecided):
            question = self._asking.get(message.call_id)
            if question is not None:
                # Decided elsewhere (the UI shows by whom), expired or cancelled: stop asking.
                self.withdraw([message.call_id], "" if message.decision in ("approve", "approve_always", "deny")
                              else f"the call was {message.decision}")
                # Said once the menu has gone, not drawn over its last lines.
                with trio.move_on_after(5):
                    await question.asked.wait()
            elif message.call_id in self._decided_here:
                return True
        elif isinstance(message, ToolCompleted | ToolError | ToolCallAnswered):
            self.withdraw([message.call_id], "the call ended")
        elif isinstance(message, Finished | Error) and message.request_id is not None or \
                isinstance(message, Error) and message.fatal:
            ended = message.request_id
            self.withdraw([call for call, question in self._asking.items()
                           if question.request_id == ended or ended is None],
                          "the request was interrupted" if isinstance(message, Error) else "the request ended")
            for request_id, scope in self._hook_runs.values():
                if request_id == ended or ended is None:
                    scope.cancel()  # nobody waits for their verdict now
        return False

    def _can_answer(self, question: ToolAwaitingApproval) -> bool:
        """Whether a person here can answer ``question``: an approval when
        there is an asker, ``ask_user`` questions when there is a user."""
        executor = self._client.executor
        return (executor.user if question.questions else executor.asker) is not None

    def withdraw_all(self, reason: str) -> None:
        """Stop asking every question (a question cannot outlive its
        connection: a server that still waits for it asks again once
        reconnected)."""
        self.withdraw(list(self._asking), reason)

    def withdraw(self, call_ids: list[str], reason: str) -> None:
        """Stop asking about these calls (their question is over: decided
        elsewhere, the call or request ended, the connection went).
        ``reason`` is told to the asker ("" when the UI shows it already)."""
        for call_id in call_ids:
            question = self._asking.get(call_id)
            if question is not None and not question.scope.cancel_called:
                question.withdrawn = reason
                question.scope.cancel()

    # --- local calls ---------------------------------------------------------------

    def _runs_here(self, request: ToolExecutionRequest, turn: Turn | None) -> bool:
        """Whether this client runs a tool call: never a replayed one or as
        an observer; its own prompt's calls, and calls handed over to it
        (their client left). A 1.1 server asks only the one client."""
        if request.replayed or self._client.observer:
            return False
        if not self._client.announced:
            return True
        return request.handover or (turn is not None and turn.request_id == request.request_id)

    def _abandon(self, call_id: str) -> None:
        """Another client answered a call handed over to this one too: stop it."""
        scope = self._running.get(call_id)
        if scope is not None:
            scope.cancel()

    async def _requested(self, request: ToolExecutionRequest, nursery: trio.Nursery) -> None:
        """Run a call once, however often the server asks (it asks again
        after a reconnect when it has no answer)."""
        if request.id in self._running:
            return  # the answer goes out when it is done
        answer = self._answers.get(request.id)
        if answer is not None:  # answered, but the answer was lost with the connection
            try:
                await self._client.send(answer)
            except (ConnectionClosed, ConnectionBroken):
                pass
            return
        self._running[request.id] = None
        nursery.start_soon(self._run, request)

    async def _run(self, request: ToolExecutionRequest) -> None:
        client = self._client
        turn = client.current_turn
        ours = turn is not None and turn.request_id == request.request_id
        scope = turn.new_tool_scope() if turn is not None and ours else trio.CancelScope()
        self._running[request.id] = scope
        result: Any = None
        failure = None
        mode = client.executor.policy.mode
        try:
            emit = client.on_event
            if request.agent_id:  # a sub-agent's call: its events say so
                emit = _as_agent(client.on_event, request.agent_id)
                if self._remote_agent_call(request):
                    emit = self._streamed(request, emit)
            with scope:
                result, failure = await client.executor.execute(
                    request.id, request.tool, request.parameters, emit, request_id=request.request_id,
                    agent=self.agent_name(request.request_id, request.agent_id),
                )
        finally:
            self._running.pop(request.id, None)
        if scope.cancelled_caught:
            return  # the server cancelled the request too; nothing to answer
        if client.executor.policy.mode is not mode:  # enter_plan_mode / exit_plan_mode switched it
            with contextlib.suppress(ConnectionClosed, ConnectionBroken):
                await client.announce_tools()  # before the answer: the next model turn sees the new tools
        answer = stamp(ToolExecutionResponse(request_id=request.id, result=result, error=failure))
        self._answers[request.id] = answer
        while len(self._answers) > ANSWERS_KEPT:
            self._answers.popitem(last=False)
        try:
            await client.send(answer)
        except (ConnectionClosed, ConnectionBroken):
            log.info("could not answer %s now: the connection is down (the server asks again)", request.id)
        except LocalProtocolError as exc:  # the request ended meanwhile, or the call is asked again
            log.info("not answering %s now: %s", request.id, exc)

    def _remote_agent_call(self, request: ToolExecutionRequest) -> bool:
        """(1.5) Whether ``request`` calls a remote (Agent2Agent) sub-agent
        this client makes the call of, for a server that takes its text as
        it comes (``tool_progress``)."""
        executor = self._client.executor
        return (self._client.conn.too_old_for(ToolProgress) is None and executor.registry.get(request.tool) is None
                and executor.delegates is not None and executor.delegates(request.tool) is not None)

    def _streamed(self, request: ToolExecutionRequest, emit: Any) -> Any:
        """``emit`` that sends a remote agent's output to the server as
        ``tool_progress`` (the server sends it back, to every client, as the
        sub-agent's text) instead of showing it here."""
        client = self._client

        async def streamed(event: Any) -> None:
            if not isinstance(event, ToolDelta):
                await emit(event)
                return
            text = event.content
            try:
                for at in range(0, len(text), TOOL_PROGRESS_LIMIT):
                    await client.send(stamp(ToolProgress(request_id=request.id,
                                                         content=text[at:at + TOOL_PROGRESS_LIMIT])))
            except (ConnectionClosed, ConnectionBroken, LocalProtocolError) as exc:
                log.info("remote agent output for %s not sent: %s (its report still is)", request.id, exc)

        return streamed

    # --- hooks about the server's calls ---------------------------------------------------

    async def _run_hooks(self, request: HookRequest, turn: Turn | None) -> None:
        """Run the user's hooks a server asks about and send their verdict.
        They stop with the request (its own turn's tools are cancelled with
        it) or at the server's ``timeout``, when it no longer waits."""
        client = self._client
        hooks = client.hooks if client.hooks is not None else client.executor.hooks
        fields = {k: request.input[k] for k in HOOK_INPUT_FIELDS if k in request.input}
        tool = fields.get("tool_name")
        ours = turn is not None and turn.request_id == request.request_id
        scope = turn.new_tool_scope() if ours else trio.CancelScope()
        scope.deadline = trio.current_time() + max(request.timeout, 0.0)
        output: dict[str, Any] = {}
        self._hook_runs[request.hook_id] = (request.request_id, scope)
        try:
            with scope:
                if hooks is not None:
                    outcome = await hooks.fire(request.event, fields, target=tool if isinstance(tool, str) else "")
                    output = outcome.as_output()
        finally:
            self._hook_runs.pop(request.hook_id, None)
        if scope.cancelled_caught:
            return  # the request ended, or the server stopped waiting
        try:
            await client.send(HookResponse(hook_id=request.hook_id, output=output))
        except (ConnectionClosed, ConnectionBroken):
            log.info("could not answer hook %s: the connection is down", request.hook_id)
        except LocalProtocolError as exc:  # the request ended meanwhile
            log.info("not answering hook %s now: %s", request.hook_id, exc)

    # --- the server's calls ------------------------------------------------------------

    async def _answer_approval(self, question: ToolAwaitingApproval) -> None:
        """Ask this client's person about a server-side call (the same
        question as for a local one) and send the decision, unless another
        client decided first (then the question is withdrawn)."""
        client = self._client
        asking = self._asking[question.call_id]
        message: str | None = None
        answer = Answer.NO
        answers: dict[str, str] | None = None
        edited: EditedFile | None = None
        try:
            with asking.scope:
                if client.hooks is not None:  # as before a question about a call run here
                    await client.hooks.fire("Notification", {
                        "notification_type": "ToolPermission", "message": f"{question.tool} needs your approval",
                        "details": {"tool_name": question.tool, "tool_input": dict(question.parameters)}},
                        target="ToolPermission")
                try:
                    if question.tool == plan_mode.EXIT and question.questions:  # a plan, for approval
                        review = plan_mode.PlanReview(path=str(question.parameters.get("plan_path", "")),
                                                      content=question.description)
                        picked = await plan_mode.review_plan(client.executor.user, question.call_id, review)
                        answers = None if picked is None else {"0": picked}
                        answer = Answer.NO if answers is None else Answer.YES
                    elif question.questions:  # ask_user: answers, or dismissed (a deny)
                        answers = await client.executor.user.ask_user(question.call_id, question.questions)
                        answer = Answer.NO if answers is None else Answer.YES
                    else:
                        reviewed = await self._review_in_editor(question)
                        if reviewed is not None:
                            answer, edited = reviewed
                        else:
                            answer = await client.executor.asker.ask(ApprovalRequest(
                                question.call_id, _ServerTool(question.tool, question.kind),
                                dict(question.parameters), question.description, reason=question.reason,
                                always_scope=question.always_scope, executes_later=question.executes_later,
                                agent=self.agent_name(question.request_id, question.agent_id),
                                note=self._not_in_editor(question),
                            ))
                except ToolFailed as refused:  # "No, and tell the model…": the words go with the refusal
                    words = str(refused)
                    message = words.partition(" and said: ")[2] or words
            if asking.scope.cancelled_caught:
                withdrawn = getattr(client.executor.asker, "withdrawn", None)
                if asking.withdrawn and withdrawn is not None:
                    withdrawn(question.tool, asking.withdrawn)
                return
            verdict = {Answer.YES: "approve", Answer.ALWAYS: "approve_always"}.get(answer, "deny")
            decision = ToolDecision(
                call_id=question.call_id, decision=verdict, approved=verdict != "deny",
                always=verdict == "approve_always", message=message,
                parameters_hash=question.parameters_hash if verdict != "deny" else None,
                answers=answers if verdict != "deny" else None,
                edit=edited if verdict == "approve" else None,
            )
            self._decided_here[question.call_id] = None
            while len(self._decided_here) > ANSWERS_KEPT:
                self._decided_here.popitem(last=False)
            self._asking.pop(question.call_id, None)  # its tool_decided must not withdraw it now
            try:
                await client.send(decision)
            except (ConnectionClosed, ConnectionBroken):
                log.info("could not send the decision on %s: the connection is down", question.call_id)
            except LocalProtocolError as exc:  # decided elsewhere meanwhile, or the request ended
                log.info("not sending the decision on %s: %s", question.call_id, exc)
        finally:
            if self._asking.get(question.call_id) is asking:
                del self._asking[question.call_id]
            asking.asked.set()


    def _editor(self, question: ToolAwaitingApproval) -> Any:
        """The IDE companion that can show ``question``'s edit as a diff, or None."""
        ide = getattr(self._client.executor, "ide", None)
        if question.edit is None or ide is None or not ide.can_diff:
            return None
        return ide

    async def _review_in_editor(self, question: ToolAwaitingApproval) -> tuple[Answer, EditedFile | None] | None:
        """(1.6) A server-side edit shown as a diff in the user's editor
        (the file at the question's path under this directory beside the
        server's whole proposed text): ``(YES, None)`` accepted as
        proposed, ``(YES, EditedFile)`` accepted with the user's changes,
        ``(NO, None)`` rejected or closed. None: no editor shows it (no
        companion, no text sent, a path that is not a plain relative one,
        or the editor could not open the diff): the terminal asks."""
        ide = self._editor(question)
        edit = question.edit
        if ide is None or edit is None or edit.content is None:
            return None
        local = _local_path(ide.cwd, edit.path)
        if local is None:
            log.warning("not showing the edit of %r in the IDE: not a relative path", edit.path[:200])
            return None
        try:
            content = await ide.review(local, edit.content)
        except RuntimeError as exc:
            log.warning("the IDE could not show the diff of %r (%s): asking here", edit.path[:200], exc)
            return None
        if content is None:
            return Answer.NO, None
        return Answer.YES, (None if content == edit.content else EditedFile(path=edit.path, content=content))

    def _not_in_editor(self, question: ToolAwaitingApproval) -> str | None:
        """Why an edit the editor would show is asked here instead (its
        text was over the server's budget for review), or None."""
        edit = question.edit
        if self._editor(question) is None or edit is None or edit.content is not None:
            return None
        return (f"Not shown in your editor: the new text of {edit.path} is {edit.size:,} bytes, over the "
                f"{edit.limit:,} bytes the server sends for review.")


def _local_path(cwd: Path, shown: str) -> Path | None:
    """``shown`` (a server workspace's relative ``/``-path) under ``cwd``,
    or None when it is not a plain relative path (absolute, ``..``, empty,
    or with a NUL or backslash)."""
    parts = PurePosixPath(shown).parts
    if not shown or "\0" in shown or "\\" in shown or PurePosixPath(shown).is_absolute() \
            or not parts or any(p in ("..", ".") for p in parts):
        return None
    return Path(cwd).joinpath(*parts)


def _as_agent(emit: Any, agent_id: int) -> Any:
    """``emit`` that marks a call's events as sub-agent ``agent_id``'s."""
    async def marked(event: Any) -> None:
        await emit(msgspec.structs.replace(event, agent_id=agent_id))

    return marked


class _ServerTool(msgspec.Struct, frozen=True):
    """A tool the server runs, as an approval question names it (the UI
    reads ``name`` and ``kind``)."""

    name: str
    kind_name: str = ""

    @property
    def kind(self) -> ToolKind:
        try:
            return ToolKind(self.kind_name)
        except ValueError:
            return ToolKind.EXECUTE  # unknown: shown as the most careful kind

    trusted = False
