"""``import gemini_split`` stays as light as the CLI's start-up needs: the
SDK's names are lent by the package, loaded on first use. (That ``-p``
never loads the SDK is checked with the rest of its path:
``lazy_imports.ONESHOT_NEVER``, tests/cli/daemon/test_oneshot_imports.py.)"""

from __future__ import annotations

import subprocess
import sys

from gemini_split.lazy_imports import SHELL_NEVER

LIST_MODULES = """
import sys
import gemini_split
before = sorted(sys.modules)
client = gemini_split.Client
print(" ".join(before))
print(client.__module__, "gemini_split.sdk" in sys.modules)
"""


def test_importing_the_package_loads_nothing_until_an_sdk_name_is_used():
    out = subprocess.run([sys.executable, "-c", LIST_MODULES], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.splitlines()
    ours = [m for m in before.split() if m.startswith("gemini_split")]
    heavy = [m for m in before.split() if any(m == h or m.startswith(h + ".") for h in SHELL_NEVER)]
    assert ours == ["gemini_split"] and heavy == []
    assert after == "gemini_split.sdk._async True"


def test_an_unknown_name_is_still_an_attribute_error():
    import gemini_split

    try:
        gemini_split.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("gemini_split.NoSuchThing should not exist")
    assert {"Client", "SyncClient", "tool"} <= set(dir(gemini_split))
