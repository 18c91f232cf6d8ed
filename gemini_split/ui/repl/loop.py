"""The interactive REPL: read a prompt, stream the answer, repeat.

:class:`Repl` owns one connection at a time (embedded or remote), swapped by
``/clear`` and ``/server connect``: the new one is opened first, so a failed
connect leaves the old one working. Each connection lives in a task of the
REPL's nursery (:meth:`Repl._hold`), because ``open_client`` is a context
manager with its own nursery.

Input is read by prompt-toolkit in a worker thread (see
:mod:`gemini_split.ui.repl.prompt_input`); output is rendered with rich from the
Trio thread (:mod:`gemini_split.ui.render`). The two never overlap: while a
prompt is up the REPL waits for it, and an approval question pauses the
turn's live display before asking.

Ctrl-C: at the prompt it clears the line (a key press, handled by
prompt-toolkit). During a turn it is a SIGINT, which the REPL's signal
receiver turns into a ``cancel``; a second Ctrl-C stops waiting for the
server to confirm and starts a fresh session. During a slash command that
waits on the network it abandons the command.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import trio
from prompt_toolkit.application.current import get_app_or_none
from prompt_toolkit.formatted_text import AnyFormattedText
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.utils import get_cwidth
from rich.console import Console
from rich.text import Text

from gemini_split import __version__
from gemini_split.app import embedded_service, names_local_daemon, serve_embedded, settings_for
from gemini_split._trio_util import single_exceptions
from gemini_split.tools.approval import ApprovalMode
from gemini_split.userfiles.context import runs_elsewhere
from gemini_split.client.profiles import ProfileStore, profile_store
from gemini_split.client.protocol_client import ProtocolClient, RequestFailed
from gemini_split.client.session_scope import NO_SESSIONS, needs_scope, pick, project_sessions, resolve_resume
from gemini_split.userfiles.system_prompt import INDICATOR as SYSTEM_PROMPT_INDICATOR
from gemini_split.client.connect import ClientSettings, describe_connect_error, open_client
from gemini_split.environment import Environment
from gemini_split.errors import BadInput, ConfigurationError, ProfileError
from gemini_split.exit_status import ExitStatus
from gemini_split.options import ClientOptions
from gemini_split.protocol import Attachment, ClientsChanged, ErrorCode, Rewound, ServerEvent
from gemini_split.userfiles.settings import GeneralSettings, UISettings, approval_mode_refusal
from gemini_split.transport import ConnectOptions, TransportError
from gemini_split.tools.ide import IdeCompanion
from gemini_split.ui.follow import Follower
from gemini_split.ui.references import attach_references
from gemini_split.ui.render import TurnView, code_theme_for, error_panel, make_console, usage_line
from gemini_split.ui.safe_text import visible

from .approval_prompt import InlineAsker
from .command_context import CommandUsage, QuitRepl
from .external_editor import edit_text, editor_command
from .prompt_input import (
    NEWLINE_KEYS,
    LineReader,
    PlainLineReader,
    drain_typed_ahead,
    no_echo,
    open_history,
    read_choice,
    read_search,
    read_text,
    split_queued,
)
from .session_stats import SessionStats, goodbye, resume_command
from .shell_passthrough import format_for_model, run_passthrough
from .slash_commands import SlashCompleter, load_custom_commands, run_command
from .transcript import history_lines

if TYPE_CHECKING:
    from gemini_split.server.service import AgentService

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds to wait for the server to confirm a cancel before starting afresh.
CANCEL_GRACE = 3.0
HISTORY_FILE = "repl_history"
#: Seconds a passing note ("reconnected") stays on the toolbar.
NOTE_SECONDS = 5.0


class Repl:
    """The REPL: one per terminal session. It is the
    :class:`~gemini_split.ui.repl.command_context.CommandContext` its slash commands
    are run with."""

    def __init__(
        self,
        options: ClientOptions,
        env: Environment,
        settings: ClientSettings,
        *,
        embedded: AgentService | None = None,
        console: Console | None = None,
        input: Input | None = None,
        output: Output | None = None,
    ):
        self.options = options
        self.env = env
        self.settings = settings
        #: The embedded service, once there is one: opened once per process,
        #: served from the REPL's nursery (at ``_embedded_address``) and
        #: closed when the REPL ends.
        self._embedded = embedded
        self._embedded_address: str | None = None
        self.server_label = options.server or ("embedded" if settings.endpoint.server is None
                                                else "local" if names_local_daemon(None, env)
                                                else settings.endpoint.server)
        #: settings.json's "ui" section (theme, hideBanner, hideTips).
        self.ui_settings = _ui_settings(settings)
        self.code_theme, self.theme_warning = code_theme_for(self.ui_settings.theme)
        environ = env.environ
        if self.code_theme is None:  # the "NoColor" theme: as NO_COLOR
            environ = {**environ, "NO_COLOR": "1"}
        self.console = console or make_console(env.stdout, environ)
        self.store: ProfileStore = profile_store(env.config_dir)
        #: Sent with every prompt when set (``/model``, or ``-m`` with a server).
        self.model_override: str | None = settings.session.model if settings.endpoint.server else None
        self.client: ProtocolClient | None = None
        #: The session of the latest connection (kept after it closes: the
        #: exit footer names it).
        self.session_id: str | None = None
        self.view: TurnView | None = None
        #: What other clients attached to this session do (issue 11).
        self.follower = Follower(self.console, live=False)
        self._nursery: trio.Nursery | None = None
        self._connection_scope: trio.CancelScope | None = None
        self._turn_scope: trio.CancelScope | None = None
        self._cancel_requested = False
        self._busy_scope: trio.CancelScope | None = None
        #: Keys typed while a turn ran, not yet read by a prompt.
        self.typed_ahead = ""
        #: Set by a prompt the session refused as ``busy`` (another client's
        #: request runs): the prompt goes back into the line editor.
        self.refused_busy = False
        self._kept_prompt = ""
        #: This client's /rewind is running (it redraws the conversation itself).
        self.rewinding_here = False
        #: ``!command`` results, sent ahead of the next prompt (as gemini-cli
        #: adds them to the conversation).
        self.pending_context: list[str] = []
        #: The IDE companion (``/ide``): its editor context goes with the
        #: next prompt, and this client's edits are reviewed in its editor.
        self.ide = IdeCompanion(env.cwd, env.environ)
        self.stats = SessionStats()
        #: The last turn's answer and thought (/copy, Ctrl-T).
        self.last_answer = ""
        self.last_thought = ""
        #: (1.4) The last turn's sub-agents, expanded (Ctrl-T).
        self.last_agents: list[Any] = []
        #: The last turn's tool calls, with their whole output (/output).
        self.last_tools: list[Any] = []
        #: What the toolbar says about the connection while it is being
        #: re-established ("reconnecting (attempt 3)…", then "reconnected").
        self.connection_note = ""
        #: Session ids Tab offers after /resume (filled by /sessions and at
        #: connect).
        self.known_sessions: list[str] = []
        no_color = bool(environ.get("NO_COLOR"))
        if self.console.is_terminal or input is not None:
            self.reader: LineReader | PlainLineReader = LineReader(
                history=open_history(env.config_dir / HISTORY_FILE),
                completer=SlashCompleter(self),
                toolbar=self._toolbar,
                no_color=no_color,
                input=input,
                output=output,
                on_shift_tab=self.cycle_approval_mode,
                on_ctrl_t=self.show_last_thought,
                on_ctrl_y=self.toggle_yolo,
                edit_line=self.edit_in_editor,
                vi_mode=self._general.vim_mode,
            )

            async def ask_choice(header: Any, choices: list[tuple[str, str]], default: int,
                                 multi: frozenset[str] | None = None) -> str:
                question = [("class:question", header)]
                return await read_choice(question, choices, default=default, no_color=no_color,
                                         input=input, output=output, multi=multi)

            async def ask_text(question: str, secret: bool = False) -> str | None:
                return await read_text(question, input=input, output=output, secret=secret)

            async def ask_search(header: str, choices: list[tuple[str, str]]) -> str:
                return await read_search([("class:question", header)], choices, no_color=no_color,
                                         input=input, output=output)
        else:
            plain = PlainLineReader(env.stdin, env.stderr)
            self.reader = plain

            async def ask_choice(header: Any, choices: list[tuple[str, str]], default: int,
                                 multi: frozenset[str] | None = None) -> str:
                return await plain.read_choice(header, choices, default=default, multi=multi)

            ask_text = plain.read_text
            ask_search = plain.read_search
        #: Approval questions showing now, and the line prompt's read (closed
        #: while a question shows: one reader of the keys at a time).
        self._questions = 0
        self._no_question = trio.Event()
        self._no_question.set()
        self._read_scope: trio.CancelScope | None = None
        self._held_lines: list[Callable[[], None]] = []
        self.asker = InlineAsker(self.console, ask_choice, ask_text, lambda: self.view, self._start_interrupt,
                                 drain=self._drain_typed_ahead, hold_prompt=self._hold_prompt,
                                 read_search=ask_search)
        #: Custom commands (.gemini/commands/*.toml); /commands reload rereads them.

        load_custom_commands(self)

    # --- state the commands and the toolbar read -----------------------------------------

    @property
    def model(self) -> str:
        if self.model_override:
            return self.model_override
        connected = self.client.connected if self.client else None
        return connected.model if connected else ""

    @property
    def approval_mode(self) -> ApprovalMode:
        return self.settings.tools.approval_mode

    def set_approval_mode(self, mode: ApprovalMode) -> None:
        self.settings = self.settings.with_tools(approval_mode=mode)
        if self.client is not None:
            self.client.executor.policy.mode = mode

    def _mode_switched(self, mode: ApprovalMode) -> None:
        """The connection's approval mode changed (plan mode's tools, the
        server of a ``--tools server`` session, a command): the next
        connection opens in it, and the toolbar shows it."""
        self.settings = self.settings.with_tools(approval_mode=mode)
        self.reader.invalidate()

    def cycle_approval_mode(self) -> str | None:
        """Shift+Tab at the prompt: the next approval mode, shown in the
        toolbar: default → auto_edit → plan → default, as gemini-cli cycles.
        Never into yolo by a stray key: that takes /approval-mode yolo (from
        yolo, Shift+Tab goes back to default). A mode refused now
        (auto_edit in an untrusted folder) is passed over; returns why,
        for the toolbar, or None."""
        modes = [m for m in ApprovalMode if m is not ApprovalMode.YOLO]
        current = self.approval_mode
        start = modes.index(current) if current in modes else -1
        skipped = None
        for step in range(1, len(modes) + 1):
            mode = modes[(start + step) % len(modes)]
            refused = self.mode_refused(mode)
            if refused is None:
                self.set_approval_mode(mode)
                break
            skipped = skipped or f"{mode.value} skipped: {refused}"
        return skipped

    @property
    def _general(self) -> Any:
        """settings.json's ``general`` section."""
        loaded = self.settings.loaded_settings
        return loaded.merged.general if loaded is not None else GeneralSettings()

    def toggle_yolo(self) -> str | None:
        """Ctrl+Y at the prompt (gemini-cli's ``app.toggleYolo``): yolo on,
        or back to default. Returns why it was refused (gemini-cli's
        words), or None. Only ever pressed at the line prompt: an approval
        question shows its own menu, which takes no such key, so a question
        already asked stays asked whatever the mode becomes."""
        if self.approval_mode is ApprovalMode.YOLO:
            self.set_approval_mode(ApprovalMode.DEFAULT)
            return None
        refused = self.mode_refused(ApprovalMode.YOLO)
        if refused is None:
            self.set_approval_mode(ApprovalMode.YOLO)
        return refused

    def mode_refused(self, mode: ApprovalMode) -> str | None:
        """Why ``mode`` may not be turned on now
        (:func:`approval_mode_refusal`), or None."""
        return approval_mode_refusal(self.settings.loaded_settings, mode.value)

    def edit_in_editor(self, text: str) -> str:
        """Ctrl+G or Ctrl+X: ``text`` edited in ``general.preferredEditor``,
        ``$VISUAL`` or ``$EDITOR`` (:mod:`gemini_split.ui.repl.external_editor`);
        runs in the prompt's worker thread, the terminal handed over."""
        environ = self.env.environ
        return edit_text(text, editor_command(self._general.preferred_editor, environ), environ)

    def show_last_thought(self) -> None:
        """Ctrl-T at the prompt: the last thought in full (it is shown
        collapsed to one line while the answer streams), and the last
        turn's sub-agents expanded (shown as one block each while they run)."""
        agents = self.last_agents
        if not self.last_thought and not agents:
            self.console.print(Text("No thought yet in this session.", style="dim"))
            return
        if self.last_thought:
            self.console.print(Text("✻ Thought:", style="dim italic bold"))
            self.console.print(Text(visible(self.last_thought.strip()), style="dim italic"))
        for line in agents:  # (1.4) the last turn's sub-agents, expanded
            self.console.print(line)

    @asynccontextmanager
    async def _hold_prompt(self) -> AsyncIterator[None]:
        """While an approval question shows: the line prompt is closed (what
        was typed into it is kept) and opens again once no question shows."""
        self._questions += 1
        if self._questions == 1:
            self._no_question = trio.Event()
        if self._read_scope is not None:
            self._read_scope.cancel()
        try:
            yield
        finally:
            self._questions -= 1
            if not self._questions:
                held, self._held_lines = self._held_lines, []
                for show in held:
                    show()
                self._no_question.set()

    def _drain_typed_ahead(self) -> None:
        """Keys typed during a turn, kept for the next prompt. Only with the
        line editor: plain input (output not a terminal) is read line by
        line, in order."""
        if isinstance(self.reader, LineReader):
            self.typed_ahead += drain_typed_ahead(self.env.stdin)

    def profile_names(self) -> list[str]:
        try:
            return self.store.names()
        except ProfileError:
            return []

    def require_client(self) -> ProtocolClient:
        if self.client is None:
            raise CommandUsage("not connected: /clear reconnects, /server connect NAME picks a server")
        return self.client

    def print_usage(self, text: str) -> None:
        # visible(): a usage line may quote a server's words (an MCP error, an argument name).
        self.console.print(Text(visible(text), style="yellow"))

    def keep_prompt(self, text: str) -> None:
        """Put ``text`` in the next prompt's input (a rewound prompt)."""
        self._kept_prompt = text

    def print_notice(self, text: str) -> None:
        """A line from elsewhere (an MCP server's failure): shown, never obeyed."""
        self.console.print(Text(visible(text), style="red"))

    # --- the loop ---------------------------------------------------------------------------

    async def run(self) -> ExitStatus:
        """Connect, then read and answer until /quit or Ctrl-D."""
        try:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGWINCH) as signals:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._watch_signals, signals)
                    if self.settings.session.attach:
                        self.follower.hold()  # an attach's replay goes under the banner
                    status = await self._first_connection()
                    if status is None:
                        self._banner()
                        self.attached_clients()  # who "you" is, before the replay is shown
                        if _ide_enabled(self.settings):
                            await self.connect_ide()
                    self.follower.release()
                    if status is None:
                        if self.settings.session.resume and not self.settings.session.attach:
                            if await self.show_history() is False:
                                nursery.cancel_scope.cancel()
                                return ExitStatus.SUCCESS
                        self._say_goodbye(await self._loop())
                        status = ExitStatus.SUCCESS
                    nursery.cancel_scope.cancel()
        finally:
            if self._embedded is not None:
                with trio.CancelScope(shield=True):
                    await self._embedded.aclose()
        return status

    async def _first_connection(self) -> ExitStatus | None:
        """Connect before the first prompt; on failure, the exit status."""
        with self.ctrl_c_cancels():
            try:
                await self._open(self.settings, self.server_label)
                return None
            except BadInput as exc:  # --resume N with no such session here
                self.console.print(error_panel(str(exc), title="Cannot resume"))
                return ExitStatus.BAD_INPUT
            except (TransportError, ConfigurationError) as exc:
                message, code, status = describe_connect_error(exc)
                self.console.print(error_panel(f"{self.settings.endpoint.server}: {message}", code=code,
                                               title="Cannot connect"))
                return status
        self.print_usage("Interrupted.")
        return ExitStatus.INTERRUPTED

    async def _next_input(self) -> str | None:
        """A message typed (and sent with Enter) while the last answer
        streamed, else the next prompt, with any unfinished typed-ahead
        line already in it."""
        queued, rest = split_queued(self.typed_ahead)
        self.typed_ahead = rest
        if queued.strip():
            self.console.print(Text.assemble(("⏎ sending what you typed during the answer: ", "dim"),
                                             visible(queued)))
            return queued
        self.typed_ahead = ""
        if self._kept_prompt:
            rest, self._kept_prompt = self._kept_prompt + rest, ""
        while True:
            await self._no_question.wait()
            with trio.CancelScope() as scope:
                self._read_scope = scope
                try:
                    return await self.reader.read(default=rest)
                finally:
                    self._read_scope = None
            rest = getattr(self.reader, "unsent", rest)  # a question took the keys: then the prompt again

    def _context(self) -> Any:
        """The session context to send, with the approval mode as it is now."""
        context = self.settings.context.message
        if context is None:
            return None

        return msgspec.structs.replace(context, approval_mode=self.approval_mode.value)

    async def _loop(self) -> QuitRepl | None:
        """Read and answer until Ctrl-D (None) or /quit (returned)."""
        # -i/--prompt-interactive (or a prompt given at a terminal): the first turn.
        first = self.options.prompt_interactive
        while True:
            text, first = (first, None) if first else (await self._next_input(), None)
            if text is None:
                return None
            if not text.strip():
                continue
            self.refused_busy = False
            try:
                if text.startswith("!"):
                    await self.run_shell(text[1:])
                elif text.startswith("//"):
                    await self.run_turn(text[1:])
                elif text.startswith("/"):
                    await run_command(self, text.strip())
                else:
                    await self.run_turn(text)
            except QuitRepl as quitting:
                return quitting
            except CommandUsage as exc:
                self.print_usage(str(exc))
            except Exception as exc:  # a bug must not end the user's session
                log.exception("REPL command failed")
                self.console.print(error_panel(f"{type(exc).__name__}: {exc}", title="Internal error",
                                               hint="This is a bug in gemini-split; the REPL goes on. "
                                                    "--debug logs the details."))
            if self.refused_busy:
                self._kept_prompt = text

    def _say_goodbye(self, quitting: QuitRepl | None) -> None:
        """gemini-cli's exit summary: the session, what it cost here, and
        the command that resumes it (none when it was deleted, or when
        nothing was saved: a session is stored at its first prompt)."""
        deleted = quitting.deleted if quitting is not None else None
        stats = deleted or self.stats
        saved = deleted is None and (stats.turns > 0 or self.settings.session.resume is not None)
        resume = resume_command(stats.session_id, self._server_to_resume()) if saved else None
        for line in goodbye(stats, resume=resume, deleted=deleted is not None):
            self.console.print(line, soft_wrap=True)  # the command stays one line, to copy

    def _server_to_resume(self) -> str | None:
        """What ``--server`` names this session's server in a command typed
        later: as it was named here (a profile, ``local``, an address);
        None in embedded mode."""
        return None if self.settings.endpoint.server is None else self.server_label

    def _banner(self) -> None:
        connected = self.client.connected if self.client else None
        server = self.settings.endpoint.server
        where = "embedded (in this process)" if server is None else server
        if self.server_label not in ("embedded", server):
            where = f"{self.server_label} ({where})"
        if not self.ui_settings.hide_banner:
            self.console.print(Text.assemble(
                (f"gemini-split {__version__}", "bold"), f" · {where} · model {self.model or '?'}",
                f" · session {connected.session_id[:8] if connected else '?'}",
            ))
        if not self.ui_settings.hide_tips:
            self.console.print(Text(f"/help for commands · {NEWLINE_KEYS.split(' (')[0]} for a newline · "
                                    "Ctrl-C cancels · Ctrl-D quits", style="dim"))
        if self.theme_warning:
            self.print_usage(self.theme_warning)

    def _toolbar(self) -> AnyFormattedText:
        """The bottom line: state that matters first (the connection while it
        is being re-established, who else is attached), hints last; what
        does not fit the terminal's width is left out, least important first."""
        connected = self.client.connected if self.client else None
        session = connected.session_id[:8] if connected else "not connected"
        attached = len(self.attached_clients())
        # (label, value, rank): the lowest rank is left out first.
        fields: list[tuple[str, str, int]] = []
        if self.connection_note:
            fields.append(("", self.connection_note, 9))
        if attached > 1:
            fields.append(("attached ", str(attached), 8))
        fields += [("server ", self.server_label, 3), ("session ", session, 5),
                   ("model ", _short_model(self.model), 2), ("approval ", self.approval_mode.value, 7)]
        if self.settings.context.system_prompt_file is not None:
            fields.append(("", SYSTEM_PROMPT_INDICATOR, 6))  # GEMINI_SYSTEM_MD, as gemini-cli shows it
        return fit_toolbar(fields, "Alt+Enter newline · /help", _terminal_columns())

    # --- turns -----------------------------------------------------------------------------

    async def run_shell(self, command: str) -> None:
        """``!command``: run it here, in the workspace, with the user's own
        shell and environment; show its output; keep command and output
        for the model, sent with the next prompt. A lone ``!`` toggles
        shell mode."""
        if not command.strip():
            self.reader.toggle_shell_mode()
            return
        client = self.require_client()
        with self.ctrl_c_cancels() as scope:
            output, status = await run_passthrough(command, client.executor.workspace.root, self.console)
        if scope.cancelled_caught:
            self.print_usage("Interrupted.")
            return
        self.pending_context.append(format_for_model(command, output, status))
        self.console.print(Text(f"(exit status {status}; the command and its output go to the model with "
                                "your next message)", style="dim"))

    async def _expand(self, client: ProtocolClient, prompt: str,
                      references: bool = True) -> tuple[str, tuple[Attachment, ...]]:
        """The prompt with ``@path`` content (unless ``references`` is
        false) and pending ``!command`` output, and the images it attaches."""
        attachments: tuple[Attachment, ...] = ()
        if references:
            prompt, attachments = await attach_references(
                prompt, client.executor,
                lambda line, warning: self.console.print(Text(line, style="yellow" if warning else "dim")),
                mcp=client.mcp_servers)
        editor = self.ide.context_text()
        if editor is not None:  # gemini-cli sends it ahead of the prompt when it changed
            self.pending_context.insert(0, editor)
        if self.pending_context:
            prompt = "\n\n".join([*self.pending_context, prompt])
            self.pending_context.clear()
        return prompt, attachments

    async def run_turn(self, prompt: str, *, carry_context: bool = True,
                       attachments: tuple[Attachment, ...] = (), references: bool = True,
                       compress: bool = False, start: Callable[[], Awaitable[Any]] | None = None,
                       typed: str = "") -> None:
        """One prompt and its answer. ``carry_context=False`` sends the prompt
        as is (no @path expansion, pending context kept for later);
        ``references=False`` skips only the @path expansion (a custom
        command's prompt, already expanded, with its ``attachments``;
        ``typed``: the command as the user typed it, shown as the prompt).
        ``compress``: no prompt, the server compresses the history
        (``/compress``), shown and ended as a turn is. ``start``: no
        prompt, this starts the request and returns its outcome (``/restore``
        proposing a call again)."""
        client = self.require_client()
        pending = list(self.pending_context)
        if carry_context and not compress and start is None:
            prompt, more = await self._expand(client, prompt, references)
            attachments = (*attachments, *more)
        # gemini-cli's words while it compresses.
        view = TurnView(self.console, code_theme=self.code_theme,
                        **({"waiting": "Compressing chat history"} if compress else {}))
        view.on_change = self.stats.counter(self.model or "the server default")
        self.view = view
        self._cancel_requested = False
        outcome = None
        view.start()
        try:
            with no_echo(self.env.stdin), trio.CancelScope() as scope:
                self._turn_scope = scope
                if start is not None:
                    outcome = await start()
                elif compress:
                    outcome = await client.compress()
                else:
                    outcome = await client.run_turn(prompt, model=self.model_override, attachments=attachments,
                                                    context=self._context(), typed=typed)
                self._drain_typed_ahead()
        finally:
            self._turn_scope = None
            self.view = None
            view.close()
        if outcome is None:
            self.print_usage("The server did not confirm the cancel; starting a new session.")
            await self.reconnect(None, "new session")
            return
        if outcome.error is not None:
            error = outcome.error
            if error.code == ErrorCode.CANCELLED:
                self.console.print(Text("Cancelled.", style="yellow"))
            elif error.code == ErrorCode.BUSY:
                # Another client's request runs: nothing was sent, nothing is lost.
                self.pending_context = pending
                self.refused_busy = True
                self.console.print(error_panel(error.message, code=error.code,
                                               hint="Your prompt is kept below: Enter sends it again once "
                                                    "that request has finished."))
            else:
                self.console.print(error_panel(error.message, code=error.code))
                if error.code == ErrorCode.CONNECTION_LOST or error.fatal:
                    self.client = None
        elif outcome.cancelled:
            self.console.print(Text("Cancelled.", style="yellow"))
        elif outcome.finished is not None:
            self.console.print(usage_line(outcome.finished.usage, view.elapsed))
        self.stats.add_turn(outcome.finished.usage if outcome.finished is not None else None, view)
        if view.answer.strip():
            self.last_answer = view.answer
        if view.last_thought:
            self.last_thought = view.last_thought
        if view.agent_log:
            self.last_agents = view.expanded_agents()
        self.last_tools = view.finished_tools

    async def _on_event(self, event: ServerEvent) -> None:
        if isinstance(event, Rewound) and event.request_id is None and self._nursery is not None \
                and not self.rewinding_here:
            # Not here: the history is read through the connection whose
            # reader is calling us. (This client's own /rewind redraws
            # itself, after saying what it did to the files.)
            self._nursery.start_soon(self.redraw_rewound, event)
        view = self.view
        own = self.client.turn_request_id if self.client is not None else None
        if view is not None and (event.request_id is None or event.request_id == own) \
                and not isinstance(event, ClientsChanged | Rewound):
            view.on_event(event)
        else:
            # Also before self.client is set: an attach's replay can arrive
            # while open_client is still returning (it was dropped then).
            self.attached_clients()  # the list starts from connected
            show = functools.partial(self.follower.on_event, event, own_request=own)
            if self._questions:
                # Not into an approval menu (it would erase the question):
                # shown once no question is open.
                self._held_lines.append(show)
            elif isinstance(self.reader, LineReader):
                # Another client's prompt or answer while this one types:
                # above the open prompt, which is drawn again under it.
                await self.reader.above(show)
                self.reader.invalidate()  # the toolbar's attached count
            else:
                show()

    def attached_clients(self) -> list[tuple[str, str]]:
        """Who is attached to this session now: ``[(label, role)]``. (The
        follower is kept up with the connection here: its session's list
        and this client's own label, which it says as "you".)"""
        connected = self.client.connected if self.client else None
        if connected is not None:
            self.follower.me = connected.label  # a reconnect may be given another
            if self.follower.session != connected.session_id:
                # A new connection: start from what connected said.
                self.follower.session = connected.session_id
                self.follower.attached = [(c.label, c.role) for c in connected.attached]
        return self.follower.attached

    def _start_interrupt(self) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(self.interrupt_turn)

    async def interrupt_turn(self) -> None:
        """Ctrl-C during a turn: ask the server to cancel; the second time,
        stop waiting for it."""
        scope = self._turn_scope
        if scope is None:
            return
        if self._cancel_requested:
            scope.cancel()
            return
        self._cancel_requested = True
        if self.view is not None:
            self.view.set_status("Cancelling… (Ctrl-C again to stop waiting)")
        scope.deadline = trio.current_time() + CANCEL_GRACE
        if self.client is not None:
            await self.client.cancel()

    async def _watch_signals(self, signals: Any) -> None:
        async for signum in signals:
            if signum == signal.SIGWINCH:
                self.reader.on_resize()
            elif self._turn_scope is not None:
                await self.interrupt_turn()
            elif self._busy_scope is not None:
                self._busy_scope.cancel()

    async def interruptible(self, awaitable: Awaitable[T], status: str | None = None) -> T | None:
        """Await a network step that Ctrl-C may abandon. Connection errors
        are shown in a panel; None then (and when interrupted)."""
        if status:
            self.console.print(Text(status, style="dim"))
        with self.ctrl_c_cancels():
            try:
                return await awaitable
            except (TransportError, ConfigurationError) as exc:
                message, code, _status = describe_connect_error(exc)
                self.console.print(error_panel(message, code=code))
                return None
        self.print_usage("Interrupted.")
        return None

    @contextmanager
    def ctrl_c_cancels(self) -> Iterator[trio.CancelScope]:
        """A block that Ctrl-C cancels (outside a turn: a command's network
        step or slow local work). Yields its scope."""
        with trio.CancelScope() as scope:
            self._busy_scope = scope
            try:
                yield scope
            finally:
                self._busy_scope = None

    # --- connections ---------------------------------------------------------------------------

    async def reconnect(self, target: str | None, why: str) -> bool:
        """Open a new session: on the same server when ``target`` is None,
        else on the profile or address ``target`` (or ``embedded``)."""
        if target is None:
            settings, label = self._fresh(self.settings), self.server_label
        elif target == "embedded":
            self._embedded_service()  # the key is checked now
            settings = self.settings.reaching(server=None, connect=ConnectOptions())
            label = "embedded"
        else:
            settings, label = settings_for(target, self.env, self.settings), target
        address = settings.endpoint.server or "embedded"
        opened = await self.interruptible(self._open(settings, label), f"Connecting to {address}…")
        if opened:
            connected = self.client.connected if self.client else None
            session = connected.session_id[:8] if connected else "?"
            self.console.print(Text(f"{why.capitalize()}: {label} · session {session} · model {self.model or '?'}",
                                    style="green"))
        return bool(opened)

    async def resume(self, target: str) -> bool:
        """Continue an earlier session (an id or ``latest``) on the current
        server, and redraw its conversation."""
        if needs_scope(target):  # latest or N: among this project's sessions
            try:
                sessions = await project_sessions(self.require_client(), self.settings)
                chosen = pick(sessions, target)
            except (RequestFailed, BadInput) as exc:
                self.console.print(error_panel(str(exc), title="Cannot resume"))
                return False
            if chosen is None:
                self.console.print(Text(NO_SESSIONS, style="yellow"))
                return False
            target = chosen.id
        settings = self._fresh(self.settings).choosing(resume=target)
        try:
            opened = await self.interruptible(self._open(settings, self.server_label), f"Resuming {target}…")
        except (TransportError, ConfigurationError) as exc:
            message, code, _ = describe_connect_error(exc)
            self.console.print(error_panel(message, code=code, title="Cannot resume"))
            return False
        if opened and await self.show_history() is False:
            await self.reconnect(None, "new conversation")
            return False
        return bool(opened)

    async def redraw_rewound(self, event: Rewound) -> None:
        """The session was rewound (by this client or another): the
        conversation as it now is, under a line saying so."""
        client = self.client
        if client is None:
            return
        try:
            history = await client.get_history()
        except (TransportError, RequestFailed) as exc:
            self.print_usage(f"The session was rewound; it could not be redrawn: {exc}")
            return

        def show() -> None:
            self.console.rule(Text(f"the conversation as it is now ({event.points} prompt"
                                   f"{'s' if event.points != 1 else ''})", style="dim"), style="dim")
            for content in history.messages:
                for line in history_lines(content):
                    self.console.print(line)

        if isinstance(self.reader, LineReader) and not self._questions:
            await self.reader.above(show)
        else:
            show()

    async def show_history(self) -> bool | None:
        """Redraw the conversation of a resumed session from its history;
        if the session was started in another directory, ask whether to go
        on here (its tools run where we are). False: the user chose not to."""
        client = self.require_client()
        history = await self.interruptible(client.get_history(), "Loading the conversation…")
        if history is None:
            return None
        connected = client.connected
        self.console.print(Text(f"Resumed session {connected.session_id if connected else '?'} "
                                f"({len(history.messages)} messages):", style="green"))
        for content in history.messages:
            for line in history_lines(content):
                self.console.print(line)
        tools = self.settings.tools
        started = runs_elsewhere(history.messages, tools.workspace) if tools.run_on == "client" else None
        if started is None:
            return True
        here = visible(str(tools.workspace))
        # Said in full (a path may be longer than a menu line), then asked.
        self.console.print(Text(f"This session was started in another directory, {visible(started)}; "
                                f"its tools would now run here, in {here}.", style="yellow"))
        choice = await self.asker.read_choice(
            "Go on here?", [("here", "Continue here (its tools run in this directory)"), ("cancel", "Cancel")], 1)
        if choice == "here":
            return True
        command = resume_command(connected.session_id if connected else "", self._server_to_resume())
        self.console.print(Text(f"Not resumed here: run {visible(command)} in {visible(started)} to go on "
                                "where it was.", style="yellow"))
        return False

    def _on_connection(self, state: str, attempt: int, reason: str) -> None:
        if state == "reconnecting":
            self.connection_note = f"reconnecting (attempt {attempt})…"
        elif state == "reconnected":
            self.connection_note = "reconnected"
            if self._nursery is not None:
                self._nursery.start_soon(self._clear_connection_note, "reconnected")
        self.reader.invalidate()

    async def _clear_connection_note(self, note: str) -> None:
        """Take ``note`` off the toolbar after :data:`NOTE_SECONDS`, unless
        another has replaced it meanwhile."""
        await trio.sleep(NOTE_SECONDS)
        if self.connection_note == note:
            self.connection_note = ""
            self.reader.invalidate()

    def _fresh(self, settings: ClientSettings) -> ClientSettings:
        # Embedded or not, a new connection to the same server: the embedded
        # service (and its model) is this process's one. A new session, not
        # the one --resume or --session-id named at start.
        return settings.choosing(resume=None, new_session_id=None)

    def _embedded_service(self) -> AgentService:
        """This process's embedded service, built on first use (the key is
        checked then) and closed when the REPL ends."""
        if self._embedded is None:
            self._embedded = embedded_service(self.options, self.env)
        return self._embedded

    async def _serve_embedded(self) -> str:
        """Where this process's embedded service listens: served from the
        REPL's nursery from its first use until the REPL ends."""
        assert self._nursery is not None
        if self._embedded_address is None:
            self._embedded_address = await self._nursery.start(serve_embedded, self._embedded_service())
        return self._embedded_address

    async def _open(self, settings: ClientSettings, label: str) -> bool:
        """Connect to ``settings``; on success close the old connection and
        make the new one current."""
        assert self._nursery is not None
        if settings.endpoint.server is None:
            settings = settings.reaching(embedded_address=await self._serve_embedded())
        if needs_scope(settings.session.resume):  # --resume latest|N: this project's session
            settings = await resolve_resume(settings, lambda line: self.console.print(Text(line, style="yellow")))
        with single_exceptions():
            client, scope = await self._nursery.start(self._hold, settings)
        old = self._connection_scope
        self.client, self._connection_scope = client, scope
        client.executor.policy.listeners.append(self._mode_switched)
        self.session_id = client.connected.session_id if client.connected else self.session_id
        self.asker.grants.clear()  # they lived in the old connection's policy
        self.stats = SessionStats(session_id=client.connected.session_id if client.connected else "")
        self.pending_context.clear()  # it was for the old conversation
        self.settings, self.server_label = settings, label

        if old is not None:
            old.cancel()
        self._nursery.start_soon(self._refresh_known_sessions, client)
        return True

    async def connect_ide(self) -> None:
        """Connect to the IDE companion (in the REPL's nursery, where the
        connection lives until ``/ide disable`` or the end); a failure is
        said with gemini-cli's words."""
        assert self._nursery is not None
        await self.ide.connect(self._nursery)
        error, text = self.ide.status_text()
        if error:
            self.print_usage(text)

    async def _refresh_known_sessions(self, client: ProtocolClient) -> None:
        """Session ids for Tab after /resume (best effort, quietly)."""
        try:
            self.known_sessions = [s.id for s in await client.list_sessions(timeout=5)]
        except (TransportError, RequestFailed):
            pass

    async def _hold(self, settings: ClientSettings, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Keep one connection open until its scope is cancelled."""
        started = False
        try:
            with trio.CancelScope() as scope:
                async with open_client(settings, on_event=self._on_event, asker=self.asker,
                                       on_notice=self.print_notice,
                                       on_connection=self._on_connection) as client:
                    client.executor.ide = self.ide
                    task_status.started((client, scope))
                    started = True
                    await trio.sleep_forever()
        except Exception:
            if not started:
                raise
            log.debug("a connection ended with an error", exc_info=True)


def _ide_enabled(settings: ClientSettings) -> bool:
    loaded = settings.loaded_settings
    return loaded is not None and loaded.merged.ide.enabled


def _ui_settings(settings: ClientSettings) -> Any:
    loaded = settings.loaded_settings
    return loaded.merged.ui if loaded is not None else UISettings()


def fit_toolbar(fields: list[tuple[str, str, int]], hints: str, width: int) -> list[tuple[str, str]]:
    """The toolbar's fragments for ``fields`` (``(label, value, rank)``, in
    display order) and ``hints`` (last), in at most ``width`` columns: when
    space runs out the hints go first, then the fields of lowest rank; the
    last field left, if still wider than the line, is cut with ``…``."""
    bar, key = "class:bottom-toolbar", "class:bottom-toolbar.key"

    def fragments(shown: list[tuple[str, str, int]], with_hints: bool) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for i, (label, value, _) in enumerate(shown):
            out += [(bar, (" · " if i else " ") + label), (key, value)]
        if with_hints:
            out.append((bar, f"  │ {hints} "))
        return out

    def columns(frags: list[tuple[str, str]]) -> int:
        return sum(get_cwidth(text) for _, text in frags)

    shown = list(fields)
    with_hints = True
    while True:
        frags = fragments(shown, with_hints)
        if columns(frags) <= width:
            return frags
        if with_hints:
            with_hints = False
        elif len(shown) > 1:
            shown.remove(min(shown, key=lambda field: field[2]))
        else:
            break
    label, value, _ = shown[0] if shown else ("", "", 0)
    room = max(1, width - 1 - get_cwidth(label))
    return [(bar, " " + label), (key, value[:room - 1] + "…" if get_cwidth(value) > room else value)]


def _terminal_columns() -> int:
    """The width the toolbar is drawn in (80 when unknown)."""
    app = get_app_or_none()
    try:
        return app.output.get_size().columns if app is not None else 80
    except Exception:  # noqa: BLE001 - an output that cannot say: the classic width
        return 80


def _short_model(name: str, limit: int = 32) -> str:
    """The model name for the toolbar: ``scripted:`` scripts by file name."""
    if name.startswith("scripted:"):
        name = "scripted:" + name.rsplit("/", 1)[-1]
    return name if len(name) <= limit else "…" + name[-(limit - 1):]
