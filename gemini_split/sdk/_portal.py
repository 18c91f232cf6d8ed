"""A Trio loop in a thread of its own, for asyncio and blocking callers.

The SDK's core is Trio code (:mod:`._core`). A Trio program runs it on its
own loop; an asyncio program or a plain script gets a :class:`Portal`: one
daemon thread running ``trio.run``, and calls carried into it —
:meth:`Portal.call` blocks the calling thread (``trio.from_thread.run``),
:meth:`Portal.acall` awaits on the caller's asyncio loop (a Trio task whose
outcome resolves an asyncio future; cancelling the awaiting asyncio task
cancels the Trio task). Long-lived resources (the client, its sessions)
are held by tasks of the portal's nursery (:meth:`Portal.hold`), as Trio's
structured concurrency wants, and released in order.

Why a thread, not ``trio-asyncio`` or Trio's guest mode: the core stays
plain Trio with no second event loop inside it, the same code serves
blocking callers (who have no loop to host a guest), and the bridge is
this one small module over two documented Trio entry points
(``TrioToken.run_sync_soon`` and ``trio.from_thread.run``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import outcome
import trio

from ._core import Closed

__all__ = ["Portal"]

T = TypeVar("T")


class Portal:
    """A Trio loop running in a daemon thread (see the module's docstring).
    Start it with :meth:`start`; :meth:`stop` (or :meth:`astop`) ends it,
    cancelling whatever still runs there."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="gemini-split-sdk", daemon=True)
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._failed: BaseException | None = None

    @classmethod
    def start(cls) -> Portal:
        portal = cls()
        portal._thread.start()
        portal._ready.wait()
        if portal._failed is not None:
            raise portal._failed
        return portal

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # reported to start(), else nobody waits for it
            self._failed = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._ready.set()
            await trio.sleep_forever()

    @property
    def token(self) -> trio.lowlevel.TrioToken:
        assert self._token is not None
        return self._token

    # --- calls ----------------------------------------------------------------

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` on the portal's loop, from another thread;
        its result or exception. Raises :class:`~._core.Closed` once the
        portal has stopped."""
        try:
            return trio.from_thread.run(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise Closed("the client is closed") from None

    async def acall(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` on the portal's loop, awaited on the calling
        asyncio loop. Cancelling the caller cancels the call. Raises
        :class:`~._core.Closed` once the portal has stopped."""
        loop = asyncio.get_running_loop()
        call = _Call(fn, args, loop)
        self._soon(self._spawn, call)
        try:
            return await call.future
        except asyncio.CancelledError:
            try:
                self._soon(call.cancel)
            except Closed:
                raise asyncio.CancelledError from None
            await asyncio.shield(call.finished)  # as under Trio: cancelled, the call has ended when this returns
            raise

    def _spawn(self, call: _Call) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(call.run)

    def _soon(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            self.token.run_sync_soon(fn, *args)
        except trio.RunFinishedError:
            raise Closed("the client is closed") from None

    # --- resources ----------------------------------------------------------------

    async def hold(self, resource: AbstractAsyncContextManager[T]) -> tuple[T, Held]:
        """(On the portal's loop) enter ``resource`` in a task of the portal's
        nursery and keep it entered until the returned :class:`Held` is
        released. Raises what entering it raises."""
        assert self._nursery is not None
        held = Held()
        value = await self._nursery.start(held.run, resource)
        return value, held

    # --- ending ----------------------------------------------------------------

    def stop(self) -> None:
        """End the loop (cancelling what runs there) and wait for the thread."""
        try:
            self._soon(self._cancel)
        except Closed:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join()

    async def astop(self) -> None:
        """:meth:`stop` for an asyncio caller."""
        try:
            self._soon(self._cancel)
        except Closed:
            pass
        await asyncio.to_thread(self._thread.join)

    def _cancel(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()


class Held:
    """A resource entered by a task of the portal (:meth:`Portal.hold`)."""

    def __init__(self) -> None:
        self._release = trio.Event()
        self._done = trio.Event()
        self._error: BaseException | None = None

    async def run(self, resource: AbstractAsyncContextManager[Any], *, task_status: Any) -> None:
        started = False
        try:
            async with resource as value:
                task_status.started(value)
                started = True
                await self._release.wait()
        except BaseException as exc:
            if not started or isinstance(exc, trio.Cancelled):
                raise
            self._error = exc  # said to release(), not to the portal's nursery
        finally:
            self._done.set()

    async def release(self) -> None:
        """(On the portal's loop) leave the resource; raises what leaving it raised."""
        self._release.set()
        await self._done.wait()
        if self._error is not None:
            raise self._error


class _Call:
    """One :meth:`Portal.acall`: the Trio task and the asyncio future."""

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...], loop: asyncio.AbstractEventLoop):
        self._fn, self._args = fn, args
        self._loop = loop
        #: The call's outcome, for the caller.
        self.future: asyncio.Future[Any] = loop.create_future()
        #: Set once the Trio task has ended, however.
        self.finished: asyncio.Future[None] = loop.create_future()
        self._scope = trio.CancelScope()

    async def run(self) -> None:
        result: outcome.Outcome = outcome.Error(Closed("the client is closed"))
        with self._scope:
            result = await outcome.acapture(self._fn, *self._args)
        try:
            self._loop.call_soon_threadsafe(self._resolve, result)
        except RuntimeError:
            pass  # the asyncio loop is closed: nobody waits for it

    def cancel(self) -> None:
        self._scope.cancel()

    def _resolve(self, result: outcome.Outcome) -> None:
        if not self.finished.done():
            self.finished.set_result(None)
        if self.future.done():
            return
        if isinstance(result, outcome.Error) and isinstance(result.error, trio.Cancelled):
            self.future.set_exception(Closed("the client is closed"))
        elif isinstance(result, outcome.Error):
            self.future.set_exception(result.error)
        else:
            self.future.set_result(result.unwrap())
