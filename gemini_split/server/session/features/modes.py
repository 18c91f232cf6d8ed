"""The session's approval mode while it runs (protocol 1.6): plan mode's
``enter_plan_mode`` / ``exit_plan_mode`` and a client's Shift+Tab switch
it between two model turns, and the next turn is offered the tools of the
new mode and told it in its system instruction, as gemini-cli's
``setApprovalMode`` resets its tools and system instruction.

Who owns the mode is who runs the tools. A client that runs the session's
tools announces its tools with its new mode (``tool_discovery.approval_mode``,
:func:`take_announcement`); the session's context takes the mode. A session
whose tools the server runs switches its tool host — within the server's
``--max-approval-mode`` — when a client announces a mode, and when one of
the host's own calls switched it (:func:`host_switched`). Either way every
attached client is told (``approval_mode_changed``) and the running
request follows from its next model turn (:func:`follow_mode`, an
observer before each turn).
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from gemini_split.protocol import ApprovalModeChanged, Error, ErrorCode, SessionContext, ToolDiscovery

from ..chain import AgentRun, BeforeTurn
from ..views import View
from .prompts import instruction_for
from .search import SERVER_TOOLS
from .server_tools import mode_allows, parse_approval_mode


def take_announcement(session: Any, message: ToolDiscovery, view: View) -> None:
    """A client's ``tool_discovery``: its tools (those of a client that may
    act are the session's, unless the server runs them), the server tools
    it asks for, and its approval mode when it says one (refused, with an
    ``error`` to that client, beyond the server's cap)."""
    view.tools = list(message.tools)
    if not view.may_act:
        return
    if session.tool_host is None:  # a server-tools session runs its own
        session.tools = list(message.tools)
    session.server_tools = tuple(n for n in message.server_tools if n in SERVER_TOOLS)
    session.client_calls.hand_over(view)
    if message.approval_mode is not None:
        refused = switch(session, message.approval_mode, by=view.label)
        if refused is not None:
            view.send_direct(Error(code=ErrorCode.APPROVAL_MODE_REFUSED.value, message=refused,
                                   in_reply_to=message.id))


def switch(session: Any, text: str, *, by: str) -> str | None:
    """Switch ``session`` to the mode ``text`` names; why not, or None."""
    try:
        mode = parse_approval_mode(text)
    except ValueError as exc:
        return str(exc)
    host = session.tool_host
    if host is None:
        if session.context is None or session.context.approval_mode != mode:
            changed(session, mode, by=by)
        return None
    cap = session.max_approval_mode
    if not mode_allows(cap, mode):
        return (f"approval mode {mode} is not allowed on this server (at most {cap}; "
                "see serve --max-approval-mode)")
    before = host.mode
    host.switch(mode)
    if host.mode != before:
        host_switched(session, by=by)
    return None


def host_switched(session: Any, *, by: str) -> None:
    """The tool host's mode is new (a client's announcement, or a call of
    ``by``, the tool that switched it): the session's tools, its stored
    choice and every client follow."""
    host = session.tool_host
    session.tools = host.specs()
    if session.tool_choice is not None:
        session.tool_choice = session.tool_choice.switched(host.mode)
    changed(session, host.mode, by=by)


def changed(session: Any, mode: str, *, by: str) -> None:
    """``mode`` is the session's now: its context says it, the running
    request follows it from its next model turn, every client is told."""
    session.context = replace(session.context or SessionContext(), approval_mode=prompt_mode(session, mode))
    session.mode_epoch += 1
    session.emit_nowait(ApprovalModeChanged(mode=mode, by=by))


def prompt_mode(session: Any, mode: str) -> str:
    """The mode as the system instruction names it: a server-tools session
    that asks nobody (``reject_dangerous``) is in its policy's mode."""
    host = session.tool_host
    return host.policy_mode if host is not None and mode == "reject_dangerous" else mode


def effective_context(session: Any, context: Any) -> Any:
    """``context`` with the approval mode the session's tools run in: the
    tool host's for a server-tools session (a browser sends no context at
    all), else the client's own."""
    host = session.tool_host
    if host is None:
        return context
    return replace(context or SessionContext(), approval_mode=prompt_mode(session, host.mode))


def follow_mode(session: Any, run: AgentRun) -> BeforeTurn:
    """The observer before each of a request's model turns that takes a
    mode switched since (``session.mode_epoch``): the tools the session
    offers now, and a system instruction for the mode."""
    seen = session.mode_epoch

    async def observe(run: AgentRun) -> None:
        nonlocal seen
        if session.mode_epoch == seen:
            return
        seen = session.mode_epoch
        run.tools = list(session.tools)
        run.context = effective_context(session, session.context)
        run.system_instruction = instruction_for(session.config, context=run.context, tools=run.tools,
                                                 server_tools=session.server_tools)

    return observe
