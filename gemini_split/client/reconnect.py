"""When to try again after a dropped connection: jittered exponential backoff.

A client that lost its server waits ``initial`` seconds (0.2), then twice
as long each time, up to ``maximum`` (10 s) between attempts, and gives up
once ``timeout`` (``--reconnect-timeout``, 120 s) has passed since the
connection dropped. Each wait is drawn between half and all of the nominal
delay ("equal jitter"), so a thousand clients cut by the same server restart
do not all knock at the same instant.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import msgspec

from gemini_split.options import DEFAULT_RECONNECT_TIMEOUT


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
