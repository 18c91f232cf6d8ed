"""gemini-cli's extensions: ``~/.gemini/extensions/<name>/``, read where the user is.

The files are gemini-cli's own, so an extension installed by
``gemini extensions install`` works here unchanged, and the other way round:

* ``<config>/extensions/<name>/gemini-extension.json``: the manifest
  (``name`` and ``version`` required; ``mcpServers``, ``contextFileName``,
  ``excludeTools``, ``settings``); ``commands/`` (custom commands),
  ``hooks/hooks.json`` and ``skills/`` beside it;
* ``<name>/.gemini-extension-install.json``: ``{"source", "type"}`` with
  type ``local``, ``git`` or ``link`` (a linked extension's files stay at
  ``source``; only this file is in the extensions directory);
* ``<name>/.env``: the values of the manifest's ``settings`` (``KEY=VALUE``
  lines, gemini-cli's quoting); in a trusted folder the workspace's
  ``.env`` gives them too, and wins (``extensions config --scope
  workspace`` writes there);
* ``<config>/extensions/extension-enablement.json``: ``{name: {"overrides":
  ["/home/me/*", "!/home/me/project/*"]}}``; the last rule matching the
  workspace wins, enabled when none matches.

Variables ``${extensionPath}``, ``${workspacePath}``, ``${/}`` and
``${pathSeparator}`` and the settings' ``${ENVVAR}`` are replaced in every
string of the manifest, as gemini-cli does. In a hook's command (a shell
script) the two paths are data, never script: ``${extensionPath}`` and
``${workspacePath}`` are left for its shell, which expands them from the
hook's environment (:attr:`Extension.hook_env`), so a folder named
``ws$(touch X)`` is only a name.

Nothing an extension's files say can make the client read outside the
extension's directory: a ``contextFileName`` that is absolute, holds ``..``
or resolves (through symlinks) outside it is left out, as is a ``commands``
or ``skills`` directory that is a symlink pointing out. A manifest that is
not JSON, too large, nameless or has a name other than letters, digits and
dashes is reported with the directory's name; the other extensions still
load. Every problem is a line in :attr:`ExtensionSet.problems`.

A sensitive setting's value is never printed: ``list`` shows it as
``***``, and it is not logged.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec

from gemini_split import json_values
from gemini_split.userfiles.env_files import read_env_file
from gemini_split.files import read_bounded

from .extension_templates import TEMPLATES

EXTENSIONS_DIR = "extensions"
MANIFEST = "gemini-extension.json"
INSTALL_METADATA = ".gemini-extension-install.json"
SETTINGS_FILE = ".env"
ENABLEMENT_FILE = "extension-enablement.json"
#: A manifest (or metadata, enablement or .env file) larger than this is refused.
MAX_MANIFEST_BYTES = 256 * 1024
#: Extensions read at most (each is a directory under the extensions folder).
MAX_EXTENSIONS = 200
#: Seconds a ``git clone`` may take before it is given up.
GIT_TIMEOUT = 120.0
_NAME = re.compile(r"^[a-zA-Z0-9-]+$")
_ENV_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_VARIABLE = re.compile(r"\$\{(.*?)\}")
_GIT_PREFIXES = ("http://", "https://", "git@", "sso://", "github:", "gitlab:", "ssh://")


class ExtensionError(Exception):
    """An install, update, uninstall, enable or disable that could not be done;
    the text says why and names the extension."""


class ExtensionSetting(msgspec.Struct, frozen=True):
    name: str
    description: str
    env_var: str
    sensitive: bool


class Extension(msgspec.Struct):
    name: str
    version: str
    description: str
    #: The directory in the extensions folder.
    install_dir: Path
    #: Where its files are: ``install_dir``, or a linked extension's source.
    path: Path
    install_metadata: dict[str, Any] | None
    #: The hydrated ``mcpServers`` (name → gemini-cli's server object).
    mcp_servers: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    context_files: list[Path] = msgspec.field(default_factory=list)
    exclude_tools: list[str] = msgspec.field(default_factory=list)
    settings: list[ExtensionSetting] = msgspec.field(default_factory=list)
    #: The ``.env`` values (never printed).
    setting_values: dict[str, str] = msgspec.field(default_factory=dict)
    enabled_user: bool = True
    #: The ``hooks`` object of its ``hooks/hooks.json``, variables replaced
    #: but the two paths, which its commands' shell expands from
    #: :attr:`hook_env` (None: none).
    hooks: Any = None
    #: ``extensionPath`` and ``workspacePath``, for its hooks' environment.
    hook_env: tuple[tuple[str, str], ...] = ()
    #: What its manifest asked for that is not used, one line each.
    problems: list[str] = msgspec.field(default_factory=list)
    #: Enabled for the workspace: what the session uses.
    active: bool = True

    @property
    def commands_dir(self) -> Path | None:
        return _inside(self.path, "commands")

    @property
    def skills_dir(self) -> Path | None:
        return _inside(self.path, "skills")

    @property
    def source(self) -> str:
        return str((self.install_metadata or {}).get("source", ""))

    @property
    def install_type(self) -> str:
        return str((self.install_metadata or {}).get("type", ""))


class ExtensionSet(msgspec.Struct):
    """The installed extensions, by name, and one line per one left out."""

    extensions: dict[str, Extension] = msgspec.field(default_factory=dict)
    problems: list[str] = msgspec.field(default_factory=list)

    def active(self) -> list[Extension]:
        return [e for e in self.extensions.values() if e.active]

    def mcp_servers(self) -> dict[str, dict[str, Any]]:
        """The active extensions' MCP servers (the first extension to name
        one wins); each stdio server's ``env`` also holds its extension's
        settings, as gemini-cli gives them to it."""
        out: dict[str, dict[str, Any]] = {}
        for ext in self.active():
            for name, config in ext.mcp_servers.items():
                if name in out:
                    self.problems.append(f"extension {ext.name}: MCP server {name!r} is also defined by another "
                                         "extension; the first one is used")
                    continue
                config = {k: v for k, v in config.items() if k != "trust"}  # gemini-cli drops trust
                if ext.setting_values:
                    env = config.get("env") if isinstance(config.get("env"), dict) else {}
                    config["env"] = {**ext.setting_values, **env}
                out[name] = config
        return out

    def context_files(self) -> list[Path]:
        return [p for ext in self.active() for p in ext.context_files]

    def exclude_tools(self) -> list[str]:
        return [t for ext in self.active() for t in ext.exclude_tools]

    def command_dirs(self) -> list[tuple[str, Path]]:
        return [(ext.name, d) for ext in self.active() if (d := ext.commands_dir) is not None]

    def hooks(self) -> list[tuple[str, Any, tuple[tuple[str, str], ...]]]:
        """(extension name, its ``hooks`` object, their environment) of the
        active extensions."""
        return [(ext.name, ext.hooks, ext.hook_env) for ext in self.active() if ext.hooks is not None]

    def skill_dirs(self) -> list[tuple[str, Path]]:
        return [(ext.name, d) for ext in self.active() if (d := ext.skills_dir) is not None]


def extensions_dir(config_dir: Path) -> Path:
    return config_dir / EXTENSIONS_DIR


# --------------------------------------------------------------------------
# Reading.


def load_extensions(config_dir: Path, workspace: Path, *, home: Path | None = None,
                    only: Iterable[str] | None = None, workspace_settings: bool = False) -> ExtensionSet:
    """Every extension under ``config_dir/extensions``, each marked active
    or not for ``workspace`` by the enablement file, or, given ``only``
    (``-e/--extensions``), by :func:`only_these`. ``workspace_settings``
    (a trusted folder): the values ``workspace/.env`` gives their settings
    win over their own ``.env``'s, as gemini-cli merges the two scopes.
    Never raises for an extension's files: a broken one is a line in
    ``problems``."""
    found = ExtensionSet()
    root = extensions_dir(config_dir)
    home = home or Path.home()
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return found
    except OSError as exc:
        found.problems.append(f"{root}: cannot read: {exc.strerror or exc}")
        return found
    enablement = Enablement(root)
    for entry in entries[:MAX_EXTENSIONS + 1]:
        if not entry.is_dir(follow_symlinks=True) or entry.name.startswith("."):
            continue
        if len(found.extensions) >= MAX_EXTENSIONS:
            found.problems.append(f"{root}: more than {MAX_EXTENSIONS} extensions; the rest are not loaded")
            break
        try:
            ext = read_extension(Path(entry.path), workspace, workspace_settings=workspace_settings)
        except ValueError as exc:
            found.problems.append(f"extension {_shown(entry.name)}: {exc}; it is not loaded")
            continue
        if ext.name in found.extensions:
            found.problems.append(f"extension {ext.name} ({entry.path}): another extension has that name; "
                                  "it is not loaded")
            continue
        ext.enabled_user = enablement.is_enabled(ext.name, home)
        ext.active = only_these(ext.name, only) if only is not None else enablement.is_enabled(ext.name, workspace)
        for problem in enablement.problems:
            if problem not in found.problems:
                found.problems.append(problem)
        found.problems.extend(ext.problems)
        _check(ext, found.problems)
        found.extensions[ext.name] = ext
    return found


def only_these(name: str, only: Iterable[str]) -> bool:
    """gemini-cli's ``-e`` rule: the extension ``name`` is used when
    ``only`` names it (in any case), whatever the enablement file says;
    ``none`` alone uses none."""
    wanted = {n.lower() for n in only}
    return wanted != {"none"} and name.lower() in wanted


def unknown_names(found: ExtensionSet, only: Iterable[str]) -> list[str]:
    """The names in ``only`` (``-e``) that no installed extension has
    (``none`` is not a name)."""
    installed = {name.lower() for name in found.extensions}
    return [n for n in only if n.lower() != "none" and n.lower() not in installed]


def read_extension(install_dir: Path, workspace: Path, *, workspace_settings: bool = False) -> Extension:
    """One extension directory (``workspace_settings``: see
    :func:`load_extensions`). Raises ValueError with the reason."""
    metadata = _read_json_object(install_dir / INSTALL_METADATA, missing_ok=True)
    path = install_dir
    if metadata is not None and metadata.get("type") == "link":
        source = metadata.get("source")
        if not isinstance(source, str) or not os.path.isabs(source):
            raise ValueError(f"{INSTALL_METADATA} of a linked extension has no absolute 'source'")
        path = Path(source)
    raw = _read_json_object(path / MANIFEST)
    assert raw is not None
    values = _read_env_file(install_dir / SETTINGS_FILE)
    if workspace_settings:
        values.update(_read_env_file(workspace / SETTINGS_FILE))
    manifest = parse_manifest(raw, path, workspace, settings_env=values)
    ext = Extension(
        name=manifest["name"], version=manifest["version"], description=manifest.get("description") or "",
        install_dir=install_dir, path=path, install_metadata=metadata,
        settings=manifest["_settings"], setting_values=manifest["_values"],
    )
    servers = manifest.get("mcpServers")
    if isinstance(servers, dict):
        ext.mcp_servers = {str(k): v for k, v in servers.items() if isinstance(v, dict)}
    exclude = manifest.get("excludeTools")
    if isinstance(exclude, list):
        ext.exclude_tools = [t for t in exclude if isinstance(t, str) and t.strip()]
    ext.context_files = manifest["_context"]
    ext.problems = [f"extension {ext.name}: {p}; it is not used" for p in manifest.get("_problems", [])]
    ext.hooks = _hooks_of(ext, workspace)
    return ext


def _hooks_of(ext: Extension, workspace: Path) -> Any:
    """gemini-cli's ``loadExtensionHooks``: the ``hooks`` object of
    ``hooks/hooks.json`` with the variables (and the settings) replaced."""
    hooks_dir = _inside(ext.path, "hooks")
    if hooks_dir is None or not os.path.lexists(hooks_dir / "hooks.json"):
        return None
    real = os.path.realpath(hooks_dir / "hooks.json")
    if not real.startswith(os.path.realpath(ext.path) + os.sep):
        ext.problems.append(f"extension {ext.name}: hooks/hooks.json leads outside the extension's directory; "
                            "its hooks are not used")
        return None
    try:
        raw = _read_json_object(hooks_dir / "hooks.json")
    except ValueError as exc:
        ext.problems.append(f"extension {ext.name}: hooks/{exc}; its hooks are not used")
        return None
    ext.hook_env = (("extensionPath", str(ext.path)), ("workspacePath", str(workspace)))
    # The paths stay as they are written: the command's shell expands them as data.
    context = {**ext.setting_values, "extensionPath": "${extensionPath}", "workspacePath": "${workspacePath}",
               "/": os.sep, "pathSeparator": os.sep}
    return _hydrate((raw or {}).get("hooks"), context)


def parse_manifest(raw: Mapping[str, Any], path: Path, workspace: Path, *,
                   settings_env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The manifest with gemini-cli's checks and its variables replaced,
    plus ``_settings``, ``_values`` and ``_context`` (the context files
    that exist inside ``path``). Raises ValueError for a missing name or
    version, or a name gemini-cli would refuse."""
    name, version = raw.get("name"), raw.get("version")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{MANIFEST} has no \"name\"")
    if not isinstance(version, str) or not version:
        raise ValueError(f"{MANIFEST} has no \"version\"")
    if not _NAME.match(name):
        raise ValueError(f"invalid extension name {_shown(name)}: only letters, digits and dashes are allowed")
    settings = _settings_of(raw.get("settings"), name)
    values = {s.env_var: settings_env[s.env_var] for s in settings if settings_env and s.env_var in settings_env}
    context = {"extensionPath": str(path), "workspacePath": str(workspace), "/": os.sep, "pathSeparator": os.sep,
               **values}
    manifest = _hydrate(dict(raw), context)
    manifest["_settings"] = settings
    manifest["_values"] = values
    manifest["_context"] = _context_files(manifest, path)
    return manifest


