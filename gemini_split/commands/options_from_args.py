"""Parsed arguments → the typed options records of :mod:`gemini_split.options`.

The one place that reads a client command's or ``serve``'s
``argparse.Namespace`` for what goes below the commands: every attribute
is read by name, so a flag renamed in a parser fails here at once instead of
silently becoming its default further down.
"""

from __future__ import annotations

import argparse

from gemini_split.options import ClientOptions, ServerToolsOptions


def client_options(args: argparse.Namespace) -> ClientOptions:
    """The top-level parser's client flags (``attach`` overrides some of
    them with its own, into the same names)."""
    return ClientOptions(
        workspace=args.workspace,
        server=args.server,
        token=args.token,
        ca=args.ca,
        insecure=args.insecure,
        send_api_key=args.send_api_key,
        model=args.model,
        approval_mode=args.approval_mode,
        yolo=args.yolo,
        allowed_tools=tuple(args.allowed_tools),
        allowed_mcp_server_names=tuple(args.allowed_mcp_server_names or ()),
        policy=tuple(args.policy or ()),
        admin_policy=tuple(args.admin_policy or ()),
        sandbox=args.sandbox,
        sandbox_network=args.sandbox_network,
        extensions=_extension_names(args.extensions),
        include_directories=tuple(args.include_directories),
        max_turns=args.max_turns,
        skip_trust=args.skip_trust,
        tools=args.tools or "client",
        project=args.project,
        reconnect_timeout=args.reconnect_timeout,
        resume=args.resume,
        session_id=args.session_id,
        prompt_interactive=args.prompt_interactive,
    )


def _extension_names(given: list[str] | None) -> tuple[str, ...] | None:
    """``-e a,b -e c`` → ``("a", "b", "c")``; only empty names (``-e ""``)
    leave none enabled, as in gemini-cli."""
    if given is None:
        return None
    return tuple(n.strip() for value in given for n in value.split(",") if n.strip()) or ("none",)


def server_tools_options(args: argparse.Namespace) -> ServerToolsOptions:
    """``serve``'s ``--server-tools`` and the flags that go with it."""
    return ServerToolsOptions(
        enabled=args.server_tools,
        workspace_root=args.workspace_root,
        projects=tuple(args.serve_projects),
        approval_timeout=args.approval_timeout,
        max_approval_mode=args.max_approval_mode,
        sandbox=args.serve_sandbox,
        sandbox_network=args.serve_sandbox_network,
        policy=tuple(args.policy or ()),
        admin_policy=tuple(args.admin_policy or ()),
        web_fetch_allow=tuple(args.web_fetch_allow),
        private_files=tuple(f for f in (args.auth_config, args.tls_cert, args.tls_key, getattr(args, "log_file", None),
                                        _unix_socket(args.listen)) if f),
        state_dir=args.state_dir,
    )


def _unix_socket(listen: str | None) -> str | None:
    """The socket path of ``--listen unix:/PATH`` (None for anything else)."""
    if not listen or not listen.startswith("unix:"):
        return None
    return "/" + listen.partition(":")[2].lstrip("/")
