"""gemini-cli policy files (TOML), found and read as gemini-cli does.

Where they come from, lowest tier first (a higher tier's rule always beats
a lower one's, whatever the priorities inside):

============  ==========================================================
tier          files
============  ==========================================================
workspace 3   ``.gemini/policies/*.toml`` in the current directory, only
              in a trusted folder (see :func:`gemini_split.userfiles.settings.is_folder_trusted`)
              and never when that directory is the home directory
user 4        ``~/.gemini/policies/*.toml`` — gemini-split's config
              directory, so ``$GEMINI_SPLIT_HOME/policies`` when that is set;
              ``--policy FILE|DIR`` (repeated or comma-separated) *replaces* it
admin 5       ``/etc/gemini-cli/policies/*.toml`` (the directory of
              ``$GEMINI_CLI_SYSTEM_SETTINGS_PATH`` when that is set), plus
              ``--admin-policy FILE|DIR`` — ignored, with a warning, when
              the system directory already holds policies (as gemini-cli)
============  ==========================================================

A file is read whole (at most :data:`MAX_POLICY_BYTES`), parsed with the
standard library's ``tomllib`` and checked against a msgspec schema of
gemini-cli's rule fields. Any problem is a :class:`PolicyError` naming the
file, the rule (``rule #2``, counted from 1 as gemini-cli does) and the
field: a policy that does not say what its author meant must not run.
Unlike gemini-cli, an unknown field is an error too (a misspelt
``comandPrefix`` would silently turn a narrow deny into a deny of the
whole tool or into nothing), and a ``--policy`` path that does not exist.

Regexes (``argsPattern``, ``commandRegex``) are RE2 (linear time, see
:mod:`gemini_split.regex`): no backreferences or lookaround.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from gemini_split.errors import ConfigurationError
from gemini_split.files import read_toml
from gemini_split.regex import compile_linear

from .builtin import allowed_tools_rules, excluded_tools_rules
from .engine import Policy
from .rules import ADMIN_TIER, MODES, SHELL_ALIASES, SHELL_TOOL, USER_TIER, WORKSPACE_TIER, Decision, Rule, normalize_mode

POLICIES_DIR_NAME = "policies"
DEFAULT_SYSTEM_POLICIES_DIR = Path("/etc/gemini-cli/policies")
MAX_POLICY_BYTES = 1024 * 1024
#: A sub-agent's name, as its definition must give it (``userfiles/agents.py``).
_SUBAGENT_NAME = re.compile(r"[a-z0-9_-]{1,64}")
_TIER_NAMES = {WORKSPACE_TIER: "workspace", USER_TIER: "user", ADMIN_TIER: "admin"}


class PolicyError(ConfigurationError):
    """A policy file is unusable; the message names the file, the rule and
    the field. Exit status 2, as any configuration error."""


class _RuleToml(msgspec.Struct, forbid_unknown_fields=True):
    """One ``[[rule]]`` as gemini-cli's ``PolicyRuleSchema`` has it."""

    toolName: str | list[str]
    decision: Literal["allow", "deny", "ask_user"]
    priority: int
    commandPrefix: str | list[str] | None = None
    commandRegex: str | None = None
    argsPattern: str | None = None
    modes: list[str] | None = None
    interactive: bool | None = None
    allowRedirection: bool | None = None
    allow_redirection: bool | None = None
    denyMessage: str | None = None
    deny_message: str | None = None
    mcpName: str | None = None
    subagent: str | None = None
    toolAnnotations: dict[str, Any] | None = None
    #: gemini-split's own: an allowed shell command keeps the sandbox's network.
    allowNetwork: bool | None = None
    name: str | None = None
    #: gemini-cli's per-rule safety checker: accepted, not run (see README).
    safety_checker: dict[str, Any] | None = None


class _FileToml(msgspec.Struct, forbid_unknown_fields=True):
    rule: list[Any] = []
    #: gemini-cli's ``[[safety_checker]]`` tables: accepted, not run.
    safety_checker: list[Any] = []


