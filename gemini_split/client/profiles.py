"""Named servers: ``servers.json`` in the config directory.

The file is seed 000's format, so profiles written by either program read in
the other::

    {"profiles": [
      {"name": "prod", "host": "gemini.example.com", "port": 8443, "secure": true,
       "authentication": {"method": "token", "token": "…"},
       "tlsConfig": {"rejectUnauthorized": true, "ca": "/etc/ssl/our-ca.pem"}}
    ]}

Extensions, all optional:

* ``"authentication": {"method": "token", "tokenEnv": "PROD_TOKEN"}`` takes
  the token from that environment variable when connecting, so the file
  need not hold the secret;
* ``"transport": "stdio", "command": "ssh box gemini-split serve --stdio"``
  is a server reached through a spawned command (no host or port);
* ``"path": "/gemini"`` for a WebSocket server behind a path;
* ``"transport": "grpc"`` for a server of seed 001's gRPC service
  (``grpc://HOST:PORT``, ``grpcs://`` with ``"secure": true``).

Keys this program does not know (``oauth``…) are kept as they are when the
file is rewritten.

Resource handling: the file is rewritten whole, atomically (a temporary file
in the same directory, then ``os.replace``), with mode 0600 since it may hold
tokens. Error handling: a file that cannot be read or parsed raises
:class:`ProfileError` naming the path and the problem; the file is never
changed then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from gemini_split.errors import ProfileError
from gemini_split.files import read_bounded, replace_atomically

# `gemini-split server list --names` reads this module on every Tab, so it
# imports neither typing nor dataclasses (with inspect, a third of that
# command's start-up: bench/cli_start.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FILE_NAME = "servers.json"
MAX_PROFILES_BYTES = 4 * 1024 * 1024

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_KNOWN_KEYS = {"name", "host", "port", "secure", "path", "transport", "command", "authentication", "tlsConfig"}
_KNOWN_AUTH_KEYS = {"method", "token", "tokenEnv"}
_KNOWN_TLS_KEYS = {"rejectUnauthorized", "ca"}


def check_profile_name(name: str) -> str:
    """``name`` if it can name a profile, else :class:`ProfileError`.

    Names cannot contain ``:`` (``--server`` would read them as an
    address) or spaces."""
    if not _NAME.match(name or ""):
        raise ProfileError(
            f"{name!r} cannot name a profile: use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, at most 64)"
        )
    return name


class ServerProfile:
    """One named server. Either ``host``/``port`` (WebSocket) or ``command``
    (stdio) is set.

    ``command``: stdio servers: the command to spawn (an ``stdio:`` address
    without the prefix). ``token_env``: the name of the environment variable
    that holds the token. ``extra``, ``extra_auth``, ``extra_tls``: keys of
    the file this program does not use, kept on rewrite. Compared by value;
    the repr leaves out the extras."""

    def __init__(
        self,
        name: str,
        host: str = "",
        port: int = 0,
        secure: bool = False,
        path: str = "",
        command: str | None = None,
        token: str | None = None,
        token_env: str | None = None,
        reject_unauthorized: bool = True,
        ca: str | None = None,
        extra: dict[str, Any] | None = None,
        extra_auth: dict[str, Any] | None = None,
        extra_tls: dict[str, Any] | None = None,
        grpc: bool = False,
    ):
        self.name = name
        #: A gRPC server (``grpc://`` / ``grpcs://``) rather than WebSocket.
        self.grpc = grpc
        self.host = host
        self.port = port
        self.secure = secure
        self.path = path
        self.command = command
        self.token = token
        self.token_env = token_env
        self.reject_unauthorized = reject_unauthorized
        self.ca = ca
        self.extra: dict[str, Any] = {} if extra is None else extra
        self.extra_auth: dict[str, Any] = {} if extra_auth is None else extra_auth
        self.extra_tls: dict[str, Any] = {} if extra_tls is None else extra_tls

    def __eq__(self, other: object) -> bool:
        return type(other) is ServerProfile and vars(self) == vars(other)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("extra"))
        return f"ServerProfile({shown})"

    # --- addresses -------------------------------------------------------------

    @classmethod
    def from_address(
        cls,
        name: str,
        address: str,
        *,
        token: str | None = None,
        token_env: str | None = None,
        ca: str | None = None,
        insecure: bool = False,
    ) -> ServerProfile:
        """A profile for ``ws://HOST:PORT[/PATH]``, ``wss://…`` or
        ``stdio:COMMAND``. Raises :class:`ProfileError` saying what is wrong."""
        check_profile_name(name)
        if token and token_env:
            raise ProfileError("give either a token or the variable that holds it (--token-env), not both")
        if token_env and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", token_env):
            raise ProfileError(f"{token_env!r} is not an environment variable name")
        profile = cls(name=name, token=token or None, token_env=token_env or None,
                      ca=ca or None, reject_unauthorized=not insecure)
        if address.startswith("stdio:"):
            command = address.removeprefix("stdio:").strip()
            if not command or command == "-":
                raise ProfileError("a stdio: address needs the command that starts the server, "
                                   "e.g. 'stdio:ssh box gemini-split serve --stdio'")
            profile.command = command
            return profile
        parts = urlsplit(address)
        if parts.scheme not in ("ws", "wss", "grpc", "grpcs"):
            raise ProfileError(
                f"{address!r} is not a server address: use ws://HOST:PORT, wss://HOST:PORT, "
                "grpc://HOST:PORT, grpcs://HOST:PORT or 'stdio:COMMAND'"
            )
        profile.grpc = parts.scheme in ("grpc", "grpcs")
        if profile.grpc and parts.path not in ("", "/"):
            raise ProfileError(f"{address!r}: a gRPC address has no path")
        try:
            port = parts.port
        except ValueError:
            raise ProfileError(f"{address!r}: the port is not a number from 0 to 65535") from None
        if not parts.hostname:
            raise ProfileError(f"{address!r} has no host")
        if parts.query or parts.fragment or parts.username:
            raise ProfileError(f"{address!r}: a server address has no user, query or fragment")
        profile.secure = parts.scheme in ("wss", "grpcs")
        profile.host = parts.hostname
        profile.port = port if port is not None else (443 if profile.secure else 80)
        profile.path = parts.path if parts.path not in ("", "/") else ""
        return profile

    @property
    def is_stdio(self) -> bool:
        return self.command is not None

    @property
    def address(self) -> str:
        """The transport address this profile names."""
        if self.command is not None:
            return f"stdio:{self.command}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.grpc:
            return f"{'grpcs' if self.secure else 'grpc'}://{host}:{self.port}"
        return f"{'wss' if self.secure else 'ws'}://{host}:{self.port}{self.path}"

    @property
    def auth_method(self) -> str:
        return "token" if (self.token or self.token_env) else "none"

    def resolve_token(self, environ: Mapping[str, str]) -> str | None:
        """The token to present, reading ``token_env`` from ``environ``.
        Raises :class:`ProfileError` when that variable is not set."""
        if self.token:
            return self.token
        if self.token_env:
            value = environ.get(self.token_env)
            if not value:
                raise ProfileError(
                    f"profile {self.name!r} takes its token from ${self.token_env}, which is not set"
                )
            return value
        return None

    def describe_auth(self) -> str:
        if self.token_env:
            return f"token from ${self.token_env}"
        return "token" if self.token else "none"

    # --- the file format -------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.command is not None:
            out["transport"] = "stdio"
            out["command"] = self.command
        else:
            if self.grpc:
                out["transport"] = "grpc"
            out["host"] = self.host
            out["port"] = self.port
            out["secure"] = self.secure
            if self.path:
                out["path"] = self.path
        auth: dict[str, Any] = {"method": self.auth_method}
        if self.token:
            auth["token"] = self.token
        if self.token_env:
            auth["tokenEnv"] = self.token_env
        out["authentication"] = {**self.extra_auth, **auth}
        if self.ca or not self.reject_unauthorized or self.extra_tls:
            tls: dict[str, Any] = {"rejectUnauthorized": self.reject_unauthorized}
            if self.ca:
                tls["ca"] = self.ca
            out["tlsConfig"] = {**self.extra_tls, **tls}
        return {**self.extra, **out}

    @classmethod
    def from_json(cls, data: Any, where: str) -> ServerProfile:
        """Parse one entry; ``where`` names it in errors."""
        if not isinstance(data, dict):
            raise ProfileError(f"{where}: a profile is an object")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ProfileError(f"{where}: a profile needs a \"name\"")
        where = f"{where} ({name!r})"
        auth = data.get("authentication") or {}
        tls = data.get("tlsConfig") or {}
        if not isinstance(auth, dict) or not isinstance(tls, dict):
            raise ProfileError(f"{where}: \"authentication\" and \"tlsConfig\" are objects")
        profile = cls(
            name=name,
            token=_opt_str(auth, "token", where),
            token_env=_opt_str(auth, "tokenEnv", where),
            ca=_opt_str(tls, "ca", where),
            reject_unauthorized=bool(tls.get("rejectUnauthorized", True)),
            extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
            extra_auth={k: v for k, v in auth.items() if k not in _KNOWN_AUTH_KEYS},
            extra_tls={k: v for k, v in tls.items() if k not in _KNOWN_TLS_KEYS},
        )
        if data.get("transport") == "stdio" or "command" in data:
            command = data.get("command")
            if not isinstance(command, str) or not command.strip():
                raise ProfileError(f"{where}: a stdio profile needs a \"command\"")
            profile.command = command
            return profile
        host, port = data.get("host"), data.get("port")
        if not isinstance(host, str) or not host:
            raise ProfileError(f"{where}: needs a \"host\" (or \"transport\": \"stdio\" and a \"command\")")
        if isinstance(port, str) and port.isdigit():
            port = int(port)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ProfileError(f"{where}: \"port\" must be a number from 1 to 65535")
        profile.host, profile.port = host, port
        profile.grpc = data.get("transport") == "grpc"
        profile.secure = bool(data.get("secure", False))
        profile.path = _opt_str(data, "path", where) or ""
        return profile


def _opt_str(data: dict[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ProfileError(f"{where}: \"{key}\" must be a string")
    return value


class ProfileStore:
    """The profiles in one ``servers.json``. Every method reads the file
    afresh, so two programs editing it see each other's changes."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> list[ServerProfile]:
        """Every profile, in file order; ``[]`` when the file does not exist."""
        try:
            data = read_bounded(self.path, MAX_PROFILES_BYTES)
            text = data.decode("utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise ProfileError(f"cannot read {self.path}: {exc}") from None
        if len(data) > MAX_PROFILES_BYTES:
            raise ProfileError(f"{self.path}: larger than {MAX_PROFILES_BYTES // (1024 * 1024)} MiB; "
                               "it was left as it is: fix it or move it away")
        if not text.strip():
            return []
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(
                f"{self.path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                "it was left as it is: fix it or move it away"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("profiles", []), list):
            raise ProfileError(
                f'{self.path}: expected {{"profiles": [...]}}; it was left as it is: fix it or move it away'
            )
        profiles = []
        for i, entry in enumerate(data.get("profiles", [])):
            try:
                profiles.append(ServerProfile.from_json(entry, f"{self.path}: profile {i + 1}"))
            except ProfileError as exc:
                raise ProfileError(f"{exc}; the file was left as it is") from None
        return profiles

    def names(self) -> list[str]:
        return [p.name for p in self.load()]

    def get(self, name: str) -> ServerProfile | None:
        for profile in self.load():
            if profile.name == name:
                return profile
        return None

    def add(self, profile: ServerProfile) -> bool:
        """Save ``profile``, replacing one of the same name. True if it
        replaced one."""
        profiles = self.load()
        for i, existing in enumerate(profiles):
            if existing.name == profile.name:
                profiles[i] = profile
                self.save(profiles)
                return True
        profiles.append(profile)
        self.save(profiles)
        return False

    def remove(self, name: str) -> bool:
        """Delete the profile called ``name``. False if there was none."""
        profiles = self.load()
        kept = [p for p in profiles if p.name != name]
        if len(kept) == len(profiles):
            return False
        self.save(kept)
        return True

    def save(self, profiles: list[ServerProfile]) -> None:
        """Write the file atomically with mode 0600."""
        data = {"profiles": [p.to_json() for p in profiles]}
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            replace_atomically(self.path, text.encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise ProfileError(f"cannot write {self.path}: {exc}") from None


def profile_store(config_dir: Path) -> ProfileStore:
    """The store in ``config_dir`` (``Environment.config_dir``)."""
    return ProfileStore(Path(config_dir) / FILE_NAME)


def make_profile(name: str, address: str, *, token: str | None = None, token_env: str | None = None,
                 ca: str | None = None, insecure: bool = False, cwd: Path) -> ServerProfile:
    """A profile from what the user typed; a relative CA path is made
    absolute (the file is read later, from anywhere)."""
    if ca:
        path = Path(ca).expanduser()
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            raise ProfileError(f"--ca {ca}: no such file")
        ca = str(path)
    return ServerProfile.from_address(name, address, token=token, token_env=token_env, ca=ca, insecure=insecure)


def profile_table(profiles: list[ServerProfile], current: str | None = None) -> list[str]:
    """One aligned line per profile (tokens never shown); ``current`` gets a ``*``."""
    width = max(len(p.name) for p in profiles)
    addr_width = max(len(p.address) for p in profiles)
    lines = []
    for p in profiles:
        mark = "*" if p.name == current else " "
        extras = [f"auth: {p.describe_auth()}"]
        if p.ca:
            extras.append(f"ca: {p.ca}")
        if not p.reject_unauthorized:
            extras.append("TLS NOT verified")
        lines.append(f"{mark} {p.name:<{width}}  {p.address:<{addr_width}}  {'  '.join(extras)}")
    return lines
