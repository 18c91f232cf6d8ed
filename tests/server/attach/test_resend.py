"""A prompt sent again with the id of a request the session already ran
(a client that reconnected and, told by ``state`` that nothing runs,
resends what it had not seen start: client/reconnect.py) is that request,
never a second run of it (issue 44): its end reaches the asker live, or
the asker is answered from the session's log. (A resend while it ends,
among replicas: tests/server/replicas/test_takeover.py.)"""

from __future__ import annotations

import trio

from gemini_split.protocol import Error, Finished, GenerateContentRequest
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from tests.server.attach.test_attach_server import _text, hello

SCRIPT = [{"text": "the answer"}, {"text": "a second run"}]


async def _until_quiet(client, seconds: float = 0.5) -> list:
    got = []
    while True:
        with trio.move_on_after(seconds) as scope:
            got.append(await client.receive())
        if scope.cancelled_caught:
            return got


def _ends(events) -> list:
    return [type(e).__name__ for e in events if isinstance(e, Finished | Error)]


async def test_a_prompt_sent_again_after_its_request_ended_is_answered_from_the_log():
    """Its end was logged before the asker attached: the asker gets that
    request's events again, to it alone (unnumbered), and the model is not
    asked again; the asker may prompt again after it."""
    model = ScriptedModel(SCRIPT)
    request = GenerateContentRequest(id="r-mine", prompt="mine")
    async with open_test_service(model) as (_, address):
        async with hello(address, label="laptop") as (old, first):
            await old.send(request)
            with trio.fail_after(10):
                *_, done = await old.receive_until(lambda m: isinstance(m, Finished))
        async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                         last_seq=done.seq, label="laptop") as (new, _):
            await new.send(request)
            with trio.fail_after(10):
                seen = await new.receive_until(lambda m: isinstance(m, Finished | Error))
            seen += await _until_quiet(new)
            await new.send(GenerateContentRequest(id="r-next", prompt="next"))
            with trio.fail_after(10):
                after = await new.receive_until(lambda m: isinstance(m, Finished | Error))
    assert _ends(after) == ["Finished"] and _text(after) == "a second run", after
    answer = [e for e in seen if e.request_id == "r-mine"]
    assert answer[0].TYPE == "request_started" and _ends(answer) == ["Finished"], seen
    assert all(e.seq is None for e in answer), answer  # to the asker alone
    # Its start and end begin and end it for the asker; the answer between is a replay.
    assert [e.replayed for e in answer] == [False] + [True] * (len(answer) - 2) + [False]
    assert _text(answer) == "the answer"
    assert len(model.requests) == 2  # r-mine once, then r-next


async def test_another_prompt_under_an_id_the_session_has_run_is_refused_not_answered_from_the_log():
    """A client that numbers its ids afresh on each connection (or another
    client whose ids happen to match) sends a different prompt under an id
    the session has run: it gets a clear error, never the other request's
    answer, and the model is not asked."""
    model = ScriptedModel(SCRIPT)
    async with open_test_service(model) as (_, address):
        async with hello(address, label="laptop") as (old, first):
            await old.send(GenerateContentRequest(id="1", prompt="mine"))
            with trio.fail_after(10):
                *_, done = await old.receive_until(lambda m: isinstance(m, Finished))
        async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                         last_seq=done.seq, label="script") as (new, _):
            await new.send(GenerateContentRequest(id="1", prompt="something else"))
            with trio.fail_after(10):
                seen = await new.receive_until(lambda m: isinstance(m, Finished | Error))
            await new.send(GenerateContentRequest(id="2", prompt="next"))
            with trio.fail_after(10):
                after = await new.receive_until(lambda m: isinstance(m, Finished | Error))
    refusal = seen[-1]
    assert isinstance(refusal, Error) and refusal.code == "invalid_field", seen
    assert refusal.in_reply_to == "1" and "already names another request" in refusal.message
    assert "the answer" not in _text(seen)
    # The refused prompt never reached the model: the next one gets the script's second answer.
    assert _ends(after) == ["Finished"] and _text(after) == "a second run", after