def load_policy(
    *,
    config_dir: Path,
    cwd: Path | None = None,
    trusted: bool = False,
    policy_paths: Sequence[str | Path] = (),
    admin_policy_paths: Sequence[str | Path] = (),
    environ: Mapping[str, str] | None = None,
    allowed_tools: Iterable[str] = (),
    allowed_tools_source: str = "--allowed-tools",
    excluded_tools: Iterable[str] = (),
) -> Policy:
    """Every policy rule for a run: the approval modes' own, the policy
    files' (table above), ``allowed_tools`` as allow rules and
    ``excluded_tools`` as deny rules.

    ``cwd`` is the project directory (None: no workspace policies, as for
    ``serve``); ``trusted`` whether it is a trusted folder. Raises
    :class:`PolicyError`; ``Policy.warnings`` holds lines for the user."""
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    system_dir = _system_policies_dir(environ)
    sources: list[tuple[int, Path, bool]] = []  # tier, path, given explicitly
    if cwd is not None and trusted and not _same(cwd, Path(environ.get("HOME") or Path.home())):
        workspace = cwd / ".gemini" / POLICIES_DIR_NAME
        if not _same(workspace, config_dir / POLICIES_DIR_NAME):
            sources.append((WORKSPACE_TIER, workspace, False))
    if policy_paths:
        sources += [(USER_TIER, _expand(p), True) for p in split_paths(policy_paths)]
    else:
        sources.append((USER_TIER, config_dir / POLICIES_DIR_NAME, False))
    sources.append((ADMIN_TIER, system_dir, False))
    admin = split_paths(admin_policy_paths)
    if admin and _policy_files(system_dir, explicit=False):
        warnings.append(f"gemini-split: ignoring --admin-policy: system policies are already defined in {system_dir}")
        admin = []
    sources += [(ADMIN_TIER, _expand(p), True) for p in admin]

    rules: list[Rule] = []
    for tier, path, explicit in sources:
        for file in _policy_files(path, explicit=explicit):
            rules += read_policy_file(file, tier)
    try:
        rules += allowed_tools_rules(allowed_tools, allowed_tools_source)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    rules += excluded_tools_rules(excluded_tools)
    policy = Policy(warnings=warnings)
    policy.add(*rules)
    return policy


def split_paths(values: Iterable[str | Path]) -> list[str]:
    """``--policy`` values, repeated and/or comma-separated."""
    return [p.strip() for v in values for p in str(v).split(",") if p.strip()]


def read_policy_file(path: Path, tier: int) -> list[Rule]:
    """The rules of one policy file at ``tier``. Raises :class:`PolicyError`."""
    tier_name = _TIER_NAMES.get(tier, "default")
    try:
        raw = read_toml(path, MAX_POLICY_BYTES)
    except ValueError as exc:
        raise PolicyError(f"policy file {path}: {exc}") from None
    try:
        parsed = msgspec.convert(raw, _FileToml)
    except msgspec.ValidationError as exc:
        raise PolicyError(f"policy file {path}: {_field_error(exc, _FileToml)}") from None
    rules: list[Rule] = []
    for index, item in enumerate(parsed.rule):
        where = f"policy file {path}: rule #{index + 1}"
        try:
            entry = msgspec.convert(item, _RuleToml)
        except msgspec.ValidationError as exc:
            raise PolicyError(f"{where}: {_field_error(exc, _RuleToml)}") from None
        rules.append(_check(entry, f"{tier_name} policy {path}, rule #{index + 1}", where, tier))
    return rules


