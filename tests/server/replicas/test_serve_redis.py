"""``serve --store redis://…`` end to end: real serve processes, a real
redis-server, the fake Gemini server, the CLI as a user runs it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.server.resume.test_resume_e2e import _free_port, client
from tests.e2e.test_serve_e2e import API_KEY, _env
from .replicas import replica

pytestmark = pytest.mark.skipif(not rs.available(), reason=rs.MISSING)


@pytest.mark.timeout(90)
def test_a_conversation_started_on_one_replica_goes_on_on_another(tmp_path, redis_server):
    url = redis_server.url_with_prefix()
    script = [{"text": "The first answer."}, {"text": "The second answer."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        port_a = _free_port()
        with replica(tmp_path, fake, url, port_a, name="a"):
            first = client(["--server", f"ws://127.0.0.1:{port_a}", "-p", "first question"], cwd=tmp_path)
            assert first.returncode == 0 and first.stdout == "The first answer.\n", first.stderr
        port_b = _free_port()
        with replica(tmp_path, fake, url, port_b, name="b"):
            second = client(["--server", f"ws://127.0.0.1:{port_b}", "--resume", "latest", "-p", "second question"],
                            cwd=tmp_path)
            assert second.returncode == 0 and second.stdout == "The second answer.\n", second.stderr
            listed = client(["--server", f"ws://127.0.0.1:{port_b}", "--list-sessions"], cwd=tmp_path)
            assert "first question" in listed.stdout, listed.stdout
        # The second call carried the first turn: the history came from Redis.
        contents = fake.requests[-1]["body"]["contents"]
        texts = [p.get("text", "") for c in contents for p in c["parts"]]
        assert any("first question" in t for t in texts) and "The first answer." in texts


@pytest.mark.timeout(60)
def test_serve_with_an_unreachable_redis_says_so_without_the_password(tmp_path):
    port = rs.free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", f"127.0.0.1:{_free_port()}", "--store",
         f"redis://admin:hunter2@127.0.0.1:{port}/0"],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=50)
    assert proc.returncode != 0
    assert f"redis://127.0.0.1:{port}/0" in proc.stderr and "cannot reach Redis" in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout


@pytest.mark.timeout(60)
def test_store_takes_only_a_redis_url(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gemini_split", "serve", "--store", "/var/lib/sessions"],
        cwd=tmp_path, env=_env(GEMINI_API_KEY=API_KEY), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=50)
    assert proc.returncode != 0 and "redis://" in proc.stderr, proc.stderr


@pytest.mark.timeout(90)
def test_a_replicas_start_up_line_names_its_redis_store_without_the_password(tmp_path):
    with rs.RedisServer(tmp_path / "redis", password="pa55-word") as server, FakeGemini(api_key=API_KEY) as fake:
        url = f"redis://default:pa55-word@127.0.0.1:{server.port}/0"
        with replica(tmp_path, fake, url, _free_port(), name="a"):
            pass
    log = (tmp_path / "a.log").read_text()
    assert f"(model gemini-2.5-flash, auth off, store redis://127.0.0.1:{server.port}/0)" in log, log
    assert "pa55-word" not in log


@pytest.mark.timeout(120)
def test_list_sessions_through_either_replica_says_which_session_is_answering_now(tmp_path, redis_server):
    """A slow streamed answer on replica A: ``--list-sessions`` through A
    and through B both mark the session running, and neither does once it
    has finished (issue 33)."""
    url = redis_server.url_with_prefix()
    script = [{"text": "".join(f"line {i} of a slow answer\n" for i in range(40)), "chunks": 40,
               "chunk_delay": 0.2}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        port_a, port_b = _free_port(), _free_port()
        with replica(tmp_path, fake, url, port_a, name="a"), replica(tmp_path, fake, url, port_b, name="b"):
            servers = [f"ws://127.0.0.1:{port}" for port in (port_a, port_b)]

            def listed(server: str) -> str:
                ran = client(["--server", server, "--list-sessions"], cwd=tmp_path)
                assert ran.returncode == 0, ran.stderr
                return ran.stdout

            answering = subprocess.Popen(
                [sys.executable, "-m", "gemini_split", "--server", servers[0], "-p", "tell me a slow story"],
                cwd=tmp_path, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 60
                for server in (servers[1], servers[0]):
                    while "(running, 1 attached)" not in (text := listed(server)):
                        assert answering.poll() is None and time.monotonic() < deadline, text
                        time.sleep(0.2)
                    assert "Available sessions for this project (1):" in text
                out, err = answering.communicate(timeout=60)
            finally:
                if answering.poll() is None:
                    answering.kill()
                    answering.communicate()
            assert answering.returncode == 0 and "line 39 of a slow answer" in out, err
            for server in servers:
                deadline = time.monotonic() + 30
                while "running" in (text := listed(server)) or "attached" in text:
                    assert time.monotonic() < deadline, text
                    time.sleep(0.2)
                assert "tell me a slow story" in text
