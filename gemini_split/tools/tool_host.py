"""The client's tools, run by a server for a session (``hello.tools =
"server"``): the same registry, executor, approval policy and workspace
confinement as on a client — no second copy of any tool.

:class:`LocalToolHost` implements the server's ``ToolHost`` interface
(``gemini_split.server.session.features.server_tools``) structurally: this module never imports
the server, and the composition root (``gemini_split.app``) hands
:func:`open_tool_host` to it as the factory. A call that needs approval
becomes a ``tool_awaiting_approval`` question (the diff of an edit, the
exact command and working directory of a shell call) handed to the
server's ``ask``; its ``tool_decision`` answers the executor's asker.
The user's BeforeTool/AfterTool hooks are the executor's hooks too: fired
through the server's ``hooks`` (a client runs them and sends back their
combined output), so their verdict is applied by the same code as on a
client (:class:`_WireHooks`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from gemini_split.protocol import (
    APPROVAL_MODES,
    CheckpointChange,
    CheckpointInfo,
    Checkpoints,
    Error,
    ErrorCode,
    FileRevert,
    AskUserQuestion,
    EditProposal,
    ServerEvent,
    ToolAwaitingApproval,
    ToolDecision,
    ToolFailure,
    ToolSpec,
)

from .approval import Answer, ApprovalPolicy, ApprovalRequest, Edited
from .approval_mode import ApprovalMode
from .builtin.plan_mode import EXIT, NobodyToAsk, PlanReview, plan_question
from .plans import PlanPlace
from .executor import Refusal, ToolExecutor
from .local_events import WIRE_TOOL_EVENTS
from .builtin import ask_user
from .base import ToolFailed, ToolKind
from .registry import ToolRegistry, default_tools
from .workspace import Workspace

Ask = Callable[[ToolAwaitingApproval], Awaitable["ToolDecision | str"]]
Emit = Callable[[ServerEvent], Awaitable[None]]
Hooks = Callable[[str, dict[str, Any]], Awaitable["dict[str, Any] | None"]]

#: Server approval modes → the client policy's modes. ``reject_dangerous``
#: is ``default`` with nobody to ask: what would be asked is refused.
_POLICY_MODES = {
    "plan": ApprovalMode.PLAN,
    "reject_dangerous": ApprovalMode.DEFAULT,
    "default": ApprovalMode.DEFAULT,
    "auto_edit": ApprovalMode.AUTO_EDIT,
    "yolo": ApprovalMode.YOLO,
}


#: ``reject_dangerous`` refuses without asking anyone; the refusal names
#: that mode by both its names (the native ``reject_dangerous`` and seed
#: 001's gRPC ``REJECT_DANGEROUS_TOOLS``, which is what most clients of it
#: chose) and the modes that would run the call.
REJECT_DANGEROUS_REFUSAL = Refusal(
    why="there is no one to ask in this session's approval mode, reject_dangerous (gRPC: REJECT_DANGEROUS_TOOLS), "
        "which runs read-only tools only",
    mode_refuses="reject_dangerous refuses",
    hint="do not retry; tell the user which action you need: a session started in approval mode auto_edit or yolo "
         "(gRPC: AUTO_APPROVE), where this server allows it, would run it",
)


class LocalToolHost:
    """The built-in tools of one server-tools session. ``spec`` is a
    ``gemini_split.server.session.features.server_tools.ToolHostSpec`` (read by attribute)."""

    def __init__(self, spec: Any):
        self.spec = spec
        #: Whether a person is asked (else: ``reject_dangerous``'s refusals,
        #: and a plan approved as gemini-cli approves one with nobody to ask).
        self.asks = spec.approval_mode != "reject_dangerous"
        # Who approves a call here is not in this directory: a shell call's
        # "Run in" names it, not "." (the user's own, to them).
        self.workspace = Workspace(spec.workspace, place=f"the server workspace {os.path.realpath(spec.workspace)}")
        self.registry = _offered(spec)
        self.policy = ApprovalPolicy(_POLICY_MODES[spec.approval_mode], policy=spec.policy)
        cap = getattr(spec, "max_approval_mode", "yolo")
        self.policy.refuses = lambda mode: None if _allows(cap, mode.value) else (
            f"approval mode {mode.value} is not allowed on this server (at most {cap})")
        plans = getattr(spec, "plans_dir", None)
        self.plans = PlanPlace(fixed=plans) if plans is not None else None
        #: The session's edit journal (``rewind``): see :class:`ServerEdits`.
        edits_dir = getattr(spec, "edits_dir", None)
        self.edits = ServerEdits(edits_dir, self.workspace) if edits_dir is not None else None
        #: The session's checkpoints (``spec.checkpoints``), or None.
        self.checkpoints: Any = None
        if getattr(spec, "checkpoints", None) is not None:
            from .checkpoints import Checkpoints  # lazy_imports.EDGES

            self.checkpoints = Checkpoints(self.workspace.roots, spec.checkpoints / "history",
                                           spec.checkpoints / "checkpoints")
            self.checkpoints.context = lambda request_id: (spec.session_id, None)

    @property
    def mode(self) -> str:
        """The approval mode calls run in now (``reject_dangerous``: the
        default mode with nobody to ask)."""
        mode = self.policy.mode
        return "reject_dangerous" if mode is ApprovalMode.DEFAULT and not self.asks else mode.value

    @property
    def policy_mode(self) -> str:
        return self.policy.mode.value

    def switch(self, mode: str) -> None:
        """Run calls in ``mode`` from now on (the caller checked the cap)."""
        self.policy.mode = _POLICY_MODES[mode]

    def specs(self) -> list[ToolSpec]:
        """The tools offered in the mode now (see ``ToolExecutor.offered``)."""
        return self._executor(None).offered()

    def _executor(self, asker: Any) -> ToolExecutor:
        executor = ToolExecutor(self.registry, self.workspace, self.policy, asker, refusal=REJECT_DANGEROUS_REFUSAL,
                                events=WIRE_TOOL_EVENTS)
        executor.plans = self.plans
        executor.session_id = getattr(self.spec, "session_id", None)
        return executor

    async def execute(self, call_id: str, name: str, args: Any, *, emit: Emit, ask: Ask,
                      request_id: str | None, hooks: Hooks | None = None,
                      agent: str = "") -> tuple[Any, ToolFailure | None]:
        asker = _WireAsker(ask, self.workspace, request_id) if self.asks else None
        # The events go out on the wire: the server runs these calls.
        executor = self._executor(asker)
        executor.edits_dir = self.edits.directory if self.edits is not None else None
        executor.checkpoints = self.checkpoints
        if hooks is not None:
            executor.hooks = _WireHooks(hooks)
        executor.user = asker  # ask_user's questions go to the attached clients too
        return await executor.execute(call_id, name, args, emit, request_id=request_id, agent=agent)

    def close(self) -> None:
        self.registry.close()

    async def restore(self, checkpoint_id: str | None, apply: bool) -> Checkpoints | Error:
        """The ``restore`` op for this session's workspace (see
        :class:`~gemini_split.protocol.Restore`): the checkpoints, a plan,
        or the files restored; an ``error`` (unstamped, not yet in reply)
        when it cannot be done."""
        if self.checkpoints is None:
            return Error(code=ErrorCode.INVALID_REQUEST.value,
                         message="this server does not checkpoint its tools' edits (general.checkpointing.enabled "
                                 "is not set in its settings)")
        from .checkpoints import CheckpointError, shown_path  # lazy_imports.EDGES

        root = self.workspace.root
        infos = tuple(CheckpointInfo(
            id=c.id, tool=c.tool_call.name, call_id=c.tool_call.call_id, created=c.created,
            file=c.tool_call.args.get("file_path", "") if isinstance(c.tool_call.args.get("file_path"), str) else "",
            request_id=c.request_id) for c in self.checkpoints.list())
        if checkpoint_id is None:
            return Checkpoints(checkpoints=infos)
        try:
            self.checkpoints.get(checkpoint_id)
        except CheckpointError as exc:
            return Error(code=ErrorCode.INVALID_REQUEST.value, message=str(exc))
        try:
            plan = await self.checkpoints.plan(checkpoint_id)
            if apply and plan.changes:
                await self.checkpoints.restore(plan)
        except CheckpointError as exc:
            return Error(code=ErrorCode.CHECKPOINT_FAILED.value, message=str(exc))
        changes = tuple(CheckpointChange(path=shown_path(c.path, root), action=c.action, by_hand=c.by_hand)
                        for c in plan.changes)
        return Checkpoints(checkpoints=tuple(i for i in infos if i.id == checkpoint_id), changes=changes,
                           restored=apply)


class ServerEdits:
    """What a server-tools session's ``rewind`` asks of its edit journal
    (``tools/edit_journal.py``): how many files a step changed, and putting
    them back. A file changed since the agent's edit is skipped, said in
    the result (nobody is asked: the ``revert_files`` flag is the answer)."""

    def __init__(self, directory: Any, workspace: Workspace):
        self.directory = directory
        self.workspace = workspace

    def count(self, request_ids: list[str]) -> int:
        from .edit_journal import EditJournal  # lazy_imports.EDGES

        return EditJournal(self.directory).count(request_ids)

    def revert(self, request_ids: list[str], *, from_call: str | None = None) -> list[FileRevert]:
        from .edit_journal import EditJournal  # lazy_imports.EDGES

        journal = EditJournal(self.directory)
        done = journal.revert(journal.plan(request_ids, self.workspace, from_call=from_call), self.workspace)
        return [FileRevert(path=o.path, action=o.action, reason=o.reason) for o in done]


def open_tool_host(spec: Any) -> LocalToolHost:
    """The ``ToolHostFactory`` the composition root gives the server."""
    return LocalToolHost(spec)


def _allows(cap: str, mode: str) -> bool:
    """Whether ``mode`` is no more permissive than ``cap``."""
    return mode in APPROVAL_MODES and APPROVAL_MODES.index(mode) <= APPROVAL_MODES.index(cap)


def _offered(spec: Any) -> ToolRegistry:
    """The built-in tools (no ``save_memory``: the server's own context
    files are nobody's memory; ``ask_user`` unless nobody is asked, in
    ``reject_dangerous``) minus ``core_tools`` / ``exclude_tools``; which
    of them the model is offered is the approval mode's (plan mode: the
    read-only ones, the plans' writes, ``exit_plan_mode``). ``web_fetch``
    reaches public addresses and ``spec.web_fetch_allow`` only: it runs on
    the server's network, not the user's."""
    from .builtin.web_guard import AddressGuard

    guard = AddressGuard(getattr(spec, "web_fetch_allow", ()))
    tools = default_tools(sandbox=spec.sandbox, web_guard=guard)
    if spec.approval_mode != "reject_dangerous":  # someone attached can answer it
        tools.register(ask_user.AskUserTool())
    core = set(spec.core_tools) if spec.core_tools is not None else None
    offered = ToolRegistry(
        tool for tool in tools
        if (core is None or tool.name in core) and tool.name not in spec.exclude_tools
    )
    offered.closers = tools.closers
    return offered


class _WireHooks:
    """The executor's hooks for server-side calls: BeforeTool and AfterTool
    go to the client that runs the user's hooks (the server's ``hooks``),
    and its combined output comes back as the outcome the executor applies.
    Other events (Notification) are the client's to fire: nothing here."""

    def __init__(self, hooks: Hooks):
        self.ask_client = hooks

    async def fire(self, event: str, fields: dict[str, Any], target: str | None = None) -> Any:
        from gemini_split.userfiles.hooks import TOOL_EVENTS, HookOutcome  # lazy_imports.EDGES

        if event not in TOOL_EVENTS:
            return HookOutcome()
        output = await self.ask_client(event, fields)
        return HookOutcome.from_output(event, output, "the user's hooks")