def _check(entry: _RuleToml, source: str, where: str, tier: int) -> Rule:
    names = [entry.toolName] if isinstance(entry.toolName, str) else list(entry.toolName)
    if not names:
        raise PolicyError(f"{where}: field toolName: give a tool name, a list of them, or \"*\" for every tool")
    if any(not n.strip() for n in names):
        raise PolicyError(f"{where}: field toolName: an empty tool name; use \"*\" to match every tool")
    if not 0 <= entry.priority <= 999:
        raise PolicyError(f"{where}: field priority: must be 0 to 999 (got {entry.priority}); higher would "
                          "jump to the next tier")
    shellish = entry.commandPrefix is not None or entry.commandRegex is not None
    if shellish and (len(names) != 1 or names[0] not in SHELL_ALIASES or not isinstance(entry.toolName, str)):
        field = "commandPrefix" if entry.commandPrefix is not None else "commandRegex"
        raise PolicyError(f"{where}: field {field}: only for toolName = \"run_shell_command\" (not a list)")
    if shellish and entry.argsPattern is not None:
        raise PolicyError(f"{where}: field argsPattern: not together with commandPrefix or commandRegex")
    if entry.commandPrefix is not None and entry.commandRegex is not None:
        raise PolicyError(f"{where}: field commandRegex: not together with commandPrefix")
    prefixes = None
    if entry.commandPrefix is not None:
        from gemini_split.shell_split import ShellParseError, parse_prefix

        texts = [entry.commandPrefix] if isinstance(entry.commandPrefix, str) else entry.commandPrefix
        if not texts:
            raise PolicyError(f"{where}: field commandPrefix: an empty list")
        prefixes = []
        for text in texts:
            try:
                prefixes.append(parse_prefix(text))
            except ShellParseError as exc:
                raise PolicyError(f"{where}: field commandPrefix: {text!r}: {exc}") from None
        prefixes = tuple(prefixes)
    compiled: dict[str, Any] = {}
    for field in ("commandRegex", "argsPattern"):
        text = getattr(entry, field)
        if text is None:
            continue
        try:
            compiled[field] = compile_linear(text)
        except ValueError as exc:
            raise PolicyError(f"{where}: field {field}: not a usable regular expression ({exc}); "
                              "RE2 syntax: no backreferences or lookaround") from None
    modes = None
    if entry.modes is not None:
        try:
            modes = frozenset(normalize_mode(m) for m in entry.modes) or None  # []: every mode
        except ValueError as exc:
            raise PolicyError(f"{where}: field modes: {exc}") from None
    if entry.allowNetwork and (entry.decision != "allow" or len(names) != 1 or names[0] not in SHELL_ALIASES):
        raise PolicyError(f"{where}: field allowNetwork: only on a decision = \"allow\" rule for "
                          "toolName = \"run_shell_command\" (the commands it allows keep the sandbox's network)")
    if entry.subagent is not None and not _SUBAGENT_NAME.fullmatch(entry.subagent):
        raise PolicyError(f"{where}: field subagent: {_shown(entry.subagent)!r} is no sub-agent name (a sub-agent "
                          "is named by its definition's name: lowercase letters, digits, '-' and '_', at most 64)")
    if entry.mcpName is not None and not entry.mcpName.strip():
        raise PolicyError(f"{where}: field mcpName: empty; leave it out or name the MCP server")
    return Rule(
        tuple(names), Decision(entry.decision), tier + entry.priority / 1000, source,
        command_prefixes=prefixes,
        command_regex=compiled.get("commandRegex"), command_regex_text=entry.commandRegex,
        args_pattern=compiled.get("argsPattern"), args_pattern_text=entry.argsPattern,
        modes=modes, interactive=entry.interactive,
        allow_redirection=bool(entry.allowRedirection or entry.allow_redirection),
        deny_message=entry.denyMessage or entry.deny_message,
        mcp_name=entry.mcpName, subagent=entry.subagent, annotations=entry.toolAnnotations,
        allow_network=bool(entry.allowNetwork),
    )


def _field_error(exc: msgspec.ValidationError, schema: type[msgspec.Struct]) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.priority`" as
    "field priority: expected int, got str"."""
    message, _, at = str(exc).partition(" - at `$")
    message = message.replace("`", "")
    field = at.rstrip("`").lstrip(".")
    if message.startswith("Object contains unknown field "):
        import difflib

        name = message.removeprefix("Object contains unknown field ")
        known = schema.__struct_fields__
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}?" if close else "known fields: " + ", ".join(known)
        return f"field {_shown(name)}: unknown ({hint})"
    if message.startswith("Object missing required field "):
        name = message.removeprefix("Object missing required field ")
        return f"field {name}: missing (every rule needs toolName, decision and priority)"
    return f"field {_shown(field) or '?'}: {message[:1].lower()}{message[1:]}"


def _shown(text: str) -> str:
    """``text`` from a file, with control characters escaped: it reaches a terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _policy_files(path: Path, *, explicit: bool) -> list[Path]:
    """The ``.toml`` files of a directory (sorted), or the file itself.
    A missing default directory is no files; a missing ``--policy`` path
    is an error."""
    try:
        if path.is_dir():
            return sorted(p for p in path.iterdir() if p.suffix == ".toml" and p.is_file())
    except OSError as exc:
        raise PolicyError(f"policy directory {path}: cannot read: {exc.strerror or exc}") from None
    if path.is_file() or (explicit and path.exists()):  # a given FIFO is refused when read, by name
        if explicit and path.suffix != ".toml":
            raise PolicyError(f"policy file {path}: policy files end in .toml")
        return [path] if path.suffix == ".toml" else []
    if explicit:
        raise PolicyError(f"policy path {path}: no such file or directory")
    return []


def _system_policies_dir(environ: Mapping[str, str]) -> Path:
    settings = environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
    return Path(settings).parent / POLICIES_DIR_NAME if settings else DEFAULT_SYSTEM_POLICIES_DIR


def _expand(path: str | Path) -> Path:
    return Path(os.path.abspath(Path(path).expanduser()))


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


__all__ = ["MODES", "PolicyError", "load_policy", "read_policy_file", "split_paths"]
