"""gemini-cli's custom commands: ``.gemini/commands/**/*.toml``, read where the user is.

A file ``~/.gemini/commands/git/commit.toml`` (user) or
``<project>/.gemini/commands/git/commit.toml`` (project, trusted folders
only) is the command ``/git:commit``; a project command wins over a user
command of the same name. A file holds TOML with a ``prompt`` string and an
optional ``description``. Invoking the command expands its prompt here, on
the client, and the result travels as an ordinary prompt: the same in
embedded mode, against ``serve`` and through the local daemon.

Expansion follows gemini-cli's rules:

* ``{{args}}`` is replaced by what the user typed after the command name;
  when the prompt has no ``{{args}}`` and arguments were given, the whole
  command line typed is appended after a blank line;
* ``!{COMMAND}`` runs COMMAND through the caller's ``run_shell`` (the
  client's ``run_shell_command`` tool: its approval, policy and sandbox) and
  is replaced by its output; ``{{args}}`` inside it is shell-quoted, so the
  arguments are one word for the shell and cannot start a second command;
* ``@{PATH}`` is replaced by the file's (or directory's files') content
  through the caller's ``inject_file`` (the confinement and ignore rules of
  ``@path``).

The prompt is split into these pieces once, when the file is read; what a
shell command prints, a file holds or the user typed is inserted as text and
never read again for ``!{`` or ``@{`` (gemini-cli re-reads injected text;
here a file that contains ``!{rm …}`` runs nothing).

A file that cannot be used (not TOML, no ``prompt``, an unclosed ``!{``, a
name that cannot be typed, a built-in's name) is reported with its path and
why; the other commands still load.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gemini_split.errors import BadInput
from gemini_split.files import read_toml

from .precedence import tiers

COMMANDS_DIR = "commands"
ARGS = "{{args}}"
#: A command file larger than this is refused rather than read whole.
MAX_FILE_BYTES = 1024 * 1024
#: Files one commands directory yields at most.
MAX_FILES = 2000
#: Folders one commands directory is walked through at most (a symlink to / stays cheap).
MAX_DIRS = 500


class CommandFailed(BadInput):
    """The command could not be expanded (a ``!{…}`` refused or failed to
    start); nothing was sent."""


@dataclass(frozen=True)
class Piece:
    """A part of a prompt: ``kind`` is ``"text"``, ``"shell"`` or ``"file"``."""

    kind: str
    text: str


@dataclass(frozen=True)
class CustomCommand:
    #: With its slash: ``/git:commit``.
    name: str
    description: str
    path: Path
    #: ``"user"`` or ``"project"``.
    scope: str
    pieces: tuple[Piece, ...]
    #: Whether ``{{args}}`` appears anywhere (else arguments are appended).
    takes_args: bool


@dataclass
class CommandSet:
    """The commands found, by name, and one line per file left out."""

    commands: dict[str, CustomCommand] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> CustomCommand | None:
        return self.commands.get(name)


def command_dirs(config_dir: Path, project_dir: Path | None) -> list[tuple[str, Path]]:
    """Where commands are read from, lowest precedence first (an
    extension's come after them, renamed where a name is taken: see
    :func:`load_custom_commands`)."""
    projects = [project_dir / ".gemini" / COMMANDS_DIR] if project_dir is not None else []
    return tiers([config_dir / COMMANDS_DIR], projects)


def load_custom_commands(config_dir: Path, project_dir: Path | None, *, trusted: bool,
                         reserved: Iterable[str] = (),
                         extension_dirs: Iterable[tuple[str, Path]] = ()) -> CommandSet:
    """The user's commands and, when ``trusted``, the project's
    (``project_dir/.gemini/commands``), the project's winning a clash. A
    name in ``reserved`` (the built-in slash commands) is reported and left
    out: the built-in wins. ``extension_dirs`` (extension name, its
    ``commands/``) come last, as in gemini-cli: an extension's command whose
    name is taken is named ``/EXTENSION.NAME`` instead."""
    reserved = set(reserved)
    found = CommandSet()
    for scope, directory in command_dirs(config_dir, project_dir if trusted else None):
        for path, name in _command_files(directory, found.problems):
            if name in reserved:
                found.problems.append(f"{path}: {name} is a built-in command; the built-in is used")
                continue
            try:
                command = read_command(path, name, scope)
            except ValueError as exc:
                found.problems.append(f"{path}: {exc}; this command is not loaded")
                continue
            found.commands[name] = command  # the project's, read later, replaces the user's
    for extension, directory in extension_dirs:
        for path, name in _command_files(directory, found.problems):
            if name in reserved or name in found.commands:
                name = f"/{extension}.{name[1:]}"
                if name in found.commands:
                    found.problems.append(f"{path}: {name} is defined twice; this command is not loaded")
                    continue
            try:
                command = read_command(path, name, "extension")
            except ValueError as exc:
                found.problems.append(f"{path} (extension {extension}): {exc}; this command is not loaded")
                continue
            found.commands[name] = command
    found.commands = dict(sorted(found.commands.items()))
    return found


def _command_files(directory: Path, problems: list[str]) -> list[tuple[Path, str]]:
    """``(path, /name)`` for each ``.toml`` below ``directory``, sorted;
    symlinked directories are not followed (no loops)."""
    if not directory.is_dir():
        return []
    out: list[tuple[Path, str]] = []
    visited = 0
    for root, dirs, files in os.walk(directory, onerror=lambda exc: problems.append(
            f"{exc.filename}: cannot read: {exc.strerror}")):
        dirs.sort()
        visited += 1
        if visited > MAX_DIRS:
            problems.append(f"{directory}: more than {MAX_DIRS} folders; the rest are not read")
            return out
        for file in sorted(files):
            if not file.endswith(".toml"):
                continue
            path = Path(root) / file
            rel = path.relative_to(directory).with_suffix("")
            # gemini-cli: a colon in a file name becomes "_", folders become ":".
            name = "/" + ":".join(part.replace(":", "_") for part in rel.parts)
            if any(ch.isspace() or not ch.isprintable() for ch in name):
                problems.append(f"{path}: a command name cannot hold blanks or control characters; "
                                "this command is not loaded")
                continue
            out.append((path, name))
            if len(out) >= MAX_FILES:
                problems.append(f"{directory}: more than {MAX_FILES} command files; the rest are not loaded")
                return out
    return out


def read_command(path: Path, name: str, scope: str) -> CustomCommand:
    """One command file. Raises ValueError with the reason (the TOML error,
    a missing ``prompt``, an unclosed ``!{``…)."""
    table = read_toml(path, MAX_FILE_BYTES)
    prompt = table.get("prompt")
    if not isinstance(prompt, str):
        raise ValueError("'prompt' is missing or not a string" if prompt is None
                         else f"'prompt' must be a string, not {type(prompt).__name__}")
    description = table.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError(f"'description' must be a string, not {type(description).__name__}")
    if not description:
        # gemini-cli: "Custom command from <file>".
        description = f"Custom command from {path.name}"
    return CustomCommand(name=name, description=description.strip().splitlines()[0] if description.strip() else name,
                         path=path, scope=scope, pieces=tuple(split_prompt(prompt)), takes_args=ARGS in prompt)


def split_prompt(prompt: str) -> list[Piece]:
    """``prompt`` as text, ``!{…}`` and ``@{…}`` pieces. The braces inside
    must balance (JSON in a shell command works); raises ValueError for one
    left open."""
    pieces: list[Piece] = []
    text: list[str] = []
    i = 0
    while i < len(prompt):
        two = prompt[i:i + 2]
        if two in ("!{", "@{"):
            depth, j = 1, i + 2
            while j < len(prompt) and depth:
                depth += {"{": 1, "}": -1}.get(prompt[j], 0)
                j += 1
            if depth:
                line = prompt.count("\n", 0, i) + 1
                raise ValueError(f"'{two}' on line {line} of the prompt is never closed (its braces must balance)")
            if text:
                pieces.append(Piece("text", "".join(text)))
                text = []
            inner = prompt[i + 2:j - 1].strip()
            if not inner:
                raise ValueError(f"an empty '{two}}}' in the prompt")
            pieces.append(Piece("shell" if two == "!{" else "file", inner))
            i = j
        else:
            text.append(prompt[i])
            i += 1
    if text:
        pieces.append(Piece("text", "".join(text)))
    return pieces


RunShell = Callable[[str], Awaitable[str]]
InjectFile = Callable[[str], Awaitable[str]]


async def expand_command(command: CustomCommand, args: str, *, invocation: str,
                         run_shell: RunShell, inject_file: InjectFile) -> str:
    """The prompt ``command`` sends when invoked as ``invocation`` (the
    whole line typed) with ``args`` (what follows the name). ``@{…}`` are
    read first, then ``!{…}`` run in order (see the module docstring);
    :class:`CommandFailed` from either stops the expansion."""
    args = args.strip()
    quoted = shlex.quote(args)
    files = {p.text: await inject_file(p.text) for p in command.pieces if p.kind == "file"}
    out: list[str] = []
    for piece in command.pieces:
        if piece.kind == "text":
            out.append(piece.text.replace(ARGS, args))
        elif piece.kind == "file":
            out.append(files[piece.text])
        else:
            out.append(await run_shell(piece.text.replace(ARGS, quoted)))
    prompt = "".join(out)
    if not command.takes_args and args:
        prompt = f"{prompt.rstrip()}\n\n{invocation.strip()}"
    return prompt


def split_invocation(line: str) -> tuple[str, str]:
    """``"/git:commit fix the bug"`` → ``("/git:commit", "fix the bug")``."""
    name, _, rest = line.strip().partition(" ")
    if "\n" in name:
        name, _, more = name.partition("\n")
        rest = more + (" " + rest if rest else "")
    return name, rest


def shell_output(result: object) -> str:
    """What ``!{…}`` is replaced by: the command's output (stdout, then
    stderr) and, when it failed, gemini-cli's status line."""
    if not isinstance(result, dict):
        return str(result)
    out = str(result.get("stdout") or "")
    err = str(result.get("stderr") or "")
    text = out + ("\n" if out and err and not out.endswith("\n") else "") + err
    code = result.get("exit_code")
    if code not in (0, None):
        text = f"{text.rstrip()}\n[Shell command exited with code {code}]"
    elif result.get("signal"):
        text = f"{text.rstrip()}\n[Shell command was killed by {result['signal']}]"
    return text.rstrip("\n")
