"""Transport cases for the conformance suite (shipped in
:mod:`gemini_split.testing.conformance`).

Each ``case_*.py`` module beside this file defines ``CASES``: a list of
:class:`TransportCase`. The suite runs every test against every case, so a new
transport joins by adding one module and nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from gemini_split.testing.conformance import TransportCase


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
