"""Hypothesis profiles for the fuzz layer.

``ci`` (the default) keeps the whole layer to a few seconds; ``long`` is for
maintainers hunting bugs (see README.md here)::

    GEMINI_SPLIT_FUZZ=long python -m pytest tests/protocol/fuzz -p no:timeout
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples every run: CI never flakes on a new one
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("GEMINI_SPLIT_FUZZ", "ci"))
