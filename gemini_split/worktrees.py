"""gemini-cli's git worktrees (``-w/--worktree [NAME]``): a session in a
copy of the project of its own.

The worktree is ``<project>/.gemini/worktrees/<NAME>`` on a new branch
``worktree-<NAME>``, made from the commit checked out now; ``<project>`` is
the main checkout of the repository the current directory is in (from a
worktree, its main one). Without a name, gemini-cli's own is made: the UTC
time and four random characters (``2026-01-31-09-15-02-123-k3x9``).

As in gemini-cli 0.61 (its docs/cli/git-worktrees.md), nothing is removed
at exit: the worktree, its uncommitted changes and its branch stay, and the
REPL says at exit how to come back to it and how to remove it
(:func:`exit_footer`).

git runs with gemini-cli's safe environment (no global or system git
configuration, no credential helper, file-system monitor, pager or
external diff) and never asks on the terminal. Its failures are
:class:`WorktreeFailed`, in gemini-cli's words.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from gemini_split.errors import ConfigurationError, WorktreeFailed

#: Where the worktrees are, under the project's main checkout.
WORKTREES_DIR = Path(".gemini", "worktrees")
BRANCH_PREFIX = "worktree-"
#: Seconds one git command may take (``worktree add`` checks the files out).
GIT_TIMEOUT = 120.0
FAILED = "Failed to create or switch to worktree"
_NAME_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
#: gemini-cli's ``getSafeGitEnv``: configuration that could run a command or ask.
_SAFE_CONFIG = (("credential.helper", ""), ("core.fsmonitor", ""), ("core.sshCommand", ""),
                ("core.pager", "cat"), ("core.editor", ""), ("sequence.editor", ""), ("diff.external", ""))


class Worktree:
    """A worktree of a session: its name (also its branch's, after
    :data:`BRANCH_PREFIX`) and its directory."""

    __slots__ = ("name", "path")

    def __init__(self, name: str, path: Path):
        self.name = name
        self.path = path

    @property
    def branch(self) -> str:
        return BRANCH_PREFIX + self.name

    def __repr__(self) -> str:
        return f"Worktree({self.name!r}, {str(self.path)!r})"


def check_name(name: str) -> str:
    """``name`` stripped, when it can be a directory under
    ``.gemini/worktrees`` and a branch: letters, digits, ``.``, ``_`` and
    ``-`` (``/`` between parts), no part starting with ``.`` or ``-``; else
    :class:`~gemini_split.errors.ConfigurationError` saying so. An empty
    name is returned empty: one is generated."""
    name = name.strip()
    if not name:
        return name
    parts = name.split("/")
    if len(name) > 100 or not all(_NAME_PART.fullmatch(p) and not p.endswith(".lock") for p in parts):
        raise ConfigurationError(
            f"invalid worktree name {name[:100]!r}: use letters, digits, '.', '_' and '-' (and '/' between "
            "parts), starting with a letter or digit; it names both the directory in .gemini/worktrees/ and "
            f"the branch {BRANCH_PREFIX}NAME")
    return name


def generated_name(now: float | None = None, suffix: str | None = None) -> str:
    """gemini-cli's name for ``-w`` without one: the UTC time to the
    millisecond and four random base-36 characters."""
    now = time.time() if now is None else now
    if suffix is None:
        suffix = "".join(_BASE36[b % 36] for b in os.urandom(4))
    millis = int(now * 1000) % 1000
    return f"{time.strftime('%Y-%m-%d-%H-%M-%S', time.gmtime(now))}-{millis:03d}-{suffix}"


def create(cwd: Path, name: str, environ: Mapping[str, str]) -> Worktree:
    """Make the worktree ``name`` (checked with :func:`check_name`; empty:
    :func:`generated_name`) of the repository ``cwd`` is in, from its
    current commit, on a new branch; git runs with ``environ`` made safe.
    Raises :class:`WorktreeFailed` (not a
    repository, no commit yet, the branch or directory already there, no
    git) with git's own words."""
    name = check_name(name) or generated_name()
    root = project_root(cwd, environ)
    _git(["rev-parse", "HEAD"], root, environ)  # a repository with a commit, else git's words
    path = root / WORKTREES_DIR / name
    if os.path.lexists(path):
        raise WorktreeFailed(f"{FAILED}: {path} already exists; to go on working in it: "
                             f"cd {shlex.quote(str(path))} (or choose another name)")
    worktree = Worktree(name, path)
    _git(["worktree", "add", str(path), "-b", worktree.branch], root, environ)
    return worktree


def project_root(cwd: Path, environ: Mapping[str, str]) -> Path:
    """The main checkout of the repository ``cwd`` is in (gemini-cli's
    ``getProjectRootForWorktree``: the parent of git's common directory);
    ``cwd`` itself when git cannot say."""
    try:
        common = _git(["rev-parse", "--git-common-dir"], cwd, environ)
    except WorktreeFailed:
        return cwd
    return Path(os.path.normpath(cwd / common)).parent


def worktree_at(directory: Path) -> Worktree | None:
    """The worktree made by ``-w`` that ``directory`` is in (a checkout
    under ``.gemini/worktrees/`` of a project), or None. Reads only names
    and one ``.git`` file: no git runs."""
    for candidate in (directory, *directory.parents):
        holder = candidate.parent
        if holder.name == WORKTREES_DIR.name and holder.parent.name == WORKTREES_DIR.parent.name \
                and (candidate / ".git").is_file():
            return Worktree(candidate.name, candidate)
    return None


def exit_footer(worktree: Worktree, resume_command: str) -> str:
    """What the REPL says at exit in a worktree (gemini-cli's words):
    ``resume_command`` comes back to the session, from the worktree."""
    path = shlex.quote(str(worktree.path))
    return (f"To resume work in this worktree: cd {path} && {resume_command}\n"
            f"To remove manually: git worktree remove {path}")


def _git(args: list[str], cwd: Path, environ: Mapping[str, str]) -> str:
    """git's output for ``args`` in ``cwd``, stripped; :class:`WorktreeFailed`
    when it fails, as gemini-cli words it (its command and git's message)."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_safe_git_env(environ), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=GIT_TIMEOUT)
    except FileNotFoundError:
        raise WorktreeFailed(f"{FAILED}: git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise WorktreeFailed(f"{FAILED}: git {args[0]} took more than {GIT_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        said = "\n".join(part for part in (done.stdout.strip(), done.stderr.strip()) if part)
        raise WorktreeFailed(f"{FAILED}: Command failed with exit code {done.returncode}: "
                             f"git {' '.join(args)}\n\n{said}".rstrip())
    return done.stdout.strip()


def _safe_git_env(environ: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in environ.items() if not k.startswith("GIT_CONFIG_") and k != "GIT_CONFIG_PARAMETERS"}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0",
               GIT_CONFIG_COUNT=str(len(_SAFE_CONFIG)))
    for i, (key, value) in enumerate(_SAFE_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env
