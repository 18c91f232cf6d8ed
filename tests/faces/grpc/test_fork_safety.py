"""A server that runs gRPC threads and starts tool commands (``serve --grpc
--server-tools``): no command may die of SIGSEGV between fork and exec.
grpcio's fork handlers did that to about one command in thirty; the plugin
switches them off before grpc is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

#: In a fresh interpreter (no conftest): the plugin, a live gRPC server and
#: channel, then many tool commands through the real process starter.
CHILD = textwrap.dedent("""
    import gemini_split_grpc  # what serve imports first
    import grpc, trio
    from concurrent import futures
    from gemini_split.tools.builtin.processes import open_tool_process, release_tool_process

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    grpc.channel_ready_future(grpc.insecure_channel(f"127.0.0.1:{port}")).result(timeout=10)

    async def main():
        codes = []
        for _ in range(RUNS):
            process = await open_tool_process(["/bin/sh", "-c", "exit 3"])
            codes.append(await process.wait())
            release_tool_process(process)
        print(sorted(set(codes)), sum(code != 3 for code in codes))

    trio.run(main)
    server.stop(0)
""")


@pytest.mark.timeout(120)
def test_tool_commands_started_beside_grpc_threads_never_die_of_sigsegv():
    environ = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    result = subprocess.run([sys.executable, "-c", CHILD.replace("RUNS", "200")], env=environ,
                            capture_output=True, text=True, timeout=110)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[3] 0", result.stdout  # every command exited 3 itself
