"""Running a custom command's ``!{…}`` and ``@{…}`` with the client's own tools.

Shared by the REPL and ``-p``: ``!{…}`` goes through the executor exactly as
a ``run_shell_command`` call from the model would (validation, approval
policy, ``--allowed-tools``, the sandbox; asked in the REPL, refused in
``-p`` unless allowed), and ``@{…}`` through :func:`expand_references`
(workspace confinement, .gitignore, binary and size limits).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gemini_split.userfiles.custom_commands import (
    CommandFailed,
    CommandSet,
    CustomCommand,
    expand_command,
    load_custom_commands,
    shell_output,
    split_invocation,
)
from gemini_split.protocol import Attachment

from .references import CONTENT_END, CONTENT_START, expand_references
from .safe_text import visible

if TYPE_CHECKING:
    from gemini_split.tools.executor import ToolExecutor

_calls = itertools.count(1)


def load_commands(config_dir: Any, workspace: Any, *, trusted: bool, reserved: Any = (),
                  extensions: Any = None) -> CommandSet:
    """The custom commands for a session in ``workspace``, with those of the
    active ``extensions`` (a ``userfiles.extensions.ExtensionSet``)."""
    return load_custom_commands(config_dir, workspace, trusted=trusted, reserved=reserved,
                                extension_dirs=extensions.command_dirs() if extensions is not None else ())


async def run_custom_command(command: CustomCommand, line: str, executor: ToolExecutor,
                             report: Callable[[str, bool], None]) -> tuple[str, tuple[Attachment, ...]]:
    """The prompt ``line`` (``/name args…``) expands to, and its inline
    attachments. Raises :class:`CommandFailed` when a ``!{…}`` is refused
    or cannot run: nothing is sent then. ``report(line, is_warning)``
    says what ran and what was left out."""
    _, args = split_invocation(line)
    attachments: list[Attachment] = []

    async def run_shell(cmd: str) -> str:
        async def ignore(event: Any) -> None:
            pass

        result, failure = await executor.execute(f"cmd-{next(_calls)}", "run_shell_command",
                                                 {"command": cmd, "description": f"{command.name}: !{{…}}"},
                                                 ignore)
        if failure is not None:
            hint = ""
            if failure.code == "refused" and executor.asker is None:
                hint = f"; allow it with --allowed-tools \"run_shell_command({cmd})\" or a policy rule"
            raise CommandFailed(f"{command.name}: !{{{cmd}}} did not run: {failure.message}{hint}; "
                                "nothing was sent")
        report(f"$ {visible(cmd, newlines=False)}", False)
        return shell_output(result)

    async def inject_file(path: str) -> str:
        read_file = executor.registry.get("read_file")
        if read_file is None:
            report(f"@{{{visible(path, newlines=False)}}} not attached: this client has no read_file tool", True)
            return ""
        expanded = await expand_references("", executor.workspace, read_file, paths=[path])
        for shown in expanded.attached:
            report(f"+ attached @{visible(shown, newlines=False)}", False)
        for shown, why in expanded.skipped:
            report(f"@{{{visible(shown, newlines=False)}}} not attached: {visible(why)}", True)
        attachments.extend(expanded.attachments)
        text = expanded.prompt.strip("\n")
        return text

    prompt = await expand_command(command, args, invocation=line, run_shell=run_shell, inject_file=inject_file)
    return prompt, tuple(attachments)


__all__ = ["CONTENT_END", "CONTENT_START", "CommandFailed", "load_commands", "run_custom_command"]
