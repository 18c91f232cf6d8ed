"""``gemini-split mcp``'s arguments (the runner: :mod:`gemini_split.commands.run_mcp`)."""

from __future__ import annotations

import argparse
from typing import Any

_TRANSPORTS = ("stdio", "sse", "http")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "mcp", help="manage MCP servers (gemini-cli's mcpServers) and serve gemini-split's tools over MCP",
        description="MCP servers configured in settings.json lend their tools to the model; "
                    "'mcp serve' lends gemini-split's tools to any MCP host.",
    )
    sub = parser.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)

    sub.add_parser("list", help="configured servers, whether they start, and their tools")

    add = sub.add_parser("add", help="add (or replace) a server in settings.json",
                         description="Add or replace an mcpServers entry, as 'gemini mcp add' does.")
    add.add_argument("-s", "--scope", choices=("project", "user"), default="project",
                     help="project: ./.gemini/settings.json (default); user: the user settings file")
    add.add_argument("-t", "--transport", choices=_TRANSPORTS, default="stdio", help="default: stdio")
    add.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                     help="environment variable for a stdio server ($VAR references are kept as written)")
    add.add_argument("-H", "--header", action="append", default=[], metavar="'NAME: VALUE'",
                     help="HTTP header for sse/http servers")
    add.add_argument("--timeout", type=int, metavar="MS", help="request timeout in milliseconds (default 600000)")
    add.add_argument("--trust", action="store_true", help="run this server's tools without asking")
    add.add_argument("--description", help="a note for 'mcp list'")
    add.add_argument("--include-tools", metavar="A,B", help="only these tools of the server")
    add.add_argument("--exclude-tools", metavar="A,B", help="never these tools of the server")
    add.add_argument("name", help="the server's name (tools become mcp_NAME_TOOL)")
    add.add_argument("command_or_url", metavar="COMMAND|URL")
    add.add_argument("args", nargs=argparse.REMAINDER, help="arguments of a stdio command")

    remove = sub.add_parser("remove", help="remove a server from settings.json")
    remove.add_argument("-s", "--scope", choices=("project", "user"), default="project")
    remove.add_argument("name")

    for action, verb in (("enable", "Enable"), ("disable", "Disable")):
        toggle = sub.add_parser(action, help=f"{verb} an MCP server (recorded in mcp-server-enablement.json)",
                                description=f"{verb} an MCP server without removing its configuration, as "
                                            f"'gemini mcp {action}' does: disabled servers are not started and "
                                            "their tools are not offered.")
        toggle.add_argument("name", help=f"MCP server name to {action}")
        toggle.add_argument("--session", action="store_true",
                            help="Clear session-only disable" if action == "enable" else
                            "Disable for current session only")

    serve = sub.add_parser(
        "serve", help="serve gemini-split's tools over MCP (stdio, or --http)",
        description="Serve gemini-split's tools (read_file, list_directory, glob, grep_search, write_file, "
                    "replace, run_shell_command, web_fetch, list_background_processes, read_background_output, "
                    "write_todos) to an MCP host, confined to the workspace. "
                    "Calls that would need approval are refused unless the approval mode or "
                    "--allowed-tools allows them.",
    )
    serve.add_argument("--workspace", metavar="DIR", help="the directory the tools may use (default: here)")
    serve.add_argument("--approval-mode", default="default", metavar="MODE",
                       help="default (read-only tools run, others refused), auto_edit (edits run too), yolo")
    serve.add_argument("--allowed-tools", action="append", default=[], metavar="TOOL",
                       help="run these without approval, e.g. 'run_shell_command(git status)'")
    serve.add_argument("--http", metavar="HOST:PORT",
                       help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    serve.add_argument("--auth-config", metavar="FILE",
                       help="--http: tokens file (as for 'serve'; default $GEMINI_AUTH_CONFIG); "
                            "required unless HOST is loopback")
    serve.add_argument("--insecure-no-auth", action="store_true",
                       help="--http: allow a non-loopback address without tokens (not recommended)")
    parser.set_defaults(run="gemini_split.commands.run_mcp:run_mcp_command")
