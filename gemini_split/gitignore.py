"""``.gitignore`` matching, and the glob syntax the search tools accept.

Git's rules (gitignore(5)), as far as a file walker needs them:

- blank lines and lines starting with ``#`` are skipped; ``\\#`` and ``\\!``
  escape a leading ``#`` or ``!``; trailing unescaped spaces are dropped;
- ``!pattern`` re-includes what an earlier pattern excluded (but nothing
  inside an excluded directory: walkers do not enter those at all);
- a trailing ``/`` matches directories only;
- a pattern with a ``/`` at the start or in the middle is anchored to the
  directory of its ``.gitignore``; otherwise it matches a name at any depth;
- ``*`` and ``?`` do not cross ``/``; ``**`` does (``**/x``, ``a/**``,
  ``a/**/b``); ``[...]`` is a character class;
- a deeper ``.gitignore`` and, within one file, a later line take precedence.

:class:`IgnoreRules` holds the patterns; the caller reads the files (see
:meth:`IgnoreRules.add_file`). Nothing here touches the disk except
``add_file``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from gemini_split.regex import compile_linear, escape_char

MAX_IGNORE_FILE_CHARS = 1024 * 1024
"""A longer ``.gitignore`` is read only this far."""


def glob_to_regex(pattern: str, *, braces: bool = False) -> str:
    """A regular expression (RE2 syntax, without anchors) for a
    slash-separated glob.

    ``*`` and ``?`` stay within one path component, ``**`` spans any number
    of components (``**/`` also matches none), ``[...]`` is a class (``[!...]``
    negates), ``\\x`` is a literal ``x``. With ``braces``, ``{a,b}`` is an
    alternation (as in shell and most glob libraries; gitignore has none).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    depth = 0  # open brace groups
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                before_ok = i == 0 or pattern[i - 1] == "/"
                j = i + 2
                after_slash = j < n and pattern[j] == "/"
                if before_ok and after_slash:
                    out.append("(?:.*/)?")  # '**/' : zero or more directories
                    i = j + 1
                    continue
                if before_ok and j == n:
                    out.append(".*")  # trailing '**': everything below
                    i = j
                    continue
                out.append("[^/]*")  # '**' glued to other text acts like '*'
                i = j
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and pattern[j] in "!^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(escape_char(c))  # no closing bracket: literal '['
            else:
                body = pattern[i + 1 : j]
                negate = body[:1] in ("!", "^")
                if negate:
                    body = body[1:]
                body = "".join(ch if ch == "-" else escape_char(ch) for ch in body)
                out.append(f"[^/{body}]" if negate else f"[{body}]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(escape_char(pattern[i]))
        elif braces and c == "{":
            depth += 1
            out.append("(?:")
        elif braces and c == "}" and depth:
            depth -= 1
            out.append(")")
        elif braces and c == "," and depth:
            out.append("|")
        else:
            out.append(escape_char(c))
        i += 1
    out.extend(")" * depth)
    return "".join(out)


def compile_glob(pattern: str, *, braces: bool = False, case_sensitive: bool = True) -> Any:
    """A linear-time matcher (RE2) for the whole of a slash-separated glob:
    ``compile_glob("*.py").match(path)``. Raises :class:`ValueError` for a
    glob RE2 cannot compile (an inverted range such as ``[z-a]``)."""
    return compile_linear(f"(?s:{glob_to_regex(pattern, braces=braces)})\\z", case_sensitive=case_sensitive)


class _Rule(msgspec.Struct, frozen=True):
    base: str  # directory of the .gitignore, relative to the walk root ('' = root)
    regex: Any  # an RE2 pattern: a .gitignore is file content a model may have written
    negated: bool
    dir_only: bool


def _parse_line(line: str) -> tuple[str, bool, bool, bool] | None:
    """``(pattern, negated, dir_only, anchored)`` or None for no pattern."""
    line = line.rstrip("\n").rstrip("\r")
    if not line or line.startswith("#"):
        return None
    # Trailing spaces are ignored unless escaped with a backslash.
    stripped = line.rstrip(" ")
    if stripped != line and stripped.endswith("\\"):
        stripped += " "
    line = stripped
    negated = False
    if line.startswith("!"):
        negated, line = True, line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    line = line.rstrip("/") if dir_only else line
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    return line, negated, dir_only, anchored


class IgnoreRules:
    """The ignore patterns in force for a walk, from the ``.gitignore`` files
    met so far. Paths are relative to the walk root, ``/``-separated."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []

    def add_lines(self, lines: list[str] | str, base: str = "") -> None:
        """Add the patterns of one ``.gitignore`` whose directory is ``base``
        (relative to the walk root; ``""`` for the root itself)."""
        if isinstance(lines, str):
            lines = lines.splitlines()
        base = base.strip("/")
        for raw in lines:
            parsed = _parse_line(raw)
            if parsed is None:
                continue
            pattern, negated, dir_only, anchored = parsed
            body = glob_to_regex(pattern)
            regex = f"{body}" if anchored else f"(?:.*/)?{body}"
            try:
                compiled = compile_linear(f"(?s:{regex})\\z")
            except ValueError:
                continue  # git skips a pattern it cannot use; so do we
            self._rules.append(_Rule(base, compiled, negated, dir_only))

    def add_file(self, path: str | os.PathLike[str], base: str = "") -> None:
        """Read a ``.gitignore`` (or ``.git/info/exclude``) if it is there.

        Unreadable or missing files are skipped: ignoring is a convenience,
        not a safety boundary."""
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                self.add_lines(f.read(MAX_IGNORE_FILE_CHARS).splitlines(), base)
        except OSError:
            return

    def __len__(self) -> int:
        return len(self._rules)

    def is_ignored(self, rel_path: str, is_dir: bool) -> bool:
        """Whether the entry at ``rel_path`` is ignored by the patterns alone
        (its parent directories are assumed not to be: a walker never goes
        into an ignored directory)."""
        rel_path = rel_path.strip("/")
        ignored = False
        for rule in self._rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.base:
                if not rel_path.startswith(rule.base + "/"):
                    continue
                sub = rel_path[len(rule.base) + 1 :]
            else:
                sub = rel_path
            if rule.regex.match(sub):
                ignored = not rule.negated
        return ignored

    def copy(self) -> IgnoreRules:
        other = IgnoreRules()
        other._rules = list(self._rules)
        return other
