"""The SDK editor process that tests/faces/acp/helpers.run_editor keeps for this
test process is stopped when the tests are done."""

from __future__ import annotations

import pytest

from .helpers import EDITOR


@pytest.fixture(scope="session", autouse=True)
def _close_the_sdk_editor():
    yield
    EDITOR.close()
