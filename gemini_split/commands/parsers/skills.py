"""``gemini-split skills``'s arguments (the runner: :mod:`gemini_split.commands.run_skills`)."""

from __future__ import annotations

from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "skills", help="manage Agent Skills (SKILL.md directories), as 'gemini skills'",
        description="Agent Skills from ~/.gemini/skills, ~/.agents/skills and (in a trusted folder) "
                    ".gemini/skills and .agents/skills: list them, install one from a local directory, "
                    "uninstall one.",
    )
    sub = parser.add_subparsers(dest="skills_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="discovered skills: name, state, scope, description, location")
    install = sub.add_parser("install", help="copy the skill(s) in a local directory into your skills directory")
    install.add_argument("path", metavar="PATH", help="a skill's directory, or a checkout holding skills")
    install.add_argument("--scope", choices=("user", "workspace"), default="user",
                         help="user: ~/.gemini/skills (default); workspace: ./.gemini/skills")
    install.add_argument("--path", dest="subpath", metavar="SUBDIR", help="the sub-directory of PATH holding the skill")
    install.add_argument("--consent", action="store_true", help="install without asking (you read what it contains)")
    uninstall = sub.add_parser("uninstall", help="remove an installed skill")
    uninstall.add_argument("name", metavar="NAME")
    uninstall.add_argument("--scope", choices=("user", "workspace"), default="user")
    parser.set_defaults(run="gemini_split.commands.run_skills:run_skills_command")
