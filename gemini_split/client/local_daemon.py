"""The per-user local daemon: where it lives, and starting it on demand.

``GEMINI_SERVER_MODE=local`` (or ``--server local``) makes every run a thin
client of one background ``gemini-split daemon run`` per user, reached over
a Unix socket (the ``unix:`` transport): a script calling ``-p`` in a loop
stops paying for Python's and google-genai's start-up on each call.
:func:`ensure_daemon` returns its address, starting it first when none is
running (or when the one running is another version of gemini-split).

Where things are
----------------

* The socket: ``$XDG_RUNTIME_DIR/gemini-split/daemon.sock`` when the runtime
  directory is set and ours, else ``$GEMINI_SPLIT_HOME/daemon/daemon.sock``;
  the directory is created ``0700``, the socket ``0600``.
* Its state, in ``$GEMINI_SPLIT_HOME/daemon/``: ``daemon.json`` (pid,
  version, address; written by the daemon once it listens), ``daemon.log``
  (its log; the previous one is kept as ``daemon.log.1``) and ``daemon.lock``.

Starting once
-------------

Every start, stop and restart holds an exclusive ``flock`` on
``daemon.lock``: ten first calls at once start one daemon, and the other
nine find it running once they get the lock. A socket file left by a daemon
that crashed is replaced by the new daemon (the ``unix:`` transport removes
a socket nobody accepts on).

Which process is the daemon is checked, not assumed: ``daemon.json``'s pid
must be the pid the kernel reports for the socket's listener
(``SO_PEERCRED``), so a stale file or a recycled pid is never signalled.

A daemon that is dying is neither used nor raced: a process whose main
thread has ended (a zombie) while its other threads still exit keeps its
files, so its socket still takes connections that nobody will accept, and
refuses them a moment later. Such a daemon counts as not running, and a new
one is started only once the old one has let go of the socket
(:func:`_process_state`).

Everything here is synchronous: it runs before the client's event loop.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from gemini_split import __version__
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError

#: Seconds without a connection or a running request after which a daemon
#: started on demand exits (``daemon run --idle-exit``).
DEFAULT_IDLE_EXIT = 30 * 60.0
#: Seconds to wait for a new daemon to listen, and for one to stop.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
#: Seconds to wait for another process's start or stop (the lock).
LOCK_TIMEOUT = 60.0
#: A log over this size is moved to ``daemon.log.1`` when a daemon starts.
MAX_LOG_BYTES = 1024 * 1024

#: Never handed to the daemon: each session runs on its caller's key,
#: endpoint and token, sent over the socket (``hello.caller``).
_CALLER_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_SERVER_TOKEN",
                     "GEMINI_SERVER_MODE", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                     "GOOGLE_VERTEX_BASE_URL", "GOOGLE_APPLICATION_CREDENTIALS")
_UNIX_PATH_MAX = 107
_CRED = struct.Struct("3i")

#: Daemons this process started and has not reaped yet.
_children: list[subprocess.Popen[bytes]] = []


class DaemonError(ConfigurationError):
    """The local daemon could not be started, reached or stopped; the message
    says why and where its log is."""


class DaemonPaths:
    """Where the daemon's socket and state files are.

    Plain classes here, not dataclasses: this module is on every call's
    path in local mode, and a dataclass costs a millisecond or more to make."""

    __slots__ = ("socket", "state")

    def __init__(self, socket: Path, state: Path):
        self.socket = socket
        self.state = state

    def __repr__(self) -> str:
        return f"DaemonPaths(socket={str(self.socket)!r}, state={str(self.state)!r})"

    @property
    def address(self) -> str:
        return f"unix:{self.socket}"

    @property
    def info(self) -> Path:
        return self.state / "daemon.json"

    @property
    def log(self) -> Path:
        return self.state / "daemon.log"

    @property
    def lock(self) -> Path:
        return self.state / "daemon.lock"


class DaemonStatus:
    """What is known about the running daemon. ``pid`` is the listener's
    (None: nothing live accepts on the socket); ``version`` what it wrote in
    ``daemon.json`` (None: no file, or one that is not this daemon's);
    ``exiting`` the pid of a listener that is dying (see the module's
    docstring), whose socket is not yet free."""

    __slots__ = ("paths", "pid", "version", "started", "exiting")

    def __init__(self, paths: DaemonPaths, pid: int | None, version: str | None, started: float | None = None,
                 exiting: int | None = None):
        self.paths = paths
        self.pid = pid
        self.version = version
        self.started = started
        self.exiting = exiting

    def __repr__(self) -> str:
        return (f"DaemonStatus(pid={self.pid}, version={self.version!r}, started={self.started}, "
                f"exiting={self.exiting}, paths={self.paths!r})")

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def current(self) -> bool:
        """Running, and the same gemini-split as this client."""
        return self.pid is not None and self.version == __version__


def daemon_paths(env: Environment) -> DaemonPaths:
    """Where this user's daemon keeps its socket and state (directories
    created, mode 0700). Raises :class:`DaemonError` when a directory cannot
    be made private or the socket path is too long for a Unix socket."""
    state = env.config_dir / "daemon"
    _private_dir(state)
    runtime = env.environ.get("XDG_RUNTIME_DIR")
    socket_dir = state
    if runtime and _is_ours(Path(runtime)):
        socket_dir = Path(runtime) / "gemini-split"
        _private_dir(socket_dir)
    path = socket_dir / "daemon.sock"
    if len(os.fsencode(path)) > _UNIX_PATH_MAX:
        raise DaemonError(f"the daemon's socket path {path} is longer than a Unix socket allows "
                          f"({_UNIX_PATH_MAX} bytes): set XDG_RUNTIME_DIR or GEMINI_SPLIT_HOME to a shorter path")
    return DaemonPaths(socket=path, state=state)


def daemon_status(paths: DaemonPaths) -> DaemonStatus:
    """Probe the socket and read ``daemon.json``."""
    pid = _listener_pid(paths.socket)
    if pid is not None and _process_state(pid) != "live":
        return DaemonStatus(paths, None, None, exiting=pid)
    info = _read_info(paths.info)
    version = started = None
    if pid is not None and info.get("pid") == pid:
        version, started = info.get("version"), info.get("started")
    return DaemonStatus(paths, pid, version if isinstance(version, str) else None,
                        started if isinstance(started, int | float) else None)


def ensure_daemon(env: Environment, *, idle_exit: float = DEFAULT_IDLE_EXIT) -> str:
    """The address of this user's daemon, started first if none is running
    and restarted if it is another version. Raises :class:`DaemonError`."""
    paths = daemon_paths(env)
    # The common case, in a few system calls: daemon.json says this version
    # runs and that very process accepts on the socket (a probe, not only
    # the pid: a crashed daemon's pid and socket file can outlive it), and
    # is still live after the probe (not a dying one's last connections).
    info = _read_info(paths.info)
    pid = info.get("pid")
    if (info.get("version") == __version__ and isinstance(pid, int)
            and _listener_pid(paths.socket) == pid and _process_state(pid) == "live"):
        return paths.address
    with _locked(paths):
        status = daemon_status(paths)
        if status.current:
            return paths.address  # another caller started it while we waited
        _replace(env, paths, status, idle_exit)
    return paths.address


def start_daemon(env: Environment, *, idle_exit: float = DEFAULT_IDLE_EXIT, restart: bool = False) -> DaemonStatus:
    """``daemon start`` / ``daemon restart``: the daemon's status once it
    runs. Without ``restart``, a current daemon is left as it is."""
    paths = daemon_paths(env)
    with _locked(paths):
        status = daemon_status(paths)
        if status.current and not restart:
            return status
        _replace(env, paths, status, idle_exit)
        return daemon_status(paths)


def stop_daemon(env: Environment) -> DaemonStatus | None:
    """``daemon stop``: the status of the daemon that was stopped, or None
    when none was running."""
    paths = daemon_paths(env)
    with _locked(paths):
        status = daemon_status(paths)
        if status.exiting is not None:
            _wait_gone(status.exiting, STOP_TIMEOUT)
        if not status.running:
            return None
        _stop(status)
        return status


# --- starting and stopping (under the lock) ------------------------------------


def _replace(env: Environment, paths: DaemonPaths, status: DaemonStatus, idle_exit: float) -> None:
    """Stop the daemon of ``status`` if one runs, or wait for a dying one to
    be gone (its socket free), then start a new one."""
    if status.running:
        _stop(status)
    elif status.exiting is not None:
        _wait_gone(status.exiting, STOP_TIMEOUT)
    _start(env, paths, idle_exit)


def _start(env: Environment, paths: DaemonPaths, idle_exit: float) -> None:
    # Nor a .env file's variables: they belong to the project this run is in.
    environ = {k: v for k, v in env.environ.items() if k not in _CALLER_VARIABLES and k not in env.env_file_names}
    command = [sys.executable, "-m", "gemini_split", "daemon", "run", "--idle-exit", f"{idle_exit:g}"]
    _rotate(paths.log)
    with open(paths.log, "ab") as log:
        os.chmod(paths.log, 0o600)
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(command)}\n".encode())
        log.flush()
        child = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=environ, cwd="/",
            start_new_session=True, close_fds=True,
        )
    _children.append(child)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _read_info(paths.info).get("pid") == child.pid and daemon_status(paths).pid == child.pid:
            return
        if child.poll() is not None:
            raise DaemonError(f"the local daemon exited at once (status {child.returncode}); "
                              f"its log {paths.log} ends with:\n{_tail(paths.log)}")
        time.sleep(0.01)
    raise DaemonError(f"the local daemon (pid {child.pid}) did not listen on {paths.socket} within "
                      f"{START_TIMEOUT:g} s; see {paths.log}")


def _stop(status: DaemonStatus) -> None:
    """SIGTERM the listener (it finishes gracefully), SIGKILL it if it is
    still there after :data:`STOP_TIMEOUT`; return once it is gone, every
    thread of it (only then is its socket closed)."""
    assert status.pid is not None
    for signum, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        try:
            os.kill(status.pid, signum)
        except ProcessLookupError:
            return
        if _wait_gone(status.pid, wait, error=False):
            return
    raise DaemonError(f"the local daemon (pid {status.pid}) would not stop")


def _wait_gone(pid: int, timeout: float, *, error: bool = True) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to be gone; False
    (or, with ``error``, :class:`DaemonError`) if it is not by then."""
    deadline = time.monotonic() + timeout
    while _process_state(pid) != "gone":
        if time.monotonic() > deadline:
            if error:
                raise DaemonError(f"the local daemon (pid {pid}) is exiting but has not let go of its socket "
                                  f"after {timeout:g} s")
            return False
        time.sleep(0.01)
    return True


