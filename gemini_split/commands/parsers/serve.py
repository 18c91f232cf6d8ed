"""``gemini-split serve``'s arguments (the runner: :mod:`gemini_split.commands.run_serve`)."""

from __future__ import annotations

import argparse
from typing import Any

from gemini_split.argtypes import positive_int

# Mirrors gemini_split.server.store (not imported here: --help stays fast;
# tests/cli/test_cli_start.py checks the copies agree).
DEFAULT_REPLAY_CAPACITY = 2000
DEFAULT_SESSION_TTL = 7 * 24 * 3600.0


def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "serve",
        description="Run the agent loop (the part that talks to Gemini) for clients that "
                    "connect over WebSocket, or for one client over stdin/stdout (--stdio). "
                    "Tools still run on the clients.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  gemini-split serve                                 ws://127.0.0.1:8080\n"
               "  gemini-split serve --listen 0.0.0.0:8443 --auth-config tokens.json \\\n"
               "      --tls-cert cert.pem --tls-key key.pem          wss:// with tokens\n"
               "  ssh box gemini-split serve --stdio                 one session over ssh\n",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--listen", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:$GEMINI_SERVER_PORT or 8080), or "
                            "unix:/PATH: a Unix socket only your own user can connect to (its directory "
                            "must be 0700)")
    where.add_argument("--stdio", action="store_true",
                       help="serve one session as JSON lines on stdin/stdout (logs go to stderr)")
    p.add_argument("--auth-config", metavar="FILE",
                   help='tokens file {"tokens": {TOKEN: {"userId": …, "permissions": […]}}} '
                        "(default: $GEMINI_AUTH_CONFIG)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback address without tokens (anyone who can connect "
                        "can use your API key)")
    p.add_argument("--tls-cert", metavar="FILE", help="certificate chain (PEM): serve wss://")
    p.add_argument("--tls-key", metavar="FILE", help="private key (PEM) for --tls-cert")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser Origin allowed to connect besides the server's own (repeatable); its "
                        "host is also a name an unauthenticated loopback server answers to (a proxy's public name)")
    web = p.add_argument_group("the browser page (serve --web; docs/web.md)")
    web.add_argument("--web", action="store_true",
                     help="also serve the browser client on this listener (http(s)://HOST:PORT/); "
                          "browsers sign in by pairing: gemini-split pair")
    web.add_argument("--web-cookie-days", type=positive_int, default=30, metavar="N",
                     help="days a paired browser stays signed in (default 30)")
    # Development and tests: serve the page's files from DIR instead of the package's.
    web.add_argument("--web-static", metavar="DIR", help=argparse.SUPPRESS)
    # Tests: a pairing link's lifetime in seconds (default 600).
    web.add_argument("--web-pair-ttl", type=float, default=600.0, help=argparse.SUPPRESS)
    web.add_argument("--notify-webhook", metavar="URL",
                     help="POST a short ntfy-compatible JSON message to URL when an approval waits or a "
                          "turn ends (no prompt text or tool arguments unless --notify-detail). One URL for "
                          "the whole server: every user's sessions notify it")
    web.add_argument("--notify-detail", action="store_true",
                     help="put the session's title and the tool's name and command in --notify-webhook "
                          "messages — every user's, to the one URL: use it only where whoever reads that URL "
                          "may see every user's commands (one person's server, or one team's)")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="CIDR",
                   help="a reverse proxy (address or CIDR) whose X-Forwarded-For / X-Real-IP name the "
                        "client that wrong tokens are counted against, and whose X-Forwarded-Proto: https "
                        "puts the browser page on its https origin (repeatable; default: none, the "
                        "connecting address counts)")
    p.add_argument("--max-connections-per-user", type=int, default=8, metavar="N",
                   help="open connections one token may have (default 8; 0 = no cap)")
    p.add_argument("--max-message-size", type=int, default=16 * 1024 * 1024, metavar="BYTES",
                   help="largest message accepted (default 16 MiB)")
    p.add_argument("--tool-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="how long a client has to answer a tool request (default 900)")
    p.add_argument("--auth-method", choices=("api-key", "vertex-ai"),
                   help="how this server reaches Gemini, whatever the environment says: api-key "
                        "($GEMINI_API_KEY) or vertex-ai (GOOGLE_CLOUD_PROJECT with Application Default "
                        "Credentials, or express mode's GOOGLE_API_KEY); default: as gemini-cli chooses")
    p.add_argument("--allow-client-credentials", action="store_true",
                   help="let each client bring its own Gemini API key (gemini-split --send-api-key) for "
                        "its sessions, kept in memory only; taken over TLS or from this machine only. "
                        "The server then needs no credentials of its own")
    p.add_argument("-m", "--model", dest="serve_model", metavar="MODEL",
                   help="default model for sessions (default: $GEMINI_MODEL or gemini-2.5-flash)")
    p.add_argument("--allowed-models", metavar="NAMES",
                   help="comma-separated models (or patterns such as gemini-2.5-*) clients may ask "
                        "for (default: any valid model name; the default model always)")
    p.add_argument("--max-turns", dest="serve_max_turns", type=int, metavar="N",
                   help="model calls allowed per prompt (default 100)")
    acp = p.add_argument_group("ACP bridge (docs/acp.md)")
    acp.add_argument("--acp-ws", nargs="?", const="", metavar="HOST:PORT",
                     help="also serve the Agent Client Protocol over WebSocket, on the same sessions "
                          "(default 127.0.0.1:$GEMINI_PORT or 4444; same auth, TLS and limits)")
    acp.add_argument("--acp-ring", type=positive_int, default=2000, metavar="N",
                     help="session/update messages kept per session for late joiners (default 2000)")
    acp.add_argument("--log-file", metavar="FILE",
                     help="with --acp-ws: also log to FILE (default gemini-acp.log in $GEMINI_SPLIT_HOME), "
                          "rotated at 2 MB to FILE.old")
    sessions = p.add_argument_group("sessions")
    sessions.add_argument("--state-dir", metavar="DIR",
                          help="where sessions are kept, so clients can resume them after a cut or a "
                               "restart (default: $GEMINI_SPLIT_HOME/sessions, i.e. ~/.gemini/sessions; "
                               "':memory:' keeps them in this process only)")
    sessions.add_argument("--store", metavar="URL",
                          help="keep sessions in Redis instead, shared by several serve replicas: "
                               "redis://[user:password@]host:port/db or rediss://… for TLS "
                               "(default: $GEMINI_SPLIT_REDIS_URL if set, else --state-dir)")
    sessions.add_argument("--lease-ttl", type=parse_duration, default=None, metavar="DURATION",
                          help="with --store: how long a replica's hold on a session lasts unrenewed, i.e. "
                               "how soon another replica takes over the sessions of one that died "
                               "(default 10s)")
    sessions.add_argument("--replay-capacity", type=positive_int, default=DEFAULT_REPLAY_CAPACITY, metavar="N",
                          help=f"events kept per session for resuming clients (default {DEFAULT_REPLAY_CAPACITY})")
    sessions.add_argument("--session-ttl", type=parse_duration, default=DEFAULT_SESSION_TTL, metavar="DURATION",
                          help="drop sessions idle for longer than this: 90s, 30m, 12h, 7d (default 7d)")
    grpc = p.add_argument_group("gRPC (seed 001's gemini.v1.GeminiService; needs: pip install 'gemini-split[grpc]')")
    grpc.add_argument("--grpc", metavar="HOST:PORT",
                      help="also serve gRPC Chat streams here (grpcs:// with --tls-cert); each stream is a "
                           "session like any other")
    grpc.add_argument("--no-websocket", action="store_true",
                      help="with --grpc: serve gRPC only, no WebSocket listener")
    grpc.add_argument("--grpc-allow-config", metavar="KEYS", default="",
                      help="comma-separated StartRequest.advanced_config keys clients may set "
                           "(known: userMemory; default: none)")
    grpc.add_argument("--grpc-max-streams", type=positive_int, default=64, metavar="N",
                      help="gRPC streams served at once (default 64)")
    sessions.add_argument("--allow-attach-by-id", action=argparse.BooleanOptionalAction, default=None,
                          help="let a user join one of their own sessions that has clients attached by its "
                               "id alone, without its resume token (`gemini-split attach ID`; default: on "
                               "for a loopback address or --stdio, off otherwise)")
    tools = p.add_argument_group(
        "server-side tools",
        "Run the built-in tools here, for clients that ask (gemini-split --tools server), each session "
        "confined to its own workspace, with approvals asked of the attached clients. Off by default.")
    tools.add_argument("--server-tools", action="store_true",
                       help="let clients run tools on this server (hello.tools = server)")
    tools.add_argument("--workspace-root", metavar="DIR",
                       help="where each session's own workspace is created, 0700, and deleted with the "
                            "session (default: workspaces/ under GEMINI_SPLIT_HOME)")
    tools.add_argument("--project", dest="serve_projects", action="append", default=[], metavar="NAME=PATH",
                       help="a directory a client may ask for by name instead of a fresh workspace "
                            "(repeatable); anything else is refused")
    tools.add_argument("--approval-timeout", type=parse_duration, default=600.0, metavar="DURATION",
                       help="how long a tool call waits for an approval before the model is told it "
                            "was not approved (default 10m)")
    tools.add_argument("--max-approval-mode", default="auto_edit", metavar="MODE",
                       help="the most permissive approval mode a client may ask for: plan, "
                            "reject_dangerous, default, auto_edit or yolo (default: auto_edit: "
                            "commands are asked about)")
    # SUPPRESS: the main parser's --policy/--admin-policy (before `serve`) count too.
    tools.add_argument("--policy", action="append", default=argparse.SUPPRESS, metavar="FILE|DIR",
                       help="policy rules (gemini-cli TOML) for server-side tools instead of "
                            "~/.gemini/policies; a deny rule refuses even in yolo")
    tools.add_argument("--admin-policy", action="append", default=argparse.SUPPRESS, metavar="FILE|DIR",
                       help="admin policy rules for server-side tools, above every other rule")
    tools.add_argument("--sandbox", dest="serve_sandbox", choices=("auto", "bwrap", "none"), default="auto",
                       help="run server-side shell commands under bubblewrap: auto (the default) uses it "
                            "and refuses to start when it does not work; none runs them unsandboxed")
    tools.add_argument("--web-fetch-allow", action="append", default=[], metavar="CIDR|HOST",
                       help="let server-side web_fetch reach this network or host name although it is "
                            "loopback, private or link-local (repeatable; default: public addresses only)")
    tools.add_argument("--sandbox-network", dest="serve_sandbox_network", action="store_true",
                       help="let sandboxed server-side commands reach the network (default: no network)")
    telemetry = p.add_argument_group(
        "telemetry (docs/telemetry.md; needs: pip install 'gemini-split[telemetry]')",
        "gemini-cli's OpenTelemetry logs and metrics of every model call this server makes. Each flag "
        "overrides its GEMINI_TELEMETRY_* variable, which overrides settings.json's telemetry.")
    telemetry.add_argument("--telemetry", action=argparse.BooleanOptionalAction, default=None,
                           help="export telemetry (default: off)")
    telemetry.add_argument("--telemetry-target", choices=("local", "gcp"),
                           help="local (the default) or gcp, which needs an OpenTelemetry collector here "
                                "(settings.json telemetry.useCollector)")
    telemetry.add_argument("--telemetry-otlp-endpoint", metavar="URL",
                           help="the OTLP collector (default http://localhost:4317)")
    telemetry.add_argument("--telemetry-otlp-protocol", choices=("grpc", "http"),
                           help="how to reach it (default grpc)")
    telemetry.add_argument("--telemetry-outfile", metavar="FILE",
                           help="append the records to FILE (gemini-cli's JSON) instead of exporting them")
    telemetry.add_argument("--telemetry-log-prompts", action=argparse.BooleanOptionalAction, default=None,
                           help="include prompts, tool arguments and the model's requests and answers "
                                "(default: off)")
    # SUPPRESS: a subcommand default must not undo `gemini-split --debug serve`.
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="log details to stderr")
    p.set_defaults(run="gemini_split.commands.run_serve:run_serve")


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d`` → seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 30m, 12h, 7d)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than zero")
    return value
