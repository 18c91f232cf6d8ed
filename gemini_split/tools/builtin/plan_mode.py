"""gemini-cli's planning tools: ``enter_plan_mode`` and ``exit_plan_mode``
(``packages/core/src/tools/enter-plan-mode.ts`` and ``exit-plan-mode.ts``
in 0.61): their names, parameters, descriptions, answers and the plan's
approval question are gemini-cli's.

``enter_plan_mode`` switches the session's approval policy to plan mode
(someone present is asked first, by the policy: "This will restrict the
agent to read-only tools to allow for safe planning."). ``exit_plan_mode``
presents the plan file the model wrote (:mod:`gemini_split.tools.plans`)
for approval through the front end's :class:`PlanReviewer` — the REPL's
menu, an editor's permission question, every attached client of a server
— whose answer is gemini-cli's: "Yes, automatically accept edits" (then
``auto_edit``), "Yes, manually accept edits" (``default``), words of
feedback (the plan is not approved; the model revises it), or nothing (the
question was dismissed). With nobody to ask (a one-shot run) the plan is
approved as gemini-cli approves it there: the session switches to
``yolo`` so the implementation runs without hanging on questions — or,
where yolo is refused (``security.disableYoloMode``, an untrusted folder,
a server's ``--max-approval-mode``), to ``auto_edit`` where that is
allowed, else ``default``.

A mode switch is the policy's (:attr:`~gemini_split.tools.approval.ApprovalPolicy.mode`):
whoever listens to it — the REPL's toolbar, the client that announces its
tools and mode to the server, a server's session — hears it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import msgspec
import trio

from gemini_split.protocol import AskUserOption, AskUserQuestion

from ..approval_mode import ApprovalMode
from ..base import Tool, ToolContext, ToolFailed, ToolKind
from ..plans import read_plan, resolve_plan_path

ENTER = "enter_plan_mode"
EXIT = "exit_plan_mode"
#: gemini-cli's plan approval answers (``ApprovalOption``).
APPROVE_AUTO = "Yes, automatically accept edits"
APPROVE_MANUAL = "Yes, manually accept edits"
#: What each approval switches to.
APPROVED_MODES = {APPROVE_AUTO: ApprovalMode.AUTO_EDIT, APPROVE_MANUAL: ApprovalMode.DEFAULT}
#: What ``enter_plan_mode``'s question says (gemini-cli's "info" confirmation).
ENTER_PROMPT = "This will restrict the agent to read-only tools to allow for safe planning."

#: gemini-cli's ``getApprovalModeDescription``.
MODE_DESCRIPTIONS = {
    ApprovalMode.AUTO_EDIT: "Auto-Edit mode (edits will be applied automatically)",
    ApprovalMode.DEFAULT: "Default mode (edits will require confirmation)",
    ApprovalMode.PLAN: "Plan mode (read-only planning)",
    ApprovalMode.YOLO: "YOLO mode (all tool calls auto-approved)",
}


class PlanReview(msgspec.Struct, frozen=True):
    """A plan presented for approval: its file (as this machine sees it)
    and its text."""

    path: str
    content: str

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


class PlanReviewer(Protocol):
    """A front end that shows a plan for approval in a way of its own
    (else the plan is asked as one ``ask_user`` question,
    :func:`plan_question`). Returns the answer: :data:`APPROVE_AUTO`,
    :data:`APPROVE_MANUAL`, the user's feedback ("" : rejected without
    any), or None when the question was dismissed."""

    async def approve_plan(self, call_id: str, review: PlanReview) -> str | None: ...


class NobodyToAsk(Exception):
    """A reviewer that found nobody able to answer (a server with no
    attached client that can): the plan is not approved."""


def plan_question(content: str) -> AskUserQuestion:
    """gemini-cli's plan approval dialog as an ``ask_user`` question: the
    plan is the question, its two approvals the options, and a typed
    answer ("Other") is feedback."""
    return AskUserQuestion(
        header="Approval", question=content, type="choice", placeholder="Type your feedback...",
        options=(AskUserOption(label=APPROVE_AUTO, description="Approves plan and allows tools to run automatically"),
                 AskUserOption(label=APPROVE_MANUAL, description="Approves plan but requires confirmation for each tool")),
    )


async def review_plan(user: Any, call_id: str, review: PlanReview) -> str | None:
    """Ask ``user`` (a ``UserAsker``) about ``review``: through its own
    :meth:`PlanReviewer.approve_plan` when it has one, else as
    :func:`plan_question`."""
    approve = getattr(user, "approve_plan", None)
    if approve is not None:
        return await approve(call_id, review)
    answers = await user.ask_user(call_id, (plan_question(review.content),))
    return None if answers is None else answers.get("0", "")


def exit_message(mode: ApprovalMode) -> str:
    """gemini-cli's ``getPlanModeExitMessage``."""
    return f"Plan approved. Switching to {MODE_DESCRIPTIONS[mode]}."


