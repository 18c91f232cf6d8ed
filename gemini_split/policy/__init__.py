"""One policy engine for every tool call, in gemini-cli's policy format.

::

    policy = load_policy(config_dir=env.config_dir, cwd=env.cwd, trusted=True,
                         policy_paths=["team.toml"], allowed_tools=["run_shell_command(git)"])
    verdict = policy.decide("run_shell_command", {"command": "git push"}, "yolo", kind="execute")
    verdict.decision   # Decision.ALLOW, DENY or ASK_USER
    verdict.reason     # why, when it is not ALLOW (names the rule and its file)

- :mod:`.rules`: :class:`Rule`, :class:`Decision`, :class:`Verdict`, the tiers;
- :mod:`.builtin`: the approval modes as rules, ``--allowed-tools`` entries;
- :mod:`.engine`: :class:`Policy` — matching, shell commands part by part;
- :mod:`.files`: finding and checking the TOML files (:func:`load_policy`).

Imports neither trio nor google-genai: the client and the server both use it.
"""

from .builtin import allowed_tools_rules, always_rules, default_rules, excluded_tools_rules, parse_allowed_tools
from .engine import Policy
from .toml_files import PolicyError, load_policy, read_policy_file, split_paths
from .rules import (
    ADMIN_TIER,
    DEFAULT_TIER,
    MODES,
    USER_TIER,
    WORKSPACE_TIER,
    Decision,
    Rule,
    Verdict,
    normalize_mode,
)

__all__ = [
    "ADMIN_TIER", "DEFAULT_TIER", "MODES", "USER_TIER", "WORKSPACE_TIER",
    "Decision", "Policy", "PolicyError", "Rule", "Verdict",
    "allowed_tools_rules", "always_rules", "default_rules", "excluded_tools_rules", "load_policy",
    "normalize_mode", "parse_allowed_tools", "read_policy_file", "split_paths",
]
