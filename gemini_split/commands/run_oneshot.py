"""``gemini-split -p PROMPT``: answer once, print, exit with a status.

Ctrl-C cancels the turn cleanly: the first interrupt cancels the running
request (local tools stop, the server is told) and the program exits 130
once the server confirms or after a short grace period; a second interrupt
exits at once.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
from typing import TYPE_CHECKING, Any

import trio

from gemini_split.app import client_telemetry, embedded_service_for, hold_embedded, resolve_client_settings
from gemini_split.commands.options_from_args import client_options
from gemini_split.client.protocol_client import HandshakeFailed
from gemini_split.client.protocol_client import RequestFailed  # noqa: I001
from gemini_split.userfiles.context import runs_elsewhere  # noqa: I001
from gemini_split.client.protocol_client import ProtocolClient  # noqa: I001 (apart: fewer merge conflicts)
from gemini_split.protocol import Attachment  # noqa: I001
from gemini_split.client.connect import ClientSettings
from gemini_split.client.session_scope import open_resumed_client
from gemini_split.ui.safe_text import visible
from gemini_split.environment import Environment
from gemini_split.errors import BadInput, ConfigurationError, ToolFailed
from gemini_split.exit_status import ExitStatus, exit_status_for
from gemini_split.protocol import ErrorCode, ServerEvent
from gemini_split.transport import AuthenticationFailed, ConnectFailed, TransportError
from gemini_split.ui.oneshot import OneShotRenderer, StatusLine, make_renderer

if TYPE_CHECKING:
    from gemini_split.server.service import AgentService


#: Seconds to wait for the server to confirm a cancel before leaving anyway.
CANCEL_GRACE = 3.0


#: Seconds ``-p`` waits for piped stdin to start (gemini-cli's 500 ms).
STDIN_WAIT = 0.5
#: Piped input beyond this is cut off with a warning (gemini-cli's 8 MiB).
MAX_STDIN_BYTES = 8 * 1024 * 1024
#: Why ``-i`` is refused with piped stdin (gemini-cli's words and exit 42).
PIPED_INTERACTIVE = ("the --prompt-interactive (-i) flag cannot be used when input is piped from stdin; "
                     "use -p to answer once with the piped input")
#: The stderr line for a prompt of whitespace only, which is not sent.
BLANK_PROMPT = "gemini-split: the prompt is only whitespace; nothing was sent to the model"


def read_prompt(args: argparse.Namespace, env: Environment) -> str | None:
    """The one-shot prompt, or None to open the REPL.

    The prompt words (``gemini-split "question"``) are gemini-cli's positional
    prompt: one-shot when stdin or stdout is not a terminal (or ``$CI`` is
    set), else the REPL's first prompt, like ``-i``. ``-i`` with stdin not
    a terminal is refused (:class:`BadInput`, exit 42), as gemini-cli does:
    the REPL reads the terminal, and piped text would be lost.

    Piped stdin is read whole: with ``-p`` it comes first and the prompt
    after it (as gemini-cli does), and a pipe that has produced nothing
    within :data:`STDIN_WAIT` is ignored; without ``-p`` it is the prompt.
    No input at all (empty stdin, an empty ``-p``) is :class:`BadInput`;
    input of whitespace only is returned as it is (:func:`run_oneshot`
    sends nothing for it)."""
    query = " ".join(getattr(args, "query", None) or []).strip() or None
    interactive = getattr(args, "prompt_interactive", None)
    if query and args.prompt is not None:
        raise ConfigurationError("cannot use both a positional prompt and -p/--prompt; use one of them")
    if args.prompt is not None and interactive is not None:
        raise ConfigurationError("cannot use both -p/--prompt and -i/--prompt-interactive")
    if query and interactive is not None:
        raise ConfigurationError("cannot use both a positional prompt and -i/--prompt-interactive")
    if query:
        if not is_headless(env):
            args.prompt_interactive = query
            return None
        args.prompt = query
    if interactive is not None:
        if not env.stdin_isatty:
            raise BadInput(PIPED_INTERACTIVE)
        if not interactive.strip():
            raise BadInput("the prompt given to -i/--prompt-interactive is empty")
        return None
    piped = ""
    if not env.stdin_isatty and env.stdin is not None:
        piped = _read_stdin(env, wait=STDIN_WAIT if args.prompt is not None else None)
    if args.prompt is not None:
        prompt = f"{piped.rstrip()}\n\n{args.prompt}" if piped.strip() else args.prompt or piped
    elif piped:
        prompt = piped
    elif not env.stdin_isatty:
        raise BadInput("no prompt: standard input was empty and -p was not given")
    else:
        return None
    if not prompt:
        raise BadInput("the prompt is empty")
    return prompt


async def _spin(status: StatusLine) -> None:
    """Animate the terminal status line until the run ends."""
    while True:
        await trio.sleep(0.1)
        status.tick()


def is_headless(env: Environment) -> bool:
    """gemini-cli's test for a non-interactive run: ``$CI`` or
    ``$GITHUB_ACTIONS`` is ``true``, or stdin or stdout is not a terminal."""
    e = env.environ
    if e.get("CI") == "true" or e.get("GITHUB_ACTIONS") == "true":
        return True
    return not (env.stdin_isatty and env.stdout_isatty)


def _read_stdin(env: Environment, *, wait: float | None) -> str:
    """Piped stdin, read to its end (at most :data:`MAX_STDIN_BYTES`). With
    ``wait``, a pipe that has produced nothing within ``wait`` seconds (held
    open by a parent that never writes) is not read at all."""
    stream = env.stdin
    if wait is not None and not _ready_within(stream, wait):
        env.warn(f"gemini-split: standard input produced nothing within {wait * 1000:.0f} ms; "
                 "answering the -p prompt without it")
        return ""
    try:
        data = stream.read(MAX_STDIN_BYTES + 1)
    except (OSError, ValueError):
        return ""
    except UnicodeDecodeError:
        raise BadInput("standard input is not UTF-8 text") from None
    if len(data) > MAX_STDIN_BYTES:
        env.warn(f"gemini-split: standard input truncated to {MAX_STDIN_BYTES // (1024 * 1024)} MiB")
        data = data[:MAX_STDIN_BYTES]
    return data


def _ready_within(stream: Any, seconds: float) -> bool:
    """Whether ``stream`` has data (or EOF) within ``seconds``. Streams
    without a file descriptor (tests' StringIO) and platforms where pipes
    cannot be polled count as ready."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    if os.name == "nt":
        return True

    try:
        ready, _, _ = select.select([fd], [], [], seconds)
    except (OSError, ValueError):
        return True
    return bool(ready)


def run_oneshot(args: argparse.Namespace, env: Environment, prompt: str) -> ExitStatus:
    """Answer ``prompt`` once. With ``-o json``, a failure before the answer
    starts (no key, bad settings, a bad flag value) is still the JSON
    object a script parses, with its ``error`` and exit code (also printed
    on stderr as a line, as without JSON).

    A prompt of whitespace only (``echo "  " | gemini-split``) asks
    nothing: exit 0 with nothing on stdout and :data:`BLANK_PROMPT` on
    stderr, without a model call (gemini-cli sends it, and exits 0 with
    whatever the model made of it)."""
    if not prompt.strip():
        env.warn(BLANK_PROMPT)
        return ExitStatus.SUCCESS
    try:
        return _run_oneshot(args, env, prompt)
    except ConfigurationError as exc:
        if args.output_format != "json":
            raise
        import json  # only on this failure: the thin -p path does not load it

        status = exit_status_for(exc)
        env.warn(f"gemini-split: {exc}")
        error = {"type": status.name.lower(), "message": str(exc), "code": int(status)}
        env.stdout.write(json.dumps({"error": error}, ensure_ascii=False, indent=2) + "\n")
        env.stdout.flush()
        return status


def _run_oneshot(args: argparse.Namespace, env: Environment, prompt: str) -> ExitStatus:
    options = client_options(args)
    settings = resolve_client_settings(options, env)
    embedded = embedded_service_for(options, env, settings)
    merged = settings.loaded_settings.merged
    output_format = args.output_format or merged.output.format or "text"
    screen_reader = args.screen_reader or merged.ui.accessibility.screen_reader
    if args.raw_output and not args.accept_raw_output_risk:
        env.warn("WARNING: --raw-output: the model's text reaches your terminal unfiltered; escape "
                 "sequences in it can change what the terminal shows. --accept-raw-output-risk hides this.")
    prompt, command = _slash_command(args, env, settings, prompt)
    renderer = make_renderer(output_format, env.stdout, env.stderr,
                             stderr_is_terminal=env.stderr_isatty and not screen_reader,
                             raw_output=args.raw_output)
    try:
        with client_telemetry(settings, env, interactive=False, output_format=output_format,
                              debug=bool(getattr(args, "debug", False))):
            return trio.run(_oneshot, settings, embedded, renderer, prompt, settings.session.model, command)
    except BrokenPipeError:
        # The reader of our output went away (`| head`): not our failure.
        return ExitStatus.SUCCESS


async def _oneshot(settings: ClientSettings, embedded: AgentService | None, renderer: OneShotRenderer, prompt: str,
                   model: str | None, command: tuple[Any, str] | None = None) -> ExitStatus:
    interrupted = False
    failed: Exception | None = None
    clients: list[ProtocolClient] = []  # for the reconnect notice, and to show our own request only

    async def own_events(event: ServerEvent) -> None:
        # A one-shot shows its own request only: another client's answer
        # streaming in the same session is not this command's output.
        if event.request_id is None or clients and event.request_id == clients[0].turn_request_id:
            await renderer.on_event(event)

    try:
        async with hold_embedded(settings, embedded) as settings, open_resumed_client(
                settings, lambda line: renderer.stderr.write(f"gemini-split: {line}\n"), on_event=own_events,
                on_notice=lambda line: renderer.stderr.write(f"gemini-split: {visible(line)}\n"),
                on_connection=_reconnect_notice(renderer.stderr, clients)) as client:
            clients.append(client)
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
                    if renderer.status is not None:
                        nursery.start_soon(_spin, renderer.status)
                    if settings.session.resume and not settings.session.attach and settings.tools.run_on == "client":
                        await _say_if_started_elsewhere(client, settings, renderer.stderr)
                    typed = ""
                    if command is not None:
                        from gemini_split.ui.command_expansion import CommandFailed

                        typed = command[1]  # as typed, without the piped input in front
                        try:
                            prompt, attachments = await _expand_command(prompt, command, client, renderer)
                        except CommandFailed as exc:
                            failed = exc
                    else:
                        prompt, attachments = await _attach_references(prompt, client, renderer)
                    if failed is None:
                        outcome = await client.run_turn(prompt, model=model if settings.endpoint.server else None,
                                                        attachments=attachments, context=settings.context.message,
                                                        typed=typed)
                    nursery.cancel_scope.cancel()
    except AuthenticationFailed as exc:
        return renderer.finish(error_code=ErrorCode.UNAUTHORIZED.value, error_message=str(exc))
    except HandshakeFailed as exc:
        code = exc.code or "connect_failed"
        return renderer.finish(error_code=code, error_message=str(exc))
    except (ConnectFailed, TransportError) as exc:
        return renderer.finish(error_code="connect_failed", error_message=str(exc), status=exit_status_for(exc))
    if failed is not None:
        return renderer.finish(error_code="bad_input", error_message=str(failed), status=ExitStatus.BAD_INPUT)
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


async def _say_if_started_elsewhere(client: ProtocolClient, settings: ClientSettings, stderr: Any) -> None:
    """A resumed session started in another directory: its tools run here
    now (they run where the client is), which the user should know."""
    try:
        history = await client.get_history()
    except RequestFailed:
        return
    started = runs_elsewhere(history.messages, settings.tools.workspace)
    if started is not None:
        stderr.write(f"gemini-split: this session was started in {visible(started)}; its tools now run here, "
                     f"in {visible(str(settings.tools.workspace))}\n")


async def _attach_references(prompt: str, client: ProtocolClient,
                             renderer: OneShotRenderer) -> tuple[str, tuple[Attachment, ...]]:
    """``@path`` references read locally and attached, as in the REPL
    (gemini-cli does it in headless mode too); what is left out is said on
    stderr."""
    if "@" not in prompt:
        return prompt, ()
    from gemini_split.ui.references import attach_references

    def report(line: str, warning: bool) -> None:
        if warning:
            renderer.stderr.write(f"gemini-split: {line}\n")

    return await attach_references(prompt, client.executor, report, mcp=client.mcp_servers)


def _slash_command(args: argparse.Namespace, env: Environment, settings: ClientSettings,
                   prompt: str) -> tuple[str, tuple[Any, str] | None]:
    """A prompt given as ``/name args`` is a custom command, expanded as in
    the REPL: returns the prompt and ``(command, line)``. ``//text`` sends
    ``/text``, as in the REPL, and a first word that is a path (another
    ``/`` in it) is a prompt. Any other ``/word`` is refused
    (:class:`BadInput`), never sent as a prompt. Piped input stays in front."""
    text = args.prompt
    if text is None or not text.startswith("/"):
        return prompt, None
    piped = prompt[:len(prompt) - len(text)]
    if text.startswith("//"):
        return piped + text[1:], None
    from gemini_split.userfiles.custom_commands import split_invocation

    if "/" in split_invocation(text)[0][1:]:
        return prompt, None  # a path (`/etc/hosts: what is this?`), never a command name (`/git:commit`)
    from gemini_split.ui.command_expansion import load_commands
    from gemini_split.ui.repl.slash_commands import ALIASES, COMMANDS

    loaded = settings.loaded_settings
    found = load_commands(env.config_dir, env.cwd, trusted=bool(loaded is not None and loaded.trusted),
                          reserved=[*COMMANDS, *ALIASES], extensions=settings.tools.extensions)
    for problem in found.problems:
        env.warn(f"gemini-split: {visible(problem)}")
    name, _ = split_invocation(text)
    command = found.get(name)
    if command is not None:
        return prompt, (command, text)
    if settings.tools.mcp_servers and settings.tools.run_on != "server" and ALIASES.get(name, name) not in COMMANDS:
        return prompt, (MCP_PROMPT, text)  # perhaps an MCP server's prompt: known once the servers are up
    if ALIASES.get(name, name) in COMMANDS:
        raise BadInput(f"{visible(name)} is a REPL command; it does nothing with -p (start the prompt with // "
                       "to send a line that begins with /)")
    raise BadInput(f"unknown command {visible(name)}: no custom command has that name (.gemini/commands/*.toml); "
                   "start the prompt with // to send a line that begins with /")


#: ``_slash_command``'s mark for a ``/name`` an MCP server's prompt may answer.
MCP_PROMPT = "mcp-prompt"


async def _mcp_prompt(line: str, client: ProtocolClient) -> str:
    """gemini-cli's ``-p "/prompt args"``: the MCP server's prompt got with
    the arguments parsed as in the REPL. Raises ``CommandFailed`` (nothing
    is sent) for an unknown name, a bad call or the server's error."""
    from gemini_split.tools.mcp.prompts import command_name, parse_prompt_args, prompt_text
    from gemini_split.userfiles.custom_commands import CommandFailed, split_invocation

    name, rest = split_invocation(line)
    servers = client.mcp_servers
    found = None
    if servers is not None:
        await servers.wait_started()
        for server in servers.servers:
            for prompt in (server.prompts if server.disabled is None else ()):
                if command_name(prompt) == name:
                    found = server, prompt
    if found is None:
        raise CommandFailed(f"unknown command {visible(name)}: no custom command (.gemini/commands/*.toml) or MCP "
                            "prompt has that name; start the prompt with // to send a line that begins with /")
    server, prompt = found
    inputs = parse_prompt_args(rest.strip(), prompt.arguments)
    if isinstance(inputs, str):
        raise CommandFailed(f"{inputs} (/{visible(prompt.name)} help in the REPL lists them)")
    try:
        result = await server.get_prompt(prompt.name, inputs)
    except ToolFailed as exc:
        raise CommandFailed(f"Error invoking prompt: {exc}") from None
    text = prompt_text(result)
    if text is None:
        raise CommandFailed("Received an empty or invalid prompt response from the server.")
    return text


async def _expand_command(prompt: str, command: tuple[Any, str], client: ProtocolClient,
                          renderer: OneShotRenderer) -> tuple[str, tuple[Attachment, ...]]:
    """The custom command's prompt (with piped input in front), expanded as
    in the REPL (or an MCP server's prompt); what is left out is said on stderr."""
    from gemini_split.ui.command_expansion import run_custom_command

    found, line = command
    piped = prompt[:len(prompt) - len(line)]
    if found == MCP_PROMPT:
        return piped + await _mcp_prompt(line, client), ()

    def report(text: str, warning: bool) -> None:
        if warning:
            renderer.stderr.write(f"gemini-split: {text}\n")

    expanded, attachments = await run_custom_command(found, line, client.executor, report)
    return piped + expanded, attachments


def _reconnect_notice(stderr, clients: list[ProtocolClient]):
    """One line on stderr when the connection drops, one when it is back
    (stdout stays exactly the answer). "The answer goes on" only when the
    server says our request still runs: a request that ended meanwhile (a
    server that died ends it ``interrupted``) says so itself next."""

    def notice(state: str, attempt: int, reason: str) -> None:
        if state == "reconnecting" and attempt == 1:
            stderr.write(f"gemini-split: {reason}; reconnecting…\n")
        elif state == "reconnected":
            client = clients[0] if clients else None
            running = client is not None and client.turn_request_id is not None and client.connected is not None \
                and client.connected.active_request_id == client.turn_request_id
            stderr.write(f"gemini-split: reconnected (attempt {attempt})"
                         f"{'; the answer goes on' if running else ''}\n")
        stderr.flush()

    return notice