def _process_state(pid: int) -> str:
    """``"live"``; ``"exiting"``: a zombie whose other threads have not all
    ended, so it still holds its files (its socket takes connections nobody
    will accept); or ``"gone"``: no such process, or a zombie and nothing
    more (its files closed: it only waits for its parent)."""
    _children[:] = [child for child in _children if child.poll() is None]  # reap ours that exited
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        return "live"
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                return "live"
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (OSError, IndexError):
        return "gone"  # it went while we looked
    return "exiting" if threads > 1 else "gone"


# --- helpers ---------------------------------------------------------------------


class _locked:
    """The exclusive lock on ``daemon.lock``, for at most :data:`LOCK_TIMEOUT`."""

    def __init__(self, paths: DaemonPaths):
        self._paths = paths
        self._fd = -1

    def __enter__(self) -> None:
        self._fd = os.open(self._paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self._fd)
                    raise DaemonError(f"another gemini-split has held {self._paths.lock} for "
                                      f"{LOCK_TIMEOUT:g} s while starting or stopping the daemon") from None
                time.sleep(0.01)

    def __exit__(self, *exc_info: object) -> None:
        os.close(self._fd)  # closing releases the lock


def _listener_pid(path: Path) -> int | None:
    """The pid of the process accepting on the socket at ``path`` (our own
    uid only), or None when nothing does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(str(path))
        pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    except OSError:
        return None
    finally:
        sock.close()
    return pid if uid == os.geteuid() else None


def _read_info(path: Path) -> dict:
    try:
        # msgspec (the protocol's, loaded anyway), not the json module (~1.5 ms to import).
        data = msgspec.json.decode(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_info(paths: DaemonPaths, *, address: str) -> None:
    """The daemon's ``daemon.json``, written atomically once it listens."""
    temporary = paths.info.with_name(f".daemon.json.{os.getpid()}")
    temporary.write_bytes(msgspec.json.encode({"pid": os.getpid(), "version": __version__, "address": address,
                                               "started": time.time()}))
    os.replace(temporary, paths.info)


def remove_info(paths: DaemonPaths) -> None:
    """Remove ``daemon.json`` if it is this process's."""
    if _read_info(paths.info).get("pid") == os.getpid():
        try:
            paths.info.unlink()
        except FileNotFoundError:
            pass


def _private_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
        if info.st_uid != os.geteuid():
            raise DaemonError(f"{path} belongs to uid {info.st_uid}, not to you: the local daemon "
                              "keeps its socket only in a directory of your own")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(path, 0o700)
    except OSError as exc:
        raise DaemonError(f"cannot prepare {path} for the local daemon: {exc.strerror or exc}") from None


def _is_ours(path: Path) -> bool:
    try:
        info = path.stat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _rotate(log: Path) -> None:
    try:
        if log.stat().st_size > MAX_LOG_BYTES:
            os.replace(log, log.with_name(log.name + ".1"))
    except OSError:
        pass


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return "  (no log)"
    return "\n".join("  " + line for line in data.decode("utf-8", "replace").splitlines()[-15:])
