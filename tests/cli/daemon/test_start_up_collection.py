"""Start-up's imports run with the cyclic garbage collector paused
(:mod:`gemini_split.collector`), only in a process that is ours: the
collector runs again afterwards, and a program (or test) that calls
``main`` in its own process keeps its collector exactly as it was."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pytest

from tests.inprocess import cli

#: ``gemini-split ARGV`` through the console script's ``run()``; at exit
#: (an ``atexit`` handler, which ``run()`` still calls) it writes on stderr
#: whether the collector is on, how many objects are frozen, and whether a
#: cycle made after start-up is still collected.
RUN = textwrap.dedent("""
    import atexit, gc, sys, weakref
    from gemini_split import cli

    def report():
        class Node:
            pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        gc.collect()
        sys.stderr.write(f"enabled={gc.isenabled()} frozen={gc.get_freeze_count()} "
                         f"cycle_freed={alive() is None}\\n")

    atexit.register(report)
    sys.argv = ["gemini-split", *sys.argv[1:]]
    cli.run()
""")


def _run_prompt(environ: dict[str, str], cwd) -> dict[str, str]:
    result = subprocess.run([sys.executable, "-c", RUN, "-p", "hi"], env=environ, cwd=cwd,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hi\n"
    report = result.stderr.strip().splitlines()[-1]
    return dict(item.split("=") for item in report.split())


@pytest.mark.timeout(90)
def test_a_prompt_runs_with_the_collector_on_after_its_imports(environ, tmp_path):
    fields = _run_prompt(environ, tmp_path)  # through the local daemon
    assert fields["enabled"] == "True" and fields["cycle_freed"] == "True"
    assert int(fields["frozen"]) > 10_000  # start-up's modules, frozen once loaded


@pytest.mark.timeout(90)
def test_an_embedded_prompt_runs_with_the_collector_on_after_google_genai_loads(environ, tmp_path):
    embedded = {k: v for k, v in environ.items() if k != "GEMINI_SERVER_MODE"}
    fields = _run_prompt(embedded, tmp_path)
    assert fields["enabled"] == "True" and fields["cycle_freed"] == "True"
    assert int(fields["frozen"]) > 100_000  # google-genai's (and pydantic's) too


@pytest.mark.timeout(60)
def test_main_inside_another_process_leaves_its_collector_alone(tmp_path):
    frozen = gc.get_freeze_count()
    environ = {"GEMINI_SPLIT_HOME": str(tmp_path), "GEMINI_API_KEY": "k"}
    # The one-shot path's imports (and a connection that fails), in this process.
    result = cli(["-p", "hi", "--server", f"unix:{tmp_path}/none.sock"], environ=environ, cwd=tmp_path)
    assert result.returncode != 0 and "none.sock" in result.stderr
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


@pytest.mark.timeout(60)
def test_an_embedded_main_inside_another_process_leaves_its_collector_alone(fake, tmp_path):
    frozen = gc.get_freeze_count()
    environ = {"GEMINI_SPLIT_HOME": str(tmp_path), **fake.env}
    result = cli(["-p", "hi"], environ=environ, cwd=tmp_path)  # the embedded server and google-genai
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hi\n"
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


@pytest.mark.timeout(30)
def test_a_server_in_a_burst_collects_its_young_generation_later_then_as_before():
    """``serve`` settles its collector, then lets the young generation grow
    while a burst is on its way to its first deltas (``collector.bursting``, hooked
    to the server's answer-first bookkeeping); a process that is not a
    server keeps its collector as it is."""
    code = textwrap.dedent("""
        import gc
        from gemini_split import collector
        before = gc.get_threshold()
        collector.bursting(True)
        print(gc.get_threshold() == before)
        collector.settle_for_serving()
        print(gc.get_threshold())
        collector.bursting(True)
        print(gc.get_threshold())
        collector.bursting(False)
        print(gc.get_threshold())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True)
    assert out.stdout.split("\n")[:4] == ["True", "(10000, 10, 10)", "(500000, 10, 10)", "(10000, 10, 10)"]
