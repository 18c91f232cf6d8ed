"""JSON text to Python values exactly as ``json.loads`` gives them, without
importing ``json`` for the text msgspec decodes (the thin ``-p`` path reads
every settings file and extension manifest: ``json`` costs ~1.5 ms there).

msgspec (loaded already by the protocol) decodes valid JSON to the same
dicts (the last of repeated keys wins), lists, strings, ints of any size,
floats, booleans and None. Whatever it refuses is handed to ``json.loads``:
invalid JSON, but also what ``json`` accepts and msgspec does not (``NaN``,
``Infinity``, numbers beyond a float's range, lone surrogates, nesting
beyond msgspec's limit). So every value and every error is ``json``'s own:
:func:`loads` raises ``json.JSONDecodeError`` (a ``ValueError``, with
``msg``, ``lineno`` and ``colno``) or ``RecursionError``, as ``json.loads``
does. ``tests/test_json_values.py`` holds both to that on a table of edge
cases.
"""

from typing import Any

import msgspec


def loads(text: str) -> Any:
    """The value of the JSON ``text``, as ``json.loads(text)`` returns it;
    its errors too (see the module's docstring)."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, ValueError, RecursionError):
        import json  # lazy_imports.EDGES: only for text msgspec refused

        return json.loads(text)


__all__ = ["loads"]
