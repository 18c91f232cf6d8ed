"""Whether a tool call may run: the policy, and how the user is asked.

The policy decides ``ALLOW``, ``ASK`` or ``DENY`` from the tool and its
arguments. ``ASK`` goes to an :class:`Asker` (the REPL asks inline); with no
asker (one-shot mode, no terminal) the call is refused and the model is told
why, as seed 001's REJECT_DANGEROUS_TOOLS.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from .tools.base import Tool, ToolKind


class Decision(Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


class Answer(Enum):
    YES = "yes"
    NO = "no"
    ALWAYS = "always"  # yes, and do not ask again for this tool this session


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: Tool
    args: dict[str, Any]
    #: Exactly what will happen: the full command, the path, a diff.
    description: str


class Asker(Protocol):
    async def ask(self, request: ApprovalRequest) -> Answer: ...


class ApprovalMode(Enum):
    """``--approval-mode``: how much runs without asking."""

    DEFAULT = "default"  # ask before edits, shell and network
    AUTO_EDIT = "auto_edit"  # edits run; shell and network still ask
    YOLO = "yolo"  # nothing asks


class ApprovalPolicy:
    """Decides per call from the mode.

    Read-only tools always run. ``always`` remembers tools the user approved
    for the rest of the session."""

    def __init__(self, mode: ApprovalMode = ApprovalMode.DEFAULT, allowed_tools: list[str] | tuple[str, ...] = ()):
        self.mode = mode
        self.allowed_tools = tuple(allowed_tools)
        self.always: set[str] = set()

    def decide(self, tool: Tool, args: dict[str, Any]) -> Decision:
        if tool.kind is ToolKind.READ or tool.name in self.always:
            return Decision.ALLOW
        if self.mode is ApprovalMode.YOLO:
            return Decision.ALLOW
        if self.mode is ApprovalMode.AUTO_EDIT and tool.kind is ToolKind.EDIT:
            return Decision.ALLOW
        return Decision.ASK

    def remember(self, tool: Tool, args: dict[str, Any]) -> None:
        """The user answered ALWAYS for this call."""
        self.always.add(tool.name)
