"""A server's lookups of the model's endpoint: each answer kept a few
seconds, one lookup in flight per name; any other name as Trio looks it up.

Trio resolves every host name in a worker thread (``getaddrinfo`` blocks),
one thread hop per connection. A server opening many connections to one
host at once (a burst of sessions, each a new connection to the model's
endpoint) pays that hop for each of them, through at most 40 threads at a
time (what that costs a burst: docs/performance.md); with a real resolver
each lookup is a network round trip too. aiohttp's connector keeps its
answers 10 s the same way.

:class:`CachingResolver` is a :class:`trio.abc.HostnameResolver`; ``serve``
installs it for its whole run (:func:`trio.socket.set_custom_hostname_resolver`).
Trio still answers numeric addresses itself, and still races the addresses
of a name (happy eyeballs).

Only lookups made inside :func:`shared_lookups` are kept and shared: the
model's connections (``server/model/http1.py``), to the endpoint the
operator configured. Any other name — one a session's tool asks for (a web
fetch, an MCP server's URL) — is looked up afresh each time, as without
this module: a kept answer would tell one session, by how fast it came,
what another had looked up in the last seconds.

Contract, inside :func:`shared_lookups` (outside it, each lookup is the
worker-thread ``getaddrinfo`` Trio makes without a resolver):

- An answer is reused for ``ttl`` seconds (Trio's clock), then looked up
  again; at most ``max_names`` answers are kept (the oldest go first).
- Lookups of the same name, port, family, type, protocol and flags at the
  same time share one: the others wait for its answer, or its error.
- An error (``socket.gaierror``: no such name, the resolver unreachable) is
  never kept: each waiter gets its own copy of it, and the next lookup asks
  again.
- A lookup whose caller is cancelled is abandoned (its thread finishes
  alone, as Trio's own); a caller waiting on it looks up for itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import socket
from collections.abc import Callable, Iterator
from typing import Any

import trio

#: Seconds an answer is reused (aiohttp's ``ttl_dns_cache`` default).
TTL = 10.0
#: Answers kept at most.
MAX_NAMES = 256

Key = tuple[Any, Any, int, int, int, int]

#: Whether the running task's lookups may be kept and shared (see
#: :func:`shared_lookups`).
_SHARED: contextvars.ContextVar[bool] = contextvars.ContextVar("dns_cache_shared", default=False)


@contextlib.contextmanager
def shared_lookups() -> Iterator[None]:
    """The lookups made inside (by this task, and by tasks it starts) may
    be kept and shared: use it for names the operator configured, never
    for one a session chose."""
    token = _SHARED.set(True)
    try:
        yield
    finally:
        _SHARED.reset(token)


class CachingResolver(trio.abc.HostnameResolver):
    """``getaddrinfo`` answers kept ``ttl`` seconds, one lookup in flight
    per key, inside :func:`shared_lookups`; ``lookup`` does the blocking
    lookup (in a worker thread)."""

    def __init__(self, *, ttl: float = TTL, max_names: int = MAX_NAMES,
                 lookup: Callable[..., list[Any]] = socket.getaddrinfo):
        self._ttl = ttl
        self._max_names = max_names
        self._lookup = lookup
        #: key → (expiry on Trio's clock, answer), oldest first.
        self._answers: dict[Key, tuple[float, list[Any]]] = {}
        self._in_flight: dict[Key, _Lookup] = {}

    async def getaddrinfo(self, host: bytes | None, port: bytes | str | int | None, family: int = 0,
                          type: int = 0, proto: int = 0, flags: int = 0) -> list[Any]:  # noqa: A002 - Trio's name
        key = (host, port, family, type, proto, flags)
        if not _SHARED.get():
            return await trio.to_thread.run_sync(self._lookup, *key, abandon_on_cancel=True)
        while True:
            kept = self._answers.get(key)
            if kept is not None:
                if trio.current_time() < kept[0]:
                    await trio.lowlevel.checkpoint()
                    return list(kept[1])
                del self._answers[key]
            pending = self._in_flight.get(key)
            if pending is None:
                return await self._look_up(key)
            await pending.done.wait()
            if pending.answer is not None:
                return list(pending.answer)
            if pending.error is not None:
                raise copy.copy(pending.error)
            # Its caller was cancelled: ask again (this task may lead now).

    async def _look_up(self, key: Key) -> list[Any]:
        pending = self._in_flight[key] = _Lookup()
        try:
            answer = await trio.to_thread.run_sync(self._lookup, *key, abandon_on_cancel=True)
        except Exception as exc:
            pending.error = exc
            raise
        else:
            pending.answer = answer
            self._keep(key, answer)
            return list(answer)
        finally:
            del self._in_flight[key]
            pending.done.set()

    def _keep(self, key: Key, answer: list[Any]) -> None:
        if self._ttl <= 0:
            return
        while len(self._answers) >= self._max_names:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = (trio.current_time() + self._ttl, answer)

    async def getnameinfo(self, sockaddr: tuple[str, int] | tuple[str, int, int, int], flags: int) -> tuple[str, str]:
        return await trio.to_thread.run_sync(socket.getnameinfo, sockaddr, flags, abandon_on_cancel=True)


class _Lookup:
    """One lookup in flight: ``done`` once it has an answer or an error
    (neither: its caller was cancelled)."""

    __slots__ = ("done", "answer", "error")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.answer: list[Any] | None = None
        self.error: Exception | None = None
