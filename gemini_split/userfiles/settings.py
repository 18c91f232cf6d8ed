"""gemini-cli's ``settings.json`` files, read the way gemini-cli reads them.

Four files, merged in gemini-cli's order (later wins for single values):

1. system defaults ``/etc/gemini-cli/system-defaults.json``
   (``$GEMINI_CLI_SYSTEM_DEFAULTS_PATH``),
2. user ``~/.gemini/settings.json`` — gemini-split's config directory, so
   ``$GEMINI_SPLIT_HOME/settings.json`` when that is set (the directory that
   also holds ``servers.json``; gemini-cli's ``$GEMINI_CLI_HOME`` is not read),
3. project ``.gemini/settings.json`` in the current directory — only when
   the folder is trusted (see :func:`is_folder_trusted`), and never when the
   current directory is the home directory,
4. system ``/etc/gemini-cli/settings.json`` (``$GEMINI_CLI_SYSTEM_SETTINGS_PATH``),
   which overrides everything.

Files may hold ``//`` and ``/* */`` comments. ``$VAR``, ``${VAR}`` and
``${VAR:-default}`` in any string value are replaced from the environment
(an unset variable without a default is left as written), before the file is
checked. Objects merge key by key; lists replace, except ``tools.exclude``
(union), ``context.includeDirectories`` (concatenated) and ``mcpServers``
(merged server by server), as in gemini-cli.

Unknown keys are ignored. A file that is not JSON, not an object, or has a
known key with a wrong type raises :class:`SettingsError` naming the file and
the key (exit status 52, gemini-cli's for a configuration error).

The schema is a tree of msgspec Structs whose field names are gemini-cli's
camelCase keys; gemini-split's own keys live under ``"geminiSplit"``.
"""

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

import msgspec

from gemini_split import json_values
from gemini_split.environment import Environment
from gemini_split.errors import SettingsError
from gemini_split.files import read_bounded

SETTINGS_FILE_NAME = "settings.json"
PROJECT_DIR_NAME = ".gemini"
TRUSTED_FOLDERS_FILE_NAME = "trustedFolders.json"
DEFAULT_SYSTEM_SETTINGS_PATH = Path("/etc/gemini-cli/settings.json")
#: A settings file larger than this is refused rather than read whole.
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


# --------------------------------------------------------------------------
# The schema: gemini-cli's keys that mean the same here.


class _Section(msgspec.Struct, rename="camel", omit_defaults=True):
    pass


class ModelSettings(_Section):
    #: ``model.name``: the Gemini model (after ``--model`` and ``$GEMINI_MODEL``).
    name: str | None = None
    #: ``model.maxSessionTurns``: model turns allowed per prompt; -1 = no limit
    #: beyond gemini-split's own (100).
    max_session_turns: int = -1
    #: ``model.compressionThreshold``: the share of the model's context
    #: window after which the server compresses the history (gemini-cli's
    #: default 0.5 when unset).
    compression_threshold: Annotated[float, msgspec.Meta(gt=0, le=1)] | None = None


class PlanSettings(_Section):
    #: ``general.plan.enabled``: plan mode's tools and ``/plan``.
    enabled: bool = True
    #: ``general.plan.directory``: where plans are kept, inside the project
    #: (unset: ``~/.gemini/tmp/<project>/<session-id>/plans``).
    directory: str | None = None


class CheckpointingSettings(_Section):
    #: ``general.checkpointing.enabled``: snapshot the files before each
    #: edit tool runs (``/restore``; :mod:`gemini_split.tools.checkpoints`).
    enabled: bool = False


