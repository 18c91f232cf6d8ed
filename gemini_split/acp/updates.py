"""Native events and history as ACP ``session/update`` payloads; ACP prompt
content blocks as a native prompt. Pure functions: no I/O, no trio.

Tool calls look as gemini-cli's do in an editor: a ``kind`` (``read``,
``edit``, ``search``, ``execute``, ``fetch``, ``think``, ``switch_mode``,
``other``), a ``title`` (for the shell gemini-cli's ``command [dir]
(description)``), ``locations`` (absolute paths, with the line where one is
known) and, for edits, ``diff`` content. The shell's description and working
directory also travel as fields (``_meta.description``, ``_meta.cwd``) so a
client never has to parse a title.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from typing import Any
from urllib.parse import unquote, urlparse

from gemini_split.protocol import Attachment

#: Characters of a tool's result shown in the editor, at most.
MAX_SHOWN_RESULT = 16 * 1024

_KIND_BY_TOOL = {
    "read_file": "read",
    "read_many_files": "read",
    "list_directory": "search",
    "glob": "search",
    "grep_search": "search",
    "write_file": "edit",
    "replace": "edit",
    "save_memory": "edit",
    "run_shell_command": "execute",
    "web_fetch": "fetch",
    "google_web_search": "fetch",
    "write_todos": "think",
    "enter_plan_mode": "switch_mode",
    "exit_plan_mode": "switch_mode",
    "list_background_processes": "read",
    "read_background_output": "read",
}


#: Steps of a plan sent in one ``plan`` update, at most, and their length.
PLAN_ENTRIES = 50
PLAN_ENTRY_CHARS = 200
_STEP = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.+)$")


def plan_update(text: str) -> dict[str, Any]:
    """ACP's ``plan`` update for a plan file presented for approval: its
    list items as the entries (pending, in order), or its first line when
    it has none."""
    steps = [m.group(1) for m in map(_STEP.match, text.splitlines()) if m]
    if not steps:
        steps = [line.lstrip("# ") for line in text.splitlines() if line.strip()][:1]
    return {"sessionUpdate": "plan", "entries": [
        {"content": _one_line(step, PLAN_ENTRY_CHARS), "priority": "medium", "status": "pending"}
        for step in steps[:PLAN_ENTRIES]]}


def tool_kind(tool: str) -> str:
    """The ACP tool kind of one of our tools (``other`` for the rest: MCP tools)."""
    return _KIND_BY_TOOL.get(tool, "other")


def _absolute(workspace: str, path: Any) -> str | None:
    if not isinstance(path, str) or not path:
        return None
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(workspace, path))


def _one_line(text: Any, limit: int = 200) -> str:
    """Text for a title: one line, control characters shown as spaces, bounded."""
    s = " ".join(str(text).split())
    s = "".join(c if c.isprintable() else " " for c in s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def one_line(text: Any, limit: int = 200) -> str:
    """Text for a title: one line, control characters shown as spaces, bounded."""
    return _one_line(text, limit)


def shell_title(args: dict[str, Any]) -> str:
    """gemini-cli's shell title: ``command [dir] (description)``."""
    title = _one_line(args.get("command", ""), 500)
    if args.get("dir_path"):
        title += f" [{_one_line(args['dir_path'])}]"
    if args.get("description"):
        title += f" ({_one_line(args['description'])})"
    return title


def tool_title(tool: str, args: dict[str, Any]) -> str:
    """What the call does, in a line, as gemini-cli words it."""
    path = args.get("file_path") or args.get("dir_path") or args.get("path")
    if tool == "run_shell_command":
        return shell_title(args)
    if tool == "read_file":
        lines = ""
        if args.get("start_line") or args.get("end_line"):
            lines = f" (lines {args.get('start_line', 1)}-{args.get('end_line', 'end')})"
        return f"{_one_line(path)}{lines}"
    if tool == "write_file":
        return f"Writing to {_one_line(path)}"
    if tool == "replace":
        what = f": {_one_line(args['instruction'])}" if args.get("instruction") else ""
        return f"{_one_line(path)}{what}"
    if tool == "list_directory":
        return _one_line(path or ".")
    if tool in ("glob", "grep_search"):
        where = f" within {_one_line(path)}" if path else ""
        return f"'{_one_line(args.get('pattern', ''))}'{where}"
    if tool == "web_fetch":
        return _one_line(args.get("prompt") or args.get("url") or tool)
    if tool == "google_web_search":
        return f"Searching the web for: {_one_line(args.get('query', ''))}"
    shown = ", ".join(f"{k}={_one_line(json.dumps(v, ensure_ascii=False), 60)}" for k, v in list(args.items())[:4])
    return f"{tool}({shown})"