def _settings_of(value: Any, name: str) -> list[ExtensionSetting]:
    out: list[ExtensionSetting] = []
    if not isinstance(value, list):
        return out
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("envVar"), str):
            continue
        env_var = item["envVar"]
        if not _ENV_NAME.match(env_var):
            raise ValueError(f"setting {_shown(env_var)} is not an environment variable name")
        out.append(ExtensionSetting(str(item.get("name") or env_var), str(item.get("description") or ""),
                                    env_var, bool(item.get("sensitive"))))
    return out


def _hydrate(value: Any, context: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: context.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_hydrate(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _hydrate(v, context) for k, v in value.items() if k not in ("__proto__", "constructor",
                                                                               "prototype")}
    return value


def _context_files(manifest: Mapping[str, Any], path: Path) -> list[Path]:
    """gemini-cli's ``resolveContextFilePaths``, and a symlink that leads out
    is refused too. A bad name is recorded as a ``_problems`` entry."""
    names = manifest.get("contextFileName")
    names = ["GEMINI.md"] if not names else [names] if not isinstance(names, list) else names
    out: list[Path] = []
    problems = manifest.setdefault("_problems", [])
    root = os.path.realpath(path)
    for item in names:
        if not isinstance(item, str) or not item.strip() or "\0" in item:
            problems.append(f"contextFileName {_shown(str(item))} is not a file name")
            continue
        if os.path.isabs(item) or ".." in item or ".." in _unquote(item):
            problems.append(f"contextFileName {_shown(item)} points outside the extension's directory")
            continue
        real = os.path.realpath(os.path.join(path, item))
        if not (real == root or real.startswith(root + os.sep)):
            problems.append(f"contextFileName {_shown(item)} leads outside the extension's directory "
                            f"(to {_shown(real)})")
            continue
        if os.path.isfile(real):
            out.append(Path(os.path.join(path, item)))
    return out


def _check(ext: Extension, problems: list[str]) -> None:
    """What the manifest asked for that is not used, in words."""
    for key in ("commands", "skills"):
        candidate = ext.path / key
        if os.path.lexists(candidate) and _inside(ext.path, key) is None:
            problems.append(f"extension {ext.name}: its {key}/ leads outside the extension's directory "
                            f"(to {_shown(os.path.realpath(candidate))}); not loaded")


def _inside(path: Path, name: str) -> Path | None:
    """``path/name`` when it is a directory that resolves inside ``path``."""
    candidate = path / name
    root = os.path.realpath(path)
    real = os.path.realpath(candidate)
    if not os.path.isdir(real) or not real.startswith(root + os.sep):
        return None
    return candidate


def _unquote(text: str) -> str:
    return unquote(text)


def _shown(text: str) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return repr(text if len(text) <= 80 else text[:77] + "…")


def _read_json_object(path: Path, *, missing_ok: bool = False) -> dict[str, Any] | None:
    try:
        data = read_bounded(path, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise ValueError(f"no {path.name} in {path.parent}") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_MANIFEST_BYTES // 1024} KiB")
    try:
        value = json_values.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path.name} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return value


def _read_env_file(path: Path) -> dict[str, str]:
    """gemini-cli's ``.env`` (dotenv) of an extension's settings, read as
    any ``.env`` is (:func:`gemini_split.userfiles.env_files.read_env_file`: bounded,
    never blocking on a FIFO); ``{}`` when there is none or it is unusable."""
    try:
        values, _ = read_env_file(path)
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in values.items() if _ENV_NAME.match(k)}


