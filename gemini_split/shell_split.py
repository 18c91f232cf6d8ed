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

What wrappers run (:func:`inner_commands`), for the policy's deny rules:
``eval`` and ``bash -c`` strings; the command after an exec wrapper and its
options (``env``, ``command``, ``exec``, ``nice``, ``nohup``, ``timeout``,
``setsid``, ``stdbuf``, ``ionice``, ``taskset``, ``flock``, ``script -c``,
``sudo``, ``doas``, ``chroot``, ``su -c``, ``runuser``, ``watch``, ``time``,
``busybox``); ``xargs``'s command (the words it adds are unknown) and
``find -exec``'s; and which shells and interpreters read their program
from standard input, which cannot be seen. :func:`without_git_options`
gives ``git -C . push`` as ``git push``.

Nothing here imports trio or touches the system.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "Redirect",
    "ShellParseError",
    "SimpleCommand",
    "Inner",
    "Word",
    "command_allowed",
    "inner_commands",
    "parse_prefix",
    "split_command",
    "without_git_options",
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


# --- what a wrapper runs ------------------------------------------------------------


@dataclass(frozen=True)
class Inner:
    """What a wrapper command runs, as far as it can be seen.

    Exactly one of: ``text``, a shell command string (``bash -c``, ``eval``,
    ``flock FILE -c``, ``su -c``, ``watch``…); ``command``, the words it runs
    directly (``env``, ``nice``, ``find -exec``…), where a word made only
    when it runs (``xargs``'s arguments from its input, ``find``'s ``{}``)
    is not literal; or ``unseen``, why the program it runs cannot be seen
    (a shell reading its commands from standard input, an option this
    module does not know).

    ``transparent``: the wrapper does nothing but run ``text`` (``bash -c``,
    ``eval``), so what ``text`` runs may stand for it; every other wrapper
    changes how its command runs (user, environment, files it creates)."""

    text: str | None = None
    command: SimpleCommand | None = None
    unseen: str | None = None
    transparent: bool = False


class _Unseen(Exception):
    """A wrapper's arguments this module cannot follow (the reason)."""


@dataclass(frozen=True)
class _Made(Word):
    """A word a wrapper makes when it runs (``xargs``'s input, ``find``'s
    ``{}``): it could be anything."""

    literal: bool = False


_UNKNOWN = _Made("…")


def _fixed(word: Word) -> str | None:
    """The word's text if bash passes it unchanged: a literal word, or one
    whose only non-literal part is ``{}`` (which bash does not expand; find
    and xargs replace it)."""
    if word.literal:
        return word.text
    if isinstance(word, _Made):
        return None
    rest = word.text.replace("{}", "")
    if rest.startswith("~") or any(c in rest for c in "*?[]{}$`"):
        return None
    return word.text


def _maybe_option(word: Word) -> bool:
    """Whether a word only known when it runs could turn out to be an
    option (start with ``-``) or empty: it starts with an expansion, a glob
    or ``-`` itself."""
    return isinstance(word, _Made) or not word.text or word.text[0] in "-$`*?[{~\\"


def _assignment(word: Word) -> bool:
    """``NAME=VALUE`` as ``env`` reads it: anything with ``=`` after a
    name that is itself (the value may be only known when it runs)."""
    name, eq, _ = word.text.partition("=")
    return bool(eq) and bool(name) and not any(c in name for c in "$`*?[{~\\")


@dataclass(frozen=True)
class _Opts:
    """A getopt-style option table. Short options: ``flags`` take no value,
    ``with_arg`` take one (attached or the next word), ``optional`` only an
    attached one. Long options: ``long_flags`` (``--x`` or ``--x=v``),
    ``long_with_arg`` (``--x v`` or ``--x=v``); unambiguous prefixes are
    accepted, as getopt_long does. ``permute``: options may follow operands
    (GNU getopt without ``+``). ``numeric``: ``-5`` is ``-n 5`` (nice)."""

    flags: str = ""
    with_arg: str = ""
    optional: str = ""
    long_flags: frozenset[str] = frozenset()
    long_with_arg: frozenset[str] = frozenset()
    permute: bool = False
    numeric: bool = False


def _opts(flags: str = "", with_arg: str = "", optional: str = "", long_flags: str = "", long_with_arg: str = "",
          **kw: bool) -> _Opts:
    return _Opts(flags, with_arg, optional, frozenset(long_flags.split()), frozenset(long_with_arg.split()), **kw)


