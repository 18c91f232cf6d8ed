"""Reading the user's input with prompt-toolkit, off the Trio loop.

prompt-toolkit runs on asyncio, gemini-split on Trio. Each prompt (the
line editor, an approval key) is a prompt-toolkit ``Application`` run with
``app.run()`` in a Trio worker thread (``trio.to_thread.run_sync``): the
application gets its own asyncio loop in that thread for as long as it runs,
and the Trio loop in the main thread is never blocked. Nothing else writes to
the terminal while a prompt runs but through :meth:`LineReader.above` (what
other clients attached to the session do), which prints above the prompt and
draws it again.

While a prompt runs the terminal is in raw mode, so Ctrl-C arrives as a key
(clear the line; at an approval question: refuse and cancel the turn). Between
prompts it is in cooked mode and Ctrl-C is a SIGINT, which the REPL's Trio
signal receiver turns into a cancel of the running turn.

When the output is not a terminal, :class:`PlainLineReader` reads plain
lines instead (no escape codes in a pipe or a log).
"""

from __future__ import annotations

import contextvars
import os
import re
import select
import termios
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any

import trio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, create_app_session, run_in_terminal
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import Completer
from prompt_toolkit.document import Document
from prompt_toolkit.enums import EditingMode
from prompt_toolkit.filters import Condition
from prompt_toolkit.filters import vi_mode as vi_editing
from prompt_toolkit.formatted_text import AnyFormattedText, to_formatted_text
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.key_binding.key_processor import KeyPressEvent
from prompt_toolkit.key_binding.vi_state import InputMode
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.output import ColorDepth, Output
from prompt_toolkit.styles import Style

#: Shown by /help and the banner.
NEWLINE_KEYS = "Alt+Enter (or Esc then Enter, or Ctrl-J, or a trailing \\)"

_STYLE = Style.from_dict({
    "prompt": "bold ansicyan",
    "prompt.shell": "bold ansimagenta",
    "bottom-toolbar": "noreverse bg:ansibrightblack fg:ansiwhite",
    "bottom-toolbar.key": "bold",
    "bottom-toolbar.hint": "fg:ansiyellow",
    "choice.selected": "bold",
    "choice.help": "italic",
    "question": "bold",
})


#: Applications whose worker thread is running them now (normally at most
#: one; see :func:`run_in_worker`).
_running: dict[Application[Any], threading.Event] = {}
_running_lock = threading.Lock()
#: The context each running application's thread runs it in (its own app
#: session): what is called into its loop from the Trio thread runs there.
_contexts: dict[Application[Any], contextvars.Context] = {}


def call_in_app(app: Application[Any], callback: Callable[[], Any]) -> bool:
    """Call ``callback`` soon in ``app``'s event loop, in its app session
    (so that prompt-toolkit's ``get_app()`` there is ``app``); False when
    ``app`` is not running (nothing is called). Safe from any thread."""
    loop = app.loop
    context = _contexts.get(app)
    if not app.is_running or loop is None or loop.is_closed() or context is None:
        return False
    try:
        loop.call_soon_threadsafe(callback, context=context)
    except RuntimeError:  # the loop closed in between
        return False
    return True


def print_above(app: Application[Any], show: Callable[[], None]) -> None:
    """In ``app``'s loop: erase the prompt, run ``show`` (which prints),
    draw the prompt again below what it printed.

    Not prompt-toolkit's ``run_in_terminal``: that puts the terminal back
    in cooked mode while ``show`` runs, and a key the user presses in that
    window is taken by the terminal's line discipline instead: echoed where
    ``show`` prints, and Enter turned into Ctrl-J (ICRNL), which the line
    editor takes as a newline, so the prompt is not sent. Here the terminal
    stays raw and the input attached: keys pressed meanwhile wait, unchanged,
    for the prompt. (The output flags are not raw: newlines print as such.)"""
    if app.is_done or getattr(app, "_running_in_terminal", False):
        # The prompt is ending, or something else has the terminal (Ctrl+G's
        # editor, Ctrl-T): print in turn after it, as prompt-toolkit would.
        run_in_terminal(show, in_executor=False)
        return
    app.renderer.erase()
    try:
        show()
    finally:
        # As run_in_terminal ends; invalidate is the public fallback.
        app.renderer.reset()
        getattr(app, "_request_absolute_cursor_position", lambda: None)()
        getattr(app, "_redraw", app.invalidate)()


