"""grpcs:// with a trustme CA; the committed generated code is current and
the shipped proto is seed 001's."""

from __future__ import annotations

import importlib.resources
import re

import grpc
import trustme
from grpc_tools import protoc

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import ALICE, chat, grpc_server, start, write_auth_config


async def test_grpcs_works_with_the_ca_and_fails_without_it(third_party, tmp_path):
    tp = third_party
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        async with grpc_server(fake, tls=(str(cert_file), str(key_file)), auth_config=auth) as (_, address):
            assert address.startswith("grpcs://127.0.0.1:")
            trusted = await chat(tp, address, [start(tp, "over TLS")], token=ALICE, ca=ca.cert_pem.bytes())
            untrusted = await chat(tp, address, [start(tp, "over TLS")], token=ALICE, timeout=5)
        assert len(fake.requests) == 1
    assert trusted.code == grpc.StatusCode.OK and trusted.text() == "Echo: over TLS"
    assert untrusted.code == grpc.StatusCode.UNAVAILABLE and untrusted.responses == []


def test_the_committed_generated_code_is_current(tmp_path):
    """Fails when gemini.proto changed and gemini_pb2.py was not
    regenerated. To regenerate (from plugins/gemini_split_grpc/)::

        python -m grpc_tools.protoc -I . --python_out=/tmp/g --pyi_out=/tmp/g gemini/v1/gemini.proto
        cp /tmp/g/gemini/v1/gemini_pb2.py* .
    """
    from gemini_split_grpc import gemini_pb2

    root = importlib.resources.files("gemini_split_grpc")
    assert protoc.main(["protoc", f"-I{root}", f"-I{importlib.resources.files('grpc_tools') / '_proto'}",
                        f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", "gemini/v1/gemini.proto"]) == 0
    fresh = (tmp_path / "gemini/v1/gemini_pb2.py").read_text()
    serialized = re.search(r"AddSerializedFile\((b'.*?')\)\n", fresh).group(1)
    assert eval(serialized) == gemini_pb2.DESCRIPTOR.serialized_pb  # noqa: S307 - protoc's own literal
    assert (tmp_path / "gemini/v1/gemini_pb2.pyi").read_text() == (root / "gemini_pb2.pyi").read_text()


def test_the_shipped_proto_keeps_the_seeds_package_names_and_field_numbers():
    from gemini_split_grpc import gemini_pb2 as pb

    assert pb.DESCRIPTOR.package == "gemini.v1" and pb.DESCRIPTOR.name == "gemini/v1/gemini.proto"
    (method,) = pb.DESCRIPTOR.services_by_name["GeminiService"].methods
    assert (method.name, method.client_streaming, method.server_streaming) == ("Chat", True, True)
    fields = {name: {f.name: f.number for f in message.fields} for name, message in pb.DESCRIPTOR.message_types_by_name.items()}
    assert fields == {
        "ClientRequest": {"start_request": 1, "prompt": 2},
        "ServerResponse": {"session_info": 1, "text_response": 2, "thought_response": 3, "tool_started": 4,
                           "tool_ended": 5, "error": 6, "agent_started": 7, "agent_finished": 8, "agent_text": 9,
                           "agent_thought": 10},
        "StartRequest": {"session_id": 1, "prompt": 2, "model": 4, "approval_mode": 5, "core_tools": 6,
                         "exclude_tools": 7, "advanced_config": 8},
        "SessionInfo": {"session_id": 1},
        "TextResponse": {"content": 1},
        "ThoughtResponse": {"thought": 1},
        "ToolStartedResponse": {"name": 1, "args": 2, "agent_id": 3, "call_id": 4},
        "ToolEndedResponse": {"name": 1, "result_summary": 2, "agent_id": 3, "call_id": 4},
        "ErrorResponse": {"message": 1, "code": 2},
        # Issue 32's additions (sub-agents), after the seed's numbers.
        "AgentStartedResponse": {"agent_id": 1, "name": 2, "parent_call_id": 3, "model": 4, "task": 5, "tools": 6,
                                 "refused_tools": 7},
        "AgentFinishedResponse": {"agent_id": 1, "name": 2, "parent_call_id": 3, "outcome": 4, "turns": 5,
                                  "tool_calls": 6, "summary": 7, "usage": 8},
        "AgentTextResponse": {"agent_id": 1, "content": 2},
        "AgentThoughtResponse": {"agent_id": 1, "thought": 2},
        "TokenUsage": {"prompt_tokens": 1, "output_tokens": 2, "thinking_tokens": 3, "cached_tokens": 4,
                       "total_tokens": 5, "tool_tokens": 6},
    }
    assert {v.name: v.number for v in pb.DESCRIPTOR.enum_types_by_name["ApprovalMode"].values} == {
        "APPROVAL_MODE_UNSPECIFIED": 0, "REJECT_DANGEROUS_TOOLS": 1, "AUTO_APPROVE": 2}


def test_every_field_of_the_seeds_proto_keeps_its_number_type_and_place(tmp_path):
    """Only additions: a client generated from the seed's file (kept as
    seed/gemini/v1/gemini.proto) reads what this server sends."""
    from gemini_split_grpc import gemini_pb2 as pb

    from .test_subagents import seed_descriptors

    old = seed_descriptors(tmp_path)
    for name, message in old.message_types_by_name.items():
        new = pb.DESCRIPTOR.message_types_by_name[name]
        for field in message.fields:
            same = new.fields_by_name[field.name]
            assert (same.number, same.type, same.is_repeated, same.containing_oneof and same.containing_oneof.name) == (
                field.number, field.type, field.is_repeated, field.containing_oneof and field.containing_oneof.name), \
                f"{name}.{field.name} changed"
