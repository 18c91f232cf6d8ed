"""What the agent's edit tools changed, so that ``/rewind`` can put it back.

gemini-cli's ``/rewind`` "reverts only file changes made by the AI's edit
tools": not shell commands, not manual edits. Wherever the edit tools run
(this client, or a server for a ``--tools server`` session, through the
same :class:`~gemini_split.tools.executor.ToolExecutor`), the executor
tells an :class:`EditJournal` before and after each ``write_file`` /
``replace``: the file's path, its content before (absent: the agent created
it) and a hash of what the agent wrote, keyed by the session's request and
call.

Reverting the edits of some requests (:meth:`EditJournal.plan`, then
:meth:`EditJournal.revert`) puts each file back to what it was before the
first of them, newest edit undone first; a file whose content is no longer
what the agent last wrote (changed by hand, or by a shell command, since)
is a *conflict*: named, and only overwritten when the caller says so (the
REPL asks; a script skips it with a warning). A file over
:data:`SIZE_LIMIT` is recorded as skipped, not copied, and cannot be put
back.

On disk, one directory per session (0700): ``journal.jsonl`` (one line per
edit) and ``blobs/`` (the contents before, by SHA-256, 0600). A client
keeps it under ``$GEMINI_SPLIT_HOME/rewind/<session>``; a server in its
workspace root's ``.rewind/<session>``, out of every tool's reach. It goes
with the session. Files are reached through the
:class:`~gemini_split.tools.workspace.Workspace` (no symlink followed), so
a revert never writes outside the workspace. Each edit records the
workspace root it was made in, and a revert is only planned in that same
root (:class:`RevertElsewhere` otherwise): a session resumed in a second
clone of the same repository must not put back or delete that clone's
files because their contents match.

Standard library only, and imported only when an edit tool runs or
``/rewind`` asks (``lazy_imports.EDGES``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gemini_split.errors import BadInput

from .base import ToolFailed
from .workspace import Workspace

log = logging.getLogger(__name__)

#: The edit tools whose changes are journaled (gemini-cli's).
EDIT_TOOLS = ("write_file", "replace")
#: Bytes of a file kept at most; a larger one is recorded as skipped.
SIZE_LIMIT = 10 * 1024 * 1024
_JOURNAL = "journal.jsonl"
_BLOB = re.compile(r"[0-9a-f]{64}")


@dataclass
class Edit:
    """One edit: ``path`` as the workspace shows it, what it was ``before``
    (a blob's hash; None: the file did not exist; ``"skipped"``: over the
    size limit or unreadable, not kept), and the hash of what the agent
    wrote (``after``)."""

    request_id: str
    call_id: str
    path: str
    before: str | None
    after: str
    reason: str = ""
    #: The ``seq`` of the request's ``request_started``, when known.
    seq: int | None = None
    #: The workspace root ``path`` is relative to ("" in journals written
    #: before it was recorded).
    root: str = ""


class RevertElsewhere(BadInput):
    """The edits to put back were made in another workspace than this
    one: nothing is planned; the message names both directories. A
    :class:`~gemini_split.errors.BadInput`, so callers that must not load
    this module catch that."""


@dataclass
class PlannedFile:
    """One file a revert would touch: ``path``, ``action`` (``restore``,
    ``delete`` or ``skip``), ``conflict`` (changed since the agent's last
    edit: overwritten only when the caller says so) and ``reason``."""

    path: str
    action: str
    conflict: bool = False
    reason: str = ""
    #: The edits it undoes, oldest first.
    edits: list[Edit] = field(default_factory=list)


@dataclass
class Outcome:
    """What a revert did to one file: ``action`` is ``restored``,
    ``deleted`` or ``skipped`` (with the ``reason``)."""

    path: str
    action: str
    reason: str = ""


class EditJournal:
    """The edits of one session, in ``directory`` (created on the first)."""

    def __init__(self, directory: Path, *, size_limit: int = SIZE_LIMIT):
        self.directory = Path(directory)
        self.size_limit = size_limit

    # --- recording -----------------------------------------------------------------

    def before(self, workspace: Workspace, shown: str) -> tuple[str, str | None, str] | None:
        """Before an edit of ``shown``: its path as the workspace shows it
        and its content kept (blob hash, None when absent, ``"skipped"``),
        with the reason of a skip. None: nothing to record (the path does
        not resolve: the tool will refuse it)."""
        try:
            real = workspace.resolve_file(shown)
        except ToolFailed:
            return None
        rel = workspace.relative(real)
        try:
            with workspace.open_regular(real, shown) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > self.size_limit:
                    return rel, "skipped", f"over {self.size_limit // (1024 * 1024)} MiB: not kept"
                data = handle.read(self.size_limit + 1)
        except ToolFailed as failed:
            if failed.code == "not_found":
                return rel, None, ""
            return rel, "skipped", f"not readable before the edit ({failed.code})"
        if len(data) > self.size_limit:
            return rel, "skipped", f"over {self.size_limit // (1024 * 1024)} MiB: not kept"
        return rel, self._keep(data), ""

    def after(self, workspace: Workspace, request_id: str, call_id: str,
              noted: tuple[str, str | None, str], *, seq: int | None = None) -> None:
        """The edit noted by :meth:`before` is done: record it with a hash
        of what is there now (``seq``: its request's ``request_started``)."""
        rel, before, reason = noted
        after = _hash_of(workspace, rel) or ""
        if after and before == after:
            return  # nothing changed: nothing to put back
        self._append(Edit(request_id, call_id, rel, before, after, reason, seq, str(workspace.root)))

    # --- reading -----------------------------------------------------------------------

    def edits(self) -> list[Edit]:
        """Every edit recorded, oldest first (an unreadable line is skipped)."""
        try:
            text = (self.directory / _JOURNAL).read_text()
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                raw = json.loads(line)
                seq = raw.get("seq")
                out.append(Edit(str(raw["request_id"]), str(raw["call_id"]), str(raw["path"]),
                                raw.get("before"), str(raw.get("after", "")), str(raw.get("reason", "")),
                                seq if isinstance(seq, int) else None, str(raw.get("root") or "")))
            except (ValueError, KeyError, TypeError):
                log.warning("%s: an unreadable line was skipped", self.directory / _JOURNAL)
        return out

    def count(self, chosen: Choice) -> int:
        """How many files the chosen edits changed."""
        return len({e.path for e in self.edits() if _chooses(chosen, e)})

    def plan(self, chosen: Choice, workspace: Workspace, *, from_call: str | None = None) -> list[PlannedFile]:
        """What reverting the chosen edits would do — those of a list of
        request ids, or those a predicate takes (from the edit of
        ``from_call`` on, when given) — one entry per file. Raises
        :class:`RevertElsewhere` when they were made in another workspace."""
        chosen = self._chosen(chosen, from_call)
        elsewhere = sorted({e.root for e in chosen if e.root and e.root != str(workspace.root)})
        if elsewhere:
            raise RevertElsewhere(
                f"the agent's edits to put back were made in {', '.join(elsewhere)}, and this workspace is "
                f"{workspace.root}: nothing is put back here (run it in {elsewhere[0]}, or rewind the "
                "conversation alone)")
        by_path: dict[str, list[Edit]] = {}
        for edit in chosen:
            by_path.setdefault(edit.path, []).append(edit)
        planned = []
        for path, edits in sorted(by_path.items()):
            first, last = edits[0], edits[-1]
            current = _hash_of(workspace, path)
            conflict = current != (last.after or None)
            if first.before == "skipped":
                planned.append(PlannedFile(path, "skip", conflict, first.reason or "its content was not kept", edits))
            elif first.before is None:
                planned.append(PlannedFile(path, "delete", conflict and current is not None, "", edits))
            else:
                planned.append(PlannedFile(path, "restore", conflict, "", edits))
        return planned

    # --- reverting -----------------------------------------------------------------------

    def revert(self, planned: list[PlannedFile], workspace: Workspace, *,
               overwrite: set[str] | frozenset[str] = frozenset()) -> list[Outcome]:
        """Put the planned files back. A file in conflict is skipped unless
        its path is in ``overwrite``. The edits undone leave the journal;
        those of a file skipped stay."""
        outcomes, undone = [], []
        for item in planned:
            if item.action == "skip":
                outcomes.append(Outcome(item.path, "skipped", item.reason))
                continue
            if item.conflict and item.path not in overwrite:
                outcomes.append(Outcome(item.path, "skipped", "changed since the agent's edit (by hand or by a "
                                        "command); left as it is"))
                continue
            try:
                if item.action == "delete":
                    _delete(workspace, item.path)
                    outcomes.append(Outcome(item.path, "deleted"))
                else:
                    blob = str(item.edits[0].before)
                    if not _BLOB.fullmatch(blob):  # a journal line not ours: never a path to follow
                        raise OSError(f"its kept content {blob[:70]!r} is not one of the journal's")
                    data = (self.directory / "blobs" / blob).read_bytes()
                    workspace.write_atomic(workspace.resolve_file(item.path), data, item.path)
                    outcomes.append(Outcome(item.path, "restored"))
                undone.extend(item.edits)
            except (ToolFailed, OSError) as exc:
                outcomes.append(Outcome(item.path, "skipped", f"could not be put back: {exc}"))
        if undone:
            self._rewrite([e for e in self.edits() if e not in undone])
        return outcomes

    def remove(self) -> None:
        """Delete the journal (its session is gone)."""
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- the files -------------------------------------------------------------------------

    def _chosen(self, chosen: Choice, from_call: str | None) -> list[Edit]:
        """The chosen edits; with ``from_call``, from that call's edit on (a
        call that edited nothing: the edits of requests other than its own,
        the first of a list of request ids)."""
        edits = [e for e in self.edits() if _chooses(chosen, e)]
        if from_call is not None:
            starts = [i for i, e in enumerate(edits) if e.call_id == from_call]
            if starts:
                edits = edits[starts[0]:]
            elif isinstance(chosen, list) and chosen:
                edits = [e for e in edits if e.request_id != chosen[0]]
        return edits

    def _private_dir(self, path: Path) -> None:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode):
            raise OSError(f"{path} is not a directory")

    def _keep(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        blobs = self.directory / "blobs"
        self._private_dir(blobs)
        target = blobs / digest
        if not target.exists():
            temporary = blobs / f".{digest}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, target)
        return digest

    def _append(self, edit: Edit) -> None:
        self._private_dir(self.directory)
        fd = os.open(self.directory / _JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a") as handle:
            handle.write(json.dumps(edit.__dict__) + "\n")

    def _rewrite(self, edits: list[Edit]) -> None:
        temporary = self.directory / f".{_JOURNAL}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.writelines(json.dumps(e.__dict__) + "\n" for e in edits)
        os.replace(temporary, self.directory / _JOURNAL)
        kept = {e.before for e in edits}
        for blob in (self.directory / "blobs").glob("*"):
            if blob.name not in kept:
                blob.unlink(missing_ok=True)


#: Which edits: those of these request ids, or those a predicate takes.
Choice = list[str] | set[str] | Callable[[Edit], bool]


def _chooses(chosen: Choice, edit: Edit) -> bool:
    return chosen(edit) if callable(chosen) else edit.request_id in chosen


def since_seq(seq: int, request_ids: set[str] | frozenset[str] = frozenset()) -> Callable[[Edit], bool]:
    """The edits of the requests started at ``seq`` or later (an edit whose
    request's seq was not known: when its request is one of ``request_ids``)."""
    return lambda e: e.seq >= seq if e.seq is not None else e.request_id in request_ids


def between(first: int, upto: int | None, request_ids: set[str] | frozenset[str] = frozenset()) -> Callable[[Edit], bool]:
    """The edits of the requests started at ``first`` or later and before
    ``upto`` (None: no end)."""
    return lambda e: (first <= e.seq and (upto is None or e.seq < upto)) if e.seq is not None \
        else e.request_id in request_ids


def _hash_of(workspace: Workspace, shown: str) -> str | None:
    """SHA-256 of the file's content now; None when it does not exist (or
    is not a regular file one could read)."""
    try:
        real = workspace.resolve_file(shown)
        with workspace.open_regular(real, shown) as handle:
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            return digest.hexdigest()
    except ToolFailed:
        return None


def _delete(workspace: Workspace, shown: str) -> None:
    """Remove a regular file the agent created, reached without following a
    symlink; one already gone is fine."""
    real = workspace.resolve_file(shown)
    fd = workspace.open_directory(real.parent, shown)
    try:
        try:
            info = os.stat(real.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailed("not_a_regular_file", f"'{shown}' is not a regular file any more")
        os.unlink(real.name, dir_fd=fd)
    finally:
        os.close(fd)


def describe(outcomes: list[Outcome] | list[Any]) -> list[str]:
    """One line per file, for people."""
    words = {"restored": "restored", "deleted": "deleted (the agent created it)", "skipped": "skipped"}
    return [f"{o.path}: {words.get(o.action, o.action)}" + (f" — {o.reason}" if o.reason else "") for o in outcomes]


__all__ = ["EDIT_TOOLS", "Choice", "Edit", "EditJournal", "Outcome", "PlannedFile", "SIZE_LIMIT", "between",
           "describe", "since_seq"]
