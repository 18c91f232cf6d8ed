"""A local fake of Google's OAuth token endpoint and of the GCE metadata
server, for the real google-auth.

google-auth fetches a service account's token from the ``token_uri`` of its
JSON key and refreshes an authorized user's (``gcloud auth
application-default login``) at the file's ``token_uri``, both of which may
be ``http://127.0.0.1:PORT/token``; ``GCE_METADATA_HOST`` and
``GCE_METADATA_IP`` move the metadata server (:attr:`FakeGoogleAuth.metadata_env`).
So the whole credential flow runs offline against this one server:

``POST /token``
    ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` (a service
    account's signed assertion; its ``iss`` must be the account's email) or
    ``grant_type=refresh_token`` (the authorized user's refresh token must
    match): ``{"access_token", "expires_in", "token_type": "Bearer"}``; a
    wrong assertion or refresh token answers ``400 invalid_grant``.
``GET /`` (the metadata server's ping), ``GET /computeMetadata/v1/…``
    ``instance/service-accounts/default/`` (the account's email and scopes),
    ``instance/service-accounts/default/token``, ``project/project-id``,
    ``universe/universe-domain``; each needs ``Metadata-Flavor: Google``.

Tokens live ``lifetime`` seconds (short lifetimes make expiry and refresh
happen inside a test); :meth:`FakeGoogleAuth.valid` says whether a bearer
token was issued here and has not expired (hand it to ``FakeGemini(
access_token=…)``). ``mode`` makes the token endpoints misbehave: ``"down"``
(503), ``"garbage"`` (200 with a body that is not a token), and ``delay``
holds every token answer back. ``token_requests`` counts token requests.
Standard library plus ``cryptography`` (which google-auth uses to sign) for
the test service account's key.
"""

from __future__ import annotations

import base64
import itertools
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeGoogleAuth"]

_JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _send(self, status: int, body: bytes | str | dict, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _misbehave(self) -> bool:
        fake: FakeGoogleAuth = self.server.fake
        with fake._lock:
            fake.token_requests += 1
        if fake.delay:
            fake._stopping.wait(fake.delay)
        if fake.mode == "down":
            self._send(503, {"error": "temporarily_unavailable", "error_description": "the fake is down"})
            return True
        if fake.mode == "garbage":
            self._send(200, b"<html>this is not a token</html>", "text/html")
            return True
        return False

    def do_POST(self) -> None:
        fake: FakeGoogleAuth = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        if urlsplit(self.path).path != "/token":
            return self._send(404, {"error": "not_found"})
        if self._misbehave():
            return
        grant = form.get("grant_type")
        if grant == _JWT_GRANT:
            claims = _claims(form.get("assertion", ""))
            if claims.get("iss") != fake.email:
                return self._send(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
        elif grant == "refresh_token":
            if form.get("refresh_token") != fake.refresh_token:
                return self._send(400, {"error": "invalid_grant", "error_description": "Bad Request"})
        else:
            return self._send(400, {"error": "unsupported_grant_type"})
        self._send(200, fake._issue())

    def do_GET(self) -> None:
        fake: FakeGoogleAuth = self.server.fake
        path = urlsplit(self.path).path
        flavor = {"Metadata-Flavor": "Google"}
        if path == "/":
            return self._send(200, "", "text/plain", flavor)
        if self.headers.get("Metadata-Flavor") != "Google":
            return self._send(403, "Missing Metadata-Flavor:Google header.", "text/plain", flavor)
        rest = path.removeprefix("/computeMetadata/v1/")
        if rest in ("instance/service-accounts/default/", "instance/service-accounts/default"):
            return self._send(200, {"email": fake.email, "aliases": ["default"],
                                    "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}, headers=flavor)
        if rest == "instance/service-accounts/default/token":
            if self._misbehave():
                return
            return self._send(200, fake._issue(), headers=flavor)
        if rest == "project/project-id":
            return self._send(200, fake.project, "text/plain", flavor)
        if rest == "universe/universe-domain":
            return self._send(200, "googleapis.com", "text/plain", flavor)
        self._send(404, "Not found", "text/plain", flavor)


def _claims(assertion: str) -> dict[str, Any]:
    try:
        payload = assertion.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}


class FakeGoogleAuth:
    """``FakeGoogleAuth(lifetime=3600, email=…, project=…)``, a context
    manager; see the module's documentation."""

    def __init__(self, *, lifetime: float = 3600, email: str = "runner@fake-project.iam.gserviceaccount.com",
                 project: str = "fake-project", refresh_token: str = "fake-refresh-token") -> None:
        self.lifetime = lifetime
        self.email = email
        self.project = project
        self.refresh_token = refresh_token
        #: "ok", "down" or "garbage" (see the module's documentation).
        self.mode = "ok"
        #: Seconds every token answer is held back.
        self.delay = 0.0
        self.token_requests = 0
        self._issued: dict[str, float] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def __enter__(self) -> FakeGoogleAuth:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-google-auth:{self.port}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_uri(self) -> str:
        return f"{self.url}/token"

    @property
    def metadata_env(self) -> dict[str, str]:
        """Where google-auth looks for the metadata server (this one)."""
        host = f"127.0.0.1:{self.port}"
        return {"GCE_METADATA_HOST": host, "GCE_METADATA_IP": host}

    def valid(self, token: str) -> bool:
        """Whether ``token`` was issued here and has not expired."""
        with self._lock:
            expires = self._issued.get(token)
        return expires is not None and time.monotonic() < expires

    def issued(self) -> list[str]:
        with self._lock:
            return list(self._issued)

    def _issue(self) -> dict[str, Any]:
        token = f"ya29.fake-{next(self._ids)}-{secrets.token_urlsafe(12)}"
        with self._lock:
            self._issued[token] = time.monotonic() + self.lifetime
        return {"access_token": token, "expires_in": self.lifetime, "token_type": "Bearer"}

    # --- credential files pointing here --------------------------------------------

    def service_account_file(self, path: Path, *, project: str | None = None) -> Path:
        """A service account's JSON key (a fresh RSA key) whose ``token_uri`` is here."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
        info = {
            "type": "service_account",
            "project_id": project or self.project,
            "private_key_id": "fake-key-id",
            "private_key": pem,
            "client_email": self.email,
            "client_id": "1234567890",
            "token_uri": self.token_uri,
        }
        path.write_text(json.dumps(info))
        return path

    def authorized_user_file(self, path: Path, *, quota_project: str | None = None) -> Path:
        """What ``gcloud auth application-default login`` writes, refreshed here."""
        info = {
            "type": "authorized_user",
            "client_id": "fake-client.apps.googleusercontent.com",
            "client_secret": "fake-client-secret",
            "refresh_token": self.refresh_token,
            "token_uri": self.token_uri,
        }
        if quota_project:
            info["quota_project_id"] = quota_project
        path.write_text(json.dumps(info))
        return path
