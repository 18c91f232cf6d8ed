"""Plan mode's plan files: where a session's plans are kept, the paths the
model may give for them, and the policy rule that lets plan mode write
them (gemini-cli 0.61's plans directory, ``packages/core/src/utils/planUtils.ts``).

A session's plans live in one directory (:class:`PlanPlace`): gemini-cli's
``~/.gemini/tmp/<project>/<session-id>/plans/`` for a client's own tools
(``<project>`` is the SHA-256 of the project's real path, as the
checkpoints' directory here), ``general.plan.directory`` inside the project
when set, and for a ``--tools server`` session a directory of the server's
own beside the session's workspace. The directory is created (0700) when a
plan is first written, and joins the tools' workspace then, so ``read_file``
reaches the plan once it is approved.

In plan mode ``write_file`` and ``replace`` may only write ``.md`` files
directly in that directory: the executor first resolves the path the model
gave as gemini-cli does (:func:`resolve_plan_path`: an absolute path inside
the directory, a path relative to the project that lands in it, else a
path relative to the directory itself — ``feature-x.md``), then the policy
decides on the resolved path: :func:`plan_write_rule` allows exactly the
``.md`` files of this directory, and any other write is refused with
gemini-cli's words (:data:`~gemini_split.policy.builtin.PLAN_WRITE_DENIED`).
A policy file's deny of ``write_file`` still wins (a higher tier).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import msgspec

from gemini_split.policy import Decision, Rule
from gemini_split.policy.rules import DEFAULT_TIER
from gemini_split.regex import compile_linear, escape_char

from .base import ToolFailed

#: The tools plan mode lets write plans.
PLAN_WRITE_TOOLS = frozenset({"write_file", "replace"})
#: The plan files' names (gemini-cli's rules: ``[\w-]+\.md``, no directories).
PLAN_NAME = re.compile(r"[\w-]+\.md")
#: A plan file is read whole for its approval; a bigger one is refused.
MAX_PLAN_BYTES = 512 * 1024


def access_denied(plan_path: str, plans_dir: Path) -> str:
    """gemini-cli's ``PATH_ACCESS_DENIED``."""
    return (f"Access denied: plan path ({plan_path}) must be within the designated plans directory "
            f"({plans_dir}).")


def file_not_found(plan_path: str) -> str:
    """gemini-cli's ``FILE_NOT_FOUND``."""
    return f"Plan file does not exist: {plan_path}. You must create the plan file before requesting approval."


#: gemini-cli's ``FILE_EMPTY``.
FILE_EMPTY = "Plan file is empty. You must write content to the plan file before requesting approval."


class PlanPlace(msgspec.Struct, frozen=True):
    """Where a session's plans are kept: gemini-cli's
    ``<temp>/<project hash>/<session id>/plans`` for the project
    ``project`` (``temp``: ``~/.gemini/tmp``), or ``fixed`` itself (a custom
    ``general.plan.directory``, or a server's directory for one session)."""

    fixed: Path | None = None
    temp: Path | None = None
    project: Path | None = None

    def directory(self, session_id: str | None) -> Path:
        if self.fixed is not None or self.temp is None or self.project is None:
            return self.fixed or Path(".")
        base = self.temp / project_hash(self.project)
        return base / _safe_name(session_id) / "plans" if session_id else base / "plans"


def project_hash(directory: Path) -> str:
    """gemini-cli's ``<project_hash>``: the SHA-256 of the real path (as
    the checkpoints' records are kept, :mod:`.checkpoints`)."""
    return hashlib.sha256(str(directory).encode("utf-8", "surrogateescape")).hexdigest()


def _safe_name(session_id: str) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)[:200]
    return name if name.strip(".") else "_"


def _within(directory: str, path: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def resolve_plan_path(plan_path: str, plans_dir: Path, project_root: Path) -> Path:
    """gemini-cli's ``resolveAndValidatePlanPath``: ``plan_path`` as a real
    (symlink-free) path inside ``plans_dir`` — given absolute, relative to
    the project root, or relative to the plans directory. Raises
    :class:`ToolFailed` (``invalid_path``) with gemini-cli's message when it
    is none of these."""
    text = plan_path.strip() if isinstance(plan_path, str) else ""
    if not text or "\x00" in text:
        raise ToolFailed("invalid_path", "Plan file path must be non-empty.")
    real_dir = os.path.realpath(plans_dir)
    candidates = [text] if os.path.isabs(text) else []
    candidates += [os.path.join(project_root, text), os.path.join(plans_dir, text)]
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if _within(real_dir, real):
            return Path(real)
    raise ToolFailed("invalid_path", access_denied(text, plans_dir),
                     "give the plan's file name, such as feature-x.md")


def is_plan_file(path: Path, plans_dir: Path) -> bool:
    """Whether ``path`` is a plan file of ``plans_dir``: a ``.md`` file
    directly in it, named as gemini-cli's rules allow."""
    return os.path.realpath(path.parent) == os.path.realpath(plans_dir) and PLAN_NAME.fullmatch(path.name) is not None


def ensure_directory(plans_dir: Path) -> Path:
    """Create the plans directory (0700, with its parents) if it is
    missing; its real path. Raises :class:`ToolFailed` when it cannot be."""
    try:
        plans_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolFailed("write_failed", f"cannot create the plans directory {plans_dir}: "
                                         f"{exc.strerror or exc}") from None
    return Path(os.path.realpath(plans_dir))


def read_plan(path: Path, shown: str) -> str:
    """A plan file's text for its approval; raises :class:`ToolFailed` with
    gemini-cli's words when it is missing or empty (``shown``: the name the
    model gave)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_PLAN_BYTES + 1)
    except FileNotFoundError:
        raise ToolFailed("not_found", file_not_found(shown)) from None
    except OSError as exc:
        raise ToolFailed("read_failed", f"Failed to read plan file: {exc.strerror or exc}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise ToolFailed("too_large", f"Failed to read plan file: it is larger than {MAX_PLAN_BYTES // 1024} KiB",
                         "keep the plan short: the steps, the files, how to verify")
    text = data.decode("utf-8", "replace")
    if not text.strip():
        raise ToolFailed("empty_plan", FILE_EMPTY)
    return text


class _PlanFiles:
    """An ``args_pattern`` for :func:`plan_write_rule`: a ``file_path`` that
    is a ``.md`` file directly in one directory (RE2: the text is the
    model's)."""

    def __init__(self, plans_dir: Path):
        quoted = msgspec.json.encode(str(plans_dir)).decode("utf-8")[1:-1]
        literal = "".join(escape_char(c) for c in quoted)
        self.text = f'\\x00"file_path":"{literal}/[\\w-]+\\.md"\\x00'
        self._pattern = compile_linear(self.text)

    def search(self, text: str) -> object:
        return self._pattern.search(text)


def plan_write_rule(plans_dir: Path) -> Rule:
    """The built-in rule that lets plan mode write the plans of
    ``plans_dir`` (gemini-cli's ``plan.toml`` allows at priority 70): the
    paths :func:`resolve_plan_path` gives, which are real paths."""
    plans_dir = Path(os.path.realpath(plans_dir))
    pattern = _PlanFiles(plans_dir)
    return Rule(tuple(sorted(PLAN_WRITE_TOOLS)), Decision.ALLOW, DEFAULT_TIER + 0.070,
                f"plan mode (plan files in {plans_dir})", args_pattern=pattern, args_pattern_text=pattern.text,
                modes=frozenset({"plan"}))
