"""A ``deny`` rule sees through exec wrappers (issue 35, item 3).

The attack run wrote ``commandPrefix = "git push"``, ``decision = "deny"``
and ran with ``--yolo`` (the case deny rules exist for): 32 of 77 spellings
of ``git push`` ran. Every spelling below must be denied, or asked about
where the policy cannot see what runs (a shell reading its program from a
pipe, ``xargs`` adding words) — never allowed. The engine alone here; the
same table through the real command line is in ``test_cli.py``.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gemini_split.policy import Decision, Policy, allowed_tools_rules, read_policy_file

ALLOW, DENY, ASK = Decision.ALLOW, Decision.DENY, Decision.ASK_USER

DENY_PUSH = ('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "git push"\ndecision = "deny"\n'
             'priority = 200\ndenyMessage = "push yourself"\n')

#: The 45 spellings the engine denied before the fix; they stay denied.
DENIED_BEFORE = [
    "git push",
    "git  push origin main",
    "git push origin main",
    "git push --force",
    "git push -u origin feature",
    "git push --dry-run",
    "(git push)",
    "( (git push) )",
    "(cd . && git push)",
    "true && git push",
    "false || git push",
    "git push; ls",
    "ls; git push",
    "ls | git push",
    "git push &",
    "git push && echo done",
    "ls\ngit push",
    "echo hi && git push origin HEAD:main",
    "$(git push)",
    "echo $(git push)",
    'echo "$(git push)"',
    "x=$(git push)",
    'cat <<< "$(git push)"',
    "`git push`",
    "echo `git push`",
    "bash -c 'git push'",
    'sh -c "git push"',
    "dash -c 'git push'",
    "sh -c 'cd /tmp && git push'",
    "bash -c \"bash -c 'git push'\"",
    "eval git push",
    "eval 'git push'",
    'eval "eval git push"',
    "GIT_DIR=x git push",
    "FOO=1 BAR=2 git push",
    "/usr/bin/git push",
    "/bin/git push",
    '"git" push',
    "'git' 'push'",
    "g\\it push",
    "git pu\\sh",
    'git "push"',
    "git push > /dev/null 2>&1",
    "git push > log",
    "git push 2>&1 | tee log",
]

#: The 32 spellings that ran ``git push`` before the fix, and what they get
#: now: denied where the command is in plain sight, asked where it is not.
BYPASSED_BEFORE = [
    ("env git push", DENY),
    ("env FOO=1 git push", DENY),
    ("/usr/bin/env git push", DENY),
    ("env -i git push", DENY),
    ("env -u HOME git push", DENY),
    ("command git push", DENY),
    ("command -p git push", DENY),
    ("exec git push", DENY),
    ("nice git push", DENY),
    ("nice -n 5 git push", DENY),
    ("nohup git push", DENY),
    ("timeout 5 git push", DENY),
    ("timeout -s KILL 5 git push", DENY),
    ("setsid git push", DENY),
    ("stdbuf -oL git push", DENY),
    ("ionice -c 3 git push", DENY),
    ("taskset 1 git push", DENY),
    ("flock /tmp/lock git push", DENY),
    ("script -qc 'git push' /dev/null", DENY),
    ("find . -exec git push \\;", DENY),
    ("git -C . push", DENY),
    ("git -c a.b=c push", DENY),
    ("git --no-pager push", DENY),
    ("git --git-dir=.git push", DENY),
    ("zsh -c 'git push'", DENY),
    ("echo push | xargs git", ASK),
    ("xargs -I{} git {} <<< push", ASK),
    ("echo git push | sh", ASK),
    ("sh <<< 'git push'", ASK),
    ("printf 'git push' | bash", ASK),
    (". /dev/stdin <<< 'git push'", ASK),
    ("python3 - <<< 'import os; os.system(\"git push\")'", ASK),
]

#: More spellings of the same kinds: wrapper options, wrappers in wrappers.
MORE = [
    ("env -- git push", DENY),
    ("env -i PATH=/usr/bin HOME=/ git push", DENY),
    ("env --unset=HOME -C . git push", DENY),
    ("env -S 'git push'", ASK),
    ("env $OPT git push", ASK),
    ("command -- git push", DENY),
    ("builtin eval git push", DENY),
    ("exec -a x git push", DENY),
    ("exec -cl git push", DENY),
    ("nice -n5 git push", DENY),
    ("nice -5 git push", DENY),
    ("nice --adjustment=5 -- git push", DENY),
    ("nice $N git push", ASK),
    ("nohup -- git push", DENY),
    ("timeout --signal=KILL -k 1 5s git push", DENY),
    ("timeout --foreground --preserve-status 5 git push", DENY),
    ("setsid -fw git push", DENY),
    ("stdbuf -o L -e0 git push", DENY),
    ("ionice -c3 -n 7 -t git push", DENY),
    ("taskset -c 0,1 git push", DENY),
    ("flock -w 3 -x /tmp/lock git push", DENY),
    ("flock /tmp/lock -c 'git push'", DENY),
    ("script -q -c 'git push'", DENY),
    ("script --command 'git push' out.log", DENY),
    ("script /dev/null -qc 'git push'", DENY),
    ("script -q out.log <<< 'git push'", ASK),
    ("sudo git push", DENY),
    ("sudo -u bob -E FOO=1 git push", DENY),
    ("sudo -s <<< 'git push'", ASK),
    ("doas -u bob git push", DENY),
    ("chroot / git push", DENY),
    ("chroot --userspec=1:1 / git push", DENY),
    ("su -c 'git push' bob", DENY),
    ("runuser -u bob -- git push", DENY),
    ("watch -n 1 git push", DENY),
    ("/usr/bin/time -v git push", DENY),
    ("nohup nice -n 5 timeout 5 env FOO=1 git push", DENY),
    ("exec env git -C . push", DENY),
    ("find . -name x -execdir git push \\;", DENY),
    ("find . -ok git push \\;", DENY),
    ("find . -exec true \\; -exec git push {} +", DENY),
    ("find . -exec sh -c 'git push' \\;", DENY),
    ("find . -exec git {} \\;", ASK),
    ("xargs git push < /dev/null", DENY),
    ("xargs -n 1 -P 2 git <<< push", ASK),
    ("xargs -0 -a list git", ASK),
    ("xargs sh -c 'git push'", DENY),
    ("xargs sh", ASK),
    ("bash -s <<< 'git push'", ASK),
    ("bash - <<< 'git push'", ASK),
    ("bash /dev/stdin <<< 'git push'", ASK),
    ("bash -eo pipefail -c 'git push'", DENY),
    ("bash -lc 'git push'", DENY),
    ("bash --norc -c 'git push'", DENY),
    ("bash -c \"$CMD\"", ASK),
    ("zsh <<< 'git push'", ASK),
    ("ksh -c 'git push'", DENY),
    ("fish -c 'git push'", ASK),
    ("source /dev/stdin <<< 'git push'", ASK),
    (". /dev/fd/0 <<< 'git push'", ASK),
    (". $F", ASK),
    ("python3 <<< 'import os; os.system(\"git push\")'", ASK),
    ("python3 -u -W ignore - <<< 'import os'", ASK),
    ("perl <<< 'system q(git push)'", ASK),
    ("node < script.js", ASK),
    ("python3 -Wignore -i x.py <<< 'import os'", ASK),
    ("perl -Mfeature=say <<< 'system q(git push)'", ASK),
    ("node --require x <<< 'x'", ASK),
    ("python3 -- /dev/stdin <<< 'x'", ASK),
    ("busybox sh -c 'git push'", DENY),
    ("busybox env git push", DENY),
    ("git -C . -c x.y=z --no-pager --git-dir .git --work-tree . push", DENY),
    ("git --exec-path=. -p push", DENY),
    ("git -c alias.p=push p", ASK),
    ("git --config-env=alias.p=X p", ASK),
    ("git -c include.path=x p", ASK),
    ("git $OPT push", ASK),
    ("env " * 200 + "git push", ASK),  # deeper than the engine follows: asked, never allowed
    # Renaming: an alias, a hashed path, git's dashed programs.
    ("shopt -s expand_aliases\nalias p='git push'\np", DENY),
    ("alias p=git; p push", ASK),
    ("hash -p /usr/bin/git g; g push", ASK),
    ("/usr/lib/git-core/git-push origin", DENY),
    # Commands that run a command given as a string or in a variable.
    ("trap 'git push' EXIT", DENY),
    ("GIT_EDITOR='git push' git commit", DENY),
    ("PS4='$(git push)' bash -xc true", DENY),
    ("export PROMPT_COMMAND='git push'", DENY),
    ("BASH_ENV=/dev/stdin bash -c true <<< 'git push'", ASK),
    ("env 'BASH_FUNC_git%%=() { command git push; }' bash -c 'git status'", ASK),
    ("git -c core.pager='git push' log", DENY),
    ("git -c core.sshCommand='sh -c \"git push\"' fetch", DENY),
    ("git -c credential.helper='!git push' fetch", DENY),
    ("git bisect run git push", DENY),
    ("git submodule foreach --recursive git push", DENY),
    ("git rebase -x 'git push' HEAD~1", DENY),
    ("git rebase --exec='git push' HEAD~1", DENY),
    # Programs that read the commands they run from their input.
    ("echo 'git push' | at now", ASK),
    ("tmux new -d 'git push'", ASK),
    # Wrappers whose options are not modelled one by one: a denied command
    # among their words is asked about.
    ("strace -f -o /dev/null git push", ASK),
    ("unshare -r git push", ASK),
    ("chrt 1 git push", ASK),
    ("prlimit --nofile=100 /usr/bin/git push", ASK),
    ("fakeroot -- git push origin main", ASK),
    ("ssh localhost git push", ASK),
    ("poetry run git push", ASK),
    # Bash builtins that run a command string, or set a variable a shell runs.
    ("compgen -C 'git push' x", DENY),
    ("mapfile -C 'git push' -c 1 lines <<< x", DENY),
    ("read PS4 <<< '$(git push)'; set -x; true", ASK),
    ("set -o history; history -s 'git push'; fc -s git", ASK),
    ('git -C "$PWD" push', DENY),
    # More git options whose value git runs, and make reading a pipe.
    ("git filter-branch --tree-filter 'git push' HEAD", DENY),
    ("git difftool --extcmd='git push' HEAD", DENY),
    ("git fetch --upload-pack 'git push' origin", DENY),
    ("git grep -O'git push' x", DENY),
    ("git clone -u 'git push' ../remote", DENY),
    ("make -f /dev/stdin <<< 'x'", ASK),
    ("make --eval 'x: ; git push' x", ASK),
]

#: With only ``git push`` denied these still run under yolo.
CONTROLS = [
    "env git status",
    "env FOO=1 git fetch",
    "nice git log",
    "nice -n 5 git log",
    "timeout 5 git fetch",
    "git -C . status",
    "git -c color.ui=never log",
    "git --no-pager log",
    "git push-helper",  # whole words
    "echo git push",
    "grep -r 'git push' .",
    "command -v git",
    "env",
    "nice",
    "bash -c 'git status'",
    "sh build.sh",
    "python3 script.py",
    "python3 -m json.tool < data.json",
    "python3 -c 'print(1)'",
    "python3 -Wignore script.py -",
    "perl -ne 'print' file.txt",
    "node --require ts-node/register app.ts",
    "echo a b | xargs ls",
    "find . -name '*.py' -exec grep -l push {} +",
    "sudo -l",
    "flock 9",
    "GIT_EDITOR=true git commit --amend",
    "git rebase -x 'make test' main",
    "git -c core.pager=cat log",
    "alias ll='ls -l'",
    "trap 'rm -f tmp' EXIT",
    "hash -r",
    "fc -l",
    "read -r line < notes.txt",
    "mapfile -t lines < notes.txt",
    "make -j4 test",
    "npm run push",
    "git grep -n push",
    "git clone -q ../remote",
]


@pytest.fixture(scope="module")
def deny_push(tmp_path_factory) -> Policy:
    """The attack's policy, read once for the property tests' many examples."""
    return yolo_policy(tmp_path_factory.mktemp("policy"))


def yolo_policy(tmp_path, text: str = DENY_PUSH) -> Policy:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return Policy().with_rules(read_policy_file(path, 4))


def decide(policy: Policy, command: str, mode: str = "yolo"):
    return policy.decide("run_shell_command", {"command": command}, mode, kind="execute")


def test_the_table_has_the_77_spellings_of_the_attack():
    assert len(DENIED_BEFORE) == 45 and len(BYPASSED_BEFORE) == 32
    assert len({*DENIED_BEFORE, *(c for c, _ in BYPASSED_BEFORE)}) == 77


@pytest.mark.parametrize("command", DENIED_BEFORE)
def test_ordinary_spellings_of_a_denied_command_stay_denied_under_yolo(tmp_path, command):
    verdict = decide(yolo_policy(tmp_path), command)
    assert verdict.decision is DENY, (command, verdict)
    assert "push yourself" in verdict.reason


@pytest.mark.parametrize("command, decision", BYPASSED_BEFORE + MORE)
def test_exec_wrappers_git_options_and_unseen_programs_never_run_a_denied_command(tmp_path, command, decision):
    verdict = decide(yolo_policy(tmp_path), command)
    assert verdict.decision is decision, (command, verdict)
    if decision is DENY:
        assert "push yourself" in verdict.reason
    else:  # the question says why the policy cannot see it, and which rule it is about
        assert "git push" in verdict.reason and "cannot" in verdict.reason


@pytest.mark.parametrize("command", CONTROLS)
def test_wrapped_commands_a_deny_rule_does_not_cover_still_run_under_yolo(tmp_path, command):
    assert decide(yolo_policy(tmp_path), command).decision is ALLOW, command


def test_a_deny_rule_for_rm_follows_wrappers_but_not_other_programs_subcommands(tmp_path):
    p = yolo_policy(tmp_path, '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "rm"\n'
                              'decision = "deny"\npriority = 1\n')
    for command in ("sudo rm -rf /", "find . -name '*.o' -exec rm {} +", "echo x | xargs rm", "nohup rm x"):
        assert decide(p, command).decision is DENY, command
    assert decide(p, "strace -f rm x").decision is ASK
    for command in ("docker rm c1", "npm rm left-pad", "git rm --cached x", "cargo rm serde"):
        assert decide(p, command).decision is ALLOW, command


def test_an_ask_user_rule_sees_through_wrappers_too(tmp_path):
    p = yolo_policy(tmp_path, DENY_PUSH.replace('"deny"', '"ask_user"'))
    for command in ("env git push", "git -C . push", "echo push | xargs git", "echo git push | sh"):
        assert decide(p, command).decision is ASK, command
    assert decide(p, "env git status").decision is ALLOW


def test_a_command_regex_deny_rule_sees_through_wrappers_and_git_options(tmp_path):
    p = yolo_policy(tmp_path, '[[rule]]\ntoolName = "run_shell_command"\ncommandRegex = "git +push"\n'
                              'decision = "deny"\npriority = 1\n')
    for command in ("env git push", "nice -n 5 git push", "git -C . push", "find . -exec git push \\;"):
        assert decide(p, command).decision is DENY, command
    assert decide(p, "env git status").decision is ALLOW


def test_allow_rules_do_not_reach_through_wrappers(tmp_path):
    """A wrapper changes what its command does (``sudo`` its user, ``env``
    its PATH, ``flock`` creates a file), so an allow rule for ``git status``
    does not allow it wrapped: the wrapper is asked about, as before."""
    p = Policy().with_rules(allowed_tools_rules(["run_shell_command(git status)"]))
    assert decide(p, "git status", "default").decision is ALLOW
    for command in ("env git status", "env PATH=/tmp git status", "sudo git status", "git -C /etc status",
                    "flock /etc/x git status", "echo status | xargs git"):
        assert decide(p, command, "default").decision is ASK, command


def test_an_allowed_wrapper_does_not_allow_what_it_runs_past_a_deny_rule(tmp_path):
    p = yolo_policy(tmp_path, DENY_PUSH + '[[rule]]\ntoolName = "run_shell_command"\n'
                                          'commandPrefix = ["env", "xargs", "sh", "find"]\ndecision = "allow"\n'
                                          'priority = 300\n')
    assert decide(p, "env git status", "default").decision is ALLOW
    assert decide(p, "env git push", "default").decision is DENY
    assert decide(p, "echo push | xargs git", "default").decision is ASK
    assert decide(p, "sh <<< 'git push'", "default").decision is ASK
    assert decide(p, "sh -c 'git push'", "default").decision is DENY
    assert decide(p, "find . -exec foo \\; -exec git {} \\;", "default").decision is ASK
    assert decide(p, "env FOO=1 $cmd", "default").decision is ASK


def test_unseen_programs_run_under_yolo_when_no_rule_could_object(tmp_path):
    p = Policy()
    for command in ("echo git push | sh", "echo push | xargs git", "python3 - <<< 'print(1)'"):
        assert decide(p, command).decision is ALLOW, command
        assert decide(p, command, "default").decision is ASK, command


@pytest.mark.timeout(60)
def test_a_long_wrapper_chain_is_decided_quickly(tmp_path):
    import time

    p = yolo_policy(tmp_path)
    start = time.monotonic()
    for command in ("env " * 20_000 + "git push", "nice " * 5_000 + "true", "xargs " * 5_000,
                    "find . " + "-exec true \\; " * 5_000 + "-exec git push \\;"):
        verdict = decide(p, command)
        assert verdict.decision is not ALLOW
        assert len(verdict.reason) < 2_000  # the question quotes a shortened command
    assert time.monotonic() - start < 10


_EXEC_LAYERS = ["env", "env -i", "env FOO=1", "/usr/bin/env -u X --", "command", "command -p", "exec", "exec -a x",
                "nice", "nice -n 5", "nohup", "timeout 5", "timeout -k 1 -s TERM 2s", "setsid -f", "stdbuf -oL",
                "ionice -c 3", "taskset 1", "flock /tmp/l", "sudo -u bob", "doas", "chroot /", "runuser -u bob --",
                "/usr/bin/time -p", "busybox"]
_STRING_LAYERS = ["bash -c {}", "sh -ec {}", "zsh -c {}", "eval {}", "script -qc {} /dev/null", "flock /tmp/l -c {}",
                  "su -c {} bob", "find . -exec sh -c {} \\;"]
_GIT_OPTIONS = ["", "-C .", "-c a.b=c", "--no-pager", "--git-dir=.git", "-P", "--work-tree .", "--namespace x"]


@st.composite
def _wrapped(draw, subcommand: str) -> str:
    command = f"git {draw(st.sampled_from(_GIT_OPTIONS))} {subcommand}"
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            command = f"{draw(st.sampled_from(_EXEC_LAYERS))} {command}"
        else:
            command = draw(st.sampled_from(_STRING_LAYERS)).format(shlex.quote(command))
    return command


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_stack_of_wrappers_around_a_denied_command_is_denied_and_around_another_runs(deny_push, data):
    p = deny_push
    pushed = data.draw(_wrapped("push origin main"))
    assert decide(p, pushed).decision is DENY, pushed
    status = data.draw(_wrapped("status"))
    assert decide(p, status).decision is ALLOW, status


_TOKENS = ["git", "push", "status", "env", "-i", "-u", "X=1", "nice", "-n", "5", "timeout", "sudo", "-s", "flock",
           "-c", "-C", "--", "-", "xargs", "-I{}", "{}", "find", ".", "-exec", "\\;", "+", "sh", "bash", "-o",
           "python3", "-W", "/dev/stdin", "$x", '"$(git push)"', "'git push'", "script", "-q", "su", "watch", "-x",
           "alias", "p=git", "trap", "EXIT", "hash", "-p", "PS4=x", "GIT_EDITOR=vi", "compgen", "mapfile",
           "--exec=", "rebase", "bisect", "run", "submodule", "foreach", "-ccore.pager=x", "strace", "|", "&&",
           "<<<", "at", "busybox", "command", "exec", "-a", "--git-dir", "taskset", "ionice", "stdbuf", "-oL",
           "chroot", "/", "runuser", "env -S", "--sp=x", "--adj", "perl", "-e", "node", "--require", "fc", "read"]


@pytest.mark.timeout(120)
@settings(max_examples=400, deadline=None)
@given(tokens=st.lists(st.sampled_from(_TOKENS), max_size=14))
def test_any_jumble_of_wrappers_and_options_gets_a_verdict_and_never_raises(deny_push, tokens):
    command = " ".join(tokens)
    verdict = decide(deny_push, command)
    assert verdict.decision in (ALLOW, DENY, ASK)
    if tokens[:2] == ["git", "push"]:
        assert verdict.decision is not ALLOW  # denied, or asked where the rest cannot be parsed
