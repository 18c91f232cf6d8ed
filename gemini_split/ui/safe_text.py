"""Text the model (or a tool, or a file) chose, made safe to show on a terminal.

A terminal obeys what it is sent: ``ESC[2K`` erases a line, ``ESC[1A`` moves
the cursor up, SGR 8 hides text, a carriage return starts the line again, and
Unicode bidi controls reorder what is displayed. Text that reaches the
terminal from outside the program — model answers and thoughts, tool
arguments, tool output, file names, diffs, error messages quoting any of
those — must never be able to do that: what a user approves must be what
they saw.

:func:`visible` is the one function that makes such text inert: every
control character except newline and tab (and the text's own line endings)
is replaced by a visible stand-in — ``ESC`` by ``␛``, other C0 controls by
their Unicode control pictures (``␀``…``␟``), DEL by ``␡``, C1 controls and
invisible format characters (bidi overrides, zero-width spaces) by a
``\\x9b`` / ``\\u202e`` escape. Nothing is dropped, so a hidden part stays
readable: ``ESC[2K`` shows as ``␛[2K``.

:func:`command_warnings` says what is unusual about a command a user is
asked to approve (control characters, many lines, blank-line padding, great
length); :func:`clip_lines` shortens a long text to its head and tail with a
marker saying how much was left out, never silently.

Import-light on purpose: the one-shot path uses it too.
"""

from __future__ import annotations

import re

__all__ = ["visible", "has_controls", "command_warnings", "clip_lines", "collapse_blank_runs"]

# C0 controls but \t and \n, DEL, C1 controls; invisible formatting
# characters that change how text is displayed (bidi embeddings, overrides
# and isolates, zero-width and word joiners, the BOM, line/para separators).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f"
    "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def _picture(c: str) -> str:
    code = ord(c)
    if code == 0x1B:
        return "␛"
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␍ for \r)
    if code == 0x7F:
        return "␡"
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = True, tabs: bool = True) -> str:
    """``text`` with every terminal control made visible (see the module
    docstring). ``\\r\\n`` line endings become ``\\n``; a lone ``\\r`` is shown
    as ``␍``. With ``newlines=False`` a newline is shown as ``␤`` (for one-line
    places such as a tool call's header); with ``tabs=False`` a tab as
    ``␉``."""
    if not isinstance(text, str):
        text = str(text)
    text = text.replace("\r\n", "\n")
    out = _UNSAFE.sub(lambda m: _picture(m.group()), text)  # \r is in the set
    if not newlines:
        out = out.replace("\n", "␤")
    if not tabs:
        out = out.replace("\t", "␉")
    return out


def has_controls(text: str) -> bool:
    """Whether :func:`visible` would change ``text`` (CRLF aside)."""
    return bool(_UNSAFE.search(text.replace("\r\n", "\n")))


#: A command with more lines than this is flagged in the approval question.
MANY_LINES = 8
#: Nor this many characters.
LONG_COMMAND = 1000
_BLANK_RUN = re.compile(r"(?:\n[ \t]*){4,}\n")
_SPACE_RUN = re.compile(r"[ \t]{40,}")


def command_warnings(command: str) -> list[str]:
    """What a user approving ``command`` should know that its first line
    does not tell: control characters, many lines, runs of blank lines or
    of spaces that push a part out of sight, great length. Empty when the
    command is unremarkable."""
    warnings = []
    controls = _UNSAFE.findall(command.replace("\r\n", "\n"))
    if controls:
        shown = " ".join(dict.fromkeys(_picture(c) for c in controls))
        warnings.append(f"contains {len(controls)} control character{'s' * (len(controls) != 1)} "
                        f"({shown}) that could hide or rewrite what the terminal shows")
    lines = command.count("\n") + 1
    if lines > MANY_LINES:
        warnings.append(f"is {lines} lines long: read all of it")
    blanks = max((m.group().count("\n") - 1 for m in _BLANK_RUN.finditer(command)), default=0)
    if blanks:
        warnings.append(f"has a run of {blanks} blank lines")
    spaces = max((len(m.group()) for m in _SPACE_RUN.finditer(command)), default=0)
    if spaces:
        warnings.append(f"has a run of {spaces} spaces")
    if len(command) > LONG_COMMAND:
        warnings.append(f"is {len(command):,} characters long")
    return warnings


def collapse_blank_runs(text: str, *, keep: int = 1) -> str:
    """Runs of more than ``keep`` blank lines replaced by ``keep`` blank lines
    and a marker line saying how many there were, so padding cannot push
    the rest of a text off the screen."""
    def replace(match: re.Match[str]) -> str:
        count = match.group().count("\n") - 1
        if count <= keep:
            return match.group()
        return "\n" * keep + f"\n⋮ ({count} blank lines)\n"

    return re.sub(r"(?:\n[ \t]*)+\n", replace, text)


def clip_lines(lines: list[str], limit: int, *, tail: int | None = None, what: str = "lines") -> tuple[list[str], int]:
    """At most ``limit`` of ``lines``: the head and the last ``tail`` (a
    third of ``limit`` by default), with one marker line between saying how
    many were left out. Returns the lines to show and how many were left
    out (0 when all fit)."""
    if len(lines) <= limit:
        return list(lines), 0
    limit = max(limit, 3)
    tail = max(1, limit // 3) if tail is None else tail
    head = limit - tail - 1
    hidden = len(lines) - head - tail
    return [*lines[:head], f"… {hidden} more {what} …", *lines[-tail:]], hidden
