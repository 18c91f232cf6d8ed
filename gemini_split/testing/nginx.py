"""A real ``nginx`` in front of replicas, for tests and benchmarks.

``Nginx(directory, upstreams, ...)`` writes ``deploy/nginx.conf`` — the file
docs/deployment.md gives — with the test's ports, certificate and paths filled
in, and runs ``nginx -g 'daemon off;'`` on a free loopback port. Everything
it writes (pid, logs, temp files) stays in ``directory``.

Needs no pytest: ``bench/replicas.py`` uses it too.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .redis_server import free_port

MISSING = ("nginx is not installed: the replicas-behind-nginx tests need it "
           "(apt-get install nginx-light; .ci/run does this)")
#: The deployment config, as shipped (the repository's deploy/nginx.conf).
CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"


def available() -> bool:
    return shutil.which("nginx") is not None or Path("/usr/sbin/nginx").exists()


def _binary() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def render(upstreams: list[int], port: int, directory: Path, *, cert: Path | None = None,
           key: Path | None = None) -> str:
    """deploy/nginx.conf for these replica ports, listening on ``port``
    (with TLS when ``cert`` and ``key`` are given), with its files in
    ``directory``. Only the lines that name this machine change."""
    conf = CONFIG.read_text()
    servers = "".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;\n" for p in upstreams)
    conf, n = re.subn(r"(    upstream gemini_split \{\n)(?:        server .*\n)+", lambda m: m.group(1) + servers, conf)
    assert n == 1, "deploy/nginx.conf: the upstream block changed shape"
    if cert is not None and key is not None:
        conf = conf.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
        conf = conf.replace("/etc/gemini-split/tls/fullchain.pem", str(cert))
        conf = conf.replace("/etc/gemini-split/tls/privkey.pem", str(key))
    else:
        conf = conf.replace("listen 443 ssl;", f"listen 127.0.0.1:{port};")
        conf = re.sub(r"        ssl_\w+ .*;\n", "", conf)
    conf = conf.replace("worker_processes auto;", "worker_processes 1;")
    # Files of its own, in the test's directory (the config's paths are the
    # system's defaults otherwise).
    d = str(directory)
    own = (f"pid {d}/nginx.pid;\nerror_log {d}/error.log info;\n"
           + ("user root;\n" if os.geteuid() == 0 else ""))
    temp = (f"    access_log {d}/access.log;\n"
            + "".join(f"    {name}_temp_path {d}/{name};\n"
                      for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")))
    conf = own + conf.replace("http {\n", "http {\n" + temp, 1)
    assert "listen 443" not in conf
    return conf


class Nginx:
    def __init__(self, directory: Path, upstreams: list[int], *, cert: Path | None = None,
                 key: Path | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.upstreams = upstreams
        self.port = free_port()
        self.cert, self.key = cert, key
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'wss' if self.cert else 'ws'}://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> Nginx:
        conf = self.directory / "nginx.conf"
        conf.write_text(render(self.upstreams, self.port, self.directory, cert=self.cert, key=self.key))
        self.process = subprocess.Popen([_binary(), "-p", str(self.directory), "-c", str(conf),
                                         "-g", "daemon off;"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=open(self.directory / "stderr.log", "ab"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited ({self.process.returncode}): {self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"nginx did not listen on {self.port}: {self.log()}")

    def log(self) -> str:
        text = ""
        for name in ("stderr.log", "error.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")[-1500:]
        return text

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
