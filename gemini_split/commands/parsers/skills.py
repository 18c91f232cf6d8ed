"""``gemini-split skills``'s arguments (the runner: :mod:`gemini_split.commands.run_skills`)."""

from __future__ import annotations

from typing import Any

SCOPES = ("user", "workspace")


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "skills", help="manage Agent Skills (SKILL.md directories), as 'gemini skills'",
        description="Agent Skills from ~/.gemini/skills, ~/.agents/skills and (in a trusted folder) "
                    ".gemini/skills and .agents/skills: list them, enable or disable one, install or link one "
                    "from a local directory, uninstall one.",
    )
    sub = parser.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="discovered skills: name, state, scope, description, location")
    enable = sub.add_parser("enable", help="enable a skill: take it out of skills.disabled in every settings file")
    enable.add_argument("name", metavar="NAME")
    disable = sub.add_parser("disable", help="disable a skill: add it to skills.disabled in one settings file")
    disable.add_argument("name", metavar="NAME")
    disable.add_argument("-s", "--scope", choices=SCOPES, default="workspace",
                         help="workspace: ./.gemini/settings.json (default, as gemini-cli); user: your settings.json")
    install = sub.add_parser("install", help="copy the skill(s) in a local directory into your skills directory")
    install.add_argument("path", metavar="PATH", help="a skill's directory, or a checkout holding skills")
    install.add_argument("--scope", choices=SCOPES, default="user",
                         help="user: ~/.gemini/skills (default); workspace: ./.gemini/skills")
    install.add_argument("--path", dest="subpath", metavar="SUBDIR", help="the sub-directory of PATH holding the skill")
    install.add_argument("--consent", action="store_true", help="install without asking (you read what it contains)")
    link = sub.add_parser("link", help="link the skill(s) in a local directory into your skills directory "
                                       "(edits to the source apply at once)")
    link.add_argument("path", metavar="PATH", help="a skill's directory, or a directory holding skills")
    link.add_argument("--scope", choices=SCOPES, default="user",
                      help="user: ~/.gemini/skills (default); workspace: ./.gemini/skills")
    link.add_argument("--consent", action="store_true", help="link without asking (you read what it contains)")
    uninstall = sub.add_parser("uninstall", help="remove an installed (or linked) skill")
    uninstall.add_argument("name", metavar="NAME")
    uninstall.add_argument("--scope", choices=SCOPES, default="user")
    parser.set_defaults(run="gemini_split.commands.run_skills:run_skills_command")
