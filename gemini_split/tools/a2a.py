"""The Agent2Agent call of a remote sub-agent (issue 32), run on the client.

The definitions, their cards and their credentials are read by
:mod:`gemini_split.userfiles.remote_agents`.

**Where the call runs.** The credentials are the user's: they are
resolved here, when the call is made, and never travel to the server. The
server, asked by the main model to delegate, sends this client a ``tool_execution_request`` of the
agent's name; :class:`RemoteAgentTool` (reached through
``ToolExecutor.delegates``) makes the A2A exchange — after the approval
that gemini-cli's default policy asks for agent delegation (kind
``network``: asked in default mode, allowed in yolo, ``--allowed-tools``
and policy rules apply by the agent's name). What the agent says is the
call's output as it comes (``ToolContext.emit_output``; ``client/calls.py``
sends it to a 1.5 server as ``tool_progress``, which the server sends on as
the sub-agent's text), and its answer is the sub-agent's report.

**Protocol.** A2A v0.3 JSON-RPC over HTTP, as gemini-cli speaks it:
``message/send``, or ``message/stream`` (server-sent events) when the card
says ``capabilities.streaming``. The answer's text is the task's artifacts
(else the agent's messages); a failed, rejected or cancelled task is an
error with its message. The ``contextId`` of an agent's last answer is sent
with the next call to it, so a conversation with it goes on. A call that
ends before its task did (cancelled, timed out, its answer too large) sends
``tasks/cancel`` for the task once the agent has named it (a stream's
first event; a ``message/send`` names it only in its answer), within
:data:`CANCEL_TIMEOUT`: the agent stops working on it. The official
``a2a-sdk`` client is asyncio-only (its transports and queues), so this is
a small client over httpx, which runs under Trio.

**Bounds.** An answer of at most :data:`MAX_RESPONSE_BYTES`, the
definition's ``timeout_mins`` (default 10) for the whole exchange,
``CONNECT_TIMEOUT`` to connect, no redirect (an ``Authorization`` header is
never replayed to another place). ``general.proxy`` in settings, else
``HTTP(S)_PROXY`` / ``NO_PROXY``, is the proxy, as in gemini-cli.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

import trio

from gemini_split.userfiles.remote_agents import CONNECT_TIMEOUT, QUERY_SCHEMA, RemoteConfig, auth_headers, httpx_proxy
from .base import Tool, ToolContext, ToolFailed, ToolKind

#: An answer (all of a stream's events together) larger than this ends the call.
MAX_RESPONSE_BYTES = 1 << 20
#: Seconds to tell the agent a task is cancelled (``tasks/cancel``), best effort.
CANCEL_TIMEOUT = 5.0
#: A task in one of these states is over: nothing to cancel.
TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
#: The whole exchange's limit when the definition names none (gemini-cli's).
DEFAULT_TIMEOUT_MINS = 10.0

class RemoteAgentTool(Tool):
    """One remote agent as a client tool (not offered in ``tool_discovery``:
    the server offers it to the model as a sub-agent and asks for it by
    name). Kind ``network``: asked before it runs in default mode."""

    kind = ToolKind.NETWORK
    invokes_agent = True

    def __init__(self, definition: Any, config: RemoteConfig, *, environ: Mapping[str, str] | None = None,
                 proxy: str | None = None):
        self.name = definition.name  # type: ignore[misc]
        self.description = definition.description  # type: ignore[misc]
        self.parameters = QUERY_SCHEMA  # type: ignore[misc]
        self.config = config
        self.definition = definition
        #: ``timeout_mins`` as ``agents.overrides`` left it (``maxTimeMinutes``).
        self.timeout_mins = definition.timeout_mins
        self.environ = environ if environ is not None else os.environ
        self.proxy = proxy
        #: The conversation with the agent: its last answer's contextId.
        self.context_id: str | None = None

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        return (f"Delegate to the remote agent {self.name} (Agent2Agent) at {self.config.url}:\n"
                f"{args.get('query', '')}")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        minutes = self.timeout_mins or DEFAULT_TIMEOUT_MINS
        with trio.move_on_after(minutes * 60) as deadline:
            return await self._exchange(str(args.get("query", "")), ctx)
        if deadline.cancelled_caught:
            raise ToolFailed("timeout", f"the remote agent {self.name} did not answer within "
                                        f"{_minutes(minutes * 60)}", "do not retry the same request now")

    async def _exchange(self, query: str, ctx: ToolContext) -> str:
        import httpx  # lazy_imports.EDGES

        message: dict[str, Any] = {"kind": "message", "role": "user", "messageId": str(uuid.uuid4()),
                                   "parts": [{"kind": "text", "text": query}]}
        if self.context_id:
            message["contextId"] = self.context_id
        method = "message/stream" if self.config.streaming else "message/send"
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": {"message": message}}
        answer = _Answer(self.name)
        timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, **httpx_proxy(self.proxy)) as client:
            for attempt in range(3):  # 401/403: credentials fetched again, twice at most (gemini-cli)
                headers = {"Content-Type": "application/json",
                           "Accept": "text/event-stream" if self.config.streaming else "application/json",
                           **await trio.to_thread.run_sync(
                               auth_headers, self.config.auth, self.config.url, self.environ)}
                try:
                    status = await self._post(client, body, headers, answer, ctx)
                except httpx.HTTPError as exc:
                    raise ToolFailed("unreachable", f"the remote agent {self.name} at {self.config.url} could not "
                                                    f"be reached: {type(exc).__name__}: {exc or 'no answer'}",
                                     "do not retry now; tell the user the agent is down") from None
                except BaseException:  # cancelled, timed out, too large: the task goes on there
                    if answer.task_id and answer.state not in TERMINAL_STATES:
                        with trio.CancelScope(shield=True):
                            await self._cancel_task(client, answer.task_id, headers)
                    raise
                if status in (401, 403) and self.config.auth is not None and attempt < 2:
                    continue
                break
        if status in (301, 302, 303, 307, 308):
            raise ToolFailed("remote_error", f"the remote agent {self.name} redirected the call (HTTP {status}); "
                                             "a call is not followed elsewhere")
        if status != 200:
            raise ToolFailed("remote_error" if status not in (401, 403) else "auth_failed",
                             f"the remote agent {self.name} answered HTTP {status}"
                             + (f": {answer.error_text}" if answer.error_text else ""))
        if answer.contextId:
            self.context_id = answer.contextId
        return answer.report()

    async def _cancel_task(self, client: Any, task_id: str, headers: dict[str, str]) -> None:
        """``tasks/cancel`` for ``task_id``, within :data:`CANCEL_TIMEOUT`;
        whatever comes of it (the call is over either way)."""
        import httpx  # lazy_imports.EDGES

        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "tasks/cancel", "params": {"id": task_id}}
        with trio.move_on_after(CANCEL_TIMEOUT):
            try:
                await client.post(self.config.url, json=body, headers={**headers, "Accept": "application/json"})
            except httpx.HTTPError:
                pass

    async def _post(self, client: Any, body: dict[str, Any], headers: dict[str, str], answer: _Answer,
                    ctx: ToolContext) -> int:
        async with client.stream("POST", self.config.url, json=body, headers=headers) as response:
            if response.status_code != 200:
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > 4096:
                        break
                answer.error_text = data[:300].decode("utf-8", "replace").strip()
                return response.status_code
            if "text/event-stream" in response.headers.get("content-type", ""):
                # Lines split here, after counting the bytes: a peer that
                # never sends a newline is stopped at the bound too.
                data_lines: list[str] = []
                pending = b""
                async for chunk in response.aiter_bytes():
                    answer.count(len(chunk))
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for raw in lines:
                        line = raw.rstrip(b"\r").decode("utf-8", "replace")
                        if line.startswith("data:"):
                            data_lines.append(line[5:].lstrip())
                        elif not line.strip() and data_lines:
                            answer.take(_rpc_result(self.name, "\n".join(data_lines)))
                            data_lines = []
                            for piece in answer.said():
                                await ctx.emit_output(piece, "stdout")
                if pending.startswith(b"data:"):
                    data_lines.append(pending[5:].decode("utf-8", "replace").strip())
                if data_lines:
                    answer.take(_rpc_result(self.name, "\n".join(data_lines)))
            else:
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    answer.count(len(chunk))
                    data += chunk
                answer.take(_rpc_result(self.name, data.decode("utf-8", "replace")))
            for piece in answer.said():
                await ctx.emit_output(piece, "stdout")
            return 200


def _rpc_result(name: str, text: str) -> Any:
    try:
        reply = json.loads(text)
    except ValueError:
        raise ToolFailed("remote_error", f"the remote agent {name} answered something that is not JSON-RPC "
                                         f"({text[:80]!r})") from None
    if not isinstance(reply, dict):
        raise ToolFailed("remote_error", f"the remote agent {name} answered something that is not JSON-RPC")
    error = reply.get("error")
    if error is not None:
        words = error.get("message") if isinstance(error, dict) else str(error)
        raise ToolFailed("remote_error", f"the remote agent {name} refused the task: {str(words)[:500]}")
    return reply.get("result")


class _Answer:
    """What came back: the agent's messages, the task's artifacts, its
    state — folded from a ``message/send`` result or a stream's events."""

    def __init__(self, name: str):
        self.name = name
        self.size = 0
        self.messages: list[str] = []
        self.artifacts: dict[str, list[str]] = {}
        self.state = ""
        self.contextId: str | None = None
        #: The task's id, once the agent has named it (``tasks/cancel``).
        self.task_id: str | None = None
        self.error_text = ""
        #: Text not yet shown (``said``), and whether any was.
        self._new: list[str] = []
        self._shown = False

    def said(self) -> list[str]:
        """The text that came since the last call, to show as it arrives
        (the agent's messages, its artifacts' parts)."""
        out, self._new = self._new, []
        return out

    def _show(self, text: str, *, joined: bool = False) -> None:
        if text:
            self._new.append(text if joined or not self._shown else "\n\n" + text)
            self._shown = True

    def count(self, n: int) -> None:
        self.size += n
        if self.size > MAX_RESPONSE_BYTES:
            raise ToolFailed("too_large", f"the remote agent {self.name} answered more than "
                                          f"{MAX_RESPONSE_BYTES >> 20} MiB; the call was stopped",
                             "ask it for a shorter answer")

    def take(self, result: Any) -> None:
        if not isinstance(result, dict):
            return
        if isinstance(result.get("contextId"), str):
            self.contextId = result["contextId"]
        kind = result.get("kind")
        task_id = result.get("id") if kind == "task" else result.get("taskId")
        if isinstance(task_id, str) and task_id:
            self.task_id = task_id
        if kind == "message":
            self._message(result)
        elif kind == "task":
            status = result.get("status") or {}
            for item in result.get("history") or ():
                if isinstance(item, dict) and item.get("role") == "agent":
                    self._message(item)
            self._status(status)
            for artifact in result.get("artifacts") or ():
                self._artifact(artifact, append=False)
        elif kind == "status-update":
            self._status(result.get("status") or {})
        elif kind == "artifact-update":
            self._artifact(result.get("artifact") or {}, append=bool(result.get("append")))

    def _status(self, status: dict[str, Any]) -> None:
        self.state = str(status.get("state") or self.state)
        if isinstance(status.get("message"), dict):
            self._message(status["message"])

    def _message(self, message: dict[str, Any]) -> None:
        text = _text_of(message.get("parts"))
        if text and (not self.messages or self.messages[-1] != text):
            self.messages.append(text)
            self._show(text)

    def _artifact(self, artifact: dict[str, Any], *, append: bool) -> None:
        key = str(artifact.get("artifactId") or len(self.artifacts))
        text = _text_of(artifact.get("parts"))
        if append:
            self.artifacts.setdefault(key, []).append(text)
        else:
            self.artifacts[key] = [text]
        self._show(text, joined=append)

    def report(self) -> str:
        """The sub-agent's report; raises :class:`ToolFailed` for a task
        that failed, was rejected or cancelled."""
        artifacts = "\n\n".join("".join(parts) for parts in self.artifacts.values() if "".join(parts).strip())
        said = "\n\n".join(self.messages)
        if self.state in ("failed", "rejected", "canceled"):
            raise ToolFailed("remote_error", f"the remote agent {self.name}'s task {self.state}"
                                             + (f": {said[-500:]}" if said else ""))
        text = artifacts or said
        if self.state in ("input-required", "auth-required"):
            text += f"\n\n(The remote agent needs {self.state.split('-')[0]} to go on: call it again with it.)"
        if not text.strip():
            raise ToolFailed("remote_error", f"the remote agent {self.name} answered no text")
        return text


def _text_of(parts: Any) -> str:
    out = []
    for part in parts or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(part["data"], ensure_ascii=False))
    return "\n".join(out)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


class RemoteAgents:
    """The remote agents' client tools, by name, made from a discovery's
    agents (``userfiles.agents.Discovery``) and kept while their definition
    stays the same (so a conversation's ``contextId`` survives
    ``/agents reload``)."""

    def __init__(self, environ: Mapping[str, str] | None = None, proxy: str | None = None):
        self.environ = environ
        self.proxy = proxy
        self._tools: dict[str, RemoteAgentTool] = {}

    def get(self, discovery: Any, name: str) -> RemoteAgentTool | None:
        agent = discovery.get(name) if discovery is not None else None
        remote = getattr(agent, "remote", None)
        if agent is None or remote is None or not agent.enabled:
            return None
        tool = self._tools.get(name)
        if tool is None or tool.config is not remote or tool.definition != agent.definition:
            context_id = tool.context_id if tool is not None and tool.config is remote else None
            tool = self._tools[name] = RemoteAgentTool(agent.definition, remote, environ=self.environ,
                                                       proxy=self.proxy)
            tool.context_id = context_id
        return tool


__all__ = ["RemoteAgentTool", "RemoteAgents"]
