"""The shipped suite run the way its docstring tells a third party to: a
subclass with its own ``transport_case`` whose transport is handed over
directly, not found through the entry-point registry."""

from __future__ import annotations

import pytest

from gemini_split.testing.conformance import TransportCase, TransportConformance, echo_handler
from gemini_split_loopback import LoopbackTransport

MINE = LoopbackTransport()  # a fresh instance, as a plugin of one's own would be


async def _start(nursery, options):
    return await nursery.start(MINE.serve, "loopback:", echo_handler, options)


class TestAnUnregisteredTransport(TransportConformance):
    @pytest.fixture
    def transport_case(self):
        return TransportCase("mine", _start, transport=MINE)
