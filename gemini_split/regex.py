"""Regular expressions a model (or a file it wrote) chooses, matched in
linear time.

Python's ``re`` backtracks: ``(a+)+$`` on 35 characters, or the regex of a
glob such as ``*a*a*a*a*a*a*a*a*a*a*a*a*b`` on a long name, runs for
minutes while holding the GIL. Everything model-controlled that is matched
in-process goes through :func:`compile_linear` instead, which uses RE2
(``google-re2``): no backreferences or lookaround, but a guaranteed linear
match time. ``re2`` is imported on first use.
"""

from __future__ import annotations

from typing import Any


def compile_linear(pattern: str, *, case_sensitive: bool = True) -> Any:
    """An RE2 pattern object (``search``/``match``/``fullmatch`` as in
    ``re``). Raises :class:`ValueError` with RE2's reason for a pattern it
    cannot compile. Errors are not logged to stderr."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = case_sensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None


def escape_char(c: str) -> str:
    """``c`` as an RE2 literal (also valid for Python's ``re``)."""
    if c.isalnum() or c == "_" or ord(c) > 0x7F:
        return c
    if 0x21 <= ord(c) <= 0x7E:
        return "\\" + c  # any ASCII punctuation may be escaped
    return f"\\x{ord(c):02x}"  # space, control characters
