"""Shell commands under bubblewrap (``bwrap``): what a tool command may
touch, whoever asked for it.

A sandboxed command sees:

- the whole file system **read-only** (``--ro-bind / /``), with a fresh
  ``/dev``, ``/proc`` and a private, empty ``/tmp``;
- the home directory (``$HOME``, ``/home``, ``/root``) and ``/run`` hidden
  behind empty directories, so ``~/.ssh``, ``~/.aws``, agent and
  docker sockets are out of reach;
- the workspace and any ``--include-directories`` **read-write**, at their
  own paths (bound after the above, so a workspace under ``/tmp`` or ``~``
  stays visible);
- for server-side tools, the paths in :attr:`Sandbox.hidden` masked too
  (an empty directory over a directory, an empty file over a file): the
  server builds that list, and the environment a command keeps
  (:attr:`Sandbox.env_keep`), in one place,
  ``gemini_split.server.session.features.server_tools.ServerTools.confinement``;
- no network (``--unshare-all``: its own network namespace with only a
  loopback of its own), unless the sandbox was made with ``network=True``
  (``--sandbox-network``);
- its own PID, IPC and UTS namespaces, a new terminal session (no
  ``TIOCSTI`` keystroke injection into the user's terminal), and death
  with its parent (``--die-with-parent``): when the client kills the
  process group it started, everything inside dies with it.

The workspace path confinement of the file tools stays as a second wall.

Modes (``--sandbox`` / ``-s`` / ``GEMINI_SANDBOX``; for server-side tools
the server's ``--sandbox``):

- ``none``: commands run as the user, with nothing but the workspace
  directory as their starting point;
- ``bwrap``: bubblewrap, or refuse to start when it does not work here;
- ``auto``: the best sandbox this machine has — today bubblewrap on Linux
  — or refuse to start.

Whether bwrap works is probed once per process (:func:`probe_bwrap`): a
kernel without unprivileged user namespaces, or a container that forbids
them, makes ``bwrap`` fail at its first mount.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import msgspec

from gemini_split.errors import ConfigurationError

MODES = ("auto", "bwrap", "none")
#: gemini-cli's container sandboxes (GEMINI_SANDBOX=docker…): gemini-split
#: runs tool commands under bubblewrap instead of running itself in a container.
CONTAINER_COMMANDS = frozenset({"docker", "podman", "sandbox-exec", "runsc", "lxc", "windows-native"})
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


class SandboxUnavailable(ConfigurationError):
    """A sandbox was asked for and cannot be had here; the message says why
    and what to do (install bwrap, or ``--sandbox none``)."""


class Sandbox(msgspec.Struct, frozen=True):
    """How tool commands are confined. ``Sandbox.none()`` runs them as is;
    :meth:`resolve` picks one for a mode. Immutable: share it freely."""

    mode: str = "none"
    #: The bwrap executable when mode is ``bwrap``.
    bwrap: str | None = None
    #: Whether sandboxed commands may reach the network.
    network: bool = False
    #: Further paths a command must not see (masked after the root is bound
    #: and again after the writable directories, when they lie inside one).
    hidden: tuple[str, ...] = ()
    #: When set, the only environment variables a command keeps (shell glob
    #: patterns of names), whatever the mode: see :meth:`environment`.
    env_keep: tuple[str, ...] | None = None

    @classmethod
    def none(cls) -> Sandbox:
        return cls()

    @property
    def enabled(self) -> bool:
        return self.mode == "bwrap"

    @classmethod
    def resolve(cls, mode: str, *, network: bool = False, environ: Mapping[str, str] | None = None) -> Sandbox:
        """The sandbox for ``mode`` (``auto``, ``bwrap`` or ``none``).

        Raises :class:`SandboxUnavailable` when ``auto`` or ``bwrap`` cannot
        work here (no bwrap, or it fails its probe), and :class:`ValueError`
        for an unknown mode."""
        if mode not in MODES:
            raise ValueError(f"unknown sandbox mode {mode!r}: use auto, bwrap or none")
        if mode == "none":
            return cls(network=True)
        environ = os.environ if environ is None else environ
        if not sys.platform.startswith("linux"):
            raise SandboxUnavailable(f"--sandbox {mode}: bubblewrap sandboxes need Linux; "
                                     "use --sandbox none to run tool commands without one")
        path = shutil.which("bwrap", path=environ.get("PATH", os.defpath))
        if path is None:
            raise SandboxUnavailable(f"--sandbox {mode}: bwrap is not installed; {INSTALL_HINT}, "
                                     "or use --sandbox none to run tool commands without a sandbox")
        problem = probe_bwrap(path)
        if problem is not None:
            raise SandboxUnavailable(f"--sandbox {mode}: bwrap does not work here ({problem}); "
                                     "use --sandbox none to run tool commands without a sandbox")
        return cls("bwrap", path, network)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` as a command gets it: unchanged, or with only the names
        :attr:`env_keep` matches."""
        if self.env_keep is None:
            return dict(env)

        return {k: v for k, v in env.items() if any(fnmatchcase(k, p) for p in self.env_keep)}

    def command(self, argv: Sequence[str], *, cwd: str | os.PathLike[str], writable: Sequence[str | os.PathLike[str]],
                home: str | None = None) -> list[str]:
        """``argv`` as it runs in this sandbox, starting in ``cwd`` with
        ``writable`` directories (the workspace roots) read-write; unchanged
        without a sandbox. ``home``: the user's home directory to hide
        (default ``$HOME``)."""
        if not self.enabled:
            return list(argv)
        assert self.bwrap is not None
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
        if self.network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        hidden = ["/home", "/root", "/run"]
        home = home if home is not None else os.environ.get("HOME")
        if home and os.path.isabs(home) and os.path.realpath(home) != "/":
            hidden.append(os.path.realpath(home))
        for path in hidden:
            if os.path.isdir(path):
                args += ["--tmpfs", path]
        if self.network and os.path.isdir("/run/systemd/resolve"):
            args += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]  # resolv.conf's target
        masked = ["/tmp", *(os.path.realpath(p) for p in hidden if os.path.isdir(p))]
        inside_writable: list[str] = []
        binds = [os.path.realpath(p) for p in writable]
        for real in dict.fromkeys(os.path.realpath(p) for p in self.hidden):
            if not _maskable(real) or any(_within(real, m) for m in masked):
                continue  # nothing to mask, or already behind an empty directory
            args += _mask(real)
            if os.path.isdir(real):
                masked.append(real)
            if any(_within(real, b) and real != b for b in binds):
                inside_writable.append(real)
        for real in binds:
            args += ["--bind", real, real]
        for real in inside_writable:  # a bind above has put it back in sight
            args += _mask(real)
        args += ["--chdir", os.path.realpath(cwd), "--"]
        return args + list(argv)


