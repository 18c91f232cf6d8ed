"""Argument types shared by the command line's parsers (``type=`` callables).

Standard library only: the CLI shell imports this on every run, Tab included.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1, or an ``ArgumentTypeError`` saying why."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