async def run_in_worker(app: Application[Any], call: Callable[[], Any]) -> Any:
    """Run ``call`` (which runs ``app``) in a worker thread.

    One application at a time: one still running (a prompt whose caller
    was cancelled and whose thread has not finished yet) is asked to exit
    first, so that two never read the same keys. Each runs in an app session
    of its own (``create_app_session``): prompt-toolkit finds "the current
    application" — the one a key binding's ``event.app`` exits — through a
    process-wide default session otherwise, which two threads would share,
    and a key answering an approval menu could end the line editor with the
    menu's answer as the typed prompt.

    Cancellation: the application is asked to exit (as if with Ctrl-D) and
    the thread is given a moment to restore the terminal before
    ``trio.Cancelled`` propagates."""
    await _end_others(app)
    finished = threading.Event()
    with _running_lock:
        _running[app] = finished

    def target() -> Any:
        try:
            with create_app_session(input=app.input, output=app.output):
                _contexts[app] = contextvars.copy_context()
                return call()
        finally:
            _contexts.pop(app, None)
            finished.set()
            with _running_lock:
                _running.pop(app, None)

    try:
        return await trio.to_thread.run_sync(target, abandon_on_cancel=True)
    except trio.Cancelled:
        _ask_to_exit(app, finished)
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            while not finished.is_set():
                _ask_to_exit(app, finished)
                await trio.sleep(0.02)
        raise


async def _end_others(app: Application[Any]) -> None:
    """Ask every other application still running to exit, and wait (up to
    two seconds each) until its thread has finished."""
    with _running_lock:
        others = [(other, done) for other, done in _running.items() if other is not app]
    for other, done in others:
        with trio.CancelScope(shield=True), trio.move_on_after(2):
            while not done.is_set():
                _ask_to_exit(other, done)
                await trio.sleep(0.02)


def _ask_to_exit(app: Application[Any], finished: threading.Event) -> None:
    if finished.is_set():
        return

    def exit_now() -> None:
        if app.is_running and not app.future.done():  # type: ignore[union-attr]
            # Not left on the screen: a prompt its caller gave up on is no
            # place to type into, and what follows is drawn where it was.
            app.erase_when_done = True
            app.exit(exception=EOFError())

    call_in_app(app, exit_now)


@contextmanager
def no_echo(stream: IO[str]) -> Iterator[None]:
    """While a turn runs: keys typed are not echoed (a ``^C`` or a typed-ahead
    word would shift the live display and leave stale lines behind). They
    stay queued and show up in the next prompt. Ctrl-C still signals."""
    try:
        fd = stream.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (AttributeError, OSError, ValueError, termios.error):
        saved = None
    if saved is None:
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | getattr(termios, "ECHOCTL", 0))
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except termios.error:
        yield
        return
    try:
        yield
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
        except termios.error:
            pass


