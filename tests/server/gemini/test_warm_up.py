"""A server builds google-genai's request state before its first request,
and then takes start-up's objects out of the garbage collector's way."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gemini_split import collector
from gemini_split.server.model.gemini import GeminiModel


@pytest.mark.timeout(30)
def test_warm_up_builds_the_request_state_without_any_io():
    # Nothing listens on port 9 here: any I/O would fail, and none happens.
    model = GeminiModel("test-key", base_url="http://127.0.0.1:9")
    model.warm_up("gemini-2.5-flash")
    assert len(model._tools_cache) == 1 and len(model._prepared_cache) == 1
    prepared = next(iter(model._prepared_cache.values()))
    assert prepared.path == "models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert prepared.config_body["tools"][0]["functionDeclarations"][0]["name"] == "warm_up"
    model.warm_up("../not a model")  # refused names are never built into a URL
    assert len(model._prepared_cache) == 1


@pytest.mark.timeout(60)
def test_settle_for_serving_freezes_start_up_and_raises_the_young_threshold():
    # In a process of its own: this one's collector is left alone.
    script = ("import gc, json; from gemini_split.collector import settle_for_serving; "
              "import gemini_split.server.model.gemini; settle_for_serving(); "
              "print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), gc.isenabled()]))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=50)
    threshold, frozen, enabled = __import__("json").loads(out.stdout)
    assert threshold == [collector.YOUNG_THRESHOLD, collector.MIDDLE_THRESHOLD, collector.OLD_THRESHOLD]
    assert collector.YOUNG_THRESHOLD > 700
    assert frozen > 50_000  # google-genai, pydantic, trio… all frozen
    assert enabled  # cyclic garbage is still collected
