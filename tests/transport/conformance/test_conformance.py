"""The transport conformance suite on every transport gemini-split ships.

The suite is :class:`gemini_split.testing.conformance.TransportConformance`
(a third-party transport runs the same class); ``transport_case`` comes from
``conftest.py``: one case per ``case_*.py`` module beside this file.
"""

from __future__ import annotations

from gemini_split.testing.conformance import TransportConformance
from gemini_split.transport import scheme_of


class TestEveryTransport(TransportConformance):
    pass


def test_addresses_name_their_scheme():
    assert scheme_of("ws://127.0.0.1:1") == "ws"
    assert scheme_of("stdio:ssh box gemini-split serve --stdio") == "stdio"
    assert scheme_of("loopback:embedded") == "loopback"
