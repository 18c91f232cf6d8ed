"""``gemini-split extensions``'s arguments (the runner: :mod:`gemini_split.commands.run_extensions`)."""

from __future__ import annotations

from typing import Any

from gemini_split.userfiles.extension_templates import TEMPLATES


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "extensions", help="manage gemini-cli extensions (~/.gemini/extensions)",
        description="Install, list, create, check, configure and manage gemini-cli extensions, in gemini-cli's own "
                    "files: an extension installed by either program works in both. Changes apply to new sessions.",
    )
    sub = parser.add_subparsers(dest="extensions_command", metavar="ACTION", required=True)
    install = sub.add_parser("install", help="install an extension from a directory or a git URL (a copy)")
    install.add_argument("source", metavar="PATH|GIT-URL")
    install.add_argument("--ref", help="git branch, tag or commit to install")
    install.add_argument("--consent", action="store_true",
                         help="do not ask: you have looked at what the extension runs")
    install.add_argument("--skip-settings", action="store_true", help="do not ask for the extension's settings")
    link = sub.add_parser("link", help="use an extension from a directory in place (no copy)")
    link.add_argument("path", metavar="PATH")
    link.add_argument("--consent", action="store_true", help="do not ask")
    sub.add_parser("list", help="installed extensions, where they are enabled, and what they bring")
    update = sub.add_parser("update", help="reinstall an extension from its source")
    update.add_argument("name", nargs="?", metavar="NAME")
    update.add_argument("--all", action="store_true", help="update every installed extension")
    uninstall = sub.add_parser("uninstall", help="remove extensions")
    uninstall.add_argument("names", nargs="+", metavar="NAME")
    new = sub.add_parser("new", help="create a new extension (a directory) from a boilerplate example",
                         description="Create the directory PATH holding a new extension: gemini-cli's boilerplate "
                                     "TEMPLATE, or without one a gemini-extension.json named after the directory. "
                                     "Then 'gemini-split extensions link PATH' to try it.")
    new.add_argument("path", metavar="PATH", help="the directory to create (it must not exist)")
    new.add_argument("template", nargs="?", choices=sorted(TEMPLATES), metavar="TEMPLATE",
                     help="one of: " + ", ".join(sorted(TEMPLATES)))
    validate = sub.add_parser("validate", help="check an extension in a local directory, as install would read it")
    validate.add_argument("path", metavar="PATH")
    config = sub.add_parser("config", help="set an extension's settings (asked one by one; a pipe gives one "
                                           "value a line)")
    config.add_argument("name", nargs="?", metavar="NAME", help="the extension (default: every installed one)")
    config.add_argument("setting", nargs="?", metavar="SETTING", help="one setting, by name or variable")
    config.add_argument("--scope", choices=("user", "workspace"), default="user",
                        help="user (default): the extension's own .env; workspace: this folder's .env "
                             "(read in a trusted folder; never a sensitive value)")
    for action in ("enable", "disable"):
        p = sub.add_parser(action, help=f"{action} an extension for you (user) or for this folder (workspace)")
        p.add_argument("name", metavar="NAME")
        p.add_argument("--scope", choices=("user", "workspace"), default="user",
                       help="user (default): everywhere under your home; workspace: this folder and below")
    parser.set_defaults(run="gemini_split.commands.run_extensions:run_extensions_command")
