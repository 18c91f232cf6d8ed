"""``gemini-split -p PROMPT``: answer once, print, exit with a status.

Ctrl-C cancels the turn cleanly: the first interrupt cancels the running
request (local tools stop, the server is told) and the program exits 130
once the server confirms or after a short grace period; a second interrupt
exits at once.
"""

from __future__ import annotations

import argparse
import signal

import trio

from gemini_split.app import hold_embedded, resolve_client_settings
from gemini_split.client.protocol_client import HandshakeFailed
from gemini_split.client.connect import ClientSettings, open_client
from gemini_split.environment import Environment
from gemini_split.errors import BadInput
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.protocol import ErrorCode
from gemini_split.transport import AuthenticationFailed, ConnectFailed, TransportError
from gemini_split.ui.oneshot import OneShotRenderer, make_renderer


#: Seconds to wait for the server to confirm a cancel before leaving anyway.
CANCEL_GRACE = 3.0


def read_prompt(args: argparse.Namespace, env: Environment) -> str | None:
    """The one-shot prompt, or None to open the REPL.

    Piped stdin is read whole: with ``-p`` it comes first and the prompt
    after it (as gemini-cli does); without ``-p`` it is the prompt."""
    piped = ""
    if not env.stdin_isatty and env.stdin is not None:
        try:
            piped = env.stdin.read()
        except (OSError, ValueError):
            piped = ""
        except UnicodeDecodeError:
            raise BadInput("standard input is not UTF-8 text") from None
    if args.prompt is not None:
        prompt = f"{piped.rstrip()}\n\n{args.prompt}" if piped.strip() else args.prompt
    elif piped.strip():
        prompt = piped
    elif not env.stdin_isatty:
        raise BadInput("no prompt: standard input was empty and -p was not given")
    else:
        return None
    if not prompt.strip():
        raise BadInput("the prompt is empty")
    return prompt


def run_oneshot(args: argparse.Namespace, env: Environment, prompt: str) -> ExitStatus:
    settings = resolve_client_settings(args, env)
    output_format = args.output_format or settings.loaded_settings.merged.output.format or "text"
    renderer = make_renderer(output_format, env.stdout, env.stderr)
    try:
        return trio.run(_oneshot, settings, renderer, prompt, settings.model)
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not our failure.
        return ExitStatus.SUCCESS


async def _oneshot(settings: ClientSettings, renderer: OneShotRenderer, prompt: str, model: str | None) -> ExitStatus:
    interrupted = False
    try:
        async with hold_embedded(settings), open_client(settings, on_event=renderer.on_event) as client:
            connected = client.connected
            assert connected is not None
            renderer.start(session_id=connected.session_id, model=model or connected.model, prompt=prompt)
            with trio.open_signal_receiver(signal.SIGINT) as interrupts:
                async with trio.open_nursery() as nursery:

                    async def cancel_on_interrupt() -> None:
                        nonlocal interrupted
                        async for _ in interrupts:
                            if interrupted:  # second Ctrl-C: leave now
                                nursery.cancel_scope.cancel()
                                return
                            interrupted = True
                            renderer.stderr.write("\nCancelling… (Ctrl-C again to quit at once)\n")
                            await client.cancel()
                            nursery.cancel_scope.deadline = trio.current_time() + CANCEL_GRACE

                    nursery.start_soon(cancel_on_interrupt)
                    outcome = await client.run_turn(prompt, model=model if settings.server else None)
                    nursery.cancel_scope.cancel()
    except AuthenticationFailed as exc:
        return renderer.finish(error_code=ErrorCode.UNAUTHORIZED.value, error_message=str(exc))
    except HandshakeFailed as exc:
        code = exc.code or "connect_failed"
        return renderer.finish(error_code=code, error_message=str(exc))
    except (ConnectFailed, TransportError) as exc:
        return renderer.finish(error_code="connect_failed", error_message=str(exc), status=exit_status_for(exc))
    if interrupted:
        return renderer.finish(error_code=ErrorCode.CANCELLED.value, error_message="cancelled by the user",
                               status=ExitStatus.INTERRUPTED)
    if outcome.cancelled:  # not by us: the server stopped the request
        return renderer.finish(error_code=ErrorCode.CANCELLED.value,
                               error_message="the server cancelled the request", status=ExitStatus.ERROR)
    if outcome.error is not None:
        return renderer.finish(error_code=outcome.error.code, error_message=outcome.error.message,
                               status=exit_status_for(outcome.error.code))
    return renderer.finish()
