"""Plan mode in the tool runtime, through the real executor and policy:
where plans go (gemini-cli's path rules, and nothing outside the plans
directory however a path is written), what plan mode may write, the
planning tools' answers in gemini-cli's words, and who hears a switch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gemini_split.policy import Policy, load_policy
from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy
from gemini_split.tools.base import ToolFailed
from gemini_split.tools.builtin.plan_mode import APPROVE_AUTO, APPROVE_MANUAL, PlanReview, plan_question
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.plans import PlanPlace, plan_write_rule, project_hash, read_plan, resolve_plan_path
from gemini_split.tools.registry import default_tools

from .conftest import Env

PLAN = "# Plan\n\n1. do it\n"


@pytest.fixture
def plans(tmp_path: Path) -> Path:
    return tmp_path / "home" / "tmp" / "p" / "s-1" / "plans"


def _executor(env: Env, plans: Path, mode: ApprovalMode = ApprovalMode.PLAN, *, asker=None, user=None,
              policy: Policy | None = None) -> ToolExecutor:
    executor = ToolExecutor(default_tools(), env.workspace, ApprovalPolicy(mode, policy=policy), asker)
    executor.plans = PlanPlace(fixed=plans)
    executor.user = user
    return executor


class Reviewer:
    """A front end answering the plan's approval with ``answer``."""

    def __init__(self, answer: str | None):
        self.answer = answer
        self.seen: list[PlanReview] = []

    async def approve_plan(self, call_id: str, review: PlanReview) -> str | None:
        self.seen.append(review)
        return self.answer


# --- the plans directory -----------------------------------------------------------------


def test_a_plan_path_resolves_as_gemini_clis(env: Env, plans: Path):
    plans.mkdir(parents=True)
    real = Path(os.path.realpath(plans))
    assert resolve_plan_path("x.md", plans, env.root) == real / "x.md"
    assert resolve_plan_path(str(plans / "y.md"), plans, env.root) == real / "y.md"
    for escape in ("../x.md", "/etc/passwd", str(env.outside / "x.md"), "sub/../../x.md"):
        with pytest.raises(ToolFailed) as refused:
            resolve_plan_path(escape, plans, env.root)
        assert str(refused.value) == (f"Access denied: plan path ({escape}) must be within the designated plans "
                                         f"directory ({plans}).")


def test_a_symlink_in_the_plans_directory_leads_nowhere(env: Env, plans: Path):
    plans.mkdir(parents=True)
    (plans / "evil.md").symlink_to(env.canary)
    with pytest.raises(ToolFailed):
        resolve_plan_path("evil.md", plans, env.root)


def test_the_plans_directory_is_the_sessions_under_the_projects_hash(tmp_path: Path):
    place = PlanPlace(temp=tmp_path / "tmp", project=Path("/work/app"))
    assert place.directory("s-1") == tmp_path / "tmp" / project_hash(Path("/work/app")) / "s-1" / "plans"
    assert PlanPlace(fixed=tmp_path / "mine").directory("s-1") == tmp_path / "mine"


def test_the_plan_rule_allows_exactly_the_md_files_of_its_directory(plans: Path):
    rule = plan_write_rule(plans)
    real = os.path.realpath(plans)
    assert rule.args_pattern.search(f'\x00"file_path":"{real}/feature-x.md"\x00')
    for other in (f"{real}/feature-x.txt", f"{real}/sub/x.md", f"{real}-other/x.md", "/x.md"):
        assert not rule.args_pattern.search(f'\x00"file_path":"{other}"\x00'), other


def test_a_missing_or_empty_plan_is_said_in_gemini_clis_words(plans: Path):
    plans.mkdir(parents=True)
    with pytest.raises(ToolFailed) as missing:
        read_plan(plans / "nope.md", "nope.md")
    assert str(missing.value) == ("Plan file does not exist: nope.md. You must create the plan file before "
                                     "requesting approval.")
    (plans / "empty.md").write_text(" \n")
    with pytest.raises(ToolFailed) as empty:
        read_plan(plans / "empty.md", "empty.md")
    assert str(empty.value) == ("Plan file is empty. You must write content to the plan file before requesting "
                                   "approval.")


# --- writing in plan mode ------------------------------------------------------------------


async def test_plan_mode_writes_a_bare_name_in_the_plans_directory_and_nothing_else(env: Env, plans: Path):
    executor = _executor(env, plans)
    wrote = await env.run("write_file", {"file_path": "feature-x.md", "content": PLAN}, executor=executor)
    assert wrote.failure is None, wrote.failure
    assert (plans / "feature-x.md").read_text() == PLAN and not (env.root / "feature-x.md").exists()
    assert oct(plans.stat().st_mode & 0o777) == "0o700"
    for path in ("src.py", "notes.txt", "../outside/x.md", str(env.outside / "x.md"), "sub/x.md"):
        refused = await env.run("write_file", {"file_path": path, "content": "x"}, executor=executor)
        assert refused.failure is not None and refused.failure.code in ("refused", "outside_workspace"), path
    assert env.canaries_intact()
    assert sorted(p.name for p in plans.iterdir()) == ["feature-x.md"]
    read = await env.run("read_file", {"file_path": str(plans / "feature-x.md")}, executor=executor)
    assert read.failure is None and "do it" in str(read.result)


async def test_a_users_deny_rule_outranks_plan_modes_writes(env: Env, plans: Path, tmp_path: Path):
    rules = tmp_path / "deny.toml"
    rules.write_text('[[rule]]\ntoolName = "write_file"\ndecision = "deny"\npriority = 10\n')
    executor = _executor(env, plans, policy=load_policy(config_dir=tmp_path / "config", policy_paths=[rules]))
    refused = await env.run("write_file", {"file_path": "x.md", "content": PLAN}, executor=executor)
    assert refused.failure is not None and refused.failure.code == "refused"
    assert not (plans / "x.md").exists()