def _parse(args: Sequence[Word], spec: _Opts) -> tuple[dict[str, str | None], list[Word]]:
    """Options (name → value, None for a flag; the long name for long
    options) and the words after them (all operands, if ``spec.permute``).
    Raises :class:`_Unseen` for an unknown option or a word only known when
    it runs where an option could be."""
    seen: dict[str, str | None] = {}
    operands: list[Word] = []
    i = 0
    while i < len(args):
        text = _fixed(args[i])
        if text is None:
            if spec.permute or _maybe_option(args[i]):
                raise _Unseen(f"'{args[i].text}' is only known when it runs")
            operands.extend(args[i:])
            break
        if text == "--":
            operands.extend(args[i + 1 :])
            break
        if text.startswith("--"):
            key, eq, value = text.partition("=")
            names = spec.long_flags | spec.long_with_arg
            if key not in names:
                matches = [n for n in names if n.startswith(key)]
                if len(matches) != 1:
                    raise _Unseen(f"an option not known here: {key}")
                key = matches[0]
            if key in spec.long_with_arg and not eq:
                i += 1
                value = _fixed(args[i]) if i < len(args) else None
                if value is None:
                    raise _Unseen(f"the value of {key} is not known now")
            seen[key] = value if (eq or key in spec.long_with_arg) else None
            i += 1
            continue
        if text.startswith("-") and len(text) > 1:
            if spec.numeric and text[1:].isascii() and text[1:].isdigit():
                seen["-n"] = text[1:]
                i += 1
                continue
            j = 1
            while j < len(text):
                c = text[j]
                if c in spec.with_arg or c in spec.optional:
                    value = text[j + 1 :]
                    if not value and c in spec.with_arg:
                        i += 1
                        value = _fixed(args[i]) if i < len(args) else None
                        if value is None:
                            raise _Unseen(f"the value of -{c} is not known now")
                    seen["-" + c] = value
                    break
                if c not in spec.flags:
                    raise _Unseen(f"an option not known here: -{c}")
                seen["-" + c] = None
                j += 1
            i += 1
            continue
        if not spec.permute:
            operands.extend(args[i:])
            break
        operands.append(args[i])
        i += 1
    return seen, operands


def _runs(command: SimpleCommand, words: Sequence[Word], assignments: Sequence[Word] = ()) -> list[Inner]:
    """``words`` as the command a wrapper runs (none: it runs nothing)."""
    if not words:
        return []
    return [Inner(command=SimpleCommand(tuple(words), (*command.assignments, *assignments), command.redirects))]


def _has(seen: dict[str, str | None], *names: str) -> bool:
    return any(n in seen for n in names)


# Options as GNU coreutils, util-linux, procps, findutils, sudo and doas
# document them; an option not listed makes the command unseen (asked about
# when a deny rule could match), never allowed past such a rule.
_ENV = _opts("i0v", "uCSa", long_flags="--ignore-environment --null --debug --ignore-signal --default-signal "
             "--block-signal --list-signal-handling --help --version",
             long_with_arg="--unset --chdir --split-string --argv0")
_COMMAND = _opts("pvV")
_EXEC = _opts("cl", "a")
_NOHUP = _opts(long_flags="--help --version")
_NICE = _opts("", "n", long_flags="--help --version", long_with_arg="--adjustment", numeric=True)
_TIMEOUT = _opts("v", "sk", long_flags="--preserve-status --foreground --verbose --help --version",
                 long_with_arg="--signal --kill-after")
_SETSID = _opts("cfw", long_flags="--ctty --fork --wait --help --version")
_STDBUF = _opts("", "ioe", long_flags="--help --version", long_with_arg="--input --output --error")
_IONICE = _opts("tVh", "cnpPu", long_flags="--ignore --help --version",
                long_with_arg="--class --classdata --pid --pgid --uid")
_TASKSET = _opts("acpVh", long_flags="--all-tasks --cpu-list --pid --help --version")
_FLOCK = _opts("sexnoFuvhV", "wE", long_flags="--shared --exclusive --nonblock --nb --close --unlock --no-fork "
               "--verbose --help --version", long_with_arg="--wait --timeout --conflict-exit-code")
_SCRIPT = _opts("aefqhV", "cEIOBTmo", "t", long_flags="--append --return --flush --force --quiet --timing "
                "--help --version", long_with_arg="--command --echo --log-in --log-out --log-io --log-timing "
                "--logging-format --output-limit", permute=True)
_SUDO = _opts("AbEeHiKklnPSsVvN", "ughpCDrtTUR", long_flags="--askpass --background --preserve-env --edit "
              "--set-home --login --remove-timestamp --reset-timestamp --list --non-interactive "
              "--preserve-groups --stdin --shell --version --validate --help --bell",
              long_with_arg="--user --group --host --prompt --close-from --chdir --role --type "
              "--command-timeout --other-user --chroot")
_DOAS = _opts("nsL", "uC")
_CHROOT = _opts(long_flags="--skip-chdir --help --version", long_with_arg="--userspec --groups")
_SU = _opts("flmpPhV", "cgGswCu", long_flags="--fast --login --preserve-environment --pty --help --version",
            long_with_arg="--command --session-command --group --supp-group --shell --whitelist-environment "
            "--user", permute=True)