def format_env(values: Mapping[str, str]) -> str:
    """gemini-cli's ``formatEnvContent``."""
    lines = []
    for key, value in values.items():
        if not _ENV_NAME.match(key):
            raise ExtensionError(f"invalid environment variable name {_shown(key)}")
        if "\n" in value or "\r" in value:
            raise ExtensionError(f"the value of {key} cannot contain newlines")
        if " " in value:
            value = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
        lines.append(f"{key}={value}\n")
    return "".join(lines)


# --------------------------------------------------------------------------
# Enablement: gemini-cli's extension-enablement.json.


def _slashes(path: str) -> str:
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        path = "/" + path
    return path if path.endswith("/") else path + "/"


class _Override(msgspec.Struct):
    base: str
    disable: bool
    subdirs: bool

    @classmethod
    def from_rule(cls, rule: str) -> _Override:
        disable = rule.startswith("!")
        base = rule[1:] if disable else rule
        subdirs = base.endswith("*")
        return cls(base[:-1] if subdirs else base, disable, subdirs)

    def regex(self) -> re.Pattern[str]:
        glob = self.base + ("*" if self.subdirs else "")
        escaped = re.sub(r"[.+?^${}()|\[\]\\]", lambda m: "\\" + m.group(0), glob)
        return re.compile("^" + re.sub(r"(/?)\*", lambda m: f"({m.group(1)}.*)?", escaped) + "$")

    def output(self) -> str:
        return ("!" if self.disable else "") + self.base + ("*" if self.subdirs else "")


