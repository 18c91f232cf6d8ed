"""``gemini-split attach [SESSION_ID|latest]``: join a session others use.

Opens the REPL on an existing session of yours — on a server (``--server``)
or in the local session store — with its last turn replayed (or what
``--limit`` / ``--since`` ask for); prompts from every attached client are
shown as they come. ``--watch`` attaches read-only and follows the session
live until Ctrl-C; ``-o stream-json`` prints every session event as one
JSON line (the protocol's wire form) for scripts.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from typing import Any

import trio

from gemini_split.app import embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.client.connect import describe_connect_error
from gemini_split.client.session_scope import open_resumed_client
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.protocol import Replay, ServerEvent, encode
from gemini_split.transport import ConnectFailed, TransportError
from gemini_split.ui.safe_text import visible


def run_attach(args: argparse.Namespace, env: Environment) -> ExitStatus:

    options = client_options(args)
    settings = resolve_client_settings(options, env, interactive=not args.watch and args.attach_output == "text")
    embedded = embedded_service_for(options, env, settings)
    replay = None
    if args.limit is not None or args.since is not None:
        replay = Replay(limit=args.limit, since=args.since)
    settings = settings.choosing(
        resume=args.session, attach=True, role="observer" if args.watch else "driver",
        replay=replay, label=args.label if args.label is not None else _host_label(),
    )
    if args.attach_output == "stream-json" or args.watch:

        return trio.run(_follow, settings, embedded, env, args.attach_output == "stream-json")

    from gemini_split.ui.repl.loop import Repl

    return trio.run(Repl(options, env, settings, embedded=embedded).run)


async def _follow(settings: Any, embedded: Any, env: Environment, as_json: bool) -> ExitStatus:
    """Print the session's events until the connection ends or Ctrl-C."""

    from gemini_split.ui.follow import Follower
    from gemini_split.ui.render import make_console

    out = env.stdout
    follower = None if as_json else Follower(make_console(out, env.environ), live=True)
    if follower is not None:
        follower.hold()  # the replay goes under the line saying who this is

    async def on_event(event: ServerEvent) -> None:
        if follower is not None:
            follower.on_event(event)
            return
        out.write(encode(event) + "\n")
        out.flush()

    try:
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with hold_embedded(settings, embedded) as held, open_resumed_client(
                    held, lambda line: env.warn(f"gemini-split attach: {line}"), on_event=on_event) as client:
                connected = client.connected
                if follower is not None and connected is not None:
                    # Who this is, apart from who else is here: a label the
                    # server gave ("client 1") is never read as someone else's.
                    follower.me = connected.label
                    follower.attached = [(c.label, c.role) for c in connected.attached]
                    others = follower.summary(excluding=connected.label)
                    env.warn(f"Attached to session {connected.session_id} as {visible(connected.label)} (watching); "
                             f"{'also attached: ' + others if others else 'nobody else is attached'}. "
                             "Ctrl-C leaves.")
                if follower is not None:
                    follower.release()
                interrupted = False
                async with trio.open_nursery() as nursery:
                    async def stop_on_signal() -> None:
                        nonlocal interrupted
                        async for _ in signals:
                            interrupted = True
                            nursery.cancel_scope.cancel()

                    nursery.start_soon(stop_on_signal)
                    await client.wait_closed()
                    nursery.cancel_scope.cancel()
                if follower is not None:
                    follower.close()
                if interrupted:
                    return ExitStatus.INTERRUPTED
                env.warn(f"gemini-split attach: {client.closed_reason or 'the connection ended'}")
                return ExitStatus.ERROR
    except (ConnectFailed, TransportError) as exc:

        message, _, status = describe_connect_error(exc)
        env.warn(f"gemini-split attach: {message}")
        return status
    finally:
        if follower is not None:
            follower.close()  # a running sub-agent's region goes (idempotent), the cursor comes back


def _host_label() -> str:

    try:
        return socket.gethostname()[:64] or "client"
    except OSError:  # pragma: no cover - gethostname does not fail on Linux
        return "client"


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it as: gemini-split attach")
