"""Fixtures for the gRPC face: a client generated from the seed's proto the
way a third party would (grpcio-tools, in the test), and a real server
(AgentService + the gRPC listener) in front of the fake Gemini server."""

from __future__ import annotations

import importlib
import importlib.resources
import sys
import types

import pytest
from grpc_tools import protoc


@pytest.fixture(scope="session")
def third_party(tmp_path_factory) -> types.SimpleNamespace:
    """``gemini.v1.gemini_pb2`` and ``gemini_pb2_grpc`` generated from the
    proto the plugin ships, as a client author would generate them."""
    out = tmp_path_factory.mktemp("third_party")
    root = importlib.resources.files("gemini_split_grpc")
    proto_root = str(root)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    status = protoc.main(["protoc", f"-I{proto_root}", f"-I{include}", f"--python_out={out}",
                          f"--grpc_python_out={out}", "gemini/v1/gemini.proto"])
    assert status == 0, "protoc failed"
    sys.path.insert(0, str(out))
    try:
        pb2 = importlib.import_module("gemini.v1.gemini_pb2")
        pb2_grpc = importlib.import_module("gemini.v1.gemini_pb2_grpc")
    finally:
        sys.path.remove(str(out))
    return types.SimpleNamespace(pb2=pb2, grpc=pb2_grpc)