class Enablement:
    """``extension-enablement.json`` in the extensions folder."""

    def __init__(self, root: Path):
        self.path = root / ENABLEMENT_FILE
        self.problems: list[str] = []
        self._config: dict[str, Any] | None = None

    def read(self) -> dict[str, Any]:
        if self._config is None:
            try:
                raw = _read_json_object(self.path, missing_ok=True) or {}
            except ValueError as exc:
                self.problems.append(f"{self.path}: {exc}; every extension counts as enabled")
                raw = {}
            self._config = {k: v for k, v in raw.items() if isinstance(v, dict)
                            and isinstance(v.get("overrides"), list)
                            and all(isinstance(r, str) for r in v["overrides"])}
        return self._config

    def is_enabled(self, name: str, where: Path) -> bool:
        enabled = True
        target = _slashes(str(where))
        for rule in self.read().get(name, {}).get("overrides", []):
            override = _Override.from_rule(rule)
            if override.regex().match(target):
                enabled = not override.disable
        return enabled

    def set(self, name: str, enabled: bool, where: Path) -> None:
        config = self.read()
        new = _Override(_slashes(str(where)), not enabled, True)
        kept = []
        for rule in config.get(name, {}).get("overrides", []):
            old = _Override.from_rule(rule)
            if old.base == new.base:
                continue  # the same folder: replaced (gemini-cli's conflictsWith/isEqualTo)
            if new.regex().match(old.base):
                continue  # a rule for a folder below: the new one covers it
            kept.append(rule)
        kept.append(new.output())
        config[name] = {"overrides": kept}
        self._write(config)

    def remove(self, name: str) -> None:
        config = self.read()
        if name in config:
            del config[name]
            self._write(config)

    def _write(self, config: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_json(self.path, config)


def _write_json(path: Path, value: Any) -> None:
    """``value`` as indented JSON in ``path`` (:func:`_write_atomic`)."""
    import json  # lazy_imports.EDGES: only when a file is written, never on -p

    _write_atomic(path, json.dumps(value, indent=2))


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# --------------------------------------------------------------------------
# Installing.

Confirm = Callable[[str], bool]
AskSetting = Callable[[ExtensionSetting], str | None]


def is_git_source(source: str) -> bool:
    return source.startswith(_GIT_PREFIXES)


def clone(source: str, destination: Path, *, ref: str | None = None, timeout: float = GIT_TIMEOUT) -> None:
    """``git clone --depth 1`` (never asking for a password); raises
    ExtensionError saying why it failed, or that it took too long."""
    url = source
    if source.startswith("github:"):
        url = "https://github.com/" + source.removeprefix("github:")
    elif source.startswith("gitlab:"):
        url = "https://gitlab.com/" + source.removeprefix("gitlab:")
    if shutil.which("git") is None:
        raise ExtensionError("installing from a git URL needs git, which is not on PATH")
    command = ["git", "clone", "--depth", "1", "--quiet"]
    if ref:
        command += ["--branch", ref]
    command += ["--", url, str(destination)]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ExtensionError(f"git clone {source} did not finish within {timeout:.0f} s; is the network "
                             "reachable from here?") from None
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[-400:] or f"exit status {done.returncode}"
        raise ExtensionError(f"git clone {source} failed (this needs the network): {detail}")


def describe(ext_manifest: Mapping[str, Any], source: str, has_skills: list[str], commands: list[str]) -> str:
    """What an install asks consent for: gemini-cli's text, and what runs."""
    name = ext_manifest["name"]
    lines = [f'Installing extension "{name}" from {source}.',
             "**Extensions may introduce unexpected behavior. Ensure you have investigated the extension "
             "source and trust the author.**"]
    servers = ext_manifest.get("mcpServers") or {}
    if isinstance(servers, dict) and servers:
        lines.append("This extension will run the following MCP servers:")
        for key, config in servers.items():
            if not isinstance(config, dict):
                continue
            if config.get("command"):
                target = " ".join([str(config["command"]), *map(str, config.get("args") or [])])
                lines.append(f"  * {key} (local): {target}")
            else:
                lines.append(f"  * {key} (remote): {config.get('httpUrl') or config.get('url')}")
    for path in ext_manifest.get("_context") or []:
        lines.append(f"This extension will append info to your gemini.md context using {Path(path).name}")
    exclude = ext_manifest.get("excludeTools")
    if isinstance(exclude, list) and exclude:
        lines.append(f"This extension will exclude the following core tools: {', '.join(map(str, exclude))}")
    if commands:
        lines.append(f"This extension adds commands: {', '.join(commands)}")
    if has_skills:
        lines.append(f"This extension will install the following agent skills: {', '.join(has_skills)}")
    return "\n".join(lines)


def install(config_dir: Path, source: str, *, workspace: Path, home: Path, confirm: Confirm,
            ask_setting: AskSetting | None, ref: str | None = None, link: bool = False,
            skip_settings: bool = False, update_of: Extension | None = None) -> Extension:
    """Install (copy; ``link``: point at) the extension at ``source`` (a
    directory or a git URL) into ``config_dir/extensions``, in gemini-cli's
    format, after ``confirm(description)``; its settings are asked with
    ``ask_setting`` and written to its ``.env``. ``update_of``: replace that
    installed extension, keeping its settings and enablement. Raises
    ExtensionError; on failure nothing is left behind."""
    root = extensions_dir(config_dir)
    git = is_git_source(source)
    if link and git:
        raise ExtensionError("link needs a local directory, not a git URL")
    if not git and ref:
        raise ExtensionError("--ref is only for git URLs")
    with tempfile.TemporaryDirectory(prefix="gemini-extension") as tmp:
        if git:
            local = Path(tmp) / "clone"
            clone(source, local, ref=ref)
            metadata: dict[str, Any] = {"source": source, "type": "git"}
            if ref:
                metadata["ref"] = ref
        else:
            absolute = Path(source).expanduser()
            absolute = absolute if absolute.is_absolute() else workspace / absolute
            if not absolute.exists():
                raise ExtensionError(f"install source not found: {source}")
            local = Path(os.path.realpath(absolute))
            metadata = {"source": os.path.abspath(absolute), "type": "link" if link else "local"}
        try:
            raw = _read_json_object(local / MANIFEST)
            assert raw is not None
            manifest = parse_manifest(raw, local, workspace)
        except ValueError as exc:
            raise ExtensionError(f"{source}: {exc}") from None
        name = manifest["name"]
        existing = load_extensions(config_dir, workspace, home=home).extensions
        if update_of is None and name in existing:
            raise ExtensionError(f'extension "{name}" is already installed; uninstall it first, or update it')
        destination = root / name
        if update_of is None and os.path.lexists(destination):
            raise ExtensionError(f'cannot install extension "{name}": {destination} already exists; remove it')
        commands = _command_names(local)
        skills = sorted(p.parent.name for p in (local / "skills").glob("*/SKILL.md")) \
            if _inside(local, "skills") else []
        if not confirm(describe(manifest, source, skills, commands)):
            raise ExtensionError(f'installation of "{name}" cancelled; nothing was installed')
        previous_env = _read_env_file(update_of.install_dir / SETTINGS_FILE) if update_of else {}
        values = dict(previous_env)
        if manifest["_settings"] and not skip_settings and ask_setting is not None:
            for setting in manifest["_settings"]:
                if setting.env_var in values:
                    continue
                answer = ask_setting(setting)
                if answer:
                    values[setting.env_var] = answer
        env_text = format_env({s.env_var: values[s.env_var] for s in manifest["_settings"] if s.env_var in values})
        # Build it beside the destination, then swap: a failure leaves the old one.
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}.installing-"))
        try:
            if not link:
                shutil.copytree(local, staging, symlinks=True, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(".git") if git else None)
            _write_json(staging / INSTALL_METADATA, metadata)
            if env_text:
                _write_atomic(staging / SETTINGS_FILE, env_text, mode=0o600)
            if update_of is not None:
                shutil.rmtree(update_of.install_dir)
            os.replace(staging, destination)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    enablement = Enablement(root)
    if update_of is None:
        enablement.set(name, True, home)
    return read_extension(destination, workspace)