class GeneralSettings(_Section):
    #: ``general.defaultApprovalMode``; gemini-cli ignores ``yolo`` here
    #: (yolo only from the command line), and so do we.
    default_approval_mode: Literal["default", "auto_edit", "plan", "yolo"] | None = None
    plan: PlanSettings = msgspec.field(default_factory=PlanSettings)
    checkpointing: CheckpointingSettings = msgspec.field(default_factory=CheckpointingSettings)
    #: ``general.vimMode``: the REPL's line editor in vi mode (``/vim`` toggles it).
    vim_mode: bool = False
    #: ``general.preferredEditor``: what Ctrl+G (or Ctrl+X) opens the prompt in
    #: (gemini-cli's names; unset: ``$VISUAL``, ``$EDITOR``).
    preferred_editor: str | None = None
    #: ``general.proxy``: the HTTP(S) proxy remote (Agent2Agent) agents are
    #: reached through (unset: ``HTTPS_PROXY`` / ``HTTP_PROXY``).
    proxy: str | None = None


class OutputSettings(_Section):
    #: ``output.format``: one-shot output when ``-o`` is not given.
    format: Literal["text", "json", "stream-json"] | None = None


class AccessibilitySettings(_Section):
    screen_reader: bool = False


class UISettings(_Section):
    theme: str | None = None
    hide_banner: bool = False
    hide_tips: bool = False
    show_line_numbers: bool = True
    accessibility: AccessibilitySettings = msgspec.field(default_factory=AccessibilitySettings)


class FileFilteringSettings(_Section):
    respect_git_ignore: bool = True
    respect_gemini_ignore: bool = True
    custom_ignore_file_paths: list[str] = msgspec.field(default_factory=list)


class ContextSettings(_Section):
    #: ``context.fileName``: the context file name(s); default ``GEMINI.md``.
    file_name: str | list[str] | None = None
    include_directories: list[str] = msgspec.field(default_factory=list)
    load_memory_from_include_directories: bool = False
    discovery_max_dirs: int = 200
    memory_boundary_markers: list[str] = msgspec.field(default_factory=lambda: [".git"])
    include_directory_tree: bool = True
    file_filtering: FileFilteringSettings = msgspec.field(default_factory=FileFilteringSettings)


class ToolsSettings(_Section):
    #: ``tools.core``: only these built-in tools exist (None: all of them).
    core: list[str] | None = None
    #: ``tools.allowed``: run without asking (as ``--allowed-tools``).
    allowed: list[str] | None = None
    #: ``tools.exclude``: tools removed from what the model is offered.
    exclude: list[str] | None = None
    #: ``tools.sandbox``: true/false or a mode (auto, bwrap, none; gemini-cli's
    #: container names mean auto). ``-s`` and ``$GEMINI_SANDBOX`` win.
    sandbox: bool | str | None = None


class FolderTrustSettings(_Section):
    enabled: bool = True


class AuthSettings(_Section):
    #: ``security.auth.selectedType``: gemini-cli's auth choice
    #: ("gemini-api-key", "vertex-ai", "compute-default-credentials",
    #: "oauth-personal"); see gemini_split/server/model/credentials.py.
    selected_type: str | None = None


class SecuritySettings(_Section):
    folder_trust: FolderTrustSettings = msgspec.field(default_factory=FolderTrustSettings)
    auth: AuthSettings = msgspec.field(default_factory=AuthSettings)
    disable_yolo_mode: bool = False


class MCPOAuthSettings(_Section):
    """An ``mcpServers`` entry's ``oauth``, as gemini-cli's ``MCPOAuthConfig``
    (see :mod:`gemini_split.tools.mcp.oauth` for what is used)."""

    enabled: bool | None = None
    client_id: str | None = None
    client_secret: str | None = None
    authorization_url: str | None = None
    issuer: str | None = None
    token_url: str | None = None
    scopes: list[str] | None = None
    redirect_uri: str | None = None
    token_param_name: str | None = None
    audiences: list[str] | None = None


class MCPServerSettings(_Section):
    """One ``mcpServers`` entry, as gemini-cli's ``MCPServerConfig``."""

    command: str | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    http_url: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    tcp: str | None = None
    type: Literal["sse", "http"] | None = None
    timeout: float | None = None
    trust: bool = False
    description: str | None = None
    include_tools: list[str] | None = None
    exclude_tools: list[str] | None = None
    #: ``oauth``: OAuth 2.1 for a remote server (``/mcp auth NAME``).
    oauth: MCPOAuthSettings | None = None
    #: ``authProviderType``: ``dynamic_discovery`` (the default) is the only one here.
    auth_provider_type: str | None = None


