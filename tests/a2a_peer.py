"""A real Agent2Agent server for the remote sub-agent tests: the official
``a2a-sdk`` (its Starlette routes, v0.3 JSON-RPC compatibility on) under
uvicorn, with a trivial agent executor. Run as a subprocess::

    python tests/a2a_peer.py PORT_FILE LOG_FILE MODE

It binds 127.0.0.1 on a free port, writes the port to ``PORT_FILE`` once it
listens, and appends one JSON line to ``LOG_FILE`` per HTTP request
(``path``, ``method``, the ``x-api-key`` / ``authorization`` headers) and
per task (``task``: the text the agent received, ``context_id``: its
conversation). ``MODE``:

* ``echo``: answers ``echo: <text>`` as one message (no streaming in the card);
* ``stream``: the card says streaming; the answer comes as a task whose
  status updates carry ``part 1``, ``part 2``, then an artifact ``done: <text>``;
* ``slow``: waits an hour before answering;
* ``slowstream``: the card says streaming; the task is started and says
  ``working on it``, then waits an hour; ``tasks/cancel`` for it is logged
  (``cancelled``: the task id) and ends it ``canceled``;
* ``huge``: answers 8 MiB of text;
* ``auth``: as ``echo``, but ``message/send`` needs ``X-API-Key: sesame``
  (401 otherwise).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import uvicorn
from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Task, TaskStatus, \
    TaskState
from starlette.applications import Starlette
from starlette.responses import JSONResponse


def main() -> None:
    port_file, log_file, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    def log(record: dict) -> None:
        with log_file.open("a") as f:
            f.write(json.dumps(record) + "\n")

    class Executor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            text = context.get_user_input()
            log({"task": text, "context_id": context.context_id})
            if mode == "slow":
                await asyncio.sleep(3600)
            if mode == "slowstream":
                await event_queue.enqueue_event(Task(id=context.task_id, context_id=context.context_id,
                                                     status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
                updater = TaskUpdater(event_queue, context.task_id, context.context_id)
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=updater.new_agent_message(
                    [Part(text="working on it")]))
                log({"started": context.task_id})
                await asyncio.sleep(3600)
            if mode == "huge":
                text = "x" * (8 << 20)
            if mode != "stream":
                await event_queue.enqueue_event(new_text_message(f"echo: {text}", context_id=context.context_id))
                return
            task = Task(id=context.task_id, context_id=context.context_id,
                        status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            for n in (1, 2):
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=updater.new_agent_message(
                    [Part(text=f"part {n}")]))
                await asyncio.sleep(0.05)
            await updater.add_artifact([Part(text=f"done: {text}")], name="answer")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            log({"cancelled": context.task_id})
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/rpc"
    card = AgentCard(
        name="Echo Peer", description="Echoes what it is told, as a remote agent.", version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3")],
        capabilities=AgentCapabilities(streaming=mode in ("stream", "slowstream")),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"])])
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(handler, "/rpc", enable_v0_3_compat=True)])

    async def recorder(scope, receive, send):  # the headers each request carried
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            log({"path": scope["path"], "method": scope["method"],
                 "x-api-key": headers.get("x-api-key"), "authorization": headers.get("authorization")})
            if mode == "auth" and scope["path"] == "/rpc" and headers.get("x-api-key") != "sesame":
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    server = uvicorn.Server(uvicorn.Config(recorder, log_level="warning", lifespan="off"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        port_file.write_text(str(port))
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