def missing_settings(ext: Extension) -> list[str]:
    return [s.name for s in ext.settings if s.env_var not in ext.setting_values]


def _command_names(path: Path) -> list[str]:
    commands = _inside(path, "commands")
    if commands is None:
        return []
    return sorted("/" + ":".join(p.relative_to(commands).with_suffix("").parts)
                  for p in commands.rglob("*.toml"))[:50]


def uninstall(config_dir: Path, name: str, *, workspace: Path, home: Path) -> Extension:
    """Remove the extension ``name`` (or installed from the source ``name``)."""
    found = load_extensions(config_dir, workspace, home=home)
    ext = find(found, name)
    shutil.rmtree(ext.install_dir) if not ext.install_dir.is_symlink() else ext.install_dir.unlink()
    Enablement(extensions_dir(config_dir)).remove(ext.name)
    return ext


def find(found: ExtensionSet, name: str) -> Extension:
    for ext in found.extensions.values():
        if ext.name.lower() == name.lower() or (ext.source and ext.source.lower() == name.lower()):
            return ext
    known = ", ".join(found.extensions) or "none is installed"
    raise ExtensionError(f"extension {_shown(name)} is not installed ({known})")


def set_enabled(config_dir: Path, name: str, enabled: bool, *, where: Path, workspace: Path, home: Path) -> Extension:
    found = load_extensions(config_dir, workspace, home=home)
    ext = find(found, name)
    Enablement(extensions_dir(config_dir)).set(ext.name, enabled, where)
    return ext


