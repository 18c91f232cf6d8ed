"""What a slash command may do: :class:`CommandContext`, and the two
exceptions a command raises to the REPL.

A command (``slash_commands.py``, ``commands/``) sees the REPL only as a
:class:`CommandContext`: it prints, reaches the connection and the
settings, runs a turn, reconnects, asks a question, redraws.
:class:`~gemini_split.ui.repl.loop.Repl` implements it (and is what a
command is run with); nothing in ``ui/`` imports the REPL's module
(``tests/test_app.py`` checks it), so the REPL stays the top of ``ui/`` and
a command is read without it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    import trio
    from rich.console import Console

    from gemini_split.tools.approval import ApprovalMode
    from gemini_split.client.connect import ClientSettings
    from gemini_split.userfiles.custom_commands import CommandSet
    from gemini_split.client.profiles import ProfileStore
    from gemini_split.client.protocol_client import ProtocolClient
    from gemini_split.environment import Environment
    from gemini_split.options import ClientOptions
    from gemini_split.tools.ide import IdeCompanion
    from gemini_split.protocol import Attachment, Rewound

    from .approval_prompt import InlineAsker
    from .prompt_input import LineReader, PlainLineReader
    from .session_stats import SessionStats

T = TypeVar("T")


class CommandUsage(Exception):
    """The arguments were wrong; the message is what to type instead."""


class QuitRepl(Exception):
    """/quit. ``deleted``: what the session ``/quit --delete`` deleted had
    done (the REPL is then on an empty session of its own)."""

    def __init__(self, deleted: SessionStats | None = None):
        super().__init__()
        self.deleted = deleted


class CommandContext(Protocol):
    """The REPL as a command sees it (:class:`~gemini_split.ui.repl.loop.Repl`
    implements it). Attributes a command may set are said so."""

    # --- where a command writes, and what it reads ---------------------------------
    console: Console
    env: Environment
    #: The command line's flags (``-e`` for ``/extensions list``).
    options: ClientOptions
    #: The session's client settings; ``/directory add`` and the reloads
    #: (``commands/context_reload.py``) replace them or their parts.
    settings: ClientSettings
    #: The server profiles (``/server``).
    store: ProfileStore
    #: The line editor (``/vim`` switches its keys) or the plain reader.
    reader: LineReader | PlainLineReader
    #: Asks the user a menu question (``read_choice``); its ``grants`` are
    #: this session's "always" answers (``/permissions``).
    asker: InlineAsker

    def print_usage(self, text: str) -> None:
        """A line saying what went wrong or what to type (yellow)."""

    def print_notice(self, text: str) -> None:
        """A line from elsewhere, shown and never obeyed (red)."""

    # --- the connection -----------------------------------------------------------
    #: The current connection; None while there is none.
    client: ProtocolClient | None
    #: The profile name or address shown for the current server.
    server_label: str
    #: Session ids Tab offers after /resume; ``/sessions`` sets them.
    known_sessions: list[str]

    def require_client(self) -> ProtocolClient:
        """The current connection; raises :class:`CommandUsage` when there is none."""

    def profile_names(self) -> list[str]:
        """The profiles' names (none when the profiles file cannot be read)."""

    def attached_clients(self) -> list[tuple[str, str]]:
        """Who is attached to this session now: ``[(label, role)]``."""

    async def reconnect(self, target: str | None, why: str) -> bool:
        """A new session: on the same server when ``target`` is None, else
        on the profile or address ``target`` (or ``embedded``); said with
        ``why``. False: the old connection stays."""

    async def resume(self, target: str) -> bool:
        """Continue an earlier session (an id, ``N`` or ``latest``) and redraw it."""

    async def interruptible(self, awaitable: Awaitable[T], status: str | None = None) -> T | None:
        """Await a network step that Ctrl-C may abandon, under a ``status``
        line; connection errors shown in a panel. None then, and when
        interrupted."""

    def ctrl_c_cancels(self) -> AbstractContextManager[trio.CancelScope]:
        """A block that Ctrl-C cancels (a command's slow local work): the
        scope, whose ``cancelled_caught`` says whether it was."""

    # --- the conversation ---------------------------------------------------------
    #: The model the next prompt names; a command may set it (``/model``).
    model_override: str | None
    #: What this session did (``/stats``).
    stats: SessionStats
    #: The last turn's answer (``/copy``) and tool calls (``/output``).
    last_answer: str
    last_tools: list[Any]
    #: Text sent ahead of the next prompt (``!command`` output, a ``/chat resume``).
    pending_context: list[str]
    #: The IDE companion (``/ide``).
    ide: IdeCompanion

    async def connect_ide(self) -> None:
        """Connect to the IDE companion (kept until ``/ide disable``); a failure is printed."""
    #: The custom commands (``.gemini/commands/*.toml``); ``load_custom_commands`` sets them.
    custom_commands: CommandSet
    #: True while this client's own ``/rewind`` runs (it redraws itself).
    rewinding_here: bool
    #: The style code blocks are highlighted in (None: the NoColor theme);
    #: ``/theme`` sets it for the turns drawn next.
    code_theme: str | None

    @property
    def model(self) -> str:
        """The model the next prompt runs on ("" when the server's default is unknown)."""

    @property
    def approval_mode(self) -> ApprovalMode: ...

    def set_approval_mode(self, mode: ApprovalMode) -> None: ...

    def mode_refused(self, mode: ApprovalMode) -> str | None:
        """Why ``mode`` may not be turned on now, or None."""

    async def run_turn(self, prompt: str, *, carry_context: bool = True,
                       attachments: tuple[Attachment, ...] = (), references: bool = True,
                       compress: bool = False, start: Callable[[], Awaitable[Any]] | None = None,
                       typed: str = "") -> None:
        """One prompt and its answer, shown as the REPL shows a turn (see
        :meth:`~gemini_split.ui.repl.loop.Repl.run_turn`)."""

    async def redraw_rewound(self, event: Rewound) -> None:
        """The conversation as it now is, after a rewind."""

    def keep_prompt(self, text: str) -> None:
        """Put ``text`` in the next prompt's input."""
