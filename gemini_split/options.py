"""What the user asked for on the command line, as typed records.

Each command turns its parsed arguments into one of these once
(:mod:`gemini_split.commands.options_from_args`); the composition root
(:mod:`gemini_split.app`), the front ends and everything below them read
the record, never an ``argparse.Namespace``. So a flag renamed in one
parser is an ``AttributeError`` where the record is built, not a silent
default three layers down (as hypercorn's ``Config`` is built from its
arguments in one place).

Values are as given: paths are strings not yet resolved against the
working directory, ``None`` (or an empty tuple) means "not given", and
the environment, profiles and ``settings.json`` fill the gaps in
:mod:`gemini_split.app`. The defaults here are those of the parsers, so an
embedding program or a test can say only what it means.
"""

from __future__ import annotations

import msgspec

#: Seconds a client keeps trying to reconnect and resume (``--reconnect-timeout``).
DEFAULT_RECONNECT_TIMEOUT = 120.0


class ClientOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The flags of a command that opens a client (the REPL, ``-p``,
    ``--acp``, ``attach``, ``--list-sessions``)."""

    #: ``--workspace``: the directory the local tools may use.
    workspace: str | None = None
    #: ``--server``: an address or a profile name; None: environment, settings, else embedded.
    server: str | None = None
    #: ``--token``, ``--ca``, ``--insecure``: how to reach the server.
    token: str | None = None
    ca: str | None = None
    insecure: bool = False
    #: ``--send-api-key``: give the server our own key for our sessions.
    send_api_key: bool = False
    #: ``-m/--model``.
    model: str | None = None
    #: ``--approval-mode`` as typed (gemini-cli's and seed 001's names), and ``-y/--yolo``.
    approval_mode: str | None = None
    yolo: bool = False
    #: ``--allowed-tools`` and ``--allowed-mcp-server-names``: each entry as given (comma lists unsplit).
    allowed_tools: tuple[str, ...] = ()
    allowed_mcp_server_names: tuple[str, ...] = ()
    #: ``--policy`` and ``--admin-policy`` files or directories.
    policy: tuple[str, ...] = ()
    admin_policy: tuple[str, ...] = ()
    #: ``-s/--sandbox[=MODE]`` (a bare ``-s`` is ``"auto"``) and ``--sandbox-network``.
    sandbox: str | None = None
    sandbox_network: bool = False
    #: ``-e/--extensions``: the only installed extensions this run uses (names,
    #: comma lists split; ``("none",)``: none); None: those enabled for the folder.
    extensions: tuple[str, ...] | None = None
    #: ``--include-directories`` entries as given.
    include_directories: tuple[str, ...] = ()
    #: ``--max-turns``: embedded mode's model calls per prompt.
    max_turns: int | None = None
    #: ``--skip-trust``: trust the current folder for this run.
    skip_trust: bool = False
    #: ``--tools``: where tools run, ``"client"`` or ``"server"``; ``--project`` with the latter.
    tools: str = "client"
    project: str | None = None
    #: ``--reconnect-timeout``.
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT
    #: ``-r/--resume`` (an id, a prefix, or ``"latest"``) and ``--session-id``.
    resume: str | None = None
    session_id: str | None = None
    #: ``-i/--prompt-interactive``: the REPL's first prompt.
    prompt_interactive: str | None = None


class ServerToolsOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``serve``'s flags for tools run on the server (``--server-tools`` and
    the options that go with it)."""

    enabled: bool = False
    #: ``--workspace-root``; None: ``$GEMINI_SPLIT_HOME/workspaces``.
    workspace_root: str | None = None
    #: ``--project NAME=PATH`` entries as given.
    projects: tuple[str, ...] = ()
    #: ``--approval-timeout`` in seconds.
    approval_timeout: float = 600.0
    #: ``--max-approval-mode``: the most a client may ask for.
    max_approval_mode: str = "yolo"
    #: ``--sandbox`` (``auto``, ``bwrap`` or ``none``) and ``--sandbox-network``.
    sandbox: str = "auto"
    sandbox_network: bool = False
    #: ``--policy`` and ``--admin-policy``: the server's own rules.
    policy: tuple[str, ...] = ()
    admin_policy: tuple[str, ...] = ()
    #: ``--web-fetch-allow``: what server-side web_fetch may reach beyond
    #: public addresses (CIDRs, addresses, host names).
    web_fetch_allow: tuple[str, ...] = ()
    #: Files the server was started with that no server-side command may
    #: see (``--auth-config``, ``--tls-cert``, ``--tls-key``, ``--log-file``,
    #: a ``unix:`` socket): see ``gemini_split.app.server_private_paths``.
    private_files: tuple[str, ...] = ()
    #: ``--state-dir`` as given (None: the default; ``:memory:``: none).
    state_dir: str | None = None
