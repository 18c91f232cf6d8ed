"""The REPL's ``/shells`` (also ``/bashes``, gemini-cli's): the shell
commands the model left running in the background
(``run_shell_command`` with ``is_background``, run by this client's tools:
:class:`gemini_split.tools.builtin.background.BackgroundProcesses`).

``/shells`` lists them as gemini-cli does (``1: npm run dev (PID: 4242)``,
with the exit code of one that ended); ``/shells output N [LINES]`` shows
the last lines of one's output; ``/shells kill N|all`` ends one (its whole
process group) or all. ``N`` is its number in the list, or its PID.
"""

from __future__ import annotations

from typing import Any

import trio
from rich.text import Text

from gemini_split.tools.builtin.background import DEFAULT_LINES, tail
from gemini_split.ui.safe_text import visible

from ..command_context import CommandContext, CommandUsage

USAGE = "/shells [list] | output N [LINES] | kill N|all"
NONE_ACTIVE = "No background tasks are currently active."


async def shells_command(repl: CommandContext, args: list[str]) -> None:
    """Run ``/shells ARGS``; raises :class:`CommandUsage` for bad arguments."""
    action, rest = (args[0], args[1:]) if args else ("list", [])
    background = _background(repl)
    entries = background.entries() if background is not None else []
    if action == "list" and not rest:
        _list(repl, entries)
    elif action == "output" and len(rest) in (1, 2) and (len(rest) == 1 or rest[1].isdigit()):
        entry = _find(entries, rest[0])
        lines = int(rest[1]) if len(rest) == 2 else DEFAULT_LINES
        text, more = await trio.to_thread.run_sync(tail, entry.log, lines)
        repl.console.print(Text(f"{_label(entries, entry)} — {entry.status()}", style="bold"), soft_wrap=True)
        if more:
            repl.console.print(Text(f"… (the last {lines} lines)", style="dim"))
        repl.console.print(Text(visible(text) if text else "(no output yet)"), soft_wrap=True)
    elif action == "kill" and len(rest) == 1:
        chosen = [e for e in entries if e.process.poll() is None] if rest[0] == "all" else [_find(entries, rest[0])]
        if not chosen:
            repl.console.print(Text(NONE_ACTIVE, style="dim"))
        for entry in chosen:
            status = await trio.to_thread.run_sync(background.stop, entry.pid)  # type: ignore[union-attr]
            repl.console.print(Text(f"Killed {_label(entries, entry)}: {status}", style="green"), soft_wrap=True)
    else:
        raise CommandUsage(USAGE)


def shell_numbers(repl: CommandContext) -> list[str]:
    """Tab's words after ``output`` and ``kill``: the list's numbers."""
    background = _background(repl)
    return [str(i) for i in range(1, len(background.entries()) + 1)] if background is not None else []


def _background(repl: CommandContext) -> Any:
    """This client's background commands (None: no connection, or the
    tools run on the server)."""
    if repl.settings.tools.run_on == "server":
        raise CommandUsage("/shells lists this client's background commands; with --tools server they run on the "
                           "server: ask the model (list_background_processes, read_background_output)")
    client = repl.client
    shell = client.executor.registry.get("run_shell_command") if client is not None else None
    return getattr(shell, "background", None)


def _list(repl: CommandContext, entries: list[Any]) -> None:
    if not entries:
        repl.console.print(Text(NONE_ACTIVE, style="dim"))
        return
    for i, entry in enumerate(entries, 1):
        code = entry.process.poll()
        state = "" if code is None else f" (Exit Code: {code})" if code >= 0 else f" (killed by signal {-code})"
        line = Text(f"{i}: {visible(entry.command, newlines=False)} (PID: {entry.pid})")
        line.append(state or " running", style="dim" if state else "green")
        line.append(f"  in {visible(entry.directory, newlines=False)}", style="dim")
        repl.console.print(line, soft_wrap=True)
    repl.console.print(Text("/shells output N shows one's output · /shells kill N stops it", style="dim"))


def _find(entries: list[Any], word: str) -> Any:
    """The entry numbered ``word`` in the list, else the one with that PID."""
    if not word.isdigit():
        raise CommandUsage(USAGE)
    number = int(word)
    if 1 <= number <= len(entries):
        return entries[number - 1]
    for entry in entries:
        if entry.pid == number:
            return entry
    raise CommandUsage(f"no background shell {number} (/shells lists them)" if entries else NONE_ACTIVE)


def _label(entries: list[Any], entry: Any) -> str:
    return f"{entries.index(entry) + 1}: {visible(entry.command, newlines=False)} (PID: {entry.pid})"
