"""Transport cases for the conformance suite.

Each ``case_*.py`` module beside this file defines ``CASES``: a list of
:class:`TransportCase`. The suite runs every test against every case, so a new
transport joins by adding one module and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import pytest

from gemini_split.transport import ConnectOptions, ServeOptions


@dataclass
class TransportCase:
    """How to run the echo server over one transport.

    ``start`` starts the server (in ``nursery``, with ``serve_options``) and
    returns the address a client connects to; cancelling ``nursery`` stops it. ``connect_options`` returns the
    options a client needs (a CA file, a token…).
    """

    name: str
    start: Callable[[Any, ServeOptions], Awaitable[str]]
    connect_options: Callable[[], ConnectOptions] = field(default=ConnectOptions)
    #: An address where nothing listens (default: the case's own, once stopped).
    dead_address: str | None = None


def _all_cases() -> list[TransportCase]:
    cases: list[TransportCase] = []
    package = importlib.import_module(__package__)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("case_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            cases.extend(module.CASES)
    return cases


@pytest.fixture(params=_all_cases(), ids=lambda case: case.name)
def transport_case(request) -> TransportCase:
    return request.param
