"""A second local account for tests that check what another user of the
machine can reach (issue 35): made with ``useradd`` once, reused after."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

NAME = "gs-other"


def other_user() -> pwd.struct_passwd:
    """The account ``gs-other`` (created now if missing); skips the test
    when this process is not root (only root can make one and run as it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create and run as a second local user")
    try:
        return pwd.getpwnam(NAME)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
                       check=True, capture_output=True, timeout=30)
        return pwd.getpwnam(NAME)


def run_as(user: pwd.struct_passwd, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``argv`` run as ``user`` (its uid and gid, no supplementary groups)."""
    kwargs.setdefault("timeout", 30)
    return subprocess.run(argv, user=user.pw_uid, group=user.pw_gid, extra_groups=[], capture_output=True,
                          text=True, cwd="/", **kwargs)
