"""``gemini.v1.GeminiService/Chat`` end to end: a client generated from the
seed's proto (as a third party would) against the real server and the fake
Gemini server (real google-genai, real REST wire format)."""

from __future__ import annotations

import grpc
import trio

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import ALICE, BOB, chat, grpc_server, prompt, start, write_auth_config


async def test_session_info_comes_first_then_text_chunks_in_order_then_session_info(third_party):
    tp = third_party
    with FakeGemini([{"text": "one two three four five six", "chunks": 3, "chunk_delay": 0.05}]) as fake:
        async with grpc_server(fake) as (service, address):
            outcome = await chat(tp, address, [start(tp, "count")])
    assert outcome.code == grpc.StatusCode.OK
    kinds = outcome.kinds()
    assert kinds[0] == "session_info" and kinds[-1] == "session_info"
    assert set(kinds[1:-1]) == {"text_response"}
    assert outcome.text() == "one two three four five six"
    session_id = outcome.responses[0].session_info.session_id
    assert session_id.startswith("s-") and outcome.responses[-1].session_info.session_id == session_id


async def test_thinking_arrives_as_thought_response_before_the_text(third_party):
    tp = third_party
    with FakeGemini([{"thought": "Let me think.", "text": "Forty-two."}]) as fake:
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp, "question")])
    assert outcome.kinds() == ["session_info", "thought_response", "text_response", "session_info"]
    assert outcome.responses[1].thought_response.thought == "Let me think."
    assert outcome.text() == "Forty-two."


async def test_each_prompt_is_a_turn_of_the_same_session(third_party):
    tp = third_party
    with FakeGemini() as fake:  # echo mode
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp), prompt(tp, "first"), prompt(tp, "second")])
        contents = fake.requests[-1]["body"]["contents"]
    assert outcome.code == grpc.StatusCode.OK
    assert outcome.kinds() == ["session_info", "text_response", "session_info", "text_response", "session_info"]
    assert [r.text_response.content for r in outcome.responses if r.text_response.content] == [
        "Echo: first", "Echo: second"]
    # The second model call carries the first turn: one conversation.
    assert "Echo: first" in str(contents)


async def test_a_stream_resumes_its_own_session_by_id(third_party, tmp_path):
    tp = third_party
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        async with grpc_server(fake, auth_config=auth) as (_, address):
            first = await chat(tp, address, [start(tp, "remember the number 7")], token=ALICE)
            session_id = first.responses[0].session_info.session_id
            again = await chat(tp, address, [start(tp, "what was it?", session_id=session_id)], token=ALICE)
            # Bob cannot, and cannot tell it exists: the same answer as for no session.
            bobs = await chat(tp, address, [start(tp, "let me in", session_id=session_id)], token=BOB)
            nobody = await chat(tp, address, [start(tp, "hi", session_id="s-0000000000000000")], token=ALICE)
        contents = fake.requests[1]["body"]["contents"]
    assert again.code == grpc.StatusCode.OK
    assert again.responses[0].session_info.session_id == session_id
    assert "remember the number 7" in str(contents)
    assert bobs.code == grpc.StatusCode.NOT_FOUND and nobody.code == grpc.StatusCode.NOT_FOUND
    assert [e.code for e in bobs.errors()] == [grpc.StatusCode.NOT_FOUND.value[0]]
    assert bobs.errors()[0].message.startswith("unknown_session: ")
    assert bobs.details.replace(session_id, "ID") == nobody.details.replace("s-0000000000000000", "ID")
    assert len(fake.requests) == 2  # neither refused stream reached the model


async def test_a_wrong_or_missing_token_is_unauthenticated_before_any_session(third_party, tmp_path):
    tp = third_party
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        async with grpc_server(fake, auth_config=auth) as (service, address):
            wrong = await chat(tp, address, [start(tp, "hi")], token="not-a-token-at-all")
            missing = await chat(tp, address, [start(tp, "hi")])
            right = await chat(tp, address, [start(tp, "hi")], token=ALICE)
            assert len(service.sessions) == 1
    assert wrong.code == missing.code == grpc.StatusCode.UNAUTHENTICATED
    assert wrong.responses == missing.responses == []
    assert right.code == grpc.StatusCode.OK and right.text() == "Echo: hi"