class MCPSettings(_Section):
    """``mcp``: which configured servers may start."""

    #: ``mcp.allowed``: only these server names (``--allowed-mcp-server-names`` wins).
    allowed: list[str] | None = None
    #: ``mcp.excluded``: never these server names.
    excluded: list[str] = msgspec.field(default_factory=list)


class ExperimentalSettings(_Section):
    #: ``experimental.enableAgents``: false offers no sub-agents at all
    #: (built-in, local or remote), as in gemini-cli.
    enable_agents: bool = True
    #: ``experimental.worktrees``: ``-w/--worktree`` may be used (gemini-cli's gate).
    worktrees: bool = False


class SkillsSettings(_Section):
    #: ``skills.enabled``: false offers no Agent Skills at all.
    enabled: bool = True
    #: ``skills.disabled``: skills discovered but not offered (``/skills disable``).
    disabled: list[str] = msgspec.field(default_factory=list)


class AgentModelConfig(_Section):
    #: ``agents.overrides.<name>.modelConfig.model``: the sub-agent's model.
    model: str | None = None


class AgentRunConfig(_Section):
    #: ``…runConfig.maxTurns`` / ``…runConfig.maxTimeMinutes``: its limits.
    max_turns: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    max_time_minutes: Annotated[float, msgspec.Meta(gt=0, le=1440)] | None = None


class AgentOverride(_Section):
    """``agents.overrides.<name>`` (gemini-cli's shape): ``enabled`` (None:
    as defined), ``modelConfig.model``, ``runConfig.maxTurns`` and
    ``maxTimeMinutes``."""

    enabled: bool | None = None
    model_config: AgentModelConfig = msgspec.field(default_factory=AgentModelConfig)
    run_config: AgentRunConfig = msgspec.field(default_factory=AgentRunConfig)


class AgentsSettings(_Section):
    #: ``agents.overrides``: per sub-agent (``/agents enable|disable`` edit it).
    overrides: dict[str, AgentOverride] = msgspec.field(default_factory=dict)


class GeminiSplitSettings(_Section):
    """gemini-split's own keys, under ``"geminiSplit"``."""

    #: Default for ``--server``: an address or a profile name.
    server: str | None = None


class IdeSettings(_Section):
    #: ``ide.enabled``: connect to the IDE companion (gemini-cli's editor
    #: extension) at start; ``/ide enable|disable`` set it.
    enabled: bool = False


class BugCommandSettings(_Section):
    #: ``advanced.bugCommand.urlTemplate``: where ``/bug`` sends a report
    #: (``{title}``, ``{info}`` and ``{problem}`` filled in).
    url_template: str | None = None


class AdvancedSettings(_Section):
    #: ``advanced.ignoreLocalEnv``: load no project ``.env`` (the home
    #: directory's still applies); see :mod:`gemini_split.userfiles.env_files`.
    ignore_local_env: bool = False
    bug_command: BugCommandSettings | None = None


class TelemetrySettings(_Section):
    """``telemetry``: gemini-cli's OpenTelemetry settings, as written (checked
    and resolved with the ``GEMINI_TELEMETRY_*`` variables by
    :func:`gemini_split.telemetry.resolve_config`)."""

    enabled: bool | None = None
    #: ``"local"`` or ``"gcp"``.
    target: str | None = None
    otlp_endpoint: str | None = None
    #: ``"grpc"`` or ``"http"``.
    otlp_protocol: str | None = None
    outfile: str | None = None
    log_prompts: bool | None = None
    use_collector: bool | None = None
    #: Detailed trace attributes: gemini-split exports no traces; accepted, ignored.
    traces: bool | None = None


