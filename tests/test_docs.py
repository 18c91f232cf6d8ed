"""docs/protocol.md is the reference: every example must be a valid message,
and every message type must have an example."""

from __future__ import annotations

import re
from pathlib import Path

from gemini_split.protocol import MESSAGE_TYPES, ErrorCode, decode

DOC = Path(__file__).resolve().parents[1] / "docs" / "protocol.md"


def _examples() -> list[str]:
    return re.findall(r"```json\n(.*?)\n```", DOC.read_text(), re.DOTALL)


def test_every_example_decodes_as_the_message_it_shows():
    examples = _examples()
    assert examples
    for text in examples:
        decode(text)  # raises with the reason if an example is wrong


def test_every_message_type_has_an_example():
    shown = {decode(text).TYPE for text in _examples()}
    assert shown == set(MESSAGE_TYPES)


def test_every_error_code_is_documented():
    doc = DOC.read_text()
    missing = [code.value for code in ErrorCode if f"`{code.value}`" not in doc]
    assert missing == []
