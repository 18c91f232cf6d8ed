"""Split a shell command into the simple commands it would run (sans-IO).

This decides whether ``--allowed-tools run_shell_command(git status)`` covers
a command the model asked for, so it errs one way only: whatever it cannot
parse with certainty it refuses (:class:`ShellParseError`), and the caller
then asks the user. It models bash (the shell ``run_shell_command`` uses).

What it understands:

- lists and pipelines: ``;``, newline, ``&``, ``&&``, ``||``, ``|``, ``|&``;
- subshells ``( … )``, whose contents are commands of their own;
- quoting: ``'…'``, ``"…"``, backslash escapes and line continuations, so
  ``e\\cho`` and ``"echo"`` are the word ``echo`` (as bash runs them);
- command substitution ``$( … )`` and backticks, anywhere in a word or a
  double-quoted string, whose contents are commands of their own;
- simple parameter expansion (``$x``, ``${x}``, ``$1``, ``$?``), which makes
  a word non-literal but runs nothing;
- redirections (``>``, ``>>``, ``<``, ``2>&1``, ``&>``, ``>|``, ``<>``…),
  recorded on the command so the policy can require approval for them;
- comments (``#`` at the start of a word).

What it refuses (:class:`ShellParseError`): here-documents, process
substitution ``<( … )``, arithmetic (``$(( … ))``, ``$[ … ]``, ``(( … ))``),
complex parameter expansion (``${x:-…}``, ``${!x}``, ``${x@P}`` — some of
these run code), compound commands and reserved words (``if``, ``for``,
``{ … }``, ``[[ … ]]``, ``function``, ``!``, ``time``…), function definitions,
unbalanced quotes or parentheses, and anything else unexpected.

Nothing here imports trio or touches the system.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Redirect",
    "ShellParseError",
    "SimpleCommand",
    "Word",
    "command_allowed",
    "parse_prefix",
    "split_command",
    "wrapped_command",
]


class ShellParseError(ValueError):
    """The command uses shell syntax this splitter does not vouch for."""


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal.

    ``literal`` is true when bash would see exactly ``text``: no expansion
    (``$…``, backticks), no unquoted glob or brace characters, no leading
    ``~``. Only literal words can match an allowed prefix.
    """

    text: str
    literal: bool = True


@dataclass(frozen=True)
class Redirect:
    """``op`` as written (``>``, ``>>``, ``2>``, ``&>``, ``>&``, ``<``…) and
    its target word."""

    op: str
    target: Word

    @property
    def harmless(self) -> bool:
        """Duplicating or closing a descriptor (``2>&1``, ``>&-``) or using
        ``/dev/null``; anything else reads or writes a file."""
        op = self.op.lstrip("0123456789")
        if op == "<<<":
            return True  # a here-string only feeds stdin (substitutions in it are parts of their own)
        if not self.target.literal:
            return False
        if op in (">&", "<&"):
            return self.target.text == "-" or _is_fd(self.target.text)
        return self.target.text == "/dev/null"


@dataclass(frozen=True)
class SimpleCommand:
    """One command bash would run: ``assignments`` (``NAME=value`` before
    it), ``words`` (the command and its arguments) and ``redirects``.

    ``group`` marks a subshell ``( … )``: it has no words of its own (its
    contents are separate commands) but may carry redirects."""

    words: tuple[Word, ...] = ()
    assignments: tuple[Word, ...] = ()
    redirects: tuple[Redirect, ...] = ()
    group: bool = False

    def __str__(self) -> str:
        if self.group:
            text = "( … )"
        else:
            text = " ".join(_show(w) for w in (*self.assignments, *self.words))
        for r in self.redirects:
            text += f" {r.op}{_show(r.target)}"
        return text.strip()


def _is_fd(text: str) -> bool:
    # ASCII only: str.isdigit() also accepts digits bash reads as a file name.
    return text.isascii() and text.isdigit()