async def test_token_guessing_is_throttled_per_address_and_a_right_token_is_always_accepted(third_party, tmp_path):
    tp = third_party
    auth = write_auth_config(tmp_path / "auth.json")
    with FakeGemini() as fake:
        async with grpc_server(fake, auth_config=auth, extra={"auth_failure_burst": 2,
                                                              "auth_failure_refill_per_second": 0.001}) as (_, address):
            right = await chat(tp, address, [start(tp, "hi")], token=ALICE)
            guesses = [await chat(tp, address, [start(tp, "hi")], token=f"guess-{i}") for i in range(3)]
            # Out of tries: a wrong token is refused, a right one still goes in
            # (whoever guessed wrong from this address, it was not alice).
            after = await chat(tp, address, [start(tp, "hi")], token=ALICE)
            still = await chat(tp, address, [start(tp, "hi")], token="guess-again")
    assert right.code == grpc.StatusCode.OK
    assert [g.code for g in guesses] == [grpc.StatusCode.UNAUTHENTICATED] * 2 + [grpc.StatusCode.RESOURCE_EXHAUSTED]
    assert "too many failed tokens" in guesses[2].details and int(guesses[2].trailers["retry-after"]) > 0
    assert after.code == grpc.StatusCode.OK and after.text() == "Echo: hi"
    assert still.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_behind_a_trusted_proxy_guesses_count_against_the_client_it_reports(third_party, tmp_path):
    tp = third_party
    auth = write_auth_config(tmp_path / "auth.json")
    guesser = [("x-forwarded-for", "198.51.100.7")]
    with FakeGemini() as fake:
        async with grpc_server(fake, auth_config=auth, trusted_proxies=("127.0.0.0/8",),
                               extra={"auth_failure_burst": 2, "auth_failure_refill_per_second": 0.001}) as (_, address):
            guesses = [await chat(tp, address, [start(tp, "hi")], token=f"guess-{i}", metadata=guesser)
                       for i in range(3)]
            # Another client of the same proxy has its own budget.
            other = await chat(tp, address, [start(tp, "hi")], token="typo",
                               metadata=[("x-forwarded-for", "203.0.113.9")])
    assert [g.code for g in guesses] == [grpc.StatusCode.UNAUTHENTICATED] * 2 + [grpc.StatusCode.RESOURCE_EXHAUSTED]
    assert other.code == grpc.StatusCode.UNAUTHENTICATED


async def test_a_tool_call_in_a_tool_less_session_is_an_error_response_and_the_turn_goes_on(third_party):
    tp = third_party
    script = [{"function_calls": [{"name": "write_file", "args": {"file_path": "x", "content": "y"}}]},
              {"text": "I could not write it."}]
    with FakeGemini(script) as fake:
        async with grpc_server(fake) as (_, address):
            outcome = await chat(tp, address, [start(tp, "write x")])
        answered = fake.requests[1]["body"]["contents"][-1]["parts"][0]["functionResponse"]
    assert outcome.code == grpc.StatusCode.OK
    assert outcome.kinds() == ["session_info", "error", "text_response", "session_info"]
    error = outcome.errors()[0]
    assert error.code == grpc.StatusCode.UNIMPLEMENTED.value[0]
    assert error.message.startswith("no_tools: ") and "'write_file'" in error.message
    assert "no_tools" in str(answered["response"])
    assert outcome.text() == "I could not write it."


async def test_cancelling_the_rpc_cancels_the_turn(third_party):
    tp = third_party
    slow = {"text": "a" * 400, "chunks": 200, "chunk_delay": 0.05}
    with FakeGemini([slow]) as fake:
        async with grpc_server(fake) as (service, address):
            def cancel_after_first_text():
                from .helpers import open_channel
                with open_channel(address) as channel:
                    stream = tp.grpc.GeminiServiceStub(channel).Chat(iter([start(tp, "go on and on")]), timeout=15)
                    session_id = next(stream).session_info.session_id
                    assert next(stream).text_response.content
                    stream.cancel()
                return session_id
            session_id = await trio.to_thread.run_sync(cancel_after_first_text)
            session = service.sessions[session_id]
            with trio.fail_after(5):
                while session.busy:
                    await trio.sleep(0.01)
            # The session is free at once: a resumed stream gets its answer.
            again = await chat(tp, address, [start(tp, "and now?", session_id=session_id)])
    assert again.code == grpc.StatusCode.OK and again.text() == "Echo: and now?"


async def test_a_deadline_that_passes_mid_turn_cancels_the_turn(third_party):
    tp = third_party
    with FakeGemini([{"text": "b" * 100, "chunks": 100, "chunk_delay": 0.05}]) as fake:
        async with grpc_server(fake) as (service, address):
            outcome = await chat(tp, address, [start(tp, "slowly")], timeout=0.8)
            assert outcome.code == grpc.StatusCode.DEADLINE_EXCEEDED
            (session,) = service.sessions.values()
            with trio.fail_after(5):
                while session.busy:
                    await trio.sleep(0.01)
            assert not fake.wait_for_requests(lambda rs: rs and rs[0]["chunks_sent"] > 0)[0]["completed"]


async def test_user_memory_in_advanced_config_reaches_the_model_when_the_operator_allows_it(third_party):
    tp = third_party
    from google.protobuf import struct_pb2

    config = struct_pb2.Struct()
    config.update({"userMemory": "The cat of the user is called Ada."})
    with FakeGemini() as fake:
        async with grpc_server(fake, extra={"allowed_config": ["userMemory"]}) as (_, address):
            outcome = await chat(tp, address, [start(tp, "hi", advanced_config=config)])
        body = fake.requests[0]["body"]
    assert outcome.code == grpc.StatusCode.OK
    assert "The cat of the user is called Ada." in str(body)


def test_a_tool_result_is_summed_up_in_a_few_lines():
    from gemini_split_grpc.face import summarize

    assert summarize({"exit_code": 0, "stdout": "a\nb\n", "stderr": ""}) == "exit status 0\na\nb"
    assert summarize({"exit_code": None, "signal": "SIGKILL", "stdout": "", "stderr": "oops"}) == "killed by SIGKILL\noops"
    assert summarize("\n".join(f"l{i}" for i in range(9))) == "l0\nl1\nl2\nl3\nl4\n… (4 more lines)"
    assert summarize("x" * 2000) == "x" * 500 + "…"
    assert summarize({"content": ""}) == "(no output)"
    assert summarize({"files": ["a", "b"]}) == '{"files": ["a", "b"]}'
