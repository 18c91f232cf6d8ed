"""gemini-cli's tools that act on the session rather than on the workspace:
``write_todos`` (the model's visible task list) and ``save_memory`` (a fact
appended to the user's global context file). The planning tools are
:mod:`.plan_mode`'s.

Parameters are gemini-cli's (names, types, required lists), so a model
prompted for gemini-cli calls them the same way here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

from gemini_split.files import replace_atomically

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

TODO_STATUSES = ["pending", "in_progress", "completed", "cancelled", "blocked"]
#: The heading gemini-cli appends saved facts under.
MEMORY_SECTION = "## Gemini Added Memories"
MAX_FACT_CHARS = 2000


class WriteTodosTool(Tool):
    name = "write_todos"
    kind = ToolKind.READ  # changes nothing on disk
    description = (
        "Replaces the session's to-do list for a task of several steps: give every item with its "
        "status (pending, in_progress, completed, cancelled, blocked). Keep exactly one item "
        "in_progress while working; an empty list clears it. The list is shown to the user."
    )
    parameters = {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The whole list, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "description": {"type": "string", "description": "What to do."},
                        "status": {"type": "string", "enum": TODO_STATUSES, "description": "Where it stands."},
                    },
                    "required": ["description", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["todos"],
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        #: The current list, for front ends that show it.
        self.todos: list[dict[str, str]] = []

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        todos = []
        for i, item in enumerate(args["todos"]):
            if not isinstance(item, dict) or set(item) != {"description", "status"}:
                raise ToolFailed("invalid_arguments", f"todos[{i}] must have exactly description and status",
                                 'e.g. {"description": "write the test", "status": "pending"}')
            if item["status"] not in TODO_STATUSES or not isinstance(item["description"], str):
                raise ToolFailed("invalid_arguments", f"todos[{i}].status must be one of {TODO_STATUSES}")
            todos.append({"description": item["description"], "status": item["status"]})
        if sum(t["status"] == "in_progress" for t in todos) > 1:
            raise ToolFailed("invalid_arguments", "only one item may be in_progress at a time",
                             "mark the others pending or completed")
        self.todos = todos
        if not todos:
            return "Successfully cleared the todo list."
        listing = "\n".join(f"{i}. [{t['status']}] {t['description']}" for i, t in enumerate(todos, 1))
        return f"Successfully updated the todo list. The current list is now:\n{listing}"


class SaveMemoryTool(Tool):
    name = "save_memory"
    kind = ToolKind.EDIT  # writes the user's global context file: asks unless edits are allowed
    description = (
        "Remembers a fact about the user or their preferences for later sessions, by appending it "
        "to their global context file. Use only when the user asks you to remember something; the "
        "fact must be a short, self-contained statement."
    )
    parameters = {
        "type": "object",
        "properties": {
            "fact": {"type": "string", "description": "The fact, as one self-contained sentence."},
        },
        "required": ["fact"],
    }

    def __init__(self, memory_file: Path):
        self.memory_file = Path(memory_file)

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        return f"Add to {self.memory_file} under {MEMORY_SECTION!r}:\n- {_one_line(args.get('fact', ''))}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        fact = _one_line(args["fact"])
        if not fact:
            raise ToolFailed("invalid_arguments", "the fact is empty")
        if len(fact) > MAX_FACT_CHARS:
            raise ToolFailed("invalid_arguments", f"the fact is longer than {MAX_FACT_CHARS} characters",
                             "save a short statement, not a document")
        await trio.to_thread.run_sync(self._append, fact)
        return f'Okay, I\'ve remembered that: "{fact}"'

    def _append(self, fact: str) -> None:
        path = self.memory_file
        if path.is_symlink():
            raise ToolFailed("invalid_path", f"{path} is a symlink; not written")
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolFailed("write_failed", f"cannot read {path}: {exc}") from None
        entry = f"- {fact}\n"
        if MEMORY_SECTION in text:
            head, _, tail = text.partition(MEMORY_SECTION)
            # Insert at the end of the section (before the next heading, if any).
            body, marker, rest = tail.partition("\n## ")
            body = body.rstrip("\n") + "\n" + entry
            text = head + MEMORY_SECTION + body + (("\n" + marker.lstrip("\n") + rest) if marker else "")
        else:
            sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
            text = f"{text}{sep}{MEMORY_SECTION}\n{entry}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_atomically(path, text.encode("utf-8"))
        except OSError as exc:
            raise ToolFailed("write_failed", f"cannot write {path}: {exc.strerror or exc}") from None


def _one_line(text: Any) -> str:
    return " ".join(str(text).split()) if isinstance(text, str) else ""


def default_memory_file(config_dir: Path, file_names: list[str]) -> Path:
    """Where ``save_memory`` writes: the first context file name in the
    user's config directory (``~/.gemini/GEMINI.md``)."""
    return Path(os.path.join(config_dir, (file_names or ["GEMINI.md"])[0]))