def update(config_dir: Path, name: str, *, workspace: Path, home: Path, confirm: Confirm,
           ask_setting: AskSetting | None) -> tuple[Extension, str]:
    """Reinstall ``name`` from its source; returns it and the old version.
    A linked extension is always current."""
    found = load_extensions(config_dir, workspace, home=home)
    ext = find(found, name)
    if ext.install_type == "link":
        return ext, ext.version
    if ext.install_type not in ("local", "git") or not ext.source:
        raise ExtensionError(f"extension {ext.name} has no install source ({INSTALL_METADATA}); reinstall it")
    ref = (ext.install_metadata or {}).get("ref")
    new = install(config_dir, ext.source, workspace=workspace, home=home, confirm=confirm,
                  ask_setting=ask_setting, ref=ref if isinstance(ref, str) else None, update_of=ext)
    return new, ext.version


def settings_shown(ext: Extension) -> Iterable[str]:
    """``NAME: value`` per setting, sensitive values as ``***``."""
    for s in ext.settings:
        value = ext.setting_values.get(s.env_var)
        shown = "[not set]" if value is None else "***" if s.sensitive else value
        yield f"{s.name} ({s.env_var}): {shown}"


# --------------------------------------------------------------------------
# extensions new / validate / config.

_SEMVER = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                     r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$")


