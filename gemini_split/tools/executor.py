"""Runs one requested tool call: validate, approve, run, report.

The executor is where every safety check meets: argument validation against
the tool's schema, the approval policy, workspace confinement (inside the
tools), and the translation of any failure into a :class:`ToolFailure` the
model can act on. It reports progress to the UI as protocol events
(``tool_started``, ``tool_delta``, ``tool_completed``, ``tool_error``), the
same vocabulary a server that runs tools itself would send, made with the
local types of :mod:`.local_events` unless told to report on the wire.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from gemini_split import telemetry
from gemini_split.agent_invocation import with_prompt
from gemini_split.protocol import ServerEvent, ToolFailure, ToolSpec

from .approval import (
    Answer,
    ApprovalMode,
    ApprovalPolicy,
    ApprovalRequest,
    Asker,
    Decision,
    Edited,
    ProposedEdit,
    executes_later,
    seen_as,
)
from .local_events import LOCAL_TOOL_EVENTS, ToolEvents
from .builtin import ask_user
from .builtin.filesystem import edited_args, proposed_edit
from .base import Tool, ToolContext, ToolFailed, ToolKind
from .plans import PLAN_WRITE_TOOLS, PlanPlace, ensure_directory, is_plan_file, resolve_plan_path
from .registry import ToolRegistry
from .workspace import Workspace

log = logging.getLogger(__name__)

EventSink = Callable[[ServerEvent], Awaitable[None]]


AfterRun = Callable[[str, dict[str, Any], Any], Awaitable[Any]]


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """How a call that needs approval is refused when nobody can be asked,
    in the words of the face that runs the executor, so the model and the
    user read the mode they really chose (``REJECT_DANGEROUS_TOOLS`` over
    gRPC, ``mcp serve --approval-mode default``), not a mode that asks."""

    #: Why nobody is asked, naming the mode as the user set it.
    why: str
    #: Replaces "<mode> approval mode asks before" in the policy's reason,
    #: e.g. "approval mode default refuses" ("": the reason as it is).
    mode_refuses: str
    #: How the user can allow the call.
    hint: str


#: The one-shot command line's refusal (no terminal, nobody to ask).
ONE_SHOT_REFUSAL = Refusal(
    why="there is no one to ask (non-interactive mode)",
    mode_refuses="",
    hint="do not retry; tell the user which action you need so they can run it with --approval-mode or --allowed-tools",
)


class _CallSeen:
    """What :meth:`ToolExecutor.execute` learnt of one call, for telemetry."""

    __slots__ = ("began", "tool", "args", "decision", "modified")

    def __init__(self, began: float):
        self.began = began
        self.tool: Tool | None = None
        self.args: dict[str, Any] | None = None
        self.decision: str | None = None
        #: The text the user changed an edit to before approving it (the
        #: model is told, as gemini-cli tells it), or None.
        self.modified: str | None = None


_CANCELLED = ToolFailure(code="cancelled", message="cancelled by the user")
#: The tools that exist only where plans can be kept.
_PLANNING_TOOLS = frozenset({"enter_plan_mode", "exit_plan_mode"})


def modified_note(tool_name: str, content: str) -> str:
    """gemini-cli's words to the model when the user changed an edit's
    text before approving it (``modified_by_user``)."""
    if tool_name == "replace":
        return f"The confirmation step modified the `new_string` content to be: {content}."
    return f"User modified the `content` to be: {content}"


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        workspace: Workspace,
        policy: ApprovalPolicy | None = None,
        asker: Asker | None = None,
        after_run: AfterRun | None = None,
        refusal: Refusal = ONE_SHOT_REFUSAL,
        events: ToolEvents = LOCAL_TOOL_EVENTS,
    ):
        self.registry = registry
        self.workspace = workspace
        self.policy = policy or ApprovalPolicy()
        self.asker = asker
        #: The words of a refusal when ``asker`` is None.
        self.refusal = refusal
        #: ``await after_run(tool_name, args, result)`` → the result the model
        #: gets (e.g. with newly found subdirectory context appended).
        self.after_run = after_run
        #: The user's hooks (a ``userfiles.hooks.HookRunner``): BeforeTool and
        #: AfterTool around each call that may run, Notification when the
        #: user is asked. None: no hooks.
        self.hooks: Any = None
        #: The classes a call's progress is reported with: local ones for
        #: this process's UI, the wire ones where a server runs the call.
        self.events = events
        #: Where the edit tools' changes are journaled for ``/rewind``
        #: (:mod:`.edit_journal`, one directory per session); None: not.
        self.edits_dir: Any = None
        #: The ``seq`` of a request's ``request_started`` (journaled with
        #: its edits), when known.
        self.request_seq: Callable[[str | None], int | None] = lambda request_id: None
        #: ``general.checkpointing.enabled``: a ``tools.checkpoints.Checkpoints``
        #: that snapshots the workspace before a file-modifying call runs.
        #: None: no checkpoints (and no git is ever started for them).
        self.checkpoints: Any = None
        #: The session the calls belong to (telemetry's ``session.id``), once known.
        self.session_id: str | None = None
        #: Who answers ``ask_user`` (a ``tools.ask_user.UserAsker``: the
        #: REPL, an editor, the clients of a server-run call); None: nobody
        #: is present (a one-shot run), whatever ``asker`` is.
        self.user: Any = None
        #: ``delegates(name)`` → the tool that runs a call of ``name`` the
        #: registry does not have (a remote sub-agent's call, which the
        #: server asks for by the agent's name: ``tools/a2a.py``),
        #: or None; not offered in ``tool_discovery``. None: no such calls.
        self.delegates: Callable[[str], Tool | None] | None = None
        #: (1.5) The sub-agents' own MCP tools (``tools/agent_mcp.py``):
        #: agent name → tool name → tool. Not in ``registry`` (never
        #: offered to the main model); run only for a call from that agent.
        self.agent_tools: dict[str, dict[str, Tool]] = {}
        #: The IDE companion (a ``tools.ide.IdeCompanion``): edits that
        #: need approval are reviewed as diffs in its editor while it is
        #: connected. None: there is none.
        self.ide: Any = None
        #: Where plan mode keeps this session's plans (:mod:`.plans`); None:
        #: no plan mode here (``general.plan.enabled: false``, a front end
        #: whose files are elsewhere), and no planning tools are offered.
        self.plans: PlanPlace | None = None

    def plans_dir(self) -> Any:
        """This session's plans directory (a ``Path``; it may not exist
        yet), or None."""
        return self.plans.directory(self.session_id) if self.plans is not None else None

    def offered(self) -> list[ToolSpec]:
        """The tools the model is offered now, in the current approval
        mode: the registry's, less those the policy refuses outright
        (gemini-cli leaves them out of its registry: shell commands in plan
        mode, ``exit_plan_mode`` outside it) and the planning tools where
        there is no plan mode; in plan mode ``write_file`` and ``replace``
        say they write plans only (gemini-cli's words)."""
        plans = self.plans_dir()
        if plans is not None:
            self.policy.allow_plans(plans)
        interactive = self.asker is not None
        planning = self.policy.mode is ApprovalMode.PLAN
        specs = []
        for tool in self.registry:
            if (tool.name in _PLANNING_TOOLS and plans is None) or not self.policy.offers(tool, interactive=interactive):
                continue
            spec = tool.spec()
            if planning and tool.name in PLAN_WRITE_TOOLS:
                spec = msgspec.structs.replace(spec, description=(
                    f"ONLY FOR PLANS: {spec.description.rstrip('.')}. You are currently in Plan Mode and may ONLY "
                    f"use this tool to write or update plans (.md files) in the plans directory: {plans}/. You "
                    "cannot use this tool to modify source code directly."))
            specs.append(spec)
        return specs

    async def execute(
        self,
        call_id: str,
        tool_name: str,
        args: Any,
        emit: EventSink,
        *,
        request_id: str | None = None,
        agent: str = "",
    ) -> tuple[Any, ToolFailure | None]:
        """Run one call. Returns ``(result, None)`` or ``(None, failure)``.
        ``agent``: the sub-agent that calls (its name; "" the main agent),
        for the approval question to say who asks.

        Never raises for a tool's failure; Trio cancellation propagates (the
        caller reports a cancelled call).

        ``tool_started`` goes out once the call may run (after its approval:
        a UI never shows a call running while it waits for a yes), or just
        before the ``tool_error`` of a call refused or failed before that."""
        params = args if isinstance(args, dict) else {}
        started: list[bool] = []

        async def start() -> None:
            if not started:
                started.append(True)
                await emit(self.events.started(request_id=request_id, call_id=call_id, tool=tool_name,
                                               parameters=params))

        seen = _CallSeen(trio.current_time())
        try:
            result = await self._run(call_id, tool_name, args, emit, request_id, start, seen, agent)
        except ToolFailed as failed:
            failure = failed.to_failure()
        except trio.Cancelled:
            self._record(seen, tool_name, args, request_id, failure=_CANCELLED)
            with trio.CancelScope(shield=True):
                await start()
            await self._report_cancelled(emit, call_id, tool_name, request_id)
            raise
        except Exception as exc:  # a tool bug must not kill the session
            log.exception("tool %s failed unexpectedly", tool_name)
            failure = ToolFailure(code="internal_error", message=f"{tool_name} failed: {type(exc).__name__}: {exc}")
        except BaseExceptionGroup as group:
            # A tool's nursery may deliver the cancellation as a group of Cancelled.
            if group.split(trio.Cancelled)[1] is None:
                self._record(seen, tool_name, args, request_id, failure=_CANCELLED)
                with trio.CancelScope(shield=True):
                    await start()
                await self._report_cancelled(emit, call_id, tool_name, request_id)
            raise
        else:
            self._record(seen, tool_name, args, request_id, result=result)
            await emit(self.events.completed(request_id=request_id, call_id=call_id, tool=tool_name, result=result))
            return result, None
        self._record(seen, tool_name, args, request_id, failure=failure)
        await start()
        await emit(self.events.error(request_id=request_id, call_id=call_id, tool=tool_name, error=failure))
        return None, failure

    def _record(self, seen: _CallSeen, tool_name: str, args: Any, request_id: str | None, *,
                result: Any = None, failure: ToolFailure | None = None) -> None:
        """The call for telemetry (``gemini_cli.tool_call``): how it was
        decided, how long it took, how it ended."""
        recorder = telemetry.current()
        if not recorder.enabled:
            return
        server = getattr(seen.tool, "server", None)
        recorder.tool_call(
            tool_name, seen.args if seen.args is not None else args,
            duration_ms=int((trio.current_time() - seen.began) * 1000), success=failure is None,
            decision=seen.decision, prompt_id=request_id, session_id=self.session_id,
            error=failure.message if failure is not None else None,
            error_type=failure.code if failure is not None else None,
            mcp_server_name=getattr(server, "name", None),
            content_length=len(result) if isinstance(result, str) else None)

    def _executes_later(self, tool: Tool, args: dict[str, Any]) -> str | None:
        """What the file an edit targets runs later, if anything (see
        :func:`executes_later`), judged on the path as resolved now — so a
        symlink ``hooks -> .git/hooks`` does not hide it. A path that does
        not resolve is left to the tool, which refuses it."""
        if tool.kind is ToolKind.READ or not isinstance(args.get("file_path"), str):
            return None
        shown = args["file_path"]
        try:
            real = self.workspace.resolve(shown)
        except ToolFailed:
            return executes_later(shown)
        return executes_later(self.workspace.relative(real)) or executes_later(shown)

    async def _report_cancelled(self, emit: EventSink, call_id: str, tool_name: str, request_id: str | None) -> None:
        with trio.CancelScope(shield=True):
            await emit(self.events.error(
                request_id=request_id, call_id=call_id, tool=tool_name,
                error=ToolFailure(code="cancelled", message="cancelled by the user"),
            ))

    async def _run(self, call_id: str, tool_name: str, args: Any, emit: EventSink, request_id: str | None,
                   start: Callable[[], Awaitable[None]], seen: _CallSeen, agent: str = "") -> Any:
        tool = self.agent_tools.get(agent, {}).get(tool_name) if agent else None
        if tool is None:
            tool = self.registry.get(tool_name)
        if tool is None:
            owner = next((name for name, tools in self.agent_tools.items() if tool_name in tools), None)
            if owner is not None:
                # A server asked for it from an agent it does not belong to.
                who = f"sub-agent {agent}" if agent else "the main agent"
                raise ToolFailed("refused", f"{tool_name} is a tool of sub-agent {owner}'s own MCP servers: "
                                 f"{who} may not call it", "do not retry this tool")
        if tool is None and self.delegates is not None:
            tool = self.delegates(tool_name)
        seen.tool = tool
        if tool is None and tool_name == ask_user.NAME and self.user is None:
            # Not offered with nobody to ask (as gemini-cli): a call anyway
            # gets gemini-cli's non-interactive answer, so the model goes on.
            raise ask_user.no_user_failure()
        if tool is None and not self.registry.names():
            raise ToolFailed("no_tools", "no tools are available in this session",
                             "answer from what you know, without tools")
        if tool is None:
            raise ToolFailed(
                "unknown_tool",
                f"this client has no tool named '{tool_name}'",
                "available tools: " + ", ".join(self.registry.names()),
            )
        args = tool.validate(args)
        args, plan_file = self._plan_target(tool, args)
        verdict, args = await self._approve(call_id, tool, args, seen, agent)
        if self.hooks is not None:
            rewritten = await self._before_tool(tool, args)
            if rewritten != args:
                # What runs is what the policy decides on (its deny rules, its
                # network allowance) and what the user approved: the
                # rewritten arguments are decided (and asked about: a question
                # of its own, a server takes one decision per call id) again.
                verdict, args = await self._approve(f"{call_id}.rewritten", tool, rewritten, seen, agent)

        checkpoint = target = None
        if self.checkpoints is not None and not plan_file:  # a plan is no project file
            checkpoint, target = await self._checkpoint(call_id, tool, args, request_id)

        await start()

        async def output(text: str, stream: str = "stdout") -> None:
            await emit(self.events.delta(request_id=request_id, call_id=call_id, content=text, stream=stream))

        extra: dict[str, Any] = {"policy": self.policy, "user": self.user, "plans_dir": self.plans_dir()}
        if verdict.decision is Decision.ALLOW and verdict.network:
            extra["network"] = True  # allowNetwork rules allowed exactly this command
        ctx = ToolContext(workspace=self.workspace, emit_output=output, call_id=call_id, extra=extra)
        journal, noted = (None, None) if plan_file else await self._before_edit(tool, args)
        result = await tool.run(args, ctx)
        if seen.modified is not None and isinstance(result, str):
            result = f"{result} {modified_note(tool.name, seen.modified)}"
        if noted is not None:
            try:
                await trio.to_thread.run_sync(functools.partial(
                    journal.after, self.workspace, request_id or "", call_id, noted, seq=self.request_seq(request_id)))
            except OSError as exc:
                log.warning("the edit of %s is not journaled for /rewind: %s", args["file_path"], exc)
        if checkpoint is not None:
            await self.checkpoints.after(checkpoint, target)
        if self.after_run is not None:
            result = await self.after_run(tool_name, args, result)
        if self.hooks is not None:
            result = await self._after_tool(tool, args, result)
        return result

    def _plan_target(self, tool: Tool, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """In plan mode, a write's ``file_path`` resolved as gemini-cli
        resolves a plan's (:func:`~.plans.resolve_plan_path`: ``x.md`` is
        the plans directory's), so the policy decides on the real path (it
        allows the plans directory's ``.md`` files only); and whether it is
        a plan file (its directory is then created and joins the
        workspace). Any other call, or a path that is no plan's, as it is."""
        plans = self.plans_dir()
        if plans is None or tool.name not in PLAN_WRITE_TOOLS or self.policy.mode is not ApprovalMode.PLAN \
                or not isinstance(args.get("file_path"), str):
            return args, False
        self.policy.allow_plans(plans)
        try:
            path = resolve_plan_path(args["file_path"], plans, self.workspace.root)
        except ToolFailed:
            return args, False  # not in the plans directory: the policy refuses it
        args = {**args, "file_path": str(path)}
        if not is_plan_file(path, plans):
            return args, False
        self.workspace.add_root(ensure_directory(plans))
        return args, True

    async def _approve(self, call_id: str, tool: Tool, args: dict[str, Any], seen: _CallSeen,
                       agent: str = "") -> tuple[Any, dict[str, Any]]:
        """The approval policy's verdict on a call, asking the user (naming
        the sub-agent ``agent`` that calls, if any) when it says so, and the
        arguments to run it with: an edit reviewed in the IDE's editor
        (:attr:`ide`) runs with the content accepted there. Raises
        :class:`ToolFailed` (``refused``) for a deny, a question nobody can
        answer, and the user's no. Notes in ``seen`` (telemetry) the
        arguments decided on and the decision: a hook's rewrite, approved
        again, replaces both, so the record tells what ran and why."""
        tool_name = tool.name
        seen.args = args
        later = self._executes_later(tool, args)
        verdict = self.policy.check(tool, args, executes_later=later, interactive=self.asker is not None, agent=agent)
        # gemini-cli's decisions: refused → reject, "allow always" → auto_accept, else accept.
        seen.decision = "reject" if verdict.decision is Decision.DENY or (
            verdict.decision is Decision.ASK and self.asker is None) else "accept"
        if verdict.decision is Decision.DENY:
            raise ToolFailed(
                "refused",
                f"{tool_name} is not allowed by the approval policy" + (f": {verdict.reason}" if verdict.reason else ""),
                "do not retry; ask the user",
            )
        if verdict.decision is Decision.ASK:
            if self.asker is None:
                refusal, reason = self.refusal, verdict.reason
                if reason and refusal.mode_refuses:
                    mode = getattr(self.policy.mode, "value", self.policy.mode)
                    reason = reason.replace(f"{mode} approval mode asks before ", f"{refusal.mode_refuses} ")
                raise ToolFailed(
                    "refused",
                    f"{tool_name} needs the user's approval and {refusal.why}" + (f"; {reason}" if reason else ""),
                    refusal.hint,
                )
            # describe() may itself fail (a replace that matches nothing):
            # then there is nothing to ask about and the model is told why.
            description = await trio.to_thread.run_sync(tool.describe, args, self.workspace)
            if self.hooks is not None:
                await self.hooks.fire("Notification", {
                    "notification_type": "ToolPermission", "message": f"{tool_name} needs your approval",
                    "details": {"tool_name": tool_name, "tool_input": args}}, target="ToolPermission")
            reviewed = await self._review_in_editor(tool, args, seen)
            if reviewed is not None:
                return verdict, reviewed
            edit = await self._proposed(tool, args)
            answer = await self.asker.ask(ApprovalRequest(
                call_id, tool, args, description,
                reason=verdict.reason, always_scope=self.policy.always_scope(tool, args),
                executes_later=later, agent=agent, edit=edit,
            ))
            if isinstance(answer, Edited):
                if edit is None:  # an asker's bug: only an edit it was shown can be edited
                    raise ToolFailed("refused", f"{tool_name} was answered with an edit it was not asked about",
                                     "ask the user how to proceed")
                return verdict, self._user_edit(tool, args, edit.before, edit.after, answer.content, seen)
            if answer is Answer.NO:
                seen.decision = "reject"
                raise ToolFailed("refused", f"the user declined to run {tool_name}", "ask the user how to proceed")
            if answer is Answer.ALWAYS:
                seen.decision = "auto_accept"
                self.policy.remember(tool, args)
        return verdict, args

    async def _proposed(self, tool: Tool, args: dict[str, Any]) -> ProposedEdit | None:
        """The whole text an edit would write, for an asker that
        ``reviews_edits`` (a server's, whose clients may show it in an
        editor); None for any other call or asker, or a file outside the
        workspace's root (no path to show it by)."""
        if not getattr(self.asker, "reviews_edits", False) or tool.name not in ("write_file", "replace"):
            return None
        real, before, after = await trio.to_thread.run_sync(proposed_edit, self.workspace, tool.name, args)
        shown = self.workspace.relative(real)
        if os.path.isabs(shown) or shown == ".." or shown.startswith(".." + os.sep):
            return None
        return ProposedEdit(shown.replace(os.sep, "/"), before, after)

    @staticmethod
    def _user_edit(tool: Tool, args: dict[str, Any], before: str | None, proposed: str, content: str,
                   seen: _CallSeen) -> dict[str, Any]:
        """The arguments that write ``content`` (the text the user accepted
        for the proposal ``proposed``); when it differs, ``seen`` notes it
        (gemini-cli's ``modify`` decision, and a word to the model)."""
        if content == proposed:
            return args
        seen.decision, seen.modified = "modify", content
        return edited_args(tool.name, args, before, content)

    async def _review_in_editor(self, tool: Tool, args: dict[str, Any], seen: _CallSeen) -> dict[str, Any] | None:
        """An edit shown as a diff in the IDE's editor (gemini-cli's
        ``openDiff``): the arguments that write what the user accepted
        there, or :class:`ToolFailed` (``refused``) when rejected. None: no
        editor to review it (not connected, not an edit, or the editor could
        not open the diff): the user is asked here instead."""
        ide = self.ide
        if ide is None or not ide.can_diff or tool.name not in ("write_file", "replace"):
            return None
        real, old, new = await trio.to_thread.run_sync(proposed_edit, self.workspace, tool.name, args)
        try:
            content = await ide.review(real, new)
        except RuntimeError as exc:
            log.warning("the IDE could not show the diff of %s (%s): asking here", args["file_path"], exc)
            return None
        if content is None:
            raise ToolFailed("refused", f"the user rejected the edit of {args['file_path']} in the IDE",
                             "ask the user how to proceed")
        return self._user_edit(tool, args, old, new, content, seen)

    async def _before_edit(self, tool: Tool, args: dict[str, Any]) -> tuple[Any, Any]:
        """For an edit tool, with a journal: the journal and what it noted of
        the file before the edit (``/rewind`` puts it back); else Nones. A
        journal that cannot be written is logged and the edit goes on."""
        if self.edits_dir is None or tool.name not in ("write_file", "replace") \
                or not isinstance(args.get("file_path"), str):
            return None, None
        from .edit_journal import EditJournal  # lazy_imports.EDGES

        journal = EditJournal(self.edits_dir)
        try:
            return journal, await trio.to_thread.run_sync(journal.before, self.workspace, args["file_path"])
        except OSError as exc:
            log.warning("the edit of %s is not journaled for /rewind: %s", args["file_path"], exc)
            return None, None
    async def _checkpoint(self, call_id: str, tool: Tool, args: dict[str, Any],
                          request_id: str | None) -> tuple[Any, Any]:
        """``(checkpoint, the file the call edits)`` taken before a call
        that modifies files (``(None, None)`` for any other). A snapshot
        that fails refuses the call (``checkpoint_failed``): an edit that
        could not be undone does not run (docs: README "Undo")."""
        from .checkpoints import CheckpointError, modifies_files  # lazy_imports.EDGES

        if not modifies_files(tool):
            return None, None
        target = None
        if isinstance(args.get("file_path"), str):
            try:
                target = self.workspace.resolve_file(args["file_path"])
            except ToolFailed:
                target = None
        try:
            return await self.checkpoints.before(call_id, tool.name, args, target, request_id), target
        except CheckpointError as exc:
            log.warning("checkpoint before %s failed: %s", tool.name, exc)
            raise ToolFailed("checkpoint_failed", f"{tool.name} did not run: the checkpoint before it failed: {exc}",
                             "do not retry; tell the user (checkpointing is on and could not snapshot the "
                             "files)") from None

    async def _before_tool(self, tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
        """The BeforeTool hooks' verdict: raises :class:`ToolFailed` (code
        ``hook_denied``, the hooks' reason) for a deny or exit status 2,
        else returns the arguments with any ``hookSpecificOutput.tool_input``
        merged over them (checked against the tool's schema again). A call
        of a sub-agent is shown as gemini-cli's ``invoke_agent``
        (:func:`~.approval.seen_as`), and a rewrite of its ``prompt`` becomes
        the agent's input."""
        name, shown = seen_as(tool, args)
        outcome = await self.hooks.fire("BeforeTool", {"tool_name": name, "tool_input": shown}, target=name)
        if outcome.denied or outcome.stopped:
            why = outcome.reason if outcome.denied else outcome.stop_reason
            raise ToolFailed("hook_denied", f"{tool.name} was blocked by the user's BeforeTool hook: {why}",
                             "do not retry this call unchanged; tell the user if you need it")
        rewrites = [r for r in outcome.specific("tool_input") if isinstance(r, dict)]
        if rewrites:
            merged = dict(shown)
            for rewrite in rewrites:
                merged.update(rewrite)
            if tool.invokes_agent:
                merged = with_prompt(args, merged.get("prompt"), list(tool.parameters.get("properties") or ()))
            args = tool.validate(merged)
        return args

    async def _after_tool(self, tool: Tool, args: dict[str, Any], result: Any) -> Any:
        """The result after the AfterTool hooks: replaced by their reason on
        a deny or exit status 2, with their ``additionalContext`` appended."""
        name, shown = seen_as(tool, args)
        outcome = await self.hooks.fire("AfterTool", {
            "tool_name": name, "tool_input": shown,
            "tool_response": {"llmContent": result, "returnDisplay": result}}, target=name)
        if outcome.denied:
            result = outcome.reason
        context = outcome.additional_context
        if context:
            if isinstance(result, str):
                result = f"{result}\n\n{context}"
            elif isinstance(result, dict):
                result = {**result, "additionalContext": context}
            else:
                result = {"output": result, "additionalContext": context}
        return result
