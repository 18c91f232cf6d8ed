"""Shell commands under bubblewrap (``bwrap``): what a tool command may
touch, whoever asked for it.

What a sandboxed command sees of the machine depends on whose it is.

A **server-side session's** command (:attr:`Sandbox.allow_list`) sees what
it is given and nothing else — never a list of what to hide:

- the system's read-only directories (:data:`SYSTEM_DIRS`: software and its
  configuration), of ``/etc`` only what every user of the machine may read
  (:func:`etc_private`), with a fresh ``/dev``, ``/proc`` and a private,
  empty ``/tmp``, ``/var/tmp`` and home directory, on a read-only root;
- its workspace **read-write**;
- so every file the serving process opens (its state, logs, telemetry,
  tokens, credentials, ``.env``, policies, sockets, other sessions'
  workspaces) is out of sight wherever the operator put it, and the paths
  in :attr:`Sandbox.hidden` are masked as well where they lie inside what it
  sees (an operator's file under ``/etc``). The server builds that list, and
  the environment a command keeps (:attr:`Sandbox.env_keep`), in one place,
  ``gemini_split.server.session.features.server_tools.ServerTools.confinement``.

A **client's** command (the user's own machine, their own files) sees:

- the whole file system **read-only** (``--ro-bind / /``), with a fresh
  ``/dev``, ``/proc`` and a private, empty ``/tmp``;
- the home directory (``$HOME``, ``/home``, ``/root``) and ``/run`` hidden
  behind empty directories, so ``~/.ssh``, ``~/.aws``, agent and
  docker sockets are out of reach;
- the workspace and any ``--include-directories`` **read-write**, at their
  own paths (bound after the above, so a workspace under ``/tmp`` or ``~``
  stays visible).

Both:
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
import stat
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
    #: A server-side session's view: only :data:`SYSTEM_DIRS` (``/etc`` as
    #: every user may read it) and the writable directories, on an empty
    #: read-only root. False: the whole file system read-only, home hidden
    #: (a client's own machine).
    allow_list: bool = False

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
        home = home if home is not None else os.environ.get("HOME")
        home = os.path.realpath(home) if home and os.path.isabs(home) and os.path.realpath(home) != "/" else None
        binds = [os.path.realpath(p) for p in writable]
        if self.allow_list:
            args += _system_view()
            args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
            empty = [home] if home is not None else []
            # Only what is in sight can need a mask: the system directories and the binds.
            seen = [*(os.path.realpath(d) for d in SYSTEM_DIRS if os.path.isdir(d)), *binds]
            hidden = [*etc_private(), *self.hidden]
        else:
            args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
            empty = [p for p in ("/home", "/root", "/run", home) if p is not None and os.path.isdir(p)]
            seen = ["/"]
            hidden = list(self.hidden)
        for path in empty:
            args += ["--tmpfs", path]
        if self.network and os.path.isdir("/run/systemd/resolve"):
            args += ["--ro-bind", "/run/systemd/resolve", "/run/systemd/resolve"]  # resolv.conf's target
        masked = ["/tmp", *empty]
        inside_writable: list[str] = []
        for real in dict.fromkeys(os.path.realpath(p) for p in hidden):
            if not _maskable(real) or any(_within(real, m) for m in masked) \
                    or not any(_within(real, v) for v in seen):
                continue  # nothing to mask, already behind an empty directory, or out of sight
            args += _mask(real)
            if os.path.isdir(real):
                masked.append(real)
            if any(_within(real, b) and real != b for b in binds):
                inside_writable.append(real)
        for real in binds:
            args += ["--bind", real, real]
        for real in inside_writable:  # a bind above has put it back in sight
            args += _mask(real)
        if self.allow_list:
            args += ["--remount-ro", "/"]  # the empty root itself: nothing to write there either
        args += ["--chdir", os.path.realpath(cwd), "--"]
        return args + list(argv)


#: What a server-side session's commands see of the machine besides their
#: workspace (:attr:`Sandbox.allow_list`): installed software and its
#: configuration, read-only. A symlink among them (``/bin`` → ``usr/bin``
#: on a merged ``/usr``) is made the same symlink inside.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


def _system_view() -> list[str]:
    """The bwrap arguments that put :data:`SYSTEM_DIRS` into an empty root."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


#: How many entries of ``/etc`` :func:`etc_private` looks at, at most.
_ETC_SCAN_LIMIT = 20000


@functools.lru_cache(maxsize=1)
def etc_private() -> tuple[str, ...]:
    """What under ``/etc`` not every user of the machine may read (a file
    without the others' read bit, a directory without their read or search
    bit: ``/etc/shadow``, ``/etc/ssl/private``, ``/etc/sudoers``…): a
    server-side session sees ``/etc`` as any user does, whatever uid the
    server runs as. Read once per process (``/etc`` is the system's)."""
    found: list[str] = []
    seen = 0
    for top, dirs, files in os.walk("/etc"):
        for name in list(dirs):
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and mode & (stat.S_IROTH | stat.S_IXOTH) != (stat.S_IROTH | stat.S_IXOTH):
                found.append(path)
                dirs.remove(name)  # hidden whole
        for name in files:
            path = os.path.join(top, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.append(path)
        seen += len(dirs) + len(files)
        if seen > _ETC_SCAN_LIMIT:
            break
    return tuple(found)


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
