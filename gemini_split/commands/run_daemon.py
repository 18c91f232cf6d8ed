"""``gemini-split daemon start|stop|status|restart|run``: the per-user local
daemon that ``GEMINI_SERVER_MODE=local`` (or ``--server local``) uses.

The daemon is a ``serve`` for one user over a Unix socket: it has no key of
its own (each session runs on its caller's key, model and endpoint, sent in
``hello.caller``), tools run on the clients as always, and it exits after
``--idle-exit`` without connections or running requests. Its sessions are
kept in the same store as embedded mode's, so ``--resume`` finds either.
Where its files are: :mod:`gemini_split.client.local_daemon`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from typing import Any

import trio

from gemini_split import __version__
from gemini_split._trio_util import single_exceptions
from gemini_split.app import server_telemetry
from gemini_split.client import local_daemon as ld
from gemini_split.client.local_daemon import daemon_paths, remove_info, write_info
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.transport import ServeOptions, TransportError, get_transport

log = logging.getLogger("gemini_split.daemon")

#: Seconds running sessions get to wind down when the daemon stops.
SHUTDOWN_GRACE = 5.0


def run_daemon_command(args: argparse.Namespace, env: Environment) -> ExitStatus:

    action = args.daemon_action
    idle = getattr(args, "idle_exit", None)
    idle = ld.DEFAULT_IDLE_EXIT if idle is None else idle
    if action == "run":
        return _run(env, idle)
    if action in ("start", "restart"):
        status = ld.start_daemon(env, idle_exit=idle, restart=action == "restart")
        _print_status(env, status)
        return ExitStatus.SUCCESS
    if action == "stop":
        stopped = ld.stop_daemon(env)
        env.stdout.write(f"stopped the daemon (pid {stopped.pid})\n" if stopped else "the daemon was not running\n")
        return ExitStatus.SUCCESS
    status = ld.daemon_status(ld.daemon_paths(env))
    _print_status(env, status)
    return ExitStatus.SUCCESS if status.running else ExitStatus.ERROR


def _print_status(env: Environment, status: Any) -> None:

    out = env.stdout
    if status.exiting is not None:
        out.write(f"daemon:  exiting (pid {status.exiting}: its last threads are ending)\n")
    elif not status.running:
        out.write("daemon:  not running (GEMINI_SERVER_MODE=local starts it)\n")
    else:
        version = status.version or "unknown (not started by this gemini-split)"
        note = "" if status.current else f"; this client is {__version__}: the next call restarts it"
        out.write(f"daemon:  running, pid {status.pid}, version {version}{note}\n")
        if status.started:
            out.write(f"since:   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(status.started))}\n")
    out.write(f"socket:  {status.paths.socket}\n")
    out.write(f"log:     {status.paths.log}\n")


# --- the daemon itself ------------------------------------------------------------


def _run(env: Environment, idle_exit: float) -> ExitStatus:
    """Serve this user's sessions on the Unix socket until stopped (SIGTERM,
    SIGINT, ``daemon stop``) or idle for ``idle_exit`` seconds."""

    from gemini_split.server.config import DEFAULT_MODEL, ServerConfig
    from gemini_split.server.model.callers import CallerModels, KeylessModel
    from gemini_split.server.service import AgentService
    from gemini_split.server.store import StoreError, open_store

    # Sessions opening and closing, refusals, stale sockets replaced: the log's reader wants them.
    for name in ("gemini_split", "gemini_split_unix"):
        logging.getLogger(name).setLevel(logging.INFO)
    paths = daemon_paths(env)
    config = ServerConfig(model=env.environ.get("GEMINI_MODEL") or DEFAULT_MODEL)
    # The same store as embedded mode (not exclusive: REPLs may share it).
    store = open_store(env.config_dir / "sessions", replay_capacity=config.replay_capacity)
    service = AgentService(KeylessModel(), config, store=store, callers=CallerModels())
    try:
        # The model calls are recorded here (the thin clients record their side).
        with single_exceptions(), server_telemetry(env, model=config.model):
            trio.run(_serve, service, paths, idle_exit)
    except (TransportError, StoreError) as exc:
        env.warn(f"gemini-split daemon: {exc}")
        return ExitStatus.ERROR
    return ExitStatus.SUCCESS


async def _serve(service: Any, paths: Any, idle_exit: float) -> None:

    connections = 0
    last_active = trio.current_time()

    async def handle(stream: Any) -> None:
        nonlocal connections, last_active
        connections += 1
        try:
            await service.handle_connection(stream)
        finally:
            connections -= 1
            last_active = trio.current_time()

    async def exit_when_idle(stop: trio.CancelScope) -> None:
        nonlocal last_active
        while True:
            await trio.sleep(min(idle_exit / 4, 5.0))
            now = trio.current_time()
            if connections or any(s.busy for s in service.sessions.values()):
                last_active = now
            elif now - last_active >= idle_exit:
                log.info("idle for %gs: exiting", idle_exit)
                await service.shutdown(grace=SHUTDOWN_GRACE)
                stop.cancel()
                return

    transport = get_transport(paths.address)
    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with trio.open_nursery() as nursery:
                await nursery.start(service.run)
                options = ServeOptions(max_message_size=service.config.max_message_size)
                address = await nursery.start(transport.serve, paths.address, handle, options)
                write_info(paths, address=address)
                log.info("gemini-split daemon serving on %s (idle exit %s)", address,
                         f"{idle_exit:g}s" if idle_exit else "never")

                async def stop_on_signal() -> None:
                    async for signum in signals:
                        log.info("received %s: shutting down", signal.Signals(signum).name)
                        await service.shutdown(grace=SHUTDOWN_GRACE)
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(stop_on_signal)
                if idle_exit:
                    nursery.start_soon(exit_when_idle, nursery.cancel_scope)
    finally:
        remove_info(paths)
        with trio.CancelScope(shield=True):
            await service.aclose()
