"""Keeping a client's session through a dropped connection: noticing a
silent server, reopening the connection with backoff and resuming.

:class:`Reconnector` belongs to one
:class:`~gemini_split.client.protocol_client.ProtocolClient`, seen through
:class:`ReconnectingClient` (this module never imports it). It probes a
server that went silent during a turn, reopens a connection the peer or the
network broke and hands the new stream and connection to the client, which
swaps them in and resumes the session from the last ``seq`` seen (it owns
its connection); then it finishes what the cut interrupted (a cancel, a
prompt never received, a request the server lost).

When to try again: a client that lost its server waits ``initial`` seconds (0.2), then twice
as long each time, up to ``maximum`` (10 s) between attempts, and gives up
once ``timeout`` (``--reconnect-timeout``, 120 s) has passed since the
connection dropped. Each wait is drawn between half and all of the nominal
delay ("equal jitter"), so a thousand clients cut by the same server restart
do not all knock at the same instant.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

import msgspec
import trio

from gemini_split.options import DEFAULT_RECONNECT_TIMEOUT
from gemini_split.protocol import Cancel, Connected, Connection, Error, ErrorCode, State
from gemini_split.transport import ConnectFailed, ConnectionBroken, ConnectionClosed, MessageStream, TransportError

from .failures import HandshakeFailed, RequestFailed
from .turn import Turn

#: Seconds the events the server logged before answering ``get_state`` may
#: take to arrive after the answer, before a request it no longer runs is
#: taken for lost.
CATCH_UP_TIMEOUT = 5.0


class ReconnectingClient(Protocol):
    """What a :class:`Reconnector` needs of its client
    (:class:`~gemini_split.client.protocol_client.ProtocolClient`)."""

    handshake_timeout: float

    @property
    def connected(self) -> Connected | None: ...

    @property
    def closed_reason(self) -> str | None: ...

    @property
    def current_turn(self) -> Turn | None: ...

    def on_connection(self, state: str, attempt: int, reason: str) -> None: ...

    async def resume_on(self, stream: MessageStream, conn: Connection) -> Connected: ...

    async def resend(self, turn: Turn) -> None: ...

    def end(self, reason: str) -> None: ...

    async def cut(self, reason: str) -> None: ...

    async def send(self, message: Cancel) -> None: ...

    async def get_state(self) -> State: ...

    @property
    def last_seq(self) -> int: ...

    def end_turn(self, turn: Turn, error: Error) -> None: ...

    async def probe(self, timeout: float) -> None: ...


class Backoff(msgspec.Struct):
    initial: float = 0.2
    maximum: float = 10.0
    timeout: float = DEFAULT_RECONNECT_TIMEOUT
    rng: random.Random = msgspec.field(default_factory=random.Random)

    def delays(self) -> Iterator[float]:
        """The waits before attempt 1, 2, 3…, ending when the next wait
        would pass ``timeout`` (the last one is cut to end at it)."""
        nominal = self.initial
        spent = 0.0
        while spent < self.timeout:
            delay = min(self.rng.uniform(nominal / 2, nominal), self.timeout - spent)
            spent += delay
            yield delay
            nominal = min(nominal * 2, self.maximum)


class Reconnector:
    """The reconnect, resume and silence-probing side of one client.

    ``reopen`` opens a new stream to the same server (None: never
    reconnect); ``timeout`` is how long to keep trying (0: do not). While a
    turn runs and nothing arrives for ``probe_after`` seconds, a
    ``get_state`` probe unanswered within ``probe_timeout`` ends the
    connection as broken."""

    def __init__(self, client: ReconnectingClient, reopen: Callable[[], Awaitable[MessageStream]] | None,
                 timeout: float, probe_after: float, probe_timeout: float):
        self._client = client
        self.reopen = reopen
        self.timeout = timeout
        self.probe_after = probe_after
        self.probe_timeout = probe_timeout
        #: Set when the peer or the network ended the connection (not us,
        #: not a fatal error): worth reconnecting.
        self.broken = False
        #: A new connection is being opened and handshaken.
        self.active = False
        self.last_heard = 0.0

    def heard(self) -> None:
        """Something arrived from the server (or silence is not worth probing)."""
        self.last_heard = trio.current_time()

    def possible(self) -> bool:
        """Whether a lost connection would be reopened."""
        return self.reopen is not None and self.timeout > 0 and self._client.connected is not None

    async def reconnect(self, nursery: trio.Nursery) -> bool:
        """After the connection broke: open a new one with jittered backoff
        for up to ``timeout`` seconds and resume the session from the last
        seq seen. Returns False when it is over for good (not broken by the
        peer, the server no longer has the session, or no server answered
        in time), with the client's ``closed_reason`` saying why."""
        client = self._client
        if not (self.broken and self.possible()):
            return False
        assert client.connected is not None and self.reopen is not None
        self.broken = False
        self.active = True
        lost_because = client.closed_reason or "the connection to the server was lost"
        last_failure = lost_because
        try:
            for attempt, delay in enumerate(Backoff(timeout=self.timeout).delays(), 1):
                await trio.sleep(delay)
                client.on_connection("reconnecting", attempt, lost_because)
                try:
                    with trio.fail_after(client.handshake_timeout):
                        stream = await self.reopen()
                except (TransportError, trio.TooSlowError) as exc:
                    last_failure = str(exc) or "no answer"
                    continue
                try:
                    await client.resume_on(stream, Connection("client"))
                except HandshakeFailed as exc:
                    if exc.code in (ErrorCode.UNKNOWN_SESSION.value, ErrorCode.UNAUTHORIZED.value):
                        client.end(
                            f"reconnected, but the server no longer has this session ({exc}); start a new one"
                            if exc.code == ErrorCode.UNKNOWN_SESSION.value else str(exc))
                        return False
                    last_failure = str(exc)
                    continue
                except (ConnectFailed, TransportError) as exc:
                    last_failure = str(exc)
                    continue
                self.heard()
                client.on_connection("reconnected", attempt, "")
                nursery.start_soon(self._after_reconnect)
                return True
            client.end(f"{lost_because}; could not reconnect within {self.timeout:g} s ({last_failure})")
            return False
        finally:
            self.active = False

    async def _after_reconnect(self) -> None:
        """Finish what the cut interrupted: a cancel the user asked for, a
        prompt the server never got (resent only when ``state`` says it
        is not running it; the replay has arrived by then), and a request
        the server no longer knows (it stopped before storing that the
        request had started: no end of it will ever come), which ends here
        ``interrupted``, as the server ends one it knows."""
        client = self._client
        turn = client.current_turn
        if turn is None or turn.done.is_set():
            return
        try:
            if turn.cancel_pending:
                turn.cancel_pending = False
                await client.send(Cancel(request_id=turn.request_id))
            state = await client.get_state()
            if turn.done.is_set() or state.active_request_id == turn.request_id:
                return
            if not turn.acknowledged:
                await client.resend(turn)  # the server never got it
                return
            # Not running, and its end (if the server logged one) is among
            # the events up to state.last_seq, which may still be on their
            # way (the state is answered before queued events).
            with trio.move_on_after(CATCH_UP_TIMEOUT):
                while client.last_seq < state.last_seq and not turn.done.is_set():
                    await trio.sleep(0.05)
            if not turn.done.is_set() and client.last_seq >= state.last_seq:
                client.end_turn(turn, Error(
                    request_id=turn.request_id, code=ErrorCode.INTERRUPTED.value,
                    message="interrupted: the server stopped while this request was running, before it had "
                            "stored it; it was not run again (the conversation goes on from the last "
                            "completed answer)"))
        except (RequestFailed, ConnectionClosed, ConnectionBroken):
            pass  # down again: the next reconnect tries again

    async def watch_for_silence(self) -> None:
        """Notice a server that vanished without closing (a network
        partition, a frozen host): while a turn runs and nothing has arrived
        for ``probe_after`` seconds, ask for the state; no answer within
        ``probe_timeout`` ends the connection. A live server answers at once,
        even while the model or a tool takes its time."""
        client = self._client
        while True:
            await trio.sleep_until(self.last_heard + self.probe_after)
            silent_for = trio.current_time() - self.last_heard
            if client.current_turn is None or silent_for < self.probe_after:
                if silent_for >= self.probe_after:
                    self.heard()  # idle: nothing to wait for
                continue
            if self.active:
                self.heard()
                continue
            try:
                await client.probe(self.probe_timeout)
            except RequestFailed as exc:
                if exc.code != "timeout":
                    self.heard()
                    continue  # the connection is down already: the reader deals with it
                reason = (
                    f"the server stopped answering (nothing for {silent_for:.0f} s, "
                    f"and no reply to a probe within {self.probe_timeout:g} s)"
                )
                self.broken = True  # a silent network is worth reconnecting through
                await client.cut(reason)
                self.heard()
