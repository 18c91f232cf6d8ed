"""gemini_split/dns_cache.py: inside ``shared_lookups`` a name is looked
up once however many connections ask for it at once, its answer kept
``ttl`` seconds, an error never kept; outside, every lookup is its own;
Trio's own connecting (happy eyeballs) goes through it, and so do the
model's connections by name (server/model/http1.py).

The lookups are the real ``socket.getaddrinfo`` of ``localhost`` (from
/etc/hosts), counted; only the failing and the stalled lookups stand in for
a resolver that fails or hangs."""

from __future__ import annotations

import socket
import threading

import pytest
import trio
import trio.testing

from gemini_split.dns_cache import CachingResolver, shared_lookups


@pytest.fixture
def shared():
    """The test's task (and the tasks it starts) in :func:`shared_lookups`."""
    with shared_lookups():
        yield


class Counted:
    """``socket.getaddrinfo``, counting its calls by host."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def __call__(self, host, *args):
        self.calls.append(host)
        return socket.getaddrinfo(host, *args)


async def test_a_hundred_lookups_at_once_of_one_name_make_one_and_all_get_its_answer(shared):
    counted = Counted()
    resolver = CachingResolver(lookup=counted)
    answers = []

    async def one() -> None:
        answers.append(await resolver.getaddrinfo(b"localhost", 8080, 0, socket.SOCK_STREAM))

    async with trio.open_nursery() as nursery:
        for _ in range(100):
            nursery.start_soon(one)
    assert counted.calls == [b"localhost"]
    expected = socket.getaddrinfo(b"localhost", 8080, 0, socket.SOCK_STREAM)
    assert answers == [expected] * 100
    # A caller may change its list: the kept answer is not.
    answers[0].clear()
    assert await resolver.getaddrinfo(b"localhost", 8080, 0, socket.SOCK_STREAM) == expected
    assert counted.calls == [b"localhost"]
    # Another port (or type) is another question.
    await resolver.getaddrinfo(b"localhost", 8081, 0, socket.SOCK_STREAM)
    assert counted.calls == [b"localhost"] * 2


async def test_an_answer_is_looked_up_again_once_its_time_is_over(autojump_clock, shared):
    counted = Counted()
    resolver = CachingResolver(ttl=10, lookup=counted)
    await resolver.getaddrinfo(b"localhost", 80)
    await trio.sleep(9.9)
    await resolver.getaddrinfo(b"localhost", 80)
    assert len(counted.calls) == 1
    await trio.sleep(0.2)
    await resolver.getaddrinfo(b"localhost", 80)
    assert len(counted.calls) == 2


async def test_the_oldest_answer_goes_when_more_names_than_kept_are_asked(shared):
    counted = Counted()
    resolver = CachingResolver(max_names=2, lookup=counted)
    for port in (1, 2, 3):  # three keys
        await resolver.getaddrinfo(b"localhost", port)
    await resolver.getaddrinfo(b"localhost", 3)
    await resolver.getaddrinfo(b"localhost", 2)
    assert len(counted.calls) == 3
    await resolver.getaddrinfo(b"localhost", 1)  # it went
    assert len(counted.calls) == 4


async def test_a_failed_lookup_fails_every_waiter_with_its_error_and_is_not_kept(shared):
    calls = []
    release = threading.Event()

    def failing(host, *args):
        calls.append(host)
        release.wait(5)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    resolver = CachingResolver(lookup=failing)
    errors = []

    async def one() -> None:
        try:
            await resolver.getaddrinfo(b"nowhere.invalid", 443)
        except socket.gaierror as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()  # all five waiting on the one lookup
        release.set()
    assert calls == [b"nowhere.invalid"]
    assert [(e.errno, e.strerror) for e in errors] == [(socket.EAI_NONAME, "Name or service not known")] * 5
    assert len({id(e) for e in errors}) == 5  # each its own, tracebacks apart
    with pytest.raises(socket.gaierror):
        await resolver.getaddrinfo(b"nowhere.invalid", 443)
    assert len(calls) == 2


async def test_when_the_looking_caller_is_cancelled_a_waiter_looks_up_for_itself(shared):
    first_started = threading.Event()
    hold_first = threading.Event()
    calls = []

    def lookup(host, *args):
        calls.append(host)
        if len(calls) == 1:
            first_started.set()
            hold_first.wait(5)  # a resolver that hangs, for the first caller only
        return socket.getaddrinfo(host, *args)

    resolver = CachingResolver(lookup=lookup)
    leader = trio.CancelScope()
    got = []

    async def first() -> None:
        with leader:
            await resolver.getaddrinfo(b"localhost", 80)

    async def waiter() -> None:
        got.append(await resolver.getaddrinfo(b"localhost", 80))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await trio.to_thread.run_sync(first_started.wait, 5)
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert not got  # waiting on the first caller's lookup
            leader.cancel()
    finally:
        hold_first.set()  # the abandoned thread ends on its own
    assert leader.cancelled_caught
    assert got == [socket.getaddrinfo(b"localhost", 80)]
    assert len(calls) == 2


async def test_trio_connects_by_name_through_it_one_lookup_for_twenty_connections(shared):
    counted = Counted()
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    previous = trio.socket.set_custom_hostname_resolver(CachingResolver(lookup=counted))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, _echo, listeners)
            for _ in range(20):
                async with await trio.open_tcp_stream("localhost", port) as stream:
                    await stream.send_all(b"ping")
                    assert await stream.receive_some(4) == b"ping"
            nursery.cancel_scope.cancel()
    finally:
        trio.socket.set_custom_hostname_resolver(previous)
    assert counted.calls == [b"localhost"]


async def _echo(stream: trio.SocketStream) -> None:
    async with stream:
        await stream.send_all(await stream.receive_some(4))


async def test_outside_shared_lookups_each_lookup_is_its_own_and_nothing_is_kept():
    """A name a session's tool asks for: a kept answer would tell one
    session what another looked up, by how fast it came."""
    counted = Counted()
    resolver = CachingResolver(lookup=counted)
    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(resolver.getaddrinfo, b"localhost", 80)
    await resolver.getaddrinfo(b"localhost", 80)
    assert counted.calls == [b"localhost"] * 6
