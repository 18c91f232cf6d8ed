"""``/chat``: carrying a conversation into a new session, from the client
(``/compress`` is the server's: :mod:`gemini_split.server.session.features.compression`).

* ``/chat save TAG`` writes the history as JSON under
  ``$GEMINI_SPLIT_HOME/chats/``; ``/chat resume TAG`` redraws it and
  starts a new session whose first message carries that conversation as a
  transcript (text as it was, tool calls and results in one line each),
  after a line naming the chat and its first prompt (the new session's
  title); ``list`` and
  ``delete`` do what they say. Tags are names: letters, digits, ``.``,
  ``_``, ``-``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gemini_split.errors import ConfigurationError
from gemini_split.files import replace_atomically

#: Characters of one tool result kept in a transcript.
RESULT_CHARS = 300
#: Characters of a whole transcript carried into a new session.
TRANSCRIPT_CHARS = 200_000

_TAG = re.compile(r"[A-Za-z0-9._-]{1,64}")


def transcript(messages: list[dict[str, Any]], *, limit: int = TRANSCRIPT_CHARS) -> str:
    """A conversation (Gemini ``Content`` dicts) as readable text: each
    message's text, and one line per tool call and result. The most recent
    part is kept when it is longer than ``limit``."""
    lines: list[str] = []
    for message in messages:
        who = "User" if message.get("role") == "user" else "Model"
        texts: list[str] = []
        for part in message.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str) and not part.get("thought"):
                if not part["text"].startswith("<session_context>"):  # a first turn's context, not the user's words
                    texts.append(part["text"])
            elif isinstance(part.get("functionCall") or part.get("function_call"), dict):
                call = part.get("functionCall") or part.get("function_call")
                args = json.dumps(call.get("args") or {}, ensure_ascii=False)
                texts.append(f"[called {call.get('name')}({args[:RESULT_CHARS]})]")
            elif isinstance(part.get("functionResponse") or part.get("function_response"), dict):
                response = part.get("functionResponse") or part.get("function_response")
                result = json.dumps(response.get("response"), ensure_ascii=False)
                cut = "…" if len(result) > RESULT_CHARS else ""
                texts.append(f"[{response.get('name')} returned {result[:RESULT_CHARS]}{cut}]")
        text = "\n".join(t for t in texts if t.strip())
        if text:
            lines.append(f"{who}: {text}")
    out = "\n\n".join(lines)
    return out if len(out) <= limit else "…" + out[-limit:]


def first_prompt_line(messages: list[dict[str, Any]]) -> str:
    """The first line the user typed in a conversation (its title), or ""."""
    for message in messages:
        if message.get("role") != "user":
            continue
        for part in message.get("parts") or []:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and text.strip() and not text.startswith("<session_context>"):
                return " ".join(text.strip().split("\n", 1)[0].split())
    return ""


def resumed_context(tag: str, messages: list[dict[str, Any]]) -> str:
    """The first message of the session that continues the chat saved as
    ``tag``. Its first line, which the server makes the new session's
    title, names the chat and its first prompt (not this preamble)."""
    first = first_prompt_line(messages)
    return (f"{tag}: {first}\n\n" if first else f"{tag}\n\n") + (
        f"This conversation resumes one saved as '{tag}'. What was said (tool calls and results in "
        f"one line each):\n\n{transcript(messages)}\n\nContinue from here.")


class ChatStore:
    """Saved conversations, one JSON file per tag in ``directory``."""

    def __init__(self, directory: Path):
        self.directory = directory

    def _path(self, tag: str) -> Path:
        if not _TAG.fullmatch(tag):
            raise ConfigurationError(f"bad tag {tag!r}: use letters, digits, '.', '_' or '-' (at most 64)")
        return self.directory / f"{tag}.json"

    def save(self, tag: str, messages: list[dict[str, Any]], *, model: str) -> bool:
        """Write; True if it replaced an earlier save of that tag."""
        path = self._path(tag)
        existed = path.exists()
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = {"tag": tag, "saved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "model": model, "messages": messages}
        replace_atomically(path, json.dumps(data, ensure_ascii=False, indent=1).encode(), mode=0o600)
        return existed

    def load(self, tag: str) -> list[dict[str, Any]]:
        path = self._path(tag)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigurationError(f"no saved chat {tag!r}: /chat list shows them") from None
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"{path}: cannot be read: {exc}") from None
        messages = data.get("messages") if isinstance(data, dict) else None
        if not isinstance(messages, list):
            raise ConfigurationError(f"{path}: not a saved chat (no 'messages' list)")
        return [m for m in messages if isinstance(m, dict)]

    def list(self) -> list[tuple[str, str, int]]:
        """``(tag, saved at, messages)``, newest first."""
        out = []
        for path in self.directory.glob("*.json") if self.directory.is_dir() else []:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                out.append((path.stem, str(data.get("saved", "?")), len(data.get("messages") or [])))
            except (OSError, ValueError, AttributeError):
                out.append((path.stem, "unreadable", 0))
        return sorted(out, key=lambda row: row[1], reverse=True)

    def delete(self, tag: str) -> bool:
        try:
            self._path(tag).unlink()
            return True
        except FileNotFoundError:
            return False


_CAMEL = {"function_call": "functionCall", "function_response": "functionResponse", "inline_data": "inlineData",
          "mime_type": "mimeType", "thought_signature": "thoughtSignature", "file_data": "fileData",
          "file_uri": "fileUri", "executable_code": "executableCode", "code_execution_result": "codeExecutionResult"}


def share(messages: list[dict[str, Any]], path: Path) -> None:
    """Write ``messages`` to ``path`` as gemini-cli's ``/chat share`` does:
    ``.json`` its Content objects (camelCase, as the API writes them),
    ``.md`` one section a message. Written whole or not at all."""
    contents = [_camel(m) for m in messages]
    if path.suffix.lower() == ".json":
        text = json.dumps(contents, indent=2, ensure_ascii=False)
    else:
        text = "\n\n---\n\n".join(_markdown(c) for c in contents)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, text.encode("utf-8"))


def _camel(value: Any, *, keys: bool = True) -> Any:
    """The API's key names for a part's fields; the values a tool call
    carries (its ``args``, its ``response``) are left as they are."""
    if isinstance(value, dict) and keys:
        return {_CAMEL.get(k, k): _camel(v, keys=k not in ("args", "response")) for k, v in value.items()}
    if isinstance(value, list) and keys:
        return [_camel(v) for v in value]
    return value


def _markdown(content: dict[str, Any]) -> str:
    pieces = []
    for part in content.get("parts") or []:
        if part.get("text"):
            pieces.append(part["text"])
        elif "functionCall" in part:
            pieces.append("**Tool Command**:\n```json\n" + json.dumps(part["functionCall"], indent=2) + "\n```")
        elif "functionResponse" in part:
            pieces.append("**Tool Response**:\n```json\n" + json.dumps(part["functionResponse"], indent=2) + "\n```")
    icon = "\U0001F9D1\u200D\U0001F4BB" if content.get("role") == "user" else "\u2728"
    return f"## {(content.get('role') or 'model').upper()} {icon}\n\n" + "".join(pieces)