def create(path: Path, template: str | None) -> None:
    """gemini-cli's ``extensions new``: ``path`` created (it must not exist)
    holding ``template``'s files, or, without one, a manifest named after
    the directory. Raises ExtensionError."""
    if os.path.lexists(path):
        raise ExtensionError(f"Path already exists: {path}")
    files = TEMPLATES[template] if template else {
        MANIFEST: _json_text({"name": path.name, "version": "1.0.0"})}
    path.mkdir(parents=True)
    for relative, text in files.items():
        target = path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        if target.suffix in (".sh", ".py") and text.startswith("#!"):
            target.chmod(0o755)


def validate(path: Path, workspace: Path) -> tuple[list[str], list[str]]:
    """gemini-cli's ``extensions validate``: ``(warnings, errors)`` for the
    extension in ``path``. Raises ExtensionError when its manifest cannot
    be loaded at all (gemini-cli's words)."""
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise ExtensionError(f"Configuration file not found at {manifest_path}")
    try:
        raw = _read_json_object(manifest_path)
        assert raw is not None
        for key in ("name", "version"):
            if not raw.get(key):
                raise ValueError(f'Invalid configuration in {manifest_path}: missing "{key}"')
        if not isinstance(raw["name"], str) or not _NAME.match(raw["name"]):
            shown = "".join(ch if ch.isprintable() else "?" for ch in str(raw["name"]))
            raise ValueError(f'Invalid extension name: "{shown}". Only letters (a-z, A-Z), numbers (0-9), and '
                             "dashes (-) are allowed.")
    except ValueError as exc:
        raise ExtensionError(f"Failed to load extension config from {manifest_path}: {exc}") from None
    errors: list[str] = []
    names = raw.get("contextFileName")
    missing: list[str] = []
    for name in ([] if not names else names if isinstance(names, list) else [names]):
        problem = _context_name_problem(name, path)
        if problem:
            errors.append(f'Invalid context file path: "{name}". {problem}')
        elif not (path / name).exists():
            missing.append(name)
    if missing:
        errors.append("The following context files referenced in gemini-extension.json are missing: "
                      + ",".join(missing))
    version = str(raw["version"])
    warnings = [] if _SEMVER.match(version) else [
        f"Warning: Version '{version}' does not appear to be standard semver (e.g., 1.0.0)."]
    return warnings, errors


