"""The console script leaves without tearing the interpreter down
(``cli.exit_without_teardown``), and nothing anyone can see changes: the
exit status, every byte written, the threads that are not daemons, the
``atexit`` handlers; a reader that went away ends the run as before."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: ``gemini-split ARGV`` through the console script's ``run()``, with a
#: non-daemon thread that finishes late and an ``atexit`` handler, both
#: reporting on stderr, and a shutdown-time ``__del__`` that must not matter.
RUN = textwrap.dedent("""
    import atexit, sys, threading, time
    from gemini_split import cli

    def late():
        time.sleep(0.3)
        sys.stderr.write("thread finished\\n")

    threading.Thread(target=late).start()
    atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
    sys.argv = ["gemini-split", *sys.argv[1:]]
    cli.run()
""")


#: stdout block-buffered, as in a script's pipe.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def run(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True, timeout=30, env=BUFFERED)


@pytest.mark.timeout(60)
def test_the_status_output_threads_and_atexit_handlers_are_all_kept():
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout == b"gemini-split 0.1.0\n"
    assert result.stderr == b"thread finished\natexit ran\n"  # the thread first, as Python does it

    usage = run("--no-such-flag")
    assert usage.returncode == 2
    assert b"unrecognized arguments: --no-such-flag" in usage.stderr
    assert usage.stderr.endswith(b"thread finished\natexit ran\n")


@pytest.mark.timeout(60)
def test_buffered_output_is_flushed_before_leaving():
    # stdout is a pipe, so block-buffered: the help text sits in the buffer
    # when main returns, and must still arrive whole.
    result = run("--help")
    assert result.returncode == 0
    assert result.stdout.startswith(b"usage: gemini-split") and result.stdout.rstrip().endswith(b"interrupted.")


@pytest.mark.timeout(60)
def test_a_reader_that_went_away_ends_the_run_quietly_with_its_own_status():
    # The reader closes at once: the flush fails, what is left unwritten is
    # dropped, and the run ends with the command's own status (0 here) and
    # no "Exception ignored" report, as tools do on SIGPIPE (issue 34) — the
    # threads and atexit handlers still run first.
    reader_gone = textwrap.dedent("""
        import os, subprocess, sys
        read, write = os.pipe()
        os.close(read)
        child = subprocess.run([sys.executable, "-c", sys.argv[1], "--version"], stdout=write,
                               stderr=subprocess.PIPE)
        print(child.returncode)
        sys.stderr.buffer.write(child.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", reader_gone, RUN], capture_output=True, timeout=30, env=BUFFERED)
    assert result.stdout.strip() == b"0", result.stderr
    assert result.stderr == b"thread finished\natexit ran\n"