class _WireAsker:
    """The executor's asker for server-side calls: the question goes to
    every attached client, the first decision comes back. (1.6) An edit's
    question carries its file's workspace-relative path and whole proposed
    text (``edit``), so a client may show it as a diff in the user's
    editor; an approval carrying the user's changed text (the session
    checked it is for that path and within its budget) is answered
    :class:`~.approval.Edited`: that text is what the tool writes."""

    #: The executor gives :attr:`ApprovalRequest.edit` for edits.
    reviews_edits = True

    def __init__(self, ask: Ask, workspace: Workspace, request_id: str | None):
        self.ask_clients = ask
        self.workspace = workspace
        self.request_id = request_id

    async def ask(self, request: ApprovalRequest) -> Answer | Edited:
        name = request.tool.name
        command = request.args.get("command") if request.tool.kind is ToolKind.EXECUTE else None
        cwd = None
        if isinstance(command, str):
            try:
                cwd = str(self.workspace.resolve(request.args.get("dir_path") or "."))
            except ToolFailed:
                cwd = str(self.workspace.root)
        decision = await self.ask_clients(ToolAwaitingApproval(
            request_id=self.request_id, call_id=request.call_id, tool=name, parameters=request.args,
            description=request.description, kind=request.tool.kind.value,
            command=command if isinstance(command, str) else None, cwd=cwd,
            reason=request.reason, always_scope=request.always_scope, executes_later=request.executes_later,
            edit=None if request.edit is None else EditProposal(path=request.edit.path, content=request.edit.after),
        ))
        if isinstance(decision, str):  # nobody decided: the server says why
            raise ToolFailed("not_approved", f"{name} was not approved, so it did not run: {decision}",
                             "do not retry; tell the user which action you need so they can approve it")
        verdict = decision.verdict
        if verdict == "approve" and decision.edit is not None and request.edit is not None:
            return Edited(decision.edit.content)
        if verdict == "approve":
            return Answer.YES
        if verdict == "approve_always":
            return Answer.ALWAYS if request.always_scope else Answer.YES
        words = (decision.message or "").strip()
        if words:
            raise ToolFailed("refused", f"the user declined to run {name} and said: {words[:2000]}",
                             "do what the user said instead")
        return Answer.NO

    async def approve_plan(self, call_id: str, review: PlanReview) -> str | None:
        """``exit_plan_mode`` on the server: the plan goes to every attached
        client that can answer questions (1.4, capability ``ask_user``) as
        ``tool_awaiting_approval`` of ``exit_plan_mode``, kind ``plan``, its
        text the description and gemini-cli's approval question the one
        question (:func:`~.builtin.plan_mode.plan_question`); the first
        client's answer comes back (None: dismissed). Raises
        :class:`~.builtin.plan_mode.NobodyToAsk` when no client can answer."""
        decision = await self.ask_clients(ToolAwaitingApproval(
            request_id=self.request_id, call_id=call_id, tool=EXIT, parameters={"plan_path": review.path},
            description=review.content, kind="plan", questions=(plan_question(review.content),),
        ))
        if isinstance(decision, str):  # nobody answered: the server says why
            raise NobodyToAsk(decision)
        if decision.verdict == "deny":
            return None
        answer = (decision.answers or {}).get("0")
        return answer if isinstance(answer, str) else ""

    async def ask_user(self, call_id: str, questions: tuple[AskUserQuestion, ...]) -> dict[str, str] | None:
        """``ask_user`` on the server: the questions go to every attached
        client that can answer them (1.4, capability ``ask_user``), bound
        to exactly these questions; the first client's answers come back
        (None: dismissed)."""
        parameters = {"questions": [msgspec.to_builtins(q) for q in questions]}
        decision = await self.ask_clients(ToolAwaitingApproval(
            request_id=self.request_id, call_id=call_id, tool=ask_user.NAME, parameters=parameters,
            description="Asking user: " + ", ".join(q.question for q in questions), kind=ToolKind.READ.value,
            questions=questions,
        ))
        if isinstance(decision, str):  # nobody answered: the server says why
            raise ToolFailed("no_user_present", f"{ask_user.NO_USER} ({decision})", ask_user.NO_USER_HINT)
        if decision.verdict == "deny":
            return None
        answers = decision.answers or {}
        return {k: v for k, v in answers.items() if isinstance(v, str)}
