"""Sessions that run on their callers' own keys.

A per-user daemon (``gemini-split daemon``) has no API key of its own: each
client sends its own in ``hello.caller`` over the Unix socket
(:class:`~gemini_split.protocol.Caller`), and the session it opens or
resumes talks to Gemini with that key, endpoint and model.
:class:`CallerModels` keeps one model (one HTTP connection pool) per key and
endpoint, so a script calling ``-p`` in a loop reuses warm connections.

A ``serve`` started with ``--allow-client-credentials`` takes a client's
Gemini API key too (``gemini-split --server … --send-api-key``), from any
authenticated connection that is private (TLS, or this machine): only the
key, never an endpoint or Vertex AI settings (the server would send the key
where the client says, or read its own disk for them). Such a model belongs
to the session it was sent for (:func:`network_caller_model`), which closes
it when it unloads: the key goes with it.

Keys are held in memory only, never logged or stored; the session store
keeps the model's name, not the key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from gemini_split.errors import ConfigurationError, MissingApiKey
from gemini_split.protocol import Caller, ErrorCode

from .base import Chunk, Model, ModelAuthError, ModelRequest
from .credentials import ModelAuth, resolve_model_auth
from .names import ModelNameRefused, check_model_name

#: ``(hello.caller, whether the connection is private) → the session's own
#: model`` (:func:`network_caller_model` with this server's endpoint).
ClientModel = Callable[[Caller, bool], Model]


class CallerRefused(ConfigurationError):
    """A ``hello.caller`` cannot open a session here; ``code`` is the
    protocol error code to answer with, the message says why."""

    def __init__(self, message: str, *, code: ErrorCode = ErrorCode.INVALID_FIELD):
        super().__init__(message)
        self.code = code


DAEMON_HAS_NO_KEY = ("this local daemon has no API key of its own: the client sends its key with each "
                     "session, and this one sent none (set GEMINI_API_KEY where you run gemini-split)")
SERVER_HAS_NO_KEY = ("this server has no credentials of its own: its clients bring their own Gemini API key, "
                     "and this session's client sent none (connect with --send-api-key and GEMINI_API_KEY set)")


class KeylessModel(Model):
    """The model of a server without credentials of its own (the local
    daemon; a ``serve --allow-client-credentials`` with none): a session
    whose client sent no key gets ``message`` instead of a request made with
    someone else's key."""

    auth_description = "none (each client sends its own key)"

    def __init__(self, message: str = DAEMON_HAS_NO_KEY):
        self.message = message

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        raise ModelAuthError(self.message)
        yield  # pragma: no cover (an async generator that raises at once)


class CallerModels:
    """Gemini models by (key, endpoint), built on first use and kept until
    :meth:`aclose` (a user has a handful of keys at most)."""

    def __init__(self) -> None:
        self._models: dict[tuple, Model] = {}

    def model_for(self, caller: Caller) -> Model | None:
        """The model that serves ``caller`` (None when it sent no key and
        no Vertex AI settings). Vertex AI: one model (one shared access
        token) per set of settings; raises :class:`CallerRefused` with what
        to do when they lead to no usable credentials."""
        if caller.google_cloud is not None:
            return self._vertex_model(caller)
        if not caller.api_key:
            return None
        key = (caller.api_key, caller.base_url)
        model = self._models.get(key)
        if model is None:
            from .gemini import GeminiModel

            model = self._models[key] = GeminiModel(caller.api_key, base_url=caller.base_url)
        return model

    def _vertex_model(self, caller: Caller) -> Model:

        cloud = dict(caller.google_cloud or {})
        key = ("vertex", tuple(sorted(cloud.items())), caller.api_key)
        model = self._models.get(key)
        if model is None:
            environ = dict(cloud, GOOGLE_API_KEY=caller.api_key) if caller.api_key else cloud
            try:
                auth = resolve_model_auth(environ)
            except MissingApiKey as exc:
                raise CallerRefused(f"the local daemon cannot reach Vertex AI as you: {exc}",
                                    code=ErrorCode.MODEL_AUTH) from None
            from .gemini import GeminiModel

            model = self._models[key] = GeminiModel(auth=auth)
        return model

    async def release_idle(self) -> None:
        """Each model's :meth:`Model.release_idle` (the models stay)."""
        for model in list(self._models.values()):
            await model.release_idle()

    async def aclose(self) -> None:
        models, self._models = list(self._models.values()), {}
        for model in models:
            await model.aclose()


def caller_model_name(caller: Caller, default: str, allowed: tuple[str, ...] = ()) -> str:
    """The model name a caller's session starts with; raises
    :class:`CallerRefused` for one that is not a Gemini model name
    (``scripted:`` models run embedded only)."""
    if not caller.model:
        return default
    try:
        return check_model_name(caller.model, allowed, default=default)
    except ModelNameRefused as exc:
        raise CallerRefused(f"the local daemon cannot use this model: {exc}") from None


def accept_caller(callers: CallerModels | None, caller: Caller, *, same_user: bool,
                  default_model: str, allowed: tuple[str, ...] = ()) -> tuple[Model | None, str | None]:
    """Check a ``hello.caller`` on the local daemon: the (model, model
    name) its session runs with (None: the daemon's own / the session's
    own). Raises :class:`CallerRefused` with the protocol code to answer,
    when the connection is not the daemon's own user on its Unix socket or
    the model is not a Gemini model."""
    if callers is None or not same_user:
        raise CallerRefused(
            "hello.caller (an API key) is accepted only by a local daemon over its Unix socket, "
            "from its own user, or by a server started with --allow-client-credentials; this one is neither",
            code=ErrorCode.UNAUTHORIZED)
    name = caller_model_name(caller, default_model, allowed) if caller.model else None
    return callers.model_for(caller), name


def network_caller_model(caller: Caller, private: bool, *, base_url: str | None) -> Model:
    """The model a ``serve --allow-client-credentials`` session runs on
    for a client that sent its key: a new one of the session's own, on this
    server's endpoint ``base_url``. Raises :class:`CallerRefused` for a key
    that came over a connection that is not private, and for anything but a
    key (an endpoint, Vertex AI settings, a model name)."""
    if not private:
        raise CallerRefused("an API key is taken only over TLS (wss://) or from this machine; "
                            "this connection is neither, so the key was not used", code=ErrorCode.UNAUTHORIZED)
    if caller.google_cloud is not None or caller.base_url or caller.model:
        raise CallerRefused("a server takes only an API key from its clients (hello.caller.api_key): "
                            "not an endpoint, Vertex AI settings or a model (send the model with each prompt)")
    if not caller.api_key:
        raise CallerRefused("hello.caller carries no API key")
    from .gemini import GeminiModel

    return GeminiModel(auth=ModelAuth("api-key", api_key=caller.api_key, key_source="the client",
                                      base_url=base_url))
