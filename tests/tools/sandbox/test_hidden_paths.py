"""``Sandbox.hidden`` and ``Sandbox.env_keep`` (issue 35 §1), on real
bubblewrap: a hidden directory is empty, a hidden file is empty, a hidden
path inside the writable workspace (a state directory kept in a project)
stays hidden after the workspace is bound, a system directory is never
masked, and only the kept variables reach the command."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import msgspec
import pytest

from gemini_split.sandbox import Sandbox


@pytest.fixture
def base():
    path = f"/srv/gs-hidden-{uuid.uuid4().hex[:8]}"
    for d in ("secret-dir", "ws/state"):
        os.makedirs(os.path.join(path, d))
    for f, text in (("secret-dir/a", "DIR-CANARY"), ("secret.txt", "FILE-CANARY"), ("ws/state/db", "DB-CANARY")):
        with open(os.path.join(path, f), "w") as out:
            out.write(text)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_hidden_paths_are_empty_even_inside_the_workspace_and_only_kept_variables_pass(base):
    sandbox = msgspec.structs.replace(
        Sandbox.resolve("bwrap"), env_keep=("PATH", "LC_*"),
        hidden=(f"{base}/secret-dir", f"{base}/secret.txt", f"{base}/ws/state", "/usr", "/etc"))
    argv = sandbox.command(["sh", "-c", f"cat {base}/secret-dir/a {base}/secret.txt {base}/ws/state/db; "
                                        "echo mine > mine.txt; cat mine.txt; env; ls /usr/bin/env"],
                           cwd=f"{base}/ws", writable=[f"{base}/ws"])
    env = sandbox.environment({"PATH": "/usr/bin:/bin", "LC_ALL": "C", "SERVER_SECRET": "ENV-CANARY"})
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    out = result.stdout + result.stderr
    for canary in ("DIR-CANARY", "FILE-CANARY", "DB-CANARY", "ENV-CANARY", "SERVER_SECRET"):
        assert canary not in out
    assert "mine\n" in out and "LC_ALL=C" in out and "/usr/bin/env" in out
    assert open(f"{base}/ws/mine.txt").read() == "mine\n"