class Settings(_Section):
    model: ModelSettings = msgspec.field(default_factory=ModelSettings)
    general: GeneralSettings = msgspec.field(default_factory=GeneralSettings)
    output: OutputSettings = msgspec.field(default_factory=OutputSettings)
    ui: UISettings = msgspec.field(default_factory=UISettings)
    context: ContextSettings = msgspec.field(default_factory=ContextSettings)
    tools: ToolsSettings = msgspec.field(default_factory=ToolsSettings)
    security: SecuritySettings = msgspec.field(default_factory=SecuritySettings)
    mcp_servers: dict[str, MCPServerSettings] = msgspec.field(default_factory=dict)
    mcp: MCPSettings = msgspec.field(default_factory=MCPSettings)
    gemini_split: GeminiSplitSettings = msgspec.field(default_factory=GeminiSplitSettings)
    skills: SkillsSettings = msgspec.field(default_factory=SkillsSettings)
    agents: AgentsSettings = msgspec.field(default_factory=AgentsSettings)
    experimental: ExperimentalSettings = msgspec.field(default_factory=ExperimentalSettings)
    advanced: AdvancedSettings = msgspec.field(default_factory=AdvancedSettings)
    ide: IdeSettings = msgspec.field(default_factory=IdeSettings)
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)
    #: ``modelConfigs``: kept as written; its aliases that name a model are
    #: model aliases (:mod:`gemini_split.model_aliases`).
    model_configs: dict[str, Any] | None = None
    #: ``policyPaths`` / ``adminPolicyPaths``: policy files or directories,
    #: as ``--policy`` / ``--admin-policy`` give them (the flag, when given,
    #: replaces the setting, as in gemini-cli).
    policy_paths: list[str] = msgspec.field(default_factory=list)
    admin_policy_paths: list[str] = msgspec.field(default_factory=list)

    def context_file_names(self) -> list[str]:
        """``context.fileName`` as a list (default ``["GEMINI.md"]``)."""
        names = self.context.file_name
        if names is None:
            return ["GEMINI.md"]
        names = [names] if isinstance(names, str) else [n for n in names if n.strip()]
        return names or ["GEMINI.md"]


# --------------------------------------------------------------------------
# Loading.


class SettingsFile(msgspec.Struct, frozen=True):
    scope: Literal["system-defaults", "user", "project", "system"]
    path: Path
    #: The file's object after ``$VAR`` expansion (empty when absent).
    raw: dict[str, Any]
    exists: bool
    #: Lines for the user about parts of this file left out (a malformed
    #: ``mcpServers`` entry: the rest of the settings still apply).
    warnings: tuple[str, ...] = ()


class LoadedSettings(msgspec.Struct):
    """The merged settings and where they came from."""

    merged: Settings
    files: list[SettingsFile]
    #: Whether the project's ``.gemini/settings.json`` was allowed to apply.
    trusted: bool
    #: Lines for the user (e.g. a project file ignored in an untrusted folder).
    warnings: list[str] = msgspec.field(default_factory=list)

    def set_by(self, *keys: str) -> SettingsFile | None:
        """The file whose value of the setting at ``keys`` (gemini-cli's
        camelCase path, e.g. ``"security", "disableYoloMode"``) the merged
        settings hold: the last applied file (system over project over user
        over system defaults) that has it; None: nobody set it."""
        found = None
        for file in self.files:
            if file.scope == "project" and not self.trusted:
                continue
            node: Any = file.raw
            for key in keys:
                node = node.get(key, _ABSENT) if isinstance(node, dict) else _ABSENT
            if node is not _ABSENT:
                found = file
        return found


_ABSENT = object()


def yolo_disabled_by(loaded: LoadedSettings | None) -> str | None:
    """Where yolo is disabled (``security.disableYoloMode``: gemini-cli's
    "Disable YOLO mode, even if enabled by a flag"), as words for a
    message naming the setting and its file; None: yolo is allowed."""
    if loaded is None or not loaded.merged.security.disable_yolo_mode:
        return None
    file = loaded.set_by("security", "disableYoloMode")
    return "security.disableYoloMode" + (f" in the {file.scope} settings {file.path}" if file else "")


