"""The script format of the fake Gemini server and of the ``scripted:``
model: a JSON list of turns, each consumed by one model call.

Shared by :mod:`gemini_split.server.model.scripted` (runtime: ``--model
scripted:FILE``) and :mod:`gemini_split.testing.fake_gemini` (tests); the
turn keys are documented there. Here so that runtime code never imports the
testing package. Standard library only.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any

STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_TURN_KEYS = frozenset(
    {
        "text",
        "chunks",
        "thought",
        "function_calls",
        "error",
        "raw",
        "finish_reason",
        "usage",
        "delay",
        "chunk_delay",
        "abort_after",
        "grounding",
        "system_contains",
    }
)
_CONTENT_KEYS = ("text", "thought", "function_calls", "error", "raw")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_turn(turn: Any, where: str = "turn") -> dict:
    """Check one script turn; return it (unchanged) or raise ``ValueError``."""
    if not isinstance(turn, dict):
        raise ValueError(f"{where}: a turn must be a JSON object, got {turn!r}")
    unknown = set(turn) - _TURN_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_TURN_KEYS)}"
        )
    for key in ("text", "thought", "finish_reason", "system_contains"):
        if key in turn and not isinstance(turn[key], str):
            raise ValueError(f"{where}: {key!r} must be a string")
    if "chunks" in turn and (
        not isinstance(turn["chunks"], int)
        or isinstance(turn["chunks"], bool)
        or turn["chunks"] < 1
    ):
        raise ValueError(f"{where}: 'chunks' must be an integer >= 1")
    for key in ("delay", "chunk_delay"):
        if key in turn and (not _is_number(turn[key]) or turn[key] < 0):
            raise ValueError(f"{where}: {key!r} must be a number >= 0")
    if "abort_after" in turn and (
        not isinstance(turn["abort_after"], int)
        or isinstance(turn["abort_after"], bool)
        or turn["abort_after"] < 0
    ):
        raise ValueError(f"{where}: 'abort_after' must be an integer >= 0")
    if "usage" in turn:
        usage = turn["usage"]
        if not isinstance(usage, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in usage.values()
        ):
            raise ValueError(f"{where}: 'usage' must map names to integers")
    if "function_calls" in turn:
        calls = turn["function_calls"]
        if not isinstance(calls, list) or not calls:
            raise ValueError(f"{where}: 'function_calls' must be a non-empty list")
        for i, call in enumerate(calls):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ValueError(f"{where}: function_calls[{i}] needs a string 'name'")
            extra = set(call) - {"name", "args", "id"}
            if extra:
                raise ValueError(f"{where}: function_calls[{i}] unknown key(s) {sorted(extra)}")
            if "args" in call and not isinstance(call["args"], dict):
                raise ValueError(f"{where}: function_calls[{i}].args must be an object")
    if "grounding" in turn:
        _validate_grounding(turn, where)
    if "error" in turn:
        _error_status(turn["error"], where)
        others = [k for k in _CONTENT_KEYS if k != "error" and k in turn]
        if others:
            raise ValueError(f"{where}: 'error' cannot be combined with {others}")
    if "raw" in turn:
        raw = turn["raw"]
        if not isinstance(raw, list) or not raw or not all(isinstance(c, dict) for c in raw):
            raise ValueError(f"{where}: 'raw' must be a non-empty list of objects")
        others = [k for k in _CONTENT_KEYS if k != "raw" and k in turn]
        if others:
            raise ValueError(f"{where}: 'raw' cannot be combined with {others}")
    return turn


def turn_matches(turn: dict, system: str) -> bool:
    """Whether a request whose system instruction is ``system`` may take
    ``turn`` (its ``system_contains``, if any, is in it)."""
    wanted = turn.get("system_contains")
    return wanted is None or wanted in (system or "")


def _validate_grounding(turn: dict, where: str) -> None:
    """``"grounding": {"sources": [{"title", "uri"}], "supports": [{"end_index",
    "sources": [i, ...]}], "queries": [str]}`` — Google Search results of a
    grounded answer (``text`` required)."""
    grounding = turn["grounding"]
    if "text" not in turn:
        raise ValueError(f"{where}: 'grounding' needs a 'text' answer")
    if not isinstance(grounding, dict) or set(grounding) - {"sources", "supports", "queries"}:
        raise ValueError(f"{where}: 'grounding' is an object with 'sources', 'supports', 'queries'")
    sources = grounding.get("sources", [])
    if not isinstance(sources, list) or not all(
        isinstance(s, dict) and set(s) <= {"title", "uri"} and all(isinstance(v, str) for v in s.values())
        for s in sources
    ):
        raise ValueError(f"{where}: grounding.sources must be a list of {{'title', 'uri'}} strings")
    supports = grounding.get("supports", [])
    for i, support in enumerate(supports if isinstance(supports, list) else [None]):
        if (not isinstance(support, dict) or set(support) != {"end_index", "sources"}
                or not isinstance(support["end_index"], int) or support["end_index"] < 0
                or not isinstance(support["sources"], list)
                or not all(isinstance(j, int) and 0 <= j < len(sources) for j in support["sources"])):
            raise ValueError(
                f"{where}: grounding.supports[{i}] must be {{'end_index': int >= 0, 'sources': [source indexes]}}"
            )
    queries = grounding.get("queries", [])
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ValueError(f"{where}: grounding.queries must be a list of strings")


def grounding_metadata(turn: dict) -> dict | None:
    """The ``groundingMetadata`` (wire form, camelCase) of a turn's
    ``grounding``, or None. Segment offsets are UTF-8 byte offsets, as
    Google sends them."""
    grounding = turn.get("grounding")
    if grounding is None:
        return None
    text = turn.get("text", "").encode("utf-8")
    meta: dict[str, Any] = {
        "groundingChunks": [{"web": dict(s)} for s in grounding.get("sources", [])],
        "groundingSupports": [
            {
                "segment": {"startIndex": 0, "endIndex": s["end_index"],
                            "text": text[:s["end_index"]].decode("utf-8", "replace")},
                "groundingChunkIndices": list(s["sources"]),
            }
            for s in grounding.get("supports", [])
        ],
    }
    if grounding.get("queries"):
        meta["webSearchQueries"] = list(grounding["queries"])
    return meta


def _error_status(error: Any, where: str = "turn") -> tuple[int, str]:
    """Return (HTTP code, Google status name) of a scripted error."""
    if not isinstance(error, dict):
        raise ValueError(f"{where}: 'error' must be an object")
    code = error.get("code")
    status = error.get("status")
    http = code if isinstance(code, int) and not isinstance(code, bool) else status
    if not isinstance(http, int) or isinstance(http, bool) or not 400 <= http <= 599:
        raise ValueError(f"{where}: 'error' needs an HTTP status 400..599 in 'status' (or 'code')")
    name = status if isinstance(status, str) else STATUS_NAMES.get(http, "UNKNOWN")
    return http, name


def load_script(source: Any) -> list[dict]:
    """Load and validate a script.

    ``source`` is a list of turns, a dict ``{"turns": [...]}``, or a path
    (str / os.PathLike; ``"-"`` reads stdin) to a JSON file holding either.
    """
    if isinstance(source, (str, os.PathLike)):
        if os.fspath(source) == "-":
            data = json.load(sys.stdin)
        else:
            with open(source, encoding="utf-8") as f:
                data = json.load(f)
    else:
        data = source
    if isinstance(data, dict) and "turns" in data:
        data = data["turns"]
    if not isinstance(data, (list, tuple)):
        raise ValueError("a script is a JSON list of turns (or {\"turns\": [...]})")
    return [copy.deepcopy(validate_turn(t, f"turn {i}")) for i, t in enumerate(data)]