_WATCH = _opts("bcCefgtxprwhv", "nq", "d", long_flags="--beep --color --no-color --differences --errexit "
               "--chgexit --precise --no-rerun --no-title --no-wrap --no-linewrap --exec --help --version",
               long_with_arg="--interval --equexit")
_TIME = _opts("apqvV", "fo", long_flags="--append --portability --quiet --verbose --help --version",
              long_with_arg="--format --output")
_XARGS = _opts("0rtpxo", "aEIdLnPs", "eil", long_flags="--null --interactive --no-run-if-empty --verbose --exit "
               "--open-tty --show-limits --eof --replace --max-lines --help --version",
               long_with_arg="--arg-file --delimiter --max-args --max-procs --max-chars --process-slot-var")


def _env(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _ENV)
    if _has(seen, "-S", "--split-string"):
        raise _Unseen("splits a string into its command (env -S)")
    while rest and rest[0].literal and rest[0].text == "-":  # 'env -': the same as -i
        rest = rest[1:]
    assignments: list[Word] = []
    while rest and _assignment(rest[0]):
        assignments.append(rest[0])
        rest = rest[1:]
    return _runs(command, rest, assignments)


def _sudo(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _SUDO)
    if _has(seen, "-e", "--edit", "-l", "--list", "-v", "--validate", "-K", "-V", "--version", "--help"):
        return []
    assignments: list[Word] = []
    while rest and _ASSIGNMENT.match(rest[0].text):
        assignments.append(rest[0])
        rest = rest[1:]
    if not rest and _has(seen, "-s", "--shell", "-i", "--login"):
        raise _Unseen("runs a shell that reads its commands from standard input")
    return _runs(command, rest, assignments)


def _doas(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _DOAS)
    if _has(seen, "-C"):
        return []
    if not rest:
        raise _Unseen("runs a shell that reads its commands from standard input")
    return _runs(command, rest)