def test_the_tools_offered_follow_the_mode(env: Env, plans: Path):
    executor = _executor(env, plans, ApprovalMode.DEFAULT, asker=object())
    names = [s.name for s in executor.offered()]
    assert "enter_plan_mode" in names and "exit_plan_mode" not in names and "run_shell_command" in names
    executor.policy.mode = ApprovalMode.PLAN
    specs = {s.name: s for s in executor.offered()}
    assert "exit_plan_mode" in specs and "enter_plan_mode" not in specs and "run_shell_command" not in specs
    assert specs["write_file"].description.startswith("ONLY FOR PLANS: ")
    assert f"plans directory: {plans}/" in specs["write_file"].description
    executor.policy.mode = ApprovalMode.YOLO
    names = [s.name for s in executor.offered()]
    assert "enter_plan_mode" not in names and "exit_plan_mode" not in names
    executor.plans = None
    executor.policy.mode = ApprovalMode.DEFAULT
    assert "enter_plan_mode" not in [s.name for s in executor.offered()]


# --- the planning tools ---------------------------------------------------------------------


async def test_exit_plan_mode_presents_the_plan_and_switches_to_the_mode_picked(env: Env, plans: Path):
    for answer, mode, words in ((APPROVE_AUTO, ApprovalMode.AUTO_EDIT, "Auto-Edit mode (edits will be applied "
                                                                       "automatically)"),
                                (APPROVE_MANUAL, ApprovalMode.DEFAULT, "Default mode (edits will require "
                                                                       "confirmation)")):
        reviewer = Reviewer(answer)
        executor = _executor(env, plans, user=reviewer)
        heard: list[ApprovalMode] = []
        executor.policy.listeners.append(heard.append)
        await env.run("write_file", {"file_path": "p.md", "content": PLAN}, executor=executor)
        out = await env.run("exit_plan_mode", {"plan_filename": "p.md"}, executor=executor)
        path = Path(os.path.realpath(plans)) / "p.md"
        assert out.result == (f"Plan approved. Switching to {words}.\n\nThe approved implementation plan is stored "
                              f"at: {path}\nRead and follow the plan strictly during implementation.")
        assert reviewer.seen == [PlanReview(path=str(path), content=PLAN)]
        assert executor.policy.mode is mode and heard == [mode]


async def test_feedback_a_rejection_and_a_dismissal_keep_plan_mode(env: Env, plans: Path):
    answers = {"use sqlite": "Plan rejected. User feedback: use sqlite",
               "": "Plan rejected. No feedback provided.",
               None: "User cancelled the plan approval dialog. The plan was not approved and you are still in "
                     "Plan Mode."}
    for answer, start in answers.items():
        executor = _executor(env, plans, user=Reviewer(answer))
        await env.run("write_file", {"file_path": "p.md", "content": PLAN}, executor=executor)
        out = await env.run("exit_plan_mode", {"plan_filename": "p.md"}, executor=executor)
        assert out.result.startswith(start)
        assert executor.policy.mode is ApprovalMode.PLAN


async def test_a_front_end_without_its_own_review_is_asked_gemini_clis_question(env: Env, plans: Path):
    class Questions:
        asked: list = []

        async def ask_user(self, call_id, questions):
            self.asked.append(questions)
            return {"0": APPROVE_MANUAL}

    user = Questions()
    executor = _executor(env, plans, user=user)
    await env.run("write_file", {"file_path": "p.md", "content": PLAN}, executor=executor)
    out = await env.run("exit_plan_mode", {"plan_filename": "p.md"}, executor=executor)
    assert out.result.startswith("Plan approved. Switching to Default mode")
    assert user.asked == [(plan_question(PLAN),)]
    question = plan_question(PLAN)
    assert question.header == "Approval" and question.placeholder == "Type your feedback..."
    assert [o.label for o in question.options] == [APPROVE_AUTO, APPROVE_MANUAL]


async def test_an_approval_beyond_what_is_allowed_switches_to_default_and_says_why(env: Env, plans: Path):
    executor = _executor(env, plans, user=Reviewer(APPROVE_AUTO))
    executor.policy.refuses = lambda mode: "not in an untrusted folder" if mode is not ApprovalMode.DEFAULT else None
    await env.run("write_file", {"file_path": "p.md", "content": PLAN}, executor=executor)
    out = await env.run("exit_plan_mode", {"plan_filename": "p.md"}, executor=executor)
    assert out.result.startswith("Plan approved. Switching to Default mode (edits will require confirmation). "
                                 "(auto_edit is not allowed here: not in an untrusted folder)")
    assert executor.policy.mode is ApprovalMode.DEFAULT


async def test_the_planning_tools_are_refused_where_they_do_not_apply(env: Env, plans: Path):
    planning = _executor(env, plans)
    again = await env.run("enter_plan_mode", {}, executor=planning)
    assert again.failure is not None and "You are already in Plan Mode." in again.failure.message
    default = _executor(env, plans, ApprovalMode.DEFAULT)
    exited = await env.run("exit_plan_mode", {"plan_filename": "p.md"}, executor=default)
    assert exited.failure is not None
    assert "You are not currently in Plan Mode. Use enter_plan_mode first to design a plan." in exited.failure.message
    entered = await env.run("enter_plan_mode", {"reason": "big"}, executor=default)  # nobody to ask: allowed
    assert entered.result == "Switching to Plan mode." and default.policy.mode is ApprovalMode.PLAN