class EnterPlanModeTool(Tool):
    name = ENTER
    kind = ToolKind.READ  # changes no file: the policy's question is the confirmation
    description = ("Switch to Plan Mode to safely research, design, and plan complex changes using read-only "
                   "tools.")
    parameters = {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "description": "Short reason explaining why you are entering plan mode."},
        },
    }

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        reason = args.get("reason") if isinstance(args.get("reason"), str) else ""
        return f"{reason or 'Initiating Plan Mode'}\n\n{ENTER_PROMPT}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        policy = ctx.extra.get("policy")
        if policy is None:
            raise ToolFailed("unavailable", "this client cannot change its approval mode")
        if policy.mode is ApprovalMode.PLAN:
            raise ToolFailed("refused", "You are already in Plan Mode.")
        policy.mode = ApprovalMode.PLAN
        return "Switching to Plan mode."


class ExitPlanModeTool(Tool):
    name = EXIT
    kind = ToolKind.READ  # changes no file: the plan's approval is its own question
    description = ("Finalizes the planning phase and transitions to implementation by presenting the plan for "
                   "formal user approval. You MUST reach an informal agreement with the user in the chat "
                   "regarding the proposed strategy BEFORE calling this tool. This tool MUST be used to exit "
                   "Plan Mode before any source code edits can be performed.")
    parameters = {
        "type": "object",
        "required": ["plan_filename"],
        "properties": {
            "plan_filename": {
                "type": "string",
                "description": 'The filename of the finalized plan (e.g., "feature-x.md"). Do not provide an '
                               "absolute path.",
            },
        },
    }

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        return f"Requesting plan approval for: {args.get('plan_filename', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        policy, plans_dir = ctx.extra.get("policy"), ctx.extra.get("plans_dir")
        if policy is None or plans_dir is None:
            raise ToolFailed("unavailable", "plan mode is not available in this session")
        if policy.mode is not ApprovalMode.PLAN:
            raise ToolFailed("refused", "You are not currently in Plan Mode. Use enter_plan_mode first to design "
                                        "a plan.")
        name = args["plan_filename"]
        path = resolve_plan_path(name, Path(plans_dir), ctx.workspace.root)
        content = await trio.to_thread.run_sync(read_plan, path, name)
        user = ctx.extra.get("user")
        if user is None:  # nobody to ask: gemini-cli's non-interactive approval
            return _approved(policy, _unattended_mode(policy), path)
        try:
            answer = await review_plan(user, ctx.call_id, PlanReview(path=str(path), content=content))
        except NobodyToAsk as exc:
            raise ToolFailed("no_user_present", f"The plan was not approved: {exc}. You are still in Plan Mode.",
                             "say in your answer that the plan waits for the user's approval") from None
        if answer is None:
            return ("User cancelled the plan approval dialog. The plan was not approved and you are still in "
                    "Plan Mode.")
        mode = APPROVED_MODES.get(answer)
        if mode is not None:
            return _approved(policy, mode, path)
        feedback = answer.strip()
        if feedback:
            return (f"Plan rejected. User feedback: {feedback}\n\nThe plan is stored at: {path}\n"
                    "Revise the plan based on the feedback.")
        return (f"Plan rejected. No feedback provided.\n\nThe plan is stored at: {path}\n"
                "Ask the user for specific feedback on how to improve the plan.")


def _unattended_mode(policy: Any) -> ApprovalMode:
    """gemini-cli's mode after a plan approved with nobody to ask: yolo,
    or the most that is allowed here (a server's ``--max-approval-mode``,
    an untrusted folder, ``security.disableYoloMode``)."""
    for mode in (ApprovalMode.YOLO, ApprovalMode.AUTO_EDIT):
        if policy.refusal(mode) is None:
            return mode
    return ApprovalMode.DEFAULT


def _approved(policy: Any, mode: ApprovalMode, path: Path) -> str:
    """Switch ``policy`` to ``mode`` (to default where ``mode`` is refused,
    said in the answer) and say so in gemini-cli's words."""
    refused = policy.refusal(mode)
    note = ""
    if refused is not None:
        note = f" ({mode.value} is not allowed here: {refused})"
        mode = ApprovalMode.DEFAULT
    policy.mode = mode
    return (f"{exit_message(mode)}{note}\n\nThe approved implementation plan is stored at: {path}\n"
            "Read and follow the plan strictly during implementation.")
