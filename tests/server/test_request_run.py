"""One request lifecycle for every kind (``request/run.py``): a body runs,
its end is sent once, after the save."""

from __future__ import annotations

import trio
import trio.testing

from gemini_split.protocol import Error, ErrorCode, Finished, Usage
from gemini_split.server.session.priority import AnswerFirst
from gemini_split.server.session.request.run import Outcome, RequestFailed, RequestRun, RequestState


class Body:
    paced = True

    def __init__(self, work):
        self.work = work
        self.steps: list[str] = []

    async def run(self, pace) -> None:
        self.steps.append("run")
        await self.work()

    def ended(self) -> None:
        self.steps.append("ended")

    def outcome(self) -> Outcome:
        self.steps.append("outcome")
        return Outcome(usage=Usage(), turns=2)


async def _run(body: Body, *, cancel_because=None) -> tuple[list, list[str]]:
    told: list = []
    steps = body.steps

    async def record_start(request_id: str) -> None:
        await trio.sleep(0)
        steps.append("recorded")

    async def save(request_id: str) -> None:
        steps.append("saved")

    run = RequestRun("r1", body, origin=None, priority=AnswerFirst(), record_start=record_start, save=save,
                     emit_nowait=lambda event: (steps.append("told"), told.append(event)),
                     on_ended=lambda: steps.append("not busy"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run, nursery)
        if cancel_because is not None:
            await trio.testing.wait_all_tasks_blocked()
            run.cancel(cancel_because)
    assert run.state is RequestState.ENDED
    return told, steps


async def test_finished_is_sent_once_after_the_start_record_and_the_save():
    told, steps = await _run(Body(lambda: trio.sleep(0)))
    assert steps == ["run", "recorded", "not busy", "ended", "outcome", "saved", "told"]
    assert len(told) == 1 and isinstance(told[0], Finished)
    assert (told[0].request_id, told[0].turns, told[0].reason) == ("r1", 2, "stop")


async def test_a_bug_in_a_body_ends_its_request_with_internal_not_the_session():
    async def broken() -> None:
        raise KeyError("x")

    told, _ = await _run(Body(broken))
    assert [type(e) for e in told] == [Error] and told[0].code == ErrorCode.INTERNAL.value


async def test_a_bodys_own_failure_carries_its_code():
    async def refused() -> None:
        raise RequestFailed("nothing to compress", ErrorCode.INVALID_REQUEST)

    told, _ = await _run(Body(refused))
    assert (told[0].code, told[0].message) == (ErrorCode.INVALID_REQUEST.value, "nothing to compress")


async def test_cancelled_by_the_server_it_ends_with_the_servers_reason():
    told, _ = await _run(Body(trio.sleep_forever), cancel_because=(ErrorCode.SHUTTING_DOWN, "the server stops"))
    assert (told[0].code, told[0].message) == (ErrorCode.SHUTTING_DOWN.value, "the server stops")


async def test_a_user_cancel_finishes_cancelled():
    body = Body(trio.sleep_forever)
    told: list = []
    run = RequestRun("r1", body, origin=None, priority=AnswerFirst(), record_start=lambda rid: trio.sleep(0),
                     save=lambda rid: trio.sleep(0), emit_nowait=told.append, on_ended=lambda: None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run.run, nursery)
        await trio.testing.wait_all_tasks_blocked()
        run.cancel()
    assert [(type(e), e.reason) for e in told] == [(Finished, "cancelled")]
