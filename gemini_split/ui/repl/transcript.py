"""A session's history as the REPL shows it: when ``/resume`` or
``/chat resume`` redraws a conversation, and after a rewind."""

from __future__ import annotations

from typing import Any

from rich.text import Text


def history_lines(content: dict[str, Any]) -> list[Text]:
    """One history entry (a Gemini ``Content``) as the REPL shows it: the
    user's prompts after ``›``, the model's text, tool calls in brief.
    Control characters are shown, never obeyed."""
    lines: list[Text] = []
    user = content.get("role") == "user"
    for part in content.get("parts", []):
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            if user and part["text"].startswith("<session_context>"):
                continue  # the first turn's context, not something the user typed
            text = _visible(part["text"])
            lines.append(Text.assemble(("» ", "bold cyan"), (text, "cyan")) if user else Text(text))
        elif isinstance(part.get("function_call"), dict):
            lines.append(Text(f"  ⚙ {_visible(str(part['function_call'].get('name', '?')))}", style="dim"))
    return lines


def _visible(text: str) -> str:
    return "".join(ch if ch in "\n\t" or ch.isprintable() else "?" for ch in text)