def _show(word: Word) -> str:
    return shlex.quote(word.text) if word.literal else word.text


RESERVED_WORDS = frozenset(
    "! case coproc do done elif else esac fi for function if in select then time until while { } [[ ]]".split()
)
_METACHARS = frozenset(" \t\n;&|()<>")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_SPECIAL_PARAMS = "@*#?$!-0123456789"
_NAME_START = re.compile(r"[A-Za-z_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_DEPTH = 20


@dataclass
class _Builder:
    words: list[Word] = field(default_factory=list)
    assignments: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    group: bool = False

    def empty(self) -> bool:
        return not (self.words or self.assignments or self.redirects or self.group)

    def build(self) -> SimpleCommand:
        return SimpleCommand(tuple(self.words), tuple(self.assignments), tuple(self.redirects), self.group)


class _Parser:
    def __init__(self, source: str, depth: int = 0):
        if depth > _MAX_DEPTH:
            raise ShellParseError("nested too deeply")
        self.s = source
        self.i = 0
        self.depth = depth
        self.commands: list[SimpleCommand] = []

    # --- helpers ----------------------------------------------------------

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def startswith(self, text: str) -> bool:
        return self.s.startswith(text, self.i)

    def skip_blanks(self) -> None:
        while True:
            c = self.peek()
            if c in (" ", "\t"):
                self.i += 1
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            else:
                return

    # --- lists ------------------------------------------------------------

    def parse_list(self, closer: str | None) -> None:
        """Commands until the end (``closer`` None) or an unmatched ``)``."""
        if self.depth > _MAX_DEPTH:
            raise ShellParseError("nested too deeply")
        cmd = _Builder()
        need_command = False  # after && || | a command must follow
        seen_any = False
        while True:
            self.skip_blanks()
            c = self.peek()
            if c == "":
                if closer is not None:
                    raise ShellParseError("unbalanced parenthesis: missing ')'")
                if need_command:
                    raise ShellParseError("the command ends with an operator")
                self._finish(cmd)
                return
            if c == "#":  # here always at the start of a word: words end at metacharacters
                while self.peek() not in ("", "\n"):
                    self.i += 1
                continue
            if c == ")":
                if closer != ")":
                    raise ShellParseError("unbalanced parenthesis: unexpected ')'")
                if need_command:
                    raise ShellParseError("an operator before ')' has no command after it")
                if cmd.empty() and not seen_any:
                    raise ShellParseError("empty command substitution or subshell")
                self.i += 1
                self._finish(cmd)
                return
            if c == "\n":
                self.i += 1
                if need_command:
                    continue  # bash lets '&&' and '|' continue on the next line
                if not cmd.empty():
                    self._finish(cmd)
                    seen_any = True
                    cmd = _Builder()
                continue
            if c in ";|" or (c == "&" and self.peek(1) != ">"):
                op = self._read_operator()
                if cmd.empty():
                    raise ShellParseError(f"'{op}' without a command before it")
                self._finish(cmd)
                seen_any = True
                cmd = _Builder()
                need_command = op in ("&&", "||", "|", "|&")
                continue
            if c == "(":
                if not cmd.empty():
                    raise ShellParseError("'(' in the middle of a command (a function definition?)")
                if self.peek(1) == "(":
                    raise ShellParseError("arithmetic '(( … ))' is not supported")
                self.i += 1
                self.depth += 1
                self.parse_list(")")
                self.depth -= 1
                cmd.group = True
                need_command = False
                continue
            need_command = False
            if cmd.group and c not in "<>&0123456789":
                raise ShellParseError("a word after a subshell")
            self._read_word_or_redirect(cmd)

    def _read_operator(self) -> str:
        for op in ("&&", "||", "|&", ";;", ";&", ";", "|", "&"):
            if self.startswith(op):
                if op in (";;", ";&"):
                    raise ShellParseError(f"'{op}' outside a case statement")
                self.i += len(op)
                return op
        raise ShellParseError(f"unexpected character {self.peek()!r}")  # pragma: no cover

    def _finish(self, cmd: _Builder) -> None:
        if cmd.empty():
            return
        if cmd.words and cmd.words[0].text in RESERVED_WORDS:
            raise ShellParseError(f"the shell keyword '{cmd.words[0].text}' (compound commands are not supported)")
        self.commands.append(cmd.build())

    # --- words and redirections --------------------------------------------

    _REDIRECT_OPS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", "<(", ">>", ">&", ">|", ">(", "<", ">")

    def _read_redirect(self, cmd: _Builder, fd: str) -> None:
        for op in self._REDIRECT_OPS:
            if self.startswith(op):
                break
        else:  # pragma: no cover - callers only come here on '<', '>' or '&>'
            raise ShellParseError("unexpected redirection")
        if op in ("<(", ">("):
            raise ShellParseError("process substitution is not supported")
        if op in ("<<", "<<-"):
            raise ShellParseError("here-documents are not supported")
        self.i += len(op)
        self.skip_blanks()
        if self.peek() == "" or self.peek() in _METACHARS:
            raise ShellParseError(f"redirection '{op}' without a target")
        target, _ = self._read_word()
        cmd.redirects.append(Redirect(fd + op, target))

    def _read_word_or_redirect(self, cmd: _Builder) -> None:
        c = self.peek()
        if c in "<>" or (c == "&" and self.peek(1) == ">"):
            self._read_redirect(cmd, "")
            return
        start = self.i
        word, plain = self._read_word()
        if self.peek() in ("<", ">") and plain and _is_fd(word.text):
            self._read_redirect(cmd, word.text)  # '2>file': a descriptor number
            return
        if cmd.group:
            raise ShellParseError("a word after a subshell")
        if not cmd.words and plain is not None and _ASSIGNMENT.match(self.s[start : self.i]):
            cmd.assignments.append(word)
            return
        cmd.words.append(word)

    def _read_word(self) -> tuple[Word, bool]:
        """One word; returns it and whether it was written without any
        quoting or expansion at all."""
        text: list[str] = []
        literal = True
        plain = True
        start = self.i
        while True:
            c = self.peek()
            if c == "" or c in _METACHARS:
                break
            if c == "\\":
                nxt = self.peek(1)
                if nxt == "":
                    raise ShellParseError("the command ends with a backslash")
                self.i += 2
                plain = False
                if nxt != "\n":
                    text.append(nxt)
                continue
            if c == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ShellParseError("unterminated single quote")
                text.append(self.s[self.i + 1 : end])
                self.i = end + 1
                plain = False
                continue
            if c == '"':
                self.i += 1
                if not self._read_double_quoted(text):
                    literal = False
                plain = False
                continue
            if c == "$":
                if not self._read_dollar(text, in_double_quotes=False):
                    literal = False
                    plain = False
                continue
            if c == "`":
                self._read_backticks(in_double_quotes=False)
                text.append("`…`")
                literal = plain = False
                continue
            if c in "*?[]{}" or (c == "~" and self.i == start):
                literal = False
            text.append(c)
            self.i += 1
        if self.i == start:
            raise ShellParseError(f"unexpected character {self.peek()!r}")  # pragma: no cover
        return Word("".join(text), literal), plain

    def _read_double_quoted(self, text: list[str]) -> bool:
        """From after the opening quote to after the closing one; returns
        whether the content was literal."""
        literal = True
        while True:
            c = self.peek()
            if c == "":
                raise ShellParseError("unterminated double quote")
            if c == '"':
                self.i += 1
                return literal
            if c == "\\":
                nxt = self.peek(1)
                if nxt in ("$", "`", '"', "\\"):
                    text.append(nxt)
                    self.i += 2
                elif nxt == "\n":
                    self.i += 2
                else:
                    text.append("\\")
                    self.i += 1
                continue
            if c == "$":
                if not self._read_dollar(text, in_double_quotes=True):
                    literal = False
                continue
            if c == "`":
                self._read_backticks(in_double_quotes=True)
                text.append("`…`")
                literal = False
                continue
            text.append(c)
            self.i += 1

    def _read_dollar(self, text: list[str], *, in_double_quotes: bool) -> bool:
        """At a ``$``; returns True if it was just a literal dollar sign."""
        nxt = self.peek(1)
        if nxt == "(":
            if self.peek(2) == "(":
                raise ShellParseError("arithmetic '$(( … ))' is not supported")
            self.i += 2
            inner = _Parser(self.s, self.depth + 1)
            inner.i = self.i
            inner.parse_list(")")
            self.i = inner.i
            self.commands.extend(inner.commands)
            text.append("$(…)")
            return False
        if nxt == "[":
            raise ShellParseError("arithmetic '$[ … ]' is not supported")
        if nxt == "{":
            end = self.s.find("}", self.i + 2)
            body = self.s[self.i + 2 : end] if end >= 0 else ""
            if end < 0 or not (_NAME.fullmatch(body) or body.isdigit() or (len(body) == 1 and body in _SPECIAL_PARAMS)):
                raise ShellParseError("only simple parameter expansion like ${name} is supported")
            text.append(self.s[self.i : end + 1])
            self.i = end + 1
            return False
        if nxt == "'" and not in_double_quotes:
            # ANSI-C quoting: a string with escapes, never code.
            j = self.i + 2
            while j < len(self.s) and self.s[j] != "'":
                j += 2 if self.s[j] == "\\" else 1
            if j >= len(self.s):
                raise ShellParseError("unterminated $'…' string")
            text.append(self.s[self.i : j + 1])
            self.i = j + 1
            return False
        if nxt == '"' and not in_double_quotes:
            self.i += 2
            self._read_double_quoted(text)
            return False  # locale translation: the text may change
        if nxt and (_NAME_START.match(nxt) or nxt in _SPECIAL_PARAMS):
            m = _NAME.match(self.s, self.i + 1)
            end = m.end() if m else self.i + 2
            text.append(self.s[self.i : end])
            self.i = end
            return False
        text.append("$")
        self.i += 1
        return True

    def _read_backticks(self, *, in_double_quotes: bool) -> None:
        """Old-style command substitution; its body is parsed on its own."""
        body: list[str] = []
        j = self.i + 1
        while True:
            if j >= len(self.s):
                raise ShellParseError("unterminated backquote")
            c = self.s[j]
            if c == "`":
                break
            if c == "\\" and j + 1 < len(self.s):
                nxt = self.s[j + 1]
                if nxt in ("$", "`", "\\"):
                    body.append(nxt)
                    j += 2
                    continue
                if nxt == '"' and in_double_quotes:
                    # Whether bash drops this backslash is murky; refuse
                    # rather than guess where the inner quotes are.
                    raise ShellParseError("escaped double quote inside backquotes inside double quotes")
                body.append(c)
                j += 1
                continue
            body.append(c)
            j += 1
        self.i = j + 1
        inner = _Parser("".join(body), self.depth + 1)
        inner.parse_list(None)
        self.commands.extend(inner.commands)


def split_command(command: str) -> list[SimpleCommand]:
    """Every simple command that running ``command`` could run, in order of
    appearance: the parts of lists and pipelines, the contents of subshells
    and of command substitutions (wherever they sit, even in a redirection
    target or inside double quotes).

    Raises :class:`ShellParseError` for anything it cannot vouch for.
    """
    if "\x00" in command:
        raise ShellParseError("the command contains a NUL byte")
    parser = _Parser(command)
    parser.parse_list(None)
    return parser.commands


_SHELLS = frozenset({"bash", "sh", "dash"})


def wrapped_command(command: SimpleCommand) -> str | None:
    """The command string a wrapper would run: ``eval ARGS…`` (the
    arguments joined by spaces) or ``bash -c STRING [ARG…]`` (also ``sh``,
    ``dash``). None when ``command`` is not such a wrapper.

    Raises :class:`ShellParseError` for a wrapper whose code is not a
    literal, or a shell with other options."""
    words = command.words
    if not words or not words[0].literal:
        return None
    name = words[0].text
    if name == "eval":
        args = words[1:]
        if not args:
            return None
        if not all(w.literal for w in args):
            raise ShellParseError("eval of a string that is only known when it runs")
        return " ".join(w.text for w in args)
    if name in _SHELLS:
        if len(words) >= 3 and words[1].literal and words[1].text == "-c":
            if not words[2].literal:
                raise ShellParseError(f"{name} -c with a command only known when it runs")
            return words[2].text
        if len(words) >= 2 and words[1].text.startswith("-"):
            raise ShellParseError(f"{name} with options other than a lone -c")
    return None


def parse_prefix(text: str) -> tuple[str, ...]:
    """The words of an allowed-command prefix such as ``git status``.

    Raises :class:`ShellParseError` unless it is one simple command of
    literal words with no redirections or assignments."""
    commands = split_command(text)
    if len(commands) != 1:
        raise ShellParseError("a command prefix must be a single command")
    (cmd,) = commands
    if cmd.group or cmd.redirects or cmd.assignments or not cmd.words:
        raise ShellParseError("a command prefix must be plain words")
    if not all(w.literal for w in cmd.words):
        raise ShellParseError("a command prefix cannot contain expansions, globs or substitutions")
    return tuple(w.text for w in cmd.words)


def _part_matches(part: SimpleCommand, prefixes: Iterable[Sequence[str]]) -> bool:
    if part.assignments or not all(r.harmless for r in part.redirects):
        return False
    if part.group:
        return True  # its contents are checked as parts of their own
    if not part.words:
        return False
    for prefix in prefixes:
        if len(prefix) and len(part.words) >= len(prefix) and all(
            w.literal and w.text == p for w, p in zip(part.words, prefix)
        ):
            return True
    return False


def command_allowed(command: str, prefixes: Iterable[Sequence[str]], *, _depth: int = 0) -> tuple[bool, list[str]]:
    """Whether every part of ``command`` starts with one of ``prefixes``
    (matched word by word, so ``git`` does not cover ``gitk``, and
    ``cat`` does not cover ``./cat`` or ``/bin/cat``).

    A part with an assignment (``PATH=. cat``) or a redirection to a file
    never matches; ``eval …`` and ``bash -c …`` match if their inner command
    does (or if the wrapper itself matches a prefix). Returns ``(allowed,
    reasons)``, the reasons naming each part that is not covered.
    """
    prefixes = [tuple(p) for p in prefixes]
    try:
        parts = split_command(command)
    except ShellParseError as exc:
        return False, [f"the command cannot be checked ({exc})"]
    if not parts:
        return False, ["the command is empty"]
    reasons: list[str] = []
    for part in parts:
        if _part_matches(part, prefixes):
            continue
        try:
            inner = wrapped_command(part) if not part.assignments and all(r.harmless for r in part.redirects) else None
        except ShellParseError as exc:
            reasons.append(f"'{part}' cannot be checked ({exc})")
            continue
        if inner is not None and _depth < 5:
            ok, why = command_allowed(inner, prefixes, _depth=_depth + 1)
            if ok:
                continue
            reasons.extend(why)
            continue
        if part.assignments:
            reasons.append(f"'{part}' sets variables")
        elif not all(r.harmless for r in part.redirects):
            reasons.append(f"'{part}' redirects to or from a file")
        else:
            reasons.append(f"'{part}' is not an allowed command")
    return not reasons, reasons
