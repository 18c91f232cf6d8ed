"""The user's tool hooks for the tools a server runs (protocol 1.4).

Hooks are the user's commands and run on the user's machine (issue 29 §4):
before and after each tool call the server runs — every call of a session
whose tools run here (``hello.tools = "server"``: the ``ToolHost``'s
executor applies the verdict), and ``google_web_search``,
``activate_skill`` and each delegation to a sub-agent (shown as
gemini-cli's ``invoke_agent``: ``agents.py``) in any session
(:func:`before_tool` / :func:`after_tool`) — the session asks a client to run its BeforeTool / AfterTool hooks and
waits for their combined verdict. One :class:`ToolHooks` per session.

Who is asked: the client whose prompt started the request (its *origin*),
if it listed the capability ``tool_hooks`` (and speaks 1.4); when the
origin has left, the first attached driver that lists it. A request whose
origin has no hooks runs none: hooks are the configuration of the person
driving. Nobody to ask: the tool runs without hooks (the client said so
when it connected, if it had some).

Bounds, each ending as gemini-cli ends a hook that times out — the call
goes on without the hooks' verdict, once:

* the asked client gets ``hook_timeout`` seconds (what its ``hello`` said
  its hooks may take, at most the server's tool timeout) plus
  :data:`HOOK_MARGIN`;
* the asked client leaving stops the wait at once (the hook is not asked
  again of anyone: a command may have run already);
* an output over :data:`MAX_HOOK_OUTPUT` bytes is ignored, and the client
  told so.

A ``hook_response`` is settled here only from the client asked, for a hook
still waiting (:class:`HookRefused` otherwise; the caller answers ``error``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from gemini_split.protocol import (
    TOOL_HOOKS_CAPABILITY,
    ErrorCode,
    Hello,
    HookRequest,
    HookResponse,
    ToolCompleted,
    ToolError,
    ToolFailure,
    ToolStarted,
    quote,
    usable_capabilities,
)

from ..chain import AgentRun, Emit
from ..request.asks import Asks
from ..request.run import RequestRun
from ..views import OBSERVER, View

log = logging.getLogger(__name__)

#: Seconds a server waits beyond the hooks' own timeout (their process is
#: killed at it on the client, and the answer still has to travel).
HOOK_MARGIN = 5.0
#: gemini-cli's default hook timeout, for a client that did not say its own.
DEFAULT_HOOK_TIMEOUT = 60.0
#: Bytes of a ``hook_response``'s output (as JSON) a server takes; beyond
#: it, the output is ignored (the client's own cap on a hook's stdout).
MAX_HOOK_OUTPUT = 1024 * 1024


def runs_tool_hooks(hello: Hello) -> bool:
    """Whether the client of ``hello`` runs the user's tool hooks for the
    tools this server runs: it lists ``tool_hooks``, speaks 1.4 and may act
    (never a 1.3 peer: it would not know ``hook_request``)."""
    return TOOL_HOOKS_CAPABILITY in usable_capabilities(hello) and hello.role != OBSERVER


class HookRefused(Exception):
    """A ``hook_response`` that settles nothing; ``code`` says why."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


class ToolHooks:
    """The hook questions of one session.

    ``active()`` names the session's running request (None: none runs),
    ``views()`` its attached views; ``max_wait`` caps what a client may ask
    to be waited for (the server's tool timeout)."""

    def __init__(self, active: Callable[[], RequestRun | None], views: Callable[[], list[View]], *,
                 max_wait: float):
        self.active = active
        self.views = views
        self.max_wait = max_wait
        self._asks: Asks[HookRequest, dict[str, Any]] = Asks()

    def asked(self, request_id: str) -> View | None:
        """Who runs the user's tool hooks for ``request_id``: its origin if
        that client runs them (``tool_hooks``), nobody if it does not; once
        the origin has left, the first attached driver that runs them."""
        active = self.active()
        if active is None or active.request_id != request_id:
            return None
        if active.origin is not None:
            return active.origin if active.origin.tool_hooks and active.origin.attached else None
        return next((v for v in self.views() if v.tool_hooks and v.may_act and v.attached), None)

    def bind(self, request_id: str) -> Callable[[str, dict[str, Any]], Any]:
        """The ``hooks`` callable a ``ToolHost`` gets for one request:
        ``await hooks(event, input)`` → the combined output of the user's
        hooks, or None when nobody ran them (no client to ask, no answer in
        time, the client left)."""

        async def hooks(event: str, hook_input: dict[str, Any]) -> dict[str, Any] | None:
            return await self.ask(request_id, event, hook_input)

        return hooks

    async def ask(self, request_id: str, event: str, hook_input: dict[str, Any]) -> dict[str, Any] | None:
        """Send ``hook_request`` to the client :attr:`asked` names and wait
        for its answer (see the module docstring for the bounds)."""
        view = self.asked(request_id)
        if view is None:
            return None
        timeout = min(view.hook_timeout or DEFAULT_HOOK_TIMEOUT, self.max_wait) + HOOK_MARGIN
        hook_id = "h-" + secrets.token_hex(8)
        request = HookRequest(request_id=request_id, hook_id=hook_id, event=event,  # type: ignore[arg-type]
                              input=hook_input, timeout=timeout)
        output = await self._asks.ask(hook_id, request, send=view.send_direct, timeout=timeout, asked=view)
        if output is None:
            why = "left" if not view.attached else f"did not answer within {timeout:g} s"
            log.warning("%s hooks for %s: the client %s %s; the call goes on without them",
                        event, hook_input.get("tool_name"), view.label, why)
        return output

    def answer(self, response: HookResponse, view: View) -> None:
        """Settle the hook ``response`` names with its output. Raises
        :class:`HookRefused` for a hook not waiting, or one asked of
        another client (the same answer: a client cannot probe others')."""
        if self._asks.waiting(response.hook_id, view) is None:
            raise HookRefused(ErrorCode.UNEXPECTED_MESSAGE,
                              f"no hook_request {quote(response.hook_id)} to this client is waiting for an answer "
                              "(it was answered, timed out, or its request ended)")
        size = len(msgspec.json.encode(response.output))
        self._asks.settle(response.hook_id, response.output if size <= MAX_HOOK_OUTPUT else {})
        if size > MAX_HOOK_OUTPUT:
            raise HookRefused(ErrorCode.MESSAGE_TOO_LARGE,
                              f"the output of hook {quote(response.hook_id)} is {size} bytes, over the "
                              f"{MAX_HOOK_OUTPUT} a server takes: it was ignored and the call goes on")

    def view_left(self, view: View) -> None:
        """``view`` detached: its hooks will not answer; stop waiting."""
        self._asks.view_left(view)


