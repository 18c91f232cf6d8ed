"""Exit codes, the ones gemini-cli uses, so scripts written for it work.

:func:`exit_status_for` is the one place that decides which status an error
ends the program with. Imports stay light (no protocol, no trio): ``cli``
imports this module on every run, ``--version`` included.
"""

from __future__ import annotations

from enum import IntEnum

from gemini_split.errors import BadInput, ConfigurationError, MissingApiKey, SettingsError


class ExitStatus(IntEnum):
    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    AUTH = 41
    BAD_INPUT = 42
    CONFIG = 52  # a settings file gemini-split cannot use (gemini-cli's FatalConfigError)
    TURN_LIMIT = 53
    INTERRUPTED = 130


def _by_code() -> dict[str, ExitStatus]:
    from gemini_split.protocol import ErrorCode

    return {
        ErrorCode.MODEL_AUTH.value: ExitStatus.AUTH,
        ErrorCode.UNAUTHORIZED.value: ExitStatus.AUTH,
        ErrorCode.INVALID_REQUEST.value: ExitStatus.BAD_INPUT,
        ErrorCode.MESSAGE_TOO_LARGE.value: ExitStatus.BAD_INPUT,
        ErrorCode.MODEL_NOT_ALLOWED.value: ExitStatus.BAD_INPUT,
        ErrorCode.SESSION_EXISTS.value: ExitStatus.BAD_INPUT,
        ErrorCode.TURN_LIMIT.value: ExitStatus.TURN_LIMIT,
        ErrorCode.CANCELLED.value: ExitStatus.INTERRUPTED,
    }


def exit_status_for(error: BaseException | str) -> ExitStatus:
    """The exit status for a protocol error code, or for an exception.

    An exception that carries a protocol error code (``HandshakeFailed``,
    ``RequestFailed``…, as ``.code``) gets that code's status; a refused
    token or a missing API key is :attr:`~ExitStatus.AUTH`; unusable input
    :attr:`~ExitStatus.BAD_INPUT`; an unusable settings.json
    :attr:`~ExitStatus.CONFIG`; any other configuration problem
    :attr:`~ExitStatus.USAGE`; Ctrl-C :attr:`~ExitStatus.INTERRUPTED`;
    everything else (an unreachable server, a broken connection)
    :attr:`~ExitStatus.ERROR`.
    """
    if isinstance(error, str):
        return _by_code().get(error, ExitStatus.ERROR)
    if isinstance(error, KeyboardInterrupt):
        return ExitStatus.INTERRUPTED
    if isinstance(error, MissingApiKey):
        return ExitStatus.AUTH
    if isinstance(error, BadInput):
        return ExitStatus.BAD_INPUT
    if isinstance(error, SettingsError):
        return ExitStatus.CONFIG
    if isinstance(error, ConfigurationError):
        return ExitStatus.USAGE
    from gemini_split.transport import AuthenticationFailed

    if isinstance(error, AuthenticationFailed):
        return ExitStatus.AUTH
    code = getattr(error, "code", None)
    if isinstance(code, str):
        return _by_code().get(code, ExitStatus.ERROR)
    return ExitStatus.ERROR