def _simple(spec: _Opts, *, operands: int = 0, no_command: tuple[str, ...] = ()):
    """A wrapper that runs the words after its options and ``operands``
    (timeout's DURATION, taskset's MASK); ``no_command`` options make it
    run nothing (``taskset -p``, ``command -v``)."""

    def handler(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
        seen, rest = _parse(args, spec)
        if _has(seen, *no_command, "--help", "--version"):
            return []
        return _runs(command, rest[operands:]) if len(rest) > operands else []

    return handler


def _flock(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _FLOCK)
    if _has(seen, "--help", "--version", "-h", "-V") or len(rest) < 2:
        return []  # 'flock 9': locks a descriptor, runs nothing
    if rest[1].literal and rest[1].text in ("-c", "--command"):
        return _string(rest[2:], "flock -c")
    return _runs(command, rest[1:])


def _string(rest: Sequence[Word], what: str, *, transparent: bool = False) -> list[Inner]:
    if not rest:
        return []
    if not rest[0].literal:
        raise _Unseen(f"runs a command string only known when it runs ({what})")
    return [Inner(text=rest[0].text, transparent=transparent)]


def _script(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, _ = _parse(args, _SCRIPT)
    code = seen.get("-c", seen.get("--command"))
    if code is not None:
        return [Inner(text=code)]
    if _has(seen, "-h", "-V", "--help", "--version"):
        return []
    raise _Unseen("runs a shell that reads its commands from standard input")


def _su(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _SU)
    code = next((seen[k] for k in ("-c", "--command", "--session-command") if k in seen), None)
    if code is not None:
        return [Inner(text=code)]
    if _has(seen, "-h", "-V", "--help", "--version"):
        return []
    if _has(seen, "-u", "--user"):  # runuser -u USER COMMAND…
        return _runs(command, rest)
    raise _Unseen("runs a shell that reads its commands from standard input")


def _chroot(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _CHROOT)
    if _has(seen, "--help", "--version") or not rest:
        return []
    if len(rest) == 1:
        raise _Unseen("runs a shell that reads its commands from standard input")
    return _runs(command, rest[1:])


def _watch(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _WATCH)
    if _has(seen, "-h", "-v", "--help", "--version") or not rest:
        return []
    if _has(seen, "-x", "--exec"):
        return _runs(command, rest)
    if not all(w.literal for w in rest):
        raise _Unseen("runs a command string only known when it runs (watch)")
    return [Inner(text=" ".join(w.text for w in rest))]  # watch runs its words with sh -c


def _command(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _COMMAND)
    return [] if _has(seen, "-v", "-V") else _runs(command, rest)


def _builtin(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    return _runs(command, args)


def _eval(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    if not args:
        return []
    if not all(w.literal for w in args):
        raise _Unseen("evaluates a string only known when it runs")
    return [Inner(text=" ".join(w.text for w in args), transparent=True)]


def _xargs(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    seen, rest = _parse(args, _XARGS)
    if _has(seen, "--help", "--version", "--show-limits"):
        return []
    replace = seen.get("-I") or seen.get("-i") or seen.get("--replace") or (
        "{}" if _has(seen, "-i", "--replace") else None)
    words = list(rest) or [Word("echo")]
    if replace:
        # Each word holding the replace string gets a line of the input.
        words = [_Made(w.text) if replace in w.text else w for w in words]
    else:
        words.append(_UNKNOWN)  # the arguments read from its input
    return _runs(command, words)


_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
#: find primaries whose next word is their argument, never a primary.
_FIND_ARG = frozenset(
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type -xtype -user -group "
    "-uid -gid -perm -size -newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -used -links -inum "
    "-samefile -fstype -context -maxdepth -mindepth -printf -fprint -fprint0 -fls -regextype -files0-from "
    "-D -O".split())


def _find(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    inners: list[Inner] = []
    i = 0
    while i < len(args):
        text = _fixed(args[i])
        if text is None:
            if i and args[i - 1].literal and args[i - 1].text in _FIND_ARG:
                i += 1
                continue
            raise _Unseen(f"'{args[i].text}' is only known when it runs (it could be -exec or end one)")
        if text == "-fprintf":
            i += 3
            continue
        if text not in _FIND_EXEC:
            i += 1
            continue
        words: list[Word] = []
        i += 1
        while i < len(args):
            word = args[i]
            text = _fixed(word)
            if text is None:
                raise _Unseen(f"'{word.text}' is only known when it runs (it could end {args[i - 1].text})")
            i += 1
            if text == ";" or (text == "+" and words and words[-1].text == "{}"):
                break
            words.append(_Made(text) if "{}" in text else Word(text, word.literal))
        inners += _runs(command, words)
    return inners


_SH_LIKE = frozenset("sh bash dash zsh ksh ksh93 mksh pdksh oksh lksh ash rbash yash posh busybox-sh".split())
_OTHER_SHELLS = frozenset("fish csh tcsh xonsh nu elvish pwsh rc es".split())
_SHELL_LONG_WITH_ARG = frozenset({"--rcfile", "--init-file"})


def _is_device(path: str) -> bool:
    """Whether ``path`` names standard input or another descriptor or
    terminal (``/dev/stdin``, ``/dev/fd/0``, ``/proc/self/fd/0``…)."""
    norm = posixpath.normpath(re.sub("/+", "/", path))
    return norm == "-" or norm.startswith(("/dev/", "/proc/"))


def _shell(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """bash-like option parsing: ``-c`` anywhere among the options makes
    the first operand the command string; ``-s``, no operand, or an operand
    naming a device reads the commands from standard input."""
    name = command.words[0].text.rsplit("/", 1)[-1]
    mode_c = mode_s = False
    i = 0
    while i < len(args):
        text = _fixed(args[i])
        if text is None:
            if _maybe_option(args[i]):
                raise _Unseen(f"'{args[i].text}' is only known when it runs")
            break
        if text in ("--", "-"):
            i += 1
            break
        if text.startswith("--"):
            i += 2 if text in _SHELL_LONG_WITH_ARG else 1
            continue
        if text[0] in "-+" and len(text) > 1:
            for c in text[1:]:
                if c == "c":
                    mode_c = True
                elif c == "s":
                    mode_s = True
                elif c in "oO":
                    i += 1  # the option's name
            i += 1
            continue
        break
    rest = args[i:]
    if mode_c:
        return _string(rest, f"{name} -c", transparent=True)
    if mode_s or not rest:
        raise _Unseen("reads its commands from standard input")
    script = _fixed(rest[0])
    if script is None or _is_device(script):
        raise _Unseen(f"reads its commands from {rest[0].text}")
    return []  # a script file: what it runs is not in the command


def _other_shell(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    raise _Unseen("runs commands in a shell language this policy does not read")


def _source(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    if args and args[0].literal and args[0].text == "--":
        args = args[1:]
    if not args:
        return []
    path = _fixed(args[0])
    if path is None or _is_device(path):
        raise _Unseen(f"reads its commands from {args[0].text}")
    return []  # a script file


@dataclass(frozen=True)
class _Interp:
    """How an interpreter takes its program: ``code`` options give it in an
    argument (``python -c``, ``perl -e``), ``interactive`` ones read more
    of it from standard input; ``with_arg`` options take a value (attached
    or the next word), ``optional`` ones only an attached value."""

    code: str = ""
    interactive: str = ""
    with_arg: str = ""
    optional: str = ""
    long_with_arg: frozenset[str] = frozenset()
    long_code: frozenset[str] = frozenset()


_INTERPRETERS: list[tuple[re.Pattern[str], _Interp]] = [
    (re.compile(r"(python|pypy)[0-9.]*"),
     _Interp("cm", "i", "WX", long_with_arg=frozenset({"--check-hash-based-pycs"}))),
    (re.compile(r"perl[0-9.]*"), _Interp("eE", "", "", "IMmxil0CdDF")),
    (re.compile(r"ruby[0-9.]*"), _Interp("e", "", "rICEF", "xi0TWK")),
    (re.compile(r"node(js)?[0-9.]*"), _Interp("ep", "i", "rC", long_code=frozenset({"--eval", "--print"}),
                                             long_with_arg=frozenset({"--require", "--import", "--loader",
                                                                      "--experimental-loader", "--input-type",
                                                                      "--conditions", "--title"}))),
    (re.compile(r"php[0-9.]*"), _Interp("rBREfF", "a", "dcz")),
    (re.compile(r"lua(jit)?[0-9.]*"), _Interp("e", "i", "l")),
    (re.compile(r"(tclsh|wish)[0-9.]*"), _Interp()),
]


def _interpreter(command: SimpleCommand, args: Sequence[Word], spec: _Interp) -> list[Inner]:
    """An interpreter runs a program it reads from standard input when it
    is given none (no program file, no code option), ``-`` or a device
    path, or an interactive option; a program in a file or an argument is
    not a command this module reads ([])."""
    i = 0
    while i < len(args):
        text = _fixed(args[i])
        if text is None:
            if _maybe_option(args[i]):
                raise _Unseen(f"'{args[i].text}' is only known when it runs")
            return []  # the program file
        if text == "-" or _is_device(text):
            raise _Unseen(f"reads its program from {text}")
        if text == "--":
            if i + 1 >= len(args):
                break
            program = _fixed(args[i + 1])
            if program is None or _is_device(program):
                raise _Unseen(f"reads its program from {args[i + 1].text}")
            return []
        if text in ("-h", "-V", "--help", "--version"):
            return []
        if text.startswith("--"):
            key, eq, _ = text.partition("=")
            if key in spec.long_code:
                return []
            i += 2 if key in spec.long_with_arg and not eq else 1
            continue
        if text.startswith("-"):
            letters = text[1:]
            skip = 1
            for j, c in enumerate(letters):
                if c in spec.interactive:
                    raise _Unseen("reads more of its program from standard input (interactive)")
                if c in spec.code:
                    return []
                if c in spec.with_arg:
                    skip = 1 if letters[j + 1 :] else 2
                    break
                if c in spec.optional:
                    break
            i += skip
            continue
        return []  # the program file
    raise _Unseen("reads its program from standard input")


_HANDLERS = {
    "eval": _eval,
    "env": _env,
    "command": _command,
    "builtin": _builtin,
    "busybox": _builtin,  # busybox APPLET ARGS…
    "toybox": _builtin,
    "exec": _simple(_EXEC),
    "nohup": _simple(_NOHUP),
    "nice": _simple(_NICE),
    "timeout": _simple(_TIMEOUT, operands=1),
    "setsid": _simple(_SETSID),
    "stdbuf": _simple(_STDBUF),
    "ionice": _simple(_IONICE, no_command=("-p", "-P", "-u", "--pid", "--pgid", "--uid")),
    "taskset": _simple(_TASKSET, operands=1, no_command=("-p", "--pid")),
    "flock": _flock,
    "script": _script,
    "sudo": _sudo,
    "doas": _doas,
    "chroot": _chroot,
    "su": _su,
    "runuser": _su,
    "watch": _watch,
    "time": _simple(_TIME),
    "xargs": _xargs,
    "find": _find,
    ".": _source,
    "source": _source,
    **{name: _shell for name in _SH_LIKE},
    **{name: _other_shell for name in _OTHER_SHELLS},
}


def _alias(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``alias p='git push'``: the body runs wherever ``p`` is used (bash
    expands aliases with ``shopt -s expand_aliases``, sh always), with
    words only known then after it."""
    inners: list[Inner] = []
    for word in args:
        name, eq, body = word.text.partition("=")
        if not eq or name.startswith("-"):
            continue
        if not word.literal:
            raise _Unseen("defines an alias only known when it runs")
        inners.append(Inner(text=body + " $_"))  # '$_': the words it will be used with
    return inners


def _hash(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``hash -p /usr/bin/git g``: ``g`` runs that program from then on."""
    seen, _ = _parse(args, _opts("rdlt", "p"))
    path = seen.get("-p")
    return _runs(command, [Word(path), _UNKNOWN]) if path else []


def _trap(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``trap 'git push' EXIT``: the action is a command string."""
    rest = list(args)
    if rest and rest[0].literal and rest[0].text in ("-p", "-l", "-P"):
        return []
    if rest and rest[0].literal and rest[0].text == "--":
        rest = rest[1:]
    if len(rest) < 2 or rest[0].literal and rest[0].text in ("", "-"):
        return []  # one word is a signal to reset
    return _string(rest, "trap")


def _stdin_scheduler(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``at``/``batch`` read the commands they schedule from standard input
    (``-f FILE``: from a file; ``-l``, ``-r``…: no command)."""
    if any(w.literal and w.text.startswith("-") and any(c in w.text[1:] for c in "lrdcVf") for w in args):
        return []
    raise _Unseen("reads the commands it schedules from standard input")


def _make(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """make runs its makefile's recipes (a file, not seen); one read from
    standard input or given with ``--eval`` cannot be seen either."""
    for k, word in enumerate(args):
        text = word.text
        if text in ("-f", "--file", "--makefile") and k + 1 < len(args):
            target = _fixed(args[k + 1])
            if target is None or _is_device(target):
                raise _Unseen(f"reads its makefile from {args[k + 1].text}")
        elif text.startswith(("--file=", "--makefile=")) or (text.startswith("-f") and len(text) > 2):
            target = text.partition("=")[2] if text.startswith("--") else text[2:]
            if not word.literal or _is_device(target):
                raise _Unseen(f"reads its makefile from {target}")
        elif text.startswith(("--eval", "-E")):
            raise _Unseen("evaluates makefile text (--eval), which this policy does not read")
    return []


def _runs_unread(what: str):
    def handler(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
        raise _Unseen(what)

    return handler


def _callback(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``compgen -C CMD`` / ``complete -C CMD`` / ``mapfile -C CMD``: a
    command string they run."""
    inners: list[Inner] = []
    for k, word in enumerate(args):
        if word.literal and word.text == "-C" and k + 1 < len(args):
            inners += _string([args[k + 1]], f"{command.words[0].text} -C")
        elif word.literal and word.text.startswith("-") and "C" in word.text[1:] and not word.text.startswith("--"):
            raise _Unseen("-C among other options")
    return inners


def _sets_variable(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``read PS4``, ``printf -v PS4 …``: a variable a shell runs, set from
    what cannot be seen."""
    for word in args:
        if word.text.removeprefix("-v") in _COMMAND_VARIABLES | _CODE_VARIABLES:
            raise _Unseen(f"sets {word.text.removeprefix('-v')} from its input or arguments, which this policy "
                          "does not read")
    return []


def _fc(command: SimpleCommand, args: Sequence[Word]) -> list[Inner]:
    """``fc -s``/``fc`` re-run commands from the shell's history."""
    if any(w.literal and w.text.startswith("-") and "l" in w.text[1:] for w in args):
        return []
    raise _Unseen("re-runs a command from the shell's history")


_HANDLERS.update({
    "make": _make,
    "gmake": _make,
    "compgen": _callback,
    "complete": _callback,
    "mapfile": _callback,
    "readarray": _callback,
    "read": _sets_variable,
    "printf": _sets_variable,
    "fc": _fc,
    "alias": _alias,
    "hash": _hash,
    "trap": _trap,
    "at": _stdin_scheduler,
    "batch": _stdin_scheduler,
    "tmux": _runs_unread("runs commands in a terminal multiplexer, which this policy does not read"),
    "screen": _runs_unread("runs commands in a terminal multiplexer, which this policy does not read"),
    "parallel": _runs_unread("builds its commands from its arguments and input, which this policy does not read"),
})

#: Variables whose value a program runs as a command (an editor, a pager,
#: git's ssh…), or a shell expands with command substitution (prompts).
_COMMAND_VARIABLES = frozenset(
    "EDITOR VISUAL PAGER MANPAGER BROWSER GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_PAGER GIT_SSH GIT_SSH_COMMAND "
    "GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS LESSOPEN LESSCLOSE PROMPT_COMMAND PS0 PS1 PS2 PS3 PS4".split())
#: Variables that make a shell run code from elsewhere (a file, a function).
_CODE_VARIABLES = frozenset({"BASH_ENV", "ENV"})
_DECLARING = frozenset({"export", "declare", "typeset", "local", "readonly"})


def _variables(words: Iterable[Word]) -> list[Inner]:
    """What assignments among ``words`` make run: a command in
    ``GIT_EDITOR='…'`` or ``PS4='$(…)'``; ``BASH_ENV``, ``ENV`` and
    exported functions (``BASH_FUNC_x%%``) cannot be seen."""
    inners: list[Inner] = []
    for word in words:
        name, eq, value = word.text.partition("=")
        if not eq:
            continue
        name = name.removesuffix("+")
        if name in _COMMAND_VARIABLES:
            if word.literal:
                inners.append(Inner(text=value))
            else:
                inners.append(Inner(unseen=f"sets {name} to a command only known when it runs"))
        elif name in _CODE_VARIABLES or name.startswith("BASH_FUNC_"):
            inners.append(Inner(unseen=f"sets {name}, which makes a shell run code from elsewhere"))
    return inners


def inner_commands(command: SimpleCommand) -> list[Inner]:
    """What ``command`` runs besides itself, when it is an exec wrapper
    (``env``, ``nice``, ``timeout``, ``sudo``…), ``eval``, a shell or an
    interpreter, ``xargs`` or ``find -exec``, git running commands (``git
    bisect run``, ``submodule foreach``, ``rebase --exec``, a ``-c`` editor
    or pager), an alias, ``hash -p`` or a trap, or a variable a program runs
    (``GIT_EDITOR=…``, ``PS4=…``); ``[]`` for any other command, or one of
    those that runs nothing else (``command -v git``, ``env`` alone, ``bash
    script.sh``: a script file is not part of the command).

    Never raises: what cannot be followed (an unknown option, a word only
    known when it runs where an option could be, a program read from
    standard input) is an :class:`Inner` with ``unseen`` set."""
    words = command.words
    if command.group or not words or not words[0].literal:
        return []
    name = words[0].text.rsplit("/", 1)[-1]
    inners = _variables(command.assignments)
    if name in _DECLARING:
        inners += _variables(words[1:])
    handler = _HANDLERS.get(name)
    try:
        if handler is not None:
            return inners + handler(command, words[1:])
        if name == "git" or name.startswith("git-"):
            return inners + _git(command)
        for pattern, spec in _INTERPRETERS:
            if pattern.fullmatch(name):
                return inners + _interpreter(command, words[1:], spec)
    except _Unseen as exc:
        return [*inners, Inner(unseen=str(exc))]
    return inners


#: git's global options (``git [OPTIONS] COMMAND``): with a value (the next
#: word, or after ``=`` for the long ones), and without.
_GIT_WITH_ARG = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                           "--super-prefix", "--attr-source"})
_GIT_FLAGS = frozenset({"-p", "-P", "--paginate", "--no-pager", "--bare", "--no-replace-objects", "--no-lazy-fetch",
                        "--no-optional-locks", "--no-advice", "--literal-pathspecs", "--glob-pathspecs",
                        "--noglob-pathspecs", "--icase-pathspecs", "--exec-path", "--html-path", "--man-path",
                        "--info-path", "--list-cmds"})
#: Configuration that can make a git command name mean another command.
_GIT_ALIASING = re.compile(r"(alias|include|includeif)\.", re.IGNORECASE)
#: Configuration whose value git runs as a command (``core.sshCommand``,
#: ``core.pager``, ``pager.log``, ``diff.x.textconv``, ``credential.helper``…).
_GIT_COMMAND_KEY = re.compile(
    r"(pager\..*|.*\.(sshcommand|pager|editor|askpass|fsmonitor|external|program|helper|clean|smudge|process"
    r"|textconv|command|driver|packobjectshook|receivepack|uploadpack))", re.IGNORECASE)


@dataclass
class _GitLine:
    view: SimpleCommand  # git SUBCOMMAND ARGS…
    stripped: bool  # global options were removed, or the subcommand made unknown
    configs: list[tuple[str, str]]  # -c KEY=VALUE pairs


def _git_line(command: SimpleCommand) -> _GitLine | None:
    words = command.words
    if not words or not words[0].literal:
        return None
    base = words[0].text.rsplit("/", 1)[-1]
    if base != "git":
        if base.startswith("git-") and len(base) > 4:  # /usr/lib/git-core/git-push
            view = SimpleCommand((Word("git"), Word(base[4:]), *words[1:]), command.assignments, command.redirects)
            return _GitLine(view, True, [])
        return None
    aliasing = any(w.text.startswith("GIT_CONFIG") for w in command.assignments)
    configs: list[tuple[str, str]] = []
    i = 1
    while i < len(words):
        word = words[i]
        if not word.literal:
            return _GitLine(SimpleCommand((words[0], _UNKNOWN), command.assignments, command.redirects), True,
                            configs)
        key, eq, value = word.text.partition("=")
        if key in _GIT_WITH_ARG:
            if not eq or key in ("-c", "-C"):
                i += 1
                if i >= len(words):
                    break
                value = words[i].text
                if not words[i].literal and key == "-c":
                    aliasing = True  # a setting only known when it runs
            if key in ("-c", "--config-env"):
                if _GIT_ALIASING.match(value):
                    aliasing = True
                if key == "-c":
                    name, _, setting = value.partition("=")
                    configs.append((name, setting))
            i += 1
            continue
        if key in _GIT_FLAGS:
            i += 1
            continue
        break
    rest = words[i:]
    if aliasing and rest:
        rest = (_Made(rest[0].text), *rest[1:])
    view = SimpleCommand((words[0], *rest), command.assignments, command.redirects)
    return _GitLine(view, i > 1 or aliasing, configs)


def without_git_options(command: SimpleCommand) -> SimpleCommand | None:
    """``git -C dir -c a=b --no-pager push …`` (or ``git-push …``) as ``git
    push …``: the git command with git's global options removed, for deny
    rules to match. The subcommand is not literal when the command line
    could make it an alias (``-c alias.p=push``, ``--config-env``,
    ``GIT_CONFIG_*`` assignments), or when an option is only known when it
    runs. None when ``command`` is not git or has nothing to remove."""
    line = _git_line(command)
    return line.view if line is not None and line.stripped else None


def _git(command: SimpleCommand) -> list[Inner]:
    """The commands a git command line runs: ``-c`` settings git runs as a
    command, ``bisect run CMD…``, ``submodule foreach CMD``, ``rebase
    --exec CMD``."""
    line = _git_line(command)
    if line is None:
        return []
    inners = [Inner(text=value.removeprefix("!")) for key, value in line.configs if _GIT_COMMAND_KEY.fullmatch(key)]
    words = line.view.words
    sub = words[1].text if len(words) > 1 and words[1].literal else None
    rest = list(words[2:])
    if sub == "bisect" and rest and rest[0].literal and rest[0].text == "run":
        inners += _runs(command, rest[1:])
    elif sub == "submodule":
        while rest and rest[0].literal and rest[0].text.startswith("-"):
            rest = rest[1:]
        if rest and rest[0].literal and rest[0].text == "foreach":
            rest = rest[1:]
            while rest and rest[0].literal and rest[0].text in ("--recursive", "--quiet", "-q", "--"):
                rest = rest[1:]
            if rest:
                if not all(w.literal for w in rest):
                    raise _Unseen("submodule foreach runs a command only known when it runs")
                inners.append(Inner(text=" ".join(w.text for w in rest)))
    if sub is not None:
        inners += _git_command_options(sub, rest)
    return inners


#: git options whose value git runs as a shell command (``rebase --exec``,
#: ``filter-branch --tree-filter``, ``fetch --upload-pack``, ``grep -O``…),
#: and the short ones per subcommand.
_GIT_COMMAND_OPTIONS = frozenset(
    "--exec --extcmd --upload-pack --receive-pack --tree-filter --index-filter --msg-filter --env-filter "
    "--commit-filter --parent-filter --tag-name-filter --to-cmd --cc-cmd --header-cmd --sendmail-cmd "
    "--open-files-in-pager".split())
_GIT_COMMAND_SHORT = {"rebase": "-x", "difftool": "-x", "clone": "-u", "grep": "-O"}


def _git_command_options(sub: str, rest: Sequence[Word]) -> list[Inner]:
    short = _GIT_COMMAND_SHORT.get(sub)
    inners: list[Inner] = []
    for k, word in enumerate(rest):
        text = word.text
        key, eq, attached = text.partition("=")
        value: Word | None = None
        if key in _GIT_COMMAND_OPTIONS:
            value = Word(attached, word.literal) if eq else (rest[k + 1] if k + 1 < len(rest) else None)
        elif short and text == short and sub != "grep":
            value = rest[k + 1] if k + 1 < len(rest) else None
        elif short and text.startswith(short) and len(text) > 2:
            value = Word(text[2:], word.literal)
        if value is not None:
            inners += _string([value], f"git {sub} {key}")
    return inners


#: Programs that run a command given among their words, whose options are
#: not modelled one by one: a denied command among their words may run.
_RUNS_ITS_WORDS = frozenset(
    "strace ltrace valgrind gdb perf unshare nsenter chrt prlimit setpriv capsh firejail bwrap fakeroot fakechroot "
    "faketime torsocks torify proxychains proxychains4 tsocks numactl cpulimit trickle chpst softlimit setuidgid "
    "envdir setlock runcon sg newgrp pkexec gosu su-exec dumb-init tini dbus-run-session dbus-launch xvfb-run "
    "systemd-run systemd-inhibit catchsegv ssh sshpass unbuffer rlwrap caffeinate eatmydata nocache ccache "
    "chronic ifne entr timelimit daemonize start-stop-daemon schroot proot flatpak-spawn toolbox distrobox "
    "nix-shell direnv pipenv poetry uv uvx npx pnpx bunx pdm hatch conda mamba micromamba pixi rye".split())


def runs_its_words(command: SimpleCommand) -> bool:
    """Whether ``command`` is a program known to run a command given among
    its words whose options this module does not model (``strace -f git
    push``, ``unshare -r git push``, ``ssh host git push``, ``poetry run git
    push``): a deny rule matching some of its later words may be what it
    runs."""
    words = command.words
    return bool(words) and words[0].literal and words[0].text.rsplit("/", 1)[-1] in _RUNS_ITS_WORDS