#: gemini-cli's words for a mode other than default or plan asked for in an
#: untrusted folder.
UNTRUSTED_MODE_REFUSAL = "Cannot enable privileged approval modes in an untrusted folder."


def approval_mode_refusal(loaded: LoadedSettings | None, mode: str) -> str | None:
    """Why switching to approval ``mode`` (a value of ``ApprovalMode``)
    now is refused, in gemini-cli's words, or None. As gemini-cli's
    ``setApprovalMode``: in an untrusted folder only ``default`` and
    ``plan``; ``yolo`` also not when ``security.disableYoloMode`` is set.
    Every face asks this for a change during a session (Shift+Tab,
    ``/approval-mode``, Ctrl+Y, an ACP client's ``session/set_mode``)."""
    if mode == "yolo":
        disabled = yolo_disabled_by(loaded)
        if disabled:
            return f"You cannot enter YOLO mode since it is disabled in your settings ({disabled})."
    if mode in ("yolo", "auto_edit") and loaded is not None and not loaded.trusted:
        return UNTRUSTED_MODE_REFUSAL
    return None


def load_settings(env: Environment, cwd: Path | None = None, *, trust: bool | None = None) -> LoadedSettings:
    """Read and merge every settings file for a run in ``cwd`` (default
    ``env.cwd``). ``trust=True`` trusts the folder for this run
    (``--skip-trust``); None decides by :func:`is_folder_trusted`.

    Raises :class:`SettingsError` (file and key in its text) for a file that
    is unreadable, not JSON, not an object, or has a known key of the wrong
    type."""
    cwd = cwd or env.cwd
    e = env.environ
    system_path = Path(e.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or DEFAULT_SYSTEM_SETTINGS_PATH)
    defaults_path = Path(e.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH") or system_path.parent / "system-defaults.json")
    user_path = env.config_dir / SETTINGS_FILE_NAME
    project_path = cwd / PROJECT_DIR_NAME / SETTINGS_FILE_NAME

    system = _read("system", system_path, e)
    defaults = _read("system-defaults", defaults_path, e)
    user = _read("user", user_path, e)
    project = SettingsFile("project", project_path, {}, False)
    if not _same_path(cwd, _home(e)) and not _same_path(project_path, user_path):
        project = _read("project", project_path, e)

    warnings: list[str] = [line for f in (defaults, user, system) for line in f.warnings]
    outer = _convert(_merge(defaults.raw, user.raw, system.raw), "the merged system and user settings")
    trusted = trust if trust is not None else is_folder_trusted(cwd, env, enabled=outer.security.folder_trust.enabled)
    layers = [defaults, user, project, system] if trusted else [defaults, user, system]
    if not trusted and not _same_path(cwd, _home(e)):
        from gemini_split.userfiles.folder_trust import project_files, untrusted_notice

        ignored = project_files(cwd, env, outer.context_file_names())
        if ignored:  # never silently: one line naming them (issue 29 §6)
            warnings.append(untrusted_notice(cwd, ignored, env))
    if trusted:
        warnings.extend(project.warnings)
    merged = _convert(_merge(*(layer.raw for layer in layers)), "the merged settings")
    return LoadedSettings(merged, [defaults, user, project, system], trusted, warnings)


def is_folder_trusted(folder: Path, env: Environment, *, enabled: bool = True) -> bool:
    """gemini-cli's folder trust: ``$GEMINI_CLI_TRUST_WORKSPACE`` (true/false)
    decides first; with ``security.folderTrust.enabled`` false every folder
    is trusted; otherwise the longest matching rule of ``trustedFolders.json``
    (``TRUST_FOLDER``, ``TRUST_PARENT``, ``DO_NOT_TRUST``) in the config
    directory decides, and a folder no rule covers is not trusted."""
    flag = env.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if flag in ("true", "false"):
        return flag == "true"
    if not enabled:
        return True
    return trust_rule(folder, env) in ("TRUST_FOLDER", "TRUST_PARENT")


def workspace_dir_refusal(folder: Path, env: Environment, *, enabled: bool) -> str | None:
    """Why folder trust refuses ``folder`` as a directory of the workspace
    (``--include-directories``, ``context.includeDirectories``, ``/directory
    add``), or None: with ``security.folderTrust.enabled``, a rule marking it
    ``DO_NOT_TRUST``, or ``$GEMINI_CLI_TRUST_WORKSPACE=false``. A folder no
    rule covers is not refused here (``/directory add`` asks about it)."""
    flag = env.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if not enabled or flag == "true":
        return None
    if flag == "false" or trust_rule(folder, env) == "DO_NOT_TRUST":
        return f"the folder trust rules do not trust {os.path.realpath(folder)} (trustedFolders.json)"
    return None


def trust_rule(folder: Path, env: Environment) -> str | None:
    """The trust level the longest matching rule of ``trustedFolders.json``
    gives ``folder``, or None when no rule covers it (no decision yet)."""
    path = Path(env.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or env.config_dir / TRUSTED_FOLDERS_FILE_NAME)
    rules = _read_json_object(path)
    if rules is None:
        return None
    location = Path(os.path.realpath(folder))
    best_len, best = -1, None
    for rule_path, level in rules.items():
        if level not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST"):
            raise SettingsError(f"{path}: key {rule_path!r}: expected TRUST_FOLDER, TRUST_PARENT "
                                f"or DO_NOT_TRUST, got {level!r}")
        effective = Path(rule_path).parent if level == "TRUST_PARENT" else Path(rule_path)
        effective = Path(os.path.realpath(effective.expanduser()))
        if location == effective or effective in location.parents:
            if len(rule_path) > best_len:
                best_len, best = len(rule_path), level
    return best


def _read(scope: Any, path: Path, environ: Mapping[str, str]) -> SettingsFile:
    raw = _read_json_object(path)
    if raw is None:
        return SettingsFile(scope, path, {}, False)
    raw = expand_env_vars(raw, environ)
    left_out = _drop_bad_mcp_servers(raw, path)
    _convert(raw, str(path))  # check this file alone, so its errors name it
    return SettingsFile(scope, path, raw, True, left_out)


def _drop_bad_mcp_servers(raw: dict[str, Any], path: Path) -> tuple[str, ...]:
    """Remove from ``raw`` the ``mcpServers`` entries that do not fit the
    schema, and say so (file, key, why): one broken server entry must not
    stop gemini-split, nor the other servers."""
    servers = raw.get("mcpServers")
    if servers is None:
        return ()
    if not isinstance(servers, dict):
        del raw["mcpServers"]
        return (f"gemini-split: {path}: key mcpServers: expected an object of servers; no MCP servers from it",)
    lines = []
    for name, value in list(servers.items()):
        try:
            msgspec.convert(value, MCPServerSettings)
        except msgspec.ValidationError as exc:
            del servers[name]
            message, _, at = str(exc).partition(" - at `$")
            key = f"mcpServers.{name}{at.rstrip('`')}"
            lines.append(f"gemini-split: {path}: key {key}: {message[:1].lower()}{message[1:]}; "
                         "this MCP server is left out")
    return tuple(lines)


def _read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (comments allowed), or None if there is no
    file."""
    try:
        data = read_bounded(path, MAX_SETTINGS_BYTES)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"{path}: larger than {MAX_SETTINGS_BYTES // (1024 * 1024)} MiB; not read")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SettingsError(f"{path}: not UTF-8 text") from None
    return parse_json_object(text, path)


def parse_json_object(text: str, where: str | Path) -> dict[str, Any]:
    """The JSON object a settings file's ``text`` holds (comments allowed);
    raises :class:`SettingsError` naming ``where`` (and the line and column)
    when it is not JSON or not an object."""
    try:
        value = json_values.loads(strip_json_comments(text))
    except ValueError as exc:  # json.JSONDecodeError
        raise SettingsError(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise SettingsError(f"{where}: nested too deeply") from None
    if not isinstance(value, dict):
        raise SettingsError(f"{where}: the settings file must hold a JSON object, not {type(value).__name__}")
    return value


def _convert(raw: dict[str, Any], where: str) -> Settings:
    try:
        return msgspec.convert(raw, Settings)
    except msgspec.ValidationError as exc:
        message, _, at = str(exc).partition(" - at `$")
        key = at.rstrip("`").lstrip(".") if at else ""
        if key.startswith("mcpServers[...]") and isinstance(raw.get("mcpServers"), dict):
            key = key.replace("[...]", "." + _bad_server(raw["mcpServers"]), 1)
        key_text = f" key {key}:" if key else ""
        raise SettingsError(f"{where}:{key_text} {message[:1].lower()}{message[1:]}") from None


def _bad_server(servers: dict[str, Any]) -> str:
    """The name of the first ``mcpServers`` entry that does not fit the
    schema (msgspec's error path says ``[...]`` for a mapping key)."""
    for name, value in servers.items():
        try:
            msgspec.convert(value, MCPServerSettings)
        except msgspec.ValidationError:
            return name
    return "[...]"


# --------------------------------------------------------------------------
# Pieces gemini-cli defines: comment stripping, $VAR expansion, merging.

#: Compiled on first use (a settings file with strings), not at import.
_ENV_VAR = r"\$(?:(\w+)|\{([^}]+?)(?::-([^}]*))?\})"


def expand_env_vars(value: Any, environ: Mapping[str, str]) -> Any:
    """``$VAR``, ``${VAR}`` and ``${VAR:-default}`` replaced in every string
    of ``value`` (keys are left alone); an unset variable without a default
    stays as written."""
    if isinstance(value, str):
        def replace(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name in environ:
                return environ[name]
            if match.group(3) is not None:
                return match.group(3)
            return match.group(0)

        return re.sub(_ENV_VAR, replace, value)
    if isinstance(value, list):
        return [expand_env_vars(item, environ) for item in value]
    if isinstance(value, dict):
        return {key: expand_env_vars(item, environ) for key, item in value.items()}
    return value


def strip_json_comments(text: str) -> str:
    """``text`` with ``//`` and ``/* */`` comments outside strings replaced
    by spaces (newlines kept), so JSON error positions still point at the
    file's own lines and columns."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
        elif ch == '"':
            in_string = True
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c in "\r\n" else " " for c in text[i:end]))
            i = end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


#: Paths whose lists or objects merge rather than replace (gemini-cli's
#: mergeStrategy in its settings schema).
_UNION = {("tools", "exclude"), ("skills", "disabled"), ("context", "fileFiltering", "customIgnoreFilePaths")}
_CONCAT = {("context", "includeDirectories")}
_SHALLOW = {("mcpServers",)}


def _merge(*layers: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for layer in layers:
        _merge_into(result, layer, ())
    return result


def _merge_into(target: dict[str, Any], source: dict[str, Any], path: tuple[str, ...]) -> None:
    for key, value in source.items():
        here = (*path, key)
        old = target.get(key)
        if here in _SHALLOW and isinstance(old, dict) and isinstance(value, dict):
            target[key] = {**old, **value}
        elif here in _UNION and isinstance(old, list):
            new = value if isinstance(value, list) else [value]
            target[key] = list(dict.fromkeys([*old, *new]))
        elif here in _CONCAT and isinstance(old, list):
            target[key] = [*old, *(value if isinstance(value, list) else [value])]
        elif isinstance(value, dict):
            merged: dict[str, Any] = dict(old) if isinstance(old, dict) else {}
            _merge_into(merged, value, here)
            target[key] = merged
        else:
            target[key] = value


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def _same_path(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