def open_history(path: Path) -> History:
    """Persistent history at ``path``, or in memory if it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.touch(mode=0o600, exist_ok=True)
        return FileHistory(str(path))
    except OSError:
        return InMemoryHistory()


#: What Esc twice on an empty prompt sends (gemini-cli's shortcut).
REWIND_COMMAND = "/rewind"


class LineReader:
    """The REPL's line editor.

    Enter sends; Alt+Enter, Esc Enter, Ctrl-J or a trailing backslash insert a
    newline; Ctrl-C clears the line; Ctrl-D on an empty line ends input;
    Tab completes slash commands and profile names; Ctrl+G (or Ctrl+X) edits the line
    in ``edit_line`` (an external editor); Ctrl+Y calls ``on_ctrl_y``
    (yolo on or off). ``vi_mode``: vi editing keys (:meth:`set_vi_mode`)."""

    def __init__(
        self,
        *,
        history: History,
        completer: Completer | None,
        toolbar: Callable[[], AnyFormattedText],
        no_color: bool = False,
        input: Input | None = None,
        output: Output | None = None,
        on_shift_tab: Callable[[], str | None] | None = None,
        on_ctrl_t: Callable[[], None] | None = None,
        on_ctrl_y: Callable[[], str | None] | None = None,
        edit_line: Callable[[str], str] | None = None,
        vi_mode: bool = False,
    ):
        self.hint = ""
        self.shell_mode = False
        #: What was typed into a prompt whose read was cancelled.
        self.unsent = ""
        self._on_shift_tab = on_shift_tab
        self._on_ctrl_t = on_ctrl_t
        self._on_ctrl_y = on_ctrl_y
        self._edit_line = edit_line
        self._session: PromptSession[str] = PromptSession(
            vi_mode=vi_mode,
            history=history,
            completer=completer,
            complete_while_typing=Condition(self._typing_a_command),
            multiline=True,
            prompt_continuation=lambda width, line_number, wrap_count: "… ".rjust(width),
            bottom_toolbar=self._toolbar(toolbar),
            key_bindings=self._key_bindings(),
            style=_STYLE,
            color_depth=ColorDepth.MONOCHROME if no_color else None,
            enable_history_search=False,
            input=input,
            output=output,
            erase_when_done=False,
        )
        self._session.default_buffer.on_text_changed += self._clear_hint

    def _clear_hint(self, _buffer: object) -> None:
        self.hint = ""

    async def read(self, default: str = "") -> str | None:
        """The next input, or None when the user ends input (Ctrl-D).
        ``default`` is put in the line first (text typed ahead).

        Cancelled (an approval question takes the keys), the prompt is
        erased from the screen and what was typed is kept in
        :attr:`unsent`, for the next ``read`` to start from."""
        session = self._session
        self.unsent = ""
        session.default_buffer.reset(Document(default))  # what a cancel before the prompt shows keeps
        try:
            text = await run_in_worker(session.app, lambda: session.prompt(self._prompt, default=default))
            return "!" + text if self.shell_mode and text.strip() else text
        except EOFError:
            return None
        except trio.Cancelled:
            # The worker has finished (or been given up on): the buffer
            # holds what was typed until the next prompt() resets it.
            self.unsent = session.default_buffer.text
            raise
        finally:
            self.hint = ""
            session.app.erase_when_done = False

    def _prompt(self) -> AnyFormattedText:
        return [("class:prompt.shell", "! ")] if self.shell_mode else [("class:prompt", "› ")]

    @property
    def vi_mode(self) -> bool:
        return self._session.app.editing_mode == EditingMode.VI

    def set_vi_mode(self, on: bool) -> None:
        """vi editing keys (``/vim``) from the next key on; each prompt
        starts in INSERT mode."""
        self._session.app.editing_mode = EditingMode.VI if on else EditingMode.EMACS

    def toggle_shell_mode(self) -> None:
        """Shell mode: every line is a ``!command`` until ``!`` (or Escape) on
        an empty line again."""
        self.shell_mode = not self.shell_mode

    def on_resize(self) -> None:
        """The terminal changed size (SIGWINCH, seen by the main thread:
        prompt-toolkit cannot install signal handlers in a worker thread)."""
        app = self._session.app
        # _on_resize erases and redraws at the new size; invalidate is
        # the public fallback should it ever go away.
        call_in_app(app, getattr(app, "_on_resize", app.invalidate))

    async def above(self, show: Callable[[], None], *, wait: float = 2.0) -> None:
        """Run ``show`` (which prints to the terminal) so that what it
        prints lands above the prompt showing now, which is then drawn
        again below it, whole — prompt-toolkit's ``run_in_terminal``, in
        the prompt's own thread; at once when no prompt shows. For what
        arrives while the user types (another client's prompt and answer).
        Called from the Trio thread; ``show`` runs exactly once, here if
        the prompt's loop has not run it within ``wait`` seconds."""
        app = self._session.app
        claimed = threading.Lock()
        shown = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def show_once() -> None:
            if claimed.acquire(blocking=False):
                try:
                    show()
                finally:
                    token.run_sync_soon(shown.set)

        if not call_in_app(app, lambda: print_above(app, show_once)):
            show_once()  # no prompt showing (or its loop closed in between)
            return
        with trio.move_on_after(wait):
            await shown.wait()
        if not shown.is_set() and claimed.acquire(blocking=False):
            show()  # the prompt went away before its loop got to it

    def invalidate(self) -> None:
        """Redraw the prompt (and its toolbar) if one is showing; safe from
        the Trio thread."""
        call_in_app(self._session.app, self._session.app.invalidate)

    def _typing_a_command(self) -> bool:
        text = self._session.default_buffer.text
        return text.startswith("/") and "\n" not in text

    def _toolbar(self, toolbar: Callable[[], AnyFormattedText]) -> Callable[[], AnyFormattedText]:
        def render() -> AnyFormattedText:
            if self.hint:
                return [("class:bottom-toolbar.hint", f" {self.hint} ")]
            if self.shell_mode:
                return [("class:bottom-toolbar.hint",
                         " shell mode: each line runs here, its output goes to the model · "
                         "! or Esc on an empty line leaves ")]
            if self.vi_mode:  # gemini-cli's status indicator
                insert = self._session.app.vi_state.input_mode in (InputMode.INSERT, InputMode.INSERT_MULTIPLE)
                return [("class:bottom-toolbar.key", " [INSERT] " if insert else " [NORMAL] "),
                        *to_formatted_text(toolbar())]
            return toolbar()

        return render

    def _key_bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("enter")
        def _submit(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            # A completion chosen with Tab is already in the text: Enter sends.
            if buffer.document.text_before_cursor.endswith("\\") and buffer.document.is_cursor_at_the_end:
                buffer.delete_before_cursor()
                buffer.newline(copy_margin=False)
                return
            buffer.validate_and_handle()

        # In vi mode Esc is NORMAL mode: Esc then Enter sends, as in
        # gemini-cli's vim mode (Ctrl-J or a trailing backslash still make a newline).
        @kb.add("escape", "enter", filter=~vi_editing)
        @kb.add("c-j")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.newline(copy_margin=False)

        empty = Condition(lambda: not self._session.default_buffer.text)

        @kb.add("!", filter=empty)
        def _shell_mode(event: KeyPressEvent) -> None:
            self.toggle_shell_mode()

        @kb.add("escape", filter=Condition(lambda: self.shell_mode) & empty, eager=True)
        def _leave_shell_mode(event: KeyPressEvent) -> None:
            self.shell_mode = False

        @kb.add("escape", "escape", filter=empty & ~Condition(lambda: self.shell_mode))
        def _rewind(event: KeyPressEvent) -> None:
            # gemini-cli: Esc twice on an empty prompt opens /rewind.
            event.app.exit(result=REWIND_COMMAND)

        @kb.add("s-tab")
        def _cycle(event: KeyPressEvent) -> None:
            if self._on_shift_tab is not None:
                # Why a mode was passed over (untrusted folder), else no hint.
                self.hint = self._on_shift_tab() or ""
                event.app.invalidate()

        @kb.add("c-t")
        def _thought(event: KeyPressEvent) -> None:
            if self._on_ctrl_t is not None:
                # Printed above the prompt, which is redrawn below it.
                run_in_terminal(self._on_ctrl_t)

        @kb.add("c-y")
        def _yolo(event: KeyPressEvent) -> None:
            if self._on_ctrl_y is not None:
                refused = self._on_ctrl_y()
                if refused:
                    self.hint = refused
                event.app.invalidate()

        # gemini-cli's input.openExternalEditor: Ctrl+G (its key since 0.61,
        # in place of prompt-toolkit's Emacs "abort", which a one-line
        # prompt has little use for) and Ctrl+X (its deprecated one; eager:
        # Emacs mode's Ctrl-X prefix keys must not make it wait).
        @kb.add("c-g")
        @kb.add("c-x", eager=True)
        def _editor(event: KeyPressEvent) -> None:
            if self._edit_line is None:
                return
            buffer, edit = event.current_buffer, self._edit_line

            def run() -> str | None:
                try:
                    return edit(buffer.text)
                except Exception as exc:  # the editor's failure is said; the line stays as it was
                    self.hint = str(exc)
                    return None

            async def edit_and_put_back() -> None:
                text = await run_in_terminal(run, in_executor=True)
                if text is not None:
                    buffer.document = Document(text, cursor_position=len(text))

            event.app.create_background_task(edit_and_put_back())

        @kb.add("c-c")
        def _clear(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
                self.hint = ""
            else:
                self.hint = "Ctrl-D or /quit leaves; Ctrl-C while a turn runs cancels it"

        return kb


#: The keys of an approval question's menu.
APPROVAL_KEYS_HELP = "  ↑/↓ and Enter, or a number · Esc: no · Ctrl-C: no, and stop the turn"
#: The keys of a menu that picks several (``read_choice(multi=...)``).
MULTI_KEYS_HELP = "  ↑/↓ and Space (or a number) to tick · Enter: done · Esc: dismiss · Ctrl-C: dismiss, and stop the turn"
#: The keys of a question's menu (``ask_user``).
QUESTION_KEYS_HELP = "  ↑/↓ and Enter, or a number · Esc: dismiss · Ctrl-C: dismiss, and stop the turn"


async def read_choice(header: AnyFormattedText, choices: list[tuple[str, str]], *, default: int,
                      no_color: bool = False, input: Input | None = None, output: Output | None = None,
                      keys_help: str = APPROVAL_KEYS_HELP,
                      multi: frozenset[str] | None = None) -> str:
    """A menu of ``choices`` (``(value, label)`` pairs) under ``header``:
    the arrow keys move, Enter picks, a number key picks that line at once.
    Starts on ``default``. Returns the value; Ctrl-C returns
    ``"interrupt"``, Escape and Ctrl-D ``"escape"``. Every other key is
    ignored, so stray letters cannot answer.

    ``multi``: the values that can be ticked together (the others still
    pick at once): Space or a number key ticks the line, Enter returns the
    ticked values joined by newlines (the line under the cursor when none
    is ticked). An empty set: a question's menu, one pick."""
    if multi is not None and keys_help == APPROVAL_KEYS_HELP:
        keys_help = QUESTION_KEYS_HELP
    state: dict[str, Any] = {"at": default, "ticked": []}
    kb = KeyBindings()

    def render() -> AnyFormattedText:
        lines: list[tuple[str, str]] = [*_as_fragments(header), ("", "\n")]
        for i, (value, label) in enumerate(choices):
            here = i == state["at"]
            box = ("☑ " if value in state["ticked"] else "☐ ") if multi and value in multi else ""
            lines.append(("class:choice.selected" if here else "class:choice",
                          f"{'❯' if here else ' '} {i + 1}. {box}{label}"))
            lines.append(("", "\n"))
        lines.append(("class:choice.help", MULTI_KEYS_HELP if multi else keys_help))
        return lines

    def tick(index: int | None) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            at = state["at"] if index is None else index
            value = choices[at][0]
            if not multi or value not in multi:
                if index is not None:  # a line that picks at once (Other): it ends the menu
                    state["at"] = at
                    done(event)
                return
            state["at"] = at
            ticked = state["ticked"]
            if value in ticked:
                ticked.remove(value)
            else:
                ticked.append(value)

        return handler

    def done(event: KeyPressEvent) -> None:
        """Enter: the ticked values, with the line under the cursor when it
        is one that cannot be ticked (Other); none ticked: that line."""
        ticked = set(state["ticked"])
        value = choices[state["at"]][0]
        if not ticked:
            pick(None)(event)
            return
        if multi is not None and value not in multi:
            ticked.add(value)
        pick(None, "\n".join(v for v, _ in choices if v in ticked))(event)

    def move(step: int) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            state["at"] = (state["at"] + step) % len(choices)

        return handler

    def pick(index: int | None, value: str | None = None) -> Callable[[KeyPressEvent], None]:
        # Exits this menu's own application (bound below), never whatever
        # prompt-toolkit takes for the current one: a menu's answer can only
        # ever be this call's return value.
        def handler(event: KeyPressEvent) -> None:
            if app.is_running and not app.future.done():  # type: ignore[union-attr]
                app.exit(result=value if value is not None else choices[state["at"] if index is None else index][0])

        return handler

    kb.add("up")(move(-1))
    kb.add("down")(move(1))
    kb.add("enter")(pick(None) if not multi else done)
    if multi:
        kb.add("space")(tick(None))
    for i in range(min(len(choices), 9)):
        kb.add(str(i + 1))(pick(i) if not multi else tick(i))
    kb.add("c-c")(pick(None, "interrupt"))
    kb.add("c-d")(pick(None, "escape"))
    kb.add("escape", eager=True)(pick(None, "escape"))
    kb.add("<any>")(lambda event: None)
    app: Application[str] = Application(
        # Wrapped (indented under its text), not cut: a choice may name what will run, and all of it is shown.
        layout=Layout(Window(FormattedTextControl(render, show_cursor=False), dont_extend_height=True,
                             wrap_lines=True, get_line_prefix=lambda line, wrapped: "     " if wrapped else "")),
        key_bindings=kb,
        full_screen=False,
        erase_when_done=True,
        color_depth=ColorDepth.MONOCHROME if no_color else None,
        style=_STYLE,
        input=input,
        output=output,
    )
    try:
        return await run_in_worker(app, app.run)
    except EOFError:
        return "escape"


#: The keys of a searchable list (``/resume``).
SEARCH_KEYS_HELP = "type to search · ↑/↓ and Enter · Esc: dismiss"


async def read_search(header: AnyFormattedText, choices: list[tuple[str, str]], *, no_color: bool = False,
                      input: Input | None = None, output: Output | None = None, rows: int = 10) -> str:
    """A searchable menu of ``choices`` (``(value, label)`` pairs) under
    ``header``: what is typed filters the lines (every word must be in the
    label or the value, any case), the arrow keys move, Enter picks the line
    under the cursor; at most ``rows`` lines show at once. Returns the
    value; Escape, Ctrl-D and Ctrl-C return ``"escape"``."""
    query = Buffer(multiline=False)
    state = {"at": 0}

    def matching() -> list[tuple[str, str]]:
        words = query.text.lower().split()
        return [c for c in choices if all(w in c[1].lower() or w in c[0].lower() for w in words)]

    def render() -> AnyFormattedText:
        items = matching()
        state["at"] = max(0, min(state["at"], len(items) - 1))
        start = max(0, min(state["at"] - rows // 2, len(items) - rows))
        lines: list[tuple[str, str]] = []
        for i, (_value, label) in enumerate(items[start:start + rows], start):
            here = i == state["at"]
            lines += [("class:choice.selected" if here else "class:choice", f"{'❯' if here else ' '} {label}"),
                      ("", "\n")]
        if not items:
            lines.append(("class:choice.help", "  nothing matches\n"))
        lines.append(("class:choice.help", f"  {len(items)} of {len(choices)} · {SEARCH_KEYS_HELP}"))
        return lines

    def move(step: int) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            state["at"] = max(0, min(state["at"] + step, len(matching()) - 1))

        return handler

    def finish(value: str | None) -> Callable[[KeyPressEvent], None]:
        def handler(event: KeyPressEvent) -> None:
            items = matching()
            if value is None and not items:
                return  # Enter on nothing: keep searching
            if app.is_running and not app.future.done():  # type: ignore[union-attr]
                app.exit(result=value if value is not None else items[state["at"]][0])

        return handler

    query.on_text_changed += lambda _buffer: state.update(at=0)
    kb = KeyBindings()
    kb.add("up")(move(-1))
    kb.add("down")(move(1))
    kb.add("enter")(finish(None))
    for key in ("c-c", "c-d"):
        kb.add(key)(finish("escape"))
    kb.add("escape", eager=True)(finish("escape"))
    search_line = Window(BufferControl(query, input_processors=[]), height=1,
                         get_line_prefix=lambda line, wrapped: [("class:prompt", "Search: ")])
    app: Application[str] = Application(
        layout=Layout(HSplit([Window(FormattedTextControl(lambda: _as_fragments(header)), dont_extend_height=True,
                                     wrap_lines=True),
                              search_line,
                              Window(FormattedTextControl(render, show_cursor=False), dont_extend_height=True,
                                     wrap_lines=True)]), focused_element=search_line),
        key_bindings=kb, full_screen=False, erase_when_done=True,
        color_depth=ColorDepth.MONOCHROME if no_color else None, style=_STYLE, input=input, output=output,
    )
    try:
        return await run_in_worker(app, app.run)
    except EOFError:
        return "escape"


def _as_fragments(text: AnyFormattedText) -> list[tuple[str, str]]:
    return [(style, chunk) for style, chunk, *_ in to_formatted_text(text)]


async def read_text(question: str, *, input: Input | None = None, output: Output | None = None,
                    secret: bool = False) -> str | None:
    """One line of free text (Enter sends; ``secret``: shown as ``*``); None
    on Ctrl-C, Ctrl-D or Escape."""
    kb = KeyBindings()
    kb.add("c-c")(lambda event: event.app.exit(exception=EOFError()))
    kb.add("escape", eager=True)(lambda event: event.app.exit(exception=EOFError()))
    session: PromptSession[str] = PromptSession(key_bindings=kb, style=_STYLE, input=input, output=output,
                                                erase_when_done=False, is_password=secret)
    try:
        return await run_in_worker(session.app, lambda: session.prompt([("class:prompt", question)]))
    except EOFError:
        return None


def drain_typed_ahead(stream: IO[str]) -> str:
    """Read and return what the user typed that no prompt has read yet
    (keys pressed while an answer streamed), without waiting. Called before
    an approval question, so that typed-ahead keys can never answer it, and
    at the end of a turn. The text is cleaned of escape sequences and
    editing keys (:func:`clean_typed`). Empty when ``stream`` is not a
    terminal."""
    try:
        fd = stream.fileno()
        if not os.isatty(fd):
            return ""
        saved = termios.tcgetattr(fd)
    except (AttributeError, OSError, ValueError, termios.error):
        return ""
    raw = list(saved)
    raw[3] &= ~termios.ICANON  # what sits in the line buffer becomes readable
    cc = list(saved[6])
    cc[termios.VMIN], cc[termios.VTIME] = 0, 0
    raw[6] = cc
    data = b""
    try:
        termios.tcsetattr(fd, termios.TCSANOW, raw)
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
            if len(data) > 1 << 20:
                break
    except (OSError, termios.error):
        pass
    finally:
        try:
            termios.tcsetattr(fd, termios.TCSANOW, saved)
        except termios.error:
            pass
    return clean_typed(data.decode("utf-8", "replace"))


_TERMINAL_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1bO.|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b")


def clean_typed(text: str) -> str:
    """Keys as a line editor would have applied them: escape sequences
    (arrows, Alt+…) dropped, Backspace deletes, Ctrl-U clears the line,
    Enter (``\r`` or ``\n``) ends a line, other control keys dropped."""
    out: list[str] = []
    for c in _TERMINAL_SEQUENCE.sub("", text):
        if c in "\x7f\x08":
            if out and out[-1] != "\n":
                out.pop()
        elif c == "\x15":
            while out and out[-1] != "\n":
                out.pop()
        elif c in "\r\n":
            out.append("\n")
        elif c == "\t" or c >= " ":
            out.append(c)
    return "".join(out)


def split_queued(typed: str) -> tuple[str, str]:
    """``(queued, rest)``: the lines ended by Enter (a message to send) and
    the unfinished last line (to put back in the prompt)."""
    if "\n" not in typed:
        return "", typed
    queued, _, rest = typed.rpartition("\n")
    return queued.strip("\n"), rest


class PlainLineReader:
    """Input without prompt-toolkit, for when the output is not a terminal:
    a prompt on stderr, a line from stdin."""

    def invalidate(self) -> None:
        """Nothing to redraw without a terminal."""

    def __init__(self, stdin: IO[str], stderr: IO[str]):
        self.stdin = stdin
        self.stderr = stderr
        self.hint = ""

    def on_resize(self) -> None:
        pass

    def toggle_shell_mode(self) -> None:
        pass  # plain input: every line says what it is ("!cmd")

    async def read(self, default: str = "") -> str | None:
        self.stderr.write("> ")
        self.stderr.flush()
        line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        return line.rstrip("\n") if line else None

    async def read_choice(self, header: str, choices: list[tuple[str, str]], *, default: int,
                          multi: frozenset[str] | None = None) -> str:
        """The choices numbered on stderr; a line with a number picks one,
        an empty line the default; anything else is "escape" (no). With
        ``multi`` (see :func:`read_choice`), numbers separated by commas
        pick several of those."""
        lines = [header, *(f"  {i + 1}. {label}" for i, (_v, label) in enumerate(choices)),
                 f"Choose 1-{len(choices)}{' (several: 1,3)' if multi else ''} [{default + 1}]: "]
        self.stderr.write("\n".join(lines))
        self.stderr.flush()
        line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        if not line:
            return "escape"
        word = line.strip()
        if not word:
            return choices[default][0]
        if word.isdigit() and 1 <= int(word) <= len(choices):
            return choices[int(word) - 1][0]
        words = [w.strip() for w in word.split(",")]
        if multi and len(words) > 1 and all(w.isdigit() and 1 <= int(w) <= len(choices) for w in words):
            picked = [choices[int(w) - 1][0] for w in words]
            if all(v in multi for v in picked):
                return "\n".join(v for v, _ in choices if v in picked)
        return "escape"

    async def read_search(self, header: str, choices: list[tuple[str, str]]) -> str:
        """:func:`read_search` on plain lines: the choices numbered on
        stderr; a number picks one, other words narrow the list and show it
        again, an empty line (or the end of input) is "escape"."""
        shown = choices
        while True:
            lines = [header, *(f"  {i + 1}. {label}" for i, (_v, label) in enumerate(shown)),
                     f"Number to pick, words to search ({len(shown)} of {len(choices)}), empty to dismiss: "]
            self.stderr.write("\n".join(lines))
            self.stderr.flush()
            line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
            word = line.strip()
            if not word:
                return "escape"
            if word.isdigit() and 1 <= int(word) <= len(shown):
                return shown[int(word) - 1][0]
            words = word.lower().split()
            shown = [c for c in choices if all(w in c[1].lower() or w in c[0].lower() for w in words)]

    async def read_text(self, question: str, secret: bool = False) -> str | None:
        """A line of stdin after ``question`` on stderr (``secret``: not
        echoed when stdin is a terminal); None at its end or when empty."""
        self.stderr.write(question)
        self.stderr.flush()
        with no_echo(self.stdin) if secret else nullcontext():
            line = await trio.to_thread.run_sync(self.stdin.readline, abandon_on_cancel=True)
        return line.rstrip("\n") or None if line else None