def _context_name_problem(name: Any, root: Path) -> str | None:
    """gemini-cli's ``validateContextFilePath``: why ``name`` cannot be a
    context file of the extension in ``root``, or None."""
    if not isinstance(name, str) or not name.strip():
        return "expected a non-empty string."
    if "\0" in name:
        return "null bytes are not allowed."
    if os.path.isabs(name):
        return "Absolute paths are not allowed."
    if ".." in name or ".." in _unquote(name):
        return 'Relative parent directory references ("..") are not allowed.'
    resolved = os.path.normpath(os.path.join(os.path.abspath(root), name))
    if not resolved.startswith(os.path.abspath(root) + os.sep):
        return f'escapes the extension directory boundary ("{os.path.abspath(root)}").'
    return None


def _json_text(value: Any) -> str:
    import json  # lazy_imports.EDGES: only when a file is written, never on -p

    return json.dumps(value, indent=2)


def settings_file(ext: Extension, scope: str, workspace: Path) -> Path:
    """Where ``extensions config`` keeps ``ext``'s values for ``scope``: the
    extension's ``.env`` (``user``), or the workspace's ``.env``
    (``workspace``, as gemini-cli)."""
    return ext.install_dir / SETTINGS_FILE if scope == "user" else workspace / SETTINGS_FILE


def scoped_values(ext: Extension, scope: str, workspace: Path) -> dict[str, str]:
    """The values ``scope`` holds for ``ext``'s settings."""
    values = _read_env_file(settings_file(ext, scope, workspace))
    return {s.env_var: values[s.env_var] for s in ext.settings if s.env_var in values}


def find_setting(ext: Extension, key: str) -> ExtensionSetting | None:
    """``ext``'s setting named ``key`` (its name or its variable)."""
    return next((s for s in ext.settings if key in (s.name, s.env_var)), None)


def set_value(ext: Extension, setting: ExtensionSetting, value: str, *, scope: str, workspace: Path) -> Path:
    """Keep ``value`` for ``setting`` of ``ext`` in ``scope``'s file ("":
    remove it), every other line of that file kept. A sensitive value is
    kept only in the user scope (the extension's own ``.env``, mode 0600):
    a workspace's ``.env`` may be shared. Returns the file; raises
    ExtensionError."""
    if setting.sensitive and scope != "user":
        raise ExtensionError(f'"{setting.name}" is sensitive: it is kept only in the user scope (the '
                             "extension's .env, mode 0600), never in a workspace's .env")
    format_env({setting.env_var: value})  # refuses a newline
    path = settings_file(ext, scope, workspace)
    try:
        text = read_bounded(path, MAX_MANIFEST_BYTES).decode("utf-8") if os.path.lexists(path) else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ExtensionError(f"cannot read {path}: {exc}") from None
    line = format_env({setting.env_var: value}) if value else ""
    kept, replaced = [], False
    for old in text.splitlines(keepends=True):
        if re.match(rf"\s*(export\s+)?{re.escape(setting.env_var)}\s*=", old):
            kept.append("" if replaced else line)
            replaced = True
        else:
            kept.append(old if old.endswith("\n") else old + "\n")
    if not replaced:
        kept.append(line)
    mode = 0o600 if scope == "user" else (os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, "".join(kept), mode=mode)
    return path
