"""``serve --server-tools`` and ``gemini-split --server URL --tools server``
end to end: a real daemon process, the fake Gemini server behind it, and
real one-shot client processes."""

from __future__ import annotations

import json
import shutil

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client, daemon
from .helpers import unix_listener, workspaces_in


def _calls(*calls):
    return [{"function_calls": [{"name": n, "args": a}]} for n, a in calls]


@pytest.fixture
def client_dir(tmp_path):
    d = tmp_path / "client"
    d.mkdir()
    return d


@pytest.mark.timeout(90)
def test_one_shot_gets_reject_dangerous_refusals_without_hanging_and_yolo_runs_on_the_server(tmp_path, client_dir):
    root = tmp_path / "workspaces"
    script = _calls(("write_file", {"file_path": "out.txt", "content": "from the server\n"}),
                    ("run_shell_command", {"command": "echo ran > ran.txt"}))
    script += [{"text": "refused"}] + _calls(
        ("write_file", {"file_path": "out.txt", "content": "from the server\n"}),
        ("run_shell_command", {"command": "echo ran > ran.txt"})) + [{"text": "done"}]
    # The default sandbox (auto: bubblewrap, which .ci/run installs) where it works.
    sandbox = ("--sandbox", "auto" if shutil.which("bwrap") else "none")
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen, daemon(
            tmp_path, fake, "--server-tools", "--workspace-root", str(root), *sandbox, *listen,
            "--max-approval-mode", "yolo") as (_, address):
        refused = client(["--server", address, "--tools", "server", "-p", "write it", "-o", "json"],
                         cwd=client_dir, in_process=False)
        ran = client(["--server", address, "--tools", "server", "--yolo", "-p", "write it", "-o", "json"],
                     cwd=client_dir, in_process=False)
    assert refused.returncode == 0, refused.stderr
    stats = json.loads(refused.stdout)["stats"]["tools"]["byName"]
    assert stats["write_file"]["fail"] == 1 and stats["run_shell_command"]["fail"] == 1
    assert ran.returncode == 0, ran.stderr
    stats = json.loads(ran.stdout)["stats"]["tools"]["byName"]
    assert stats["write_file"]["success"] == 1 and stats["run_shell_command"]["success"] == 1
    workspaces = workspaces_in(root)
    written = [w for w in workspaces if (w / "out.txt").exists()]
    assert len(workspaces) == 2 and len(written) == 1
    assert (written[0] / "out.txt").read_text() == "from the server\n"
    assert (written[0] / "ran.txt").read_text() == "ran\n"
    assert not list(client_dir.iterdir())  # nothing ran where the client is


@pytest.mark.timeout(60)
def test_a_client_asking_for_server_tools_of_a_server_without_them_is_told_how(tmp_path, client_dir):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake) as (_, address):
        result = client(["--server", address, "--tools", "server", "-p", "hi"], cwd=client_dir)
    assert result.returncode != 0
    assert "--server-tools" in result.stderr and "Traceback" not in result.stderr


def test_serve_refuses_to_start_server_tools_without_a_sandbox_unless_told(tmp_path):
    # No bwrap on this PATH: the default (auto) refuses, saying what to do.
    with unix_listener() as listen:
        result = client(["serve", "--server-tools", "--workspace-root", str(tmp_path / "w"), *listen], cwd=tmp_path,
                        env_extra={"GEMINI_API_KEY": "k", "PATH": str(tmp_path / "empty")})
    assert result.returncode != 0
    assert "bwrap is not installed" in result.stderr and "--sandbox none" in result.stderr
    result = client(["serve", "--project", "x=/tmp"], cwd=tmp_path, env_extra={"GEMINI_API_KEY": "k"})
    assert result.returncode != 0 and "--server-tools" in result.stderr


@pytest.mark.timeout(90)
def test_a_deny_rule_of_the_servers_policy_beats_a_clients_yolo(tmp_path, client_dir):
    policy = tmp_path / "team.toml"
    policy.write_text('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "touch"\n'
                      'decision = "deny"\npriority = 1\n')
    root = tmp_path / "workspaces"
    script = _calls(("run_shell_command", {"command": "touch denied.txt"}),
                    ("run_shell_command", {"command": "echo allowed > ok.txt"})) + [{"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen, daemon(
            tmp_path, fake, "--server-tools", "--workspace-root", str(root), "--sandbox", "none",
            "--policy", str(policy), *listen, "--max-approval-mode", "yolo") as (_, address):
        result = client(["--server", address, "--tools", "server", "--yolo", "-p", "go", "-o", "json"],
                        cwd=client_dir, in_process=False)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)["stats"]["tools"]["byName"]["run_shell_command"]
    assert stats["fail"] == 1 and stats["success"] == 1
    (workspace,) = workspaces_in(root)
    assert not (workspace / "denied.txt").exists() and (workspace / "ok.txt").read_text() == "allowed\n"
    refusal = fake.requests[1]["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]["error"]
    assert refusal["code"] == "refused" and "team.toml" in refusal["message"]


@pytest.mark.timeout(90)
def test_the_servers_deny_rule_sees_through_exec_wrappers_and_unseen_programs(tmp_path, client_dir):
    """Issue 35 item 3 on the server: the operator's ``serve --policy`` is
    decided by the same engine, so a user's yolo session cannot wrap a
    denied command (``env``, ``nice``, ``find -exec``) or hide it from the
    policy (``xargs``, a shell reading a pipe)."""
    policy = tmp_path / "team.toml"
    policy.write_text('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "touch"\n'
                      'decision = "deny"\npriority = 1\n')
    root = tmp_path / "workspaces"
    wrapped = ["env FOO=1 touch a.txt", "nice -n 5 touch b.txt", "find . -maxdepth 0 -exec touch c.txt \\;",
               "echo d.txt | xargs touch", "echo touch e.txt | sh"]
    script = _calls(*(("run_shell_command", {"command": c}) for c in wrapped),
                    ("run_shell_command", {"command": "env echo allowed > ok.txt"})) + [{"text": "done"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, unix_listener() as listen, daemon(
            tmp_path, fake, "--server-tools", "--workspace-root", str(root), "--sandbox", "none",
            "--policy", str(policy), *listen, "--max-approval-mode", "yolo") as (_, address):
        result = client(["--server", address, "--tools", "server", "--yolo", "-p", "go", "-o", "json"],
                        cwd=client_dir, in_process=False)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)["stats"]["tools"]["byName"]["run_shell_command"]
    assert stats["fail"] == len(wrapped) and stats["success"] == 1
    (workspace,) = workspaces_in(root)
    assert sorted(p.name for p in workspace.iterdir()) == ["ok.txt"]
    refusals = [fake.requests[i]["body"]["contents"][-1]["parts"][0]["functionResponse"]["response"]["error"]
                for i in range(1, len(wrapped) + 1)]
    # Denied where the command is in plain sight; the pipe into sh is a
    # question, which a one-shot client cannot answer: not run either.
    assert all(r["code"] == "refused" and "touch" in r["message"] for r in refusals[:-1]), refusals
    assert refusals[-1]["code"] == "not_approved", refusals
