"""Agent Skills (issue 29 §2): discovered where the user is, as gemini-cli
discovers them.

A skill is a directory holding a ``SKILL.md`` whose YAML frontmatter gives
``name`` and ``description`` and whose body is the skill's instructions.
The tiers, lowest precedence first (a later skill of the same name
replaces an earlier one), exactly as gemini-cli 0.61 reads them:

1. extension skills (directories given by :func:`discover`'s ``extra``),
2. user skills: ``~/.gemini/skills/``, then its alias ``~/.agents/skills/``,
3. workspace skills: ``<project>/.gemini/skills/``, then
   ``<project>/.agents/skills/`` — only in a trusted folder, as every other
   project file.

In each directory a ``SKILL.md`` at its top or one level down
(``<dir>/SKILL.md``, ``<dir>/*/SKILL.md``) is a skill. A file that cannot
be a skill (no frontmatter, malformed YAML, missing ``name`` or
``description``, not a regular file, larger than :data:`MAX_SKILL_BYTES`,
a symlink leading out of its directory) is reported by path in
:attr:`Discovery.warnings` and the other skills still load.

What the server needs of a skill travels in the protocol's
``SessionContext.skills`` (:func:`wire_skills`): the model is offered the
names and descriptions, and ``activate_skill`` is answered from the body and
file listing the client read here — so it works the same embedded, against
``serve``, through the local daemon and with ``--tools server``
(``gemini_split/server/session/features/skills.py``).

``skills.disabled`` in settings.json (user or workspace) names skills that
are discovered but not offered (:func:`set_disabled` edits it as gemini-cli's
``/skills disable`` does).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded
from gemini_split.plain_yaml import plain_mapping

from .disabled_lists import toggle
from .precedence import tiers

#: A ``SKILL.md`` larger than this is refused (gemini-cli reads any size;
#: a skill's instructions are a page or two, and all of them travel with
#: every request).
MAX_SKILL_BYTES = 256 * 1024
#: At most this many entries in a skill's file listing.
MAX_LISTED_FILES = 200

SKILL_FILE = "SKILL.md"
#: The settings list of skills not offered.
DISABLED_KEY = "skills.disabled"
_FRONTMATTER = re.compile(r"^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n([\s\S]*))?\Z")
#: gemini-cli replaces these in a skill's name (they would make bad paths).
_NAME_UNSAFE = re.compile(r'[:\\/<>*?"|]')
_SKIPPED_DIRS = {"node_modules", ".git"}


class SkillError(Exception):
    """A ``SKILL.md`` that cannot be loaded; the text names the file."""


class Skill(msgspec.Struct, frozen=True):
    """One discovered skill. ``path`` is its ``SKILL.md``; ``scope`` is
    ``user``, ``workspace``, or ``extension NAME`` (the extension bringing
    it)."""

    name: str
    description: str
    path: Path
    body: str
    scope: str
    disabled: bool = False

    @property
    def directory(self) -> Path:
        return self.path.parent


class Discovery(msgspec.Struct):
    """The skills found (winners only, in name order) and what was wrong.
    (Structs, not dataclasses: this module is on the thin ``-p`` path.)"""

    skills: list[Skill] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

    def enabled(self) -> list[Skill]:
        return [s for s in self.skills if not s.disabled]

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


def skill_roots(config_dir: Path, home: Path, project: Path | None, *, trusted: bool,
                extensions: Iterable[tuple[str, Path]] = ()) -> list[tuple[str, Path]]:
    """The directories searched, lowest precedence first, with their scope.
    ``extensions`` are the active extensions' ``(name, skills directory)``
    (``ExtensionSet.skill_dirs``), the lowest tier. ``config_dir`` is the
    user's ``~/.gemini`` (``$GEMINI_SPLIT_HOME``); ``home`` holds the
    ``~/.agents`` alias. ``project`` is the workspace root (None or
    untrusted: no workspace tier); a project directory that is the user's
    (the home directory) adds nothing."""
    projects = [project / base / "skills" for base in (".gemini", ".agents")] if project is not None and trusted else []
    return tiers([config_dir / "skills", home / ".agents" / "skills"], projects, extensions=extensions,
                 project_scope="workspace")


def discover(roots: Sequence[tuple[str, Path]] | Iterable[Path], *, disabled: Iterable[str] = ()) -> Discovery:
    """Every skill under ``roots`` (``(scope, directory)`` pairs, lowest
    precedence first; a bare directory counts as an ``extension`` root —
    what an extension's ``skills/`` is). A missing directory is no error.
    Skills named in ``disabled`` are kept, marked disabled.

    This is the call for other skill sources (an enabled extension's
    ``skills/``): put them first, so user and workspace skills win."""
    off = set(disabled)
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for entry in roots:
        scope, root = entry if isinstance(entry, tuple) else ("extension", Path(entry))
        seen_here: dict[str, Path] = {}
        for path in _skill_files(Path(root), warnings):
            try:
                skill = load_skill(path, scope)
            except SkillError as exc:
                warnings.append(str(exc))
                continue
            if skill.name in seen_here:
                warnings.append(f"{path}: skill {skill.name!r} is also defined by {seen_here[skill.name]}; "
                                f"that one is used")
                continue
            seen_here[skill.name] = path
            found[skill.name] = Skill(skill.name, skill.description, skill.path, skill.body, scope,
                                      disabled=skill.name in off)
    return Discovery(sorted(found.values(), key=lambda s: s.name), warnings)


def _skill_files(root: Path, warnings: list[str]) -> list[Path]:
    """``root/SKILL.md`` and ``root/*/SKILL.md`` (not under node_modules or
    .git), sorted so the result does not depend on the directory order."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        warnings.append(f"{root}: skills directory is not a directory; skipped")
        return []
    except OSError as exc:
        warnings.append(f"{root}: cannot list skills: {exc.strerror or exc}")
        return []
    files: list[Path] = []
    if any(e.name == SKILL_FILE for e in entries):
        files.append(root / SKILL_FILE)
    for e in entries:
        if e.name in _SKIPPED_DIRS:
            continue
        try:
            is_dir = e.is_dir()
        except OSError:
            continue
        if is_dir and os.path.lexists(Path(e.path) / SKILL_FILE):
            files.append(Path(e.path) / SKILL_FILE)
    return files


def load_skill(path: Path, scope: str = "user") -> Skill:
    """The skill whose ``SKILL.md`` is ``path``. Raises :class:`SkillError`
    (the path and what is wrong) for anything else: a FIFO or device (opened
    non-blocking, never waited on), a symlink whose target is outside the
    skill's directory, more than :data:`MAX_SKILL_BYTES`, text that is not
    UTF-8, no ``---`` frontmatter, YAML that does not parse or is not a
    mapping with string ``name`` and ``description``."""
    text = _read_skill_text(path)
    match = _FRONTMATTER.match(text)
    if match is None:
        raise SkillError(f"{path}: no YAML frontmatter (the file must start with a '---' line, "
                         f"then name: and description:, then '---')")
    meta = _parse_frontmatter(path, match.group(1))
    name = _NAME_UNSAFE.sub("-", meta["name"].strip())
    if not name:
        raise SkillError(f"{path}: frontmatter 'name' is empty")
    return Skill(name, meta["description"].strip(), path, (match.group(2) or "").strip(), scope)


def _read_skill_text(path: Path) -> str:
    directory = os.path.realpath(path.parent)
    real = os.path.realpath(path)
    if os.path.dirname(real) != directory and not real.startswith(directory + os.sep):
        raise SkillError(f"{path}: a symlink to {real}, outside the skill's directory; skipped")
    try:
        data = read_bounded(path, MAX_SKILL_BYTES)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SkillError(f"{path}: {reason}; skipped" if reason == "not a regular file"
                         else f"{path}: cannot open: {reason}") from None
    if len(data) > MAX_SKILL_BYTES:
        raise SkillError(f"{path}: more than the {MAX_SKILL_BYTES} bytes a SKILL.md may have; skipped")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _parse_frontmatter(path: Path, text: str) -> dict[str, str]:
    """The frontmatter's mapping: read without PyYAML when it is plain
    ``key: value`` lines (:mod:`gemini_split.plain_yaml`), by PyYAML otherwise."""
    meta = plain_mapping(text)
    if meta is not None:
        return _checked(path, meta)
    import yaml  # lazy_imports.EDGES: only for a frontmatter beyond plain lines

    try:
        meta = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SkillError(f"{path}: malformed YAML frontmatter{line}: {problem}") from None
    return _checked(path, meta)


def _checked(path: Path, meta: object) -> dict[str, str]:
    """``meta`` when it is a mapping with a text ``name`` and ``description``."""
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: the frontmatter is not a mapping of name: and description:")
    for key in ("name", "description"):
        if not isinstance(meta.get(key), str):
            raise SkillError(f"{path}: the frontmatter needs a text '{key}:'")
    return meta


def file_listing(skill: Skill) -> str:
    """The skill directory's files, one absolute path a line (at most
    :data:`MAX_LISTED_FILES`; symlinks listed, never followed), as
    gemini-cli's ``<available_resources>`` lists them."""
    lines: list[str] = []
    root = skill.directory
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            if len(lines) >= MAX_LISTED_FILES:
                lines.append(f"… (more files, listing stopped at {MAX_LISTED_FILES})")
                return "\n".join(lines)
            lines.append(str(Path(dirpath) / name))
    return "\n".join(lines)


def wire_skills(discovery: Discovery) -> tuple:
    """The enabled skills as the protocol's ``SkillInfo`` values."""
    from gemini_split.protocol.messages import SkillInfo

    return tuple(SkillInfo(name=s.name, description=s.description, location=str(s.path), body=s.body,
                           resources=file_listing(s))
                 for s in discovery.enabled())


# --------------------------------------------------------------------------
# skills.disabled in settings.json


def settings_path(scope: str, config_dir: Path, project: Path) -> Path:
    """The settings.json ``scope`` (``user`` or ``workspace``) edits."""
    return config_dir / "settings.json" if scope == "user" else project / ".gemini" / "settings.json"


def set_disabled(path: Path, name: str, disabled: bool) -> bool:
    """Add ``name`` to (or remove it from) ``skills.disabled`` in the
    settings file ``path``, keeping everything else, comments too
    (:func:`gemini_split.userfiles.disabled_lists.toggle`). Returns whether the file changed.
    Raises :class:`SkillError` for a file that is not a JSON object (it is
    left as it was), ``OSError`` when it cannot be written."""
    try:
        return toggle(path, DISABLED_KEY, name, disabled=disabled)
    except SettingsError as exc:
        raise SkillError(str(exc)) from None


# --------------------------------------------------------------------------
# gemini-split skills install / uninstall


def install_dir(scope: str, config_dir: Path, project: Path) -> Path:
    """Where ``install`` copies skills: gemini-cli's user or workspace skills directory."""
    return config_dir / "skills" if scope == "user" else project / ".gemini" / "skills"


def find_installable(source: Path) -> Discovery:
    """The skills a local directory (a git checkout or a plain one) holds,
    as :func:`discover` reads them (a second skill of the same name is left
    out, named in the warnings)."""
    if not source.is_dir():
        raise SkillError(f"{source}: not a directory (give a skill's directory or a checkout holding skills)")
    return discover([("user", source)])


def consent_text(found: Discovery, source: Path, target: Path, *, link: bool = False) -> str:
    """What installing (``link``: linking) shows before asking: each
    skill's name, description, location and files; where it goes; the
    warning gemini-cli gives."""
    action = "Linking" if link else "Installing"
    lines = [f'{action} agent skill(s) from "{source}".', "",
             f"The following agent skill(s) will be {action.lower()}:", ""]
    for s in found.skills:
        lines += [f"  {s.name}: {s.description}", f"    (Source: {s.path})"]
        listing = file_listing(s).splitlines()
        lines += [f"    {p}" for p in listing[:20]]
        if len(listing) > 20:
            lines.append(f"    … and {len(listing) - 20} more files")
        lines.append("")
    lines += [f"{'Link' if link else 'Install'} Destination: {target}", "",
              "Agent skills inject instructions into the model and may point it at scripts in their directory. "
              "Install only skills you trust."]
    return "\n".join(lines)


def install(found: Discovery, target: Path) -> list[Path]:
    """Copy each skill's directory to ``target/<name>`` (replacing an
    earlier one of that name; symlinks inside are copied as symlinks,
    never followed). Returns the new directories."""
    target.mkdir(parents=True, exist_ok=True)
    done: list[Path] = []
    for s in found.skills:
        dest = target / s.name
        if dest.resolve().parent != target.resolve():
            raise SkillError(f"skill name {s.name!r} is not a plain directory name")
        if os.path.lexists(dest):
            _remove(dest)
        shutil.copytree(s.directory, dest, symlinks=True,
                        ignore=shutil.ignore_patterns(*_SKIPPED_DIRS))
        done.append(dest)
    return done


def link(found: Discovery, target: Path) -> list[Path]:
    """gemini-cli's ``skills link``: ``target/<name>`` made a symbolic link
    to each skill's directory (replacing what had that name), so edits to
    the source apply at once. Returns the links."""
    target.mkdir(parents=True, exist_ok=True)
    done: list[Path] = []
    for s in found.skills:
        dest = target / s.name
        if dest.parent.resolve() != target.resolve() or s.name in (".", ".."):
            raise SkillError(f"skill name {s.name!r} is not a plain directory name")
        if os.path.lexists(dest):
            _remove(dest)
        os.symlink(os.path.realpath(s.directory), dest, target_is_directory=True)
        done.append(dest)
    return done


def uninstall(name: str, target: Path) -> Path | None:
    """Remove the installed skill ``name`` from ``target`` (found by its
    frontmatter name, else by directory name). Returns what was removed,
    None when there is no such skill. A name with a path separator or
    ``..`` is never a skill."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return None
    for s in discover([("user", target)]).skills:
        if s.name == name and s.directory != target:
            _remove(s.directory)
            return s.directory
    candidate = target / name
    if os.path.lexists(candidate):
        _remove(candidate)
        return candidate
    return None


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink()
    else:
        shutil.rmtree(path)


__all__ = ["Discovery", "Skill", "SkillError", "discover", "skill_roots", "load_skill", "file_listing",
           "set_disabled", "install", "link", "uninstall", "find_installable", "consent_text", "wire_skills"]
