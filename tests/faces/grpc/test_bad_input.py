"""The bad-input list of issue 19: each is an ErrorResponse and a gRPC
status, and the server goes on serving everyone else."""

from __future__ import annotations

from functools import partial

import grpc
import pytest
from google.protobuf import struct_pb2

from gemini_split.server.model.names import check_model_name
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import Outcome, chat, grpc_server, prompt, start


def _refused(outcome: Outcome, status: grpc.StatusCode, code: str) -> None:
    """One ErrorResponse carrying ``status`` and the stable ``code``, and
    the RPC ended with ``status``."""
    assert outcome.code == status, (outcome.code, outcome.details)
    errors = outcome.errors()
    assert [e.code for e in errors] == [status.value[0]]
    assert errors[0].message.startswith(f"{code}: "), errors[0].message
    assert outcome.details.startswith(f"{code}: ")


async def _still_serves(tp, address) -> None:
    outcome = await chat(tp, address, [start(tp, "still there?")])
    assert outcome.code == grpc.StatusCode.OK and outcome.text() == "Echo: still there?"


def _config(**values) -> struct_pb2.Struct:
    config = struct_pb2.Struct()
    config.update(values)
    return config


async def test_an_unknown_or_empty_oneof_is_invalid_argument(third_party):
    tp = third_party
    unknown_field = b"\x4a\x03abc"  # field 9, length-delimited: not in the proto
    with FakeGemini() as fake:
        async with grpc_server(fake) as (service, address):
            empty = await chat(tp, address, [b""], raw=True)
            unknown = await chat(tp, address, [unknown_field], raw=True)
            # The same after a StartRequest: the session exists, the stream ends.
            later = await chat(tp, address, [start(tp).SerializeToString(), unknown_field], raw=True)
            await _still_serves(tp, address)
    _refused(empty, grpc.StatusCode.INVALID_ARGUMENT, "unknown_request")
    _refused(unknown, grpc.StatusCode.INVALID_ARGUMENT, "unknown_request")
    assert later.kinds() == ["session_info", "error"]
    _refused(later, grpc.StatusCode.INVALID_ARGUMENT, "unknown_request")


async def test_a_prompt_before_the_start_request_is_failed_precondition(third_party):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake) as (service, address):
            outcome = await chat(tp, address, [prompt(tp, "hello?")])
            assert service.sessions == {}
            await _still_serves(tp, address)
    assert outcome.kinds() == ["error"]
    _refused(outcome, grpc.StatusCode.FAILED_PRECONDITION, "start_required")


async def test_a_second_start_request_is_failed_precondition(third_party):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp, "one"), start(tp, "two")])
            await _still_serves(tp, address)
    assert outcome.kinds() == ["session_info", "text_response", "session_info", "error"]
    _refused(outcome, grpc.StatusCode.FAILED_PRECONDITION, "already_started")


async def test_an_oversized_message_is_resource_exhausted(third_party):
    tp = third_party
    limit = 64 * 1024
    with FakeGemini() as fake:
        async with grpc_server(fake, max_message_size=limit) as (service, address):
            # Over the limit: an ErrorResponse from the face.
            over = await chat(tp, address, [start(tp), prompt(tp, "x" * (limit + 10))])
            # Over what grpcio accepts at all: its own status, before us.
            huge = await chat(tp, address, [start(tp), prompt(tp, "x" * (limit * 4))])
            # Escapes make the native message bigger than the protobuf one.
            escaped = await chat(tp, address, [start(tp), prompt(tp, "\x01" * (limit // 2))])
            await _still_serves(tp, address)
        assert len(fake.requests) == 1  # none of them reached the model
    assert over.kinds() == ["session_info", "error"]
    _refused(over, grpc.StatusCode.RESOURCE_EXHAUSTED, "message_too_large")
    assert huge.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    _refused(escaped, grpc.StatusCode.RESOURCE_EXHAUSTED, "message_too_large")


@pytest.mark.parametrize(("config", "status", "code"), [
    ({"telemetry": True}, grpc.StatusCode.INVALID_ARGUMENT, "invalid_field"),
    ({"userMemory": "remember me"}, grpc.StatusCode.PERMISSION_DENIED, "config_not_allowed"),
])
async def test_advanced_config_keys_the_operator_did_not_allow_are_refused(third_party, config, status, code):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake) as (service, address):
            outcome = await chat(tp, address, [start(tp, "hi", advanced_config=_config(**config))])
            assert service.sessions == {}
            await _still_serves(tp, address)
    assert outcome.kinds() == ["error"]
    _refused(outcome, status, code)


async def test_an_allowed_key_with_the_wrong_type_is_invalid_argument(third_party):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake, extra={"allowed_config": ["userMemory"]}) as (_, address):
            outcome = await chat(tp, address, [start(tp, "hi", advanced_config=_config(userMemory=42))])
    _refused(outcome, grpc.StatusCode.INVALID_ARGUMENT, "invalid_field")


@pytest.mark.parametrize(("model", "status", "code"), [
    ("gemini-1.0-pro", grpc.StatusCode.PERMISSION_DENIED, "model_not_allowed"),
    ("../../v1/files", grpc.StatusCode.INVALID_ARGUMENT, "invalid_field"),
])
async def test_a_model_the_operator_does_not_allow_is_refused_before_any_session(third_party, model, status, code):
    tp = third_party
    extra = {"check_model": partial(check_model_name, allowed=("gemini-2.5-*",), default="gemini-2.5-flash")}
    with FakeGemini() as fake:
        async with grpc_server(fake, extra=extra) as (service, address):
            outcome = await chat(tp, address, [start(tp, "hi", model=model)])
            allowed = await chat(tp, address, [start(tp, "hi", model="gemini-2.5-pro")])
            assert len(service.sessions) == 1
        assert [r["model"] for r in fake.requests] == ["gemini-2.5-pro"]
    _refused(outcome, status, code)
    assert allowed.code == grpc.StatusCode.OK


async def test_an_approval_mode_outside_the_enum_is_invalid_argument(third_party):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp, "hi", approval_mode=7)])
    _refused(outcome, grpc.StatusCode.INVALID_ARGUMENT, "invalid_field")