#: Directories never masked whole, whatever a hidden path says: without
#: them no command would run.
_SYSTEM = ("/", "/bin", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr", "/var")


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _maskable(real: str) -> bool:
    """Whether ``real`` exists and may be masked (not a system directory
    or one of their ancestors)."""
    return os.path.lexists(real) and real not in _SYSTEM and not any(real == "/usr" + s for s in _SYSTEM)


def _mask(real: str) -> list[str]:
    """The bwrap arguments that put an empty directory (or an empty file)
    over ``real``."""
    if os.path.isdir(real):
        return ["--tmpfs", real]
    return ["--ro-bind", "/dev/null", real]


@functools.lru_cache(maxsize=None)
def probe_bwrap(path: str) -> str | None:
    """None if ``path`` (a bwrap binary) can set up the sandbox used here,
    else what went wrong (its first line of error). Cached per process."""
    probe = Sandbox("bwrap", path)
    argv = probe.command(["/bin/sh", "-c", "exit 0"], cwd="/", writable=[])
    try:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if result.returncode != 0:
        text = result.stderr.decode(errors="replace").strip().splitlines()
        return (text[0] if text else f"exit status {result.returncode}")[:300]
    return None


def sandbox_mode_from(flag: str | None, environ: Mapping[str, str], setting: bool | str | None = None,
                      warn=None) -> str:
    """The sandbox mode for a client run, as gemini-cli decides whether to
    sandbox: ``$GEMINI_SANDBOX`` first (``true``/``1`` → auto,
    ``false``/``0`` → none), then the flag (``-s`` → auto,
    ``--sandbox=MODE``), then settings ``tools.sandbox``; default none.

    gemini-cli's container values (``docker``, ``podman``…) mean "sandbox
    me": they become ``auto`` (bubblewrap), with a line to ``warn``.
    Raises :class:`ConfigurationError` for anything else."""
    value: object = None
    source = ""
    env_value = (environ.get("GEMINI_SANDBOX") or "").strip().lower()
    if env_value:
        value, source = env_value, "GEMINI_SANDBOX"
    elif flag is not None:
        value, source = flag, "--sandbox"
    elif setting is not None:
        value, source = setting, "settings tools.sandbox"
    if value is None or value is False:
        return "none"
    if value is True:
        return "auto"
    text = str(value).strip().lower()
    if text in ("1", "true"):
        return "auto"
    if text in ("0", "false", ""):
        return "none"
    if text in MODES:
        return text
    if text in CONTAINER_COMMANDS:
        if warn is not None:
            warn(f"gemini-split: {source}={text}: gemini-split does not run itself in a container; "
                 "tool commands run under bubblewrap instead (--sandbox auto)")
        return "auto"
    raise ConfigurationError(f"{source}={value!r}: use true, false, auto, bwrap or none")
