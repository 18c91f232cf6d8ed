"""``gemini-split restore``'s arguments (the runner: :mod:`gemini_split.commands.run_restore`)."""

from __future__ import annotations

from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "restore", help="list the checkpoints (general.checkpointing.enabled), or restore one",
        description="Without ID: the checkpoints of this workspace, oldest first (one is made before each file "
                    "edit the agent makes when general.checkpointing.enabled is true). With ID: show which files "
                    "will change, ask, and put them back as they were before that edit — offline: no model call, "
                    "no credentials. --propose-again then also rewinds the session's conversation to that tool "
                    "call and has it proposed again (as /restore ID does in the REPL; approved as in a one-shot "
                    "run: --approval-mode, --allowed-tools), which continues the conversation with the model. "
                    "With --tools server the checkpoints are the server's, of the session --resume names.",
    )
    parser.add_argument("checkpoint", nargs="?", metavar="ID", help="the checkpoint to restore (the list shows them)")
    parser.add_argument("-y", "--yes", action="store_true",
                        help="restore without asking (for scripts; files changed by hand since are overwritten)")
    then = parser.add_mutually_exclusive_group()
    then.add_argument("--propose-again", action="store_true",
                      help="after the files, rewind the conversation to that tool call and have the model's call "
                           "proposed again (a model request: needs credentials where the session runs)")
    then.add_argument("--files-only", action="store_true",
                      help="the files alone, the conversation left as it is (the default)")
    parser.set_defaults(run="gemini_split.commands.run_restore:run_restore_command")
