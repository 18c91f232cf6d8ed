"""Exit codes, the ones gemini-cli uses, so scripts written for it work."""

from __future__ import annotations

from enum import IntEnum

from gemini_split.protocol import ErrorCode


class ExitStatus(IntEnum):
    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    AUTH = 41
    BAD_INPUT = 42
    TURN_LIMIT = 53
    INTERRUPTED = 130


_BY_CODE = {
    ErrorCode.MODEL_AUTH.value: ExitStatus.AUTH,
    ErrorCode.UNAUTHORIZED.value: ExitStatus.AUTH,
    ErrorCode.INVALID_REQUEST.value: ExitStatus.BAD_INPUT,
    ErrorCode.MESSAGE_TOO_LARGE.value: ExitStatus.BAD_INPUT,
    ErrorCode.MODEL_NOT_ALLOWED.value: ExitStatus.BAD_INPUT,
    ErrorCode.TURN_LIMIT.value: ExitStatus.TURN_LIMIT,
    ErrorCode.CANCELLED.value: ExitStatus.INTERRUPTED,
}


def exit_status_for(error_code: str) -> ExitStatus:
    """The exit status for a protocol error code."""
    return _BY_CODE.get(error_code, ExitStatus.ERROR)
