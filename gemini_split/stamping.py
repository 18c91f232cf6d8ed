"""Message ids and timestamps: the clock and randomness ``protocol/`` has none of.

A message is built unstamped; whoever sends it stamps it, once, just before
(or, when its ``id`` is needed earlier, as soon as it is built)::

    request = stamp(GenerateContentRequest(prompt="hi"))
    pending[request.id] = ...
    await stream.send(encode(request))

``stamp`` fills in only what is missing, so stamping twice changes nothing.
Tests that need reproducible ids build their own :class:`Stamper` with a fixed
prefix and clock.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from typing import TypeVar

from msgspec import UNSET
from msgspec.structs import replace

from gemini_split.protocol.messages import Message

M = TypeVar("M", bound=Message)


class Stamper:
    """Gives messages ids unique within this process (and very likely beyond:
    a random prefix per stamper) and millisecond timestamps from ``clock``
    (seconds since the epoch, :func:`time.time` by default)."""

    def __init__(self, *, prefix: str | None = None, clock: Callable[[], float] = time.time):
        self.prefix = prefix if prefix is not None else os.urandom(4).hex()
        self._ids = itertools.count(1)
        self._clock = clock

    def new_id(self) -> str:
        return f"{self.prefix}-{next(self._ids)}"

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    def __call__(self, message: M) -> M:
        """``message`` with its ``id`` and ``timestamp`` set where they were
        not (the same object when both were)."""
        if message.id is UNSET:
            if message.timestamp is UNSET:
                return replace(message, id=self.new_id(), timestamp=self.now_ms())
            return replace(message, id=self.new_id())
        if message.timestamp is UNSET:
            return replace(message, timestamp=self.now_ms())
        return message


stamp = Stamper()
"""The process's stamper: every sender uses it."""
