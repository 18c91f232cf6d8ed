"""What a connected client raises when the server refuses it or does not
answer (re-exported by :mod:`gemini_split.client.protocol_client`)."""

from __future__ import annotations

from gemini_split.transport import ConnectFailed, TransportError


class HandshakeFailed(ConnectFailed):
    """The server answered the handshake with an error, or with nonsense.
    ``code`` is the server's error code when it sent one."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class RequestFailed(TransportError):
    """A request (``get_state``, ``get_history``) got no answer: the server
    replied with an error, the connection ended, or ``timeout`` passed.
    ``code`` is the server's error code, ``connection_lost`` or ``timeout``."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code
