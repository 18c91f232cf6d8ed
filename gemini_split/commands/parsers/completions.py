"""``gemini-split completions``'s arguments (the runner: :mod:`gemini_split.commands.run_completions`)."""

from __future__ import annotations

import argparse
from typing import Any

SHELLS = ("bash", "zsh", "fish")

def add_parser(commands: Any) -> None:
    p = commands.add_parser(
        "completions",
        description="Print the completion script for a shell. Profile names complete after "
                    "--server.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="install:\n"
               "  bash:  gemini-split completions bash > ~/.local/share/bash-completion/completions/gemini-split\n"
               "  zsh:   gemini-split completions zsh > ~/.zfunc/_gemini-split   (with ~/.zfunc in $fpath)\n"
               "  fish:  gemini-split completions fish > ~/.config/fish/completions/gemini-split.fish\n",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run="gemini_split.commands.run_completions:run_completions")
