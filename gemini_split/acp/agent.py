"""The ACP face: ACP methods in, native sessions driven, updates out.

An :class:`AcpAgent` serves ACP connections (:class:`~.peer.RpcPeer`): the
editor's stdin/stdout for ``gemini-split --acp``, or many WebSocket clients
for ``serve --acp-ws``. It translates each ACP method into the client API
the REPL uses — every ACP session is a native session opened with
:func:`~gemini_split.client.connect.open_client` on the embedded service or
a ``serve`` daemon — and each native event back into ``session/update``
notifications. It is a face, not a second agent loop: history, turns,
cancellation, durability are the native session's.

Methods (ACP protocol version 1): ``initialize``, ``authenticate``,
``session/new``, ``session/load``, ``session/prompt``, ``session/cancel``,
``session/set_mode``. Tool calls that need approval become
``session/request_permission`` (allow once / allow for this session /
reject); file tools and the shell go through the editor when it offers them
(:mod:`.tools`).

Sessions belong to an owner (``local`` on stdio; the token's user on the
bridge). A ``sessionId`` that is not one of the caller's live sessions is an
error, whoever else has it. With ``shared`` (the bridge) a connection may use
a live session of its owner without ``session/new`` (a page reload), and every
connection using a session gets its updates; each session keeps a
:class:`~.ring.Ring` of them for late joiners.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split import __version__
from gemini_split.tools.approval import Answer, ApprovalMode, ApprovalRequest
from gemini_split.client.connect import ClientSettings, open_client
from gemini_split.client.protocol_client import HandshakeFailed, ProtocolClient, RequestFailed
from gemini_split.tools.builtin import ask_user, plan_mode
from gemini_split.tools.base import ToolFailed
from gemini_split.tools.registry import ToolRegistry
from gemini_split.tools.workspace import Workspace
from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import AskUserQuestion, Rewound, ServerEvent
from gemini_split.protocol.turn import (
    HistoryCompressed,
    Notice,
    AgentBegan,
    AgentEnded,
    AgentOutput,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallStarted,
    Turn,
)
from gemini_split.userfiles.settings import MCPServerSettings, approval_mode_refusal
from gemini_split.transport import ConnectFailed

from . import updates as u
from .jsonrpc import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Request,
    RpcError,
)
from .peer import AnswerThen, PeerGone, RpcPeer
from .ring import DEFAULT_BUDGET, Budget, Ring
from . import questions as q
from .tools import client_path, lend_editor_tools

log = logging.getLogger(__name__)

#: The answer to a prompt "/rewind" (gemini-cli's ACP mode has no /rewind).
#: How the other clients of a session see an editor's connection.
EDITOR_LABEL = "editor"

REWIND_NOT_SUPPORTED = ("/rewind is not supported over ACP (gemini-cli's ACP mode does not offer it either). Rewind "
                        "this session with gemini-split's REPL (/rewind), or: gemini-split --resume {session} "
                        "--rewind-to N [--revert-files]")
#: The thought every editor on a session gets when another client rewound it.
REWOUND_NOTE = ("{by} rewound this session to before one of its prompts ({points} left): what is shown above is "
                "no longer all part of the conversation; load the session again to see it as it is.\n")
#: A sub-agent's call shows its last this many steps (a line each).
AGENT_LINES = 40
_encoder = msgspec.json.Encoder()

PROTOCOL_VERSION = 1
"""The ACP protocol version spoken (the schema's ``PROTOCOL_VERSION``)."""

#: gemini-cli's ACP session modes; ``auto_edit`` is accepted for ``autoEdit``.
MODES = (
    ("default", "Default", "Prompts for approval", ApprovalMode.DEFAULT),
    ("autoEdit", "Auto Edit", "Auto-approves edit tools", ApprovalMode.AUTO_EDIT),
    ("yolo", "YOLO", "Auto-approves all tools", ApprovalMode.YOLO),
    ("plan", "Plan", "Read-only mode", ApprovalMode.PLAN),
)
_MODE_BY_ID = {m[0]: m[3] for m in MODES} | {"auto_edit": ApprovalMode.AUTO_EDIT}
_ID_BY_MODE = {m[3]: m[0] for m in MODES}

#: The bridge: seconds a session nobody watches stays open, and how many
#: live sessions one user may have.
IDLE_CLOSE = 600.0
MAX_SESSIONS_PER_OWNER = 32
#: The longest ``cwd`` taken (Linux's PATH_MAX, in bytes): a session keeps it.
PATH_MAX = 4096

#: gemini-cli's authentication method for a Gemini API key (its id, name,
#: description and ``_meta``); ``authenticate`` takes the key from
#: ``_meta["api-key"]``, as gemini-cli does. The only one offered: this agent
#: has no Google login, Vertex AI or gateway.
API_KEY_METHOD = {
    "id": "gemini-api-key",
    "name": "Gemini API key",
    "description": "Use an API key with Gemini Developer API",
    "_meta": {"api-key": {"provider": "google"}},
}

#: Permission options (gemini-cli's option ids).
ALLOW_ONCE = {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"}
ALLOW_ALWAYS = {"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"}
REJECT = {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}
#: A plan's approval (gemini-cli's answers; "No, keep planning" asks the
#: model for a plan the user agrees with). An editor's plain "proceed_once"
#: approves it as gemini-cli's ACP mode does: in default mode.
PLAN_OPTIONS = [
    {"optionId": "autoEdit", "name": plan_mode.APPROVE_AUTO, "kind": "allow_once"},
    {"optionId": "default", "name": plan_mode.APPROVE_MANUAL, "kind": "allow_once"},
    {"optionId": "cancel", "name": "No, keep planning", "kind": "reject_once"},
]
_PLAN_ANSWERS = {"autoEdit": plan_mode.APPROVE_AUTO, "default": plan_mode.APPROVE_MANUAL,
                 "proceed_once": plan_mode.APPROVE_MANUAL, "cancel": ""}


# --- params, checked with msgspec: a wrong one is -32602 ----------------------------


class _Params(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    pass


class InitializeParams(_Params):
    protocol_version: int
    client_capabilities: dict[str, Any] = {}


class NewSessionParams(_Params):
    cwd: str
    mcp_servers: list[dict[str, Any]] = []


class LoadSessionParams(_Params):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = []


class PromptParams(_Params):
    session_id: str
    prompt: list[Any]


class SessionParams(_Params):
    session_id: str


class SetModeParams(_Params):
    session_id: str
    mode_id: str


class AuthenticateParams(_Params):
    method_id: str
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


def _params(request: Request, kind: type[msgspec.Struct]) -> Any:
    try:
        return msgspec.convert(request.params, kind)
    except msgspec.ValidationError as exc:
        raise RpcError(INVALID_PARAMS, f"invalid params for {request.method}: {exc}") from None


# --- one session ---------------------------------------------------------------------


class AcpSession:
    """One native session as ACP sees it: the connected client, the ACP
    connections watching it, the prompt running, the ring of updates."""

    def __init__(self, agent: AcpAgent, owner: str, settings: ClientSettings, workspace: str):
        self.agent = agent
        self.owner = owner
        self.settings = settings
        #: The client's working directory (on the bridge, a path on the client's machine).
        self.workspace = workspace
        self.id = ""
        self.client: ProtocolClient | None = None
        #: Connections that get this session's updates, in joining order.
        self.subscribers: list[RpcPeer] = []
        #: The connection whose prompt is running: its editor runs the tools.
        self.prompter: RpcPeer | None = None
        self.ring = Ring(agent.ring_capacity, agent.budget_of(owner))
        self._diffs: dict[str, tuple[str, str | None, str]] = {}
        #: (1.4) Each running sub-agent's progress lines (its call's content).
        self._agent_lines: dict[int, list[str]] = {}
        self._lent: list[Any] = []
        #: The running prompt, folded: _on_event renders its changes.
        self.turn = Turn()
        self._setting_mode = False
        self._closing = trio.Event()
        self.ended = trio.Event()

    @property
    def mode(self) -> ApprovalMode:
        assert self.client is not None
        return self.client.executor.policy.mode

    def modes(self) -> dict[str, Any]:
        return {
            "currentModeId": _ID_BY_MODE.get(self.mode, "default"),
            "availableModes": [{"id": i, "name": n, "description": d} for i, n, d, mode in MODES
                               if self.mode_refusal(mode) is None],
        }

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Connect (handshake done before ``started``), then hold the
        connection until :meth:`close`. Connection failures before
        ``started`` propagate to the opener; later ones end the session."""
        started = False
        try:
            async with open_client(self.settings, on_event=self._on_event, asker=_PermissionAsker(self),
                                   on_notice=self._notice) as client:
                lend_editor_tools(client.executor.registry, self)
                self._lent = list(client.executor.registry)
                client.executor.policy.listeners.append(self._mode_switched)
                assert client.connected is not None
                self.client = client
                self.id = client.connected.session_id
                started = True
                task_status.started()
                await self._closing.wait()
        except (GeminiSplitError, OSError) as exc:
            if not started:
                raise
            log.warning("ACP session %s ended: %s", self.id, exc)
        finally:
            self.ended.set()
            self.agent.forget(self)

    def close(self) -> None:
        self._closing.set()

    # --- what the tools use (tools.EditorAccess) -----------------------------------

    @property
    def session_id(self) -> str:
        return self.id

    def can(self, capability: str) -> bool:
        peer = self.prompter
        if peer is None:
            return False
        caps = peer.state.get("capabilities") or {}
        if capability == "terminal":
            return caps.get("terminal") is True
        return isinstance(caps.get("fs"), dict) and caps["fs"].get(capability) is True

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        peer = self.prompter
        if peer is None:
            raise PeerGone("no editor is driving this session now")
        return await peer.request(method, params)

    def record_diff(self, call_id: str, path: str, old: str | None, new: str) -> None:
        self._diffs[call_id] = (path, old, new)

    @property
    def local(self) -> bool:
        return self.agent.local_tools

    def resolve(self, shown: str, workspace: Workspace, *, must_exist: bool = False) -> Path:
        if self.agent.local_tools:
            return workspace.resolve_file(shown, must_exist=must_exist)
        return client_path(self.workspace, shown)

    def relative(self, real: Path, workspace: Workspace) -> str:
        return workspace.relative(real) if self.agent.local_tools else os.path.relpath(real, self.workspace)

    async def update(self, update: dict[str, Any], *, skip: RpcPeer | None = None) -> None:
        """Send ``update`` to every connection watching (but ``skip``), and
        keep it for late joiners. A connection that has gone is dropped."""
        params = {"sessionId": self.id, "update": update}
        self.ring.append(params, user_turn=update.get("sessionUpdate") == "user_message_chunk",
                         size=len(_encoder.encode(params)))
        for peer in list(self.subscribers):
            if peer is skip:
                continue
            try:
                await peer.notify("session/update", params)
            except PeerGone:
                self.unsubscribe(peer)

    def subscribe(self, peer: RpcPeer) -> None:
        if peer not in self.subscribers:
            self.subscribers.append(peer)
            peer.state.setdefault("sessions", set()).add(self.id)

    def unsubscribe(self, peer: RpcPeer) -> None:
        if peer in self.subscribers:
            self.subscribers.remove(peer)
        if self.prompter is peer and self.client is not None:
            # The editor running the prompt went away: its tools cannot run.
            self.agent.spawn(self.client.cancel)

    # --- native events → updates --------------------------------------------------

    async def _on_event(self, event: ServerEvent) -> None:
        if isinstance(event, Rewound):
            # ACP has no update that takes a transcript back: a thought
            # saying so (the editor's transcript above it is stale).
            await self.update(u.text_chunk("agent_thought_chunk", REWOUND_NOTE.format(
                by=event.by or "another client", points=event.points)))
            return
        for change in self.turn.apply(event):
            if getattr(change, "agent_id", 0) or isinstance(change, AgentBegan | AgentEnded | AgentOutput):
                await self._on_agent(change)
            elif isinstance(change, TextAdded):
                await self.update(u.text_chunk("agent_message_chunk", change.text))
            elif isinstance(change, ThoughtAdded):
                await self.update(u.text_chunk("agent_thought_chunk", change.text))
            elif isinstance(change, ToolCallStarted):
                await self.update(u.tool_call_start(self.workspace, change.call_id, change.name, change.args))
            elif isinstance(change, ToolCallEnded) and change.error is None:
                await self.update(self._finished_call(change.call_id, change.name, "completed", change.result))
            elif isinstance(change, ToolCallEnded):
                error = change.error
                text = f"{error.message}" + (f" ({error.hint})" if error.hint else "")
                self._diffs.pop(change.call_id, None)
                await self.update({"sessionUpdate": "tool_call_update", "toolCallId": change.call_id,
                                   "status": "failed", "content": [u.text_content(text)],
                                   "rawOutput": {"error": {"code": error.code, "message": error.message}}})
            elif isinstance(change, HistoryCompressed):
                # ACP has no update for it: a thought the editor shows as such.
                await self.update(u.text_chunk("agent_thought_chunk", change.describe()))
            elif isinstance(change, Notice):
                log.warning("session %s: %s (%s)", self.id, change.message, change.code)

    async def _on_agent(self, change: Any) -> None:
        """(1.4) A sub-agent is the tool call that started it (its
        ``parent_call_id``), never the main agent's message. Its text
        streams as ``agent_thought_chunk``s (:func:`.updates.agent_text_chunk`):
        ACP appends a chunk, so each carries only what is new. Its steps —
        its start, the tools it runs, its end — are that call's
        ``tool_call_update`` content, which ACP replaces whole: the last
        :data:`AGENT_LINES` lines, each bounded, sent once a step."""
        agent = self.turn.agents.get(change.agent_id)
        if agent is None:
            return
        if isinstance(change, AgentOutput):
            if not change.thought and change.text:
                await self.update(u.agent_text_chunk(agent.parent_call_id, agent.agent_id, agent.tool_calls,
                                                     change.text))
            return
        lines = self._agent_lines.setdefault(change.agent_id, [])
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": agent.parent_call_id}
        if isinstance(change, AgentBegan):
            update.update(status="in_progress", title=f"{agent.name}: {u.one_line(agent.task, 120)}",
                          _meta={"agentId": agent.agent_id, "agentName": agent.name, "model": agent.model})
            lines.append(f"sub-agent {u.one_line(agent.name)} on {u.one_line(agent.model)}")
        elif isinstance(change, ToolCallStarted):
            lines.append(f"↳ {u.one_line(change.name)}: {u.tool_title(change.name, change.args)}")
        elif isinstance(change, ToolCallEnded):
            lines.append(f"  {'✓' if change.error is None else '✗'} {u.one_line(change.name)}"
                         + (f": {u.one_line(change.error.message)}" if change.error is not None else ""))
        elif isinstance(change, AgentEnded):
            lines.append(f"{agent.outcome}: {u.one_line(agent.summary)}")
            self._agent_lines.pop(change.agent_id, None)
        else:
            return
        del lines[:-AGENT_LINES]
        update["content"] = [u.text_content("\n".join(lines))]
        await self.update(update)

    def _finished_call(self, call_id: str, tool: str, status: str, result: Any) -> dict[str, Any]:
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
        diff = self._diffs.pop(call_id, None)
        if diff is not None:
            update["content"] = [u.diff_content(*diff)]
        elif u.tool_kind(tool) not in ("read",):
            text = u.result_text(result)
            if text:
                update["content"] = [u.text_content(text)]
        return update

    def _notice(self, line: str) -> None:
        log.warning("session %s: %s", self.id or "(opening)", line)
        self.agent.spawn(self.update, u.text_chunk("agent_thought_chunk", f"{line}\n"))

    # --- methods --------------------------------------------------------------------

    async def prompt(self, peer: RpcPeer, blocks: list[Any]) -> dict[str, Any]:
        assert self.client is not None
        try:
            text, attachments = u.prompt_from_blocks(blocks)
        except u.BadPrompt as exc:
            raise RpcError(INVALID_PARAMS, str(exc)) from None
        if self.prompter is not None:
            raise RpcError(INVALID_REQUEST, "a prompt is already running in this session; "
                                            "wait for it or send session/cancel")
        if text.strip().split(" ", 1)[0] == "/rewind":
            # gemini-cli's ACP mode offers /restore, not /rewind: said, not sent to the model.
            await peer.notify("session/update", {"sessionId": self.id, "update": u.text_chunk(
                "agent_message_chunk", REWIND_NOT_SUPPORTED.format(session=self.id))})
            return {"stopReason": "end_turn"}
        self.prompter = peer
        try:
            if not self.local:
                await self._offer_tools_of(peer)
            # The prompter's editor shows what it sent; the others are told.
            await self.update(u.text_chunk("user_message_chunk", text), skip=peer)
            context = self.settings.context.message
            if context is not None:
                context = msgspec.structs.replace(context, approval_mode=self.mode.value)
            outcome = await self.client.run_turn(text, model=self.agent.model, attachments=attachments,
                                                 context=context)
        finally:
            self.prompter = None
        if outcome.error is not None:
            raise RpcError(INTERNAL_ERROR, outcome.error.message, {"code": outcome.error.code})
        assert outcome.finished is not None
        reason = outcome.finished.reason
        stop = {"cancelled": "cancelled", "max_turns": "max_turn_requests"}.get(reason, "end_turn")
        return {"stopReason": stop}

    async def _offer_tools_of(self, peer: RpcPeer) -> None:
        """The bridge: the model gets exactly the tools the prompting
        client can run (its fs and terminal), announced anew when that
        changes; with none, the client is told why."""
        assert self.client is not None
        can = {c: self.can(c) for c in ("readTextFile", "writeTextFile", "terminal")}
        needs = {"read_file": ("readTextFile",), "write_file": ("writeTextFile",),
                 "replace": ("readTextFile", "writeTextFile"), "run_shell_command": ("terminal",),
                 ask_user.NAME: ()}  # the editor's own UI: every editor has one
        tools = [t for t in self._lent if all(can[c] for c in needs.get(t.name, ("-",)) if c in can)
                 and t.name in needs]
        if [t.name for t in tools] != [t.name for t in self.client.executor.registry]:
            self.client.executor.registry = ToolRegistry(tools)
            await self.client.announce_tools()
        if not tools and not peer.state.get("told_toolless"):
            peer.state["told_toolless"] = True
            await peer.notify("session/update", {"sessionId": self.id, "update": u.text_chunk(
                "agent_thought_chunk",
                "This client offers no file access (fs) and no terminal, so the model answers without "
                "tools here. Connect with a client that advertises fs/terminal capabilities to let it "
                "read and edit your files.\n")})

    def _mode_switched(self, mode: ApprovalMode) -> None:
        """Plan mode's tools (or the server of a ``--tools server`` session)
        switched the mode: every editor watching is told."""
        if not self._setting_mode:
            self.agent.spawn(self.update, {"sessionUpdate": "current_mode_update",
                                           "currentModeId": _ID_BY_MODE[mode]})

    def mode_refusal(self, mode: ApprovalMode) -> str | None:
        """Why this session may not switch to ``mode`` (yolo: settings or
        folder trust; auto_edit: folder trust), or None."""
        return approval_mode_refusal(self.settings.loaded_settings, mode.value)

    async def set_mode(self, mode_id: str) -> None:
        mode = _MODE_BY_ID.get(mode_id)
        if mode is None:
            valid = ", ".join(m[0] for m in MODES)
            raise RpcError(INVALID_PARAMS, f"unknown mode {mode_id!r}: the modes are {valid}")
        refused = self.mode_refusal(mode)
        if refused:
            raise RpcError(INVALID_PARAMS, refused)
        assert self.client is not None
        self._setting_mode = True  # said below, once the switch is made
        try:
            self.client.executor.policy.mode = mode
        finally:
            self._setting_mode = False
        await self.update({"sessionUpdate": "current_mode_update", "currentModeId": _ID_BY_MODE[mode]})

    async def replay_history(self, peer: RpcPeer) -> None:
        """The conversation so far, to ``peer`` only, as updates."""
        assert self.client is not None
        try:
            history = await self.client.get_history()
        except RequestFailed as exc:
            raise RpcError(INTERNAL_ERROR, f"could not read the session's history: {exc}") from None
        for update in u.history_updates(self.workspace, history.messages):
            await peer.notify("session/update", {"sessionId": self.id, "update": update})


class _PermissionAsker:
    """The executor's :class:`~gemini_split.tools.approval.Asker`: asks the
    editor that runs the prompt with ``session/request_permission``."""

    def __init__(self, session: AcpSession):
        self.session = session

    async def ask(self, request: ApprovalRequest) -> Answer:
        session = self.session
        tool, args = request.tool, request.args
        content: list[dict[str, Any]] = []
        preview = getattr(tool, "preview", None)
        if preview is not None and session.client is not None:
            try:
                path, old, new = await preview(args, session.client.executor.workspace)
                content.append(u.diff_content(path, old, new))
            except ToolFailed:
                pass
        if not content:
            content.append(u.text_content(request.description))
        if request.executes_later:
            content.append(u.text_content(f"Caution: this edits {request.executes_later}."))
        options = [ALLOW_ONCE, REJECT]
        if request.always_scope and not request.executes_later:
            options.insert(1, ALLOW_ALWAYS)
        tool_call = u.tool_call_start(session.workspace, request.call_id, tool.name, args)
        del tool_call["sessionUpdate"]
        tool_call["content"] = content
        try:
            reply = await session.call("session/request_permission", {
                "sessionId": session.id, "toolCall": tool_call, "options": options,
            })
        except (RpcError, PeerGone) as exc:
            log.info("permission for %s not given: %s", request.call_id, exc)
            return Answer.NO
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) and outcome.get("outcome") == "selected" else None
        answer = {"proceed_once": Answer.YES, "proceed_always": Answer.ALWAYS}.get(chosen, Answer.NO)
        if answer is Answer.ALWAYS and ALLOW_ALWAYS not in options:
            answer = Answer.YES
        if answer is not Answer.NO:
            await session.update({"sessionUpdate": "tool_call_update", "toolCallId": request.call_id,
                                  "status": "in_progress"})
        return answer

    async def approve_plan(self, call_id: str, review: plan_mode.PlanReview) -> str | None:
        """A plan for approval (``exit_plan_mode``): its steps as ACP's
        ``plan`` update to every editor watching, then the plan itself in
        a ``session/request_permission`` to the editor that prompted, with
        gemini-cli's answers (a rejection reads "Plan rejected. No feedback
        provided.": the model asks in its answer what to change)."""
        session = self.session
        await session.update(u.plan_update(review.content))
        tool_call = u.tool_call_start(session.workspace, call_id, plan_mode.EXIT, {"plan_path": review.path})
        del tool_call["sessionUpdate"]
        tool_call["title"] = f"Plan Approval: {q.cut(review.name, q.SHORT_CHARS)}"
        tool_call["content"] = [u.text_content(review.content)]
        tool_call["locations"] = [{"path": review.path}]
        try:
            reply = await session.call("session/request_permission", {
                "sessionId": session.id, "toolCall": tool_call, "options": PLAN_OPTIONS})
        except (RpcError, PeerGone) as exc:
            log.info("plan %s not approved: %s", call_id, exc)
            return None
        outcome = reply.get("outcome") if isinstance(reply, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) and outcome.get("outcome") == "selected" else None
        return _PLAN_ANSWERS.get(chosen) if isinstance(chosen, str) else None

    async def ask_user(self, call_id: str, questions: tuple[AskUserQuestion, ...]) -> dict[str, str] | None:
        """The model's ``ask_user`` questions (:mod:`.questions`): one form
        for an editor with form elicitation, else a permission question
        per choice; the answers, or None when the user dismissed them."""
        session = self.session
        peer = session.prompter
        caps = peer.state.get("capabilities") if peer is not None else None
        try:
            if q.can_elicit(caps):
                reply = await session.call("elicitation/create", {
                    "sessionId": session.id, "toolCallId": call_id, "mode": "form",
                    "message": q.cut("\n".join(x.question for x in questions), q.QUESTION_CHARS),
                    "requestedSchema": q.form_schema(questions)})
                if not isinstance(reply, dict) or reply.get("action") != "accept":
                    return None
                return q.form_answers(questions, reply.get("content"))
            if any(x.type == "text" for x in questions):
                raise q.cannot_type()
            answers: dict[str, str] = {}
            for i, question in enumerate(questions):
                tool_call = u.tool_call_start(session.workspace, call_id, ask_user.NAME, {})
                del tool_call["sessionUpdate"]
                tool_call["title"] = q.cut(f"{question.header}: {question.question}", q.SHORT_CHARS)
                tool_call["content"] = [u.text_content(q.cut(question.question, q.QUESTION_CHARS))]
                reply = await session.call("session/request_permission", {
                    "sessionId": session.id, "toolCall": tool_call, "options": q.permission_options(question)})
                outcome = reply.get("outcome") if isinstance(reply, dict) else None
                chosen = outcome.get("optionId") if isinstance(outcome, dict) \
                    and outcome.get("outcome") == "selected" else None
                answer = q.permission_answer(question, chosen)
                if answer is None:
                    return None
                answers[str(i)] = answer
            return answers
        except (RpcError, PeerGone) as exc:
            log.info("ask_user %s not answered: %s", call_id, exc)
            return None


# --- the agent: sessions of every connection -----------------------------------------


class AcpAgent:
    """Serves ACP connections; owns their sessions (in :meth:`run`'s nursery).

    ``settings`` is the base of every session's client settings (a session's
    ``cwd`` becomes its workspace); ``model`` is sent with each prompt to a
    remote server (None: the server's). With ``shared`` (the bridge),
    sessions outlive the connection that opened them and any connection of
    the same owner may use them.

    ``login(api_key)`` (embedded mode) is an async context manager that
    serves an embedded service with that key and yields its address: what
    ``authenticate`` with a key from the editor uses. Until some service is
    there (the agent started without a key), ``session/new`` and
    ``session/load`` fail with -32000 (authentication required) and
    ``missing_key`` as the message."""

    def __init__(self, settings: ClientSettings, *, model: str | None = None, shared: bool = False,
                 ring_capacity: int = 2000, settings_for_cwd: Callable[[Path], ClientSettings] | None = None,
                 local_tools: bool = True, connect_as: Callable[[AcpSession, RpcPeer], Any] | None = None,
                 login: Callable[[str], AbstractAsyncContextManager[str]] | None = None,
                 missing_key: str | None = None):
        self.settings = settings
        self.login = login
        self.missing_key = missing_key
        #: Tools the client cannot serve run here (``--acp``), or fail (the bridge).
        self.local_tools = local_tools
        #: Seconds a shared session nobody watches stays open (a page reload
        #: comes back well within it).
        self.idle_close = IDLE_CLOSE
        #: Live sessions one owner may have at once (shared mode).
        self.max_sessions_per_owner = MAX_SESSIONS_PER_OWNER
        #: Bytes of updates all the sessions of one owner keep for late
        #: joiners together (:class:`~.ring.Budget`); with at most
        #: ``max_sessions_per_owner`` sessions and a ``cwd`` of at most
        #: :data:`PATH_MAX` each, what one user makes the agent hold is bounded.
        self.max_replay_bytes_per_owner = DEFAULT_BUDGET
        self._budgets: dict[str, Budget] = {}
        #: The bridge: ``connect_as(session, peer)`` → the ``ConnectOptions``
        #: under which the session's native connection proves its owner.
        self.connect_as = connect_as
        self.model = model
        self.shared = shared
        self.ring_capacity = ring_capacity
        self.settings_for_cwd = settings_for_cwd
        self.sessions: dict[tuple[str, str], AcpSession] = {}
        self._nursery: trio.Nursery | None = None
        self._address: str | None = settings.endpoint.server or settings.endpoint.embedded_address

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Own the sessions until cancelled. Their server is the settings'
        (in embedded mode, the service the command holds; without a key, the
        one :meth:`authenticate` opens with ``login``)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if self._address is None and self.login is None:
                raise ConnectFailed("no server address and no embedded service")
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                for session in list(self.sessions.values()):
                    session.close()

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in the background, its failures logged."""
        if self._nursery is None:
            return

        async def quietly() -> None:
            try:
                await fn(*args)
            except (GeminiSplitError, RpcError) as exc:
                log.info("background ACP task failed: %s", exc)

        self._nursery.start_soon(quietly)

    def budget_of(self, owner: str) -> Budget:
        """The replay bytes ``owner``'s sessions share."""
        budget = self._budgets.get(owner)
        if budget is None:
            budget = self._budgets[owner] = Budget(self.max_replay_bytes_per_owner)
        return budget

    def forget(self, session: AcpSession) -> None:
        """``session`` has ended: it is no longer found, and what its ring
        held is given back to its owner's budget."""
        if self.sessions.get((session.owner, session.id)) is session:
            del self.sessions[(session.owner, session.id)]
        session.ring.release()
        budget = self._budgets.get(session.owner)
        if budget is not None and not budget.rings:
            del self._budgets[session.owner]

    async def serve_peer(self, peer: RpcPeer) -> None:
        """Run one connection until it ends; then its sessions (unless
        shared) close."""
        try:
            await peer.run()
        finally:
            for session in list(self.sessions.values()):
                if peer in session.subscribers:
                    session.unsubscribe(peer)
                    if session.subscribers:
                        continue
                    if self.shared:
                        self.spawn(self._close_when_idle, session)
                    else:
                        session.close()

    async def _close_when_idle(self, session: AcpSession) -> None:
        """A shared session nobody watches is closed after ``idle_close``
        seconds (its native session, history and all, stays in the store:
        ``session/load`` brings it back), unless someone joined meanwhile."""
        await trio.sleep(self.idle_close)
        if not session.subscribers and session.prompter is None:
            session.close()

    # --- dispatch ------------------------------------------------------------------

    async def handle(self, request: Request, peer: RpcPeer) -> Any:
        """The JSON-RPC handler of a connection (see :class:`RpcPeer`)."""
        method = _METHODS.get(request.method)
        if method is None:
            raise RpcError(METHOD_NOT_FOUND, f"method not found: {request.method}")
        return await method(self, request, peer)

    def owner_of(self, peer: RpcPeer) -> str:
        principal = getattr(peer.stream, "principal", None)
        return principal.user_id if principal is not None else "local"

    def session_for(self, peer: RpcPeer, session_id: str) -> AcpSession:
        """The caller's live session ``session_id``; joining it if shared.
        Any other id is an error that says nothing of other owners."""
        session = self.sessions.get((self.owner_of(peer), session_id))
        if session is None or (not self.shared and peer not in session.subscribers):
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id[:100]!r}: open one with "
                                               "session/new or session/load")
        return session

    async def join(self, peer: RpcPeer, session: AcpSession) -> None:
        """``peer`` watches ``session`` from now on; a late joiner first gets
        the replay its query asked for (``limit``, ``since``, ``before``),
        then every later update, none missed or sent twice: the replay is
        taken and the peer subscribed at once, and the replay is sent
        before any update that follows it."""
        if peer in session.subscribers or session.ended.is_set():
            return
        replay = peer.state.get("replay")
        kept = session.ring.replay(replay) if replay is not None else []
        session.subscribe(peer)
        if kept:
            try:
                await peer.notify_many("session/update", kept)
            except PeerGone:
                session.unsubscribe(peer)

    def join_on_initialize(self, peer: RpcPeer, session: AcpSession) -> None:
        """``peer`` connected asking to join ``session`` (``?sessionId=``):
        it joins once its ``initialize`` has been answered, so the replay
        never comes before that answer (or at its first use of the session,
        if that comes first)."""
        peer.state["join_on_initialize"] = session

    async def initialize(self, request: Request, peer: RpcPeer) -> dict[str, Any] | AnswerThen:
        params = _params(request, InitializeParams)
        peer.state["capabilities"] = params.client_capabilities
        result = {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": True},
            },
            # The key is ours to get only when the model runs here; with
            # --server it is the server's.
            "authMethods": [API_KEY_METHOD] if self.settings.endpoint.server is None else [],
            "agentInfo": {"name": "gemini-split", "title": "gemini-split", "version": __version__},
        }
        joining = peer.state.pop("join_on_initialize", None)
        if joining is not None:
            return AnswerThen(result, lambda: self.join(peer, joining))
        return result

    async def authenticate(self, request: Request, peer: RpcPeer) -> dict[str, Any]:
        """gemini-cli's ``gemini-api-key`` method: the key in
        ``_meta["api-key"]`` opens the model for the sessions opened from now
        on (those already open keep theirs); without one, the key this
        agent started with, if any. Anything else is -32602; a key that
        cannot be used, -32000."""
        params = _params(request, AuthenticateParams)
        if self.settings.endpoint.server is not None:
            raise RpcError(INVALID_PARAMS, "this agent offers no authentication: the model runs on a server, "
                                           "with that server's key")
        if params.method_id != API_KEY_METHOD["id"]:
            raise RpcError(INVALID_PARAMS, f"unknown authentication method {params.method_id[:100]!r}: "
                                           f"this agent offers {API_KEY_METHOD['id']!r}")
        key = params.meta.get("api-key")
        if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > 1024):
            raise RpcError(INVALID_PARAMS, '_meta["api-key"] must be a non-empty string (the Gemini API key)')
        if key is None:
            if self._address is None:
                raise RpcError(AUTH_REQUIRED, self._auth_missing())
            return {}
        if self.login is None or self._nursery is None:
            raise RpcError(AUTH_REQUIRED, "this agent cannot take a key from the editor")
        try:
            self._address = await self._nursery.start(self._serve_with_key, key.strip())
        except GeminiSplitError as exc:
            raise RpcError(AUTH_REQUIRED, f"the key cannot be used: {exc}") from None
        log.info("authenticated with a Gemini API key from the editor")
        return {}

    async def _serve_with_key(self, api_key: str, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the service ``login`` opens with ``api_key`` until the
        agent ends (sessions opened on it keep it; a later key opens
        another for the sessions after it)."""
        assert self.login is not None
        async with self.login(api_key) as address:
            task_status.started(address)
            await trio.sleep_forever()

    def _auth_missing(self) -> str:
        return self.missing_key or "authentication required: authenticate with method 'gemini-api-key'"

    async def new_session(self, request: Request, peer: RpcPeer) -> dict[str, Any]:
        params = _params(request, NewSessionParams)
        session = await self._open(peer, params.cwd, params.mcp_servers, resume=None)
        return {"sessionId": session.id, "modes": session.modes()}

    async def load_session(self, request: Request, peer: RpcPeer) -> dict[str, Any]:
        params = _params(request, LoadSessionParams)
        _checked_cwd(params.cwd)
        live = self.sessions.get((self.owner_of(peer), params.session_id))
        session = live if live is not None and self.shared else None
        if session is None:
            session = await self._open(peer, params.cwd, params.mcp_servers, resume=params.session_id)
        session.subscribe(peer)
        await session.replay_history(peer)
        return {"modes": session.modes()}

    async def prompt(self, request: Request, peer: RpcPeer) -> dict[str, Any]:
        params = _params(request, PromptParams)
        session = self.session_for(peer, params.session_id)
        await self.join(peer, session)
        return await session.prompt(peer, params.prompt)

    async def cancel(self, request: Request, peer: RpcPeer) -> None:
        params = _params(request, SessionParams)
        session = self.session_for(peer, params.session_id)
        if session.client is not None:
            await session.client.cancel()

    async def set_mode(self, request: Request, peer: RpcPeer) -> dict[str, Any]:
        params = _params(request, SetModeParams)
        session = self.session_for(peer, params.session_id)
        await self.join(peer, session)
        await session.set_mode(params.mode_id)
        return {}

    async def _open(self, peer: RpcPeer, cwd: str, mcp_servers: list[dict[str, Any]],
                    *, resume: str | None) -> AcpSession:
        if mcp_servers and not self.local_tools:
            raise RpcError(INVALID_PARAMS, "the bridge does not start MCP servers for its clients (they would "
                                           "run on the server); configure them in the server's settings")
        path = _checked_cwd(cwd)
        if self.local_tools and not _is_dir(path):
            raise RpcError(INVALID_PARAMS, f"cwd must be the absolute path of a directory: {cwd[:200]!r}")
        if self._address is None:
            raise RpcError(AUTH_REQUIRED, self._auth_missing())
        if self.settings_for_cwd is not None:
            base = self.settings_for_cwd(path)
        elif self.local_tools:
            base = self.settings.with_tools(workspace=path.resolve())
        else:
            base = self.settings  # the client's files are not here: its workspace stays the placeholder
        settings = base.reaching(
            server=self._address, embedded_address=None, reconnect_timeout=(
                base.endpoint.reconnect_timeout if self.settings.endpoint.server is not None else 0),
        ).choosing(resume=resume, label=EDITOR_LABEL).with_tools(
            mcp_servers={**base.tools.mcp_servers, **_mcp_servers(mcp_servers)})
        owner = self.owner_of(peer)
        if self.shared and sum(1 for o, _ in self.sessions if o == owner) >= self.max_sessions_per_owner:
            raise RpcError(INVALID_REQUEST, f"too many open sessions (at most {self.max_sessions_per_owner}); "
                                            "reuse one by its sessionId")
        session = AcpSession(self, owner, settings, os.path.normpath(cwd) if not self.local_tools
                             else str(path.resolve()))
        if self.connect_as is not None:
            session.settings = settings.reaching(connect=self.connect_as(session, peer))
        assert self._nursery is not None
        try:
            await self._nursery.start(session.run)
        except HandshakeFailed as exc:
            if exc.code == "unknown_session":
                raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {resume!r}") from None
            raise RpcError(INTERNAL_ERROR, str(exc), {"code": exc.code}) from None
        except (ConnectFailed, GeminiSplitError) as exc:
            raise RpcError(INTERNAL_ERROR, f"could not open the session: {exc}") from None
        self.sessions[(owner, session.id)] = session
        session.subscribe(peer)
        return session


def _checked_cwd(cwd: str) -> Path:
    """``cwd`` as a path, if it can be one: absolute, without NUL, at most
    :data:`PATH_MAX` bytes (no system takes a longer one, and a session
    keeps it); else -32602."""
    size = len(cwd.encode("utf-8", "surrogatepass"))
    if size > PATH_MAX:
        raise RpcError(INVALID_PARAMS, f"cwd is {size} bytes long: a path has at most {PATH_MAX} (PATH_MAX)")
    path = Path(cwd)
    if not path.is_absolute() or "\x00" in cwd:
        raise RpcError(INVALID_PARAMS, f"cwd must be the absolute path of a directory: {cwd[:200]!r}")
    return path


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name over NAME_MAX, a directory we may not enter…
        return False


def _mcp_servers(servers: list[dict[str, Any]]) -> dict[str, Any]:
    """ACP ``mcpServers`` (stdio, http, sse) as settings' ``MCPServerSettings``."""
    out: dict[str, Any] = {}
    for i, server in enumerate(servers):
        name = server.get("name")
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, f"mcpServers[{i}] has no name")
        try:
            if server.get("type") in ("http", "sse"):
                headers = {h["name"]: h["value"] for h in server.get("headers") or []}
                out[name] = MCPServerSettings(url=server["url"], type=server["type"], headers=headers)
            else:
                env = {e["name"]: e["value"] for e in server.get("env") or []}
                out[name] = MCPServerSettings(command=server["command"], args=list(server.get("args") or []), env=env)
        except (KeyError, TypeError) as exc:
            raise RpcError(INVALID_PARAMS, f"mcpServers[{i}] ({name}) is malformed: missing {exc}") from None
    return out


_METHODS: dict[str, Callable[[AcpAgent, Request, RpcPeer], Any]] = {
    "initialize": AcpAgent.initialize,
    "authenticate": AcpAgent.authenticate,
    "session/new": AcpAgent.new_session,
    "session/load": AcpAgent.load_session,
    "session/prompt": AcpAgent.prompt,
    "session/cancel": AcpAgent.cancel,
    "session/set_mode": AcpAgent.set_mode,
}
