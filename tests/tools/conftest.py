"""Fixtures for the local tool tests: a real workspace in ``tmp_path`` with
canaries outside it, and a helper that runs a call through the real
:class:`ToolExecutor` and keeps every event it emits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import ToolRegistry, default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import ToolDelta, ToolFailure

CANARY_TEXT = "CANARY-SECRET-7d3f\n"


@dataclass
class Outcome:
    result: Any
    failure: ToolFailure | None
    events: list[Any] = field(default_factory=list)

    @property
    def deltas(self) -> list[ToolDelta]:
        return [e for e in self.events if isinstance(e, ToolDelta)]

    def text(self) -> str:
        """Everything the model or the UI could see, as one string."""
        return repr(self.result) + repr(self.failure) + repr(self.events)


@dataclass
class Env:
    root: Path  # the workspace
    outside: Path  # a directory next to it, holding the canary
    canary: Path
    sibling: Path  # <root>-sibling: shares the workspace's name as a prefix
    workspace: Workspace

    def executor(self, mode: ApprovalMode = ApprovalMode.YOLO, allowed: tuple[str, ...] = (),
                 asker=None, registry: ToolRegistry | None = None) -> ToolExecutor:
        return ToolExecutor(registry or default_tools(), self.workspace, ApprovalPolicy(mode, allowed), asker)

    async def run(self, tool: str, args: Any, *, executor: ToolExecutor | None = None, **kw) -> Outcome:
        executor = executor or self.executor(**kw)
        events: list[Any] = []

        async def emit(event: Any) -> None:
            events.append(event)

        result, failure = await executor.execute("call-1", tool, args, emit)
        return Outcome(result, failure, events)

    def canaries_intact(self) -> bool:
        return (
            self.canary.read_text() == CANARY_TEXT
            and (self.sibling / "canary.txt").read_text() == CANARY_TEXT
            and sorted(p.name for p in self.outside.iterdir()) == ["canary.txt"]
        )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(CANARY_TEXT)
    sibling = tmp_path / "ws-sibling"
    sibling.mkdir()
    (sibling / "canary.txt").write_text(CANARY_TEXT)
    return Env(root, outside, canary, sibling, Workspace(root))
