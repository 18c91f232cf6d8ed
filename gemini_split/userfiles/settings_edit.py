"""Editing a ``settings.json`` file in place: a key set or removed, the rest
of the file — its comments, its key order, its indentation — kept as written.

gemini-cli's settings files may hold ``//`` and ``/* */`` comments, so a
command that changes one key (``/model set NAME --persist``,
``/skills disable NAME``, ``gemini-split mcp add``…) must not load the file
as JSON and dump it back. This module changes the text itself, the way an
editor would: a new value replaces the old value's characters; a new key is
added after the last key of its object, on a line of its own with the
indentation of its neighbours; a removed key takes its line with it (and a
comment at the end of that line).

Use::

    from gemini_split.userfiles.settings_edit import SettingsFile

    settings = SettingsFile.read(path)          # SettingsError if unusable
    names = settings.get("skills.disabled", [])
    settings.set("skills.disabled", [*names, "pdf"])
    settings.unset(("mcpServers", "my.server"))  # a key holding a dot
    settings.save()                             # atomic; False if unchanged

or, for one change, :func:`set_setting` / :func:`unset_setting`.

Contract:

- A key is a dotted string (``"model.name"``) or a sequence of key names
  (for names that hold a dot, such as an MCP server's). Missing objects on
  the way are created; a value on the way that is not an object is refused.
- The file is read as the settings reader reads it (same size limit, same
  grammar: JSON with comments, no trailing commas) and a file it would
  refuse is refused here too, with the same message plus "left unchanged":
  :class:`~gemini_split.errors.SettingsError`. ``$VAR`` references are not
  expanded: what is written is what was there. A missing (or blank) file is
  an empty object.
- :meth:`SettingsFile.save` writes only when something changed, with
  :func:`gemini_split.files.replace_atomically` (all or nothing; the file is
  as it was when writing fails, and ``OSError`` propagates), keeps the
  file's permission bits, writes through a symbolic link to the file it
  points at, and keeps a byte-order mark and CRLF line ends.
- Comments *inside* a value that is replaced or removed go with it; every
  other comment stays where it was.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded, replace_atomically
from gemini_split.userfiles.settings import MAX_SETTINGS_BYTES, parse_json_object, strip_json_comments

Key = str | Sequence[str]

_BOM = "\ufeff"
_WHITESPACE = " \t\r\n"
_MISSING = object()


class SettingsFile:
    """One settings file opened for editing (see the module's contract).

    Nothing is written before :meth:`save`; edits made before it are
    written together."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self._bom = text.startswith(_BOM)
        self._text = text.removeprefix(_BOM)
        self._original = self._text
        self._newline = "\r\n" if "\r\n" in self._text else "\n"
        if not strip_json_comments(self._text).strip():
            # Blank, or comments only: an empty object after what is there.
            self._text += ("" if not self._text or self._text.endswith("\n") else self._newline) + "{}" + self._newline
        self._parse()

    @classmethod
    def read(cls, path: str | Path) -> SettingsFile:
        """The settings file ``path`` (missing: empty) ready to edit. Raises
        :class:`SettingsError` for a file the settings reader would refuse,
        ``OSError`` for one that cannot be read."""
        path = Path(path)
        try:
            data = read_bounded(path, MAX_SETTINGS_BYTES)
        except FileNotFoundError:
            return cls(path, "")
        if len(data) > MAX_SETTINGS_BYTES:
            raise SettingsError(f"{path}: larger than {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB; left unchanged")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SettingsError(f"{path}: not UTF-8 text; left unchanged") from None
        return cls(path, text)

    @property
    def text(self) -> str:
        """The file's text as it would be saved (without a byte-order mark)."""
        return self._text

    @property
    def changed(self) -> bool:
        return self._text != self._original

    def get(self, key: Key, default: Any = None) -> Any:
        """The value at ``key`` as written (``$VAR`` unexpanded), or ``default``."""
        value: Any = self._data
        for part in _parts(key):
            if not isinstance(value, dict) or part not in value:
                return default
            value = value[part]
        return value

    def set(self, key: Key, value: Any) -> None:
        """Make ``key`` hold ``value`` (anything JSON can hold), creating the
        objects on the way. Raises :class:`SettingsError` when a value on
        the way is not an object (the file is then unchanged)."""
        parts = _parts(key)
        encoded = msgspec.json.encode(value)  # a TypeError for what JSON cannot hold, before any change
        obj = self._root
        for depth, part in enumerate(parts):
            member = obj.find(part)
            if member is None:
                rest: Any = msgspec.json.decode(encoded)
                for name in reversed(parts[depth + 1:]):
                    rest = {name: rest}
                self._insert(obj, part, rest)
                break
            if depth == len(parts) - 1:
                self._replace(member, encoded)
                break
            if member.value is None:
                raise SettingsError(f"{self.path}: {'.'.join(parts[:depth + 1])!r} is not an object, so "
                                    f"{'.'.join(parts)!r} cannot be set; left unchanged")
            obj = member.value
        self._parse()
        if self.get(parts, _MISSING) != msgspec.json.decode(encoded):  # a defect here, never a user's error
            raise AssertionError(f"settings_edit: setting {'.'.join(parts)!r} in {self.path} went wrong")

    def unset(self, key: Key) -> bool:
        """Remove ``key`` (every copy, if the file names it twice); returns
        whether it was there."""
        parts = _parts(key)
        obj = self._root
        for part in parts[:-1]:
            member = obj.find(part)
            if member is None or member.value is None:
                return False
            obj = member.value
        if obj.find(parts[-1]) is None:
            return False
        while (member := obj.find(parts[-1])) is not None:
            self._remove(obj, member)
            self._parse()
            obj = self._root
            for part in parts[:-1]:
                obj = obj.find(part).value  # type: ignore[union-attr]  # there before, still there
        return True

    def save(self) -> bool:
        """Write the file if anything changed (atomically; see the module's
        contract); returns whether it wrote."""
        if not self.changed:
            return False
        target = self.path.resolve() if self.path.is_symlink() else self.path
        try:
            mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
            target.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(target, ((_BOM if self._bom else "") + self._text).encode("utf-8"), mode=mode)
        self._original = self._text
        return True

    # -- the text edits ---------------------------------------------------

    def _parse(self) -> None:
        try:
            self._data = parse_json_object(self._text, self.path)
        except SettingsError as exc:
            raise SettingsError(f"{exc}; left unchanged") from None
        self._stripped = strip_json_comments(self._text)
        start = _skip(self._stripped, 0)
        try:
            _, self._root = _scan(self._stripped, start)  # type: ignore[assignment]  # an object: checked above
        except RecursionError:
            raise SettingsError(f"{self.path}: nested too deeply; left unchanged") from None

    def _indent_unit(self) -> str:
        """The file's step of indentation: its first indented key's, else two spaces."""
        for member in self._root.members:
            indent = self._own_line_indent(member.key_start)
            if indent:
                return indent
        return "  "

    def _line_start(self, pos: int) -> int:
        return self._text.rfind("\n", 0, pos) + 1

    def _line_indent(self, pos: int) -> str:
        start = self._line_start(pos)
        line = self._text[start:pos]
        return line[:len(line) - len(line.lstrip(" \t"))]

    def _own_line_indent(self, pos: int) -> str | None:
        """The indentation before ``pos`` if only whitespace precedes it on its line."""
        before = self._stripped[self._line_start(pos):pos]
        return before if not before.strip() else None

    def _format(self, encoded: bytes, indent: str, *, one_line: bool) -> str:
        if one_line:
            return msgspec.json.format(encoded, indent=0).decode("utf-8")
        lines = msgspec.json.format(encoded, indent=1).decode("utf-8").split("\n")
        unit = self._indent_unit()
        # Each line of msgspec's output is one space per level, then a token.
        return self._newline.join(
            [lines[0], *(indent + unit * (n := len(line) - len(line.lstrip(" "))) + line[n:] for line in lines[1:])])

    def _replace(self, member: _Member, encoded: bytes) -> None:
        old = self._text[member.value_start:member.value_end]
        # One line for a scalar, for what was one line, and inside a one-line object.
        one_line = encoded[:1] not in b"[{" or "\n" not in old and (
            old[:1] in "[{" and old not in ("{}", "[]") or self._own_line_indent(member.key_start) is None)
        indent = self._line_indent(member.key_start)
        self._splice(member.value_start, member.value_end, self._format(encoded, indent, one_line=one_line))

    def _insert(self, obj: _Object, name: str, value: Any) -> None:
        encoded = msgspec.json.encode(value)
        key = msgspec.json.encode(name).decode("utf-8")
        if not obj.members:
            outer = self._line_indent(obj.start)
            inner = outer + self._indent_unit()
            interior = self._text[obj.start + 1:obj.end - 1]
            entry = f"{self._newline}{inner}{key}: {self._format(encoded, inner, one_line=False)}"
            after = interior if interior.strip() else self._newline + outer
            self._splice(obj.start + 1, obj.end - 1, entry + after)
            return
        last = obj.members[-1]
        indent = self._own_line_indent(last.key_start)
        if indent is None:  # a one-line object: stays on one line
            self._splice(last.value_end, last.value_end, f", {key}: {self._format(encoded, '', one_line=True)}")
            return
        entry = f"{self._newline}{indent}{key}: {self._format(encoded, indent, one_line=False)}"
        rest = self._stripped[last.value_end:obj.end - 1]
        if "\n" in rest:
            # After the last key's line, so a comment ending that line stays with it.
            eol = last.value_end + rest.index("\n")
            if self._text[eol - 1] == "\r":
                eol -= 1
            self._splice(eol, eol, entry)
        else:
            self._splice(last.value_end, last.value_end, entry)
        self._splice(last.value_end, last.value_end, ",")

    def _remove(self, obj: _Object, member: _Member) -> None:
        if len(obj.members) == 1 and not (self._text[obj.start + 1:member.key_start]
                                          + self._text[member.value_end:obj.end - 1]).strip():
            self._splice(obj.start + 1, obj.end - 1, "")  # nothing else in it: "{}"
            return
        index = obj.members.index(member)
        prev = obj.members[index - 1] if index else None
        after = member.comma + 1 if member.comma is not None else member.value_end
        eol = self._stripped.find("\n", after)
        eol = len(self._stripped) if eol < 0 else eol
        own_line = self._own_line_indent(member.key_start) is not None and not self._stripped[after:eol].strip()
        if own_line:
            # The whole line goes, a comment at its end too.
            self._splice(self._line_start(member.key_start), min(eol + 1, len(self._text)), "")
            if member.comma is None and prev is not None and prev.comma is not None:
                self._splice(prev.comma, prev.comma + 1, "")
        elif member.comma is not None:
            self._splice(member.key_start, _skip(self._stripped, member.comma + 1), "")
        elif prev is not None and prev.comma is not None:
            self._splice(prev.comma, member.value_end, "")
        else:
            self._splice(member.key_start, member.value_end, "")

    def _splice(self, start: int, end: int, new: str) -> None:
        self._text = self._text[:start] + new + self._text[end:]
        self._stripped = self._stripped[:start] + new + self._stripped[end:]


def set_setting(path: str | Path, key: Key, value: Any) -> bool:
    """Set ``key`` to ``value`` in the settings file ``path`` and save it
    (see :class:`SettingsFile`); returns whether the file changed."""
    settings = SettingsFile.read(path)
    settings.set(key, value)
    return settings.save()


def unset_setting(path: str | Path, key: Key) -> bool:
    """Remove ``key`` from the settings file ``path`` and save it; returns
    whether it was there."""
    settings = SettingsFile.read(path)
    removed = settings.unset(key)
    settings.save()
    return removed


# --------------------------------------------------------------------------
# Where things are: a scan of the comment-free text, which the settings
# reader has already accepted as JSON.


class _Member(msgspec.Struct):
    name: str
    key_start: int
    value_start: int
    value_end: int
    #: The value's members when it is an object.
    value: _Object | None
    #: Where the comma after this member is, if one follows.
    comma: int | None = None


class _Object(msgspec.Struct):
    start: int  # the "{"
    end: int  # after the "}"
    members: list[_Member]

    def find(self, name: str) -> _Member | None:
        """The member called ``name``; the last one if there are several, as
        JSON readers take the last."""
        for member in reversed(self.members):
            if member.name == name:
                return member
        return None


def _parts(key: Key) -> list[str]:
    parts = key.split(".") if isinstance(key, str) else list(key)
    if not parts or not all(isinstance(p, str) and p for p in parts):
        raise ValueError(f"not a settings key: {key!r}")
    return parts


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _scan_string(text: str, pos: int) -> int:
    pos += 1
    while text[pos] != '"':
        pos += 2 if text[pos] == "\\" else 1
    return pos + 1


def _scan(text: str, pos: int) -> tuple[int, _Object | None]:
    """Where the value at ``pos`` ends, and its members if it is an object."""
    first = text[pos]
    if first == "{":
        obj = _Object(pos, pos, [])
        pos = _skip(text, pos + 1)
        while text[pos] != "}":
            key_end = _scan_string(text, pos)
            name = msgspec.json.decode(text[pos:key_end])
            value_start = _skip(text, _skip(text, key_end) + 1)  # past the ":"
            value_end, value = _scan(text, value_start)
            member = _Member(name, pos, value_start, value_end, value)
            obj.members.append(member)
            pos = _skip(text, value_end)
            if text[pos] == ",":
                member.comma = pos
                pos = _skip(text, pos + 1)
        obj.end = pos + 1
        return pos + 1, obj
    if first == "[":
        pos = _skip(text, pos + 1)
        while text[pos] != "]":
            pos = _skip(text, _scan(text, pos)[0])
            if text[pos] == ",":
                pos = _skip(text, pos + 1)
        return pos + 1, None
    if first == '"':
        return _scan_string(text, pos), None
    while pos < len(text) and text[pos] not in ",}]" + _WHITESPACE:
        pos += 1
    return pos, None


__all__ = ["SettingsFile", "set_setting", "unset_setting"]
