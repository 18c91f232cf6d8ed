"""docs/protocol.md is the reference: every example must be a valid message,
and every message type must have an example."""

from __future__ import annotations

import json
import re

import msgspec
from pathlib import Path

from gemini_split.protocol import MESSAGE_TYPES, ErrorCode, decode, encode

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


def test_every_example_is_the_wire_form_this_implementation_sends():
    """Same fields in the same order, and no field shown at its default
    (a sender leaves those out): the examples are what goes over the wire,
    not just something a lenient decoder accepts."""
    for text in _examples():
        shown = json.loads(text)
        message = decode(text)
        defaults = {
            f.name: msgspec.to_builtins(f.default if f.default is not msgspec.NODEFAULT else f.default_factory())
            for f in msgspec.structs.fields(type(message))
            if f.required is False and f.default is not msgspec.UNSET and f.name != "protocol_version"
        }
        at_default = [k for k, v in shown.items() if k in defaults and v == defaults[k]]
        assert at_default == [], f"{text}: shows defaults {at_default}"
        sent = json.loads(encode(message))
        assert list(sent.items()) == list(shown.items()), text


def test_the_health_example_in_deployment_md_is_what_a_fresh_server_answers():
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.model.scripted import ScriptedModel
    from gemini_split.server.service import AgentService

    deployment = (DOC.parent / "deployment.md").read_text()
    [shown] = re.findall(r"/health` answers\n`(\{.*?\})`", deployment)
    fresh = AgentService(ScriptedModel([]), ServerConfig(model="scripted")).health()
    assert json.loads(shown) == fresh


def _runtime_module_paths() -> list[tuple[str, ...]]:
    """Every module of gemini_split/ and plugins/ (not packages' __init__,
    not generated gRPC code), as path parts from its root."""
    root = Path(__file__).resolve().parent.parent
    found = []
    for top in (root / "gemini_split", root / "plugins"):
        for path in top.rglob("*.py"):
            if path.name != "__init__.py" and "_pb2" not in path.name:
                found.append(path.relative_to(top).parts)
    return found


def _named_in(lines: list[str], parts: tuple[str, ...]) -> bool:
    """Whether ``lines`` name the module: its path (or its path inside any
    enclosing package) anywhere, or its file name on a line naming its package."""
    if any("/".join(parts[i:]) in line for i in range(len(parts) - 1) for line in lines):
        return True
    package = "/".join(parts[:-1])
    return any(parts[-1] in line and (not package or package in line) for line in lines)


def test_architecture_md_names_every_module():
    lines = (DOC.parent / "architecture.md").read_text().splitlines()
    missing = sorted("/".join(parts) for parts in _runtime_module_paths() if not _named_in(lines, parts))
    assert missing == [], "docs/architecture.md does not name: " + ", ".join(missing)
