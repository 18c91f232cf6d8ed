"""Checkpoints: the workspace snapshotted before an edit tool changes it,
so ``/restore`` and ``gemini-split restore`` can put the files back (issue
30; gemini-cli's ``general.checkpointing.enabled``).

Where the tools run (this client, or a server for a ``--tools server``
session: :mod:`.tool_host`), the executor asks :class:`Checkpoints` for a
snapshot before it runs ``write_file``, ``replace`` or an MCP tool whose
server marks it ``destructiveHint`` (:func:`modifies_files`). Shell
commands are not snapshotted, as in gemini-cli.

**The snapshot** is a commit in a shadow git repository per directory (the
workspace and each ``--include-directories`` one), ``history/<hash>`` where
``<hash>`` is the SHA-256 of the directory's real path — outside the
project, never its own ``.git``: git runs with ``--git-dir`` and
``--work-tree``, an environment of its own (no ``GIT_*`` variable of ours,
no system or global config, ``HOME`` the shadow directory) and a config
that runs no hook, signs nothing and excludes only what the project's
``.gitignore`` files and its ``.geminiignore`` say. A file larger than
:data:`MAX_FILE_BYTES` is not copied: it is excluded from the snapshot and
named in the record's ``skipped``. Symlinks are stored as links, never
followed. With a warm index a snapshot costs ``git status``, ``git add -A``
and ``git commit`` (``bench/checkpoint.py``).

**The record** (:class:`Checkpoint`, JSON, named as gemini-cli names its
checkpoint files: ``<timestamp>-<file>-<tool>``) says which session, which
request (the ``seq`` of its ``request_started``, what the ``rewind`` op
takes), which tool call, the commit of each directory, what was skipped,
and — once the tool ran — the content the tool left in the file it edited
(a git blob id), which is how a restore tells the agent's own changes
from changes made by hand since.

**Restoring** (:meth:`Checkpoints.plan`, :meth:`Checkpoints.restore`)
snapshots the files as they are now first (so a restore can itself be
undone, and nothing is lost), then moves the work tree from that snapshot
to the checkpoint's (``git read-tree -m -u``: files the checkpoint lacks
are removed, the others written back). Skipped and ignored files are left
as they are.

**Errors.** Anything that goes wrong with the shadow repository (a
corrupted one, git missing, a full disk) is a :class:`CheckpointError`
naming the repository and what to do. The executor then refuses the tool
call (code ``checkpoint_failed``): an edit that could not be undone does
not run under a setting that promised it could. The session goes on.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split.errors import GeminiSplitError

from .plans import project_hash

#: A file larger than this is not copied into a snapshot (gemini-cli's
#: limit is none; ours keeps a stray data file from filling the disk).
MAX_FILE_BYTES = 10 * 1024 * 1024
#: The built-in tools that change files.
EDIT_TOOLS = frozenset({"write_file", "replace"})
#: Seconds one git command may take before the snapshot is given up: the
#: first snapshot of a project copies all of it (5,000 files: 3-7 s on a
#: loaded machine; ten times as many, a minute or more). Ctrl-C cancels
#: the call sooner.
GIT_TIMEOUT = 300.0
#: Seconds a snapshot waits for another process's (two REPLs in one project).
LOCK_TIMEOUT = 30.0
_CONFIG = """\
[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = false
\tlogallrefupdates = false
\thooksPath = /dev/null
\texcludesFile = /dev/null
\tattributesFile = /dev/null
\tautocrlf = false
\tsafecrlf = false
\tsymlinks = true
\tfsmonitor = false
\tuntrackedCache = true
\tquotePath = false
\tbigFileThreshold = 1m
\tlooseCompression = 1
[commit]
\tgpgSign = false
[gc]
\tauto = 0
[user]
\tname = gemini-split
\temail = checkpoints@gemini-split.invalid
[advice]
\taddEmbeddedRepo = false
\taddIgnoredFile = false
"""


class CheckpointError(GeminiSplitError):
    """A snapshot or a restore failed; the message names the shadow
    repository or record and says what to do."""


def modifies_files(tool: Any) -> bool:
    """Whether a checkpoint is taken before ``tool`` runs: the built-in
    edit tools, and MCP tools whose server declares them destructive."""
    return tool.name in EDIT_TOOLS or bool(getattr(tool, "destructive", False))




def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


class ToolCallRecord(msgspec.Struct, frozen=True):
    name: str
    args: dict[str, Any]
    call_id: str


class Checkpoint(msgspec.Struct, kw_only=True):
    """One checkpoint's record (its file: ``<id>.json``)."""

    #: ``<timestamp>-<file>-<tool>``, gemini-cli's naming.
    id: str
    #: ISO 8601, UTC.
    created: str
    session_id: str | None = None
    #: The ``seq`` of the request's ``request_started`` (None: not known).
    request_seq: int | None = None
    request_id: str | None = None
    tool_call: ToolCallRecord
    #: Real path of each directory → the snapshot's commit there.
    commits: dict[str, str] = {}
    #: Files left out of the snapshot (larger than the limit), real paths.
    skipped: list[str] = []
    #: Real path → the blob id of what the tool left there ("" : no file).
    after: dict[str, str] = {}


class FileChange(msgspec.Struct, frozen=True):
    """What a restore does to one file."""

    #: Real path.
    path: str
    #: ``"restore"`` (written back), ``"recreate"`` (deleted since), ``"delete"`` (created since).
    action: str
    #: Changed since the snapshot by something other than the agent's
    #: checkpointed edits (by hand, or by a shell command).
    by_hand: bool = False


class RestorePlan(msgspec.Struct, frozen=True):
    checkpoint: Checkpoint
    changes: tuple[FileChange, ...]
    #: Real path → commit of the state just before the restore (so it can
    #: itself be undone).
    current: dict[str, str]

    @property
    def by_hand(self) -> list[str]:
        return [c.path for c in self.changes if c.by_hand]


class _Shadow:
    """The shadow repository of one directory."""

    def __init__(self, git_dir: Path, work_tree: Path, max_file_bytes: int):
        self.git_dir = git_dir
        self.work_tree = work_tree
        self.max_file_bytes = max_file_bytes

    def _env(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.git_dir), "LC_ALL": "C",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
               "GIT_DIR": str(self.git_dir), "GIT_WORK_TREE": str(self.work_tree)}
        return env

    async def git(self, *args: str, ok_codes: tuple[int, ...] = (0,), stdin: bytes = b"") -> bytes:
        command = ["git", "--git-dir", str(self.git_dir), "--work-tree", str(self.work_tree), *args]
        try:
            with trio.fail_after(GIT_TIMEOUT):
                done = await trio.run_process(command, cwd=str(self.work_tree), env=self._env(),
                                              capture_stdout=True, capture_stderr=True, check=False,
                                              stdin=stdin)
        except FileNotFoundError:
            raise CheckpointError("checkpoints need git, which is not installed (or not on PATH)") from None
        except trio.TooSlowError:
            raise CheckpointError(f"git {args[0]} in the shadow repository {self.git_dir} took more than "
                                  f"{GIT_TIMEOUT:.0f} s") from None
        if done.returncode not in ok_codes:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CheckpointError(
                f"the shadow repository {self.git_dir} is not usable (git {args[0]}: "
                f"{why[-1] if why else f'exit status {done.returncode}'}); move it away or delete it "
                "(its checkpoints are lost), or turn off general.checkpointing.enabled")
        return done.stdout

    async def ensure(self) -> None:
        """Create the repository if there is none (mode 0700)."""
        if (self.git_dir / "HEAD").exists():
            return
        if self.git_dir.exists() and any(self.git_dir.iterdir()):
            raise CheckpointError(f"the shadow repository {self.git_dir} is not usable (it has no HEAD); move it "
                                  "away or delete it (its checkpoints are lost), or turn off "
                                  "general.checkpointing.enabled")
        self.git_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        await self.git("init", "-q")
        (self.git_dir / "config").write_text(_CONFIG)
        hooks = self.git_dir / "hooks"
        if hooks.is_dir():  # the samples git copies in; none would run, none is needed
            for sample in hooks.iterdir():
                sample.unlink(missing_ok=True)

    async def snapshot(self, message: str) -> tuple[str, list[str]]:
        """Commit the work tree as it is; ``(commit, skipped real paths)``.

        One walk of the work tree (``git status``, which the untracked
        cache keeps to a stat per directory), then only the paths it
        names go into the index (``git update-index``): a file over the
        limit, or one that cannot be read, is left out (and dropped from
        the index if it was in it), so it is never copied."""
        await self.ensure()
        self._write_excludes()
        changed, large = await self._changed_paths()
        if large:
            await self.git("update-index", "-q", "--force-remove", "-z", "--stdin",
                           stdin=b"".join(p.encode("utf-8", "surrogateescape") + b"\x00" for p in large))
        if changed:
            await self.git("update-index", "-q", "--add", "--remove", "-z", "--stdin",
                           stdin=b"".join(p.encode("utf-8", "surrogateescape") + b"\x00" for p in changed))
        tree = (await self.git("write-tree")).decode().strip()
        parent = self._head()
        if parent is None:
            parent = (await self.git("rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1))).decode().strip()
        commit = (await self.git("commit-tree", tree, *(("-p", parent) if parent else ()), "-m", message)
                  ).decode().strip()
        await self.git("update-ref", "HEAD", commit)
        return commit, [str(self.work_tree / p) for p in large]

    def _head(self) -> str | None:
        """HEAD's commit read from its ref file (a process less than
        ``git rev-parse``); None when it is not a plain loose ref."""
        try:
            head = (self.git_dir / "HEAD").read_text().strip()
            if not head.startswith("ref: refs/"):
                return None
            commit = (self.git_dir / head.removeprefix("ref: ")).read_text().strip()
        except (OSError, UnicodeDecodeError):
            return None
        return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None

    async def _changed_paths(self) -> tuple[list[str], list[str]]:
        """``(paths to put in the index, paths too large or unreadable)``:
        what changed since the index, new files included (a new directory
        is listed file by file)."""
        out = await self.git("status", "--porcelain=v1", "-z", "--untracked-files=normal", "--no-renames",
                             "--ignore-submodules=all")
        paths: list[str] = []
        new_dirs: list[str] = []
        for entry in out.split(b"\x00"):
            if len(entry) > 3:
                path = entry[3:].decode("utf-8", "surrogateescape")
                (new_dirs if path.endswith("/") else paths).append(path)
        if new_dirs:
            listed = await self.git("ls-files", "-z", "-o", "--exclude-standard", "--", *new_dirs)
            paths += [p for p in listed.decode("utf-8", "surrogateescape").split("\x00") if p and not p.endswith("/")]
        changed: list[str] = []
        large: list[str] = []
        for path in paths:
            try:
                info = os.lstat(self.work_tree / path)
            except FileNotFoundError:
                changed.append(path)  # deleted: --remove takes it out
                continue
            except OSError:
                large.append(path)
                continue
            if stat.S_ISDIR(info.st_mode):
                continue  # a repository of its own inside the work tree: not snapshotted
            if stat.S_ISREG(info.st_mode) and (info.st_size > self.max_file_bytes
                                               or not os.access(self.work_tree / path, os.R_OK)):
                large.append(path)
            else:
                changed.append(path)
        return changed, large

    def _write_excludes(self) -> None:
        """The project's ``.geminiignore`` as the shadow ``info/exclude``
        (its ``.gitignore`` files are read by git where they are)."""
        lines = ["# written by gemini-split before each snapshot: the project's .geminiignore"]
        try:
            with open(self.work_tree / ".geminiignore", "rb") as f:
                lines.append(f.read(1024 * 1024).decode("utf-8", "replace"))
        except OSError:
            pass
        text = "\n".join(lines) + "\n"
        exclude = self.git_dir / "info" / "exclude"
        try:
            if exclude.read_text("utf-8", "replace") == text:
                return
        except OSError:
            pass
        exclude.parent.mkdir(exist_ok=True)
        exclude.write_text(text, "utf-8")

    async def changes(self, old: str, new: str) -> list[tuple[str, str, str, str]]:
        """``(status, path, old blob, new blob)`` from commit ``old`` to ``new``."""
        out = await self.git("diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new)
        fields = out.split(b"\x00")
        result = []
        for head, path in zip(fields[0::2], fields[1::2], strict=False):
            if not head.startswith(b":"):
                continue
            parts = head[1:].decode().split()
            result.append((parts[4], path.decode("utf-8", "surrogateescape"), parts[2], parts[3]))
        return result

    async def move(self, current: str, target: str) -> None:
        """The work tree from ``current`` (what it is) to ``target``."""
        await self.git("read-tree", "-m", "-u", current, target)


class Checkpoints:
    """The checkpoints of one workspace (see the module docstring).

    ``roots``: the workspace's directories, the first its root (real
    paths). ``history_dir`` holds one shadow repository per directory;
    ``records_dir`` the records. ``context(request_id)`` gives
    ``(session_id, request_seq)`` of the call being checkpointed."""

    def __init__(self, roots: Iterable[Path], history_dir: Path, records_dir: Path, *,
                 max_file_bytes: int = MAX_FILE_BYTES):
        self.roots = tuple(Path(r) for r in roots)
        self.history_dir = Path(history_dir)
        self.records_dir = Path(records_dir)
        self.max_file_bytes = max_file_bytes
        self.context: Any = lambda request_id: (None, None)
        self._lock = trio.Lock()
        self._shadows: dict[Path, _Shadow] = {}

    @classmethod
    def for_user(cls, roots: Iterable[Path], config_dir: Path) -> Checkpoints:
        """The client's: gemini-cli's places under ``config_dir``
        (``~/.gemini`` or ``$GEMINI_SPLIT_HOME``): shadow repositories in
        ``history/<project_hash>``, records in ``tmp/<project_hash>/checkpoints``."""
        roots = tuple(Path(os.path.realpath(r)) for r in roots)
        return cls(roots, config_dir / "history", config_dir / "tmp" / project_hash(roots[0]) / "checkpoints")

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        """This workspace's checkpoints to ourselves: within this process
        (a Trio lock: parallel tool calls) and across processes (``flock``
        on ``history/<hash>.lock``: two REPLs in one project). Holding it,
        a git ``index.lock`` left by a git that was killed is stale and
        removed. Raises :class:`CheckpointError` after :data:`LOCK_TIMEOUT`."""
        async with self._lock:
            try:
                self.history_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.history_dir / f"{project_hash(self.roots[0])}.lock",
                             os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            except OSError as exc:
                raise CheckpointError(f"the checkpoints in {self.history_dir} cannot be locked: "
                                      f"{exc.strerror}") from None
            try:
                with trio.move_on_after(LOCK_TIMEOUT) as waited:
                    while True:
                        try:
                            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            break
                        except BlockingIOError:
                            await trio.sleep(0.02)
                if waited.cancelled_caught:
                    raise CheckpointError(f"another gemini-split has held the checkpoints in {self.history_dir} for "
                                          f"{LOCK_TIMEOUT:.0f} s")
                for root in self.roots:
                    (self._shadow(root).git_dir / "index.lock").unlink(missing_ok=True)
                yield
            finally:
                os.close(fd)

    def _shadow(self, root: Path) -> _Shadow:
        shadow = self._shadows.get(root)
        if shadow is None:
            shadow = self._shadows[root] = _Shadow(self.history_dir / project_hash(root), root, self.max_file_bytes)
        return shadow

    def root_of(self, path: str) -> Path | None:
        for root in self.roots:
            if path == str(root) or path.startswith(str(root).rstrip("/") + "/"):
                return root
        return None

    # --- taking them ----------------------------------------------------------

    async def before(self, call_id: str, tool: str, args: dict[str, Any], target: Path | None,
                     request_id: str | None) -> Checkpoint:
        """Snapshot every directory and write the record of a call about
        to run. Raises :class:`CheckpointError`."""
        session_id, request_seq = self.context(request_id)
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(now)) + f"_{int(now * 1000) % 1000:03d}Z"
        label = _safe_name(target.name if target is not None else "")
        async with self._locked():
            commits: dict[str, str] = {}
            skipped: list[str] = []
            for root in self.roots:
                commit, large = await self._shadow(root).snapshot(f"before {tool} ({call_id})")
                commits[str(root)] = commit
                skipped += large
            checkpoint = Checkpoint(
                id=self._free_id(f"{stamp}-{label}-{_safe_name(tool)}" if label else f"{stamp}-{_safe_name(tool)}"),
                created=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z",
                session_id=session_id, request_seq=request_seq, request_id=request_id,
                tool_call=ToolCallRecord(tool, args, call_id), commits=commits, skipped=skipped,
            )
            await trio.to_thread.run_sync(self._write, checkpoint)
        return checkpoint

    async def after(self, checkpoint: Checkpoint, target: Path | None) -> None:
        """Note what the tool left in the file it edited."""
        if target is None:
            return
        checkpoint.after[str(target)] = await trio.to_thread.run_sync(_blob_of, target)
        await trio.to_thread.run_sync(self._write, checkpoint)

    def _free_id(self, wanted: str) -> str:
        name, n = wanted, 1
        while (self.records_dir / f"{name}.json").exists():
            n += 1
            name = f"{wanted}-{n}"
        return name

    def _write(self, checkpoint: Checkpoint) -> None:
        """The record, replaced whole (a temporary file renamed over it),
        not synced to disk: no more durable than the git objects of its
        snapshot, which git does not sync either — two syncs per edit
        were most of a checkpoint's cost (docs/performance.md)."""
        self.records_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.records_dir / f"{checkpoint.id}.json"
        tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(checkpoint) + b"\n")
            os.replace(tmp, path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise CheckpointError(f"the checkpoint record {path} could not be written: {exc.strerror}") from None

    # --- reading them -----------------------------------------------------------

    def list(self, session_id: str | None = None) -> list[Checkpoint]:
        """The checkpoints kept, oldest first (of one session when given)."""
        try:
            names = sorted(p for p in os.listdir(self.records_dir) if p.endswith(".json"))
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            try:
                checkpoint = self.get(name.removesuffix(".json"))
            except CheckpointError:
                continue
            if session_id is None or checkpoint.session_id == session_id:
                found.append(checkpoint)
        return found

    def get(self, checkpoint_id: str) -> Checkpoint:
        """One record. Raises :class:`CheckpointError` (unknown or unreadable)."""
        if not re.fullmatch(r"[\w.@+=-]{1,255}", checkpoint_id) or checkpoint_id.startswith("."):
            raise CheckpointError(f"no checkpoint {checkpoint_id[:80]!r}")
        path = self.records_dir / f"{checkpoint_id.removesuffix('.json')}.json"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CheckpointError(f"no checkpoint {checkpoint_id!r} (/restore lists them)") from None
        except OSError as exc:
            raise CheckpointError(f"the checkpoint {path} cannot be read: {exc.strerror}") from None
        try:
            return msgspec.json.decode(data, type=Checkpoint)
        except msgspec.DecodeError as exc:
            raise CheckpointError(f"the checkpoint {path} is damaged: {exc}") from None

    # --- restoring ----------------------------------------------------------------

    async def plan(self, checkpoint_id: str) -> RestorePlan:
        """What restoring ``checkpoint_id`` would change, each file marked
        when it was changed since by something other than the agent's own
        checkpointed edits. Snapshots the current state first (kept: the
        restore can be undone from it). Raises :class:`CheckpointError`."""
        checkpoint = self.get(checkpoint_id)
        later = [c for c in self.list() if c.created >= checkpoint.created]
        agent: dict[str, str] = {}
        for record in later:  # the agent's last word on each file
            agent.update(record.after)
        changes: list[FileChange] = []
        current: dict[str, str] = {}
        async with self._locked():
            for root_text, commit in checkpoint.commits.items():
                root = Path(root_text)
                if not re.fullmatch(r"[0-9a-f]{40}", commit):
                    raise CheckpointError(f"the checkpoint {checkpoint.id} is damaged (its commit is {commit[:60]!r})")
                if root not in self.roots:
                    raise CheckpointError(f"the checkpoint {checkpoint.id} is of {root}, which is not a directory "
                                          "of this workspace")
                shadow = self._shadow(root)
                now, _ = await shadow.snapshot(f"before restoring {checkpoint.id}")
                current[root_text] = now
                for status, rel, _old, new in await shadow.changes(commit, now):
                    path = str(root / rel)
                    action = {"A": "delete", "D": "recreate"}.get(status, "restore")
                    left = agent.get(path)
                    by_hand = left is None or left != ("" if set(new) == {"0"} else new)
                    changes.append(FileChange(path, action, by_hand))
        return RestorePlan(checkpoint, tuple(changes), current)

    async def restore(self, plan: RestorePlan) -> None:
        """Put the files back as :meth:`plan` said. Raises
        :class:`CheckpointError` (a file changed again after the plan:
        nothing is written)."""
        async with self._locked():
            for root_text, commit in plan.checkpoint.commits.items():
                await self._shadow(Path(root_text)).move(plan.current[root_text], commit)


def _blob_of(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with os.fdopen(fd, "rb", closefd=False) as f:
            return blob_id(f.read())
    finally:
        os.close(fd)


def _safe_name(text: str) -> str:
    return re.sub(r"[^\w.+=@-]", "_", text)[:80].lstrip(".") or "file"


def for_settings(tools: Any) -> Checkpoints:
    """The client's checkpoints of a ``ToolSettings``' workspace (its
    root and ``--include-directories``), kept in ``checkpoints_home``.
    Raises :class:`CheckpointError` when checkpointing is off."""
    home = tools.checkpoints_home
    if home is None:
        raise CheckpointError("checkpointing is off: set general.checkpointing.enabled to true in settings.json")
    return Checkpoints.for_user((tools.workspace, *tools.include_dirs), home)


def shown_path(path: str, root: Path) -> str:
    """``path`` relative to the workspace root when inside it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path