def tool_locations(workspace: str, tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The files a call touches, as ACP ``ToolCallLocation`` objects."""
    path = _absolute(workspace, args.get("file_path") or args.get("dir_path") or args.get("path"))
    if path is None:
        return [{"path": workspace}] if tool in ("glob", "grep_search", "list_directory") else []
    location: dict[str, Any] = {"path": path}
    if tool == "read_file" and isinstance(args.get("start_line"), int):
        location["line"] = args["start_line"]
    return [location]


def tool_meta(workspace: str, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """The shell's description and working directory as fields."""
    if tool != "run_shell_command":
        return None
    meta: dict[str, Any] = {"cwd": _absolute(workspace, args.get("dir_path") or ".")}
    if args.get("description"):
        meta["description"] = str(args["description"])
    return meta


def tool_call_start(workspace: str, call_id: str, tool: str, args: dict[str, Any],
                    status: str = "pending") -> dict[str, Any]:
    """A ``tool_call`` update: the call announced."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": tool_title(tool, args),
        "kind": tool_kind(tool),
        "status": status,
        "locations": tool_locations(workspace, tool, args),
        "rawInput": args,
    }
    meta = tool_meta(workspace, tool, args)
    if meta is not None:
        update["_meta"] = meta
    return update


def diff_content(path: str, old: str | None, new: str) -> dict[str, Any]:
    """An edit as ACP ``diff`` content (``oldText`` null: a new file)."""
    return {"type": "diff", "path": path, "oldText": old, "newText": new}


def text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def result_text(result: Any) -> str:
    """A tool's result as text for the editor, bounded."""
    if result is None:
        return ""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, indent=1)
    if len(text) > MAX_SHOWN_RESULT:
        text = text[:MAX_SHOWN_RESULT] + f"\n… [{len(text) - MAX_SHOWN_RESULT} more characters]"
    return text


def text_chunk(kind: str, text: str) -> dict[str, Any]:
    """``agent_message_chunk``, ``agent_thought_chunk`` or ``user_message_chunk``."""
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def agent_text_chunk(call_id: str, agent_id: int, message: int, text: str) -> dict[str, Any]:
    """A sub-agent's text, ``agent_thought_chunk`` by ``agent_thought_chunk``:
    ACP appends a chunk to the message its ``messageId`` names (a tool call's
    content it can only replace whole), so only what is new is sent.
    ``messageId`` is the call that runs the sub-agent and which of its
    messages this is (``message``: one per model reply, counted by its tool
    calls so far); ``_meta`` names the call (``toolCallId``) and the
    sub-agent (``agentId``), for an editor that shows it under the call."""
    return {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text},
            "messageId": f"{call_id}/{message}", "_meta": {"toolCallId": call_id, "agentId": agent_id}}


def history_updates(workspace: str, messages: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """A stored conversation (Gemini ``Content`` objects) as the updates a
    client would have seen: user text, the model's thoughts and text, each
    tool call with its outcome. The session context the client sends with
    the first turn (``<session_context>``) is not the user's words: left out."""
    updates: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # function name → the last call id shown for it
    n = 0
    for content in messages:
        role = content.get("role")
        for part in content.get("parts") or ():
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            call = part.get("function_call") or part.get("functionCall")
            response = part.get("function_response") or part.get("functionResponse")
            if isinstance(text, str) and text:
                if role == "user":
                    if text.lstrip().startswith("<session_context>"):
                        continue
                    updates.append(text_chunk("user_message_chunk", text))
                else:
                    updates.append(text_chunk("agent_thought_chunk" if part.get("thought") else "agent_message_chunk", text))
            elif isinstance(call, dict):
                n += 1
                call_id = str(call.get("id") or f"history-{n}")
                name = str(call.get("name", "tool"))
                calls[name] = call_id
                args = call.get("args") if isinstance(call.get("args"), dict) else {}
                updates.append(tool_call_start(workspace, call_id, name, args, status="in_progress"))
            elif isinstance(response, dict):
                name = str(response.get("name", "tool"))
                call_id = str(response.get("id") or calls.get(name) or f"history-{n}")
                body = response.get("response") if isinstance(response.get("response"), dict) else {}
                failed = "error" in body
                shown = body.get("error", {}).get("message") if failed and isinstance(body.get("error"), dict) else None
                update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                                          "status": "failed" if failed else "completed"}
                if shown:
                    update["content"] = [text_content(str(shown))]
                updates.append(update)
    return updates


class BadPrompt(ValueError):
    """A prompt content block that cannot be used; the text says which."""


def prompt_from_blocks(blocks: Any) -> tuple[str, tuple[Attachment, ...]]:
    """ACP prompt content (text, resource links, embedded resources,
    images) as our prompt text and attachments. Raises :class:`BadPrompt`."""
    if not isinstance(blocks, list) or not blocks:
        raise BadPrompt("prompt must be a non-empty array of content blocks")
    texts: list[str] = []
    attachments: list[Attachment] = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise BadPrompt(f"prompt[{i}] is not a content block object")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            texts.append(f"@{_uri_path(block['uri'])}")
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            resource = block["resource"]
            uri = str(resource.get("uri", ""))
            if isinstance(resource.get("text"), str):
                texts.append(f'\n<file uri="{uri}">\n{resource["text"]}\n</file>')
            elif isinstance(resource.get("blob"), str):
                attachments.append(_attachment(resource.get("mimeType"), resource["blob"], f"prompt[{i}]"))
            else:
                raise BadPrompt(f"prompt[{i}]: an embedded resource needs text or blob")
        elif kind == "image" and isinstance(block.get("data"), str):
            attachments.append(_attachment(block.get("mimeType"), block["data"], f"prompt[{i}]"))
        else:
            raise BadPrompt(f"prompt[{i}]: unsupported or malformed content block (type {kind!r})")
    text = "".join(texts).strip() if len(texts) == 1 else "\n".join(texts).strip()
    if not text and not attachments:
        raise BadPrompt("the prompt is empty")
    return text, tuple(attachments)


def _attachment(mime: Any, data: str, where: str) -> Attachment:
    if not isinstance(mime, str) or "/" not in mime:
        raise BadPrompt(f"{where}: mimeType is missing")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise BadPrompt(f"{where}: data is not base64") from None
    return Attachment(mime_type=mime, data=data)


def _uri_path(uri: str) -> str:
    if uri.startswith("file://"):
        return unquote(urlparse(uri).path)
    return uri