async def test_tool_names_that_are_not_names_are_invalid_argument(third_party):
    tp = third_party
    with FakeGemini() as fake:
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp, "hi", exclude_tools=["run_shell_command; rm -rf /"])])
    _refused(outcome, grpc.StatusCode.INVALID_ARGUMENT, "invalid_field")


async def test_a_method_the_service_does_not_have_is_unimplemented(third_party):
    tp = third_party
    from .helpers import open_channel
    import trio

    with FakeGemini() as fake:
        async with grpc_server(fake) as (_, address):
            def call_other():
                with open_channel(address) as channel:
                    other = channel.unary_unary("/gemini.v1.GeminiService/Other", request_serializer=lambda b: b,
                                                response_deserializer=lambda b: b)
                    with pytest.raises(grpc.RpcError) as caught:
                        other(b"", timeout=10)
                    return caught.value.code()
            assert await trio.to_thread.run_sync(call_other) == grpc.StatusCode.UNIMPLEMENTED
            await _still_serves(tp, address)


async def test_a_token_over_its_stream_cap_is_resource_exhausted_and_others_go_on(third_party, tmp_path):
    import queue

    from .helpers import ALICE, BOB, chat_sync, open_channel, write_auth_config

    tp = third_party
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        async with grpc_server(fake, auth_config=auth, per_user=1) as (service, address):

            def hold_one_then_try_another():
                requests: queue.SimpleQueue = queue.SimpleQueue()
                requests.put(start(tp))
                with open_channel(address) as channel:
                    held = tp.grpc.GeminiServiceStub(channel).Chat(
                        iter(requests.get, None), timeout=15, metadata=[("authorization", f"Bearer {ALICE}")])
                    assert next(held).WhichOneof("response") == "session_info"
                    second = chat_sync(tp, address, [start(tp, "me too")], token=ALICE)
                    other = chat_sync(tp, address, [start(tp, "bob here")], token=BOB)
                    requests.put(None)
                    list(held)
                return second, other

            import trio
            second, other = await trio.to_thread.run_sync(hold_one_then_try_another)
            after = await chat(tp, address, [start(tp, "again")], token=ALICE)
    _refused(second, grpc.StatusCode.RESOURCE_EXHAUSTED, "too_many_streams")
    assert other.code == grpc.StatusCode.OK and other.text() == "Echo: bob here"
    assert after.code == grpc.StatusCode.OK  # the cap counts open streams only


async def test_garbage_that_is_not_protobuf_is_invalid_argument_logs_no_traceback_and_the_server_still_stops(
        third_party):
    """Issue 35 §8: grpcio logged each message it could not deserialize with
    its traceback, and (racing the stream's own end) sent a second status
    that never completed, so the listener's stop hung. Now the face refuses
    such a message like any bad request, and the log stays quiet."""
    import io
    import logging

    import trio

    from gemini_split.log_limits import limit_log_handler

    tp = third_party
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    limit_log_handler(handler)
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with FakeGemini() as fake:
            with trio.fail_after(20):  # the stop included
                async with grpc_server(fake) as (_, address):
                    garbage = [await chat(tp, address, [b"\xff\xff\xff\xff not protobuf"], raw=True)
                               for _ in range(20)]
                    later = await chat(tp, address, [start(tp).SerializeToString(), b"\x0a\xff"], raw=True)
                    await _still_serves(tp, address)
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
    for outcome in garbage:
        _refused(outcome, grpc.StatusCode.INVALID_ARGUMENT, "invalid_message")
    assert "not a gemini.v1.ClientRequest protobuf" in garbage[0].details
    assert later.kinds() == ["session_info", "error"]
    _refused(later, grpc.StatusCode.INVALID_ARGUMENT, "invalid_message")
    log = out.getvalue()
    assert "Traceback" not in log and "deserializing" not in log, log
