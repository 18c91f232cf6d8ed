"""An editor made of the real ACP Python SDK (asyncio + pydantic), run as its
own process by the tests, as Zed would run it: ``python sdk_editor.py PLAN``.

PLAN (a JSON file) says how to reach the agent and what to do:

    {"agent": ["python", "-m", "gemini_split", "--acp"]   # spawn over stdio
     or "ws": "ws://127.0.0.1:PORT/?limit=1",              # or a WebSocket
     "cwd": "...", "env": {...},
     "capabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false},
     "buffers": {"/abs/path": "unsaved text"},   # what fs/read_text_file returns first
     "permission": "proceed_once",                # the option chosen (or "cancelled")
     "elicit": {"action": "accept", "content": {...}},  # the answer to elicitation/create
                                                  # (capabilities "elicitation": true offers form elicitation)
     "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "hi"},
               {"do": "prompt", "text": "...", "cancel_after": "agent_message_chunk"},
               {"do": "load", "session": "ID"}, {"do": "set_mode", "mode": "yolo"},
               {"do": "use", "session": "ID"}, {"do": "wait_updates", "count": N},
               {"do": "authenticate", "method": "gemini-api-key", "key": "..."}]}  # key: _meta["api-key"]

It prints one JSON object: ``results`` (each step's answer, or its error),
``updates`` (every session/update, in order) and ``calls`` (every request
the agent made of the editor), so the tests assert what an editor saw.

``python sdk_editor.py --serve`` is the same editor kept running for many
plans (tests/faces/acp/helpers.py: one per test process, so the SDK's import,
about 0.9 s of CPU, is paid once rather than per test): it reads a plan path
per line on stdin and answers each with one line on stdout, that object or
``{"crash": TRACEBACK}``. Every plan runs on its own event loop with its own
``Editor``, its own connection and its own agent process.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from typing import Any

import acp
from acp.schema import (
    AcceptElicitationResponse,
    CancelElicitationResponse,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


class Editor:
    def __init__(self, plan: dict[str, Any]):
        self.plan = plan
        self.updates: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.buffers: dict[str, str] = dict(plan.get("buffers", {}))
        self.written: dict[str, str] = {}
        self.update_seen = asyncio.Condition()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        async with self.update_seen:
            self.updates.append({"sessionId": session_id, **update.model_dump(by_alias=True, exclude_none=True)})
            self.update_seen.notify_all()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any):
        self.calls.append({"method": "session/request_permission", "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True),
                           "options": [o.model_dump(by_alias=True, exclude_none=True) for o in options]})
        choice = self.plan.get("permission", "proceed_once")
        if choice == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=choice))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any):
        self.calls.append({"method": "fs/read_text_file", "path": path, "line": line, "limit": limit})
        if path in self.buffers:
            text = self.buffers[path]
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        if line:
            lines = text.splitlines(keepends=True)[line - 1:]
            text = "".join(lines[:limit] if limit else lines)
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        self.calls.append({"method": "fs/write_text_file", "path": path, "content": content})
        self.buffers[path] = content
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        return WriteTextFileResponse()

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any):
        self.calls.append({"method": "elicitation/create", "message": message,
                           "mode": mode.model_dump(by_alias=True, exclude_none=True)})
        answer = self.plan.get("elicit", {"action": "cancel"})
        return {"accept": AcceptElicitationResponse, "decline": DeclineElicitationResponse,
                "cancel": CancelElicitationResponse}[answer["action"]](**answer)

    def on_connect(self, conn: Any) -> None:
        pass


async def wait_for(editor: Editor, predicate) -> None:
    async with editor.update_seen:
        await editor.update_seen.wait_for(lambda: predicate(editor.updates))


async def run_steps(conn: Any, editor: Editor, plan: dict[str, Any]) -> list[Any]:
    results: list[Any] = []
    session_id = None
    caps = plan.get("capabilities", {})
    for step in plan["steps"]:
        do = step["do"]
        try:
            if do == "initialize":
                fs = caps.get("fs", {})
                reply = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=fs.get("readTextFile", False),
                                              write_text_file=fs.get("writeTextFile", False)),
                    terminal=caps.get("terminal", False),
                    elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
                    if caps.get("elicitation") else None))
            elif do == "authenticate":
                meta = {"api-key": step["key"]} if "key" in step else {}
                reply = await conn.authenticate(method_id=step.get("method", "gemini-api-key"), **meta)
            elif do == "new":
                reply = await conn.new_session(cwd=step.get("cwd", plan["cwd"]), mcp_servers=[])
                session_id = reply.session_id
            elif do == "use":
                session_id = step["session"]
                reply = None
            elif do == "load":
                session_id = step["session"]
                reply = await conn.load_session(cwd=step.get("cwd", plan["cwd"]), session_id=session_id, mcp_servers=[])
            elif do == "set_mode":
                reply = await conn.set_session_mode(session_id=session_id, mode_id=step["mode"])
            elif do == "write_session":
                with open(step["path"], "w") as f:
                    f.write(session_id)
                reply = None
            elif do == "wait_text":
                await wait_for(editor, lambda ups: step["text"] in "".join(
                    u.get("content", {}).get("text", "") for u in ups if isinstance(u.get("content"), dict)))
                reply = None
            elif do == "wait_updates":
                await wait_for(editor, lambda ups: len(ups) >= step["count"])
                reply = None
            elif do == "prompt":
                prompt = conn.prompt(session_id=session_id, prompt=[acp.text_block(step["text"])])
                if "cancel_after" in step:
                    task = asyncio.ensure_future(prompt)
                    kind = step["cancel_after"]
                    await wait_for(editor, lambda ups: any(u.get("sessionUpdate") == kind for u in ups))
                    await conn.cancel(session_id=session_id)
                    reply = await task
                else:
                    reply = await prompt
            else:
                raise ValueError(f"unknown step {do}")
            results.append(reply.model_dump(by_alias=True, exclude_none=True) if reply is not None else None)
        except acp.RequestError as exc:
            results.append({"error": {"code": exc.code, "message": str(exc), "data": exc.data}})
    return results


async def run_plan(plan_path: str) -> dict[str, Any]:
    """Carry out one plan; what the editor saw."""
    with open(plan_path) as f:
        plan = json.load(f)
    editor = Editor(plan)
    if "ws" in plan:
        from acp.ws.client import create_websocket_stream

        transport = await create_websocket_stream(plan["ws"], headers=plan.get("headers"))
        conn = acp.connect_to_agent(editor, transport, use_unstable_protocol=bool(plan.get("elicit")))
        results = await run_steps(conn, editor, plan)
        await conn.close()
    else:
        from acp.stdio import spawn_agent_process

        command, *args = plan["agent"]
        # Form elicitation is ACP's unstable protocol: the SDK routes it only when asked to.
        async with spawn_agent_process(editor, command, *args, env=plan.get("env"), cwd=plan["cwd"],
                                       use_unstable_protocol=bool(plan.get("elicit"))) as (conn, process):
            results = await run_steps(conn, editor, plan)
    return {"results": results, "updates": editor.updates, "calls": editor.calls}


def serve_plans() -> None:
    """Answer plan paths read from stdin, one line each, until stdin closes."""
    for line in sys.stdin:
        try:
            seen = asyncio.run(run_plan(line.rstrip("\n")))
        except Exception:
            seen = {"crash": traceback.format_exc()}
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve_plans()
    else:
        print(json.dumps(asyncio.run(run_plan(sys.argv[1]))))
