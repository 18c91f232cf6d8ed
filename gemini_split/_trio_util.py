"""Small Trio helpers shared by the client and server sides."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_exceptions() -> Iterator[None]:
    """Re-raise an exception group holding exactly one exception (nested
    groups included) as that exception.

    Trio nurseries wrap whatever escapes them in an ExceptionGroup; callers
    of our context managers should see the one error that happened, as a
    plain exception they can catch. Groups of several are left alone."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None
