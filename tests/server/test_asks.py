"""One way to ask a client and wait (``request/asks.py``): client tool
calls, approval questions and hook requests all wait through it."""

from __future__ import annotations

import trio
import trio.testing

from gemini_split.server.session.request.asks import Asks


class Client:
    """Stands for a view: the asks only compare views by identity."""


async def test_the_first_answer_wins_and_a_later_one_finds_nothing_waiting():
    asks: Asks[str, str] = Asks()
    sent: list[str] = []
    answers: list[str | None] = []

    async def ask() -> None:
        answers.append(await asks.ask("k", "question", send=sent.append, timeout=10))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert sent == ["question"] and "k" in asks and [a.question for a in asks.pending()] == ["question"]
        asks.settle("k", "first")
        assert asks.waiting("k") is None  # a second answer is refused by its caller
    assert answers == ["first"]
    assert "k" not in asks and asks.pending() == []


async def test_no_answer_in_time_is_none_and_the_question_is_withdrawn(autojump_clock):
    asks: Asks[str, str] = Asks()
    sent: list[str] = []

    async def send(question: str) -> None:  # an awaitable send (a logged event) is awaited
        sent.append(question)

    assert await asks.ask("k", "question", send=send, timeout=5) is None
    assert sent == ["question"] and "k" not in asks


async def test_a_question_asked_of_one_client_is_answered_only_by_it_and_ends_when_it_leaves(autojump_clock):
    asks: Asks[str, str] = Asks()
    asked, other = Client(), Client()
    answers: list[str | None] = []

    async def ask() -> None:
        answers.append(await asks.ask("k", "q", send=lambda q: None, timeout=600, asked=asked))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert asks.waiting("k", other) is None and asks.waiting("k", asked) is not None
        asks.view_left(other)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []
        asks.view_left(asked)
    assert answers == [None]
    assert trio.current_time() < 600  # it did not wait for the timeout


async def test_the_logged_form_replaces_the_sent_one_once():
    asks: Asks[object, str] = Asks()

    class Event:
        def __init__(self, seq: int | None):
            self.seq = seq

    sent, first, second = Event(None), Event(7), Event(9)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: asks.ask("k", sent, send=lambda q: None, timeout=10))
        await trio.testing.wait_all_tasks_blocked()
        asks.logged("k", first)
        asks.logged("k", second)
        assert asks.waiting("k").question is first
        asks.settle("k", "done")
