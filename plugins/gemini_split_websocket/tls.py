"""TLS contexts for ``wss://``, and what to tell the user when TLS fails."""

from __future__ import annotations

import ssl

from gemini_split.errors import ConfigurationError
from gemini_split.transport import ConnectFailed


def server_context(cert_file: str, key_file: str | None) -> ssl.SSLContext:
    """A server context from PEM files (``key_file`` may be None when the
    certificate file also holds the key). Raises ConfigurationError."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        key = f" and key {key_file}" if key_file else ""
        raise ConfigurationError(
            f"cannot load the TLS certificate {cert_file}{key}: "
            f"{getattr(exc, 'strerror', None) or exc}; pass PEM files with "
            "--tls-cert and --tls-key"
        ) from exc
    return context


def client_context(ca_file: str | None, insecure: bool) -> ssl.SSLContext:
    """A client context trusting ``ca_file`` (else the system's CAs); with
    ``insecure`` it verifies nothing (the CLI warns about that, not us)."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConnectFailed(
            f"cannot use the CA file {ca_file}: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def describe_handshake_failure(public_address: str, exc: BaseException) -> str:
    """A message for a failed client TLS handshake that says what to do."""
    cause = exc.__cause__ or exc
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            f"TLS certificate verify failed for {public_address}: "
            f"{cause.verify_message or cause.reason}. If the server uses its own "
            "certificate authority, pass --ca FILE (or --insecure, for testing only)"
        )
    if isinstance(cause, ssl.SSLError):
        return (
            f"TLS handshake with {public_address} failed ({cause.reason or cause}); "
            "is the server serving wss:// (started with --tls-cert)?"
        )
    return (
        f"TLS handshake with {public_address} failed: the connection was closed; "
        "is the server serving wss:// (started with --tls-cert)?"
    )
