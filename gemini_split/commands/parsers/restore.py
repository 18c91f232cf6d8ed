"""``gemini-split restore``'s arguments (the runner: :mod:`gemini_split.commands.run_restore`)."""

from __future__ import annotations

from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "restore", help="list the checkpoints (general.checkpointing.enabled), or restore one",
        description="Without ID: the checkpoints of this workspace, oldest first (one is made before each file "
                    "edit the agent makes when general.checkpointing.enabled is true). With ID: show which files "
                    "will change, ask, put them back as they were before that edit, then rewind the session's "
                    "conversation to that tool call and propose it again (approved as in a one-shot run: "
                    "--approval-mode, --allowed-tools). With --tools server the checkpoints are the server's, "
                    "of the session --resume names.",
    )
    parser.add_argument("checkpoint", nargs="?", metavar="ID", help="the checkpoint to restore (the list shows them)")
    parser.add_argument("-y", "--yes", action="store_true",
                        help="restore without asking (for scripts; files changed by hand since are overwritten)")
    parser.add_argument("--files-only", action="store_true",
                        help="put the files back, leave the conversation as it is")
    parser.set_defaults(run="gemini_split.commands.run_restore:run_restore_command")
