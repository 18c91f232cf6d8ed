"""The paired-browser contract every session-store backend keeps
(``gemini_split/server/store/pairing.py``): ``serve --web``'s codes and
browsers live where the sessions do. Each test runs on every backend (the
``store`` fixture of test_store_contract.py: memory, SQLite, a real
redis-server)."""

from __future__ import annotations

import hashlib
import time

import trio

from gemini_split.server.store.pairing import ALL, BrowserRecord, PairingCode

from tests.store.test_store_contract import store  # noqa: F401  (the fixture, per backend)

MAX = 3


def h(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def browser(bid: str, user: str = "alice", *, now: float | None = None, expires_in: float = 3600,
            last_used: float | None = None) -> dict:
    now = time.time() if now is None else now
    return dict(id=bid, user=user, cookie_hash=h(f"cookie-{bid}"), created=now, expires=now + expires_in,
                         last_used=now if last_used is None else last_used, user_agent="Firefox/1 ✓",
                         permissions=("read",))


async def add_code(pairing, secret: str, user: str = "alice", *, now: float, ttl: float = 600) -> None:
    await pairing.add_code(h(secret), user=user, expires=now + ttl, permissions=("read", "write"),
                           keep_until=now + 2 * ttl, max_per_user=MAX, now=now)


async def add(pairing, fields: dict) -> list[str]:
    record, dropped = await pairing.add_browser(max_per_user=MAX, **fields)
    assert record == BrowserRecord(**fields)
    return dropped


async def test_a_pairing_code_works_once_and_is_then_known_as_used(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        await pairing.open()
        await add_code(pairing, "code-1", now=now)
        first = await pairing.take_code(h("code-1"), now + 1)
        again = await pairing.take_code(h("code-1"), now + 2)
        unknown = await pairing.take_code(h("never-given"), now + 2)
    assert first == ("ok", PairingCode(user="alice", expires=now + 600, permissions=("read", "write"), used=True))
    assert again == ("used", None)
    assert unknown == ("unknown", None)


async def test_a_code_taken_by_many_at_once_works_for_exactly_one(store):
    pairing = store.paired_browsers()
    now = time.time()
    results = []

    async def take():
        results.append((await pairing.take_code(h("contested"), now + 1))[0])

    with trio.fail_after(30):
        await add_code(pairing, "contested", now=now)
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(take)
    assert sorted(results) == ["ok"] + ["used"] * 7


async def test_an_expired_code_says_so_until_it_is_forgotten(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        await add_code(pairing, "late", now=now, ttl=600)
        expired = await pairing.take_code(h("late"), now + 601)
        forgotten = await pairing.take_code(h("late"), now + 1201)
        fresh = await pairing.take_code(h("late"), now + 1)  # the expired attempt did not use it
    assert expired == ("expired", None)
    assert forgotten == ("unknown", None)
    assert fresh[0] == "ok"


async def test_a_user_keeps_only_the_newest_unused_codes(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        for n in range(MAX + 2):
            await add_code(pairing, f"mine-{n}", now=now + n)
        await add_code(pairing, "bobs", "bob", now=now)
        taken = [(await pairing.take_code(h(f"mine-{n}"), now + 10))[0] for n in range(MAX + 2)]
        bobs = (await pairing.take_code(h("bobs"), now + 10))[0]
    assert taken == ["unknown", "unknown"] + ["ok"] * MAX
    assert bobs == "ok"


async def test_a_browser_is_found_by_its_cookies_hash_and_listed_for_its_user_only(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        first, second, bobs = browser("b1", now=now), browser("b2", now=now + 1), browser("b3", "bob", now=now)
        for b in (first, second, bobs):
            assert await add(pairing, b) == []
        first, second, bobs = (BrowserRecord(**b) for b in (first, second, bobs))
        found = await pairing.browser_by_cookie(h("cookie-b2"), now + 2)
        nothing = await pairing.browser_by_cookie(h("forged"), now + 2)
        mine = await pairing.browsers("alice", now + 2)
        theirs = await pairing.browsers("bob", now + 2)
        await pairing.touch("b1", now + 50)
        touched = await pairing.browser_by_cookie(h("cookie-b1"), now + 60)
        await pairing.touch("gone", now + 50)  # nothing to do, no error
    assert found == second and nothing is None
    assert mine == [first, second] and theirs == [bobs]
    assert touched.last_used == now + 50


async def test_a_user_keeps_only_the_most_recently_used_browsers(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        for n in range(MAX):
            await add(pairing, browser(f"b{n}", now=now, last_used=now + 10 - n))
        await add(pairing, browser("bob", "bob", now=now, last_used=now - 100))
        dropped = await add(pairing, browser("new", now=now + 20))
        left = [b.id for b in await pairing.browsers("alice", now + 21)]
        gone = await pairing.browser_by_cookie(h(f"cookie-b{MAX - 1}"), now + 21)
        bobs = await pairing.browsers("bob", now + 21)
    assert dropped == [f"b{MAX - 1}"]  # the least recently used
    assert sorted(left) == sorted([*(f"b{n}" for n in range(MAX - 1)), "new"])
    assert gone is None and [b.id for b in bobs] == ["bob"]


async def test_an_expired_browser_is_refused_and_no_longer_listed(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        await add(pairing, browser("old", now=now, expires_in=60))
        await add(pairing, browser("young", now=now, expires_in=3600))
        refused = await pairing.browser_by_cookie(h("cookie-old"), now + 61)
        listed = [b.id for b in await pairing.browsers("alice", now + 61)]
    assert refused is None
    assert listed == ["young"]


async def test_revoking_forgets_only_the_users_own_browsers(store):
    pairing = store.paired_browsers()
    now = time.time()
    with trio.fail_after(30):
        for bid, user in (("a1", "alice"), ("a2", "alice"), ("a3", "alice"), ("b1", "bob")):
            await add(pairing, browser(bid, user, now=now))
        by_bob = await pairing.revoke("bob", "a1")
        one = await pairing.revoke("alice", "a1")
        twice = await pairing.revoke("alice", "a1")
        cookie = await pairing.browser_by_cookie(h("cookie-a1"), now + 1)
        rest = await pairing.revoke("alice", ALL)
        left = await pairing.browsers("alice", now + 1)
        bobs = [b.id for b in await pairing.browsers("bob", now + 1)]
    assert by_bob == [] and one == ["a1"] and twice == []
    assert cookie is None
    assert sorted(rest) == ["a2", "a3"] and left == []
    assert bobs == ["b1"]
