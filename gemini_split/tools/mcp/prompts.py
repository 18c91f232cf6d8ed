"""An MCP server's prompts as gemini-cli turns them into slash commands.

A prompt ``poem-writer`` is the command ``/poem-writer`` (blanks in its
name become ``-``). Its arguments are parsed as gemini-cli's
``McpPromptLoader.parseArgs`` does (:func:`parse_prompt_args`); the text of
the messages ``prompts/get`` returns is sent as the user's turn
(:func:`prompt_text`); :func:`prompt_help` is gemini-cli's usage text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cache import CachedPrompt

def command_name(prompt: CachedPrompt) -> str:
    """gemini-cli's command name for a prompt: its name, blanks as ``-``."""
    return "/" + re.sub(r"\s+", "-", prompt.name.strip())


def prompt_text(result: Any) -> str | None:
    """The text a ``GetPromptResult`` sends: its messages' text contents, in
    order (None when it has none)."""
    texts = [m.content.text for m in (result.messages or ())
             if getattr(m.content, "type", None) == "text" and m.content.text]
    return "\n\n".join(texts) if texts else None


def prompt_help(prompt: CachedPrompt) -> str:
    """gemini-cli's help for a prompt's arguments."""
    args = prompt.arguments
    if not args:
        return f'Prompt "{prompt.name}" has no arguments.'
    text = f'Arguments for "{prompt.name}":\n\n'
    text += 'You can provide arguments by name (e.g., --argName="value") or by position.\n\n'
    positional = ",".join('"foo"' for _ in args)
    named = ",".join('--' + a["name"] + '="foo"' for a in args)
    text += f"e.g., {prompt.name} {positional} is equivalent to {prompt.name} {named}\n\n"
    for arg in args:
        text += f"  --{arg['name']}\n"
        if arg.get("description"):
            text += f"    {arg['description']}\n"
        text += f"    (required: {'yes' if arg.get('required') else 'no'})\n\n"
    return text.rstrip("\n")


NAMED = re.compile(r'--([^=]+)=(?:"((?:\\.|[^"\\])*)"|([^ ]+))')
_POSITIONAL = re.compile(r'(?:"((?:\\.|[^"\\])*)"|([^ ]+))')


def parse_prompt_args(text: str, arguments: list[dict[str, Any]]) -> dict[str, str] | str:
    """gemini-cli's ``McpPromptLoader.parseArgs``: ``--name="value"`` (or
    ``--name=value``) by name, the other words by position into the
    required arguments not given by name; one such argument takes all of
    them. The inputs, or the error message for missing arguments."""
    named: dict[str, str] = {}
    positional_parts: list[str] = []
    last = 0
    for match in NAMED.finditer(text):
        named[match.group(1)] = re.sub(r"\\(.)", r"\1", match.group(2) if match.group(2) is not None
                                       else match.group(3))
        if match.start() > last:
            positional_parts.append(text[last:match.start()])
        last = match.end()
    if last < len(text):
        positional_parts.append(text[last:])
    positional = [re.sub(r"\\(.)", r"\1", m.group(1) if m.group(1) is not None else m.group(2))
                  for m in _POSITIONAL.finditer("".join(positional_parts).strip())]
    inputs = {a["name"]: named[a["name"]] for a in arguments if named.get(a["name"])}
    unfilled = [a["name"] for a in arguments if a.get("required") and not inputs.get(a["name"])]
    if len(unfilled) == 1:
        inputs[unfilled[0]] = " ".join(positional)
        return inputs
    missing = []
    for i, name in enumerate(unfilled):
        if i < len(positional):
            inputs[name] = positional[i]
        else:
            missing.append(name)
    if missing:
        return f"Missing required argument(s): {', '.join('--' + n for n in missing)}"
    return inputs


