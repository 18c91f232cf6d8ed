"""gemini-cli's folder-trust decision: which project files an untrusted
folder would apply, recording the user's answer, and the one line that says
what was ignored.

The rules are read by :func:`gemini_split.userfiles.settings.is_folder_trusted`; this
module writes them, in gemini-cli's ``trustedFolders.json`` format (an
object of absolute folder path → ``TRUST_FOLDER``, ``TRUST_PARENT`` or
``DO_NOT_TRUST``), so a decision taken here holds for gemini-cli too.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from gemini_split.environment import Environment
from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded, replace_atomically
from gemini_split.userfiles.settings import MAX_SETTINGS_BYTES, trust_rule

TRUST_FOLDER = "TRUST_FOLDER"
TRUST_PARENT = "TRUST_PARENT"
DO_NOT_TRUST = "DO_NOT_TRUST"
LEVELS = (TRUST_FOLDER, TRUST_PARENT, DO_NOT_TRUST)
#: The project root is looked for up to this marker, as context files are.
ROOT_MARKERS = (".git",)


def trusted_folders_path(env: Environment) -> Path:
    """``$GEMINI_CLI_TRUSTED_FOLDERS_PATH``, else ``trustedFolders.json`` in
    the config directory."""
    return Path(env.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or env.config_dir / "trustedFolders.json")


def project_files(folder: Path, env: Environment, context_file_names: list[str]) -> list[Path]:
    """The project configuration an untrusted ``folder`` leaves unused:
    what its ``.gemini/`` holds (settings, commands, skills…) and the
    context files (GEMINI.md…) from the project root (the nearest ``.git``)
    down to ``folder``. None in the home directory, whose ``.gemini`` is the
    user's own."""
    folder = Path(os.path.abspath(folder))
    found: list[Path] = []
    gemini_dir = folder / ".gemini"
    if gemini_dir.is_dir() and not _same(gemini_dir, env.config_dir) and not _same(folder, _home(env)):
        try:
            # system.md is read only when GEMINI_SYSTEM_MD (the user's own
            # choice, in any folder) names it: trust does not change that.
            found.extend(sorted(p for p in gemini_dir.iterdir() if p.name != "system.md"))
        except OSError:
            found.append(gemini_dir)
    agents_skills = folder / ".agents" / "skills"  # gemini-cli's alias for .gemini/skills
    if agents_skills.is_dir() and not _same(folder, _home(env)):
        found.append(agents_skills)
    root = next((d for d in (folder, *folder.parents) if any(os.path.lexists(d / m) for m in ROOT_MARKERS)), folder)
    chain = [folder]
    while chain[-1] != root and chain[-1].parent != chain[-1]:
        chain.append(chain[-1].parent)
    for directory in reversed(chain):
        if _same(directory, env.config_dir) or _same(directory, _home(env)):
            continue
        found.extend(directory / name for name in context_file_names if (directory / name).is_file())
    return found


def untrusted_notice(folder: Path, files: list[Path], env: Environment) -> str:
    """One line: which files an untrusted folder ignores and how to trust it."""
    shown = ", ".join(_short(p, folder) for p in files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
    path = trusted_folders_path(env)
    try:
        decided = trust_rule(folder, env) == DO_NOT_TRUST
    except SettingsError:
        decided = False
    how = (f"it is marked {DO_NOT_TRUST} in {path}; change that rule to trust it" if decided else
           f"trust it by answering the REPL's question (asked once) or in {path}")
    return (f"gemini-split: this folder is not trusted, so its project files are ignored: {shown}; "
            f"{how}, or for one run with --skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true.")


def record_trust(folder: Path, level: str, env: Environment) -> Path:
    """Record ``level`` for ``folder`` (its real path) in trustedFolders.json,
    keeping every other rule; written whole to a temporary file and renamed,
    so a crash leaves the old file. Returns the file's path."""
    if level not in LEVELS:
        raise ValueError(f"unknown trust level {level!r}")
    path = trusted_folders_path(env)
    rules = _rules(path)
    rules[os.path.realpath(folder)] = level
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, msgspec.json.format(msgspec.json.encode(rules), indent=2) + b"\n", mode=0o600)
    return path


def explicit_level(folder: Path, env: Environment) -> str | None:
    """The level trustedFolders.json records for ``folder`` itself (not
    one inherited from a parent's rule), or None."""
    rules = _rules(trusted_folders_path(env))
    level = rules.get(os.path.realpath(folder), rules.get(os.path.abspath(folder)))
    return level if level in LEVELS else None


def _rules(path: Path) -> dict[str, str]:
    """trustedFolders.json's rules ({} when there is no file). Raises
    :class:`SettingsError` for one that cannot be read or is not an object."""
    try:
        data = read_bounded(path, MAX_SETTINGS_BYTES)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{path}: larger than {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB; not read")
    if not data.strip():
        return {}
    try:
        loaded = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise SettingsError(f"{path}: not JSON ({exc}); fix or remove it to record a trust decision") from None
    if not isinstance(loaded, dict):
        raise SettingsError(f"{path}: expected a JSON object of folder → trust level")
    return loaded


def _home(env: Environment) -> Path:
    return Path(env.environ.get("HOME") or Path.home())


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _short(path: Path, folder: Path) -> str:
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:
        return str(path)
    return rel + ("/" if path.is_dir() else "")
