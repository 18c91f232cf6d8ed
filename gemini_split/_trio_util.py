"""Small Trio helpers shared by the client and server sides."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def single_exceptions() -> Iterator[None]:
    """Re-raise an exception group holding exactly one exception (nested
    groups included) as that exception.

    Trio nurseries wrap whatever escapes them in an ExceptionGroup; callers
    of our context managers should see the one error that happened, as a
    plain exception they can catch. Groups of several are left alone."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None


#: accept() errors that mean "out of resources for now", not a broken
#: listener (trio's own list): wait and try again.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class AcceptBackoff:
    """Waiting out accept() failures for lack of resources (at the
    file-descriptor limit, say), quietly: the first failure of a run is
    logged once, in one line, marked as a refusal (so
    :mod:`gemini_split.log_limits` bounds it however often it happens), the
    waits double from ``first`` to ``most`` seconds while accept keeps
    failing, and the first success after a run logs one line saying so.
    (Trio's own accept loop logs a traceback every 0.1 s instead.)"""

    def __init__(self, where: str, logger: logging.Logger, *, first: float = 0.05, most: float = 1.0):
        self.where = where
        self.log = logger
        self.first = first
        self.most = most
        self._failures = 0
        self._since = 0.0

    async def failed(self, exc: OSError) -> None:
        """Log (at the start of a run) and wait before the next accept."""
        import trio

        if not self._failures:
            self._since = trio.current_time()
            self.log.warning("cannot accept connections on %s: %s (%s); waiting, then retrying",
                             self.where, errno.errorcode.get(exc.errno or 0, exc.errno), os.strerror(exc.errno or 0),
                             extra={"refusal": "accept failed"})
        self._failures += 1
        await trio.sleep(min(self.most, self.first * 2 ** min(self._failures - 1, 16)))

    def succeeded(self) -> None:
        """A connection was accepted: end a run of failures."""
        if self._failures:
            import trio

            self.log.warning("accepting connections on %s again, after %d failed tries in %.1f s",
                             self.where, self._failures, trio.current_time() - self._since)
            self._failures = 0


async def serve_listeners_quietly(handler: Callable[[Any], Awaitable[object]], listeners: list[Any], *,
                                  where: str, logger: logging.Logger, handler_nursery: Any,
                                  task_status: Any) -> None:
    """:func:`trio.serve_listeners`, but accept() failing for lack of
    resources (EMFILE…) is waited out with :class:`AcceptBackoff` instead of
    a traceback every 0.1 s. Each accepted stream goes to ``handler`` in
    ``handler_nursery`` and is closed when it returns. Never returns."""
    import trio

    async def run(stream: Any) -> None:
        try:
            await handler(stream)
        finally:
            await trio.aclose_forcefully(stream)

    async def accept_from(listener: Any) -> None:
        backoff = AcceptBackoff(where, logger)
        async with listener:
            while True:
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    await backoff.failed(exc)
                    continue
                backoff.succeeded()
                handler_nursery.start_soon(run, stream)

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(accept_from, listener)
        task_status.started(listeners)
