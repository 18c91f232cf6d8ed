"""The gRPC face keeps only the protobuf translation: the protocol itself
(handshake, sending, receiving, cancelling) is the native client's, the one
the ACP face uses too (issue 27 §2)."""

from __future__ import annotations

import ast
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[3] / "plugins" / "gemini_split_grpc"
#: The face's modules (``client.py`` is the other direction: the transport
#: that lets a native client talk to a seed gRPC server, translating
#: native messages itself).
FACE = ("face.py", "server.py", "__init__.py", "address.py")
#: What only a client of its own would need: the protocol's state machine
#: and the messages a client sends.
CLIENT_OWN = {"Connection", "Hello", "Cancel", "ToolExecutionResponse"}


def test_no_module_of_the_grpc_face_builds_its_own_protocol_connection():
    wrong = []
    for path in (PLUGIN / name for name in FACE):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gemini_split.protocol"):
                wrong += [f"{path.name}:{node.lineno}: {alias.name}" for alias in node.names
                          if alias.name in CLIENT_OWN]
    assert wrong == []

