"""Which Google account talks to Gemini, and its access tokens.

:func:`resolve_model_auth` decides, as gemini-cli and google-genai decide,
between the Gemini API with an API key and Vertex AI
(``GOOGLE_GENAI_USE_VERTEXAI=true``, or settings
``security.auth.selectedType`` ``"vertex-ai"`` /
``"compute-default-credentials"``), and for Vertex AI finds the credentials
in google-auth's Application Default Credentials order:
``$GOOGLE_APPLICATION_CREDENTIALS`` (a service-account or authorized-user
JSON), gcloud's well-known file, the metadata server. Every failure is a
:class:`~gemini_split.errors.MissingApiKey` (exit status 41) whose message
says what to do.

:class:`AccessTokens` holds one set of credentials for a whole process: the
token is refreshed in a worker thread (google-auth's refresh is
synchronous), before it expires, once for every session waiting on it, with
a bounded timeout. Tokens are never logged, stored or shown: only
:meth:`ModelAuth.describe` is, which names the account, never a secret.

google-auth is imported only when Vertex AI is asked for.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from gemini_split.errors import BadCredentials, MissingApiKey

from .base import ModelAuthError, ModelError

log = logging.getLogger(__name__)

#: What Vertex AI needs (the scope google-genai asks for).
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
#: Seconds a token refresh may take before the request that waits for it fails.
TOKEN_TIMEOUT = 20.0
#: A token is refreshed when less than this much of its life is left
#: (seconds), or a quarter of its life when that is shorter.
REFRESH_MARGIN = 300.0

NO_CREDENTIALS = (
    "no credentials for Gemini. Use one of:\n"
    "  - an API key: set GEMINI_API_KEY (get one at https://aistudio.google.com/apikey);\n"
    "  - Vertex AI with Application Default Credentials: run `gcloud auth application-default login`, "
    "then set GOOGLE_GENAI_USE_VERTEXAI=true and GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION, "
    "default us-central1);\n"
    "  - a service account: set GOOGLE_APPLICATION_CREDENTIALS to its JSON key file, with "
    "GOOGLE_GENAI_USE_VERTEXAI=true and GOOGLE_CLOUD_PROJECT."
)

OAUTH_PERSONAL = (
    'security.auth.selectedType is "oauth-personal" (Login with Google), and gemini-split does not sign in '
    "with a Google account for you. Use an API key (GEMINI_API_KEY, from https://aistudio.google.com/apikey), "
    "or Vertex AI with your Google account through Application Default Credentials: run "
    "`gcloud auth application-default login`, set GOOGLE_GENAI_USE_VERTEXAI=true and GOOGLE_CLOUD_PROJECT "
    '(or selectedType "vertex-ai").'
)


@dataclass(frozen=True)
class ModelAuth:
    """How a server talks to Gemini. ``api_key`` and ``credentials`` are
    secrets (left out of ``repr``); :meth:`describe` is what may be shown."""

    #: "api-key" (the Gemini API) or "vertex-ai".
    method: str
    api_key: str | None = field(default=None, repr=False)
    #: Where the key came from ("$GEMINI_API_KEY").
    key_source: str = ""
    project: str | None = None
    location: str | None = None
    #: ``GOOGLE_VERTEX_BASE_URL`` / ``GOOGLE_GEMINI_BASE_URL``, when set.
    base_url: str | None = None
    #: google-auth credentials (Vertex AI without an API key).
    credentials: Any = field(default=None, repr=False)
    #: Where the credentials came from ("service account file /…/sa.json").
    credential_source: str = ""

    @property
    def vertex(self) -> bool:
        return self.method == "vertex-ai"

    def principal(self) -> str:
        """The account the requests are made as, for messages."""
        creds = self.credentials
        email = getattr(creds, "service_account_email", None)
        if email and email != "default":
            return f"service account {email}"
        return ""

    def describe(self) -> str:
        """What ``/about``, ``/server status``, ``--debug`` and ``serve``'s
        log say: the method and the account, never a secret."""
        if not self.vertex:
            return f"Gemini API key from {self.key_source}"
        if self.api_key:
            return f"Vertex AI express mode, API key from {self.key_source}"
        principal = self.principal()
        return (f"Vertex AI, project {self.project}, location {self.location}, "
                + (f"{principal} ({self.credential_source})" if principal else self.credential_source))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model_auth(environ: Mapping[str, str], *, selected_type: str | None = None,
                       home: Path | None = None) -> ModelAuth:
    """The way to Gemini that ``environ`` and ``selected_type`` (settings
    ``security.auth.selectedType``) ask for; raises :class:`MissingApiKey`
    (exit 41) with what to do when there is none, and
    :class:`BadCredentials` naming the file when a credential file is
    unusable.

    ``"oauth-personal"`` is refused only when nothing else is configured: a
    gemini-cli settings file often says it, and the environment's key or
    ``GOOGLE_GENAI_USE_VERTEXAI`` then decides, as before."""
    e = environ
    selected = (selected_type or "").strip().lower() or None
    key_name = next((n for n in ("GEMINI_API_KEY", "GOOGLE_API_KEY") if e.get(n)), None)
    vertex = _truthy(e.get("GOOGLE_GENAI_USE_VERTEXAI")) or selected in ("vertex-ai", "compute-default-credentials")
    if selected == "oauth-personal" and not vertex and key_name is None:
        raise MissingApiKey(OAUTH_PERSONAL)
    if not vertex:
        if key_name is None:
            raise MissingApiKey(NO_CREDENTIALS)
        return ModelAuth("api-key", api_key=e[key_name], key_source=f"${key_name}",
                         base_url=e.get("GOOGLE_GEMINI_BASE_URL") or None)
    project = e.get("GOOGLE_CLOUD_PROJECT") or None
    location = e.get("GOOGLE_CLOUD_LOCATION") or "us-central1"
    base_url = e.get("GOOGLE_VERTEX_BASE_URL") or None
    # Express mode: an API key and no project (google-genai's precedence:
    # a project from the environment beats a key from the environment).
    express_key = next((n for n in ("GOOGLE_API_KEY", "GEMINI_API_KEY") if e.get(n)), None)
    if project is None and express_key is not None and not e.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return ModelAuth("vertex-ai", api_key=e[express_key], key_source=f"${express_key}", base_url=base_url)
    credentials, source, found_project = _application_default_credentials(e, home)
    project = project or found_project
    if not project:
        raise MissingApiKey(
            f"Vertex AI needs a Google Cloud project, and {source} names none: set GOOGLE_CLOUD_PROJECT.")
    return ModelAuth("vertex-ai", project=project, location=location, base_url=base_url,
                     credentials=credentials, credential_source=source)


def _application_default_credentials(e: Mapping[str, str], home: Path | None) -> tuple[Any, str, str | None]:
    """(credentials, their source, their project) in google-auth's ADC
    order; raises :class:`MissingApiKey` when none is found."""
    explicit = e.get("GOOGLE_APPLICATION_CREDENTIALS")
    if explicit:
        return load_credentials_file(Path(explicit), "$GOOGLE_APPLICATION_CREDENTIALS")
    gcloud = _gcloud_file(e, home)
    if gcloud is not None and gcloud.exists():
        return load_credentials_file(gcloud, "gcloud's application default credentials")
    found = _metadata_credentials(e)
    if found is not None:
        return found
    raise MissingApiKey(
        "Vertex AI was asked for (GOOGLE_GENAI_USE_VERTEXAI or security.auth.selectedType), but no Google "
        "Cloud credentials were found: no $GOOGLE_APPLICATION_CREDENTIALS, no "
        f"{gcloud or 'gcloud credentials file'}, and no metadata server. Run "
        "`gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a service "
        "account's JSON key file; or use an API key (GEMINI_API_KEY) without GOOGLE_GENAI_USE_VERTEXAI.")


def _gcloud_file(e: Mapping[str, str], home: Path | None) -> Path | None:
    config = e.get("CLOUDSDK_CONFIG")
    if config:
        return Path(config) / "application_default_credentials.json"
    base = e.get("HOME") or (str(home) if home else None)
    return Path(base) / ".config" / "gcloud" / "application_default_credentials.json" if base else None


_REQUIRED = {
    "service_account": ("client_email", "private_key", "token_uri"),
    "authorized_user": ("client_id", "client_secret", "refresh_token"),
}


def load_credentials_file(path: Path, how: str) -> tuple[Any, str, str | None]:
    """A service-account or authorized-user JSON file as google-auth
    credentials (scoped for Vertex AI), with its description and project.
    Raises :class:`BadCredentials` naming ``path`` and what is wrong."""
    where = f"{path} (from {how})"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadCredentials(f"the credentials file {where} does not exist") from None
    except IsADirectoryError:
        raise BadCredentials(f"the credentials file {where} is a directory") from None
    except PermissionError:
        raise BadCredentials(f"the credentials file {where} cannot be read: permission denied") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadCredentials(f"the credentials file {where} cannot be read: {exc}") from None
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise BadCredentials(f"the credentials file {where} is not JSON: {exc}") from None
    if not isinstance(info, dict):
        raise BadCredentials(f"the credentials file {where} is not a JSON object")
    kind = info.get("type")
    if kind not in _REQUIRED:
        raise BadCredentials(
            f"the credentials file {where} has type {kind!r}; gemini-split reads \"service_account\" "
            "(a service account's JSON key) and \"authorized_user\" (`gcloud auth application-default login`)")
    missing = [name for name in _REQUIRED[kind] if not isinstance(info.get(name), str) or not info.get(name)]
    if missing:
        raise BadCredentials(f"the credentials file {where} ({kind}) lacks {', '.join(missing)}")
    from google.auth import exceptions as auth_exceptions
    from google.oauth2 import credentials as user_credentials
    from google.oauth2 import service_account

    project = None
    try:
        # The loader of the one type read, as google-auth advises (no
        # external-account configs that run commands or fetch URLs).
        if kind == "service_account":
            credentials = service_account.Credentials.from_service_account_info(info, scopes=list(SCOPES))
        else:
            credentials = user_credentials.Credentials.from_authorized_user_info(info)
    except (auth_exceptions.GoogleAuthError, ValueError, TypeError) as exc:
        # e.g. a private key that is not a key: google-auth's words, never the key.
        raise BadCredentials(f"the credentials file {where} ({kind}) is unusable: {_short(exc)}") from None
    if kind == "service_account":
        return credentials, f"service account key {path}", project or info.get("project_id")
    if isinstance(info.get("token_uri"), str) and info["token_uri"]:
        # google-auth ignores an authorized-user file's token_uri (always
        # Google's); honoured here, so a private endpoint or a test's works.
        credentials = credentials.with_token_uri(info["token_uri"])
    return credentials, f"user credentials from {path}", project or info.get("quota_project_id")


def _metadata_credentials(e: Mapping[str, str]) -> tuple[Any, str, str | None] | None:
    """The metadata server's service account (GCE, Cloud Run, GKE), when
    there is a metadata server; ``$GCE_METADATA_HOST`` moves it."""
    from google.auth import compute_engine
    from google.auth.compute_engine import _metadata
    from google.auth.transport.requests import Request

    request = Request()
    if not _metadata.is_on_gce(request):
        return None
    project = None
    if not e.get("GOOGLE_CLOUD_PROJECT"):
        try:
            project = _metadata.get_project_id(request)
        except Exception:  # google-auth raises several kinds; the project is then asked for
            project = None
    credentials = compute_engine.Credentials(scopes=list(SCOPES))
    return credentials, "the metadata server's service account", project


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


class AccessTokens:
    """The bearer token of one set of credentials, shared by every session
    of the process.

    :meth:`header` returns the ``Authorization`` value at once while the
    token has more than its margin of life left; otherwise one caller
    refreshes it in a worker thread (the others wait for that refresh, not
    for one of their own), within ``timeout`` seconds. A refresh that fails
    raises :class:`ModelError` naming the credential source: retryable
    when the token endpoint was unreachable, slow or answered 5xx (the
    agent's backoff repeats the call), :class:`ModelAuthError` when it
    refused the credentials."""

    def __init__(self, credentials: Any, source: str, *, timeout: float = TOKEN_TIMEOUT):

        self._credentials = credentials
        self._source = source
        self._timeout = timeout
        self._lock = trio.Lock()
        self._header: str | None = None
        #: trio.current_time() after which the token is refreshed.
        self._refresh_at = 0.0
        #: Refreshes done (tests and the bench count them).
        self.refreshes = 0

    async def header(self) -> str:

        if self._header is not None and trio.current_time() < self._refresh_at:
            return self._header
        async with self._lock:
            if self._header is None or trio.current_time() >= self._refresh_at:
                await self._refresh()
            assert self._header is not None
            return self._header

    async def _refresh(self) -> None:

        from google.auth import exceptions as auth_exceptions

        request = _request(self._timeout)
        started = trio.current_time()
        try:
            with trio.fail_after(self._timeout):
                await trio.to_thread.run_sync(self._credentials.refresh, request, abandon_on_cancel=True)
        except trio.TooSlowError:
            self._header = None
            raise ModelError(
                f"cannot get an access token for {self._describe()}: the token endpoint did not answer "
                f"within {self._timeout:g} s", retryable=True) from None
        except auth_exceptions.RefreshError as exc:
            self._header = None
            raise _refresh_error(self._describe(), exc) from None
        except (auth_exceptions.TransportError, OSError) as exc:
            self._header = None
            raise ModelError(
                f"cannot get an access token for {self._describe()}: the token endpoint is unreachable "
                f"({_short(exc)})", retryable=True) from None
        except (ValueError, KeyError, TypeError, auth_exceptions.GoogleAuthError) as exc:
            self._header = None
            raise ModelError(f"cannot get an access token for {self._describe()}: the token endpoint's "
                             f"answer is unusable ({_short(exc)})", retryable=True) from None
        token = self._credentials.token
        if not isinstance(token, str) or not token:
            self._header = None
            raise ModelError(f"cannot get an access token for {self._describe()}: the token endpoint "
                             "answered without a token", retryable=True)
        self.refreshes += 1
        expiry = getattr(self._credentials, "expiry", None)
        now = trio.current_time()
        if expiry is not None:
            utcnow = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            life = max(0.0, (expiry - utcnow).total_seconds())
        else:
            life = 3600.0
        self._refresh_at = now + life - min(REFRESH_MARGIN, life / 4)
        self._header = f"Bearer {token}"
        log.debug("access token for %s refreshed in %.3f s; valid for %.0f s",
                  self._describe(), now - started, life)

    def _describe(self) -> str:
        email = getattr(self._credentials, "service_account_email", None)
        if email and email != "default":
            return f"service account {email} ({self._source})"
        return self._source


def _refresh_error(source: str, exc: Any) -> ModelError:
    """A token endpoint's refusal (4xx: the credentials are bad) or failure
    (5xx, garbage: worth another try)."""
    first = exc.args[0] if getattr(exc, "args", None) else None
    text = _short(first) if isinstance(first, (str, BaseException)) and str(first) else _short(exc)
    if any(reason in text for reason in ("invalid_grant", "invalid_client", "unauthorized_client")):
        return ModelAuthError(f"the token endpoint refused {source}: {text}")
    return ModelError(f"cannot get an access token for {source}: {text}", retryable=True)


def _request(timeout: float) -> Any:
    """google-auth's requests transport with every call bounded by
    ``timeout`` (its default is 120 s)."""
    from google.auth.transport.requests import Request

    class _Bounded(Request):
        def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):  # noqa: ANN001
            return super().__call__(url, method=method, body=body, headers=headers,
                                    timeout=min(timeout or _timeout, _timeout), **kwargs)

    _timeout = timeout
    return _Bounded()