# --- the verdict on the tools the server answers itself --------------------------------
# google_web_search and activate_skill are answered by the request's steps,
# not through a ToolHost (whose executor applies the verdict with the
# client's own code): these functions apply it the same way, with the same
# words.

Hooks = Callable[[str, dict[str, Any]], Any]


def _denies(output: dict[str, Any]) -> bool:
    return str(output.get("decision", "")).lower() in ("deny", "block")


def _specific(output: dict[str, Any], key: str) -> Any:
    specific = output.get("hookSpecificOutput")
    return specific.get(key) if isinstance(specific, dict) else None


async def before_tool(hooks: Hooks, name: str, args: dict[str, Any], *,
                      label: str = "") -> tuple[dict[str, Any], ToolFailure | None]:
    """The BeforeTool verdict on a call: ``(args, None)`` with any
    ``tool_input`` rewrite merged over the arguments, or the refusal
    (``hook_denied``, the hooks' reason, naming the call ``label`` or
    ``name``) for a deny or ``continue: false``."""
    output = await hooks("BeforeTool", {"tool_name": name, "tool_input": args}) or {}
    if _denies(output) or output.get("continue") is False:
        why = output.get("reason") if _denies(output) else output.get("stopReason") or output.get("reason")
        return args, ToolFailure(code="hook_denied",
                                 message=f"{label or name} was blocked by the user's BeforeTool hook: "
                                         f"{why or 'blocked by the user hooks'}",
                                 hint="do not retry this call unchanged; tell the user if you need it")
    rewrite = _specific(output, "tool_input")
    return ({**args, **rewrite} if isinstance(rewrite, dict) else args), None


async def after_tool(hooks: Hooks, name: str, args: dict[str, Any], result: Any) -> Any:
    """The result after the AfterTool verdict: replaced by the reason on a
    deny, with ``additionalContext`` appended."""
    output = await hooks("AfterTool", {"tool_name": name, "tool_input": args,
                                       "tool_response": {"llmContent": result, "returnDisplay": result}}) or {}
    if _denies(output):
        result = str(output.get("reason") or "denied by the user's hooks")
    context = _specific(output, "additionalContext")
    if context:
        if isinstance(result, str):
            result = f"{result}\n\n{context}"
        elif isinstance(result, dict):
            result = {**result, "additionalContext": str(context)}
        else:
            result = {"output": result, "additionalContext": str(context)}
    return result


#: ``await answer(args)`` → ``(result, failure)``: exactly one is set.
Answer = Callable[[dict[str, Any]], Awaitable[tuple[Any, ToolFailure | None]]]


async def answer_here(run: AgentRun, kind: str, number: int, name: str, args: dict[str, Any], answer: Answer, *,
                      emit: Emit, hooks: Hooks | None,
                      shown: Callable[[dict[str, Any]], Any] | None = None) -> tuple[Any, ToolFailure | None]:
    """Answer a call of a tool the server answers itself (call id
    ``{request}.{kind}.{number}``, a sub-agent's ``….a{agent}.{number}``):
    the user's BeforeTool hooks (when ``hooks``), ``tool_started``, the
    answer, then ``tool_error``, or the AfterTool hooks and
    ``tool_completed`` (showing the result, or ``shown(args)``)."""
    call_id = f"{run.request_id}.{kind}.{_agent_part(run)}{number}"
    aid = run.agent_id
    failure = None
    if hooks is not None:
        args, failure = await before_tool(hooks, name, args)
    await emit(ToolStarted(request_id=run.request_id, call_id=call_id, tool=name, parameters=args, agent_id=aid))
    if failure is None:
        result, failure = await answer(args)
    if failure is not None:
        await emit(ToolError(request_id=run.request_id, call_id=call_id, tool=name, error=failure, agent_id=aid))
        return None, failure
    if hooks is not None:
        result = await after_tool(hooks, name, args, result)
    await emit(ToolCompleted(request_id=run.request_id, call_id=call_id, tool=name,
                             result=shown(args) if shown is not None else result, agent_id=aid))
    return result, None


def _agent_part(run: AgentRun) -> str:
    """A sub-agent's own call ids (``….server.a2.1``): unique in the request."""
    return f"a{run.agent_id}." if run.agent_id else ""
